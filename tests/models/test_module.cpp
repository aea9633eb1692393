// Module: registration and dotted names, refusals (duplicate names, cycles), constant buffers that
// refuse writes, the state dict and its strict loading, train / eval propagation, parameter counts,
// and the initialisers (truncated normal moments, name-keyed draws).
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "models/module.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/reduce.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::models;
using gs_test::contains;
using gs_test::error_of;

namespace {

// A module whose registration functions are public, to build trees in the tests.
struct Open : Module {
  explicit Open(std::string type = "Open") : Module(std::move(type)) {}
  using Module::register_buffer;
  using Module::register_module;
  using Module::register_parameter;
  int mode_changes = 0;
  void on_mode_changed() override { ++mode_changes; }
};

// weight (2, 3), bias (3), a constant table and a mutable running mean.
struct Leaf : Open {
  Tensor weight, bias, table, running;
  explicit Leaf(double w = 1.0) : Open("Leaf") {
    weight = register_parameter("weight", full({2, 3}, w, DType::f64));
    bias = register_parameter("bias", zeros({3}, DType::f64));
    table = register_buffer("table", arange(0.0, 4.0, 1.0, DType::f64));
    running = register_buffer("running", zeros({3}, DType::f64), BufferKind::mutable_state);
  }
};

// scale (complex, 2), enc: Leaf, dec: {Leaf, inner: Leaf}.
struct Tree {
  std::shared_ptr<Open> root = std::make_shared<Open>("Root");
  std::shared_ptr<Leaf> enc, dec_leaf, inner;
  std::shared_ptr<Open> dec = std::make_shared<Open>("Dec");
  Tensor scale;
  Tree() {
    scale = root->register_parameter("scale", zeros({2}, DType::c128));
    enc = root->register_module("enc", std::make_shared<Leaf>(1.0));
    root->register_module("dec", dec);
    dec_leaf = dec->register_module("leaf", std::make_shared<Leaf>(2.0));
    inner = dec_leaf->register_module("inner", std::make_shared<Leaf>(3.0));
  }
};

std::vector<std::string> names_of(const std::vector<NamedParameter>& ps) {
  std::vector<std::string> out;
  for (auto& p : ps) out.push_back(p.name);
  return out;
}

double normal_pdf(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }
double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Mean and standard deviation of normal(mu, sigma) truncated to [a, b].
std::pair<double, double> trunc_normal_moments(double mu, double sigma, double a, double b) {
  const double al = (a - mu) / sigma, be = (b - mu) / sigma, z = normal_cdf(be) - normal_cdf(al);
  const double r = (normal_pdf(al) - normal_pdf(be)) / z;
  const double var = 1 + (al * normal_pdf(al) - be * normal_pdf(be)) / z - r * r;
  return {mu + sigma * r, sigma * std::sqrt(var)};
}

}  // namespace

TEST_CASE("module: dotted names depth-first in registration order, parameters are fresh leaves") {
  Tree t;
  CHECK(names_of(t.root->named_parameters()) ==
        std::vector<std::string>{"scale", "enc.weight", "enc.bias", "dec.leaf.weight", "dec.leaf.bias",
                                 "dec.leaf.inner.weight", "dec.leaf.inner.bias"});
  std::vector<std::string> buffers;
  for (auto& b : t.root->named_buffers()) buffers.push_back(b.name);
  CHECK(buffers == std::vector<std::string>{"enc.table", "enc.running", "dec.leaf.table", "dec.leaf.running",
                                            "dec.leaf.inner.table", "dec.leaf.inner.running"});
  // The handles the module keeps are the listed tensors, leaves that require grad, named.
  auto ps = t.root->named_parameters();
  CHECK(ps[1].tensor.is_same(t.enc->weight));
  CHECK(ps[6].tensor.is_same(t.inner->bias));
  for (auto& p : ps) {
    CHECK(p.tensor.is_leaf());
    CHECK(p.tensor.requires_grad());
  }
  CHECK(t.enc->weight.name() == "weight");
  CHECK(t.root->named_children().size() == 2);

  // register_parameter copies: writing the source afterwards does not reach the parameter.
  Open m;
  Tensor src = ones({3}, DType::f64);
  Tensor p = m.register_parameter("p", src);
  CHECK(!p.is_same(src));
  add_(src, 5.0);
  CHECK(p.to_vector<double>() == std::vector<double>{1, 1, 1});
}

