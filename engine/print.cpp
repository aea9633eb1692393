// Readable printing: nested brackets, at most a few elements per dim, dtype and shape at the end.
#include <sstream>

#include "engine/autograd/node.h"
#include "engine/tensor.h"

namespace gs {
namespace {

constexpr int64_t kEdgeItems = 3;

template <typename T>
std::string fmt_value(const T& v) {
  if constexpr (is_complex_v<T>) {
    return fmt::format("{:.4g}{:+.4g}j", v.real(), v.imag());
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_integral_v<T>) {
    return fmt::format("{}", v);
  } else {
    return fmt::format("{:.4g}", v);
  }
}

template <typename T>
void print_dim(std::ostringstream& os, const std::vector<T>& v, const Shape& sizes, const Shape& strides, int64_t d,
               int64_t off, int indent) {
  if (d == static_cast<int64_t>(sizes.size())) {
    os << fmt_value(v[off]);
    return;
  }
  os << "[";
  int64_t n = sizes[d];
  bool elide = n > 2 * kEdgeItems;
  for (int64_t i = 0; i < n; ++i) {
    if (elide && i == kEdgeItems) {
      os << "...";
      i = n - kEdgeItems;
      os << (d + 1 == static_cast<int64_t>(sizes.size()) ? ", " : ",\n" + std::string(indent + 1, ' '));
    }
    print_dim(os, v, sizes, strides, d + 1, off + i * strides[d], indent + 1);
    if (i + 1 < n) os << (d + 1 == static_cast<int64_t>(sizes.size()) ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  os << "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream os;
  os << "tensor(";
  // bf16 values print as the f32 numbers they are.
  dispatch_all(compute_dtype(dtype()), "print", [&]<typename T>() {
    std::vector<T> v = to_vector<T>();
    print_dim(os, v, sizes(), contiguous_strides(sizes()), 0, 0, 7);
  });
  os << ", dtype=" << dtype_name(dtype()) << ", shape=" << shape_str(sizes());
  if (grad_fn()) os << ", grad_fn=" << grad_fn()->name();
  else if (requires_grad()) os << ", requires_grad=true";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace gs
