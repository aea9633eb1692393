// The shallow-water solver and data generator (models/data/swe_solver.h, swe_data.h): conservation
// over a simulated day, the Galewsky jet's balance and instability, the time stepper's order, the
// hyperdiffusion's e-folding, reproducible random initial conditions, and the generated data set.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "models/data/swe_data.h"
#include "models/data/swe_solver.h"
#include "ops/ops.h"
#include "tests/test_util.h"

namespace {

using gs::c128;
using gs::DType;
using gs::Tensor;
using gs::models::RandomIcOptions;
using gs::models::SweDataOptions;
using gs::models::SweSolver;
using gs::models::SweSolverOptions;
using gs::models::SweStartup;
using gs::sphere::GridKind;
using gs_test::contains;
using gs_test::error_of;

constexpr double kDay = 86400.0;

int64_t steps_for(const SweSolver& s, double seconds) { return std::llround(seconds / s.dt()); }

// Field `f` of a state (3, L, M) as coefficients.
std::vector<c128> field(const Tensor& state, int64_t f) {
  return gs::contiguous(gs::select(state, 0, f)).to_vector<c128>();
}

// ||a - b|| / ||b|| over the coefficients of field f.
double rel_diff(const Tensor& a, const Tensor& b, int64_t f) {
  const auto x = field(a, f), y = field(b, f);
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += std::norm(x[i] - y[i]);
    den += std::norm(y[i]);
  }
  return std::sqrt(num / den);
}

// The fraction of the vorticity's norm in orders m > 0 (0 for a zonal flow).
double nonzonal_fraction(const Tensor& state) {
  const auto z = field(state, 1);
  const int64_t M = state.size(2);
  double all = 0, nonzonal = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    all += std::norm(z[i]);
    if (static_cast<int64_t>(i) % M != 0) nonzonal += std::norm(z[i]);
  }
  return std::sqrt(nonzonal / all);
}

SweSolverOptions small(GridKind grid = GridKind::equiangular, bool hyperdiffusion = true) {
  SweSolverOptions o;  // 32 x 64, lmax = mmax = 11
  o.grid = grid;
  o.hyperdiffusion.enabled = hyperdiffusion;
  return o;
}

}  // namespace

TEST_CASE("swe: defaults follow torch-harmonics' solver and data set") {
  const SweSolver s;
  CHECK(s.spec().grid == GridKind::equiangular);
  CHECK(s.spec().lmax == 11);  // ceil(32 / 3)
  CHECK(s.spec().mmax == 11);
  CHECK_FALSE(s.spec().csphase);
  CHECK(s.options().radius == 6.37122e6);
  CHECK(s.options().gravity * s.options().mean_depth == doctest::Approx(9.80616e4));
  // CFL: (sqrt(g H) + 120 m/s) sqrt(L(L+1)) / a * dt = 0.35 with L = 10.
  const double expect = 0.35 * 6.37122e6 / ((std::sqrt(9.80616e4) + 120.0) * std::sqrt(110.0));
  CHECK(s.dt() == doctest::Approx(expect).epsilon(1e-12));

  // Grid and spectral forms of a state round-trip (the state is band-limited).
  const Tensor x = s.random_initial_condition({5, 5});
  CHECK(rel_diff(s.from_grid(s.to_grid(x)), x, 0) < 1e-14);
  CHECK(rel_diff(s.from_grid(gs::cast_copy(s.to_grid(x), DType::f32)), x, 1) < 1e-5);
}

TEST_CASE("swe: mass is conserved to rounding over a simulated day") {
  for (GridKind grid : {GridKind::equiangular, GridKind::legendre_gauss}) {
    CAPTURE(gs::sphere::grid_name(grid));
    const SweSolver s(small(grid));
    const Tensor x0 = s.random_initial_condition({7, 1});
    const Tensor x1 = s.integrate(x0, steps_for(s, kDay));
    const double m0 = s.diagnostics(x0).mass, m1 = s.diagnostics(x1).mass;
    CHECK(m0 == doctest::Approx(4 * std::numbers::pi * 6.37122e6 * 6.37122e6 * 1e4).epsilon(1e-12));
    CHECK(std::abs(m1 / m0 - 1) < 1e-13);  // measured 2e-16
  }
}

