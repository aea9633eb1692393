// The spherical harmonic transforms (ops/sphere/sht.h) and their Legendre table cache
// (ops/sphere/legendre/table.h): round trips on every grid, closed-form harmonics, Parseval,
// first and second derivatives, the shared read-only tables, resampling, and error messages.
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <complex>
#include <memory>
#include <numbers>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "ops/ops.h"
#include "ops/sphere/grids.h"
#include "ops/sphere/legendre/table.h"
#include "ops/sphere/legendre/contraction.h"
#include "ops/sphere/legendre/path.h"
#include "ops/sphere/legendre/recurrence.h"
#include "ops/sphere/sht.h"
#include "tests/test_util.h"

namespace {

using gs::c128;
using gs::DType;
using gs::Shape;
using gs::Tensor;
using gs::sphere::GridKind;
using gs::sphere::ShtSpec;

constexpr double kPi = std::numbers::pi;
constexpr GridKind kGrids[] = {GridKind::equiangular, GridKind::legendre_gauss, GridKind::lobatto};

using gs_test::error_of;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Random band-limited coefficients (batch..., lmax, mmax) c128: zero where l < m, real at m = 0
// and at the Nyquist order m = nlon/2 (the parts a real field cannot carry).
Tensor random_coeffs(const Shape& batch, const ShtSpec& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  Shape sizes = batch;
  sizes.push_back(s.lmax);
  sizes.push_back(s.mmax);
  int64_t count = 1;
  for (auto d : batch) count *= d;
  std::vector<c128> v(static_cast<size_t>(count * s.lmax * s.mmax));
  for (int64_t b = 0; b < count; ++b)
    for (int64_t l = 0; l < s.lmax; ++l)
      for (int64_t m = 0; m < s.mmax; ++m) {
        const bool real_only = m == 0 || 2 * m == s.nlon;
        const double re = n(rng), im = n(rng);
        v[static_cast<size_t>((b * s.lmax + l) * s.mmax + m)] = m > l ? c128(0, 0) : c128(re, real_only ? 0.0 : im);
      }
  return gs::from_vector(v, sizes);
}

std::vector<c128> cvals(const Tensor& t) { return gs::cast_copy(t, DType::c128).to_vector<c128>(); }
std::vector<double> rvals(const Tensor& t) { return gs::cast_copy(t, DType::f64).to_vector<double>(); }

// max |a - b| / max |b|
double rel_error(const std::vector<c128>& a, const std::vector<c128>& b) {
  REQUIRE(a.size() == b.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::abs(a[i] - b[i])), scale = std::max(scale, std::abs(b[i]));
  return err / scale;
}
double rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::abs(a[i] - b[i])), scale = std::max(scale, std::abs(b[i]));
  return err / scale;
}

// The orthonormal, Condon-Shortley-signed Pbar_l^m(cos theta) for l <= 3, written out.
double pbar_closed_form(int64_t l, int64_t m, double theta) {
  const double c = std::cos(theta), s = std::sin(theta);
  switch (l * 10 + m) {
    case 0: return std::sqrt(1 / (4 * kPi));
    case 10: return std::sqrt(3 / (4 * kPi)) * c;
    case 11: return -std::sqrt(3 / (8 * kPi)) * s;
    case 20: return std::sqrt(5 / (16 * kPi)) * (3 * c * c - 1);
    case 21: return -std::sqrt(15 / (8 * kPi)) * s * c;
    case 22: return std::sqrt(15 / (32 * kPi)) * s * s;
    case 30: return std::sqrt(7 / (16 * kPi)) * (5 * c * c * c - 3 * c);
    case 31: return -std::sqrt(21 / (64 * kPi)) * s * (5 * c * c - 1);
    case 32: return std::sqrt(105 / (32 * kPi)) * s * s * c;
    case 33: return -std::sqrt(35 / (64 * kPi)) * s * s * s;
  }
  FAIL("no closed form for l = " << l << ", m = " << m);
  return 0;
}

// Restores the OpenMP thread count on leaving the scope (a failed REQUIRE included).
struct ThreadCountGuard {
  int before = omp_get_max_threads();
  ~ThreadCountGuard() { omp_set_num_threads(before); }
};

// Forces one Legendre path for its lifetime.
struct PathGuard {
  gs::sphere::LegendrePath previous;
  explicit PathGuard(gs::sphere::LegendrePath p) : previous(gs::sphere::set_legendre_path(p)) {}
  ~PathGuard() { gs::sphere::set_legendre_path(previous); }
  PathGuard(const PathGuard&) = delete;
  PathGuard& operator=(const PathGuard&) = delete;
};

// Round trip isht -> sht of random band-limited coefficients.
double round_trip_error(const ShtSpec& s, DType real, uint64_t seed, const Shape& batch = {3}) {
  const Tensor a = random_coeffs(batch, s, seed);
  const Tensor a_in = gs::cast_copy(a, gs::complex_dtype(real));
  const Tensor f = gs::sphere::isht(a_in, s);
  CHECK(f.dtype() == real);
  Shape fs = batch;
  fs.push_back(s.nlat);
  fs.push_back(s.nlon);
  CHECK(f.sizes() == fs);
  const Tensor back = gs::sphere::sht(f, s);
  CHECK(back.dtype() == gs::complex_dtype(real));
  return rel_error(cvals(back), cvals(a));
}

}  // namespace

TEST_CASE("sht: make_sht_spec follows torch-harmonics' truncation defaults") {
  using gs::sphere::make_sht_spec;
  const ShtSpec g = make_sht_spec(GridKind::legendre_gauss, 128, 256);
  CHECK(g.lmax == 128);
  CHECK(g.mmax == 128);
  CHECK(make_sht_spec(GridKind::lobatto, 128, 256).lmax == 127);
  const ShtSpec e = make_sht_spec(GridKind::equiangular, 128, 256);
  CHECK(e.lmax == 64);
  CHECK(e.mmax == 64);
  const ShtSpec explicit_l = make_sht_spec(GridKind::legendre_gauss, 32, 64, 20);
  CHECK(explicit_l.lmax == 20);
  CHECK(explicit_l.mmax == 20);
  CHECK(g.norm == gs::sphere::Normalization::ortho);
  CHECK(g.csphase);
}