TEST_CASE("module: bad names, duplicates, bad values and cycles are refused") {
  Open m;
  m.register_parameter("w", ones({2}, DType::f64));
  CHECK(contains(error_of([&] { m.register_parameter("w", ones({2}, DType::f64)); }), "'w' is already registered"));
  CHECK(contains(error_of([&] { m.register_buffer("w", ones({2}, DType::f64)); }), "'w' is already registered"));
  CHECK(contains(error_of([&] { m.register_module("w", std::make_shared<Open>()); }), "'w' is already registered"));
  CHECK(contains(error_of([&] { m.register_parameter("a.b", ones({2}, DType::f64)); }), "contain no '.'"));
  CHECK(contains(error_of([&] { m.register_parameter("", ones({2}, DType::f64)); }), "non-empty"));
  CHECK(contains(error_of([&] { m.register_parameter("i", arange(3)); }), "must be floating or complex, got i64"));
  CHECK(contains(error_of([&] { m.register_parameter("u", Tensor{}); }), "undefined"));
  CHECK(contains(error_of([&] { m.register_module("null", std::shared_ptr<Open>{}); }), "is null"));
  CHECK(contains(error_of([&] { m.register_parameter("s", ones({2}, DType::f64), Distribution::sharded_along(1, GridAxis::h)); }),
                 "is declared sharded dim 1 over h but has 1 dims"));
  // A failed registration leaves nothing behind.
  CHECK(names_of(m.named_parameters()) == std::vector<std::string>{"w"});

  // A module may not become its own descendant (every traversal would recurse forever).
  auto a = std::make_shared<Open>("A");
  auto b = std::make_shared<Open>("B");
  a->register_module("b", b);
  CHECK(contains(error_of([&] { b->register_module("a", a); }), "cannot be its own descendant"));
  CHECK(contains(error_of([&] { a->register_module("self", a); }), "cannot be its own descendant"));
}

TEST_CASE("module: a sub-module registered twice (tied weights) lists its tensors once") {
  auto root = std::make_shared<Open>("Root");
  auto shared = std::make_shared<Leaf>();
  root->register_module("first", shared);
  root->register_module("second", shared);
  CHECK(names_of(root->named_parameters()) == std::vector<std::string>{"first.weight", "first.bias"});
  CHECK(root->named_buffers().size() == 2);
  CHECK(root->num_parameters() == 9);
  CHECK(root->state_dict().size() == 4);  // weight, bias, table, running
}

TEST_CASE("module: constant buffers refuse writes; the state dict holds them (checked on load, not written)") {
  Tree t;
  const std::string err = error_of([&] { add_(t.enc->table, 1.0); });
  CHECK(contains(err, "read-only"));
  CHECK(contains(err, "Leaf buffer 'table' is constant"));
  // Also under no_grad, and through another handle on the same storage.
  {
    NoGradGuard no_grad;
    Tensor alias = t.enc->table.detach();
    CHECK(contains(error_of([&] { fill_(alias, 0.0); }), "buffer 'table' is constant"));
  }
  CHECK(t.enc->table.to_vector<double>() == std::vector<double>{0, 1, 2, 3});
  // Mutable buffers can be written.
  add_(t.enc->running, 2.0);
  CHECK(t.enc->running.to_vector<double>() == std::vector<double>{2, 2, 2});

  StateDict sd = t.root->state_dict();
  CHECK(sd.size() == 7 + 3 + 3);
  CHECK(sd.count("enc.running"));
  CHECK(sd.count("dec.leaf.inner.running"));
  CHECK(sd.count("enc.table"));
  // Loading checks a constant buffer against the one the options build; it never writes it.
  Tree other;
  other.root->load_state_dict(sd);
  StateDict without = sd;
  without.erase("enc.table");
  other.root->load_state_dict(without);  // older state dicts without constants load too
  StateDict wrong = sd;
  wrong["enc.table"] = add(sd.at("enc.table"), 1.0);
  CHECK(contains(error_of([&] { other.root->load_state_dict(wrong); }),
                 "constant buffer 'enc.table' in the state dict differs from the one these options build"));
  CHECK(sd.at("enc.running").to_vector<double>() == std::vector<double>{2, 2, 2});
  // Values are detached handles on the live storage.
  CHECK(!sd.at("enc.weight").requires_grad());
  CHECK(sd.at("enc.weight").storage().get() == t.enc->weight.storage().get());
}

