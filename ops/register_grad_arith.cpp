// Gives the engine its two differentiable operations (see engine/autograd/grad_arith.h).
#include "engine/autograd/grad_arith.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace gs {
namespace {

Tensor add_gradients(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor sum_gradient_to(const Tensor& t, const Shape& shape) { return sum_to(t, shape); }
Tensor view_gradient_to_base(const Tensor& g, const ViewRelation& r) { return view_to_base(g, r); }
Tensor view_part_of_base(const Tensor& g, const ViewRelation& r) { return view_from_base(g, r); }
Tensor base_outside_view(const Tensor& g, const ViewRelation& r) { return view_complement(g, r); }

const bool registered = [] {
  register_gradient_arithmetic(
      {&add_gradients, &sum_gradient_to, &view_gradient_to_base, &view_part_of_base, &base_outside_view});
  return true;
}();

}  // namespace
}  // namespace gs
