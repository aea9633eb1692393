// Trajectory data, grid coordinates, normalisation and training batches (dataset.h).
#include "models/data/dataset.h"

#include <cmath>
#include <numbers>

#include "engine/factory.h"
#include "models/data/exact_sum.h"
#include "ops/elementwise.h"
#include "ops/ops.h"

namespace gs::models {
namespace {


// (C,) values as a (C, 1, 1) tensor of x's dtype on x's device, to broadcast over (..., C, H, W).
Tensor per_channel(const std::vector<double>& values, const Tensor& x) {
  const auto c = static_cast<int64_t>(values.size());
  const Tensor t = cast_copy(from_vector(values, {c, 1, 1}), x.dtype());
  return x.device().is_cpu() ? t : to(t, x.device());
}

}  // namespace

void TrajectoryData::validate() const {
  const auto C = channels();
  GS_CHECK(C >= 1, "TrajectoryData: expected at least one variable name, got none");
  GS_CHECK(units.empty() || units.size() == variables.size(),
           "TrajectoryData: expected no units or one per variable ({}), got {}", variables.size(), units.size());
  GS_CHECK(levels.empty() || levels.size() == variables.size(),
           "TrajectoryData: expected no levels or one per variable ({}), got {}", variables.size(), levels.size());
  (void)layout_of(roles, C);  // one role per channel, in role order
  GS_CHECK(nlat >= 1 && nlon >= 1, "TrajectoryData: expected a grid of at least 1 x 1, got nlat {} nlon {}", nlat, nlon);
  GS_CHECK(std::isfinite(dt_hours) && dt_hours > 0, "TrajectoryData: expected dt_hours > 0, got {}", dt_hours);
  GS_CHECK(!trajectories.empty(), "TrajectoryData: expected at least one trajectory, got none");
  const DType dtype = trajectories.front().defined() ? trajectories.front().dtype() : DType::f32;
  for (size_t i = 0; i < trajectories.size(); ++i) {
    const Tensor& t = trajectories[i];
    GS_CHECK(t.defined() && t.dim() == 4,
             "TrajectoryData: trajectory {} must be 4-D (T, C, nlat, nlon) = (T, {}, {}, {}), got {}", i, C, nlat, nlon,
             t.meta_str());
    GS_CHECK(t.size(0) >= 1 && t.size(1) == C && t.size(2) == nlat && t.size(3) == nlon,
             "TrajectoryData: trajectory {} must have shape (T >= 1, {}, {}, {}) for {} variables on a {}x{} grid, got {}",
             i, C, nlat, nlon, C, nlat, nlon, shape_str(t.sizes()));
    GS_CHECK(is_floating(t.dtype()), "TrajectoryData: trajectory {} must be f32 or f64, got {}", i, t.dtype());
    GS_CHECK(t.dtype() == dtype, "TrajectoryData: every trajectory must have one dtype; trajectory 0 is {}, trajectory {} is {}",
             dtype, i, t.dtype());
    GS_CHECK(t.device().is_cpu(), "TrajectoryData: trajectory {} must be on the CPU, got {}", i, t.meta_str());
  }
}

TrajectoryInfo TrajectoryData::info() const {
  validate();
  TrajectoryInfo i{.variables = variables, .units = units, .roles = roles, .levels = levels, .grid = grid,
                   .nlat = nlat, .nlon = nlon, .dt_hours = dt_hours, .dtype = trajectories.front().dtype(), .states = {}};
  for (const Tensor& t : trajectories) i.states.push_back(t.size(0));
  return i;
}

namespace {

class MemorySource final : public TrajectorySource {
 public:
  explicit MemorySource(TrajectoryData d) : data_(std::move(d)), info_(data_.info()) {}
  const TrajectoryInfo& info() const override { return info_; }
  Tensor read(int64_t trajectory, int64_t first, int64_t n, Span rows, Span cols) const override {
    check_request(trajectory, first, n, rows, cols);
    const Tensor& t = data_.trajectories[static_cast<size_t>(trajectory)];
    return contiguous_copy(narrow(narrow(narrow(t, 0, first, n), 2, rows.start, rows.count), 3, cols.start, cols.count));
  }

