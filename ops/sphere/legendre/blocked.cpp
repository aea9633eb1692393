// The blocked-table Legendre contractions' host side (blocked.h): the per-device copies of a
// table, and the CPU loops and CUDA launches over blocked_math.h.
#include "ops/sphere/legendre/blocked.h"

#include <omp.h>
#include <utility>
#include <vector>

#include "engine/cuda_runtime.h"
#include "engine/factory.h"
#include "engine/keyed_cache.h"
#include "ops/kernels.h"
#include "ops/sphere/legendre/blocked_cuda.h"
#include "ops/sphere/legendre/blocked_math.h"
#include "ops/view.h"

namespace gs::sphere {
namespace {

// A table's arrays on one device (the CPU reads the table's own), cached per (table id, CUDA
// device index) until clear_legendre_cache.
struct DeviceTable {
  Tensor values, block_offset, block_first_row;
  size_t nbytes() const {
    return static_cast<size_t>(values.numel()) * dtype_size(values.dtype()) +
           static_cast<size_t>(block_offset.numel() + block_first_row.numel()) * sizeof(int64_t);
  }
};
using DeviceKey = std::pair<uint64_t, int>;

KeyedCache<DeviceKey, DeviceTable>& device_tables() {
  static auto* c = new KeyedCache<DeviceKey, DeviceTable>([](const DeviceTable& d) { return d.nbytes(); });
  return *c;
}

Tensor int64_tensor(const std::vector<int64_t>& v) { return from_vector(v, Shape{static_cast<int64_t>(v.size())}); }

std::shared_ptr<const DeviceTable> copy_to_device(const LegendreTable& tab, Device device) {
  DeviceTable d{to(tab.values, device), to(int64_tensor(tab.block_offset), device),
                to(int64_tensor(tab.block_first_row), device)};
  // The copies ran on this thread's current stream; other threads' streams read them from the
  // cache next, so they must be complete first (once per table and device).
  cuda::synchronize(device);
  const std::string why = "the device copy of a Legendre table (" + tab.key.str() + ") is a cached constant";
  for (Tensor* t : {&d.values, &d.block_offset, &d.block_first_row}) t->storage()->set_read_only(why);
  return std::make_shared<const DeviceTable>(std::move(d));
}

std::shared_ptr<const DeviceTable> device_table(const std::shared_ptr<const LegendreTable>& tab, Device device) {
  return device_tables().get({tab->id, device.index}, [&](const DeviceKey&) { return copy_to_device(*tab, device); });
}

template <typename R>
blocked::TableView<R> host_view(const LegendreTable& tab) {
  const LegendreTableKey& k = tab.key;
  return {static_cast<const R*>(tab.values.raw_data()), tab.block_offset.data(), tab.block_first_row.data(), tab.lanes, tab.n_even,
          tab.n_odd, k.nlat, k.lmax, k.m_begin, k.order_count(), tab.parity};
}

// The CPU loops: every output value through the same functions as the CUDA threads.
template <typename R>
void host_contract(const LegendreTable& tab, const R* in, R* out, int64_t batch, bool to_degree) {
  const blocked::TableView<R> t = host_view<R>(tab);
  const int64_t n = batch * (to_degree ? t.lmax : t.n_even) * t.orders;
#pragma omp parallel for schedule(static) if (n > 4096)
  for (int64_t i = 0; i < n; ++i) {
    if (to_degree) blocked::to_degree_at(t, in, out, i);
    else blocked::to_latitude_at(t, in, out, i);
  }
}

void cuda_contract(const std::shared_ptr<const LegendreTable>& tab, const Tensor& in, const Tensor& out,
                   int64_t batch, bool to_degree) {
  const char* kernel = to_degree ? "legendre_blocked_to_degree" : "legendre_blocked_to_latitude";
  kernels::launch_cuda("legendre_contract_blocked", kernel, in, [&](void* stream) {
    const std::shared_ptr<const DeviceTable> d = device_table(tab, in.device());
    const LegendreTableKey& k = tab->key;
    [[maybe_unused]] const cuda_kernels::BlockedTableArgs args{d->values.raw_data(), d->block_offset.device_data<int64_t>(),
                                              d->block_first_row.device_data<int64_t>(), tab->lanes, tab->n_even,
                                              tab->n_odd, k.nlat, k.lmax, k.m_begin, k.order_count(), tab->parity};
    return to_degree
               ? GS_CUDA_CALL(cuda_kernels::legendre_blocked_to_degree(k.dtype, args, in.raw_data(), out.raw_data(), batch, stream))
               : GS_CUDA_CALL(cuda_kernels::legendre_blocked_to_latitude(k.dtype, args, in.raw_data(), out.raw_data(), batch, stream));
  });
}

}  // namespace

namespace detail {

Tensor legendre_contract_blocked(const Tensor& x, const std::shared_ptr<const LegendreTable>& tab, bool to_degree) {
  const LegendreTableKey& k = tab->key;
  const int64_t M = k.order_count(), rows_in = to_degree ? k.nlat : k.lmax, rows_out = to_degree ? k.lmax : k.nlat;
  GS_CHECK(is_complex(x.dtype()) && real_dtype(x.dtype()) == k.dtype && x.dim() >= 2 && x.size(-2) == rows_in &&
               x.size(-1) == M,
           "legendre_contract_blocked: expected x (..., {}, {}) of the complex dtype of the table ({}), got {}",
           rows_in, M, k.str(), x.meta_str());
  Shape out_sizes(x.sizes().begin(), x.sizes().end() - 2);
  const int64_t batch = numel_of(out_sizes);
  out_sizes.push_back(rows_out);
  out_sizes.push_back(M);
  Tensor out = empty(out_sizes, x.dtype(), x.device());
  if (out.numel() == 0) return out;
  const Tensor xc = contiguous_copy(x);
  if (kernels::on_cuda(x)) {
    cuda_contract(tab, xc, out, batch, to_degree);
  } else {
    kernels::check_cpu(x, "legendre_contract_blocked");
    dispatch_float(k.dtype, "legendre_contract_blocked", [&]<typename R>() {
      host_contract<R>(*tab, static_cast<const R*>(xc.raw_data()), static_cast<R*>(out.raw_data()), batch, to_degree);
    });
  }
  return out;
}

size_t clear_device_blocked_tables() { return device_tables().clear(); }

}  // namespace detail
}  // namespace gs::sphere
