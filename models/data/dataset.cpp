// Trajectory data, grid coordinates, normalisation and training batches (dataset.h).
#include "models/data/dataset.h"

#include <cmath>
#include <numbers>

#include "engine/factory.h"
#include "ops/elementwise.h"

namespace gs::models {
namespace {

// The trajectory as a contiguous tensor (a no-op for the usual contiguous data).
Tensor dense(const Tensor& t) { return contiguous_copy(t); }


// (C,) values as a (C, 1, 1) tensor of `dtype`, to broadcast over (..., C, H, W).
Tensor per_channel(const std::vector<double>& values, DType dtype) {
  const auto c = static_cast<int64_t>(values.size());
  return cast_copy(from_vector(values, {c, 1, 1}), dtype);
}

// Calls body(c, x) for each state's field of channel c, x pointing at its nlat * nlon values
// (summing per field first keeps the rounding of the totals small).
template <typename Body>
void for_each_block(const TrajectoryData& data, Body&& body) {
  const int64_t C = data.channels(), HW = data.nlat * data.nlon;
  for (const Tensor& traj : data.trajectories) {
    const Tensor t = dense(traj);
    dispatch_float(t.dtype(), "Normalizer::fit", [&]<typename T>() {
      const T* p = t.data<T>();
      for (int64_t s = 0; s < t.size(0); ++s)
        for (int64_t c = 0; c < C; ++c) body(c, p + (s * C + c) * HW);
    });
  }
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

Normalizer Normalizer::fit(const TrajectoryData& data) {
  data.validate();
  const int64_t C = data.channels(), HW = data.nlat * data.nlon;
  // Two passes in f64 (mean, then squared deviations): no cancellation for fields such as the
  // geopotential, whose mean (1e5) dwarfs its spread.
  std::vector<double> sum(static_cast<size_t>(C), 0.0), sq(static_cast<size_t>(C), 0.0);
  double count = 0;
  for (const Tensor& traj : data.trajectories) count += static_cast<double>(traj.size(0) * HW);
  for_each_block(data, [&](int64_t c, const auto* x) {
    double acc = 0;
    for (int64_t i = 0; i < HW; ++i) acc += static_cast<double>(x[i]);
    sum[static_cast<size_t>(c)] += acc;
  });
  Normalizer n;
  for (int64_t c = 0; c < C; ++c) n.mean.push_back(sum[static_cast<size_t>(c)] / count);
  for_each_block(data, [&](int64_t c, const auto* x) {
    const double m = n.mean[static_cast<size_t>(c)];
    double acc = 0;
    for (int64_t i = 0; i < HW; ++i) acc += (static_cast<double>(x[i]) - m) * (static_cast<double>(x[i]) - m);
    sq[static_cast<size_t>(c)] += acc;
  });
  for (int64_t c = 0; c < C; ++c) {
    const double sd = std::sqrt(sq[static_cast<size_t>(c)] / count);  // population std (ddof 0)
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
  return (x - per_channel(mean, x.dtype())) / per_channel(std, x.dtype());
}

Tensor Normalizer::denormalize(const Tensor& x) const {
  check_normalizer_input(*this, x, "Normalizer::denormalize");
  return x * per_channel(std, x.dtype()) + per_channel(mean, x.dtype());
}

std::vector<std::pair<int64_t, int64_t>> list_windows(const TrajectoryData& data, int64_t n_steps) {
  data.validate();
  GS_CHECK(n_steps >= 1, "list_windows: expected n_steps >= 1 (states after the input), got {}", n_steps);
  std::vector<std::pair<int64_t, int64_t>> windows;
  for (size_t i = 0; i < data.trajectories.size(); ++i) {
    const int64_t T = data.trajectories[i].size(0);
    for (int64_t t = 0; t + n_steps < T; ++t) windows.emplace_back(static_cast<int64_t>(i), t);
  }
  return windows;
}

Batch make_batch(const TrajectoryData& data, const Normalizer& norm,
                 const std::vector<std::pair<int64_t, int64_t>>& windows, int64_t n_steps, DType dtype) {
  data.validate();
  const int64_t C = data.channels(), H = data.nlat, W = data.nlon, HW = H * W;
  GS_CHECK(n_steps >= 1, "make_batch: expected n_steps >= 1, got {}", n_steps);
  GS_CHECK(!windows.empty(), "make_batch: expected at least one window, got none");
  GS_CHECK(is_floating(dtype), "make_batch: expected dtype f32 or f64, got {}", dtype);
  GS_CHECK(norm.mean.size() == static_cast<size_t>(C) && norm.std.size() == static_cast<size_t>(C),
           "make_batch: expected a normalizer with {} channels ({}), got {} means and {} stds", C,
           fmt::join(data.variables, ", "), norm.mean.size(), norm.std.size());
  check_normalizer(norm, "make_batch");
  const auto B = static_cast<int64_t>(windows.size());
  for (const auto& [traj, start] : windows) {
    GS_CHECK(traj >= 0 && traj < static_cast<int64_t>(data.trajectories.size()),
             "make_batch: window trajectory {} is out of range (the data has {} trajectories)", traj,
             data.trajectories.size());
    const int64_t T = data.trajectories[static_cast<size_t>(traj)].size(0);
    GS_CHECK(start >= 0 && start + n_steps < T,
             "make_batch: window (trajectory {}, start {}) needs states {}..{}, but the trajectory has {} states", traj,
             start, start, start + n_steps, T);
  }

  Tensor input = empty({B, C, H, W}, dtype);
  Tensor targets = empty({B, n_steps, C, H, W}, dtype);
  dispatch_float(dtype, "make_batch", [&]<typename Out>() {
    Out* in = input.data<Out>();
    Out* tg = targets.data<Out>();
    for (int64_t b = 0; b < B; ++b) {
      const auto [traj, start] = windows[static_cast<size_t>(b)];
      const Tensor t = dense(data.trajectories[static_cast<size_t>(traj)]);
      dispatch_float(t.dtype(), "make_batch", [&]<typename In>() {
        const In* src = t.data<In>();
        for (int64_t k = 0; k <= n_steps; ++k) {
          Out* dst = k == 0 ? in + b * C * HW : tg + ((b * n_steps + k - 1) * C) * HW;
          for (int64_t c = 0; c < C; ++c) {
            const In* x = src + ((start + k) * C + c) * HW;
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
