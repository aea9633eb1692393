// Dense Legendre tables and the GEMM form of the contractions (gemm.h).
#include "ops/sphere/legendre/gemm.h"

#include <utility>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/cuda_runtime.h"
#include "engine/factory.h"
#include "engine/keyed_cache.h"
#include "ops/complex_ops.h"
#include "ops/kernels.h"
#include "ops/linalg.h"
#include "ops/view.h"

namespace gs::sphere::detail {
namespace {

template <typename T>
std::vector<T> dense_values(const LegendreTable& tab) {
  const LegendreTableKey& k = tab.key;
  const int64_t M = k.order_count(), L = k.lmax, N = k.nlat;
  std::vector<T> dense(static_cast<size_t>(M * L * N), T(0));
  const T* v = tab.values.data<T>();
  for (int64_t mi = 0; mi < M; ++mi) {
    const int64_t m = k.m_begin + mi;
    for (int64_t l = m; l < L; ++l) {
      // T(-x) = (-1)^{l-m} T(x) for parity 0, the opposite sign for parity 1.
      const T mirror = T(((l - m) % 2 == 0) == (tab.parity == 0) ? 1 : -1);
      T* row = dense.data() + (mi * L + l) * N;
      for (int64_t j = 0; j < tab.n_even; ++j) {
        const int64_t idx = tab.index(m, l, j);
        if (idx < 0) continue;
        row[j] = v[idx];
        if (N - 1 - j != j) row[N - 1 - j] = mirror * v[idx];
      }
    }
  }
  return dense;
}

// One dense copy per (table id, device index; -1 for the CPU).
using DenseKey = std::pair<uint64_t, int>;
struct DenseTable {
  Tensor values;
};
KeyedCache<DenseKey, DenseTable>& dense_cache() {
  static auto* c = new KeyedCache<DenseKey, DenseTable>(
      [](const DenseTable& d) { return static_cast<size_t>(d.values.numel()) * dtype_size(d.values.dtype()); });
  return *c;
}

std::shared_ptr<const DenseTable> build_dense(const LegendreTable& tab, Device device) {
  const LegendreTableKey& k = tab.key;
  Tensor host;
  dispatch_float(k.dtype, "dense Legendre table", [&]<typename T>() {
    host = from_vector(dense_values<T>(tab), Shape{k.order_count(), k.lmax, k.nlat});
  });
  Tensor dense = host;
  if (!device.is_cpu()) {
    dense = to(host, device);
    // The copy ran on this thread's current stream; other threads' streams read the table from
    // the cache next, so it must be complete first (once per table and device).
    cuda::synchronize(device);
  }
  dense.storage()->set_read_only("the dense Legendre table (" + k.str() +
                                 ") is a cached constant shared by every transform with this spec");
  return std::make_shared<const DenseTable>(DenseTable{dense});
}

}  // namespace

Tensor dense_legendre_table(const std::shared_ptr<const LegendreTable>& tab, Device device) {
  const DenseKey key{tab->id, device.is_cpu() ? -1 : device.index};
  return dense_cache().get(key, [&](const DenseKey&) { return build_dense(*tab, device); })->values;
}

size_t clear_dense_legendre_tables() { return dense_cache().clear(); }

Tensor legendre_contract_gemm(const Tensor& x, const Tensor& dense, bool to_degree) {
  NoGradGuard no_grad;
  const int64_t M = dense.size(0), L = dense.size(1), N = dense.size(2);
  const int64_t rows_in = to_degree ? N : L, rows_out = to_degree ? L : N;
  GS_CHECK(is_complex(x.dtype()) && real_dtype(x.dtype()) == dense.dtype() && x.dim() >= 2 &&
               x.size(-2) == rows_in && x.size(-1) == M,
           "legendre_contract_gemm: expected x (..., {}, {}) of the complex dtype of the {} table, got {}", rows_in,
           M, dtype_name(dense.dtype()), x.meta_str());
  kernels::check_same_device(x, dense, "legendre_contract_gemm");
  Shape out_sizes(x.sizes().begin(), x.sizes().end() - 2);
  const int64_t B = numel_of(out_sizes);
  out_sizes.push_back(rows_out);
  out_sizes.push_back(M);
  // Per order m: out_m (rows_out, 2B) = T_m (or T_m^T) @ x_m (rows_in, 2B), the real and imaginary
  // parts of the B fields as 2B real columns.
  const Tensor cols = reshape(contiguous(permute(view_as_real(reshape(x, {B, rows_in, M})), {2, 1, 0, 3})),
                              {M, rows_in, 2 * B});
  const Tensor prod = matmul(to_degree ? dense : transpose(dense, 1, 2), cols);  // (M, rows_out, 2B)
  const Tensor back = contiguous(permute(reshape(prod, {M, rows_out, B, 2}), {2, 1, 0, 3}));
  return kernels::own_result(reshape(view_as_complex(back), out_sizes));  // back is this op's own
}

}  // namespace gs::sphere::detail
