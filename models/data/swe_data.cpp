// The shallow-water training data generator (swe_data.h).
#include "models/data/swe_data.h"

#include <omp.h>

#include <array>
#include <chrono>
#include <cmath>
#include <exception>
#include <vector>

#include "engine/factory.h"

namespace gs::models {
namespace {

void check_options(const SweDataOptions& o) {
  GS_CHECK(o.n_trajectories >= 1, "SweDataOptions: expected n_trajectories >= 1, got {}", o.n_trajectories);
  GS_CHECK(o.states_per_trajectory >= 1, "SweDataOptions: expected states_per_trajectory >= 1, got {}",
           o.states_per_trajectory);
  GS_CHECK(std::isfinite(o.dt_hours) && o.dt_hours > 0, "SweDataOptions: expected dt_hours > 0, got {}", o.dt_hours);
  GS_CHECK(std::isfinite(o.spinup_hours) && o.spinup_hours >= 0, "SweDataOptions: expected spinup_hours >= 0, got {}",
           o.spinup_hours);
  GS_CHECK(std::isfinite(o.solver_dt_seconds) && o.solver_dt_seconds >= 0,
           "SweDataOptions: expected solver_dt_seconds >= 0 (0 picks one), got {}", o.solver_dt_seconds);
  GS_CHECK(is_floating(o.dtype), "SweDataOptions: expected dtype f32 or f64, got {}", o.dtype);
}

SweSolverOptions base_solver_options(const SweDataOptions& o) {
  SweSolverOptions s;
  s.grid = o.grid;
  s.nlat = o.nlat;
  s.nlon = o.nlon;
  s.lmax = o.lmax;
  s.hyperdiffusion = o.hyperdiffusion;
  s.forcing = o.forcing;
  return s;
}

}  // namespace

int64_t swe_steps_per_state(const SweDataOptions& o) {
  check_options(o);
  const double interval = o.dt_hours * 3600.0;
  if (o.solver_dt_seconds == 0) {
    const double dt_max = SweSolver::stable_dt(base_solver_options(o));
    return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(interval / dt_max - 1e-9)));
  }
  const auto n = static_cast<int64_t>(std::llround(interval / o.solver_dt_seconds));
  GS_CHECK(n >= 1 && std::abs(static_cast<double>(n) * o.solver_dt_seconds - interval) <= 1e-9 * interval,
           "SweDataOptions: solver_dt_seconds = {} must divide the interval between states, dt_hours = {} ({} s)",
           o.solver_dt_seconds, o.dt_hours, interval);
  return n;
}

SweSolverOptions swe_solver_options(const SweDataOptions& o) {
  SweSolverOptions s = base_solver_options(o);
  s.dt_seconds = o.dt_hours * 3600.0 / static_cast<double>(swe_steps_per_state(o));
  return s;
}

int64_t swe_spinup_steps(const SweDataOptions& o) {
  const double dt = swe_solver_options(o).dt_seconds;
  return static_cast<int64_t>(std::ceil(o.spinup_hours * 3600.0 / dt - 1e-9));
}

RandomKey swe_trajectory_key(uint64_t seed, int64_t index) {
  GS_CHECK(index >= 0, "swe_trajectory_key: expected a trajectory index >= 0, got {}", index);
  return {seed, (uint64_t{0x535745} << 32) + static_cast<uint64_t>(index)};
}

RandomKey swe_forcing_phase_key(uint64_t seed, int64_t index) {
  GS_CHECK(index >= 0, "swe_forcing_phase_key: expected a trajectory index >= 0, got {}", index);
  return {seed, (uint64_t{0x535746} << 32) + static_cast<uint64_t>(index)};
}

double swe_trajectory_start_seconds(const SweDataOptions& o, int64_t index) {
  const RandomKey key = swe_forcing_phase_key(o.seed, index);  // checks the index either way
  if (!o.forcing.enabled) return 0.0;
  const std::array<uint32_t, 4> w = philox4x32(key, 0);
  return uniform_f64(w[0], w[1]) * o.forcing.period_days * 86400.0;
}

std::vector<std::string> swe_variables(const SweDataOptions& o) {
  std::vector<std::string> v = {"geopotential", "vorticity", "divergence"};
  if (o.forcing.enabled) v.insert(v.end(), {"mass_source", "wind_speed"});
  return v;
}

std::vector<std::string> swe_units(const SweDataOptions& o) {
  std::vector<std::string> u = {"m2 s-2", "s-1", "s-1"};
  if (o.forcing.enabled) u.insert(u.end(), {"m2 s-3", "m s-1"});
  return u;
}

int64_t swe_channels(const SweDataOptions& o) { return o.forcing.enabled ? 5 : 3; }

