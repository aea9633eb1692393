// The tape: nodes with backward rules, edges to the nodes of their inputs, and saved tensors.
// Node "outputs" are the forward op's outputs: a node receives one gradient per forward output
// and returns one gradient per forward input (or an undefined tensor where none flows).
#pragma once
#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/cuda_runtime.h"
#include "engine/inline_vector.h"
#include "engine/tensor.h"

namespace gs {

class Node;

// Where a gradient goes: gradient slot `output_nr` of node `fn` (null fn: the input needs no grad).
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t output_nr = 0;
  bool valid() const { return fn != nullptr; }
};

// Shape, dtype and device of one forward input or output, kept after the tensor itself is gone.
struct TensorMeta {
  Shape sizes;
  DType dtype = DType::f32;
  Device device;
  // dtype is the gradient's: f32 for a bf16 tensor (gradient_dtype), the tensor's own otherwise.
  static TensorMeta of(const Tensor& t) { return {t.sizes(), gradient_dtype(t.dtype()), t.device()}; }
  std::string str() const;
};

// What a saved tensor is to its node, for error messages: kept as two numbers and spelled out only
// when a message needs it ("input 1", "output 0", "a tensor computed in forward"), so recording an
// op formats no strings.
struct SavedRole {
  enum class Kind : uint8_t { input, output, computed };
  Kind kind = Kind::computed;
  uint32_t index = 0;
  static SavedRole input(size_t i) { return {Kind::input, static_cast<uint32_t>(i)}; }
  static SavedRole output(size_t i) { return {Kind::output, static_cast<uint32_t>(i)}; }
  std::string str() const;
};