 private:
  TrajectoryData data_;
  TrajectoryInfo info_;
};

}  // namespace

std::shared_ptr<TrajectorySource> memory_source(TrajectoryData data) {
  return std::make_shared<MemorySource>(std::move(data));
}

std::vector<double> latitudes_deg(sphere::GridKind grid, int64_t nlat) {
  const sphere::Quadrature q = sphere::make_quadrature(grid, nlat);
  std::vector<double> lat;
  lat.reserve(q.colatitude.size());
  for (double theta : q.colatitude) lat.push_back(90.0 - theta * (180.0 / std::numbers::pi));
  return lat;
}

std::vector<double> longitudes_deg(int64_t nlon) {
  GS_CHECK(nlon >= 1, "longitudes_deg: expected nlon >= 1, got {}", nlon);
  std::vector<double> lon;
  lon.reserve(static_cast<size_t>(nlon));
  for (int64_t k = 0; k < nlon; ++k) lon.push_back(360.0 * static_cast<double>(k) / static_cast<double>(nlon));
  return lon;
}

Normalizer Normalizer::fit(const TrajectoryData& data) { return fit(*memory_source(data)); }

namespace {

// Per-channel exact sums of values (or of consecutive differences), summed over the ranks that
// gather shares, with per-channel counts of the values that were not missing.
struct ChannelSums {
  std::vector<ExactSum> sums;
  std::vector<int64_t> counts, missing;
  explicit ChannelSums(int64_t C) : sums(static_cast<size_t>(C)), counts(static_cast<size_t>(C), 0), missing(static_cast<size_t>(C), 0) {}
  void add(int64_t c, double x) {
    if (std::isnan(x)) {
      ++missing[static_cast<size_t>(c)];
      return;
    }
    sums[static_cast<size_t>(c)].add(x);
    ++counts[static_cast<size_t>(c)];
  }
  void reduce(const SumOverRanks& sum) {
    if (!sum) return;
    std::vector<int64_t> packed;
    for (const auto& s : sums) {
      auto l = s.limbs();
      packed.insert(packed.end(), l.begin(), l.end());
    }
    packed.insert(packed.end(), counts.begin(), counts.end());
    packed.insert(packed.end(), missing.begin(), missing.end());
    sum(packed);
    const int64_t C = static_cast<int64_t>(sums.size());
    for (int64_t c = 0; c < C; ++c)
      sums[static_cast<size_t>(c)] = ExactSum::from_limbs(
          std::vector<int64_t>(packed.begin() + c * ExactSum::kLimbs, packed.begin() + (c + 1) * ExactSum::kLimbs));
    const auto counts_at = packed.begin() + C * ExactSum::kLimbs;
    std::copy(counts_at, counts_at + C, counts.begin());
    std::copy(counts_at + C, counts_at + 2 * C, missing.begin());
  }
  double mean(int64_t c) const {
    return sums[static_cast<size_t>(c)].value() / static_cast<double>(counts[static_cast<size_t>(c)]);
  }
};

// Calls body(c, value) for every value of this share: every state (pairs = false), or every
// difference x(t + 1) - x(t) within a trajectory (pairs = true, NaN where either is missing).
template <typename Body>
void for_each_value(const TrajectorySource& source, const StatsShare& share, bool pairs, Body&& body) {
  const TrajectoryInfo& info = source.info();
  const int64_t C = info.channels();
  int64_t index = 0;
  for (int64_t traj = 0; traj < info.trajectories(); ++traj)
    for (int64_t t = 0; t + (pairs ? 1 : 0) < info.states[static_cast<size_t>(traj)]; ++t, ++index) {
      if (index % share.parts != share.part) continue;
      const Tensor x = contiguous_copy(to(source.read(traj, t, pairs ? 2 : 1, share.rows, share.cols), DType::f64));
      const double* p = x.data<double>();
      const int64_t per_channel = x.numel() / (C * (pairs ? 2 : 1));
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < per_channel; ++i)
          body(c, pairs ? p[(C + c) * per_channel + i] - p[c * per_channel + i] : p[c * per_channel + i]);
    }
}

// Mean and standard deviation (ddof 0) per channel over the values of `pairs` (see above): two
// passes, mean then squared deviations, so no cancellation for fields such as the geopotential,
// whose mean (1e5) dwarfs its spread.
void mean_and_std(const TrajectorySource& source, const StatsShare& share, const SumOverRanks& sum, bool pairs,
                  std::vector<double>& mean, std::vector<double>& sd, std::vector<int64_t>* missing) {
  const TrajectoryInfo& info = source.info();
  const int64_t C = info.channels();
  ChannelSums total(C), squares(C);
  for_each_value(source, share, pairs, [&](int64_t c, double x) { total.add(c, x); });
  total.reduce(sum);
  mean.assign(static_cast<size_t>(C), 0.0);
  for (int64_t c = 0; c < C; ++c) {
    GS_CHECK(total.counts[static_cast<size_t>(c)] > 0,
             "Normalizer::fit: variable '{}' has no {} in the training data (every value is missing)",
             info.variables[static_cast<size_t>(c)], pairs ? "two consecutive valid states" : "valid value");
    mean[static_cast<size_t>(c)] = total.mean(c);
  }
  for_each_value(source, share, pairs, [&](int64_t c, double x) {
    const double d = x - mean[static_cast<size_t>(c)];
    squares.add(c, d * d);
  });
  squares.reduce(sum);
  sd.clear();
  for (int64_t c = 0; c < C; ++c) {
    const double v = std::sqrt(squares.sums[static_cast<size_t>(c)].value() /
                               static_cast<double>(total.counts[static_cast<size_t>(c)]));
    sd.push_back(v > 0 ? v : 1.0);
  }
  if (missing) *missing = total.missing;
}

}  // namespace

