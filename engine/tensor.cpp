#include "engine/tensor.h"

#include <cstring>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/cuda_runtime.h"
#include "engine/object_pool.h"
#include "engine/strided_index.h"
#include "engine/strided_loop.h"
#include "engine/tensor_cuda.h"
#include "gradsphere_config.h"

namespace gs {

// ---- metadata
int64_t Tensor::size(int64_t d) const { return impl_->sizes[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return impl_->strides[wrap_dim(d, dim(), "stride")]; }
Tensor Tensor::view_base() const { return Tensor(impl_->view_base); }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element to be out of place (as PyTorch)
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (impl_->sizes[d] == 1) continue;
    if (impl_->strides[d] != expected) return false;
    expected *= impl_->sizes[d];
  }
  return true;
}

std::string Tensor::meta_str(bool with_name) const {
  if (!defined()) return "an undefined tensor";
  std::string meta = fmt::format("{} {} on {}", dtype_name(dtype()), shape_str(sizes()), device().str());
  return !with_name || name().empty() ? meta : fmt::format("'{}' {}", name(), meta);
}

void Tensor::check_data_access(DType want, const char* fn, bool host) const {
  GS_CHECK(defined(), "{}<{}>() called on an undefined tensor", fn, dtype_name(want));
  GS_CHECK(want == dtype(), "{}<{}>() called on a {} tensor", fn, dtype_name(want), dtype_name(dtype()));
  GS_CHECK(!host || device().is_cpu(),
           "{}<{}>() called on a tensor on {} ({}): its memory is not addressable from the host; copy it first "
           "with to(t, Device::cpu()) or read it with to_vector()",
           fn, dtype_name(want), device(), meta_str());
}

void* Tensor::raw_data() const {
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * static_cast<int64_t>(dtype_size(dtype()));
}

template <typename T>
T Tensor::item() const {
  GS_CHECK(defined(), "item(): the tensor is undefined");
  GS_CHECK(numel() == 1, "item(): expected a tensor with one element, got shape {}", shape_str(sizes()));
  return to_vector<T>()[0];
}

template <typename To>
std::vector<To> Tensor::to_vector() const {
  GS_CHECK(defined(), "to_vector(): the tensor is undefined");
  Tensor c = contiguous_copy(device().is_cpu() ? *this : to_device_copy(*this, Device::cpu()));
  std::vector<To> out(static_cast<size_t>(numel()));
  dispatch_storage(dtype(), "to_vector", [&]<typename From>() {
    const From* p = c.data<From>();
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (is_complex_v<From> && !is_complex_v<To>) {
        out[i] = static_cast<To>(p[i].real());
      } else if constexpr (is_complex_v<To> && !is_complex_v<From>) {
        out[i] = To(static_cast<real_t<To>>(p[i]));
      } else {
        out[i] = static_cast<To>(p[i]);
      }
    }
  });
  return out;
}

#define GS_INSTANTIATE(T)                             \
  template T Tensor::item<T>() const;                 \
  template std::vector<T> Tensor::to_vector<T>() const;
GS_INSTANTIATE(float)
GS_INSTANTIATE(double)
GS_INSTANTIATE(c64)
GS_INSTANTIATE(c128)
GS_INSTANTIATE(int64_t)
GS_INSTANTIATE(bool)
GS_INSTANTIATE(bfloat16)
#undef GS_INSTANTIATE

// ---- autograd state

Tensor& Tensor::set_requires_grad(bool r) {
  GS_CHECK(defined(), "set_requires_grad: the tensor is undefined");
  GS_CHECK(is_leaf(), "set_requires_grad: only leaf tensors can be changed; this {} tensor was computed by '{}' "
           "(use detach() to get a new leaf)", meta_str(), grad_fn()->name());
  GS_CHECK(!r || !is_storage_only(dtype()),
           "set_requires_grad: a {} tensor cannot be a leaf that requires gradients (bf16 is storage only); keep the "
           "f32 master copy as the leaf and cast it with to(t, DType::bf16), whose gradient comes back in f32",
           meta_str());
  GS_CHECK(!r || is_differentiable(dtype()),
           "set_requires_grad: only floating and complex tensors can require gradients, got {}", dtype_name(dtype()));
  impl_->meta().requires_grad = r;
  return *this;
}




