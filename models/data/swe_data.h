// The built-in training data: trajectories of the shallow-water solver (swe_solver.h) from random
// initial conditions, sampled every dt_hours on the training grid, as a TrajectoryData
// (dataset.h) with channels (geopotential, vorticity, divergence) in SI units.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>

#include "engine/dtype.h"
#include "engine/random.h"
#include "models/data/dataset.h"
#include "models/data/swe_solver.h"

namespace gs::models {

struct SweDataOptions {
  sphere::GridKind grid = sphere::GridKind::equiangular;
  int64_t nlat = 32, nlon = 64;
  // Solver truncation; default ceil(nlat / 3) for both (SweSolverOptions).
  std::optional<int64_t> lmax;
  int64_t n_trajectories = 8;
  int64_t states_per_trajectory = 40;
  double dt_hours = 6.0;  // between saved states
  // 0: the largest step that divides dt_hours and is at most SweSolver::stable_dt. Otherwise it
  // must divide dt_hours exactly.
  double solver_dt_seconds = 0.0;
  // Run from the random initial condition before the first saved state, so the saved flow has
  // adjusted (gravity waves, the hyperdiffusion's cut of the initial spectrum's tail). Rounded up
  // to whole solver steps.
  double spinup_hours = 24.0;
  Hyperdiffusion hyperdiffusion;
  RandomIcOptions initial;
  // Trajectory i starts from the random state keyed by swe_trajectory_key(seed, i): it is the same
  // whatever n_trajectories is, and can be regenerated alone (generate_swe_trajectory).
  uint64_t seed = 0;
  DType dtype = DType::f32;  // of the saved fields (the solver always runs in f64)
};

// The solver the generator runs: the data options' grid, truncation and hyperdiffusion, and the
// time step chosen as described at SweDataOptions::solver_dt_seconds.
SweSolverOptions swe_solver_options(const SweDataOptions& options);
// Solver steps between saved states and during the spin-up.
int64_t swe_steps_per_state(const SweDataOptions& options);
int64_t swe_spinup_steps(const SweDataOptions& options);

// The random key of trajectory i: stream 0x535745'00000000 + i ("SWE" in the high bits), so it does not
// collide with streams other code draws from the same seed.
RandomKey swe_trajectory_key(uint64_t seed, int64_t index);

// Trajectory `index` alone: (states_per_trajectory, 3, nlat, nlon) in options.dtype.
Tensor generate_swe_trajectory(const SweDataOptions& options, int64_t index);

// What generating a data set costs, known before it runs: the solver steps, the bytes of the saved
// fields, and the time, from two solver steps timed on this machine (a first one builds the tables)
// spread over the threads the generator uses.
struct SweWork {
  int64_t solver_steps = 0;  // over every trajectory, spin-up included
  int64_t output_bytes = 0;
  double seconds_per_step = 0;
  int threads = 1;
  double seconds() const;  // the estimate for the whole set
};
// The bytes of the saved fields alone (no solver is built); throws when they overflow.
int64_t swe_output_bytes(const SweDataOptions& options);
// Throws gs::Error when the counts overflow (a spin-up of 1e9 hours); never runs the whole set.
SweWork estimate_swe_work(const SweDataOptions& options);

// Called from the generator's threads (one at a time) as trajectories finish: (done, total).
using SweProgress = std::function<void(int64_t, int64_t)>;

// All n_trajectories trajectories (in parallel over trajectories with OpenMP), with variables
// {"geopotential", "vorticity", "divergence"} and units {"m2 s-2", "s-1", "s-1"}. Each equals
// generate_swe_trajectory(options, i) exactly.
TrajectoryData generate_swe_data(const SweDataOptions& options, const SweProgress& progress = {});

}  // namespace gs::models
