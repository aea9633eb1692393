// The Legendre contraction (contraction.h): resolve the tables, pick the path (path.h), run it,
// record it with the opposite direction as its backward.
#include "ops/sphere/legendre/contraction.h"

#include <omp.h>

#include <complex>
#include <memory>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/shape_ops.h"
#include "ops/sphere/fft.h"
#include "ops/sphere/legendre/blocked.h"
#include "ops/sphere/legendre/gemm.h"
#include "ops/sphere/legendre/path.h"
#include "ops/sphere/legendre/recurrence.h"
#include "ops/sphere/legendre/table_kernels.h"
#include "ops/sphere/legendre/vector_table.h"
#include "ops/view.h"

namespace gs::sphere::legendre {
namespace {

using TablePtr = std::shared_ptr<const LegendreTable>;

// The tables a contraction reads: Pbar for scalar data; D and M for vector data.
struct Tables {
  TablePtr first, second;
  bool empty() const { return !first; }
};

Tables resolve(const TableRef& ref) {
  if (ref.components == Components::scalar) return {legendre_table_cached(ref.key), nullptr};
  const std::shared_ptr<const VectorTable> v = vector_table_cached(ref.key);
  return {v->d, v->m};
}

const char* op_name(const TableRef& ref, Direction dir) {
  const bool vec = ref.components == Components::vector;
  if (ref.key.kind == LegendreTableKind::analysis) {
    if (dir == Direction::to_degree) return vec ? "vector_legendre_analysis" : "legendre_analysis";
    return vec ? "vector_legendre_analysis_backward" : "legendre_analysis_backward";
  }
  if (dir == Direction::to_latitude) return vec ? "vector_legendre_synthesis" : "legendre_synthesis";
  return vec ? "vector_legendre_synthesis_backward" : "legendre_synthesis_backward";
}

// ---- the vector combination: pd, pm are the contractions of both components with D and with M
//   to_degree:   y0 = d0 - i m1,   y1 = -i m0 - d1
//   to_latitude: y0 = d0 + i m1,   y1 =  i m0 - d1

// In plain loops, for the CPU table path: pd, pm and out are (B, 2, plane) contiguous.
template <typename T>
void combine_loops(Direction dir, const std::complex<T>* pd, const std::complex<T>* pm, std::complex<T>* out,
                   int64_t B, int64_t plane) {
  using C = std::complex<T>;
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

// With tensor ops, for the device paths: pd, pm (..., 2, rows, orders).
Tensor combine_tensors(Direction dir, const Tensor& pd, const Tensor& pm) {
  NoGradGuard no_grad;
  const int64_t c = pd.dim() - 3;
  const Tensor d0 = select(pd, c, 0), d1 = select(pd, c, 1), m0 = select(pm, c, 0), m1 = select(pm, c, 1);
  const Tensor i = full_complex({}, c128(0, 1), pd.dtype(), pd.device());
  const bool deg = dir == Direction::to_degree;
  const Tensor y0 = deg ? sub(d0, mul(i, m1)) : add(d0, mul(i, m1));
  const Tensor y1 = deg ? sub(neg(mul(i, m0)), d1) : sub(mul(i, m0), d1);
  return kernels::own_result(stack({y0, y1}, c));
}

// ---- the paths. x is (fields, rows_in, orders) after the leading dims are flattened by the
// kernels themselves; `out_sizes` is the result's shape.

// The CPU's native kernels: the table kernels (both components of a vector field as one batch of
// 2B fields, once per table, then combined) or, for scalar data, the on-the-fly recurrence.
// `out` is contiguous, of shape out_sizes.
void run_cpu(const Tensor& x, const TableRef& ref, const Tables& tabs, Direction dir, const Shape& out_sizes,
             bool recurrence, const Tensor& out) {
  const Tensor xc = contiguous_copy(x);
  const int64_t rows_out = out_sizes[out_sizes.size() - 2], orders = out_sizes.back();
  const int64_t fields = out.numel() / (rows_out * orders);  // 2B for vector data
  const bool to_degree = dir == Direction::to_degree;
  dispatch_float(ref.key.dtype, op_name(ref, dir), [&]<typename T>() {
    const std::complex<T>* in = xc.data<std::complex<T>>();
    std::complex<T>* o = out.data<std::complex<T>>();
    auto table_pass = [&](const LegendreTable& t, std::complex<T>* dst) {
      if (to_degree) table_to_degree(t, in, dst, fields);
      else table_to_latitude(t, in, dst, fields);
    };
    if (recurrence) {
      const std::shared_ptr<const RecurrencePlan> plan = recurrence_plan_cached(ref.key);
      if (to_degree) recurrence_to_degree(*plan, in, o, fields);
      else recurrence_to_latitude(*plan, in, o, fields);
    } else if (ref.components == Components::scalar) {
      table_pass(*tabs.first, o);
    } else {
      const Tensor pd = empty(out_sizes, x.dtype(), x.device()), pm = empty(out_sizes, x.dtype(), x.device());
      table_pass(*tabs.first, pd.data<std::complex<T>>());
      table_pass(*tabs.second, pm.data<std::complex<T>>());
      combine_loops<T>(dir, pd.data<std::complex<T>>(), pm.data<std::complex<T>>(), o, fields / 2, rows_out * orders);
    }
  });
}

// The device forms: one contraction per table, then the vector combination.
Tensor run_device(const Tensor& x, const TableRef& ref, const Tables& tabs, Direction dir, ContractionPath path,
                  const std::vector<Tensor>& dense) {
  const bool to_degree = dir == Direction::to_degree;
  auto one = [&](const TablePtr& t, const Tensor& d) {
    return path == ContractionPath::device_gemm ? detail::legendre_contract_gemm(x, d, to_degree)
                                                : detail::legendre_contract_blocked(x, t, to_degree);
  };
  if (ref.components == Components::scalar) return one(tabs.first, dense.empty() ? Tensor() : dense[0]);
  return combine_tensors(dir, one(tabs.first, dense.empty() ? Tensor() : dense[0]),
                         one(tabs.second, dense.empty() ? Tensor() : dense[1]));
}

// The result's shape and the number of fields (of vector fields: pairs of components) of x.
Shape result_sizes(const Tensor& x, const TableRef& ref, Direction dir, int64_t* batch) {
  const bool vec = ref.components == Components::vector;
  Shape out_sizes(x.sizes().begin(), x.sizes().end() - 2);
  *batch = numel_of(Shape(x.sizes().begin(), x.sizes().end() - (vec ? 3 : 2)));
  out_sizes.push_back(dir == Direction::to_degree ? ref.key.lmax : ref.key.nlat);
  out_sizes.push_back(ref.key.order_count());
  return out_sizes;
}

// `held`: the tables of the forward, reused by its backward (whose path is chosen afresh).
Tensor contract_with(const Tensor& x, const TableRef& ref, Direction dir, Tables held) {
  const LegendreTableKey& key = ref.key;
  const bool vec = ref.components == Components::vector;
  int64_t batch = 0;
  const Shape out_sizes = result_sizes(x, ref, dir, &batch);

  const ContractionPath path = legendre_contraction_path(x, key, batch, vec);
  Tables tabs;
  if (path != ContractionPath::cpu_recurrence) tabs = held.empty() ? resolve(ref) : std::move(held);
  // What backward checks for writes since forward: the tables read (for the GEMM form, the dense
  // copies it multiplied with).
  std::vector<Tensor> saved;
  for (const TablePtr& t : {tabs.first, tabs.second}) {
    if (!t) continue;
    saved.push_back(path == ContractionPath::device_gemm ? detail::dense_legendre_table(t, x.device()) : t->values);
  }
  Tensor out;
  if (numel_of(out_sizes) == 0) {
    out = empty(out_sizes, x.dtype(), x.device());
  } else if (path == ContractionPath::device_gemm || path == ContractionPath::device_kernels) {
    out = run_device(x, ref, tabs, dir, path, path == ContractionPath::device_gemm ? saved : std::vector<Tensor>{});
  } else {
    out = empty(out_sizes, x.dtype(), x.device());
    run_cpu(x, ref, tabs, dir, out_sizes, path == ContractionPath::cpu_recurrence, out);
  }
  if (should_record({x})) {
    record_op(op_name(ref, dir), {x}, {&out}, saved, {},
              [ref, dir, tabs, n = saved.size()](BackwardContext& ctx, const std::vector<Tensor>& g) {
                for (size_t k = 0; k < n; ++k) ctx.saved(k);  // throws if a table was overwritten since forward
                return std::vector<Tensor>{contract_with(g[0], ref, flip(dir), tabs)};
              });
  }
  return out;
}

}  // namespace

Tensor contract(const Tensor& x, const TableRef& table, Direction dir) {
  TableRef ref = table;
  ref.key = ref.key.canonical();
  return contract_with(x, ref, dir, Tables{});
}

void contract_into(const Tensor& x, const TableRef& table, Direction dir, const Tensor& out) {
  TableRef ref = table;
  ref.key = ref.key.canonical();
  int64_t batch = 0;
  const Shape out_sizes = result_sizes(x, ref, dir, &batch);
  GS_CHECK(out.sizes() == out_sizes && out.dtype() == x.dtype() && out.is_contiguous(),
           "legendre contract_into: expected a contiguous {} output of shape {}, got {}", dtype_name(x.dtype()),
           shape_str(out_sizes), out.meta_str());
  const ContractionPath path = legendre_contraction_path(x, ref.key, batch, ref.components == Components::vector);
  GS_CHECK(path == ContractionPath::cpu_table || path == ContractionPath::cpu_recurrence,
           "legendre contract_into: expected data that takes a CPU path, got {} (path {})", x.meta_str(),
           contraction_path_name(path));
  if (out.numel() == 0) return;
  const Tables tabs = path == ContractionPath::cpu_table ? resolve(ref) : Tables{};
  run_cpu(x, ref, tabs, dir, out_sizes, path == ContractionPath::cpu_recurrence, out);
}

bool takes_groups(const Tensor& x, const LegendreTableKey& key, int64_t batch) {
  return legendre_contraction_path(x, key.canonical(), batch, false) == ContractionPath::cpu_recurrence;
}

void contract_groups(const LegendreTableKey& key, Direction dir, const Tensor& groups, const Tensor& spectral) {
  const LegendreTableKey k = key.canonical();
  const bool placed = groups.defined() && spectral.defined() && is_floating(groups.dtype());
  const int64_t batch = placed && spectral.dim() == 3 ? spectral.size(0) : -1;
  const bool ok = batch >= 0 &&
                  groups.sizes() == detail::grouped_spectra_shape(batch, k.nlat, k.mmax, groups.dtype()) &&
                  spectral.size(1) == k.lmax && spectral.size(2) == k.mmax &&
                  k.all_orders() && spectral.dtype() == complex_dtype(groups.dtype()) && groups.is_contiguous() &&
                  spectral.is_contiguous() && groups.device().type == DeviceType::cpu &&
                  spectral.device().type == DeviceType::cpu;
  GS_CHECK(ok,
           "legendre contract_groups: expected contiguous CPU groups (B, ceil(nlat = {} / L), 2 mmax = {}, L) and "
           "spectral (B, lmax = {}, mmax = {}) of one precision, groups real (L = 64 bytes of it), for every "
           "order, got {} and {}",
           k.nlat, 2 * k.mmax, k.lmax, k.mmax, groups.defined() ? groups.meta_str() : "an undefined tensor",
           spectral.defined() ? spectral.meta_str() : "an undefined tensor");
  if (batch == 0) return;
  const std::shared_ptr<const RecurrencePlan> plan = recurrence_plan_cached(k);
  dispatch_float(groups.dtype(), "legendre contract_groups", [&]<typename R>() {
    using C = std::complex<R>;
    if (dir == Direction::to_degree) recurrence_to_degree_groups(*plan, groups.data<R>(), spectral.data<C>(), batch);
    else recurrence_to_latitude_groups(*plan, spectral.data<C>(), groups.data<R>(), batch);
  });
}

size_t table_bytes(const TableRef& table) {
  const Tables t = resolve({table.key.canonical(), table.components});
  return t.first->nbytes() + (t.second ? t.second->nbytes() : 0);
}

}  // namespace gs::sphere::legendre

namespace gs::sphere {

size_t clear_legendre_cache() {
  return clear_legendre_tables() + clear_vector_tables() + clear_recurrence_plans() +
         detail::clear_dense_legendre_tables() + detail::clear_device_blocked_tables();
}

}  // namespace gs::sphere