TEST_CASE("sht: isht then sht recovers band-limited coefficients on every grid (f64 and f32)") {
  using gs::sphere::make_sht_spec;
  uint64_t seed = 1;
  for (GridKind grid : kGrids) {
    for (auto [nlat, nlon] : {std::pair<int64_t, int64_t>{32, 64}, {33, 64}}) {
      const ShtSpec s = make_sht_spec(grid, nlat, nlon);
      CAPTURE(s.str());
      CHECK(round_trip_error(s, DType::f64, seed++) <= 1e-11);
      CHECK(round_trip_error(s, DType::f32, seed++) <= 1e-5);
    }
  }
  // A Nyquist order (mmax = nlon/2 + 1) and a batch with two dims.
  const ShtSpec nyquist = make_sht_spec(GridKind::legendre_gauss, 17, 32, 17, 17);
  CHECK(round_trip_error(nyquist, DType::f64, 77, {2, 2}) <= 1e-11);
  // No batch at all.
  CHECK(round_trip_error(make_sht_spec(GridKind::lobatto, 9, 16), DType::f64, 78, {}) <= 1e-11);
  // mmax < lmax and lmax below the grid's limit.
  CHECK(round_trip_error(make_sht_spec(GridKind::equiangular, 33, 64, 12, 7), DType::f64, 79) <= 1e-11);
}

TEST_CASE("sht: round trip on larger grids (f64)") {
  using gs::sphere::make_sht_spec;
  const ShtSpec gauss = make_sht_spec(GridKind::legendre_gauss, 180, 360);
  CAPTURE(gauss.str());
  CHECK(round_trip_error(gauss, DType::f64, 101, {2}) <= 1e-11);
  const ShtSpec equi = make_sht_spec(GridKind::equiangular, 181, 360);
  CAPTURE(equi.str());
  CHECK(round_trip_error(equi, DType::f64, 102, {2}) <= 1e-11);
}

TEST_CASE("sht: a single coefficient synthesises the closed-form spherical harmonic") {
  for (GridKind grid : kGrids) {
    const ShtSpec s = gs::sphere::make_sht_spec(grid, 9, 16, 4, 4);
    const gs::sphere::Quadrature q = gs::sphere::make_quadrature(grid, s.nlat);
    for (int64_t l = 0; l <= 3; ++l)
      for (int64_t m = 0; m <= l; ++m)
        for (c128 a : {c128(1, 0), c128(0, 1)}) {
          if (m == 0 && a.imag() != 0) continue;
          CAPTURE(s.str());
          CAPTURE(l);
          CAPTURE(m);
          CAPTURE(a);
          std::vector<c128> c(static_cast<size_t>(s.lmax * s.mmax));
          c[static_cast<size_t>(l * s.mmax + m)] = a;
          const std::vector<double> f = gs::sphere::isht(gs::from_vector(c, {s.lmax, s.mmax}), s).to_vector<double>();
          // f = Re(c_m a Pbar e^{i m phi}), c_0 = 1, c_m = 2.
          double err = 0;
          for (int64_t j = 0; j < s.nlat; ++j)
            for (int64_t k = 0; k < s.nlon; ++k) {
              const double phi = 2 * kPi * static_cast<double>(k) / static_cast<double>(s.nlon);
              const double expected = (m == 0 ? 1.0 : 2.0) * (a * std::polar(1.0, static_cast<double>(m) * phi)).real() *
                                      pbar_closed_form(l, m, q.colatitude[static_cast<size_t>(j)]);
              err = std::max(err, std::abs(f[static_cast<size_t>(j * s.nlon + k)] - expected));
            }
          CHECK(err <= 1e-14);
        }
  }
}

TEST_CASE("sht: Parseval's identity") {
  // With orthonormal Y_lm and a real field, a_{l,-m} = (-1)^m conj(a_lm), so
  //   integral f^2 dOmega = sum_l |a_l0|^2 + 2 sum_{l, m>0} |a_lm|^2,
  // and the quadrature sum_j w_j (2 pi/nlon) sum_k f_jk^2 equals it exactly: in latitude because
  // lmax <= max_supported_lmax, in longitude because the products of two orders below nlon/2 stay
  // below nlon. The Nyquist order m = nlon/2 (present when mmax = nlon/2 + 1) is synthesised once
  // (c = 1, real part only) and its square sums to 2 pi on the grid, so on the grid it counts once:
  //   sum_j w_j (2 pi/nlon) sum_k f_jk^2 = sum_{l,m} c_m |a_lm|^2,  c_0 = c_{nlon/2} = 1, else 2.
  for (GridKind grid : kGrids) {
    const ShtSpec s = gs::sphere::make_sht_spec(grid, 33, 64);  // gauss: mmax 33 includes m = 32
    CAPTURE(s.str());
    const Tensor a = random_coeffs({}, s, 200 + static_cast<uint64_t>(grid));
    const std::vector<double> f = gs::sphere::isht(a, s).to_vector<double>();
    const gs::sphere::Quadrature q = gs::sphere::make_quadrature(grid, s.nlat);
    double grid_sum = 0;
    for (int64_t j = 0; j < s.nlat; ++j)
      for (int64_t k = 0; k < s.nlon; ++k)
        grid_sum += q.weights[static_cast<size_t>(j)] * (2 * kPi / static_cast<double>(s.nlon)) *
                    f[static_cast<size_t>(j * s.nlon + k)] * f[static_cast<size_t>(j * s.nlon + k)];
    auto spectral_sum = [&](const std::vector<c128>& c) {
      double sum = 0;
      for (int64_t l = 0; l < s.lmax; ++l)
        for (int64_t m = 0; m < s.mmax; ++m) sum += (m == 0 || 2 * m == s.nlon ? 1.0 : 2.0) * std::norm(c[static_cast<size_t>(l * s.mmax + m)]);
      return sum;
    };
    CHECK(std::abs(grid_sum - spectral_sum(cvals(a))) <= 1e-12 * grid_sum);
    CHECK(std::abs(grid_sum - spectral_sum(cvals(gs::sphere::sht(gs::from_vector(f, {s.nlat, s.nlon}), s)))) <=
          1e-12 * grid_sum);
  }
}

