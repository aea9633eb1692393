// Running the tape backward: what turns a computed loss into gradients.
//   backward({loss})                     fills x.grad() of every leaf x that requires grad;
//   grad({y}, {x})                       returns dy/dx without touching .grad (torch.autograd.grad);
//   grad({y}, {x}, {}, {.create_graph = true}) keeps the gradient on the tape, so it can be
//                                        differentiated again (Hessian-vector products, gradient
//                                        penalties: tools/examples/hessian_vector_product.cpp).
// Hooks on tensors (engine/tensor.h), no-grad and anomaly modes (grad_mode.h, anomaly.h) and user
// functions with their own backward (custom_function.h) sit beside this header.
#pragma once
#include <functional>
#include <vector>

#include "engine/tensor.h"

namespace gs {

// Sums d(roots)/d(leaf) * grad_outputs into .grad of every leaf reached. An undefined grad output
// is allowed for a one-element root and means 1.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_outputs = {},
              bool retain_graph = false, bool create_graph = false);

struct GradOptions {
  bool retain_graph = false;  // also implied by create_graph
  bool create_graph = false;
  bool allow_unused = false;
};

// Returns d(outputs)/d(inputs) * grad_outputs without touching .grad. An input that the outputs do
// not depend on is an error unless allow_unused, in which case its entry is undefined.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, GradOptions options = {});

// For a backward rule that starts asynchronous work (a collective): called from inside the rule,
// it asks the engine to hand on the gradients `finish()` returns instead of what the rule returned.
// The engine runs every other ready node first, calling `progress()` after each (MPI moves a
// non-blocking collective only while it is called), and calls `finish()` once nothing else is
// ready, in the order the rules deferred. Deterministic: what runs when does not depend on how fast
// the work completes, so every rank of a job runs its nodes in the same order.
struct DeferredGradients {
  std::function<std::vector<Tensor>()> finish;
  std::function<void()> progress;
};
void defer_gradients(DeferredGradients deferred);

// Queues a callback to run once the current backward pass has finished (only during backward).
void queue_backward_callback(std::function<void()> fn);

}  // namespace gs