Normalizer Normalizer::fit(const TrajectorySource& source, const StatsShare& share, const SumOverRanks& sum,
                           bool residual) {
  GS_CHECK(share.parts >= 1 && share.part >= 0 && share.part < share.parts,
           "Normalizer::fit: expected 0 <= part < parts, got part {} of {}", share.part, share.parts);
  GS_CHECK(source.info().channels() >= 1, "Normalizer::fit: the data has no channels");
  Normalizer n;
  mean_and_std(source, share, sum, false, n.mean, n.std, &n.missing);
  if (residual) {
    bool any_pair = false;
    for (int64_t T : source.info().states) any_pair = any_pair || T >= 2;
    GS_CHECK(any_pair, "Normalizer::fit: residual scaling needs trajectories of at least two states");
    std::vector<double> unused;
    mean_and_std(source, share, sum, true, unused, n.residual_std, nullptr);
  }
  return n;
}

namespace {

void check_normalizer(const Normalizer& n, const char* what) {
  GS_CHECK(!n.mean.empty() && n.mean.size() == n.std.size(),
           "{}: the normalizer must have one mean and one std per channel, got {} means and {} stds", what,
           n.mean.size(), n.std.size());
  for (size_t c = 0; c < n.std.size(); ++c)
    GS_CHECK(std::isfinite(n.mean[c]) && std::isfinite(n.std[c]) && n.std[c] > 0,
             "{}: expected a finite mean and a positive std for every channel, channel {} has mean {} and std {}", what,
             c, n.mean[c], n.std[c]);
}

void check_normalizer_input(const Normalizer& n, const Tensor& x, const char* what) {
  check_normalizer(n, what);
  GS_CHECK(x.defined() && x.dim() >= 3 && is_floating(x.dtype()) && x.size(-3) == static_cast<int64_t>(n.mean.size()),
           "{}: expected a f32/f64 tensor (..., C, H, W) with C = {}, got {}", what, n.mean.size(), x.meta_str());
}

}  // namespace

Tensor Normalizer::normalize(const Tensor& x) const {
  check_normalizer_input(*this, x, "Normalizer::normalize");
  return (x - per_channel(mean, x)) / per_channel(std, x);
}

Tensor Normalizer::denormalize(const Tensor& x) const {
  check_normalizer_input(*this, x, "Normalizer::denormalize");
  return x * per_channel(std, x) + per_channel(mean, x);
}