TEST_CASE("sht: legendre_analysis and legendre_synthesis match a direct sum over the reference table") {
  using gs::sphere::LegendreTableKind;
  for (GridKind grid : kGrids) {
    const ShtSpec s = gs::sphere::make_sht_spec(grid, 11, 16, 6, 5);
    CAPTURE(s.str());
    const int64_t B = 3;
    const Tensor X = gs::randn({B, s.nlat, s.mmax}, {5, static_cast<uint64_t>(grid)}, DType::c128);
    const Tensor C = gs::randn({B, s.lmax, s.mmax}, {6, static_cast<uint64_t>(grid)}, DType::c128);
    const std::vector<c128> xv = cvals(X), cv = cvals(C);
    gs::sphere::LegendreSpec tri{s.grid, s.nlat, s.lmax, s.mmax, s.norm, s.csphase, false};
    for (LegendreTableKind kind : {LegendreTableKind::analysis, LegendreTableKind::synthesis}) {
      const std::vector<double> ref = gs::sphere::legendre_reference_table(
          {s.grid, s.nlat, s.lmax, s.mmax, s.norm, s.csphase, kind, DType::f64});
      const bool analysis = kind == LegendreTableKind::analysis;
      const Tensor out = analysis ? gs::sphere::legendre_analysis(X, s) : gs::sphere::legendre_synthesis(C, s);
      const int64_t rows = analysis ? s.lmax : s.nlat;
      std::vector<c128> expected(static_cast<size_t>(B * rows * s.mmax));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t m = 0; m < s.mmax; ++m)
          for (int64_t l = m; l < s.lmax; ++l)
            for (int64_t j = 0; j < s.nlat; ++j) {
              const double p = ref[tri.tri_index(m, l, j)];
              if (analysis)
                expected[static_cast<size_t>((b * s.lmax + l) * s.mmax + m)] += p * xv[static_cast<size_t>((b * s.nlat + j) * s.mmax + m)];
              else
                expected[static_cast<size_t>((b * s.nlat + j) * s.mmax + m)] += p * cv[static_cast<size_t>((b * s.lmax + l) * s.mmax + m)];
            }
      CHECK(rel_error(cvals(out), expected) <= 1e-14);
    }
  }
}

TEST_CASE("sht: results do not depend on the batch layout or the thread split") {
  // A batch large enough to run threaded, against the same transforms one field at a time.
  const ShtSpec s = gs::sphere::make_sht_spec(GridKind::legendre_gauss, 48, 96);
  const Tensor x = gs::randn({2, 4, s.nlat, s.nlon}, {9, 1}, DType::f64);
  const Tensor all = gs::sphere::sht(x, s);
  const Tensor xt = gs::transpose(gs::randn({s.nlat, 2, s.nlon}, {9, 2}, DType::f64), 0, 1);  // non-contiguous
  const Tensor xt_all = gs::sphere::sht(xt, s);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t c = 0; c < 4; ++c) {
      const Tensor one = gs::sphere::sht(gs::contiguous(gs::select(gs::select(x, 0, i), 0, c)), s);
      CHECK(rel_error(cvals(gs::select(gs::select(all, 0, i), 0, c)), cvals(one)) <= 1e-14);
    }
    const Tensor one = gs::sphere::sht(gs::contiguous(gs::select(xt, 0, i)), s);
    CHECK(rel_error(cvals(gs::select(xt_all, 0, i)), cvals(one)) <= 1e-14);
  }
}

TEST_CASE("sht: the Legendre contraction of each field is the same for every thread split") {
  // Two threads split a batch by fields (many fields) or by orders (few): every value must be that
  // of one thread, to the bit, on both paths. 43 fields: an even split would fall at 21, inside a
  // pair of the on-the-fly kernels, which march fields in pairs (the second field of a pair does
  // not get the bits it gets alone), so their split must keep the pairs (at 20). The table's kernels
  // give each field the bits it gets alone.
  if (omp_get_thread_limit() < 2) {
    MESSAGE("not run: OMP_THREAD_LIMIT allows one thread, and this test compares one with two");
    return;
  }
  const ShtSpec s = gs::sphere::make_sht_spec(GridKind::legendre_gauss, 96, 192);
  ThreadCountGuard threads_restored;
  for (const auto path : {gs::sphere::LegendrePath::table, gs::sphere::LegendrePath::recurrence})
    for (const DType dt : {DType::c64, DType::c128})
      for (const int64_t fields : {3, 43}) {  // orders split at two threads, then fields
        INFO("path ", static_cast<int>(path), ", ", gs::dtype_name(dt), ", fields ", fields);
        PathGuard forced(path);
        const Tensor X = gs::cast_copy(gs::randn({fields, s.nlat, s.mmax}, {77, 1}, DType::c128), dt);
        const Tensor C = gs::cast_copy(gs::randn({fields, s.lmax, s.mmax}, {77, 2}, DType::c128), dt);
        omp_set_num_threads(1);
        const Tensor a1 = gs::sphere::legendre_analysis(X, s), x1 = gs::sphere::legendre_synthesis(C, s);
        omp_set_num_threads(2);
        const Tensor a2 = gs::sphere::legendre_analysis(X, s), x2 = gs::sphere::legendre_synthesis(C, s);
        CHECK(cvals(a2) == cvals(a1));
        REQUIRE(omp_get_max_threads() == 2);
        CHECK(cvals(x2) == cvals(x1));
        if (path != gs::sphere::LegendrePath::table) continue;
        for (const int64_t f : {int64_t{0}, fields / 2, fields - 1}) {
          INFO("field ", f);
          CHECK(cvals(gs::sphere::legendre_analysis(gs::contiguous(gs::select(X, 0, f)), s)) ==
                cvals(gs::select(a2, 0, f)));
          CHECK(cvals(gs::sphere::legendre_synthesis(gs::contiguous(gs::select(C, 0, f)), s)) ==
                cvals(gs::select(x2, 0, f)));
        }
      }
}

