// The built-in training data: trajectories of the shallow-water solver (swe_solver.h) from random
// initial conditions, sampled every dt_hours on the training grid, as a TrajectoryData
// (dataset.h) with channels (geopotential, vorticity, divergence) in SI units; with the forcing on,
// also the forcing and a diagnostic channel (SweDataOptions::forcing), for an emulator with ACE's
// three variable roles.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

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
  // Off (the default): the three prognostic channels, exactly as before the forcing existed. On:
  // the solver runs with this forcing (spin-up included); trajectory i starts at its own time of
  // the "year" (swe_trajectory_start_seconds), so the set covers every phase of the season; and
  // every saved state gains two channels after the three prognostic ones:
  //   3 "mass_source" (m2 s-3): the forcing Q at that state's time (SweSolver::forcing), the
  //     forcing an emulator reads from the data at every step and never predicts;
  //   4 "wind_speed" (m s-1): |u| = sqrt(u^2 + v^2) of that state's wind (SweSolver::winds), a
  //     diagnostic: a nonlinear function of the state that an emulator predicts, never reads.
  SweForcing forcing;
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

// The random key of trajectory i's forcing phase: stream 0x535746'00000000 + i ("SWF"), apart from
// its initial state's (swe_trajectory_key) and anything else drawn from the seed.
RandomKey swe_forcing_phase_key(uint64_t seed, int64_t index);
// The solver time (s) at which trajectory i starts, before its spin-up: 0 without forcing; with it,
// u * period, u = uniform_f64(w[0], w[1]) of w = philox4x32(swe_forcing_phase_key(seed, i), 0):
// a function of (seed, i, period) only. Saved state n is at
// start + (swe_spinup_steps + n * swe_steps_per_state) * dt (SweTimeStepper::time_seconds).
double swe_trajectory_start_seconds(const SweDataOptions& options, int64_t index);

// The saved channels, in order: geopotential, vorticity, divergence (m2 s-2, s-1, s-1), then with
// the forcing on mass_source (m2 s-3) and wind_speed (m s-1).
std::vector<std::string> swe_variables(const SweDataOptions& options);
std::vector<std::string> swe_units(const SweDataOptions& options);
int64_t swe_channels(const SweDataOptions& options);  // 3, or 5 with the forcing on

// Trajectory `index` alone: (states_per_trajectory, swe_channels, nlat, nlon) in options.dtype.
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
// The bytes of the saved fields alone, every channel (no solver is built); throws when they overflow.
int64_t swe_output_bytes(const SweDataOptions& options);
// Throws gs::Error when the counts overflow (a spin-up of 1e9 hours); never runs the whole set.
SweWork estimate_swe_work(const SweDataOptions& options);

// Called from the generator's threads (one at a time) as trajectories finish: (done, total).
using SweProgress = std::function<void(int64_t, int64_t)>;

// All n_trajectories trajectories (in parallel over trajectories with OpenMP), with variables
// swe_variables(options) and units swe_units(options). Each equals generate_swe_trajectory(options,
// i) exactly. The channels are in role order (prognostic | forcing | diagnostic) but the data
// carries no roles: a configuration's `variables` assign them (select_variables).
TrajectoryData generate_swe_data(const SweDataOptions& options, const SweProgress& progress = {});

}  // namespace gs::models