TEST_CASE("swe: energy over a simulated day, with and without hyperdiffusion") {
  // Without hyperdiffusion the only losses are truncation and time-stepping errors. Measured on
  // 32x64 (lmax 11): total energy 1.5e-6 relative, available (kinetic + available potential)
  // energy 4e-4 relative; bounds are 5x that.
  {
    const SweSolver s(small(GridKind::equiangular, false));
    const Tensor x0 = s.random_initial_condition({7, 2});
    const auto d0 = s.diagnostics(x0), d1 = s.diagnostics(s.integrate(x0, steps_for(s, kDay)));
    CHECK(std::abs(d1.energy / d0.energy - 1) < 1e-5);
    CHECK(std::abs(d1.available_energy / d0.available_energy - 1) < 2e-3);
    CHECK(std::abs(d1.potential_enstrophy / d0.potential_enstrophy - 1) < 1e-3);  // measured 1.5e-4
    CHECK(d0.available_energy > 0);
    CHECK(d0.kinetic_energy > 0);
  }
  // With torch-harmonics' hyperdiffusion (e-folding 2 h at the truncation degree) the energy only
  // falls. On this coarse grid the initial spectrum (peak at l = 6 of 10) loses 41% of its available
  // energy on the first day, then ~10% a day; the total energy, dominated by g h^2 / 2, falls by
  // 1.8e-3 (bound 3e-3).
  {
    const SweSolver s(small());
    const Tensor x0 = s.random_initial_condition({7, 2});
    const Tensor x1 = s.integrate(x0, steps_for(s, kDay));
    const Tensor x2 = s.integrate(x1, steps_for(s, kDay));
    const auto d0 = s.diagnostics(x0), d1 = s.diagnostics(x1), d2 = s.diagnostics(x2);
    CHECK(d1.energy < d0.energy);
    CHECK(d1.energy / d0.energy - 1 > -3e-3);
    CHECK(d1.available_energy < d0.available_energy);
    CHECK(d2.available_energy < d1.available_energy);
    CHECK(d2.available_energy / d1.available_energy > 0.85);
  }
}

TEST_CASE("swe: hyperdiffusion e-folds the truncation degree in efold_hours") {
  // A tiny vorticity field of the single degree L = lmax - 1 on a sphere at rest without rotation:
  // its nonlinear terms are ~1e-24 of it, so only the damping acts, exp(-t / efold) at l = L.
  SweSolverOptions o = small();
  o.omega = 0;
  o.hyperdiffusion.efold_hours = 3.0;
  o.dt_seconds = 600;
  const SweSolver s(o);
  const int64_t L = s.spec().lmax, M = s.spec().mmax;
  std::vector<c128> v(static_cast<size_t>(3 * L * M), c128(0, 0));
  v[0] = c128(std::sqrt(4 * std::numbers::pi) * 9.80616e4, 0);
  v[static_cast<size_t>(L * M + (L - 1) * M + 3)] = c128(1e-12, 2e-12);
  v[static_cast<size_t>(L * M + (L / 2) * M + 2)] = c128(1e-12, 0);
  const Tensor x0 = gs::from_vector(v, {3, L, M});
  const Tensor x1 = s.integrate(x0, 18);  // 3 hours
  const auto z = field(x1, 1);
  const c128 top = z[static_cast<size_t>((L - 1) * M + 3)];
  CHECK(std::abs(top - c128(1e-12, 2e-12) * std::exp(-1.0)) < 1e-9 * 1e-12);
  // Degree L/2 = 5 decays at (30/110)^4 of the rate.
  const double mid = z[static_cast<size_t>((L / 2) * M + 2)].real();
  CHECK(mid == doctest::Approx(1e-12 * std::exp(-std::pow(30.0 / 110.0, 4))).epsilon(1e-9));
}