TEST_CASE("sht: backward records the adjoint contraction, and isht's backward is the weighted analysis") {
  const ShtSpec s = gs::sphere::make_sht_spec(GridKind::legendre_gauss, 8, 16);
  Tensor X = gs::sample_leaf({s.nlat, s.mmax}, {41, 1}, DType::c128);
  Tensor out = gs::sphere::legendre_analysis(X, s);
  REQUIRE(out.grad_fn());
  CHECK(out.grad_fn()->name() == "legendre_analysis");
  // <analysis(X), C> = <X, analysis^T(C)>: the gradient of Re sum conj(C) * analysis(X) w.r.t. X.
  const Tensor C = gs::randn({s.lmax, s.mmax}, {41, 2}, DType::c128);
  gs::sum(gs::real(gs::mul(gs::conj(C), out))).backward();
  const std::vector<c128> g = cvals(X.grad()), cv = cvals(C), xv = cvals(X), ov = cvals(out);
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < cv.size(); ++i) lhs += (std::conj(cv[i]) * ov[i]).real();
  for (size_t i = 0; i < xv.size(); ++i) rhs += (std::conj(g[i]) * xv[i]).real();
  CHECK(std::abs(lhs - rhs) <= 1e-13 * std::abs(lhs));
}

TEST_CASE("sht: the Legendre tables are cached, shared and read-only") {
  using gs::sphere::LegendreTableKey;
  using gs::sphere::LegendreTableKind;
  // nlon is not part of the key: both specs use the same tables.
  const ShtSpec a = gs::sphere::make_sht_spec(GridKind::legendre_gauss, 24, 48);
  const ShtSpec b = gs::sphere::make_sht_spec(GridKind::legendre_gauss, 24, 64, 24, 24);
  const LegendreTableKey ka{a.grid, a.nlat, a.lmax, a.mmax, a.norm, a.csphase, LegendreTableKind::analysis, DType::f32};
  const LegendreTableKey kb{b.grid, b.nlat, b.lmax, b.mmax, b.norm, b.csphase, LegendreTableKind::analysis, DType::f32};
  const auto ta = gs::sphere::legendre_table_cached(ka);
  const auto tb = gs::sphere::legendre_table_cached(kb);
  CHECK(ta.get() == tb.get());
  CHECK(ta->values.storage().get() == tb->values.storage().get());
  CHECK(ta->values.dtype() == DType::f32);
  CHECK(ta->nbytes() == gs::sphere::sht_table_bytes(a, DType::f32, true));
  // Other dtype, kind or truncation: other tables.
  LegendreTableKey k64 = ka, ksyn = ka, kl = ka;
  k64.dtype = DType::f64;
  ksyn.kind = LegendreTableKind::synthesis;
  kl.lmax = 20;
  kl.mmax = 20;
  CHECK(gs::sphere::legendre_table_cached(k64).get() != ta.get());
  CHECK(gs::sphere::legendre_table_cached(ksyn).get() != ta.get());
  CHECK(gs::sphere::legendre_table_cached(kl).get() != ta.get());
  const gs::sphere::LegendreCacheStats stats = gs::sphere::legendre_cache_stats();
  CHECK(stats.tables >= 4);
  CHECK(stats.bytes >= ta->nbytes());

  // The op runs on the cached table: its f32 result uses the same storage (saved for backward).
  Tensor x = gs::randn({2, a.nlat, a.nlon}, {3, 3}, DType::f32);
  x.set_requires_grad(true);
  Tensor y = gs::sphere::sht(x, a);
  CHECK(y.dtype() == DType::c64);

  // In-place writes throw, naming the table.
  Tensor values = ta->values;
  const std::string msg = error_of([&] { gs::add_(values, 1.0); });
  CHECK(has(msg, "read-only"));
  CHECK(has(msg, "Legendre table (legendre-gauss, nlat 24, lmax 24, mmax 24, ortho, csphase, analysis"));
  CHECK(has(msg, "f32) is a shared constant"));
  CHECK(has(error_of([&] { gs::zero_(values); }), "Legendre table (legendre-gauss"));
  Tensor row = gs::select(values, 0, 3);
  CHECK(has(error_of([&] { gs::fill_(row, 0.0); }), "shared constant"));
  // Backward still works after the failed writes, on unchanged tables.
  gs::sum(gs::real(y)).backward();
  CHECK(x.grad().defined());
}

TEST_CASE("sht: concurrent first lookups of one table build it once and share it") {
  using gs::sphere::LegendreTableKind;
  const gs::sphere::LegendreTableKey key{GridKind::lobatto, 41, 37, 29, gs::sphere::Normalization::ortho, false,
                                         LegendreTableKind::synthesis, DType::f32};
  const int64_t builds_before = gs::sphere::legendre_cache_stats().builds;
  std::vector<std::shared_ptr<const gs::sphere::LegendreTable>> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = gs::sphere::legendre_table_cached(key); });
  for (auto& t : threads) t.join();
  for (const auto& t : got) CHECK(t.get() == got[0].get());
  CHECK(gs::sphere::legendre_cache_stats().builds == builds_before + 1);
  CHECK(has(got[0]->values.storage()->read_only_reason(), "lobatto, nlat 41, lmax 37, mmax 29, ortho, no csphase, synthesis, f32"));
}

