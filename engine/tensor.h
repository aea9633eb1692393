// Tensor: the value every gradsphere program passes around, a cheap handle (copying it shares the
// data, like torch.Tensor) to storage + sizes/strides/offset + dtype + device + autograd state.
// What you can do with it here: read its shape and dtype, reach its data (data<T>(), to_vector,
// item), mark a leaf with set_requires_grad(), read .grad() after backward, register hooks on the
// gradient flowing into it, detach it, name it (the name shows in error messages and DOT graphs),
// and print it. Making tensors: engine/factory.h (zeros, randn, from_vector, ...); computing with
// them: ops/ops.h or the umbrella <gradsphere/gradsphere.h>; running backward: engine/autograd/engine.h.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/dtype.h"
#include "engine/shape.h"
#include "engine/storage.h"

namespace gs {

class Node;
class Tensor;
class TensorImpl;

// A tensor hook sees the gradient flowing into a tensor; returning a defined tensor replaces it.
using TensorHook = std::function<Tensor(const Tensor& grad)>;
// Runs on a leaf after its .grad was updated (the distributed gradient reducer is built on these).
using PostAccumulateHook = std::function<void(const Tensor& leaf)>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- metadata
  const Shape& sizes() const;
  const Shape& strides() const;
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  int64_t offset() const;  // in elements
  DType dtype() const;
  Device device() const;
  const Storage& storage() const;
  bool is_contiguous() const;
  bool is_view() const;              // shares storage with the tensor it was viewed from
  Tensor view_base() const;          // that tensor (undefined when not a view)
  uint64_t version() const;          // of the storage: shared by all views
  // "f32 (2, 3) on cpu", or "'x' f32 (2, 3) on cpu" when named; with_name = false where the
  // message names the tensor itself (a module's parameter list, a DOT label).
  std::string meta_str(bool with_name = true) const;

  // ---- raw data (CPU): pointer to the first element; checks the dtype, and refuses a device
  // tensor, whose pointer the host cannot dereference.
  template <typename T>
  T* data() const {
    check_data_access(dtype_of<T>::value, "data", true);
    return static_cast<T*>(raw_data());
  }
  // The same for a tensor on any device, for kernel launchers that pass it to the device.
  template <typename T>
  T* device_data() const {
    check_data_access(dtype_of<T>::value, "device_data", false);
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;
  // The single value of a one-element tensor.
  template <typename T>
  T item() const;
  // All elements in row-major order, converted to T (test and I/O helper).
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- autograd
  bool requires_grad() const;
  // Only leaves can be set, and only with a floating or complex dtype.
  Tensor& set_requires_grad(bool r = true);
  bool is_leaf() const;  // no grad_fn (created by the user, or does not require grad)
  const std::shared_ptr<Node>& grad_fn() const;
  uint32_t output_nr() const;
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  // Sums the gradient of this tensor into the leaves of its graph (engine/autograd/engine.cpp).
  void backward(const Tensor& grad_output = {}, bool retain_graph = false, bool create_graph = false) const;
  void register_hook(TensorHook hook) const;
  void register_post_accumulate_grad_hook(PostAccumulateHook hook) const;
  void retain_grad() const;  // keep .grad on a non-leaf
  // Same storage and version counter, no autograd history.
  Tensor detach() const;
  // Optional name, shown in DOT graphs and in the error messages that describe the tensor
  // (meta_str: "'x' f64 (3, 4) on cpu").
  const std::string& name() const;
  Tensor& set_name(std::string n);

  std::string str() const;  // readable printing (engine/print.cpp)

 private:
  void check_data_access(DType want, const char* fn, bool host) const;
  std::shared_ptr<TensorImpl> impl_;
};

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;  // leaves: created lazily, owned by the graph
  std::vector<TensorHook> leaf_hooks;    // leaves; a non-leaf's hooks live on its grad_fn
  std::vector<PostAccumulateHook> post_accumulate_hooks;
  // Storage version when grad_fn was set: if the value changes behind autograd's back (e.g. an
  // in-place write through a view or under no_grad), the recorded history no longer matches it.
  uint64_t history_version = 0;
  std::string name;
  // Forward-mode AD (autograd/forward_ad.h): the tangent at dual level `fw_level` (0: none). A
  // stale level means no tangent, so closing a level needs no sweep over tensors.
  Tensor fw_grad;
  uint64_t fw_level = 0;
};

