// The shallow-water solver: tendencies, time stepping and diagnostics, then the initial
// conditions (random, Galewsky), which share the solver's grid and transforms.
#include "models/data/swe_solver.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>

#include <omp.h>

#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/shape_ops.h"
#include "ops/sphere/vector_sht.h"
#include "ops/view.h"

namespace gs::models {
namespace {

constexpr double kPi = std::numbers::pi;

sphere::Truncation resolve_truncation(const SweSolverOptions& o) {
  GS_CHECK(o.nlat >= 2 && o.nlon >= 4, "SweSolver: expected a grid of at least 2 x 4 points, got nlat {} nlon {}",
           o.nlat, o.nlon);
  const int64_t lmax = o.lmax.value_or((o.nlat + 2) / 3);
  const int64_t mmax = o.mmax.value_or(std::min(lmax, o.nlon / 2));
  GS_CHECK(lmax >= 2, "SweSolver: expected lmax >= 2 (a flow needs degree 1 at least), got {}", lmax);
  GS_CHECK(mmax >= 1 && mmax <= lmax, "SweSolver: expected 1 <= mmax <= lmax = {}, got mmax {}", lmax, mmax);
  // A real vector field cannot carry independent stream function and velocity potential at the
  // Nyquist order (ops/sphere/NOTES.md, "Vector SHT"), so the winds would lose information there.
  GS_CHECK(mmax <= o.nlon / 2, "SweSolver: expected mmax <= nlon/2 = {} (the vector SHT is lossy at the Nyquist order), "
           "got mmax {}", o.nlon / 2, mmax);
  return {lmax, mmax};
}

// The transforms of a small grid (32x64: microseconds each) cost less than an OpenMP team's
// fork, join and spin-waits, which took 90% of the run time on a busy 2-core machine. So on small
// grids the solver runs its transforms on the calling thread (the data generator parallelises over
// trajectories instead). Restores the caller's thread count.
class SerialOnSmallGrids {
 public:
  explicit SerialOnSmallGrids(const SweSolverOptions& o) : prev_(omp_get_max_threads()) {
    if (o.nlat * o.nlon <= 128 * 256) omp_set_num_threads(1);
  }
  ~SerialOnSmallGrids() { omp_set_num_threads(prev_); }
  SerialOnSmallGrids(const SerialOnSmallGrids&) = delete;
  SerialOnSmallGrids& operator=(const SerialOnSmallGrids&) = delete;

