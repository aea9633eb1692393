// The vector SHT (torch-harmonics' RealVectorSHT / InverseRealVectorSHT) and the shallow-water
// spectral helpers. Conventions and derivations: vector_sht.h and ops/sphere/NOTES.md, "Vector SHT".
//
// Per order m, with D = dPbar_l^m/dtheta and M = m Pbar_l^m / sin(theta) (real (lmax - m, nlat)
// tables, Condon-Shortley sign included), the two Legendre contractions are
//   to_degree:   S = D X0 - i M X1,           T = -i M X0 - D X1         (sum over rows j)
//   to_latitude: X0 = D^T S + i M^T T,        X1 = i M^T S - D^T T       (sum over degrees l)
// As complex-linear maps, to_latitude with tables (D, M) is the adjoint (conjugate transpose) of
// to_degree with the same tables, and conversely. Under PyTorch's complex-gradient convention the
// gradient of z -> A z is g -> A^H g, so each contraction's backward is the other direction with
// the same table: the analysis' backward is a synthesis with the analysis table (weights and
// 1/(l(l+1)) folded in), the synthesis' backward an analysis with the synthesis table. Each
// backward is recorded with the forward as its own backward: derivatives of every order.
//
// Kernel: D and M are stored like the scalar SHT's tables (blocked orders, northern rows, each with
// its equatorial parity) and applied by the same kernels (legendre_table_kernels.h) to both
// components at once; the four products are then combined as above.
#include "ops/sphere/vector_sht.h"

#include <omp.h>

#include <cmath>
#include <complex>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/registry.h"
#include "ops/shape_ops.h"
#include "ops/sphere/fft.h"
#include "ops/sphere/device_form.h"
#include "ops/sphere/legendre_blocked.h"
#include "ops/sphere/legendre_cache.h"
#include "ops/sphere/legendre_gemm.h"
#include "ops/sphere/legendre_table_kernels.h"
#include "ops/sphere/sht_common.h"
#include "ops/view.h"

