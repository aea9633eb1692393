// Walks the op registry: every op, every sample, first-order gradcheck and (where the op says its
// backward is differentiable) gradgradcheck. Also checks that the registry is complete (every op we
// expect is registered) and well formed (no duplicates, usable samples).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace {

using gs::DType;
using gs::Tensor;

const gs::RandomKey kSampleKey{1234, 1};

// Every op name the op headers declare, as registered. A name that is expected but missing means an
// op was added without its registry entry (so it would never be gradchecked).
const std::vector<std::string> kExpectedOps = {
    // ops/elementwise_binary.cpp
    "add", "sub", "mul", "div", "pow", "pow_scalar",
    // ops/elementwise_unary.cpp (sign is not differentiable and is not registered)
    "neg", "exp", "log", "sqrt", "rsqrt", "abs", "abs_complex", "tanh", "sigmoid", "relu", "erf", "gelu",
    "gelu_tanh", "silu", "square",
    // ops/gelu_fused.cpp
    "gelu_fused", "gelu_bias_fused",
    // ops/compare.cpp
    "where",
    // ops/complex_ops.cpp
    "conj", "complex", "real_imag", "complex_mul", "view_as_real_complex",
    // ops/view.cpp
    "reshape", "permute", "transpose", "slice", "narrow", "select", "expand", "squeeze_unsqueeze", "flatten",
    "clone", "to_dtype",
    // ops/reduce_sum.cpp
    "sum", "mean", "sum_to",
    // ops/reduce.cpp
    "var", "max", "min", "logsumexp",
    // ops/shape_ops.cpp
    "cat", "stack", "split", "pad",
    // ops/inplace.cpp (fill_ and zero_ share one entry)
    "add_", "mul_", "mul_self_aliased", "copy_", "fill_zero_",
    // ops/linalg.cpp
    "matmul", "matmul_transposed_b", "bmm", "linear",
    // ops/sphere/fft.cpp, sht.cpp
    "rfft_lon", "irfft_lon", "legendre_analysis", "legendre_synthesis", "sht", "isht",
    // ops/sphere/vector_sht.cpp
    "vector_legendre_analysis", "vector_legendre_synthesis", "vector_sht", "ivector_sht", "vorticity_divergence",
    "winds_from_vorticity_divergence", "spectral_laplacian", "inverse_spectral_laplacian", "spectral_gradient",
    // ops/sphere/spectral_conv.cpp
    "spectral_conv_dh", "spectral_conv_diagonal", "spectral_conv_adjoint", "spectral_conv_weight_grad",
    // ops/sphere/sfno_blocks.cpp
    "layer_norm_channels", "instance_norm_sphere", "conditional_layer_norm", "conv1x1", "local_conv3x3",
    "sphere_neighbours3x3", "area_weighted_mean", "area_weighted_mse",
};

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

// Contiguous copies with the same requires_grad flags (fresh leaves).
std::vector<Tensor> contiguous_leaves(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> r;
  for (const auto& t : inputs) {
    if (!t.defined()) {
      r.push_back(t);
      continue;
    }
    Tensor c = gs::contiguous_copy(t, true);
    if (t.requires_grad()) c.set_requires_grad(true);
    r.push_back(c);
  }
  return r;
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

TEST_CASE("registry: every op declared in the headers is registered") {
  for (const auto& name : kExpectedOps) {
    CAPTURE(name);
    CHECK_MESSAGE(gs::OpRegistry::find(name) != nullptr, "op '" << name << "' is not in the registry");
  }
  // And the reverse: a registered op that this list does not know about should be added to it.
  std::set<std::string> expected(kExpectedOps.begin(), kExpectedOps.end());
  for (const auto& name : gs::OpRegistry::names())
    if (!expected.count(name)) MESSAGE("registered op not in the test's expected list: " << name);
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

// gradcheck works on contiguous copies of the inputs, so a sample labelled "non-contiguous" never
// reaches the op's strided paths there. Here the op runs on the sample exactly as made (strides
// and all) and must agree, in values and in gradients, with the run on contiguous copies.
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
        std::vector<Tensor> xb = contiguous_leaves(for_copy[s].inputs);
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