// An AutogradMeta comes from the per-thread object pool (engine/object_pool.h): every output of a
// recorded op gets one.
AutogradMeta* make_autograd_meta();
struct AutogradMetaDelete {
  void operator()(AutogradMeta* m) const;
};

class TensorImpl {
 public:
  TensorImpl(Storage s, Shape sizes, Shape strides, int64_t offset, DType dtype)
      : storage(std::move(s)), sizes(std::move(sizes)), strides(std::move(strides)), offset(offset), dtype(dtype) {}

  Storage storage;
  Shape sizes;
  Shape strides;
  int64_t offset = 0;
  DType dtype;
  std::unique_ptr<AutogradMeta, AutogradMetaDelete> autograd;  // created on first use
  std::shared_ptr<TensorImpl> view_base;   // root tensor this is a view of, if any
  // For views: the storage version when the view was made, whether it was made while autograd was
  // recording, and whether it is a detach() alias (never differentiable). A view whose storage
  // changed since its autograd state was set regenerates its history from the base on its next
  // use (engine/autograd/record.h).
  uint64_t view_version = 0;
  bool view_made_recording = false;
  bool detached_alias = false;

  AutogradMeta& meta() {
    if (!autograd) autograd.reset(make_autograd_meta());
    return *autograd;
  }
};

// The accessors every op calls, several times per op: inline, so that recording an op pays no
// call for each (the tape's cost per op, engine/NOTES.md).
inline const Shape& Tensor::sizes() const { return impl_->sizes; }
inline const Shape& Tensor::strides() const { return impl_->strides; }
inline int64_t Tensor::dim() const { return static_cast<int64_t>(impl_->sizes.size()); }
inline int64_t Tensor::offset() const { return impl_->offset; }
inline int64_t Tensor::numel() const { return numel_of(impl_->sizes); }
inline DType Tensor::dtype() const { return impl_->dtype; }
inline Device Tensor::device() const { return impl_->storage->device(); }
inline const Storage& Tensor::storage() const { return impl_->storage; }
inline bool Tensor::is_view() const { return impl_->view_base != nullptr; }
inline uint64_t Tensor::version() const { return impl_->storage->version(); }
inline bool Tensor::requires_grad() const { return impl_ && impl_->autograd && impl_->autograd->requires_grad; }
inline bool Tensor::is_leaf() const { return !impl_->autograd || !impl_->autograd->grad_fn; }
inline const std::shared_ptr<Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<Node> none;
  return impl_->autograd ? impl_->autograd->grad_fn : none;
}
inline uint32_t Tensor::output_nr() const { return impl_->autograd ? impl_->autograd->output_nr : 0; }

// ---- construction (no autograd): used by factories and op kernels.
Tensor empty(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
Tensor empty_like(const Tensor& t);
// A view of `base`'s storage with new geometry; `base` becomes its view base. No autograd.
Tensor alias_with_geometry(const Tensor& base, Shape sizes, Shape strides, int64_t offset);
// The same with another element type over the same bytes (real / imaginary parts, view_as_real,
// view_as_complex): sizes, strides and offset in units of `dtype`.
Tensor alias_with_geometry(const Tensor& base, Shape sizes, Shape strides, int64_t offset, DType dtype);
// A new contiguous tensor with the same values (no autograd); returns `t` itself if contiguous
// and `force_copy` is false.
Tensor contiguous_copy(const Tensor& t, bool force_copy = false);
// Element-wise cast into a new contiguous tensor (no autograd). complex->real keeps the real part.
Tensor cast_copy(const Tensor& t, DType dtype);
// Copies values of src into dst (same numel, broadcast allowed), casting; no autograd, no version bump.
void copy_values(const Tensor& dst, const Tensor& src);
// Copies to another device (no autograd).
Tensor to_device_copy(const Tensor& t, Device device);

// ---- write protection and version counting, for in-place writes done by op kernels.
// Throws if the storage is read-only, naming `op`.
void check_writable(const Tensor& t, const char* op);
void bump_version(const Tensor& t);

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace gs
