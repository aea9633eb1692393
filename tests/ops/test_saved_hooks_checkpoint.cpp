// Saved-tensor hooks (engine/autograd/saved_hooks.h) and activation checkpointing
// (engine/autograd/checkpoint.h): PyTorch's rules for when pack and unpack run, the version check
// through hooks, nesting, the two shipped hooks, and checkpointing's replay, errors and double
// backward.
#include <doctest/doctest.h>

#include <any>
#include <cmath>
#include <vector>

#include "engine/autograd/checkpoint.h"
#include "engine/autograd/saved_hooks.h"
#include "ops/ops.h"
#include "tests/test_util.h"

namespace {

using gs::Tensor;

Tensor vec(std::vector<double> v) { return gs::from_vector(v, {static_cast<int64_t>(v.size())}); }

using gs_test::error_of;

// f(x) = sum(sin(x * x) * x): a few ops that save inputs and outputs.
Tensor f(const Tensor& x) { return gs::sum(gs::mul(gs::sin(gs::mul(x, x)), x)); }

std::vector<double> grad_of(const std::function<Tensor(const Tensor&)>& fn, std::vector<double> xs) {
  Tensor x = vec(xs).set_requires_grad(true);
  fn(x).backward();
  return x.grad().to_vector<double>();
}

}  // namespace

TEST_CASE("saved-tensor hooks: pack runs once per saved tensor at record time, unpack on each read") {
  int packs = 0, unpacks = 0;
  Tensor x = vec({0.5, -1.0, 2.0}).set_requires_grad(true);
  Tensor y;
  {
    gs::SavedTensorHooks hooks(
        [&](const Tensor& t) -> std::any {
          ++packs;
          CHECK_FALSE(t.requires_grad());  // an alias without history
          return gs::contiguous_copy(t, true);
        },
        [&](const std::any& p) -> Tensor {
          ++unpacks;
          return std::any_cast<Tensor>(p);
        });
    y = f(x);
  }
  const int packed = packs;
  CHECK(packed >= 3);  // mul saves x twice, sin saves its input, mul saves two more
  CHECK(unpacks == 0);
  y.backward();
  CHECK(unpacks == packed);
  CHECK(packs == packed);  // nothing packed in backward
  const auto want = grad_of(f, {0.5, -1.0, 2.0});
  const auto got = x.grad().to_vector<double>();
  for (size_t i = 0; i < 3; ++i) CHECK(got[i] == want[i]);
}

TEST_CASE("saved-tensor hooks: the version check still sees an in-place write made after saving") {
  Tensor a = vec({1, 2}).set_requires_grad(true);
  Tensor b = gs::mul(a, 2.0), c;
  {
    gs::SavedTensorHooks hooks([](const Tensor& t) -> std::any { return gs::contiguous_copy(t, true); },
                               [](const std::any& p) { return std::any_cast<Tensor>(p); });
    c = gs::mul(b, b);
  }
  gs::add_(b, 1.0);
  const std::string e = error_of([&] { gs::sum(c).backward(); });
  CHECK(e.find("modified by an in-place operation") != std::string::npos);
  CHECK(e.find("saved at version 0 and is now at version 1") != std::string::npos);
}

TEST_CASE("saved-tensor hooks: guards nest (the innermost applies) and restore the outer one") {
  std::vector<char> order;
  auto pair = [&](char tag) {
    return std::make_pair(
        [&order, tag](const Tensor& t) -> std::any { order.push_back(tag); return t; },
        [](const std::any& p) { return std::any_cast<Tensor>(p); });
  };
  Tensor x = vec({1, 2}).set_requires_grad(true);
  {
    auto [po, uo] = pair('o');
    gs::SavedTensorHooks outer(po, uo);
    gs::exp(x);  // saves its output: 'o'
    {
      auto [pi, ui] = pair('i');
      gs::SavedTensorHooks inner(pi, ui);
      gs::exp(x);  // 'i'
    }
    gs::exp(x);  // 'o' again
  }
  gs::exp(x);  // no hooks
  CHECK(order == std::vector<char>{'o', 'i', 'o'});
  CHECK(gs::current_saved_tensor_hooks() == nullptr);
}

TEST_CASE("saved-tensor hooks: an unpack that cannot take the packed value, or returns the wrong tensor, is an error") {
  Tensor x = vec({1, 2}).set_requires_grad(true);
  Tensor y, z;
  {
    gs::SavedTensorHooks hooks([](const Tensor&) -> std::any { return 42; },
                               [](const std::any& p) { return std::any_cast<Tensor>(p); });
    y = gs::exp(x);
  }
  std::string e = error_of([&] { gs::sum(y).backward(); });
  CHECK(e.find("the unpack hook could not take what the pack hook returned") != std::string::npos);
  CHECK(e.find("'exp'") != std::string::npos);
  {
    gs::SavedTensorHooks hooks([](const Tensor& t) -> std::any { return t; },
                               [](const std::any&) { return gs::zeros({3}, gs::DType::f32); });
    z = gs::exp(x);
  }
  e = error_of([&] { gs::sum(z).backward(); });
  CHECK(e.find("returned f32 (3,)") != std::string::npos);
  CHECK(e.find("expected the packed tensor's shape, dtype and device: f64 (2,) on cpu") != std::string::npos);
}