TEST_CASE("sht: cached tables hold the reference values in their blocked, symmetric layout") {
  using gs::sphere::LegendreTableKind;
  for (GridKind grid : kGrids)
    for (LegendreTableKind kind : {LegendreTableKind::analysis, LegendreTableKind::synthesis})
      for (auto [nlat, lmax, mmax, norm] : {std::tuple{8, 5, 4, gs::sphere::Normalization::schmidt},
                                            std::tuple{9, 5, 4, gs::sphere::Normalization::four_pi},
                                            std::tuple{61, 30, 30, gs::sphere::Normalization::ortho}}) {
        if (lmax > gs::sphere::max_supported_lmax(grid, nlat)) continue;
        const gs::sphere::LegendreTableKey key{grid, nlat, lmax, mmax, norm, true, kind, DType::f64};
        CAPTURE(key.str());
        const auto t = gs::sphere::legendre_table_cached(key);
        const std::vector<double> ref = gs::sphere::legendre_reference_table(key);
        const std::vector<double> v = t->values.to_vector<double>();
        const gs::sphere::LegendreSpec tri{grid, nlat, lmax, mmax, norm, true, false};
        double err = 0, largest = 0;
        for (double r : ref) largest = std::max(largest, std::abs(r));
        int64_t dropped_rows = 0;
        std::vector<bool> addressed(v.size(), false);
        for (int64_t m = 0; m < mmax; ++m) {
          const int64_t first = t->first_row[static_cast<size_t>(m)];
          dropped_rows += first;
          for (int64_t l = m; l < lmax; ++l) {
            const bool even = (l - m) % 2 == 0;
            for (int64_t j = 0; j < nlat; ++j) {
              const int64_t jn = std::min(j, nlat - 1 - j);  // the northern row that stands for row j
              const double sign = (j == jn || even) ? 1.0 : -1.0;
              const int64_t at = t->index(m, l, jn);  // -1: not stored (rows before first_row)
              if (at >= 0) addressed[static_cast<size_t>(at)] = true;
              const double stored = at >= 0 ? sign * v[static_cast<size_t>(at)] : 0.0;
              err = std::max(err, std::abs(stored - ref[tri.tri_index(m, l, j)]));
            }
          }
        }
        // Exact up to the values dropped as negligible (2^-12 eps of each order's largest).
        CHECK(err <= 1e-18 * largest);
        // Every other entry (l < m inside a block of orders, orders past mmax, the padding) is 0:
        // the kernels multiply them.
        bool others_zero = true;
        for (size_t i = 0; i < v.size(); ++i) others_zero = others_zero && (addressed[i] || v[i] == 0.0);
        CHECK(others_zero);
        if (nlat == 61) CHECK(dropped_rows > 0);  // high orders skip their polar rows
      }
}

TEST_CASE("sht: resample between grids through the SHT") {
  using gs::sphere::make_sht_spec;
  const ShtSpec equi = make_sht_spec(GridKind::equiangular, 33, 64);
  const ShtSpec gauss = make_sht_spec(GridKind::legendre_gauss, 32, 64);
  REQUIRE(equi.lmax == 17);
  const Tensor a = random_coeffs({2}, equi, 300);
  const Tensor f = gs::sphere::isht(a, equi);
  const Tensor on_gauss = gs::sphere::resample(f, equi, gauss);
  CHECK(on_gauss.sizes() == Shape{2, 32, 64});
  // The same field evaluated on the Gauss grid directly.
  const Tensor direct = gs::sphere::isht(gs::sphere::truncate_or_pad_coeffs(a, gauss.lmax, gauss.mmax), gauss);
  CHECK(rel_error(rvals(on_gauss), rvals(direct)) <= 1e-12);
  const Tensor back = gs::sphere::resample(on_gauss, gauss, equi);
  CHECK(rel_error(rvals(back), rvals(f)) <= 1e-10);
  // Truncation drops the degrees the target cannot hold.
  const Tensor small = gs::sphere::truncate_or_pad_coeffs(a, 5, 3);
  CHECK(small.sizes() == Shape{2, 5, 3});
  CHECK(cvals(small)[static_cast<size_t>(4 * 3 + 2)] == cvals(a)[static_cast<size_t>(4 * 17 + 2)]);
  // Differentiable end to end.
  const ShtSpec e_small = make_sht_spec(GridKind::equiangular, 7, 8);
  const ShtSpec g_small = make_sht_spec(GridKind::legendre_gauss, 5, 8);
  const auto fn = [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{gs::sphere::resample(x[0], e_small, g_small)}; };
  const gs::GradcheckReport r = gs::gradcheck(fn, {gs::sample_leaf({e_small.nlat, e_small.nlon}, {50, 1})});
  CHECK_MESSAGE(r.ok, r.failure);
  CHECK(has(error_of([&] {
              ShtSpec other = gauss;
              other.norm = gs::sphere::Normalization::schmidt;
              gs::sphere::resample(f, equi, other);
            }),
            "share the normalisation"));
}