namespace gs::sphere {
namespace {

using detail::check_spec;
using detail::Direction;
using detail::flip;
using detail::table_key;

// The derivative tables of one (grid, nlat, lmax, mmax, norm, csphase, kind, dtype), each in the
// blocked layout of the SHT's tables (legendre_cache.h) on the northern rows: D (parity 1:
// dPbar/dtheta flips sign with the equatorial parity of Pbar) and M (parity 0). Read-only.
struct VectorTable {
  LegendreTableKey key;
  std::shared_ptr<const LegendreTable> d, m;
  size_t nbytes() const { return d->nbytes() + m->nbytes(); }
};

std::string table_name(const LegendreTableKey& key) { return "vector SHT derivative table (" + key.str() + ")"; }

// Built in f64 from the Pbar table (no Condon-Shortley sign) of orders up to mmax and degrees up
// to lmax (one more of each than the output), by the recurrences of torch-harmonics'
// _precompute_dlegpoly (Wang, Wang & Xie), which never divide by sin(theta) (finite at the poles):
//   D_l^0 = -sqrt(l(l+1)) P_l^1
//   D_l^m = (sqrt((l+m)(l-m+1)) P_l^{m-1} - sqrt((l-m)(l+m+1)) P_l^{m+1}) / 2         (m >= 1)
//   M_l^m = c_l (sqrt((l-m+1)(l-m+2)) P_{l+1}^{m-1}
//                + sqrt((l+m+1)(l+m+2)) P_{l+1}^{m+1}) / 2                             (m >= 1)
// where c_l = n(l) / n(l+1) sqrt((2l+1)/(2l+3)) converts the degree-(l+1) values to degree l: n(l)
// is the normalisation's degree factor relative to ortho (P = n(l) Pbar_ortho): 1 for ortho and
// four-pi, so c_l = sqrt((2l+1)/(2l+3)); sqrt(4 pi/(2l+1)) for the Schmidt analysis table, so c_l =
// 1; sqrt((2l+1)/(4 pi)) for the Schmidt synthesis table, so c_l = (2l+1)/(2l+3). (Using the ortho
// factor for Schmidt tables made M wrong by sqrt((2l+3)/(2l+1)).)
//   M_l^0 = 0;  odd m negated with csphase;  analysis: times w_j / (l(l+1)) (l = 0 rows are 0).
// Only the northern rows are computed; the grids mirror exactly, and D and M have definite parity.
std::shared_ptr<const VectorTable> build_table(const LegendreTableKey& key) {
  const bool analysis = key.kind == LegendreTableKind::analysis;
  const Quadrature q = make_quadrature(key.grid, key.nlat);
  const int64_t n_even = (key.nlat + 1) / 2;
  const std::vector<double> x_north(q.cos_theta.begin(), q.cos_theta.begin() + n_even);
  // Orders up to one past the key's last (a slice of the orders keeps only its own: the distributed SHT).
  const LegendreSpec pspec{key.grid, n_even, key.lmax + 1, key.order_end() + 1, key.norm, false, !analysis};
  validate(pspec);
  const std::vector<double> P = legendre_table(pspec, x_north);
  const int64_t lmax = key.lmax;
  auto p = [&](int64_t m, int64_t l, int64_t j) { return l < m ? 0.0 : P[pspec.tri_index(m, l, j)]; };
  // One order's (lmax - m, n_even) block of D (which = 0) or M (which = 1).
  auto order = [&](int which, int64_t m) {
    std::vector<double> v(static_cast<size_t>((lmax - m) * n_even), 0.0);
    const double sign = key.csphase && m % 2 == 1 ? -1.0 : 1.0;
    for (int64_t l = m; l < lmax; ++l) {
      const double dl = static_cast<double>(l), dm = static_cast<double>(m);
      const double norm = analysis && l > 0 ? 1.0 / (dl * (dl + 1)) : 1.0;
      for (int64_t j = 0; j < n_even; ++j) {
        const double rowf = sign * norm * (analysis ? q.weights[static_cast<size_t>(j)] : 1.0);
        double value = 0.0;
        if (which == 0 && m == 0) {
          value = -std::sqrt(dl * (dl + 1)) * p(1, l, j);
        } else if (which == 0) {
          value = 0.5 * (std::sqrt((dl + dm) * (dl - dm + 1)) * p(m - 1, l, j) -
                         std::sqrt((dl - dm) * (dl + dm + 1)) * p(m + 1, l, j));
        } else if (m > 0) {
          const double ratio = (2 * dl + 1) / (2 * dl + 3);
          const double c = key.norm != Normalization::schmidt ? std::sqrt(ratio) : analysis ? 1.0 : ratio;
          value = 0.5 * c *
                  (std::sqrt((dl - dm + 1) * (dl - dm + 2)) * p(m - 1, l + 1, j) +
                   std::sqrt((dl + dm + 1) * (dl + dm + 2)) * p(m + 1, l + 1, j));
        }
        v[static_cast<size_t>((l - m) * n_even + j)] = rowf * value;
      }
    }
    return v;
  };
  auto t = std::make_shared<VectorTable>();
  t->key = key;
  const std::string reason =
      table_name(key) + " is a shared constant of the vector SHT table cache; clone() it to get a writable copy";
  t->d = make_blocked_table(key, 1, [&](int64_t m) { return order(0, m); }, reason);
  t->m = make_blocked_table(key, 0, [&](int64_t m) { return order(1, m); }, reason);
  return t;
}

std::shared_ptr<const VectorTable> table_cached(const LegendreTableKey& requested) {
  const LegendreTableKey key = requested.canonical();
  static std::mutex mutex;
  static std::map<LegendreTableKey, std::shared_ptr<const VectorTable>> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  auto built = build_table(key);  // outside the lock; a concurrent build of the same key loses
  std::lock_guard<std::mutex> lock(mutex);
  return cache.emplace(key, std::move(built)).first->second;
}

// One contraction over all orders. in/out are (B, 2, rows, mmax) complex, contiguous. Both
// components of every field go through the scalar table kernels as one batch of 2B fields, once
// with D and once with M (pd, pm: scratch of the output's size), and are then combined:
//   to_degree:   S = D X0 - i M X1,        T = -i M X0 - D X1
//   to_latitude: X0 = D^T S + i M^T T,     X1 = i M^T S - D^T T
template <typename T>
void contract_kernel(Direction dir, const std::complex<T>* in, std::complex<T>* out, const VectorTable& tab,
                     int64_t B, std::complex<T>* pd, std::complex<T>* pm) {
  using C = std::complex<T>;
  const int64_t rows_out = dir == Direction::to_degree ? tab.key.lmax : tab.key.nlat;
  const int64_t plane = rows_out * tab.key.order_count();  // one component of one field
  if (dir == Direction::to_degree) {
    table_to_degree(*tab.d, in, pd, 2 * B);
    table_to_degree(*tab.m, in, pm, 2 * B);
  } else {
    table_to_latitude(*tab.d, in, pd, 2 * B);
    table_to_latitude(*tab.m, in, pm, 2 * B);
  }
  const C i(0, 1);
  const bool parallel = B * plane >= (int64_t{1} << 15) && !omp_in_parallel();
#pragma omp parallel for if (parallel)
  for (int64_t b = 0; b < B; ++b) {
    const C* d0 = pd + (2 * b) * plane;
    const C* d1 = d0 + plane;
    const C* m0 = pm + (2 * b) * plane;
    const C* m1 = m0 + plane;
    C* y0 = out + (2 * b) * plane;
    C* y1 = y0 + plane;
    for (int64_t k = 0; k < plane; ++k) {
      if (dir == Direction::to_degree) {
        y0[k] = d0[k] - i * m1[k];
        y1[k] = -i * m0[k] - d1[k];
      } else {
        y0[k] = d0[k] + i * m1[k];
        y1[k] = i * m0[k] - d1[k];
      }
    }
  }
}

// The same combination with tensor ops, for the device forms (device_form.h: legendre_gemm.h or
// legendre_blocked.h): pd, pm (..., 2, rows, orders) are the contractions of both components with
// D and with M.
Tensor combine_contractions(Direction dir, const Tensor& pd, const Tensor& pm) {
  NoGradGuard no_grad;
  const int64_t c = pd.dim() - 3;
  const Tensor d0 = select(pd, c, 0), d1 = select(pd, c, 1), m0 = select(pm, c, 0), m1 = select(pm, c, 1);
  const Tensor i = full_complex({}, c128(0, 1), pd.dtype(), pd.device());
  const bool deg = dir == Direction::to_degree;
  const Tensor y0 = deg ? sub(d0, mul(i, m1)) : add(d0, mul(i, m1));
  const Tensor y1 = deg ? sub(neg(mul(i, m0)), d1) : sub(mul(i, m0), d1);
  return kernels::own_result(stack({y0, y1}, c));
}

const char* op_name(LegendreTableKind kind, Direction dir) {
  if (kind == LegendreTableKind::analysis)
    return dir == Direction::to_degree ? "vector_legendre_analysis" : "vector_legendre_analysis_backward";
  return dir == Direction::to_latitude ? "vector_legendre_synthesis" : "vector_legendre_synthesis_backward";
}

// x (..., 2, rows_in, mmax) -> (..., 2, rows_out, mmax); shapes already checked.
Tensor contract(const Tensor& x, const std::shared_ptr<const VectorTable>& tab, Direction dir) {
  const LegendreTableKey& key = tab->key;
  const int64_t rows_out = dir == Direction::to_degree ? key.lmax : key.nlat;
  Shape out_sizes(x.sizes().begin(), x.sizes().end() - 3);
  const int64_t B = numel_of(out_sizes);
  out_sizes.push_back(2);
  out_sizes.push_back(rows_out);
  out_sizes.push_back(key.order_count());
  // On CUDA: the dense GEMM form or the blocked-table kernels (legendre_blocked.h), each run once
  // with the D table and once with the M table, then combined.
  const bool composite = composite_path(x);
  const bool blocked = composite && device_sphere_form() == DeviceSphereForm::kernels;
  const bool gemm = composite && !blocked;
  const Tensor dense_d = gemm ? detail::dense_legendre_table(tab->d, x.device()) : Tensor();
  const Tensor dense_m = gemm ? detail::dense_legendre_table(tab->m, x.device()) : Tensor();
  const bool to_degree = dir == Direction::to_degree;
  Tensor out;
  if (numel_of(out_sizes) == 0) {
    out = empty(out_sizes, x.dtype(), x.device());
  } else if (gemm) {
    out = combine_contractions(dir, detail::legendre_contract_gemm(x, dense_d, to_degree),
                       detail::legendre_contract_gemm(x, dense_m, to_degree));
  } else if (blocked) {
    out = combine_contractions(dir, detail::legendre_contract_blocked(x, tab->d, to_degree),
                       detail::legendre_contract_blocked(x, tab->m, to_degree));
  } else {
    out = empty(out_sizes, x.dtype(), x.device());
    const Tensor xc = contiguous_copy(x);
    Tensor pd = empty(out_sizes, x.dtype(), x.device()), pm = empty(out_sizes, x.dtype(), x.device());
    dispatch_float(key.dtype, op_name(key.kind, dir), [&]<typename T>() {
      contract_kernel<T>(dir, xc.data<std::complex<T>>(), out.data<std::complex<T>>(), *tab, B,
                         pd.data<std::complex<T>>(), pm.data<std::complex<T>>());
    });
  }
  if (should_record({x}))
    record_op(op_name(key.kind, dir), {x}, {&out},
              {gemm ? dense_d : tab->d->values, gemm ? dense_m : tab->m->values}, {},
              [tab, dir](BackwardContext& ctx, const std::vector<Tensor>& g) {
                ctx.saved(0);  // throw if a table was overwritten since forward
                ctx.saved(1);
                return std::vector<Tensor>{contract(g[0], tab, flip(dir))};
              });
  return out;
}

// x must be (..., 2, rows, cols) of a complex (or real) dtype.
void check_vector_input(const Tensor& x, const char* op, const char* what, bool complex_input, const char* rows_name,
                        int64_t rows, const char* cols_name, int64_t cols, const ShtSpec& spec) {
  kernels::check_defined(x, op);
  const bool dtype_ok = complex_input ? is_complex(x.dtype()) : is_floating(x.dtype());
  GS_CHECK(dtype_ok && x.dim() >= 3 && x.size(-3) == 2 && x.size(-2) == rows && x.size(-1) == cols,
           "{}: expected {} of shape (..., 2, {} = {}, {} = {}) with dtype {} for {}, got {}", op, what, rows_name,
           rows, cols_name, cols, complex_input ? "c64 or c128" : "f32 or f64", spec.str(), x.meta_str());
}

void check_scalar_coeffs(const Tensor& c, const char* op) {
  kernels::check_defined(c, op);
  GS_CHECK(is_complex(c.dtype()) && c.dim() >= 2,
           "{}: expected spectral coefficients of shape (..., lmax, mmax) with dtype c64 or c128, got {}", op,
           c.meta_str());
}

// A constant (lmax, 1) tensor of `dtype` (complex) on `device` holding f(l): broadcasts over (..., lmax, mmax).
template <typename F>
Tensor degree_factor(int64_t lmax, DType dtype, Device device, F f) {
  std::vector<c128> v(static_cast<size_t>(lmax));
  for (int64_t l = 0; l < lmax; ++l) v[static_cast<size_t>(l)] = c128(f(static_cast<double>(l)), 0.0);
  const Tensor t = cast_copy(from_vector(v, Shape{lmax, 1}), dtype);
  return device.is_cpu() ? t : to(t, device);
}

void check_radius(double radius, const char* op) {
  GS_CHECK(std::isfinite(radius) && radius > 0, "{}: expected a finite radius > 0, got {}", op, radius);
}

}  // namespace

Tensor vector_legendre_analysis(const Tensor& X, const ShtSpec& spec) {
  const char* op = "vector_legendre_analysis";
  check_spec(spec, op, true);
  check_vector_input(X, op, "longitude Fourier coefficients", true, "nlat", spec.nlat, "mmax", spec.mmax, spec);
  return contract(X, table_cached(table_key(spec, LegendreTableKind::analysis, real_dtype(X.dtype()))),
                  Direction::to_degree);
}

Tensor vector_legendre_synthesis(const Tensor& coeffs, const ShtSpec& spec) {
  const char* op = "vector_legendre_synthesis";
  check_spec(spec, op, false);
  check_vector_input(coeffs, op, "vector coefficients", true, "lmax", spec.lmax, "mmax", spec.mmax, spec);
  return contract(coeffs, table_cached(table_key(spec, LegendreTableKind::synthesis, real_dtype(coeffs.dtype()))),
                  Direction::to_latitude);
}

Tensor vector_legendre_analysis_orders(const Tensor& X, const ShtSpec& spec, int64_t m_begin) {
  const char* op = "vector_legendre_analysis_orders";
  check_spec(spec, op, true);
  check_vector_input(X, op, "longitude Fourier coefficients", true, "nlat", spec.nlat, "orders", X.defined() ? X.size(-1) : 0, spec);
  detail::check_order_block(spec, m_begin, X.size(-1), op);
  if (X.size(-1) == 0) return pad(X, {0, 0, 0, spec.lmax - spec.nlat});
  return contract(X, table_cached(table_key(spec, LegendreTableKind::analysis, real_dtype(X.dtype()), m_begin, X.size(-1))),
                  Direction::to_degree);
}

Tensor vector_legendre_synthesis_orders(const Tensor& coeffs, const ShtSpec& spec, int64_t m_begin) {
  const char* op = "vector_legendre_synthesis_orders";
  check_spec(spec, op, false);
  check_vector_input(coeffs, op, "vector coefficients", true, "lmax", spec.lmax, "orders",
                     coeffs.defined() ? coeffs.size(-1) : 0, spec);
  detail::check_order_block(spec, m_begin, coeffs.size(-1), op);
  if (coeffs.size(-1) == 0) return pad(coeffs, {0, 0, 0, spec.nlat - spec.lmax});
  return contract(coeffs,
                  table_cached(table_key(spec, LegendreTableKind::synthesis, real_dtype(coeffs.dtype()), m_begin,
                                         coeffs.size(-1))),
                  Direction::to_latitude);
}

Tensor vector_sht(const Tensor& uv, const ShtSpec& spec) {
  check_spec(spec, "vector_sht", true);
  check_vector_input(uv, "vector_sht", "a real vector field (u eastward, v northward)", false, "nlat", spec.nlat,
                     "nlon", spec.nlon, spec);
  return vector_legendre_analysis(rfft_lon(uv, spec.mmax), spec);
}

Tensor ivector_sht(const Tensor& coeffs, const ShtSpec& spec) {
  check_spec(spec, "ivector_sht", false);
  check_vector_input(coeffs, "ivector_sht", "vector coefficients", true, "lmax", spec.lmax, "mmax", spec.mmax, spec);
  return irfft_lon(vector_legendre_synthesis(coeffs, spec), spec.nlon);
}

Tensor vorticity_divergence(const Tensor& uv, const ShtSpec& spec, double radius) {
  check_radius(radius, "vorticity_divergence");
  check_spec(spec, "vorticity_divergence", true);
  check_vector_input(uv, "vorticity_divergence", "winds (u eastward, v northward)", false, "nlat", spec.nlat, "nlon",
                     spec.nlon, spec);
  const Tensor c = vector_sht(uv, spec);
  return mul(c, degree_factor(spec.lmax, c.dtype(), c.device(), [&](double l) { return -l * (l + 1) / radius; }));
}

Tensor winds_from_vorticity_divergence(const Tensor& vd, const ShtSpec& spec, double radius) {
  const char* op = "winds_from_vorticity_divergence";
  check_radius(radius, op);
  check_spec(spec, op, false);
  check_vector_input(vd, op, "spectral vorticity and divergence", true, "lmax", spec.lmax, "mmax", spec.mmax, spec);
  const Tensor f = degree_factor(spec.lmax, vd.dtype(), vd.device(), [&](double l) { return l == 0 ? 0.0 : -radius / (l * (l + 1)); });
  return ivector_sht(mul(vd, f), spec);
}

Tensor spectral_laplacian(const Tensor& c, double radius) {
  check_radius(radius, "spectral_laplacian");
  check_scalar_coeffs(c, "spectral_laplacian");
  return mul(c, degree_factor(c.size(-2), c.dtype(), c.device(), [&](double l) { return -l * (l + 1) / (radius * radius); }));
}

Tensor inverse_spectral_laplacian(const Tensor& c, double radius) {
  check_radius(radius, "inverse_spectral_laplacian");
  check_scalar_coeffs(c, "inverse_spectral_laplacian");
  return mul(c, degree_factor(c.size(-2), c.dtype(), c.device(),
                              [&](double l) { return l == 0 ? 0.0 : -radius * radius / (l * (l + 1)); }));
}

Tensor spectral_gradient(const Tensor& c, const ShtSpec& spec, double radius) {
  const char* op = "spectral_gradient";
  check_radius(radius, op);
  check_spec(spec, op, false);
  check_scalar_coeffs(c, op);
  GS_CHECK(c.size(-2) == spec.lmax && c.size(-1) == spec.mmax,
           "{}: expected spectral coefficients of shape (..., lmax = {}, mmax = {}) for {}, got {}", op, spec.lmax,
           spec.mmax, spec.str(), c.meta_str());
  const Tensor t = mul(c, degree_factor(spec.lmax, c.dtype(), c.device(), [&](double) { return 1.0 / radius; }));
  return ivector_sht(stack({zeros_like(c), t}, c.dim() - 2), spec);
}

size_t vector_sht_table_bytes(const ShtSpec& spec, DType dtype, bool analysis, int64_t m_begin, int64_t m_count) {
  GS_CHECK(is_floating(dtype), "vector_sht_table_bytes: expected f32 or f64, got {}", dtype_name(dtype));
  if (m_count == 0) return 0;
  const auto kind = analysis ? LegendreTableKind::analysis : LegendreTableKind::synthesis;
  return table_cached(table_key(spec, kind, dtype, m_begin, m_count))->nbytes();
}

namespace {

using V = std::vector<Tensor>;
using detail::lmax_of, detail::mmax_of, detail::nlat_of, detail::nlon_of, detail::sample_spec_by_coeff_shape,
    detail::sample_spec_by_grid_shape, detail::sht_samples;

const OpRegistrar registrar{{
    {"vector_legendre_analysis", [](RandomKey k) { return sht_samples(k, DType::c128, true, nlat_of, mmax_of); },
     [](const V& x) { return V{vector_legendre_analysis(x[0], sample_spec_by_grid_shape(x[0]))}; }},
    {"vector_legendre_synthesis", [](RandomKey k) { return sht_samples(k, DType::c128, true, lmax_of, mmax_of); },
     [](const V& x) { return V{vector_legendre_synthesis(x[0], sample_spec_by_coeff_shape(x[0]))}; }},
    {"vector_sht", [](RandomKey k) { return sht_samples(k, DType::f64, true, nlat_of, nlon_of); },
     [](const V& x) { return V{vector_sht(x[0], sample_spec_by_grid_shape(x[0]))}; }},
    {"ivector_sht", [](RandomKey k) { return sht_samples(k, DType::c128, true, lmax_of, mmax_of); },
     [](const V& x) { return V{ivector_sht(x[0], sample_spec_by_coeff_shape(x[0]))}; }},
    {"vorticity_divergence", [](RandomKey k) { return sht_samples(k, DType::f64, true, nlat_of, nlon_of); },
     [](const V& x) { return V{vorticity_divergence(x[0], sample_spec_by_grid_shape(x[0]), 2.0)}; }},
    {"winds_from_vorticity_divergence", [](RandomKey k) { return sht_samples(k, DType::c128, true, lmax_of, mmax_of); },
     [](const V& x) { return V{winds_from_vorticity_divergence(x[0], sample_spec_by_coeff_shape(x[0]), 2.0)}; }},
    {"spectral_laplacian", [](RandomKey k) { return sht_samples(k, DType::c128, false, lmax_of, mmax_of); },
     [](const V& x) { return V{spectral_laplacian(x[0], 2.0)}; }},
    {"inverse_spectral_laplacian", [](RandomKey k) { return sht_samples(k, DType::c128, false, lmax_of, mmax_of); },
     [](const V& x) { return V{inverse_spectral_laplacian(x[0], 2.0)}; }},
    {"spectral_gradient", [](RandomKey k) { return sht_samples(k, DType::c128, false, lmax_of, mmax_of); },
     [](const V& x) { return V{spectral_gradient(x[0], sample_spec_by_coeff_shape(x[0]), 2.0)}; }},
}};

}  // namespace
}  // namespace gs::sphere