TEST_CASE("swe: Galewsky jet winds, balance and instability") {
  // Gauss 64 x 128 with lmax 42: the jet (steep edges) needs about this many degrees.
  SweSolverOptions o;
  o.grid = GridKind::legendre_gauss;
  o.nlat = 64;
  o.nlon = 128;
  o.lmax = 42;
  o.hyperdiffusion.enabled = false;
  const SweSolver s(o);
  const Tensor x0 = s.galewsky_initial_condition(/*perturbed=*/false);

  SUBCASE("initial winds match the analytic profile, mean depth 10 km") {
    const auto uv = s.winds(x0).to_vector<double>();
    const int64_t H = 64, W = 128;
    double max_u_err = 0, max_v = 0, max_u = 0;
    for (int64_t j = 0; j < H; ++j)
      for (int64_t k = 0; k < W; ++k) {
        const double u = uv[static_cast<size_t>(j * W + k)], v = uv[static_cast<size_t>(H * W + j * W + k)];
        max_u_err = std::max(max_u_err, std::abs(u - SweSolver::galewsky_wind(s.latitudes()[static_cast<size_t>(j)])));
        max_v = std::max(max_v, std::abs(v));
        max_u = std::max(max_u, u);
      }
    CHECK(max_u_err < 0.5);  // measured 0.26 m/s of 80 (truncation at lmax 42)
    CHECK(max_u > 75.0);
    CHECK(max_v < 1e-12);
    CHECK(SweSolver::galewsky_wind(std::numbers::pi / 4) == doctest::Approx(80.0).epsilon(1e-14));
    CHECK(SweSolver::galewsky_wind(0.3) == 0.0);
    const double area = 4 * std::numbers::pi * 6.37122e6 * 6.37122e6;
    CHECK(s.diagnostics(x0).mass / area == doctest::Approx(1e4).epsilon(1e-12));
    // Gradient-wind balance lowers the height poleward of the jet by about 1.1 km (Galewsky et al.'s
    // Fig. 1): measured h = 9071 m at the northernmost row, 10158 m south of the jet.
    const auto g = s.to_grid(x0).to_vector<double>();
    CHECK(g[0] / 9.80616 == doctest::Approx(9071.2).epsilon(1e-3));
    CHECK(g[static_cast<size_t>((H - 1) * W)] / 9.80616 == doctest::Approx(10158.1).epsilon(1e-3));
  }

  SUBCASE("the unperturbed jet stays balanced and zonal for two days") {
    const Tensor x2 = s.integrate(x0, steps_for(s, 2 * kDay));
    CHECK(rel_diff(x2, x0, 1) < 1e-4);  // vorticity: measured 1.4e-5
    CHECK(rel_diff(x2, x0, 0) < 1e-4);  // geopotential: measured 5.6e-6
    CHECK(nonzonal_fraction(x2) < 1e-12);
  }

  SUBCASE("the perturbed jet develops non-zonal structure") {
    const Tensor p0 = s.galewsky_initial_condition(/*perturbed=*/true);
    CHECK(nonzonal_fraction(p0) < 1e-12);  // the bump is in the height only
    const Tensor p1 = s.integrate(p0, steps_for(s, kDay));
    const Tensor p2 = s.integrate(p1, steps_for(s, kDay));
    const Tensor p4 = s.integrate(p2, steps_for(s, 2 * kDay));
    const double n1 = nonzonal_fraction(p1), n2 = nonzonal_fraction(p2), n4 = nonzonal_fraction(p4);
    CHECK(n1 > 1e-3);     // measured 4.3e-3, 1.2e-2, 0.17: the barotropic instability grows
    CHECK(n2 > 2 * n1);
    CHECK(n4 > 0.08);
  }
}

TEST_CASE("swe: hyperdiffusion keeps the unperturbed jet zonal") {
  SweSolverOptions o;
  o.grid = GridKind::legendre_gauss;
  o.nlat = 48;
  o.nlon = 96;
  const SweSolver s(o);
  const Tensor x0 = s.galewsky_initial_condition(false);
  const Tensor x1 = s.integrate(x0, steps_for(s, kDay));
  CHECK(nonzonal_fraction(x1) < 1e-12);
  CHECK(rel_diff(x1, x0, 0) < 1e-2);  // the damped jet's height adjusts a little
}