TEST_CASE("sht: errors state what was expected and what was given") {
  using gs::sphere::make_sht_spec;
  const ShtSpec s = make_sht_spec(GridKind::legendre_gauss, 32, 64);
  std::string msg = error_of([&] { gs::sphere::sht(gs::zeros({2, 31, 64}, DType::f64), s); });
  CHECK(has(msg, "sht: expected a field of shape (..., nlat = 32, nlon = 64)"));
  CHECK(has(msg, "(2, 31, 64)"));
  msg = error_of([&] { gs::sphere::sht(gs::zeros({32, 60}, DType::f32), s); });
  CHECK(has(msg, "nlon = 64"));
  CHECK(has(msg, "(32, 60)"));
  msg = error_of([&] { gs::sphere::sht(gs::zeros({64}, DType::f32), s); });
  CHECK(has(msg, "expected a field of shape"));
  msg = error_of([&] { gs::sphere::sht(gs::zeros({32, 64}, DType::c128), s); });
  CHECK(has(msg, "sht: expected a real field (f32 or f64)"));
  CHECK(has(msg, "c128"));
  msg = error_of([&] { gs::sphere::isht(gs::zeros({32, 64}, DType::f64), s); });
  CHECK(has(msg, "isht: expected spectral coefficients of shape (..., lmax = 32, mmax = 32) with dtype c64 or c128"));
  msg = error_of([&] { gs::sphere::isht(gs::zeros({3, 32, 33}, DType::c64), s); });
  CHECK(has(msg, "mmax = 32"));
  CHECK(has(msg, "(3, 32, 33)"));
  msg = error_of([&] { gs::sphere::legendre_analysis(gs::zeros({30, 32}, DType::c128), s); });
  CHECK(has(msg, "legendre_analysis: expected longitude Fourier coefficients of shape (..., nlat = 32, mmax = 32)"));
  // lmax beyond what the grid resolves: from make_sht_spec, and from the op for a hand-made spec.
  msg = error_of([&] { make_sht_spec(GridKind::equiangular, 33, 64, 20); });
  CHECK(has(msg, "lmax = 20 is too large for a 'equiangular' grid with nlat = 33"));
  ShtSpec too_big = make_sht_spec(GridKind::equiangular, 33, 64);
  too_big.lmax = 33;
  msg = error_of([&] { gs::sphere::sht(gs::zeros({33, 64}, DType::f64), too_big); });
  CHECK(has(msg, "sht: lmax = 33 is too large"));
  msg = error_of([&] { make_sht_spec(GridKind::legendre_gauss, 32, 64, 32, 40); });
  CHECK(has(msg, "mmax = 40 exceeds lmax = 32"));
  ShtSpec bad_m = s;
  bad_m.mmax = 40;
  msg = error_of([&] { gs::sphere::isht(gs::zeros({32, 40}, DType::c128), bad_m); });
  CHECK(has(msg, "1 <= mmax <= lmax"));
}

// The accuracy figures at full size: 0.25-degree grids, one field, f64 and f32. Each grid's
// tables are released afterwards (about 1.5 GB in f64 for 720 degrees).
TEST_CASE("sht: round trips at 721x1440 equiangular, 720x1440 legendre-gauss and 721x1440 lobatto") {
  using gs::sphere::make_sht_spec;
  const std::tuple<GridKind, int64_t, int64_t> cases[] = {{GridKind::equiangular, 721, 1440},
                                                          {GridKind::legendre_gauss, 720, 1440},
                                                          {GridKind::lobatto, 721, 1440}};
  uint64_t seed = 900;
  for (auto [grid, nlat, nlon] : cases) {
    const ShtSpec s = make_sht_spec(grid, nlat, nlon);
    CAPTURE(s.str());
    CHECK(round_trip_error(s, DType::f64, seed++, {1}) <= 1e-11);
    CHECK(round_trip_error(s, DType::f32, seed++, {1}) <= 1e-5);
    gs::sphere::clear_legendre_cache();
  }
}

// ---- the on-the-fly (recurrence) Legendre path ----

TEST_CASE("sht: the on-the-fly Legendre path matches the table path in both directions and dtypes") {
  using gs::sphere::LegendrePath;
  using gs::sphere::make_sht_spec;
  using gs::sphere::Normalization;
  const ShtSpec specs[] = {make_sht_spec(GridKind::equiangular, 33, 64),  // odd nlat: an equator row
                           make_sht_spec(GridKind::legendre_gauss, 48, 96),
                           make_sht_spec(GridKind::lobatto, 25, 48),
                           make_sht_spec(GridKind::legendre_gauss, 40, 80, 40, 17),  // lmax > mmax
                           make_sht_spec(GridKind::legendre_gauss, 24, 48, {}, {}, Normalization::schmidt, false),
                           make_sht_spec(GridKind::equiangular, 41, 80, {}, {}, Normalization::four_pi)};
  uint64_t seed = 1;
  for (const ShtSpec& s : specs) {
    CAPTURE(s.str());
    for (int64_t B : {1, 3, 7}) {  // field tiles of 1, 2 + 1 and 4 + 2 + 1
      CAPTURE(B);
      for (DType real : {DType::f64, DType::f32}) {
        CAPTURE(gs::dtype_name(real));
        const DType cplx = gs::complex_dtype(real);
        const Tensor X = gs::randn({B, s.nlat, s.mmax}, {11, seed++}, cplx);
        const Tensor C = gs::randn({B, s.lmax, s.mmax}, {12, seed++}, cplx);
        Tensor ta, ts, ra, rs;
        {
          PathGuard g(LegendrePath::table);
          ta = gs::sphere::legendre_analysis(X, s), ts = gs::sphere::legendre_synthesis(C, s);
        }
        {
          PathGuard g(LegendrePath::recurrence);
          ra = gs::sphere::legendre_analysis(X, s), rs = gs::sphere::legendre_synthesis(C, s);
        }
        CHECK(ra.dtype() == cplx);
        CHECK(rs.dtype() == cplx);
        const double tol = real == DType::f64 ? 1e-13 : 2e-6;
        CHECK(rel_error(cvals(ra), cvals(ta)) <= tol);
        CHECK(rel_error(cvals(rs), cvals(ts)) <= tol);
        // l < m stays an exact zero.
        const std::vector<c128> av = cvals(ra);
        for (int64_t l = 0; l < s.lmax; ++l)
          for (int64_t m = l + 1; m < s.mmax; ++m) CHECK(av[static_cast<size_t>(l * s.mmax + m)] == c128(0, 0));
      }
    }
  }
}

