#include "ops/sphere/sfno_block_common.h"

#include <cmath>

#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace gs::sphere::detail {

void check_field(const Tensor& x, const char* op, const char* what, bool allow_storage) {
  GS_CHECK(x.defined(), "{}: {} is an undefined tensor", op, what);
  const bool dtype_ok = is_floating(x.dtype()) || (allow_storage && is_storage_only(x.dtype()));
  GS_CHECK(dtype_ok && x.dim() == 4, "{}: expected {} as an {} tensor of 4 dims, got {}", op, what,
           allow_storage ? "f32, f64 or bf16" : "f32 or f64", x.meta_str());
}

void check_eps(double eps, const char* op) {
  GS_CHECK(std::isfinite(eps) && eps >= 0.0, "{}: expected a finite eps >= 0, got {}", op, eps);
}

Tensor channel_param(const Tensor& p, const Tensor& x, const char* op, const char* what) {
  if (!p.defined()) return p;
  const int64_t C = x.size(1);
  GS_CHECK(p.dim() == 1 && p.size(0) == C, "{}: expected {} of shape {} for x {} with {} channels, got {}", op, what,
           shape_str({C}), shape_str(x.sizes()), C, p.meta_str());
  GS_CHECK(p.dtype() == x.dtype(), "{}: expected {} with x's dtype {}, got {}", op, what, dtype_name(x.dtype()),
           p.meta_str());
  kernels::check_same_device(x, p, op);
  return p;
}

std::vector<double> check_row_weights(const Tensor& a, const Tensor& x, const char* op, const char* what) {
  GS_CHECK(a.defined(), "{}: {} is an undefined tensor", op, what);
  const int64_t H = x.size(-2);
  GS_CHECK(a.dim() == 1 && a.size(0) == H, "{}: expected {} of shape {}, one per latitude row of x {}, got {}", op,
           what, shape_str({H}), shape_str(x.sizes()), a.meta_str());
  GS_CHECK(a.dtype() == x.dtype(), "{}: expected {} with x's dtype {}, got {}", op, what, dtype_name(x.dtype()),
           a.meta_str());
  kernels::check_same_device(x, a, op);
  std::vector<double> v = cast_copy(a, DType::f64).to_vector<double>();
  double total = 0.0;
  for (double e : v) {
    GS_CHECK(e >= 0.0 && std::isfinite(e), "{}: expected {} to be finite and non-negative, got a value {}", op, what, e);
    total += e;
  }
  GS_CHECK(total > 0.0, "{}: expected {} with a positive sum, got all zeros", op, what);
  return v;
}

Tensor row_weights(const Tensor& a, const Tensor& x, const char* op, const char* what) {
  check_row_weights(a, x, op, what);
  return reshape(div(a, sum(a)), {x.size(-2), 1});
}

int64_t check_conv_params(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t k, const char* op) {
  const int64_t Cin = x.size(1);
  const bool ok = k == 1 ? weight.defined() && weight.dim() == 2 && weight.size(1) == Cin
                         : weight.defined() && weight.dim() == 4 && weight.size(1) == Cin && weight.size(2) == k &&
                               weight.size(3) == k;
  const std::string want = k == 1 ? fmt::format("(Cout, Cin) = (Cout, {})", Cin)
                                  : fmt::format("(Cout, Cin, {}, {}) = (Cout, {}, {}, {})", k, k, Cin, k, k);
  GS_CHECK(ok, "{}: expected a weight {} for x {}, got {}", op, want, shape_str(x.sizes()), weight.meta_str());
  // bf16 storage on either side counts as f32 (matmul reads it so); the result and bias are f32 then.
  if (!is_storage_only(x.dtype()) && !is_storage_only(weight.dtype()))
    GS_CHECK(weight.dtype() == x.dtype(), "{}: expected the weight with x's dtype {}, got {}", op,
             dtype_name(x.dtype()), weight.meta_str());
  const DType out_dtype = kernels::check_mixed_storage_pair(x, weight, op);
  const int64_t Cout = weight.size(0);
  if (bias.defined())
    GS_CHECK(bias.dim() == 1 && bias.size(0) == Cout && bias.dtype() == out_dtype,
             "{}: expected a bias {} of dtype {} for a weight {}, got {}", op, shape_str({Cout}), dtype_name(out_dtype),
             shape_str(weight.sizes()), bias.meta_str());
  return Cout;
}

Tensor positive_rows(int64_t H, RandomKey k) {
  Tensor t = rand({H}, k, DType::f64);
  double* p = t.data<double>();
  for (int64_t i = 0; i < H; ++i) p[i] = 0.25 + p[i];
  return t;
}

}  // namespace gs::sphere::detail