TEST_CASE("swe: the time stepper is third-order with the Runge-Kutta start") {
  // Errors after 6 hours against a run with 1/1024 of the interval, on a random balanced state.
  // Measured orders: RK3 start 2.86, 2.95 (hyperdiffusion off) and 2.90, 2.96 (on); the Euler/AB2
  // start is second order (its first step's O(dt^2) error), tending to 2 as dt shrinks.
  const double T = 6 * 3600.0;
  for (bool hd : {false, true}) {
    CAPTURE(hd);
    SweSolverOptions o = small(GridKind::equiangular, hd);
    const Tensor x0 = SweSolver(o).random_initial_condition({3, 1});
    auto run = [&](double n, SweStartup startup) {
      SweSolverOptions p = o;
      p.dt_seconds = T / n;
      p.startup = startup;
      return SweSolver(p).integrate(x0, static_cast<int64_t>(n));
    };
    const Tensor ref = run(1024, SweStartup::runge_kutta3);
    const double e32 = rel_diff(run(32, SweStartup::runge_kutta3), ref, 1);
    const double e64 = rel_diff(run(64, SweStartup::runge_kutta3), ref, 1);
    const double e128 = rel_diff(run(128, SweStartup::runge_kutta3), ref, 1);
    CHECK(std::log2(e32 / e64) > 2.7);
    CHECK(std::log2(e64 / e128) > 2.7);
    const double a64 = rel_diff(run(64, SweStartup::euler_ab2), ref, 1);
    const double a128 = rel_diff(run(128, SweStartup::euler_ab2), ref, 1);
    CHECK(std::log2(a64 / a128) > 1.5);
    CHECK(a128 > 2 * e128);
  }
}

TEST_CASE("swe: random initial conditions are reproducible, balanced and scaled") {
  const SweSolver s(small());
  const Tensor a = s.random_initial_condition({11, 4});
  CHECK(a.to_vector<c128>() == s.random_initial_condition({11, 4}).to_vector<c128>());
  CHECK(rel_diff(s.random_initial_condition({11, 5}), a, 1) > 0.5);
  CHECK(rel_diff(s.random_initial_condition({12, 4}), a, 1) > 0.5);

  // The same key gives the same large scales on a finer grid (coefficient (l, m) draws number
  // l(l+1)/2 + m whatever the truncation; only the normalisation over the degrees present differs).
  SweSolverOptions fine = small(GridKind::legendre_gauss);
  fine.nlat = 48;
  fine.nlon = 96;
  const SweSolver sf(fine);
  const Tensor b = sf.random_initial_condition({11, 4});
  const auto za = field(a, 1), zb = field(b, 1);
  const int64_t Ma = a.size(2), Mb = b.size(2);
  const c128 ratio = zb[static_cast<size_t>(3 * Mb + 2)] / za[static_cast<size_t>(3 * Ma + 2)];
  CHECK(std::abs(ratio.imag()) < 1e-12);
  CHECK(std::abs(zb[static_cast<size_t>(7 * Mb + 5)] / za[static_cast<size_t>(7 * Ma + 5)] - ratio) < 1e-12);

  // Expected area-RMS wind rms_wind: the mean square over 16 draws within 15% of 20^2.
  double mean_square = 0;
  for (uint64_t k = 0; k < 16; ++k) {
    const auto d = s.diagnostics(s.random_initial_condition({k, 0}));
    mean_square += 2 * d.kinetic_energy / d.mass / 16;  // (h |u|^2) / h, h nearly uniform
  }
  CHECK(mean_square == doctest::Approx(400.0).epsilon(0.15));

  // Balanced: the divergence tendency vanishes (to rounding, against the flat start's).
  RandomIcOptions flat;
  flat.balanced = false;
  const auto dd = field(s.tendency(a), 2), du = field(s.tendency(s.random_initial_condition({11, 4}, flat)), 2);
  double nb = 0, nu = 0;
  for (size_t i = 0; i < dd.size(); ++i) {
    nb += std::norm(dd[i]);
    nu += std::norm(du[i]);
  }
  CHECK(std::sqrt(nb / nu) < 1e-10);  // measured 8e-14: the balance is the model's own, exactly
  CHECK(field(a, 2) == std::vector<c128>(dd.size(), c128(0, 0)));  // zero divergence
}