TEST_CASE("sht: round trips and gradients on the forced on-the-fly path") {
  using gs::sphere::LegendrePath;
  using gs::sphere::make_sht_spec;
  PathGuard g(LegendrePath::recurrence);
  for (auto [grid, nlat, nlon] : {std::tuple{GridKind::legendre_gauss, 180, 360},
                                  std::tuple{GridKind::equiangular, 181, 360}, std::tuple{GridKind::lobatto, 65, 128}}) {
    const ShtSpec s = make_sht_spec(grid, nlat, nlon);
    CAPTURE(s.str());
    CHECK(round_trip_error(s, DType::f64, 70, {2}) <= 1e-11);
    CHECK(round_trip_error(s, DType::f32, 71, {2}) <= 1e-5);
  }
  using V = std::vector<Tensor>;
  const ShtSpec s = make_sht_spec(GridKind::equiangular, 7, 10, 4, 3);
  const gs::DifferentiableFn fns[] = {
      [&](const V& x) { return V{gs::sphere::legendre_analysis(x[0], s)}; },
      [&](const V& x) { return V{gs::sphere::legendre_synthesis(x[0], s)}; },
  };
  const Shape shapes[] = {{2, s.nlat, s.mmax}, {2, s.lmax, s.mmax}};
  for (int i = 0; i < 2; ++i) {
    const Tensor x = gs::sample_leaf(shapes[i], {32, static_cast<uint64_t>(i)}, DType::c128);
    const gs::GradcheckReport first = gs::gradcheck(fns[i], {x});
    CHECK_MESSAGE(first.ok, first.failure);
    const gs::GradcheckReport second = gs::gradgradcheck(fns[i], {x});
    CHECK_MESSAGE(second.ok, second.failure);
  }
}

TEST_CASE("sht: the automatic rule picks the table for many fields and the recurrence for one large field") {
  using gs::sphere::LegendreTableKind;
  using gs::sphere::use_recurrence;
  PathGuard g(gs::sphere::LegendrePath::automatic);
  for (DType dtype : {DType::f32, DType::f64}) {
    CAPTURE(gs::dtype_name(dtype));
    gs::sphere::LegendreTableKey small{GridKind::legendre_gauss, 64, 64, 64, gs::sphere::Normalization::ortho,
                                       true, LegendreTableKind::analysis, dtype};
    CHECK_FALSE(use_recurrence(small, 1));  // a table of 0.3-0.5 MB stays in cache
    CHECK_FALSE(use_recurrence(small, 64));
    gs::sphere::LegendreTableKey large = small;
    large.nlat = large.lmax = large.mmax = 720;
    CHECK(use_recurrence(large, 1));
    CHECK(use_recurrence(large, 16));
    CHECK_FALSE(use_recurrence(large, 4096));
  }
  // f32 at 360 degrees, 4 fields (about 10 MB of table a field): the analysis table kernel is
  // faster there than the recurrence, the synthesis one slower.
  gs::sphere::LegendreTableKey f32_360{GridKind::legendre_gauss, 360, 360, 360, gs::sphere::Normalization::ortho,
                                       true, LegendreTableKind::analysis, DType::f32};
  CHECK_FALSE(use_recurrence(f32_360, 4));
  f32_360.kind = LegendreTableKind::synthesis;
  CHECK(use_recurrence(f32_360, 4));
  // The estimate the rule uses is the stored size up to the skipped polar rows.
  gs::sphere::LegendreTableKey mid{GridKind::legendre_gauss, 96, 96, 96, gs::sphere::Normalization::ortho,
                                   true, LegendreTableKind::synthesis, DType::f64};
  const double stored = static_cast<double>(gs::sphere::legendre_table_cached(mid)->nbytes());
  const double estimate = static_cast<double>(gs::sphere::LegendreTable::estimated_bytes(mid));
  CHECK(estimate >= stored);
  CHECK(estimate <= 1.3 * stored);
}

TEST_CASE("sht: the recurrence keeps at least the table's polar rows") {
  using gs::sphere::LegendreTableKind;
  for (DType dt : {DType::f64, DType::f32})
    for (LegendreTableKind kind : {LegendreTableKind::analysis, LegendreTableKind::synthesis}) {
      const gs::sphere::LegendreTableKey key{GridKind::legendre_gauss, 180, 180, 180, gs::sphere::Normalization::ortho,
                                             true, kind, dt};
      CAPTURE(key.str());
      const auto tab = gs::sphere::legendre_table_cached(key);
      const auto plan = gs::sphere::recurrence_plan_cached(key);
      int64_t skipped = 0;
      for (int64_t m = 0; m < key.mmax; ++m) {
        const int64_t fr = gs::sphere::recurrence_first_row(*plan, m);
        CHECK(fr <= tab->first_row[static_cast<size_t>(m)]);
        skipped += fr;
      }
      CHECK(skipped > 0);
      CHECK(gs::sphere::recurrence_scaled_starts(*plan) == 0);
    }
}

