// Walks the op registry: every op, every sample, first-order gradcheck and (where the op says its
// backward is differentiable) gradgradcheck. Also checks that the registry is complete (every op
// node that ops/ records is reached by some sample: the registry is the one list of ops) and well
// formed (no duplicates, usable samples).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/registry_coverage.h"

namespace {

using gs::DType;
using gs::Tensor;

const gs::RandomKey kSampleKey{1234, 1};

std::string describe(const std::vector<Tensor>& inputs) {
  std::string s;
  for (const auto& t : inputs) {
    if (!s.empty()) s += ", ";
    if (!t.defined()) {
      s += "undefined";
      continue;
    }
    s += t.meta_str();
    if (!t.is_contiguous()) s += " non-contiguous";
    if (t.requires_grad()) s += " (grad)";
  }
  return s;
}

std::vector<double> realified(const Tensor& t) {
  std::vector<double> out;
  if (gs::is_complex(t.dtype())) {
    for (auto v : t.to_vector<gs::c128>()) out.push_back(v.real()), out.push_back(v.imag());
  } else if (t.dtype() == DType::b8) {
    for (bool v : t.to_vector<bool>()) out.push_back(v ? 1.0 : 0.0);
  } else {
    for (auto v : t.to_vector<double>()) out.push_back(v);
  }
  return out;
}

bool close(const std::vector<double>& a, const std::vector<double>& b, double tol, std::string& why) {
  if (a.size() != b.size()) {
    why = "sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
    if (!both_nan && !(std::abs(a[i] - b[i]) <= tol * (1.0 + std::abs(b[i])))) {
      why = "value " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
      return false;
    }
  }
  return true;
}


}  // namespace

TEST_CASE("registry: names are unique, sorted lookups work, and entries are well formed") {
  const auto& all = gs::OpRegistry::all();
  REQUIRE(!all.empty());
  std::set<std::string> seen;
  for (const auto& info : all) {
    CAPTURE(info.name);
    CHECK(!info.name.empty());
    CHECK_MESSAGE(seen.insert(info.name).second, "op registered twice: " << info.name);
    CHECK(static_cast<bool>(info.samples));
    CHECK(static_cast<bool>(info.fn));
    const gs::OpInfo* found = gs::OpRegistry::find(info.name);
    REQUIRE(found != nullptr);
    CHECK(found->name == info.name);
  }
  auto names = gs::OpRegistry::names();
  CHECK(names.size() == all.size());
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
  CHECK(gs::OpRegistry::find("no_such_op") == nullptr);
  // Registering a name twice is an error that names the op.
  gs::OpInfo dup = all.front();
  try {
    gs::OpRegistry::add(dup);
    FAIL("adding a duplicate op did not throw");
  } catch (const gs::Error& e) {
    CHECK(std::string(e.what()).find(dup.name) != std::string::npos);
    CHECK(std::string(e.what()).find("twice") != std::string::npos);
  }
  CHECK(gs::OpRegistry::all().size() == names.size());
}

TEST_CASE("registry: every op node recorded in ops/ is reached by some registry sample") {
  // The registry is the list: every node name that ops/ records (record_op / finish_inplace with a
  // literal name) must be reached by the forward graph or the gradient graph (create_graph) of
  // some registry sample, or the op is never gradchecked.
  const auto recorded = gs_test::node_names_in_sources(GS_SOURCE_ROOT "/ops");
  REQUIRE(recorded.size() > 20);  // the scan found the ops (a moved tree would find none)
  std::set<std::string> reached;
  for (const auto& info : gs::OpRegistry::all())
    for (auto& sample : info.samples(kSampleKey))
      gs_test::collect_reached_nodes(info.fn, sample.inputs, info.second_order, reached);
  // Ops whose samples need something this machine may not have.
  const std::map<std::string, std::string> needs_more = {
      {"to_device", "a second device (the CUDA backend's registry entries cover it)"}};
  for (const auto& [name, file] : recorded) {
    CAPTURE(file);
    if (needs_more.count(name)) continue;
    CHECK_MESSAGE(reached.count(name), "op node '" << name << "' (recorded in " << file
                                                    << ") is reached by no registry sample: add an OpRegistrar "
                                                       "entry beside the op (ops/registry.h)");
  }
}

TEST_CASE("registry: samples are usable and deterministic") {
  for (const auto& info : gs::OpRegistry::all()) {
    auto samples = info.samples(kSampleKey);
    CAPTURE(info.name);
    CHECK_MESSAGE(!samples.empty(), info.name << " has no samples");
    auto again = info.samples(kSampleKey);
    REQUIRE(again.size() == samples.size());
    for (size_t s = 0; s < samples.size(); ++s) {
      const auto& smp = samples[s];
      CAPTURE(smp.label);
      CHECK(!smp.label.empty());
      bool any_grad = false;
      for (const auto& t : smp.inputs) {
        if (!t.defined() || !t.requires_grad()) continue;
        any_grad = true;
        CHECK_MESSAGE((t.dtype() == DType::f64 || t.dtype() == DType::c128),
                      "differentiable sample input is " << t.meta_str() << "; gradcheck needs f64 or c128");
        CHECK(t.is_leaf());
      }
      CHECK_MESSAGE(any_grad, "sample has no input that requires grad");
      REQUIRE(again[s].inputs.size() == smp.inputs.size());
      for (size_t i = 0; i < smp.inputs.size(); ++i) {
        if (!smp.inputs[i].defined()) continue;
        std::string why;
        CHECK_MESSAGE(close(realified(again[s].inputs[i]), realified(smp.inputs[i]), 0.0, why),
                      "samples(key) is not deterministic for input " << i << ": " << why);
      }
    }
  }
}