TEST_CASE("saved-tensor hooks: SaveInBf16 keeps bf16 copies; gradients follow from the rounded values") {
  std::vector<double> xs = {0.3, 1.7, -2.2, 0.9};
  Tensor x = gs::from_vector(xs, {4}).set_requires_grad(true);
  Tensor y;
  {
    gs::SaveInBf16 bf16;
    y = gs::sum(gs::mul(x, x));  // saves x twice, as bf16
  }
  y.backward();
  const auto g = x.grad().to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    // d/dx x^2 = 2x with x read back from bf16: exact to bf16 rounding, not to f64.
    const double rounded = gs::cast_copy(gs::cast_copy(gs::from_vector(std::vector<double>{xs[i]}, {1}), gs::DType::bf16),
                                         gs::DType::f64).to_vector<double>()[0];
    CHECK(g[i] == 2 * rounded);
    CHECK(std::abs(g[i] - 2 * xs[i]) <= 2 * std::abs(xs[i]) * 1.0 / 256);
  }
}

TEST_CASE("saved-tensor hooks: SaveOnHost keeps host tensors and gives exact gradients; double backward works") {
  Tensor x = vec({0.5, -1.0, 2.0}).set_requires_grad(true);
  Tensor y;
  {
    gs::SaveOnHost offload;
    y = f(x);
  }
  Tensor g = gs::grad({y}, {x}, {}, {.create_graph = true})[0];
  const auto want = grad_of(f, {0.5, -1.0, 2.0});
  const auto got = g.to_vector<double>();
  for (size_t i = 0; i < 3; ++i) CHECK(got[i] == want[i]);
  // The second derivative through the unpacked tensors equals the one without hooks.
  Tensor h = gs::grad({gs::sum(g)}, {x})[0];
  Tensor x2 = vec({0.5, -1.0, 2.0}).set_requires_grad(true);
  Tensor g2 = gs::grad({f(x2)}, {x2}, {}, {.create_graph = true})[0];
  Tensor h2 = gs::grad({gs::sum(g2)}, {x2})[0];
  const auto hv = h.to_vector<double>(), hv2 = h2.to_vector<double>();
  for (size_t i = 0; i < 3; ++i) CHECK(hv[i] == hv2[i]);
}

TEST_CASE("checkpoint: the same gradients, replayed once, nothing saved in the first run") {
  auto region = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gs::mul(gs::sin(gs::mul(in[0], in[1])), in[0])};
  };
  Tensor a = vec({0.5, -1.0, 2.0}).set_requires_grad(true), b = vec({1.5, 0.25, -0.5}).set_requires_grad(true);
  int calls = 0;
  auto counted = [&](const std::vector<Tensor>& in) {
    ++calls;
    return region(in);
  };
  Tensor y = gs::sum(gs::exp(gs::checkpoint(counted, {a, b})[0]));
  CHECK(calls == 1);
  y.backward();
  CHECK(calls == 2);  // one replay for all the region's saved tensors
  Tensor a2 = vec({0.5, -1.0, 2.0}).set_requires_grad(true), b2 = vec({1.5, 0.25, -0.5}).set_requires_grad(true);
  gs::sum(gs::exp(region({a2, b2})[0])).backward();
  const auto ga = a.grad().to_vector<double>(), gb = b.grad().to_vector<double>();
  const auto ga2 = a2.grad().to_vector<double>(), gb2 = b2.grad().to_vector<double>();
  for (size_t i = 0; i < 3; ++i) {
    CHECK(ga[i] == ga2[i]);
    CHECK(gb[i] == gb2[i]);
  }
}

TEST_CASE("checkpoint: random noise is replayed exactly (Philox keys), and double backward works") {
  // dropout with a fixed key: the replay draws the same mask.
  auto region = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gs::mul(gs::dropout(gs::tanh(in[0]), 0.5, gs::RandomKey{77, 3}, true), in[0])};
  };
  const std::vector<double> xs = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8};
  Tensor x = vec(xs).set_requires_grad(true);
  Tensor g = gs::grad({gs::sum(gs::checkpoint(region, {x})[0])}, {x}, {}, {.create_graph = true})[0];
  Tensor x2 = vec(xs).set_requires_grad(true);
  Tensor g2 = gs::grad({gs::sum(region({x2})[0])}, {x2}, {}, {.create_graph = true})[0];
  const auto a = g.to_vector<double>(), b = g2.to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) CHECK(a[i] == b[i]);
  Tensor h = gs::grad({gs::sum(gs::mul(g, g))}, {x})[0];
  Tensor h2 = gs::grad({gs::sum(gs::mul(g2, g2))}, {x2})[0];
  const auto ha = h.to_vector<double>(), hb = h2.to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) CHECK(ha[i] == hb[i]);
}