namespace {

// Writes the run of trajectory `index` into `out` (T, C, nlat, nlon), C = swe_channels(o).
void run_trajectory(const SweSolver& solver, const SweDataOptions& o, int64_t index, int64_t steps_per_state,
                    int64_t spinup_steps, const Tensor& out) {
  SweTimeStepper stepper(solver, solver.random_initial_condition(swe_trajectory_key(o.seed, index), o.initial),
                         swe_trajectory_start_seconds(o, index));
  stepper.advance(spinup_steps);
  const int64_t plane = o.nlat * o.nlon, channels = out.size(1);
  // Copies `count` planes of f64 values into channels [channel, channel + count) of state t.
  auto store = [&](int64_t t, int64_t channel, int64_t count, const double* src) {
    dispatch_float(out.dtype(), "generate_swe_data", [&]<typename T>() {
      T* dst = out.data<T>() + (t * channels + channel) * plane;
      for (int64_t i = 0; i < count * plane; ++i) dst[i] = static_cast<T>(src[i]);
    });
  };
  for (int64_t t = 0; t < o.states_per_trajectory; ++t) {
    if (t > 0) stepper.advance(steps_per_state);
    const Tensor grid = solver.to_grid(stepper.state());  // (3, nlat, nlon) f64
    store(t, 0, 3, grid.data<double>());
    if (!o.forcing.enabled) continue;
    // The forcing at this state's time: the Q the solver adds at the tendency of this state.
    const Tensor q = solver.forcing(stepper.time_seconds());
    store(t, 3, 1, q.data<double>());
    const Tensor uv = solver.winds(stepper.state());  // (2, nlat, nlon) f64
    const double* u = uv.data<double>();
    const double* v = u + plane;
    std::vector<double> speed(static_cast<size_t>(plane));
    for (int64_t i = 0; i < plane; ++i) speed[static_cast<size_t>(i)] = std::sqrt(u[i] * u[i] + v[i] * v[i]);
    store(t, 4, 1, speed.data());
  }
}

}  // namespace

Tensor generate_swe_trajectory(const SweDataOptions& o, int64_t index) {
  GS_CHECK(index >= 0, "generate_swe_trajectory: expected index >= 0, got {}", index);
  const SweSolver solver(swe_solver_options(o));
  Tensor out = empty({o.states_per_trajectory, swe_channels(o), o.nlat, o.nlon}, o.dtype);
  run_trajectory(solver, o, index, swe_steps_per_state(o), swe_spinup_steps(o), out);
  return out;
}

double SweWork::seconds() const {
  return static_cast<double>(solver_steps) * seconds_per_step / static_cast<double>(std::max(threads, 1));
}

int64_t swe_output_bytes(const SweDataOptions& o) {
  check_options(o);
  int64_t fields = 0, bytes = 0;
  GS_CHECK(!__builtin_mul_overflow(o.n_trajectories, o.states_per_trajectory * swe_channels(o), &fields) &&
               !__builtin_mul_overflow(fields, o.nlat * o.nlon * static_cast<int64_t>(dtype_size(o.dtype)), &bytes),
           "SweDataOptions: {} trajectories of {} states of {} channels on {}x{} are too many bytes to count",
           o.n_trajectories, o.states_per_trajectory, swe_channels(o), o.nlat, o.nlon);
  return bytes;
}

SweWork estimate_swe_work(const SweDataOptions& o) {
  const int64_t per_state = swe_steps_per_state(o);
  // The spin-up step count in f64 first: 1e9 hours of 60-second steps does not fit an int64 cast.
  const double spinup_f = std::ceil(o.spinup_hours * 3600.0 / swe_solver_options(o).dt_seconds - 1e-9);
  GS_CHECK(spinup_f < 9e18, "SweDataOptions: spinup_hours = {} is {:.3g} solver steps; too many to run",
           o.spinup_hours, spinup_f);
  const int64_t spinup = swe_spinup_steps(o);
  SweWork w;
  w.output_bytes = swe_output_bytes(o);
  int64_t per_trajectory = 0;
  GS_CHECK(!__builtin_mul_overflow(per_state, o.states_per_trajectory - 1, &per_trajectory) &&
               !__builtin_add_overflow(per_trajectory, spinup, &per_trajectory) &&
               !__builtin_mul_overflow(per_trajectory, o.n_trajectories, &w.solver_steps),
           "SweDataOptions: the data set is too large to count ({} trajectories of {} states, {} solver steps per "
           "state, {} spin-up steps)",
           o.n_trajectories, o.states_per_trajectory, per_state, spinup);
  const SweSolver solver(swe_solver_options(o));
  // A step of trajectory 0 as the generator runs it (with the forcing's transform when it is on).
  SweTimeStepper stepper(solver, solver.random_initial_condition(swe_trajectory_key(o.seed, 0), o.initial),
                         swe_trajectory_start_seconds(o, 0));
  stepper.advance(1);  // builds the tables
  const auto t0 = std::chrono::steady_clock::now();
  stepper.advance(1);
  w.seconds_per_step = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  w.threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), o.n_trajectories));
  return w;
}

TrajectoryData generate_swe_data(const SweDataOptions& o, const SweProgress& progress) {
  const SweSolver solver(swe_solver_options(o));
  const int64_t steps = swe_steps_per_state(o), spinup = swe_spinup_steps(o);
  TrajectoryData data;
  data.variables = swe_variables(o);
  data.units = swe_units(o);
  data.grid = o.grid;
  data.nlat = o.nlat;
  data.nlon = o.nlon;
  data.dt_hours = o.dt_hours;
  for (int64_t i = 0; i < o.n_trajectories; ++i)
    data.trajectories.push_back(empty({o.states_per_trajectory, swe_channels(o), o.nlat, o.nlon}, o.dtype));
  // One tendency on this thread first, so the transforms' tables are built once, not by every
  // thread at the same time.
  (void)solver.tendency(solver.random_initial_condition(swe_trajectory_key(o.seed, 0), o.initial));

  // Trajectories are independent and each runs on one thread with batch 1, so the values do not
  // depend on the thread count or on n_trajectories. Errors are carried out of the parallel region.
  std::exception_ptr error;
  int64_t done = 0;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < o.n_trajectories; ++i) {
    try {
      run_trajectory(solver, o, i, steps, spinup, data.trajectories[static_cast<size_t>(i)]);
      if (progress) {
#pragma omp critical(gs_swe_data_progress)
        progress(++done, o.n_trajectories);
      }
    } catch (...) {
#pragma omp critical(gs_swe_data_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return data;
}

}  // namespace gs::models