TEST_CASE("module: load_state_dict copies in place; strict errors list keys; a bad entry changes nothing") {
  Tree src, dst;
  // Make the source differ everywhere it can.
  {
    NoGradGuard no_grad;
    for (auto& p : src.root->named_parameters()) add_(p.tensor, 10.0);
    add_(src.enc->running, 7.0);
  }
  StateDict sd = src.root->state_dict();
  Tensor handle = dst.enc->weight;
  const uint64_t v0 = handle.version();
  dst.root->load_state_dict(sd);
  CHECK(handle.is_same(dst.enc->weight));  // handles stay valid
  CHECK(handle.version() > v0);            // a write like any other: the version bumped
  CHECK(dst.enc->weight.to_vector<double>() == std::vector<double>(6, 11.0));
  CHECK(dst.inner->weight.to_vector<double>() == std::vector<double>(6, 13.0));
  CHECK(dst.enc->running.to_vector<double>() == std::vector<double>(3, 7.0));
  CHECK(dst.scale.to_vector<c128>()[0] == c128(10.0, 0.0));
  CHECK(dst.enc->weight.requires_grad());
  CHECK(dst.enc->weight.is_leaf());

  // strict: every missing and every unexpected key named.
  Tree fresh;
  StateDict partial = sd;
  partial.erase("enc.bias");
  partial.erase("dec.leaf.running");
  partial["enc.extra"] = zeros({1}, DType::f64);
  const std::string err = error_of([&] { fresh.root->load_state_dict(partial); });
  CHECK_MESSAGE(contains(err, "missing keys [enc.bias, dec.leaf.running]"), err);
  CHECK(contains(err, "unexpected keys [enc.extra]"));
  CHECK(fresh.enc->weight.to_vector<double>() == std::vector<double>(6, 1.0));
  // non-strict: the present keys load, the others are left alone.
  fresh.root->load_state_dict(partial, /*strict=*/false);
  CHECK(fresh.enc->weight.to_vector<double>() == std::vector<double>(6, 11.0));
  CHECK(fresh.enc->bias.to_vector<double>() == std::vector<double>(3, 0.0));

  // A shape or dtype mismatch anywhere leaves every tensor untouched (validated before writing).
  Tree victim;
  StateDict bad = sd;
  bad["dec.leaf.inner.weight"] = zeros({3, 2}, DType::f64);  // sorted after enc.*: written last if at all
  const uint64_t vv = victim.enc->weight.version();
  const std::string err2 = error_of([&] { victim.root->load_state_dict(bad); });
  CHECK(contains(err2, "'dec.leaf.inner.weight' expects f64 (2, 3)"));
  CHECK(contains(err2, "(3, 2)"));
  CHECK(victim.enc->weight.to_vector<double>() == std::vector<double>(6, 1.0));
  CHECK(victim.enc->weight.version() == vv);
  StateDict bad_dtype = sd;
  bad_dtype["enc.bias"] = zeros({3}, DType::f32);
  const std::string err3 = error_of([&] { victim.root->load_state_dict(bad_dtype); });
  CHECK_MESSAGE(contains(err3, "'enc.bias' expects f64 (3,) on cpu but the state dict holds f32 (3,)"), err3);
  CHECK(victim.scale.to_vector<c128>()[0] == c128(0.0, 0.0));
}

TEST_CASE("module: train / eval reach every descendant and call on_mode_changed once each") {
  Tree t;
  CHECK(t.root->is_training());
  t.root->eval();
  for (Open* m : std::vector<Open*>{t.root.get(), t.enc.get(), t.dec.get(), t.dec_leaf.get(), t.inner.get()}) {
    CHECK(!m->is_training());
    CHECK(m->mode_changes == 1);
  }
  t.dec->train();
  CHECK(!t.root->is_training());
  CHECK(!t.enc->is_training());
  CHECK(t.dec->is_training());
  CHECK(t.inner->is_training());
  CHECK(t.inner->mode_changes == 2);
}

TEST_CASE("module: num_parameters counts complex elements once, or twice as real degrees of freedom") {
  Tree t;
  // 2 complex + 3 leaves * (6 + 3) reals
  CHECK(t.root->num_parameters() == 2 + 27);
  CHECK(t.root->num_parameters(/*complex_as_two=*/true) == 4 + 27);
  CHECK(t.enc->num_parameters(true) == 9);
  const std::string s = t.root->summary();
  CHECK(contains(s, "dec.leaf.inner.weight"));
  CHECK(contains(s, "29 parameters (31 real degrees of freedom)"));
}

TEST_CASE("module: zero_grad drops every gradient") {
  Tree t;
  for (auto& p : t.root->parameters()) p.set_grad(ones_like(p));
  t.root->zero_grad();
  for (auto& p : t.root->parameters()) CHECK(!p.grad().defined());
}

