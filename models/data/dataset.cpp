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
  TrajectoryInfo i{.variables = variables, .units = units, .grid = grid, .nlat = nlat, .nlon = nlon,
                   .dt_hours = dt_hours, .dtype = trajectories.front().dtype(), .states = {}};
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

Normalizer Normalizer::fit(const TrajectorySource& source, const StatsShare& share, const SumOverRanks& sum) {
  const TrajectoryInfo& info = source.info();
  const int64_t C = info.channels();
  GS_CHECK(share.parts >= 1 && share.part >= 0 && share.part < share.parts,
           "Normalizer::fit: expected 0 <= part < parts, got part {} of {}", share.part, share.parts);
  // Calls body(c, value) for every value of this share, state by state.
  auto for_each_value = [&](auto&& body) {
    int64_t index = 0;
    for (int64_t traj = 0; traj < info.trajectories(); ++traj)
      for (int64_t t = 0; t < info.states[static_cast<size_t>(traj)]; ++t, ++index) {
        if (index % share.parts != share.part) continue;
        const Tensor x = contiguous_copy(to(source.read(traj, t, 1, share.rows, share.cols), DType::f64));
        const double* p = x.data<double>();
        const int64_t per_channel = x.numel() / C;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < per_channel; ++i) body(c, p[c * per_channel + i]);
      }
  };
  // Every channel's exact sum, summed over the ranks (count in the last slot).
  auto reduce = [&](std::vector<ExactSum>& sums, int64_t& count) {
    std::vector<int64_t> packed;
    for (const auto& s : sums) {
      auto l = s.limbs();
      packed.insert(packed.end(), l.begin(), l.end());
    }
    packed.push_back(count);
    if (sum) sum(packed);
    count = packed.back();
    for (int64_t c = 0; c < C; ++c)
      sums[static_cast<size_t>(c)] = ExactSum::from_limbs(
          std::vector<int64_t>(packed.begin() + c * ExactSum::kLimbs, packed.begin() + (c + 1) * ExactSum::kLimbs));
  };
  // Two passes (mean, then squared deviations): no cancellation for fields such as the
  // geopotential, whose mean (1e5) dwarfs its spread.
  std::vector<ExactSum> total(static_cast<size_t>(C)), squares(static_cast<size_t>(C));
  int64_t count = 0;
  for_each_value([&](int64_t c, double x) {
    total[static_cast<size_t>(c)].add(x);
    if (c == 0) ++count;
  });
  reduce(total, count);
  GS_CHECK(count > 0, "Normalizer::fit: the data has no values");
  Normalizer n;
  for (int64_t c = 0; c < C; ++c) n.mean.push_back(total[static_cast<size_t>(c)].value() / static_cast<double>(count));
  for_each_value([&](int64_t c, double x) {
    const double d = x - n.mean[static_cast<size_t>(c)];
    squares[static_cast<size_t>(c)].add(d * d);
  });
  int64_t unused = 0;
  reduce(squares, unused);
  for (int64_t c = 0; c < C; ++c) {
    const double sd = std::sqrt(squares[static_cast<size_t>(c)].value() / static_cast<double>(count));  // ddof 0
    n.std.push_back(sd > 0 ? sd : 1.0);
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