// At lmax = 2048 the seed Pbar_m^m ~ sin^m(theta) of high orders underflows f64 at latitudes where
// the high degrees are of order one; those rows start from a scaled value. Synthesis is defined
// for any lmax, so a coarse grid keeps this cheap; the analysis kernel is called directly (its op
// requires lmax within the quadrature limit). Compared per order against legendre_table_for_m.
TEST_CASE("sht: the recurrence handles seeds below the f64 range at large lmax") {
  using gs::sphere::LegendreTableKind;
  const int64_t nlat = 64, lmax = 2048, mmax = 1400;
  const gs::sphere::Quadrature q = gs::sphere::make_quadrature(GridKind::legendre_gauss, nlat);
  for (LegendreTableKind kind : {LegendreTableKind::analysis, LegendreTableKind::synthesis}) {
    const gs::sphere::LegendreTableKey key{GridKind::legendre_gauss, nlat, lmax, mmax, gs::sphere::Normalization::ortho,
                                           true, kind, DType::f64};
    CAPTURE(key.str());
    const auto plan = gs::sphere::recurrence_plan_cached(key);
    CHECK(gs::sphere::recurrence_scaled_starts(*plan) > 0);
    const Tensor X = gs::randn({1, nlat, mmax}, {13, 1}, DType::c128);
    const Tensor C = gs::randn({1, lmax, mmax}, {13, 2}, DType::c128);
    Tensor A = gs::empty({1, lmax, mmax}, DType::c128), Y = gs::empty({1, nlat, mmax}, DType::c128);
    gs::sphere::recurrence_to_degree(*plan, X.data<c128>(), A.data<c128>(), 1);
    gs::sphere::recurrence_to_latitude(*plan, C.data<c128>(), Y.data<c128>(), 1);
    const std::vector<c128> xv = cvals(X), cv = cvals(C), av = cvals(A), yv = cvals(Y);
    const gs::sphere::LegendreSpec ls{GridKind::legendre_gauss, nlat, lmax, mmax, gs::sphere::Normalization::ortho,
                                      true, kind == LegendreTableKind::synthesis};
    for (int64_t m : {0, 700, 1000, 1200, 1399}) {
      CAPTURE(m);
      const std::vector<double> p = gs::sphere::legendre_table_for_m(ls, q.cos_theta, m);  // (lmax - m, nlat)
      const bool weighted = kind == LegendreTableKind::analysis;
      std::vector<c128> a_ref(static_cast<size_t>(lmax - m)), a_got(a_ref.size()), y_ref(nlat), y_got(nlat);
      for (int64_t l = m; l < lmax; ++l)
        for (int64_t j = 0; j < nlat; ++j) {
          const double w = weighted ? q.weights[static_cast<size_t>(j)] : 1.0;
          const double t = p[static_cast<size_t>((l - m) * nlat + j)] * w;
          a_ref[static_cast<size_t>(l - m)] += t * xv[static_cast<size_t>(j * mmax + m)];
          y_ref[static_cast<size_t>(j)] += t * cv[static_cast<size_t>(l * mmax + m)];
        }
      for (int64_t l = m; l < lmax; ++l) a_got[static_cast<size_t>(l - m)] = av[static_cast<size_t>(l * mmax + m)];
      for (int64_t j = 0; j < nlat; ++j) y_got[static_cast<size_t>(j)] = yv[static_cast<size_t>(j * mmax + m)];
      CHECK(rel_error(a_got, a_ref) <= 1e-12);
      CHECK(rel_error(y_got, y_ref) <= 1e-12);
    }
  }
}

TEST_CASE("sht: make_blocked_table rejects blocks of the wrong size and bad parities") {
  const gs::sphere::LegendreTableKey key{GridKind::legendre_gauss, 8, 6, 5, gs::sphere::Normalization::ortho, true,
                                         gs::sphere::LegendreTableKind::synthesis, DType::f64};
  // Order m must give (lmax - m) * n_even = (6 - m) * 4 values.
  const std::string e = gs_test::error_of([&] {
    gs::sphere::make_blocked_table(key, 0, [](int64_t m) { return std::vector<double>(m == 3 ? 5 : (6 - m) * 4, 1.0); },
                                   "test table");
  });
  CHECK(gs_test::contains(e, "expected (lmax - m) * n_even = 12 values for order 3, got 5"));
  CHECK(gs_test::contains(gs_test::error_of([&] {
                            gs::sphere::make_blocked_table(
                                key, 2, [](int64_t m) { return std::vector<double>((6 - m) * 4, 1.0); }, "test table");
                          }),
                          "parity 0 or 1"));
  // A correct producer: every stored value is found where index() says.
  const auto t = gs::sphere::make_blocked_table(
      key, 1, [](int64_t m) {
        std::vector<double> v((6 - m) * 4);
        for (size_t i = 0; i < v.size(); ++i) v[i] = 1.0 + static_cast<double>(m) + 0.01 * static_cast<double>(i);
        return v;
      },
      "test table");
  const std::vector<double> v = t->values.to_vector<double>();
  bool same = true;
  for (int64_t m = 0; m < 5; ++m)
    for (int64_t l = m; l < 6; ++l)
      for (int64_t j = 0; j < 4; ++j) {
        const int64_t at = t->index(m, l, j);
        const double want = 1.0 + static_cast<double>(m) + 0.01 * static_cast<double>((l - m) * 4 + j);
        same = same && at >= 0 && v[static_cast<size_t>(at)] == want;
      }
  CHECK(same);
  CHECK(t->parity == 1);
}

TEST_CASE("sht: a NaN in the input never reaches the coefficients with l < m (table and on-the-fly paths)") {
  using gs::sphere::LegendrePath;
  const ShtSpec s = gs::sphere::make_sht_spec(GridKind::legendre_gauss, 12, 24);
  for (LegendrePath path : {LegendrePath::table, LegendrePath::recurrence}) {
    for (DType dt : {DType::f32, DType::f64}) {
      CAPTURE(static_cast<int>(path));
      CAPTURE(gs::dtype_name(dt));
      const LegendrePath before = gs::sphere::set_legendre_path(path);
      Tensor x = gs::cast_copy(gs::randn({3, 12, 24}, {7, 7}, DType::f64), dt);
      if (dt == DType::f32) x.data<float>()[24 * 5 + 3] = NAN;
      else x.data<double>()[24 * 5 + 3] = NAN;
      auto c = gs::cast_copy(gs::sphere::sht(x, s), DType::c128).to_vector<c128>();
      gs::sphere::set_legendre_path(before);
      int leaked = 0, nan_where_allowed = 0;
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t l = 0; l < s.lmax; ++l)
          for (int64_t m = 0; m < s.mmax; ++m) {
            const c128 v = c[(b * s.lmax + l) * s.mmax + m];
            if (l < m) leaked += v != c128(0, 0);
            else nan_where_allowed += std::isnan(v.real());
          }
      CHECK(leaked == 0);
      CHECK(nan_where_allowed > 0);  // the NaN did reach the field's own coefficients
    }
  }
}
