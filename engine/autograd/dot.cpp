#include "engine/autograd/dot.h"

#include <unordered_map>

#include "engine/autograd/node.h"

namespace gs {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string graph_to_dot(const std::vector<Tensor>& roots) {
  std::string out = "digraph autograd {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];\n";
  std::unordered_map<const Node*, int> ids;
  std::vector<const Node*> stack;
  auto id_of = [&](const Node* n) {
    auto [it, fresh] = ids.emplace(n, static_cast<int>(ids.size()));
    if (fresh) stack.push_back(n);
    return it->second;
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    // The name gets its own line above the output number, so the metadata is printed unnamed.
    std::string label = fmt::format("output {}\\n{}", i, escape(r.meta_str(false)));
    if (!r.name().empty()) label = escape(r.name()) + "\\n" + label;
    out += fmt::format("  r{} [label=\"{}\", shape=ellipse];\n", i, label);
    if (r.grad_fn()) out += fmt::format("  r{} -> n{};\n", i, id_of(r.grad_fn().get()));
  }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    int id = ids.at(n);
    std::string label = escape(n->name());
    if (auto acc = dynamic_cast<const AccumulateGrad*>(n)) {
      if (auto leaf = acc->leaf(); leaf && leaf->autograd && !leaf->autograd->name.empty())
        label += "\\n" + escape(leaf->autograd->name);
    }
    if (!n->scope().empty()) label += "\\nscope: " + escape(n->scope());
    for (const auto& m : n->output_meta) label += "\\nout: " + m.str();
    for (const auto& s : n->saved) {
      if (!s.defined()) continue;
      const Tensor& t = s.peek();
      if (t.defined()) {
        label += fmt::format("\\nsaved {}: {} {} v{} (now v{})", escape(s.role()), dtype_name(t.dtype()),
                             shape_str(t.sizes()), s.saved_version(), t.version());
      } else {
        label += fmt::format("\\nsaved {}: released", escape(s.role()));
      }
    }
    out += fmt::format("  n{} [label=\"{}\"];\n", id, label);
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.valid()) continue;
      out += fmt::format("  n{} -> n{} [label=\"{}\"];\n", id, id_of(e.fn.get()), i);
    }
  }
  return out + "}\n";
}

}  // namespace gs