 private:
  int prev_;
};

// A contiguous f64 / c128 tensor of the same values (the transforms' outputs already are).
Tensor dense(const Tensor& t) { return contiguous_copy(t); }

}  // namespace

double SweSolver::stable_dt(const SweSolverOptions& o, double reference_wind) {
  const sphere::Truncation tr = resolve_truncation(o);
  const double L = static_cast<double>(tr.lmax - 1);
  const double wave_speed = std::sqrt(o.gravity * o.mean_depth) + reference_wind;
  const double omega_max = wave_speed * std::sqrt(L * (L + 1)) / o.radius;
  return 0.35 / omega_max;
}

SweSolver::SweSolver(const SweSolverOptions& options) : opt_(options) {
  GS_CHECK(opt_.radius > 0 && opt_.gravity > 0 && opt_.mean_depth > 0,
           "SweSolver: expected positive radius, gravity and mean depth, got {}, {}, {}", opt_.radius, opt_.gravity,
           opt_.mean_depth);
  const sphere::Truncation tr = resolve_truncation(opt_);
  spec_ = sphere::make_sht_spec(opt_.grid, opt_.nlat, opt_.nlon, tr.lmax, tr.mmax, sphere::Normalization::ortho,
                                /*csphase=*/false);  // as torch-harmonics' solver
  GS_CHECK(std::isfinite(opt_.dt_seconds) && opt_.dt_seconds >= 0,
           "SweSolver: expected dt_seconds > 0 (or 0 for the CFL-based default), got {}", opt_.dt_seconds);
  dt_ = opt_.dt_seconds > 0 ? opt_.dt_seconds : stable_dt(opt_);

  const sphere::Quadrature q = sphere::make_quadrature(opt_.grid, opt_.nlat);
  for (int64_t j = 0; j < opt_.nlat; ++j) {
    const double lat = kPi / 2 - q.colatitude[static_cast<size_t>(j)];
    lat_.push_back(lat);
    coriolis_.push_back(2 * opt_.omega * std::sin(lat));
  }
  weights_ = q.weights;
  for (int64_t k = 0; k < opt_.nlon; ++k)
    cos_lon_.push_back(std::cos(2 * kPi * static_cast<double>(k) / static_cast<double>(opt_.nlon)));

  const SweForcing& fo = opt_.forcing;
  if (fo.enabled) {
    GS_CHECK(std::isfinite(fo.amplitude), "SweSolver: forcing.amplitude must be finite, got {}", fo.amplitude);
    GS_CHECK(std::isfinite(fo.period_days) && fo.period_days > 0,
             "SweSolver: expected forcing.period_days > 0, got {}", fo.period_days);
    GS_CHECK(fo.max_lat_deg >= 0 && fo.max_lat_deg <= 90,
             "SweSolver: expected 0 <= forcing.max_lat_deg <= 90, got {}", fo.max_lat_deg);
    GS_CHECK(std::isfinite(fo.width_deg) && fo.width_deg > 0, "SweSolver: expected forcing.width_deg > 0, got {}",
             fo.width_deg);
    GS_CHECK(fo.wave1 >= 0 && fo.wave1 <= 1, "SweSolver: expected 0 <= forcing.wave1 <= 1, got {}", fo.wave1);
    // The relaxation is an explicit term; AB3 is stable for a real decay rate up to 0.54 / dt, and
    // 4 steps keeps it well inside that with the dynamics on top.
    GS_CHECK(std::isfinite(fo.relaxation_days) &&
                 (fo.relaxation_days == 0 || (fo.relaxation_days > 0 && fo.relaxation_days * 86400.0 >= 4 * dt_)),
             "SweSolver: expected forcing.relaxation_days = 0 (none) or at least 4 time steps ({} s = {:.4g} days), "
             "got {}",
             4 * dt_, 4 * dt_ / 86400.0, fo.relaxation_days);
  }

  const Hyperdiffusion& hd = opt_.hyperdiffusion;
  if (hd.enabled) {
    GS_CHECK(hd.order >= 1 && hd.efold_hours > 0,
             "SweSolver: hyperdiffusion expects order >= 1 and efold_hours > 0, got order {} and {} h", hd.order,
             hd.efold_hours);
  }
  // nu_l (s^-1) per degree; all 0 without hyperdiffusion.
  std::vector<double> rate(static_cast<size_t>(spec_.lmax), 0.0);
  const double L = static_cast<double>(spec_.lmax - 1), lapmax = L * (L + 1);
  for (int64_t l = 1; hd.enabled && l < spec_.lmax; ++l)
    rate[static_cast<size_t>(l)] =
        std::pow(static_cast<double>(l * (l + 1)) / lapmax, hd.order) / (hd.efold_hours * 3600.0);
  for (int h : {1, 2, 4, 6})
    for (double r : rate) factor_[h].push_back(std::exp(-r * h * 0.5 * dt_));
}

double SweSolver::damping(int field, int64_t l, int half_steps) const {
  if (half_steps == 0 || (field == 0 && !opt_.hyperdiffusion.damp_geopotential)) return 1.0;
  return factor_[half_steps][static_cast<size_t>(l)];
}

void SweSolver::check_state(const Tensor& state, const char* what) const {
  GS_CHECK(state.defined(), "{}: the state is undefined", what);
  const Shape want{3, spec_.lmax, spec_.mmax};
  GS_CHECK(state.dtype() == DType::c128 && state.sizes() == want,
           "{}: expected a state of shape {} c128 ([geopotential, vorticity, divergence] coefficients), got {}", what,
           shape_str(want), state.meta_str());
}

Tensor SweSolver::to_grid(const Tensor& state) const {
  check_state(state, "SweSolver::to_grid");
  InferenceModeGuard guard;
  SerialOnSmallGrids serial(opt_);
  return dense(sphere::isht(state, spec_));
}

Tensor SweSolver::from_grid(const Tensor& fields) const {
  const Shape want{3, opt_.nlat, opt_.nlon};
  GS_CHECK(fields.defined() && fields.sizes() == want && is_floating(fields.dtype()),
           "SweSolver::from_grid: expected fields of shape {} (f32 or f64), got {}", shape_str(want),
           fields.meta_str());
  InferenceModeGuard guard;
  SerialOnSmallGrids serial(opt_);
  return dense(sphere::sht(cast_copy(fields, DType::f64), spec_));
}

Tensor SweSolver::winds(const Tensor& state) const {
  check_state(state, "SweSolver::winds");
  InferenceModeGuard guard;
  SerialOnSmallGrids serial(opt_);
  return dense(sphere::winds_from_vorticity_divergence(narrow(state, 0, 1, 2), spec_, opt_.radius));
}

Tensor SweSolver::forcing(double time_seconds) const {
  const int64_t H = opt_.nlat, W = opt_.nlon;
  Tensor q = zeros({H, W}, DType::f64);
  const SweForcing& fo = opt_.forcing;
  if (!fo.enabled) return q;
  GS_CHECK(std::isfinite(time_seconds), "SweSolver::forcing: expected a finite time, got {}", time_seconds);
  const double deg = kPi / 180;
  const double centre = fo.max_lat_deg * deg * std::sin(2 * kPi * time_seconds / (fo.period_days * 86400.0));
  const double width = fo.width_deg * deg;
  double* p = q.data<double>();
  double mean = 0;  // <G>: sum_j (w_j / 2) (1 / W) sum_k G_jk, the SHT's own quadrature (weights sum 2)
  for (int64_t j = 0; j < H; ++j) {
    const double x = (lat_[static_cast<size_t>(j)] - centre) / width;
    const double gj = std::exp(-x * x);
    double row = 0;
    for (int64_t k = 0; k < W; ++k) {
      const double g = gj * (1 + fo.wave1 * cos_lon_[static_cast<size_t>(k)]);
      p[j * W + k] = g;
      row += g;
    }
    mean += 0.5 * weights_[static_cast<size_t>(j)] * row / static_cast<double>(W);
  }
  for (int64_t i = 0; i < H * W; ++i) p[i] = fo.amplitude * (p[i] - mean);
  return q;
}

// d Phi/dt += Q - (Phi - mean Phi) / tau on degrees l >= 1. Q's l = 0 coefficient, zero up to
// rounding by construction, is dropped, so the forcing cannot change the total mass at all.
void SweSolver::add_forcing(const Tensor& state, double t, c128* out) const {
  const Tensor q = dense(sphere::sht(forcing(t), spec_));  // (L, M)
  const c128* qs = q.data<c128>();
  const c128* phi = state.data<c128>();  // field 0 comes first
  const int64_t M = spec_.mmax, n = spec_.lmax * M;
  const double tau = opt_.forcing.relaxation_days * 86400.0;
  for (int64_t i = M; i < n; ++i) out[i] += qs[i];  // i < M is degree 0 (only m = 0 is nonzero)
  if (tau > 0)
    for (int64_t i = M; i < n; ++i) out[i] -= phi[i] / tau;
}

Tensor SweSolver::tendency(const Tensor& state, double time_seconds) const {
  check_state(state, "SweSolver::tendency");
  InferenceModeGuard guard;
  SerialOnSmallGrids serial(opt_);
  const int64_t H = opt_.nlat, W = opt_.nlon, n = H * W, L = spec_.lmax, M = spec_.mmax;
  const Tensor grid = dense(sphere::isht(state, spec_));  // (3, H, W): Phi, zeta, delta
  const Tensor uv = winds(state);                         // (2, H, W)
  const double* g = grid.data<double>();
  const double* u = uv.data<double>();
  const double* v = u + n;

  // Fluxes (2, 2, H, W): [0] = (zeta + f) u, [1] = Phi u; and the Bernoulli function Phi + |u|^2/2.
  Tensor flux = empty({2, 2, H, W}, DType::f64);
  Tensor bernoulli = empty({H, W}, DType::f64);
  double* fx = flux.data<double>();
  double* b = bernoulli.data<double>();
  for (int64_t j = 0; j < H; ++j) {
    const double f = coriolis_[static_cast<size_t>(j)];
    for (int64_t k = j * W; k < (j + 1) * W; ++k) {
      const double phi = g[k], abs_vort = g[n + k] + f;
      fx[k] = abs_vort * u[k];
      fx[n + k] = abs_vort * v[k];
      fx[2 * n + k] = phi * u[k];
      fx[3 * n + k] = phi * v[k];
      b[k] = phi + 0.5 * (u[k] * u[k] + v[k] * v[k]);
    }
  }
  const Tensor curl_div = dense(sphere::vorticity_divergence(flux, spec_, opt_.radius));  // (2, 2, L, M)
  const Tensor bern = dense(sphere::sht(bernoulli, spec_));                              // (L, M)
  const c128* cd = curl_div.data<c128>();
  const c128* bs = bern.data<c128>();

  Tensor out = empty({3, L, M}, DType::c128);
  c128* o = out.data<c128>();
  const int64_t s = L * M;
  const double a2 = opt_.radius * opt_.radius;
  for (int64_t l = 0; l < L; ++l) {
    const double lap = -static_cast<double>(l * (l + 1)) / a2;
    for (int64_t i = l * M; i < (l + 1) * M; ++i) {
      o[i] = -cd[3 * s + i];                   // d Phi/dt   = -div(Phi u)
      o[s + i] = -cd[s + i];                   // d zeta/dt  = -div((zeta + f) u)
      o[2 * s + i] = cd[i] - lap * bs[i];      // d delta/dt = curl((zeta + f) u) - lap(B)
    }
  }
  // Without forcing nothing is added (not even zeros), so the unforced arithmetic is unchanged.
  if (opt_.forcing.enabled) add_forcing(dense(state), time_seconds, o);
  return out;
}

Tensor SweSolver::integrate(const Tensor& state, int64_t nsteps, double start_seconds) const {
  GS_CHECK(nsteps >= 0, "SweSolver::integrate: expected nsteps >= 0, got {}", nsteps);
  SweTimeStepper stepper(*this, state, start_seconds);
  stepper.advance(nsteps);
  return stepper.state();
}

SweDiagnostics SweSolver::diagnostics(const Tensor& state) const {
  const Tensor grid = to_grid(state);
  const Tensor uv = winds(state);
  const int64_t H = opt_.nlat, W = opt_.nlon, n = H * W;
  const double* g = grid.data<double>();
  const double* u = uv.data<double>();
  const double* v = u + n;
  const double grav = opt_.gravity, a2 = opt_.radius * opt_.radius;
  // Integral over the sphere: a^2 sum_j w_j (2 pi / nlon) sum_k (quadrature exact for band-limited
  // products up to the grid's degree).
  SweDiagnostics d;
  double area = 0;
  for (int64_t j = 0; j < H; ++j) {
    const double wj = weights_[static_cast<size_t>(j)] * (2 * kPi / static_cast<double>(W)) * a2;
    const double f = coriolis_[static_cast<size_t>(j)];
    double mass = 0, ke = 0, pe = 0, ens = 0;
    for (int64_t k = j * W; k < (j + 1) * W; ++k) {
      const double phi = g[k], speed2 = u[k] * u[k] + v[k] * v[k], abs_vort = g[n + k] + f;
      mass += phi;
      ke += phi * speed2;
      pe += phi * phi;
      ens += abs_vort * abs_vort / phi;
    }
    area += wj * static_cast<double>(W);
    d.mass += wj * mass / grav;
    d.kinetic_energy += wj * 0.5 * ke / grav;
    d.energy += wj * 0.5 * (ke + pe) / grav;
    d.potential_enstrophy += wj * 0.5 * grav * ens;
  }
  const double mean_depth = d.mass / area;
  d.available_energy = d.energy - 0.5 * grav * mean_depth * mean_depth * area;
  return d;
}

// ---- time stepping

SweTimeStepper::SweTimeStepper(const SweSolver& solver, const Tensor& state, double start_seconds)
    : solver_(solver), start_(start_seconds) {
  solver.check_state(state, "SweTimeStepper");
  GS_CHECK(std::isfinite(start_seconds), "SweTimeStepper: expected a finite start time, got {}", start_seconds);
  state_ = contiguous_copy(state, /*force_copy=*/true);
}

Tensor SweTimeStepper::combine(std::initializer_list<Term> terms) const {
  const int64_t L = solver_.spec().lmax, M = solver_.spec().mmax;
  Tensor out = zeros({3, L, M}, DType::c128);
  c128* o = out.data<c128>();
  for (const Term& term : terms) {
    const c128* x = term.x->data<c128>();
    for (int field = 0; field < 3; ++field)
      for (int64_t l = 0; l < L; ++l) {
        const double c = term.coef * solver_.damping(field, l, term.half_steps);
        const int64_t i0 = (field * L + l) * M;
        for (int64_t i = i0; i < i0 + M; ++i) o[i] += c * x[i];
      }
  }
  return out;
}

// The hyperdiffusion is an integrating factor: with E(tau) = exp(-nu_l tau) and N_n the tendency
// at step n, AB3 reads
//   u_{n+1} = E(dt) u_n + dt (23/12 E(dt) N_n - 16/12 E(2 dt) N_{n-1} + 5/12 E(3 dt) N_{n-2}),
// each term carried by the exact damping from the time it was evaluated. Unlike torch-harmonics'
// damping after each step (a first-order splitting), this keeps the scheme's order with the
// hyperdiffusion on. AB2 and forward Euler take the same form.
void SweTimeStepper::adams_bashforth_step() {
  const double dt = solver_.dt();
  const int64_t order = std::min<int64_t>(steps_ + 1, 3);
  if (order == 1) {
    state_ = combine({{1.0, 2, &state_}, {dt, 2, &history_[0]}});
  } else if (order == 2) {
    state_ = combine({{1.0, 2, &state_}, {1.5 * dt, 2, &history_[0]}, {-0.5 * dt, 4, &history_[1]}});
  } else {
    state_ = combine({{1.0, 2, &state_},
                      {23.0 / 12 * dt, 2, &history_[0]},
                      {-16.0 / 12 * dt, 4, &history_[1]},
                      {5.0 / 12 * dt, 6, &history_[2]}});
  }
}

// Kutta's third-order Runge-Kutta in integrating-factor form (the stages of w = E(-t) u, mapped
// back without ever forming E's inverse), from u0 at time t with k1 = N(u0, t) = history_[0]:
//   u_a = E(dt/2) (u0 + dt/2 k1),            k2 = N(u_a, t + dt/2)
//   u_b = E(dt) (u0 - dt k1) + 2 dt E(dt/2) k2,  k3 = N(u_b, t + dt)
//   u1  = E(dt) u0 + dt/6 (E(dt) k1 + 4 E(dt/2) k2 + k3)
// Each stage's tendency at its own time keeps third order with a time-dependent forcing.
void SweTimeStepper::runge_kutta3_step() {
  const double dt = solver_.dt(), t = time_seconds();
  const Tensor& k1 = history_[0];
  const Tensor ua = combine({{1.0, 1, &state_}, {0.5 * dt, 1, &k1}});
  const Tensor k2 = solver_.tendency(ua, t + 0.5 * dt);
  const Tensor ub = combine({{1.0, 2, &state_}, {-dt, 2, &k1}, {2 * dt, 1, &k2}});
  const Tensor k3 = solver_.tendency(ub, t + dt);
  state_ = combine({{1.0, 2, &state_}, {dt / 6, 2, &k1}, {4 * dt / 6, 1, &k2}, {dt / 6, 0, &k3}});
}

void SweTimeStepper::advance(int64_t nsteps) {
  GS_CHECK(nsteps >= 0, "SweTimeStepper::advance: expected nsteps >= 0, got {}", nsteps);
  for (int64_t it = 0; it < nsteps; ++it) {
    history_[2] = history_[1];
    history_[1] = history_[0];
    history_[0] = solver_.tendency(state_, time_seconds());  // N_n at t_n: AB's history is per step time
    if (solver_.options().startup == SweStartup::runge_kutta3 && steps_ < 2) runge_kutta3_step();
    else adams_bashforth_step();
    ++steps_;
  }
  // A blown-up run must not turn silently into training data.
  const c128* u = state_.data<c128>();
  for (int64_t i = 0; i < state_.numel(); ++i)
    GS_CHECK(std::isfinite(u[i].real()) && std::isfinite(u[i].imag()),
             "SweTimeStepper: the state became non-finite by step {} (t = {} h) with dt = {} s; the time step is "
             "probably above the stability limit (SweSolver::stable_dt gives {} s here)",
             steps_, static_cast<double>(steps_) * solver_.dt() / 3600.0, solver_.dt(),
             SweSolver::stable_dt(solver_.options()));
}

// ---- initial conditions

double SweSolver::galewsky_wind(double lat) {
  const double phi0 = kPi / 7, phi1 = kPi / 2 - phi0, u0 = 80.0;
  if (lat <= phi0 || lat >= phi1) return 0.0;
  const double en = std::exp(-4.0 / ((phi1 - phi0) * (phi1 - phi0)));  // makes the maximum u0
  return u0 / en * std::exp(1.0 / ((lat - phi0) * (lat - phi1)));
}

namespace {

// The integral from phi0 to `lat` of a u (f + u tan(phi) / a) dphi, the right side of the
// gradient-wind balance g dh/dphi = -a u (f + u tan(phi) / a). The integrand is smooth with all
// derivatives zero at the jet's edges, so composite Gauss-Legendre converges fast: 64 panels of 12
// points over the jet reach rounding (checked against 256 panels).
double galewsky_balance_integral(double lat, double radius, double omega) {
  const double phi0 = kPi / 7, phi1 = kPi / 2 - phi0;
  const double hi = std::clamp(lat, phi0, phi1);
  if (hi <= phi0) return 0.0;
  static const sphere::Quadrature gl = sphere::make_quadrature(sphere::GridKind::legendre_gauss, 12);
  const int panels = 1 + static_cast<int>(std::ceil(64.0 * (hi - phi0) / (phi1 - phi0)));
  const double width = (hi - phi0) / panels;
  double sum = 0;
  for (int p = 0; p < panels; ++p) {
    const double mid = phi0 + (p + 0.5) * width;
    for (size_t q = 0; q < gl.weights.size(); ++q) {
      const double phi = mid + 0.5 * width * gl.cos_theta[q];
      const double u = SweSolver::galewsky_wind(phi);
      sum += 0.5 * width * gl.weights[q] * (radius * u * 2 * omega * std::sin(phi) + u * u * std::tan(phi));
    }
  }
  return sum;
}

}  // namespace

Tensor SweSolver::galewsky_initial_condition(bool perturbed) const {
  InferenceModeGuard guard;
  SerialOnSmallGrids serial(opt_);
  const int64_t H = opt_.nlat, W = opt_.nlon;
  const double grav = opt_.gravity;
  // Balanced height h(phi) = h0 - G(phi) / g, h0 such that the area mean is the mean depth.
  std::vector<double> G(static_cast<size_t>(H));
  double mean_G = 0;
  for (int64_t j = 0; j < H; ++j) {
    G[static_cast<size_t>(j)] = galewsky_balance_integral(lat_[static_cast<size_t>(j)], opt_.radius, opt_.omega);
    mean_G += 0.5 * weights_[static_cast<size_t>(j)] * G[static_cast<size_t>(j)];  // weights sum to 2
  }
  const double h0 = opt_.mean_depth + mean_G / grav;

  Tensor uv = zeros({2, H, W}, DType::f64);
  Tensor phi = empty({H, W}, DType::f64);
  double* u = uv.data<double>();
  double* p = phi.data<double>();
  const double hhat = 120.0, alpha = 1.0 / 3.0, beta = 1.0 / 15.0, phi2 = kPi / 4;
  for (int64_t j = 0; j < H; ++j) {
    const double lat = lat_[static_cast<size_t>(j)];
    const double uj = galewsky_wind(lat), hj = h0 - G[static_cast<size_t>(j)] / grav;
    for (int64_t k = 0; k < W; ++k) {
      const double lon = 2 * kPi * static_cast<double>(k) / static_cast<double>(W) - kPi;  // in [-pi, pi)
      const double bump = perturbed ? hhat * std::cos(lat) * std::exp(-(lon / alpha) * (lon / alpha)) *
                                          std::exp(-((phi2 - lat) / beta) * ((phi2 - lat) / beta))
                                    : 0.0;
      u[j * W + k] = uj;
      p[j * W + k] = grav * (hj + bump);
    }
  }
  const Tensor vd = sphere::vorticity_divergence(uv, spec_, opt_.radius);  // (2, L, M)
  return dense(cat({unsqueeze(sphere::sht(phi, spec_), 0), vd}, 0));
}

Tensor SweSolver::random_initial_condition(RandomKey key, const RandomIcOptions& ic) const {
  GS_CHECK(ic.rms_wind >= 0 && ic.peak_degree > 0 && std::isfinite(ic.slope),
           "SweSolver::random_initial_condition: expected rms_wind >= 0, peak_degree > 0 and a finite slope, got "
           "{}, {}, {}", ic.rms_wind, ic.peak_degree, ic.slope);
  InferenceModeGuard guard;
  SerialOnSmallGrids serial(opt_);
  const int64_t L = spec_.lmax, M = spec_.mmax;
  const double a = opt_.radius;
  // Coefficient (l, m) takes random number l(l+1)/2 + m, whatever the truncation: the same key gives
  // the same large scales on every grid. randn's complex parts have variance 1/2 each, E|z|^2 = 1;
  // m = 0 takes sqrt(2) Re z (a real coefficient of variance 1), so the field is isotropic.
  const Tensor z = randn({L * (L + 1) / 2}, key, DType::c128);
  const c128* zr = z.data<c128>();
  // Kinetic energy per degree E(l) = (a^2 / 4 pi) sum_m c_m |zeta_lm|^2 / (l(l+1)) in units of the
  // squared area-RMS wind; with E|zeta_lm|^2 = sigma_l^2 over n_l = 1 + 2 min(l, M - 1) orders,
  // sigma_l^2 = 4 pi l(l+1) E(l) / (a^2 n_l), then scaled to the requested RMS.
  std::vector<double> sigma(static_cast<size_t>(L), 0.0);
  double expected_ms = 0;
  for (int64_t l = 1; l < L; ++l) {
    const double x = static_cast<double>(l) / ic.peak_degree;
    const double shape = static_cast<double>(l) / (1.0 + std::pow(x, ic.slope + 1));
    const double n_l = static_cast<double>(1 + 2 * std::min(l, M - 1));
    sigma[static_cast<size_t>(l)] = std::sqrt(4 * kPi * static_cast<double>(l * (l + 1)) * shape / (a * a * n_l));
    expected_ms += shape;
  }
  const double scale = expected_ms > 0 ? ic.rms_wind / std::sqrt(expected_ms) : 0.0;

  Tensor state = zeros({3, L, M}, DType::c128);
  c128* s = state.data<c128>();
  const int64_t plane = L * M;
  for (int64_t l = 1; l < L; ++l)
    for (int64_t m = 0; m <= std::min(l, M - 1); ++m) {
      const c128 r = zr[l * (l + 1) / 2 + m];
      const c128 coef = m == 0 ? c128(std::numbers::sqrt2 * r.real(), 0.0) : r;
      s[plane + l * M + m] = scale * sigma[static_cast<size_t>(l)] * coef;
    }
  // Mean geopotential: the l = 0 coefficient of a constant c is sqrt(4 pi) c.
  s[0] = c128(std::sqrt(4 * kPi) * opt_.gravity * opt_.mean_depth, 0.0);
  if (!ic.balanced) return state;

  // Nonlinear balance, d delta/dt = 0 with delta = 0: lap(Phi + |u|^2/2) = curl((zeta + f) u).
  const int64_t H = opt_.nlat, W = opt_.nlon, n = H * W;
  const Tensor uv = winds(state);
  const Tensor vort = dense(sphere::isht(select(state, 0, 1), spec_));
  Tensor flux = empty({2, H, W}, DType::f64), ke = empty({H, W}, DType::f64);
  const double* u = uv.data<double>();
  const double* zeta = vort.data<double>();
  double* fx = flux.data<double>();
  double* k = ke.data<double>();
  for (int64_t j = 0; j < H; ++j)
    for (int64_t i = j * W; i < (j + 1) * W; ++i) {
      const double abs_vort = zeta[i] + coriolis_[static_cast<size_t>(j)];
      fx[i] = abs_vort * u[i];
      fx[n + i] = abs_vort * u[n + i];
      k[i] = 0.5 * (u[i] * u[i] + u[n + i] * u[n + i]);
    }
  const Tensor curl = select(sphere::vorticity_divergence(flux, spec_, a), 0, 0);
  const Tensor phi = dense(sphere::inverse_spectral_laplacian(curl, a) - sphere::sht(ke, spec_));
  const c128* ph = phi.data<c128>();
  for (int64_t i = 1; i < plane; ++i) s[i] = ph[i];  // l = 0 (i = 0) keeps the mean
  return state;
}

}  // namespace gs::models