TEST_CASE("registry: gradcheck of every op and sample (first order)") {
  int checked = 0;
  for (const auto& info : gs::OpRegistry::all()) {
    for (const auto& smp : info.samples(kSampleKey)) {
      INFO("op '" << info.name << "', sample '" << smp.label << "': " << describe(smp.inputs));
      gs::GradcheckReport rep;
      try {
        rep = gs::gradcheck(info.fn, smp.inputs, info.tolerances);
      } catch (const std::exception& e) {
        rep.ok = false;
        rep.failure = std::string("threw: ") + e.what();
      }
      CHECK_MESSAGE(rep.ok, "gradcheck failed: " << rep.failure);
      ++checked;
    }
  }
  CHECK(checked >= static_cast<int>(gs::OpRegistry::all().size()));
}

TEST_CASE("registry: gradgradcheck of every op with a differentiable backward") {
  for (const auto& info : gs::OpRegistry::all()) {
    if (!info.second_order) {
      MESSAGE("op '" << info.name << "' skips gradgradcheck (second_order = false)");
      continue;
    }
    for (const auto& smp : info.samples(kSampleKey)) {
      INFO("op '" << info.name << "', sample '" << smp.label << "': " << describe(smp.inputs));
      gs::GradcheckReport rep;
      try {
        rep = gs::gradgradcheck(info.fn, smp.inputs, info.tolerances);
      } catch (const std::exception& e) {
        rep.ok = false;
        rep.failure = std::string("threw: ") + e.what();
      }
      CHECK_MESSAGE(rep.ok, "gradgradcheck failed: " << rep.failure);
    }
  }
}

// gradcheck perturbs copies that keep each sample's layout (a transposed sample stays transposed),
// so it checks the strided paths against finite differences. Here the op also runs on contiguous
// copies of the samples: values and gradients must agree with the run on the samples as made, so a
// strided path cannot drift from the contiguous one.
TEST_CASE("registry: ops agree on the samples' own layouts and on contiguous copies") {
  for (const auto& info : gs::OpRegistry::all()) {
    auto as_made = info.samples(kSampleKey);
    auto for_copy = info.samples(kSampleKey);
    for (size_t s = 0; s < as_made.size(); ++s) {
      const auto& smp = as_made[s];
      INFO("op '" << info.name << "', sample '" << smp.label << "': " << describe(smp.inputs));
      try {
        gs::GradModeGuard on(true);
        std::vector<Tensor> xa = smp.inputs;
        std::vector<Tensor> xb = gs::fresh_leaves(for_copy[s].inputs, gs::LeafLayout::contiguous);
        auto ya = info.fn(xa);
        auto yb = info.fn(xb);
        REQUIRE(ya.size() == yb.size());
        std::vector<Tensor> roots_a, roots_b, gos;
        for (size_t o = 0; o < ya.size(); ++o) {
          CAPTURE(o);
          REQUIRE(ya[o].defined() == yb[o].defined());
          if (!ya[o].defined()) continue;
          CHECK(ya[o].sizes() == yb[o].sizes());
          CHECK(ya[o].dtype() == yb[o].dtype());
          std::string why;
          CHECK_MESSAGE(close(realified(ya[o]), realified(yb[o]), 1e-12, why), "forward output " << o << ": " << why);
          if (ya[o].requires_grad() && yb[o].requires_grad()) {
            roots_a.push_back(ya[o]);
            roots_b.push_back(yb[o]);
            gos.push_back(gs::randn(ya[o].sizes(), {99, o}, ya[o].dtype()));
          }
        }
        if (roots_a.empty()) continue;
        std::vector<Tensor> da, db;
        for (size_t i = 0; i < xa.size(); ++i)
          if (xa[i].defined() && xa[i].requires_grad()) da.push_back(xa[i]), db.push_back(xb[i]);
        auto ga = gs::grad(roots_a, da, gos, {.allow_unused = true});
        auto gb = gs::grad(roots_b, db, gos, {.allow_unused = true});
        REQUIRE(ga.size() == gb.size());
        for (size_t i = 0; i < ga.size(); ++i) {
          CAPTURE(i);
          REQUIRE(ga[i].defined() == gb[i].defined());
          if (!ga[i].defined()) continue;
          CHECK(ga[i].sizes() == da[i].sizes());
          std::string why;
          CHECK_MESSAGE(close(realified(ga[i]), realified(gb[i]), 1e-12, why), "gradient of input " << i << ": " << why);
        }
      } catch (const std::exception& e) {
        FAIL_CHECK("threw: " << std::string(e.what()));
      }
    }
  }
}