TEST_CASE("swe: generated data set") {
  SweDataOptions o;
  o.nlat = 16;
  o.nlon = 32;
  o.n_trajectories = 3;
  o.states_per_trajectory = 4;
  o.dt_hours = 6;
  o.spinup_hours = 12;
  const gs::models::TrajectoryData d = gs::models::generate_swe_data(o);
  d.validate();
  CHECK(d.variables == std::vector<std::string>{"geopotential", "vorticity", "divergence"});
  CHECK(d.units.size() == 3);
  CHECK(d.dt_hours == 6);
  REQUIRE(d.trajectories.size() == 3);
  CHECK(d.trajectories[0].sizes() == gs::Shape{4, 3, 16, 32});
  CHECK(d.trajectories[0].dtype() == DType::f32);
  // Trajectory 2 alone equals trajectory 2 of the set, and differs from trajectory 1.
  CHECK(gs::models::generate_swe_trajectory(o, 2).to_vector<float>() == d.trajectories[2].to_vector<float>());
  CHECK(d.trajectories[1].to_vector<float>() != d.trajectories[2].to_vector<float>());
  // The saved states are the solver's, spun up, dt_hours apart.
  const SweSolver s(gs::models::swe_solver_options(o));
  const int64_t per_state = gs::models::swe_steps_per_state(o);
  CHECK(static_cast<double>(per_state) * s.dt() == doctest::Approx(6 * 3600.0).epsilon(1e-14));
  CHECK(s.dt() <= SweSolver::stable_dt(s.options()));
  gs::models::SweTimeStepper stepper(s, s.random_initial_condition(gs::models::swe_trajectory_key(0, 1)));
  stepper.advance(gs::models::swe_spinup_steps(o) + 2 * per_state);
  const auto expect = gs::cast_copy(s.to_grid(stepper.state()), DType::f32).to_vector<float>();
  const auto got = gs::contiguous(gs::select(d.trajectories[1], 0, 2)).to_vector<float>();
  CHECK(got == expect);
}

TEST_CASE("swe: bad input is rejected with what was expected") {
  SweSolverOptions o = small();
  o.mmax = 33;
  CHECK(contains(error_of([&] { SweSolver{o}; }), "expected 1 <= mmax <= lmax = 11, got mmax 33"));
  o = small();
  o.nlon = 16;
  o.mmax = 9;
  o.lmax = 9;
  CHECK(contains(error_of([&] { SweSolver{o}; }), "expected mmax <= nlon/2 = 8"));
  o = small();
  o.dt_seconds = -1;
  CHECK(contains(error_of([&] { SweSolver{o}; }), "expected dt_seconds > 0 (or 0 for the CFL-based default), got -1"));
  const SweSolver s(small());
  CHECK(contains(error_of([&] { s.tendency(gs::zeros({3, 11, 10}, DType::c128)); }),
                 "expected a state of shape (3, 11, 11) c128"));
  CHECK(contains(error_of([&] { s.to_grid(gs::zeros({3, 11, 11}, DType::c64)); }), "got c64 (3, 11, 11)"));
  SweSolverOptions fast = small();
  fast.dt_seconds = 7200;  // 15x the stable step: blows up within days
  const SweSolver unstable(fast);
  CHECK(contains(error_of([&] { unstable.integrate(unstable.random_initial_condition({1, 1}), 100); }),
                 "the state became non-finite by step 100"));
  SweDataOptions d;
  d.solver_dt_seconds = 700;
  CHECK(contains(error_of([&] { gs::models::generate_swe_data(d); }), "must divide the interval between states"));
  d = SweDataOptions{};
  d.n_trajectories = 0;
  CHECK(contains(error_of([&] { gs::models::generate_swe_data(d); }), "expected n_trajectories >= 1, got 0"));
}