TEST_CASE("checkpoint: an input modified in place before backward is the usual version error") {
  Tensor x = vec({1, 2, 3}).set_requires_grad(true);
  Tensor h = gs::mul(x, 2.0);  // a non-leaf input to the region
  Tensor y = gs::checkpoint([](const std::vector<Tensor>& in) { return std::vector<Tensor>{gs::mul(in[0], in[0])}; },
                            {h})[0];
  gs::add_(h, 1.0);
  const std::string e = error_of([&] { gs::sum(y).backward(); });
  CHECK(e.find("modified by an in-place operation") != std::string::npos);
}

TEST_CASE("checkpoint: a replay that does different work is an error saying so") {
  int calls = 0;
  auto unstable = [&](const std::vector<Tensor>& in) {
    ++calls;
    Tensor y = gs::exp(in[0]);
    if (calls > 1) y = gs::exp(y);  // the replay saves one more tensor
    return std::vector<Tensor>{y};
  };
  Tensor x = vec({1, 2}).set_requires_grad(true);
  Tensor y = gs::checkpoint(unstable, {x})[0];
  const std::string e = error_of([&] { gs::sum(y).backward(); });
  CHECK(e.find("the replayed forward saved 2 tensors for backward, the first run 1") != std::string::npos);
}

TEST_CASE("checkpoint: under no_grad the function just runs") {
  gs::NoGradGuard ng;
  int calls = 0;
  Tensor y = gs::checkpoint([&](const std::vector<Tensor>& in) { ++calls; return std::vector<Tensor>{gs::exp(in[0])}; },
                            {vec({1})})[0];
  CHECK(calls == 1);
  CHECK_FALSE(y.requires_grad());
  CHECK(y.to_vector<double>()[0] == doctest::Approx(std::exp(1.0)));
}

TEST_CASE("saved-tensor hooks: SaveOnHost moves CUDA activations to the host and back (GPU check)") {
  if (gs::cuda::device_count() == 0) {
    MESSAGE("CUDA case skipped: no usable CUDA device (" << gs::cuda::unavailable_reason() << ")");
    return;
  }
  const gs::Device gpu = gs::Device::cuda(0);
  int on_host = 0;
  Tensor x = gs::to(vec({0.5, -1.0, 2.0}), gpu).detach().set_requires_grad(true);
  Tensor y;
  {
    gs::SaveOnHost offload;
    gs::SavedTensorHooks spy(
        [&](const Tensor& t) -> std::any {
          Tensor h = gs::to_device_copy(t, gs::Device::cpu());
          on_host += h.device().is_cpu();
          return std::make_pair(h, t.device());
        },
        [](const std::any& p) {
          auto [h, d] = std::any_cast<std::pair<Tensor, gs::Device>>(p);
          return gs::to_device_copy(h, d);
        });
    y = f(x);
  }
  CHECK(on_host >= 3);
  gs::Tensor g = gs::grad({y}, {x})[0];
  Tensor g_plain;
  {
    gs::SaveOnHost offload;  // the shipped hooks themselves
    Tensor x2 = gs::to(vec({0.5, -1.0, 2.0}), gpu).detach().set_requires_grad(true);
    g_plain = gs::grad({f(x2)}, {x2})[0];
  }
  const auto want = grad_of(f, {0.5, -1.0, 2.0});
  const auto a = gs::to(g, gs::Device::cpu()).to_vector<double>(), b = gs::to(g_plain, gs::Device::cpu()).to_vector<double>();
  for (size_t i = 0; i < 3; ++i) {
    CHECK(a[i] == doctest::Approx(want[i]).epsilon(1e-12));
    CHECK(b[i] == doctest::Approx(want[i]).epsilon(1e-12));
  }
}

TEST_CASE("checkpoint: each replayed tensor is freed once the node that saved it has run") {
  // 6 tanh in a row on 2 MiB each: tanh saves its output. Hooks on the gradients record the bytes
  // in use as backward walks down the region: they must fall as the replayed outputs are released.
  const int64_t n = 1 << 18;
  std::vector<size_t> in_use;
  auto region = [&](const std::vector<Tensor>& in) {
    Tensor y = in[0];
    for (int k = 0; k < 6; ++k) {
      y = gs::tanh(y);
      y.register_hook([&](const Tensor& g) {
        in_use.push_back(gs::memory_stats(gs::Device::cpu()).in_use);
        return g;
      });
    }
    return std::vector<Tensor>{y};
  };
  Tensor x = gs::mul(gs::full({n}, 0.5, gs::DType::f64), 1.0).detach().set_requires_grad(true);
  Tensor y = gs::checkpoint(region, {x})[0];
  gs::sum(y).backward();
  REQUIRE(in_use.size() >= 6);
  const size_t bytes = n * sizeof(double);
  // The first hook (the last tanh's gradient) runs before the replay; the later ones after it,
  // each with one replayed output fewer alive.
  CHECK(in_use[1] >= in_use[in_use.size() - 1] + 3 * bytes);
}