// A tensor saved for backward, with the version it was saved at. Saved outputs are stored without
// their grad_fn (that would be a reference cycle) and re-attached to the owning node on unpack.
// Under saved-tensor hooks (saved_hooks.h) the packed value is kept instead of the tensor, with
// the storage watched (weakly) for the version check and the history to give back on unpack.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output, SavedRole role);
  // Throws if the graph was released or the tensor was modified in place since it was saved.
  // `owner` is the node holding this saved tensor (a reference: a shared_ptr to it is made only
  // where one is needed, a saved output's re-attached history).
  Tensor unpack(Node& owner) const;
  void release() {
    data_ = Tensor();
    hooked_.reset();
    released_ = true;
  }
  bool defined() const { return was_defined_; }
  uint64_t saved_version() const { return saved_version_; }
  std::string role() const { return role_.str(); }
  const Tensor& peek() const { return data_; }  // for DOT export and forward AD; no checks
  bool is_output() const { return is_output_; }
  // For ~Node's iterative release: the history kept for a hooked saved input.
  std::shared_ptr<Node> take_history_fn() { return std::move(history_.fn); }
  uint32_t output_nr() const { return output_nr_; }

 private:
  Tensor data_;
  uint64_t saved_version_ = 0;
  bool is_output_ = false;
  bool requires_grad_ = false;
  uint32_t output_nr_ = 0;
  bool released_ = false;
  bool was_defined_ = false;
  SavedRole role_;
  Edge history_;  // a saved input's grad_fn (or leaf accumulator), re-attached on unpack
  // Saved through hooks (rare): kept out of line so that a plain saved tensor stays small (every
  // recorded op that saves tensors holds these, and backward walks them).
  struct Hooked {
    std::any packed;
    std::function<Tensor(const std::any&)> unpack_hook;
    std::weak_ptr<StorageImpl> watched_storage;
    TensorMeta packed_meta;  // what unpack must give back
  };
  // Shared, so that an unpack hook that releases this saved tensor (a nested backward through
  // its node) cannot free the state the running unpack reads.
  std::shared_ptr<const Hooked> hooked_;

  Tensor unpack_hooked(Node& owner) const;
  void check_version(uint64_t now, const Node& owner) const;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(std::string name);
  // Releases the graph below iteratively: a chain of a million nodes must not overflow the stack.
  virtual ~Node();

  const std::string& name() const { return name_; }
  uint64_t sequence_nr() const { return sequence_nr_; }
  // Creation scope recorded when anomaly mode is on ("" otherwise).
  const std::string& scope() const;
  // "'mul' (node #12, created in scope 'block 3')" for error messages.
  std::string describe() const;

  // grads: one per forward output (zero-filled by the engine); returns one per forward input.
  virtual std::vector<Tensor> apply(std::vector<Tensor> grads) = 0;
  virtual void release_saved();
  // Why grad() must not return the gradient arriving at forward output `slot` ("" when it may):
  // the gradient reducer's node, whose outputs are parameters routed through it, would hand
  // grad() the rank's unreduced partial while its forward scope is open.
  virtual std::string capture_refusal(uint32_t slot) const { return {}; }
  // Tensor hooks on the gradient of forward output `slot`; may replace it.
  virtual Tensor run_tensor_hooks(uint32_t slot, Tensor grad);
  void add_tensor_pre_hook(uint32_t slot, TensorHook hook);
  void add_retained_grad(uint32_t slot, const std::shared_ptr<TensorImpl>& t);
  // Drops a retain_grad() registration of `t`; true if there was one. An in-place op that rebases
  // t's history moves the registration to its new node, so .grad stays the gradient of t's
  // current value (as in PyTorch).
  bool remove_retained_grad(const std::shared_ptr<TensorImpl>& t);

  // The lists are inline for the common one or two inputs and one output (no heap blocks of their
  // own). next_edges and pass_state come first, side by side: a backward pass's discovery reads a
  // node's edges and each child's pass state, and on a long tape each node is a cache miss.
  InlineVector<Edge, 2> next_edges;        // one per forward input
  // Scratch state of the backward pass running through this node (engine.cpp), so the engine
  // needs no hash maps keyed by node. Valid only while `pass` equals that pass's id.
  struct PassState {
    uint64_t pass = 0;
    int dependencies = 0;
    int in_degree = 0;
    bool runs = false;
    bool captured = false;
    std::vector<Tensor> buffer;  // gradients arriving for each forward output
    std::vector<cuda::Stream> producer_streams;  // CUDA streams those gradients were made on
  } pass_state;

  InlineVector<TensorMeta, 2> input_meta;  // one per forward input
  InlineVector<TensorMeta, 1> output_meta; // one per forward output
  InlineVector<SavedTensor, 2> saved;      // most ops save one or two tensors
  // Set by ops whose backward is not itself differentiable: asking for create_graph through
  // them makes the gradient's own backward throw.
  bool once_differentiable = false;
  // false: gradients that did not arrive for an output reach apply() undefined instead of as zeros
  // (torch's ctx.set_materialize_grads(False)): a node that must tell "no gradient" from a zero
  // one (the gradient reducer: a parameter without a gradient keeps .grad undefined).
  bool materialize_grads = true;
  // true: runs as soon as it is ready, before nodes recorded later (the engine otherwise runs the
  // most recently recorded ready node first). The gradient reducer's nodes are recorded before the
  // forward pass, yet should start their collectives the moment their last gradient arrives.
  bool runs_when_ready = false;
  // The CUDA stream the forward op ran on (set when an output is a CUDA tensor): its backward runs
  // there too, so it is ordered after the forward work it reads.
  std::optional<cuda::Stream> forward_stream;

 protected:
  std::string name_;
  uint64_t sequence_nr_;
  // What few nodes have (an anomaly-mode scope, tensor hooks, retain_grad registrations), out of
  // line: the node is walked by every backward pass, so its size is time.
  struct Extras {
    std::string scope;
    std::vector<std::pair<uint32_t, TensorHook>> pre_hooks;
    std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retained;
  };
  std::unique_ptr<Extras> extras_;
  Extras& extras() {
    if (!extras_) extras_ = std::make_unique<Extras>();
    return *extras_;
  }
};

// What a backward rule sees: saved tensors (version-checked), which inputs need gradients,
// and the inputs' metadata (for reducing broadcast gradients).
class BackwardContext {
 public:
  BackwardContext(Node& node) : node_(node) {}
  Tensor saved(size_t i) const;
  bool needs_input_grad(size_t i) const { return node_.next_edges.at(i).valid(); }
  const TensorMeta& input(size_t i) const { return node_.input_meta.at(i); }
  const Node& node() const { return node_; }

 private:
  Node& node_;
};

using BackwardRule = std::function<std::vector<Tensor>(BackwardContext& ctx, const std::vector<Tensor>& grads)>;

// The node every differentiable op records: a name, a rule and saved tensors.
class FunctionNode : public Node {
 public:
  FunctionNode(std::string name, BackwardRule rule) : Node(std::move(name)), rule_(std::move(rule)) {}
  std::vector<Tensor> apply(std::vector<Tensor> grads) override;
  void release_saved() override;

 private:
  BackwardRule rule_;
};

// The sink for a leaf: runs its hooks, sums into .grad, then runs its post-accumulate hooks.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf);
  std::vector<Tensor> apply(std::vector<Tensor> grads) override;
  Tensor run_tensor_hooks(uint32_t slot, Tensor grad) override;
  std::shared_ptr<TensorImpl> leaf() const { return leaf_.lock(); }

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// The edge a gradient for `t` should flow into (its grad_fn, or its leaf accumulator), or an
// invalid edge if `t` does not require grad.
Edge gradient_edge(const Tensor& t);

}  // namespace gs
