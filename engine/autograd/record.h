// How ops put themselves on the tape.
//
//   Tensor out = ...forward kernel...;
//   if (should_record({a, b}))
//     record_op("mul", {a, b}, {&out}, /*saved*/ {a, b}, /*saved outputs*/ {},
//               [](BackwardContext& ctx, const std::vector<Tensor>& g) -> std::vector<Tensor> {...});
//
// Saved tensors are numbered in order: first the `saved` list, then the saved outputs.
#pragma once
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "engine/autograd/node.h"

namespace gs {

// A reference to a tensor in a braced list ({a, b}): a list of these borrows the caller's tensors,
// where a std::initializer_list<Tensor> would copy each (two atomic reference-count updates per
// tensor per list, and an op passes two or three lists).
struct TensorRef {
  TensorRef(const Tensor& t) : tensor(&t) {}  // NOLINT: implicit on purpose
  const Tensor* tensor;
};

// A borrowed list of record_op's arguments: a braced list ({a, b}) or a vector, read during the
// call only, so recording an op builds no heap vectors for its argument lists and copies no
// tensors. Never keep one past the call: a braced list's elements live until the end of the
// calling expression.
template <typename T>
class ArgList {
 public:
  class iterator {
   public:
    iterator(const ArgList* list, size_t i) : list_(list), i_(i) {}
    const T& operator*() const { return (*list_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const iterator& o) const { return i_ != o.i_; }

   private:
    const ArgList* list_;
    size_t i_;
  };

  ArgList() = default;
  // The list's elements outlive the call that takes this (GCC's -Winit-list-lifetime warns on a
  // member initialiser from begin(); the assignment says the same without the warning).
  ArgList(std::initializer_list<T> l) requires(!std::is_same_v<T, Tensor>) {
    data_ = l.begin();
    size_ = l.size();
  }
  // Tensors in a braced list are borrowed, not copied (TensorRef).
  ArgList(std::initializer_list<TensorRef> l) requires std::is_same_v<T, Tensor> {
    refs_ = l.begin();
    size_ = l.size();
  }
  ArgList(const std::vector<T>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT: implicit on purpose
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size_}; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T& operator[](size_t i) const {
    if constexpr (std::is_same_v<T, Tensor>)
      if (refs_) return *refs_[i].tensor;
    return data_[i];
  }
  const T& at(size_t i) const;
  std::vector<T> vec() const {
    std::vector<T> v;
    v.reserve(size_);
    for (size_t i = 0; i < size_; ++i) v.push_back((*this)[i]);
    return v;
  }

 private:
  const T* data_ = nullptr;
  const TensorRef* refs_ = nullptr;  // a braced list of tensors
  size_t size_ = 0;
};

// Recording is on and at least one input requires grad.
bool should_record(std::initializer_list<TensorRef> inputs);
// Whether a rule may be asked for t's gradient: t requires grad, or carries a tangent (forward AD
// derives its JVP from the rule). Ops that save a tensor only for another input's gradient ask this.
bool needs_gradient(const Tensor& t);
bool should_record(const std::vector<Tensor>& inputs);

std::shared_ptr<Node> record_op(std::string name, ArgList<Tensor> inputs, ArgList<Tensor*> outputs,
                                ArgList<Tensor> saved, ArgList<size_t> saved_outputs, BackwardRule rule);

// Connects an already-built node: edges from inputs, metadata, grad_fn on outputs, saved tensors.
void connect_node(const std::shared_ptr<Node>& node, ArgList<Tensor> inputs, ArgList<Tensor*> outputs,
                  ArgList<Tensor> saved, ArgList<size_t> saved_outputs);

// In-place protocol. Before writing into `self`: checks read-only storage, the leaf rule and the
// view rules (the cases where a view's base cannot be rebased, each refused with the reason).
// After writing: bumps the version and, when recording, makes `self`'s history go through a new
// node, and a view's base through copy_slices (rebase_base_history).
void check_inplace(const Tensor& self, const char* op, std::initializer_list<Tensor> others);
// The same, for a write that has already happened (custom functions' mark_dirty): the history
// check compares against the version before that write.
void check_inplace(const Tensor& self, const char* op, const std::vector<Tensor>& others,
                   uint64_t version_before_write);
void finish_inplace(Tensor& self, const char* op, const std::vector<Tensor>& other_inputs, BackwardRule rule,
                    const std::vector<Tensor>& saved = {});
// After an in-place write on the view `self` was recorded as its new history: the base's value
// changed too, so its history goes through a copy_slices node: the base's gradient outside the
// view passes to its old history, inside the view to the write's node (PyTorch's CopySlices).
// finish_inplace calls it; custom functions call it for a view they mark_dirty().
void rebase_base_history(const Tensor& self);

}  // namespace gs
