// A spectral shallow-water solver on the rotating sphere, in vorticity-divergence form: the data
// generator of the built-in training set (swe_data.h). It follows torch-harmonics'
// examples/shallow_water_equations.py (ShallowWaterSolver): the state is spectral, the nonlinear
// terms are formed on the grid, and the transforms are gs::sphere's SHT and vector SHT. It is not
// differentiable code: everything runs in f64 (c128 coefficients) under an inference-mode guard.
//
// State: one tensor (3, lmax, mmax) c128 of spectral coefficients (scalar SHT convention, so isht
// gives the grid fields), [0] = geopotential Phi = g h (m^2 s^-2), [1] = relative vorticity zeta
// (s^-1), [2] = divergence delta (s^-1). With u = (u, v) the wind, f = 2 Omega sin(lat):
//   d zeta/dt  = -div((zeta + f) u)
//   d delta/dt =  curl((zeta + f) u) - lap(Phi + |u|^2 / 2)
//   d Phi/dt   = -div(Phi u)  [+ Q(lat, lon, t) - (Phi - mean Phi) / tau with SweForcing on]
// Time stepping: third-order Adams-Bashforth (started by forward Euler and AB2, or by RK3), with
// the hyperdiffusion folded in as an exact integrating factor (see SweTimeStepper::advance).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"
#include "ops/sphere/sht.h"