Tensor Tensor::grad() const { return impl_->autograd ? impl_->autograd->grad : Tensor(); }

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined()) {
    GS_CHECK(g.sizes() == sizes() && g.dtype() == dtype(),
             "set_grad: the gradient must match the tensor: expected {}, got {}", meta_str(), g.meta_str());
  }
  impl_->meta().grad = g;
}

void Tensor::register_hook(TensorHook hook) const {
  GS_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that does not require grad ({})",
           meta_str());
  if (is_leaf()) {
    impl_->meta().leaf_hooks.push_back(std::move(hook));
  } else {
    grad_fn()->add_tensor_pre_hook(output_nr(), std::move(hook));
  }
}

void Tensor::register_post_accumulate_grad_hook(PostAccumulateHook hook) const {
  GS_CHECK(is_leaf() && requires_grad(),
           "register_post_accumulate_grad_hook: expected a leaf that requires grad, got a {} {}",
           is_leaf() ? "leaf that does not require grad," : "non-leaf", meta_str());
  impl_->meta().post_accumulate_hooks.push_back(std::move(hook));
}

void Tensor::retain_grad() const {
  GS_CHECK(requires_grad(), "retain_grad: the tensor does not require grad ({})", meta_str());
  if (is_leaf()) return;  // leaves keep .grad anyway
  grad_fn()->add_retained_grad(output_nr(), impl_);
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>(impl_->storage, impl_->sizes, impl_->strides, impl_->offset, impl_->dtype);
  impl->view_base = impl_->view_base ? impl_->view_base : impl_;
  impl->detached_alias = true;
  return Tensor(impl);
}

const std::string& Tensor::name() const {
  static const std::string none;
  return impl_->autograd ? impl_->autograd->name : none;
}

Tensor& Tensor::set_name(std::string n) {
  impl_->meta().name = std::move(n);
  return *this;
}

// ---- construction
AutogradMeta* make_autograd_meta() { return ::new (detail::pool_allocate(sizeof(AutogradMeta))) AutogradMeta(); }
void AutogradMetaDelete::operator()(AutogradMeta* m) const {
  m->~AutogradMeta();
  detail::pool_free(m, sizeof(AutogradMeta));
}

Tensor empty(const Shape& sizes, DType dtype, Device device) {
  for (auto s : sizes) GS_CHECK(s >= 0, "empty: sizes must be non-negative, got {}", shape_str(sizes));
  // Both headers from the per-thread pool (engine/object_pool.h): every op output is made here.
  auto storage = std::allocate_shared<StorageImpl>(PoolAllocator<StorageImpl>(), numel_of(sizes) * dtype_size(dtype),
                                                   device);
  return Tensor(std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>(), std::move(storage), sizes,
                                                 contiguous_strides(sizes), 0, dtype));
}

Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.dtype(), t.device()); }

Tensor alias_with_geometry(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  return alias_with_geometry(base, std::move(sizes), std::move(strides), offset, base.dtype());
}

Tensor alias_with_geometry(const Tensor& base, Shape sizes, Shape strides, int64_t offset, DType dtype) {
  auto impl = std::make_shared<TensorImpl>(base.storage(), std::move(sizes), std::move(strides), offset, dtype);
  impl->view_base = base.impl()->view_base ? base.impl()->view_base : base.impl_ptr();
  impl->view_version = base.version();
  impl->view_made_recording = recording_enabled();
  return Tensor(impl);
}

