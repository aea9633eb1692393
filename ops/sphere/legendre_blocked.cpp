// The blocked-table Legendre contractions' host side (legendre_blocked.h): the per-device copies
// of a table, and the CPU loops and CUDA launches over legendre_blocked_math.h.
#include "ops/sphere/legendre_blocked.h"

#include <map>
#include <mutex>
#include <omp.h>
#include <utility>
#include <vector>

#include "engine/cuda_runtime.h"
#include "engine/factory.h"
#include "gradsphere_config.h"
#include "ops/kernels.h"
#include "ops/sphere/legendre_blocked_cuda.h"
#include "ops/sphere/legendre_blocked_math.h"
#include "ops/view.h"

namespace gs::sphere {
namespace {

// A table's arrays on one device. The CPU reads the table's own arrays.
struct DeviceTable {
  std::weak_ptr<const LegendreTable> table;
  Tensor values, block_offset, block_first_row;
};

struct DeviceTableCache {
  std::mutex mutex;
  std::map<std::pair<const LegendreTable*, int>, DeviceTable> entries;  // (table, CUDA device index)
};
DeviceTableCache& device_tables() {
  static DeviceTableCache c;
  return c;
}

Tensor int64_tensor(const std::vector<int64_t>& v) { return from_vector(v, Shape{static_cast<int64_t>(v.size())}); }

DeviceTable device_table(const std::shared_ptr<const LegendreTable>& tab, Device device) {
  DeviceTableCache& c = device_tables();
  std::lock_guard<std::mutex> lock(c.mutex);
  // Entries of tables that are gone free their device memory, and a new table at the same address
  // is not mistaken for the old one.
  std::erase_if(c.entries, [](const auto& e) { return e.second.table.expired(); });
  const auto key = std::make_pair(tab.get(), device.index);
  if (auto it = c.entries.find(key); it != c.entries.end()) return it->second;
  DeviceTable d{tab, to(tab->values, device), to(int64_tensor(tab->block_offset), device),
                to(int64_tensor(tab->block_first_row), device)};
  // The copies ran on this thread's current stream; other threads' streams read them from the
  // cache next, so they must be complete first (once per table and device).
  cuda::synchronize(device);
  const std::string why = "the device copy of a Legendre table (" + tab->key.str() + ") is a cached constant";
  for (Tensor* t : {&d.values, &d.block_offset, &d.block_first_row}) t->storage()->set_read_only(why);
  c.entries[key] = d;
  return d;
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
#if GS_HAVE_CUDA
  const char* name = "legendre_contract_blocked";
  const DeviceTable d = device_table(tab, in.device());
  const LegendreTableKey& k = tab->key;
  const cuda_kernels::BlockedTableArgs args{d.values.raw_data(), d.block_offset.device_data<int64_t>(),
                                            d.block_first_row.device_data<int64_t>(), tab->lanes, tab->n_even, tab->n_odd,
                                            k.nlat, k.lmax, k.m_begin, k.order_count(), tab->parity};
  void* stream = kernels::cuda_stream(in, name);
  const bool ok = to_degree
                      ? cuda_kernels::legendre_blocked_to_degree(k.dtype, args, in.raw_data(), out.raw_data(), batch, stream)
                      : cuda_kernels::legendre_blocked_to_latitude(k.dtype, args, in.raw_data(), out.raw_data(), batch, stream);
  GS_CHECK(ok, "{}: expected an f32 or f64 table, got {}", name, dtype_name(k.dtype));
  cuda::check_launch(to_degree ? "legendre_blocked_to_degree" : "legendre_blocked_to_latitude", name);
#else
  fail("legendre_contract_blocked: {} needs CUDA, and this gradsphere was built without it", in.device());
#endif
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

size_t clear_device_blocked_tables() {
  DeviceTableCache& c = device_tables();
  std::lock_guard<std::mutex> lock(c.mutex);
  size_t bytes = 0;
  for (const auto& [key, e] : c.entries)
    bytes += static_cast<size_t>(e.values.numel()) * dtype_size(e.values.dtype()) +
             static_cast<size_t>(e.block_offset.numel() + e.block_first_row.numel()) * sizeof(int64_t);
  c.entries.clear();
  return bytes;
}

}  // namespace detail
}  // namespace gs::sphere