namespace gs::models {

// Scale-selective damping nu_l = (l(l+1) / (L(L+1)))^order / efold, L = lmax - 1 (a Laplacian
// to the power `order`, i.e. del^(2 order)), applied as the exact factor exp(-nu_l t).
// Defaults are torch-harmonics': order 4 and an e-folding time of 2 hours at the truncation degree.
struct Hyperdiffusion {
  bool enabled = true;
  int order = 4;
  double efold_hours = 2.0;
  // torch-harmonics damps only vorticity and divergence; damping Phi too keeps the three fields'
  // small scales consistent (geostrophic balance is preserved). l = 0 is never damped (mass).
  bool damp_geopotential = true;
};

// How the Adams-Bashforth history is started. euler_ab2 (torch-harmonics): forward Euler, then AB2;
// its first step's O(dt^2) error makes the scheme second-order overall, which is harmless after a
// spin-up. runge_kutta3: the first two steps by Kutta's third-order Runge-Kutta (3 tendencies
// each), so the whole run is third-order accurate.
enum class SweStartup { euler_ab2, runge_kutta3 };

// A prescribed, time-dependent mass source in the geopotential equation (off by default), with a
// Newtonian relaxation as its sink: a forced-dissipative shallow-water model, the toy climate of
// the forced training set (swe_data.h). With the source's centre latitude
// phi_c(t) = M sin(2 pi t / P) swinging like the sun over a "year" of P,
//   G(lat, lon, t) = exp(-((lat - phi_c(t)) / w)^2) (1 + mu cos(lon))
//   Q(lat, lon, t) = A (G(lat, lon, t) - <G>(t))      (m^2 s^-3, added to d Phi/dt)
// lat and lon in radians, lon east from 0 (grid column 0, where the wave-1 "continent" peaks), t the
// solver time in seconds (SweTimeStepper: its start time plus the steps taken), <G> the area mean
// of G under the grid's quadrature (the weights of the SHT). Subtracting <G> makes Q a pure
// redistribution of mass: the solver adds Q's spectral coefficients with the l = 0 one set to
// exactly 0, so the total mass is conserved to rounding, as without forcing. SweSolver::forcing
// gives the grid field Q; the solver adds its truncation to the solver's degrees (l < lmax).
// The relaxation adds -(Phi - mean Phi) / tau (every degree l >= 1, so mass again untouched):
// without it the swinging source's time mean (positive within +-M, negative poleward) would pile
// mass up without bound over a long run; with it the geopotential's response is bounded, about
// A tau / sqrt(1 + (2 pi tau / P)^2), lagging the source. Q is evaluated at the exact time of each
// tendency (tendency's time argument): AB3 at each step's time, RK3's stages at t, t + dt/2, t + dt.
struct SweForcing {
  // Off: the solver does exactly the unforced arithmetic (no term is added, not even a zero).
  bool enabled = false;
  double amplitude = 1.0e-2;     // A (m^2 s^-3): a depth change dh/dt = A / g, 88 m a day at 1e-2
  double period_days = 20.0;     // P: the "year", short so a short run sees the season move
  double max_lat_deg = 30.0;     // M in [0, 90]: the centre swings between -M and +M
  double width_deg = 20.0;       // w > 0: the e-folding half-width in latitude
  double wave1 = 0.5;            // mu in [0, 1]: zonal wavenumber-1 modulation (0: zonally uniform)
  double relaxation_days = 5.0;  // tau; 0: no relaxation. At least 4 time steps (explicit stepping)
};

struct SweSolverOptions {
  sphere::GridKind grid = sphere::GridKind::equiangular;
  int64_t nlat = 32, nlon = 64;
  // Default: lmax = mmax = ceil(nlat / 3), torch-harmonics' PdeDataset choice (2/3-rule
  // dealiasing of the quadratic terms on the equiangular grid). mmax defaults to min(lmax, nlon/2).
  std::optional<int64_t> lmax, mmax;
  // 0: the CFL-based default, SweSolver::stable_dt.
  double dt_seconds = 0.0;
  SweStartup startup = SweStartup::euler_ab2;
  // Earth (torch-harmonics' defaults).
  double radius = 6.37122e6;      // m
  double omega = 7.292e-5;        // s^-1
  double gravity = 9.80616;       // m s^-2
  double mean_depth = 1.0e4;      // m: the mean geopotential is gravity * mean_depth
  Hyperdiffusion hyperdiffusion;
  SweForcing forcing;
};

// Area integrals over the sphere (quadrature of the grid fields), per unit density.
struct SweDiagnostics {
  double mass = 0;               // integral of h = Phi / g (m^3)
  double energy = 0;             // integral of (h |u|^2 + g h^2) / 2 = (Phi |u|^2 + Phi^2) / (2 g)
  double kinetic_energy = 0;     // integral of h |u|^2 / 2
  // energy minus that of the fluid at rest with the same mass: kinetic plus available potential
  // energy, the part the dynamics exchanges (the total is dominated by g h_mean^2 / 2).
  double available_energy = 0;
  double potential_enstrophy = 0;  // integral of h q^2 / 2, q = (zeta + f) / h
};

// Random smooth initial state: a random vorticity field with a prescribed kinetic-energy spectrum,
// E(l) ~ l / (1 + (l / peak_degree)^(slope + 1)) (rising as l below the peak, falling as
// l^-slope above), isotropic random phases, zero divergence, and the geopotential from the
// nonlinear balance equation (d delta / dt = 0) around the mean depth.
struct RandomIcOptions {
  double rms_wind = 20.0;     // m/s: the expected area-RMS wind speed
  double peak_degree = 6.0;
  double slope = 3.0;
  // false: leave the geopotential flat (mean depth only), like torch-harmonics' random initial
  // condition, so the first hours are dominated by gravity-wave adjustment.
  bool balanced = true;
};

class SweSolver {
 public:
  explicit SweSolver(const SweSolverOptions& options = {});

  const SweSolverOptions& options() const { return opt_; }
  const sphere::ShtSpec& spec() const { return spec_; }
  double dt() const { return dt_; }

  // The largest time step the default picks for this truncation: the fastest linear frequency
  // (sqrt(g H) + reference_wind) sqrt(L(L+1)) / a times dt kept at 0.35, half AB3's stability
  // limit (0.72) on the imaginary axis, to leave room for the nonlinear terms.
  static double stable_dt(const SweSolverOptions& options, double reference_wind = 120.0);

  // ---- states
  // (3, lmax, mmax) c128 -> (3, nlat, nlon) f64 [Phi, zeta, delta].
  Tensor to_grid(const Tensor& state) const;
  // (3, nlat, nlon) f32/f64 -> (3, lmax, mmax) c128.
  Tensor from_grid(const Tensor& fields) const;
  // (3, lmax, mmax) -> the wind (2, nlat, nlon) f64, [0] = u eastward, [1] = v northward.
  Tensor winds(const Tensor& state) const;
  SweDiagnostics diagnostics(const Tensor& state) const;