TEST_CASE("init: trunc_normal stays inside [a, b] with the truncated moments") {
  struct Case {
    double mean, std, a, b;
    DType dtype;
  };
  // symmetric; shifted and one-sided; a far tail (mostly the inverse-CDF path); f32.
  for (Case c : {Case{0, 1, -2, 2, DType::f64}, Case{0.5, 1, 0, 3, DType::f64}, Case{0, 1, 3, 4, DType::f64},
                 Case{0, 0.02, -0.04, 0.04, DType::f32}}) {
    CAPTURE(c.mean);
    CAPTURE(c.a);
    Tensor t = init_trunc_normal({400, 500}, c.mean, c.std, c.a, c.b, RandomKey{11, 3}, c.dtype);
    CHECK(t.dtype() == c.dtype);
    const std::vector<double> v = t.to_vector<double>();
    double lo = v[0], hi = v[0], s = 0, s2 = 0;
    for (double x : v) {
      lo = std::min(lo, x), hi = std::max(hi, x);
      s += x;
    }
    const double m = s / v.size();
    for (double x : v) s2 += (x - m) * (x - m);
    const double sd = std::sqrt(s2 / (v.size() - 1));
    CHECK(lo >= c.a);
    CHECK(hi <= c.b);
    // The range is nearly filled.
    CHECK(lo < c.a + 0.02 * (c.b - c.a));
    CHECK(hi > c.b - 0.02 * (c.b - c.a));
    auto [want_mean, want_std] = trunc_normal_moments(c.mean, c.std, c.a, c.b);
    // 200000 samples: the standard error of the mean is ~0.0023 std.
    CHECK(std::abs(m - want_mean) < 0.01 * c.std);
    CHECK(std::abs(sd - want_std) < 0.01 * c.std);
  }
  CHECK(contains(error_of([] { init_trunc_normal({2}, 0, 1, 1, -1, {}, DType::f64); }), "a < b"));
  CHECK(contains(error_of([] { init_trunc_normal({2}, 0, 1, -1, 1, {}, DType::c64); }), "expected a real dtype"));
}

TEST_CASE("init: normal and uniform have the requested moments; complex normal splits the variance") {
  Tensor n = init_normal({100000}, 0.5, RandomKey{5, 1}, DType::f64);
  CHECK(std::abs(mean(n).item<double>()) < 0.01);
  CHECK(std::abs(std::sqrt(var(n).item<double>()) - 0.5) < 0.01);
  Tensor z = init_normal({100000}, 2.0, RandomKey{5, 2}, DType::c128);
  double e2 = 0;
  for (c128 x : z.to_vector<c128>()) e2 += std::norm(x);
  CHECK(std::abs(e2 / 100000 - 4.0) < 0.1);
  Tensor u = init_uniform({100000}, -3, 1, RandomKey{5, 3}, DType::f32);
  auto uv = u.to_vector<double>();
  CHECK(*std::min_element(uv.begin(), uv.end()) >= -3);
  CHECK(*std::max_element(uv.begin(), uv.end()) < 1);
  CHECK(std::abs(mean(u).item<double>() + 1) < 0.02);
}

TEST_CASE("init: name-keyed draws do not depend on registration order") {
  CHECK(param_key(7, "blocks.0.w").stream == param_key(7, "blocks.0.w").stream);
  CHECK(param_key(7, "blocks.0.w").stream != param_key(7, "blocks.1.w").stream);
  CHECK(param_key(7, "x").seed == 7);
  CHECK(param_key(8, "x").seed == 8);

  const std::vector<std::string> order1{"a", "b.c", "d"}, order2{"d", "a", "b.c"};
  auto build = [](const std::vector<std::string>& order) {
    auto m = std::make_shared<Open>();
    for (auto& name : order) {
      std::string local = name;
      for (char& ch : local)
        if (ch == '.') ch = '_';
      m->register_parameter(local, init_normal({4, 3}, 1.0, param_key(7, name), DType::f32));
    }
    return m;
  };
  StateDict s1 = build(order1)->state_dict(), s2 = build(order2)->state_dict();
  REQUIRE(s1.size() == 3);
  for (auto& [name, t] : s1) {
    CAPTURE(name);
    CHECK(t.to_vector<float>() == s2.at(name).to_vector<float>());
  }
  CHECK(s1.at("a").to_vector<float>() != s1.at("d").to_vector<float>());
}
