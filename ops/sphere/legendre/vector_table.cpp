// Building the vector SHT's derivative tables (vector_table.h).
#include "ops/sphere/legendre/vector_table.h"

#include <cmath>
#include <string>
#include <vector>

#include "engine/keyed_cache.h"
#include "ops/sphere/grids.h"
#include "ops/sphere/legendre/functions.h"

namespace gs::sphere {
namespace {

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

KeyedCache<LegendreTableKey, VectorTable>& cache() {
  // Never destroyed: tables may be looked up during static destruction.
  static auto* c = new KeyedCache<LegendreTableKey, VectorTable>(build_table, [](const VectorTable& t) { return t.nbytes(); });
  return *c;
}

}  // namespace

std::shared_ptr<const VectorTable> vector_table_cached(const LegendreTableKey& key) { return cache().get(key.canonical()); }

size_t clear_vector_tables() { return cache().clear(); }

}  // namespace gs::sphere
