// Finite-difference checks of backward rules, in f64/c128, with PyTorch's default tolerances.
// gradcheck compares the analytical Jacobian (from backward) with central differences, checks that
// backward is reentrant (two runs agree exactly) and that zero output gradients give zero input
// gradients. gradgradcheck runs gradcheck on the function x, v -> grad(f(x), x, v, create_graph).
// Complex tensors are checked as pairs of real numbers: a perturbation of the real and of the
// imaginary part of each input, and the real and imaginary part of each output.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"

namespace gs {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  double nondet_tol = 0.0;  // allowed difference between two backward runs
  RandomKey key{20260101, 7};  // for gradgradcheck's random output gradients
};

struct GradcheckReport {
  bool ok = true;
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;  // over Jacobian entries with |numerical| >= 1e-6
  std::string failure;         // first failure, empty when ok
  std::string detail;          // jvpcheck: which kinds of JVP rule produced the tangents
};

using DifferentiableFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// How fresh_leaves lays out its copies.
enum class LeafLayout {
  as_input,    // in the input's memory order: a transposed input stays transposed, so a check of the
               // copies reaches the op's strided paths
  contiguous,  // row-major, for callers that index data<T>() directly
};
// A new leaf per input, holding a copy of its values, with its requires_grad flag (an undefined
// input stays undefined): each evaluation of a checked function starts from leaves of its own,
// never from the caller's tensors or their history.
std::vector<Tensor> fresh_leaves(const std::vector<Tensor>& inputs, LeafLayout layout = LeafLayout::as_input);

// Inputs that require grad are checked; they must be f64 or c128.
GradcheckReport gradcheck(const DifferentiableFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});
GradcheckReport gradgradcheck(const DifferentiableFn& f, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options = {});
// Forward mode (forward_ad.h): the tangent of every output for a random tangent t of the inputs
// that require grad is checked against central differences (J_numerical t, within atol/rtol), against
// the reverse-mode Jacobian (J_backward t, within 1e-9 relative: the transpose identity
// <J t, u> = <t, J^T u> for every u), and against a run where no input requires grad (same
// values: an op must propagate tangents whether or not reverse mode records it).
GradcheckReport jvpcheck(const DifferentiableFn& f, const std::vector<Tensor>& inputs,
                         const GradcheckOptions& options = {});

}  // namespace gs