std::vector<std::pair<int64_t, int64_t>> list_windows(const TrajectoryData& data, int64_t n_steps) {
  return list_windows(data.info(), n_steps);
}

std::vector<std::pair<int64_t, int64_t>> list_windows(const TrajectoryInfo& info, int64_t n_steps) {
  GS_CHECK(n_steps >= 1, "list_windows: expected n_steps >= 1 (states after the input), got {}", n_steps);
  std::vector<std::pair<int64_t, int64_t>> windows;
  for (size_t i = 0; i < info.states.size(); ++i) {
    const int64_t T = info.states[i];
    for (int64_t t = 0; t + n_steps < T; ++t) windows.emplace_back(static_cast<int64_t>(i), t);
  }
  return windows;
}

Batch make_batch(const TrajectoryData& data, const Normalizer& norm,
                 const std::vector<std::pair<int64_t, int64_t>>& windows, int64_t n_steps, DType dtype) {
  return make_batch(*memory_source(data), norm, windows, n_steps, dtype);
}

Batch make_batch(const TrajectorySource& source, const Normalizer& norm,
                 const std::vector<std::pair<int64_t, int64_t>>& windows, int64_t n_steps, DType dtype, Span rows,
                 Span cols) {
  const TrajectoryInfo& info = source.info();
  const int64_t C = info.channels();
  GS_CHECK(n_steps >= 1, "make_batch: expected n_steps >= 1, got {}", n_steps);
  GS_CHECK(!windows.empty(), "make_batch: expected at least one window, got none");
  GS_CHECK(is_floating(dtype), "make_batch: expected dtype f32 or f64, got {}", dtype);
  GS_CHECK(norm.mean.size() == static_cast<size_t>(C) && norm.std.size() == static_cast<size_t>(C),
           "make_batch: expected a normalizer with {} channels ({}), got {} means and {} stds", C,
           fmt::join(info.variables, ", "), norm.mean.size(), norm.std.size());
  check_normalizer(norm, "make_batch");
  for (const auto& [traj, start] : windows) {
    GS_CHECK(traj >= 0 && traj < info.trajectories(),
             "make_batch: window trajectory {} is out of range (the data has {} trajectories)", traj,
             info.trajectories());
    const int64_t T = info.states[static_cast<size_t>(traj)];
    GS_CHECK(start >= 0 && start + n_steps < T,
             "make_batch: window (trajectory {}, start {}) needs states {}..{}, but the trajectory has {} states", traj,
             start, start, start + n_steps, T);
  }
  const int64_t H = rows.count ? rows.count : info.nlat, W = cols.count ? cols.count : info.nlon, HW = H * W;
  const auto B = static_cast<int64_t>(windows.size());
  Tensor input = empty({B, C, H, W}, dtype);
  Tensor targets = empty({B, n_steps, C, H, W}, dtype);
  dispatch_float(dtype, "make_batch", [&]<typename Out>() {
    Out* in = input.data<Out>();
    Out* tg = targets.data<Out>();
    for (int64_t b = 0; b < B; ++b) {
      const auto [traj, start] = windows[static_cast<size_t>(b)];
      const Tensor t = contiguous_copy(source.read(traj, start, n_steps + 1, rows, cols));  // (n + 1, C, H, W)
      dispatch_float(t.dtype(), "make_batch", [&]<typename In>() {
        const In* src = t.data<In>();
        for (int64_t k = 0; k <= n_steps; ++k) {
          Out* dst = k == 0 ? in + b * C * HW : tg + ((b * n_steps + k - 1) * C) * HW;
          for (int64_t c = 0; c < C; ++c) {
            const In* x = src + (k * C + c) * HW;
            const double m = norm.mean[static_cast<size_t>(c)], inv = 1.0 / norm.std[static_cast<size_t>(c)];
            for (int64_t i = 0; i < HW; ++i) dst[c * HW + i] = static_cast<Out>((static_cast<double>(x[i]) - m) * inv);
          }
        }
      });
    }
  });
  return {input, targets};
}

}  // namespace gs::models
