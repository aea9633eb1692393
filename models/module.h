// Modules: named parameters, buffers and sub-modules, train / eval mode and the state dict.
// A parameter carries its distribution (replicated over the spatial group, or sharded along one dim
// over a grid axis) so the distributed gradient reducer knows which groups to sum over. Buffers are
// constant (never written after construction: stored read-only, so a stray in-place write, such as
// a broadcast into a Legendre table, throws instead of corrupting saved tensors) or mutable
// (running statistics, synchronised only at step boundaries).
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/distribution.h"
#include "distributed/process_grid.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace gs::models {

// Distribution lives in distributed/, beside the gradient reducer that reads it.
using dist::Distribution;
using dist::GridAxis;

enum class BufferKind { constant, mutable_state };

struct NamedParameter {
  std::string name;  // dotted path: "blocks.0.filter.weight"
  Tensor tensor;
  Distribution distribution;
};
struct NamedBuffer {
  std::string name;
  Tensor tensor;
  BufferKind kind;
  Distribution distribution;  // a constant table cut to this rank's tile, or replicated
};

// name -> tensor; ordered by name (the order safetensors files use).
using StateDict = std::map<std::string, Tensor>;

class Module {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  // Depth-first in registration order; names are dotted paths from this module. A tensor reached
  // twice (a sub-module registered under two names: tied weights) is listed once, under the first
  // name, so an optimizer never updates it twice and num_parameters counts it once (as torch).
  std::vector<NamedParameter> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<NamedBuffer> named_buffers() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  // Elements over all parameters; a complex element counts once (torch's numel) unless
  // `complex_as_two` (real degrees of freedom).
  int64_t num_parameters(bool complex_as_two = false) const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Parameters and buffers, constant ones included (as torch's persistent buffers, so a
  // torch-harmonics model loads gradsphere's state dict strictly and the other way round). The
  // values alias the live tensors (detached, as torch's state_dict): clone them to keep a snapshot
  // across optimizer steps.
  StateDict state_dict() const;
  // Copies parameters and mutable buffers in place under no_grad (versions bump; handles held by
  // the model stay valid). Shapes and dtypes must match, except that a c64 tensor loads into a c128
  // parameter (exact; torch's model.double() keeps complex parameters c64). Constant buffers are
  // rebuilt from the options, not loaded: absent is fine, present must equal the rebuilt value to
  // float rounding (else an error names the buffer). strict: a missing or an unexpected key is an
  // error that lists them.
  void load_state_dict(const StateDict& state, bool strict = true);
  // Drops every parameter's .grad.
  void zero_grad();

  // Moves every parameter and buffer (this module's and its children's) to `device` in place: the
  // same tensors (handles held by layers stay valid) with their storage replaced by a copy on the
  // device; aliases taken before (state_dict(), detach(), views) keep the old storage. Gradients
  // are dropped; constant buffers stay read-only. Move before building an optimizer (its state is
  // allocated beside the parameters). Initialise on the CPU, then move: the initial weights are the
  // CPU run's, bit for bit.
  void to(Device device);

  // One-line-per-parameter summary: name, shape, dtype, distribution; and the total.
  std::string summary() const;

 protected:
  // Makes `value` a leaf that requires grad and returns the handle the module keeps.
  Tensor register_parameter(const std::string& name, Tensor value, Distribution d = Distribution::replicated());
  // constant buffers become read-only.
  Tensor register_buffer(const std::string& name, Tensor value, BufferKind kind = BufferKind::constant,
                         Distribution d = Distribution::replicated());
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  // Called after train() changes the mode of this module (children are visited by train()).
  virtual void on_mode_changed() {}

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  void check_new_name(const std::string& name) const;
  // Appends this module's parameters (buffers) and its children's under `prefix`, skipping tensors
  // already in `seen`.
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out,
                          std::vector<const TensorImpl*>& seen) const;
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out,
                       std::vector<const TensorImpl*>& seen) const;

  std::string type_name_;
  bool training_ = true;
  std::vector<NamedParameter> params_;
  std::vector<NamedBuffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// What a forward pass may need besides its input. A noise-conditioned model keys its noise by
// `noise_key`, so a resumed run draws exactly the noise an uninterrupted one would have, and draws
// it per global sample: the noise of sample first_sample + i depends only on the key and that
// index, so a batch split into micro-batches or over data-parallel replicas draws the noise the
// whole batch draws on one process.
struct ForwardContext {
  RandomKey noise_key{};
  Tensor labels;             // (B, n_labels), optional
  int64_t first_sample = 0;  // the global index of x's first sample
  // Run each block under gs::checkpoint (engine/autograd/checkpoint.h): its activations are replayed
  // in backward instead of kept (training.activation_checkpointing: blocks).
  bool checkpoint_blocks = false;
};

// A network the stepper can drive: (B, Cin, H, W) -> (B, Cout, H, W).
class Model : public Module {
 public:
  using Module::Module;
  virtual Tensor forward(const Tensor& x, const ForwardContext& ctx = {}) = 0;
  // The (nlat, nlon) of the whole sphere the model maps (its input and output fields); {0, 0} when
  // it does not say. On a process grid that splits the sphere, forward takes and returns this
  // rank's tile of it (the stepper needs the whole shape for its losses).
  virtual std::array<int64_t, 2> grid_shape() const { return {0, 0}; }
};

// Buffers at a step boundary (DESIGN.md): mutable buffers (running statistics) are broadcast from
// world rank 0 of `grid`, so every replica goes on from the same state; constant buffers are never
// broadcast, since a table saved for backward must not be written between forward and backward
// (the seed bug). Call it between optimizer steps only.
void sync_mutable_buffers(const Module& module, const dist::ProcessGrid& grid);

// 0-dim tensors for the scalar entries of optimizer, schedule and stepper state dicts.
Tensor state_scalar_f64(double v);
Tensor state_scalar_i64(int64_t v);

// ---- initialisers: fresh tensors (no history) from the counter-based generator. Keys derived from
// a parameter's name make initial weights independent of construction order and equal on every rank.
RandomKey param_key(uint64_t seed, const std::string& name);
// Normal(0, std); complex dtypes: real and imaginary parts each with variance std^2 / 2 (so E|z|^2 = std^2).
Tensor init_normal(const Shape& sizes, double std, RandomKey key, DType dtype);
// Uniform on [lo, hi).
Tensor init_uniform(const Shape& sizes, double lo, double hi, RandomKey key, DType dtype);
// torch.nn.init.trunc_normal_(mean, std, a, b): normal(mean, std) restricted to [a, b] (absolute bounds,
// as torch), drawn by inverting the normal CDF.
Tensor init_trunc_normal(const Shape& sizes, double mean, double std, double a, double b, RandomKey key, DType dtype);

}  // namespace gs::models