  // ---- initial conditions
  // Galewsky et al. (2004): a zonal jet (u0 = 80 m/s between phi0 = pi/7 and pi/2 - phi0), the
  // height in gradient-wind balance with it (integrated numerically in latitude; its constant
  // makes the mean depth options().mean_depth, 10 km as in the paper), plus, when `perturbed`, the
  // bump h' = 120 m cos(phi) exp(-(lambda'/alpha)^2) exp(-((phi2 - phi)/beta)^2), alpha = 1/3,
  // beta = 1/15, phi2 = pi/4, centred at longitude 180 degrees (lambda' = lambda - pi, as
  // torch-harmonics, whose latitude factor exp(-(phi2 - phi)^2 / beta) departs from the paper's
  // used here). The vorticity is the spectral curl of the grid wind (divergence zero).
  Tensor galewsky_initial_condition(bool perturbed = true) const;
  // Reproducible: the state depends only on `key` (and the solver's options).
  Tensor random_initial_condition(RandomKey key, const RandomIcOptions& ic = {}) const;
  // The jet's analytic zonal wind (m/s) at latitude `lat` (radians).
  static double galewsky_wind(double lat);

  // ---- dynamics
  // d state / dt without hyperdiffusion, (3, lmax, mmax) c128, at solver time `time_seconds` (the
  // time the forcing is evaluated at; ignored without forcing).
  Tensor tendency(const Tensor& state, double time_seconds = 0.0) const;
  // `nsteps` steps from `state` at time `start_seconds`, starting the Adams-Bashforth history afresh.
  Tensor integrate(const Tensor& state, int64_t nsteps, double start_seconds = 0.0) const;
  // The forcing's grid field Q at solver time `time_seconds`, (nlat, nlon) f64 in m^2 s^-3 (the
  // formula at SweForcing); all zeros when the forcing is off.
  Tensor forcing(double time_seconds) const;

  // The grid's latitudes (radians, north to south), one per row.
  const std::vector<double>& latitudes() const { return lat_; }

 private:
  friend class SweTimeStepper;
  void check_state(const Tensor& state, const char* what) const;
  // The hyperdiffusion factor exp(-nu_l tau) of `field` (0 Phi, 1 zeta, 2 delta) at degree l over
  // tau = half_steps * dt / 2, half_steps in {0, 1, 2, 4, 6} (1 where nothing is damped).
  double damping(int field, int64_t l, int half_steps) const;
  // Adds the forcing's terms at time t to the tendency `out` of `state` (both contiguous).
  void add_forcing(const Tensor& state, double t, c128* out) const;

  SweSolverOptions opt_;
  sphere::ShtSpec spec_;
  double dt_ = 0;
  std::vector<double> lat_, coriolis_, weights_;  // per row; weights: quadrature, sum 2
  std::vector<double> cos_lon_;                   // per column: cos(2 pi k / nlon), the forcing's wave 1
  std::vector<double> factor_[7];  // [h]: exp(-nu_l h dt / 2) per degree l, for h = 1, 2, 4, 6
};

// Time stepping with a persistent Adams-Bashforth history, so a long run sampled every few steps
// is one continuous AB3 integration (SweSolverOptions::startup only for its first two steps).
// Holds a reference to the solver, which must outlive it.
// `start_seconds` is the solver time of `state`, which only the forcing sees (its phase in the
// "year"); time_seconds() is start_seconds + steps_taken() * dt, computed afresh (not accumulated),
// so the same step count always gives the same time.
class SweTimeStepper {
 public:
  SweTimeStepper(const SweSolver& solver, const Tensor& state, double start_seconds = 0.0);
  void advance(int64_t nsteps);
  // state() is replaced by a new tensor at each step: a handle taken earlier keeps its values.
  const Tensor& state() const { return state_; }
  int64_t steps_taken() const { return steps_; }
  double time_seconds() const { return start_ + static_cast<double>(steps_) * solver_.dt(); }

 private:
  const SweSolver& solver_;
  // sum_i coef_i E(half_steps_i) x_i, E the hyperdiffusion factor: every update is one of these.
  struct Term {
    double coef;
    int half_steps;
    const Tensor* x;
  };
  Tensor combine(std::initializer_list<Term> terms) const;
  void runge_kutta3_step();
  void adams_bashforth_step();

  Tensor state_;               // (3, lmax, mmax) c128
  Tensor history_[3];          // tendencies at the last three steps, newest first
  int64_t steps_ = 0;
  double start_ = 0;           // solver time of the initial state (s)
};

}  // namespace gs::models
