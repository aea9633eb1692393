// Registry completeness, shared by the op registry test (tests/ops/test_registry.cpp) and the
// distributed one (tests/distributed/test_dist_registry.cpp): the node names a folder's sources
// record, and the node names a registry sample reaches. A recorded name that no sample reaches is
// an op that no gradcheck ever sees.
#pragma once
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/autograd/engine.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/gradcheck.h"
#include "engine/autograd/node.h"
#include "engine/factory.h"

namespace gs_test {

// Node names recorded with a literal name in the .cpp files under `dir`: record_op("name", ...),
// record_op(cond ? "a" : "b", ...) and finish_inplace(self, "name", ...). name -> file.
inline std::map<std::string, std::string> node_names_in_sources(const std::string& dir) {
  std::map<std::string, std::string> out;
  const std::regex literal(R"re((?:record_op|finish_inplace)\((?:[A-Za-z_]+, )?"([a-z0-9_]+)")re");
  const std::regex ternary(R"re(record_op\([a-z_]+ \? "([a-z0-9_]+)" : "([a-z0-9_]+)")re");
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().extension() != ".cpp") continue;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string src = text.str(), rel = std::filesystem::relative(e.path(), dir).string();
    for (std::sregex_iterator m(src.begin(), src.end(), literal), end; m != end; ++m) out.emplace((*m)[1], rel);
    for (std::sregex_iterator m(src.begin(), src.end(), ternary), end; m != end; ++m) {
      out.emplace((*m)[1], rel);
      out.emplace((*m)[2], rel);
    }
  }
  return out;
}

// Every node of a graph, from its root down to the leaves.
inline void walk_graph(const std::shared_ptr<gs::Node>& root, std::set<std::string>& names) {
  std::vector<std::shared_ptr<gs::Node>> stack{root};
  std::set<const gs::Node*> seen;
  while (!stack.empty()) {
    auto n = stack.back();
    stack.pop_back();
    if (!n || !seen.insert(n.get()).second) continue;
    names.insert(n->name());
    for (const auto& e : n->next_edges) stack.push_back(e.fn);
  }
}

// The ops a sample checks: every node of its forward graph (gradcheck differentiates through all
// of them), and the node that made each gradient (create_graph), where the backward ops
// (legendre_analysis_backward, slice_backward, ...) sit, looking through the adds with which the
// engine sums gradients that meet. An op that only appears deeper inside a backward rule (sign in
// abs's rule) is exercised there but not checked on its own, so it does not count.
// `second_order`: whether the op's entry says its backward is differentiable (gradgradcheck runs).
// A distributed sample's fn issues collectives: every rank must call this for the same samples.
inline void collect_reached_nodes(const gs::DifferentiableFn& fn, const std::vector<gs::Tensor>& inputs,
                                  bool second_order, std::set<std::string>& names) {
  gs::GradModeGuard on(true);
  auto outs = fn(inputs);
  std::vector<gs::Tensor> roots, gos, diff;
  for (auto& o : outs) {
    if (!o.defined() || !o.grad_fn()) continue;
    walk_graph(o.grad_fn(), names);
    roots.push_back(o);
    // Output gradients that require grad, as gradgradcheck's: a rule whose result depends on the
    // output gradient alone (a linear op's) then records its backward op too.
    gos.push_back(gs::randn(o.sizes(), {5, 5}, o.dtype()).set_requires_grad(second_order));
  }
  for (auto& x : inputs)
    if (x.defined() && x.requires_grad()) diff.push_back(x);
  if (roots.empty() || diff.empty()) return;
  auto grads = gs::grad(roots, diff, gos, {.create_graph = second_order, .allow_unused = true});
  std::vector<std::shared_ptr<gs::Node>> makers;
  for (auto& g : grads)
    if (g.defined() && g.grad_fn()) makers.push_back(g.grad_fn());
  while (!makers.empty()) {
    auto n = makers.back();
    makers.pop_back();
    names.insert(n->name());
    if (n->name() == "add")
      for (const auto& e : n->next_edges)
        if (e.fn) makers.push_back(e.fn);
  }
}

}  // namespace gs_test
