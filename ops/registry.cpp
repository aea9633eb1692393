#include "ops/registry.h"

#include <algorithm>

#include "engine/factory.h"

namespace gs {
namespace {
std::vector<OpInfo>& table() {
  static std::vector<OpInfo> t;
  return t;
}
}  // namespace

void OpRegistry::add(OpInfo info) {
  GS_CHECK(!find(info.name), "op registry: '{}' is registered twice", info.name);
  table().push_back(std::move(info));
  std::sort(table().begin(), table().end(), [](const OpInfo& a, const OpInfo& b) { return a.name < b.name; });
}

const std::vector<OpInfo>& OpRegistry::all() { return table(); }

const OpInfo* OpRegistry::find(const std::string& name) {
  for (const auto& o : table())
    if (o.name == name) return &o;
  return nullptr;
}

std::vector<std::string> OpRegistry::names() {
  std::vector<std::string> n;
  for (const auto& o : table()) n.push_back(o.name);
  return n;
}

Tensor sample_leaf(const Shape& sizes, RandomKey key, DType dtype) {
  Tensor t = randn(sizes, key, dtype);
  t.set_requires_grad(true);
  return t;
}

Tensor sample_leaf_in(const Shape& sizes, RandomKey key, double lo, double hi) {
  Tensor t = rand(sizes, key, DType::f64);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = lo + (hi - lo) * p[i];
  t.set_requires_grad(true);
  return t;
}

Tensor sample_leaf_transposed(const Shape& sizes, RandomKey key, DType dtype) {
  GS_CHECK(sizes.size() >= 2, "sample_leaf_transposed: needs at least 2 dims, got {}", shape_str(sizes));
  Shape swapped = sizes;
  std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
  Tensor base = randn(swapped, key, dtype);
  Shape st = base.strides();
  std::swap(st[st.size() - 1], st[st.size() - 2]);
  // A fresh tensor whose geometry is transposed: non-contiguous, yet a leaf of its own.
  Tensor t(std::make_shared<TensorImpl>(base.storage(), sizes, st, 0, dtype));
  t.set_requires_grad(true);
  return t;
}

}  // namespace gs