namespace {

template <typename To, typename From>
To convert(From v) {
  if constexpr (is_complex_v<From> && !is_complex_v<To>) {
    return static_cast<To>(v.real());
  } else if constexpr (is_complex_v<To> && !is_complex_v<From>) {
    return To(static_cast<real_t<To>>(v));
  } else {
    return static_cast<To>(v);
  }
}

// dst and src share dst's shape (src already expanded to it).
void strided_convert(const Tensor& dst, const Tensor& src_expanded) {
  dispatch_storage(dst.dtype(), "copy", [&]<typename To>() {
    dispatch_storage(src_expanded.dtype(), "copy", [&]<typename From>() {
      To* d = static_cast<To*>(dst.storage()->data());
      const From* s = static_cast<const From*>(src_expanded.storage()->data());
      for_each_run<2>(dst.sizes(), {&dst.strides(), &src_expanded.strides()},
                      {dst.offset(), src_expanded.offset()}, [&](auto off, auto inner, int64_t n) {
                        if (inner[0] == 1 && inner[1] == 1) {
                          if constexpr (std::is_same_v<To, From>) {
                            std::memcpy(d + off[0], s + off[1], n * sizeof(To));
                          } else {
                            for (int64_t i = 0; i < n; ++i) d[off[0] + i] = convert<To>(s[off[1] + i]);
                          }
                        } else {
                          for (int64_t i = 0; i < n; ++i)
                            d[off[0] + i * inner[0]] = convert<To>(s[off[1] + i * inner[1]]);
                        }
                      });
    });
  });
}

}  // namespace

void copy_values(const Tensor& dst, const Tensor& src) {
  GS_CHECK(dst.device() == src.device(), "copy: expected tensors on the same device, got {} and {}", dst.device(),
           src.device());
  GS_CHECK(is_expandable_to(src.sizes(), dst.sizes()), "copy: source {} cannot be broadcast to destination {}",
           shape_str(src.sizes()), shape_str(dst.sizes()));
  // Expand src to dst's shape with zero strides on broadcast dims.
  Shape st(dst.dim(), 0);
  int64_t off = dst.dim() - src.dim();
  for (int64_t d = 0; d < src.dim(); ++d) st[d + off] = src.sizes()[d] == 1 ? 0 : src.strides()[d];
  if (dst.device().type == DeviceType::cuda) {
#if GS_HAVE_CUDA
    const Device d = dst.device();
    cuda::require_device(d, "copy");
    cuda_kernels::strided_copy(dst.dtype(), src.dtype(), dst.raw_data(), src.raw_data(),
                               make_strided_loop<2>(dst.sizes(), {&dst.strides(), &st}),
                               cuda::current_stream(d.index).handle);
    cuda::check_launch("strided_copy", "copy");
    return;
#endif
  }
  GS_CHECK(dst.device().is_cpu(), "copy on {} is not available in this build", dst.device());
  auto expanded = std::make_shared<TensorImpl>(src.storage(), dst.sizes(), st, src.offset(), src.dtype());
  strided_convert(dst, Tensor(expanded));
}

Tensor contiguous_copy(const Tensor& t, bool force_copy) {
  if (!force_copy && t.is_contiguous()) return t;
  Tensor out = empty(t.sizes(), t.dtype(), t.device());
  copy_values(out, t);
  return out;
}

Tensor cast_copy(const Tensor& t, DType dtype) {
  Tensor out = empty(t.sizes(), dtype, t.device());
  copy_values(out, t);
  return out;
}

Tensor to_device_copy(const Tensor& t, Device device) {
  Tensor src = t.device() == device ? t : contiguous_copy(t);
  Tensor out = empty(t.sizes(), t.dtype(), device);
  if (t.device() == device) {
    copy_values(out, src);
  } else {
    copy_bytes(out.raw_data(), device, src.raw_data(), src.device(), src.numel() * dtype_size(src.dtype()));
  }
  return out;
}

void check_writable(const Tensor& t, const char* op) {
  GS_CHECK(!t.storage()->read_only(), "{}: cannot write in place to a read-only tensor ({}): {}", op, t.meta_str(),
           t.storage()->read_only_reason());
}

void bump_version(const Tensor& t) { t.storage()->bump_version(); }

}  // namespace gs
