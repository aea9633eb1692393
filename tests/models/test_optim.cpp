// Optimizers and schedules against values worked out by hand (PyTorch's update rules), version
// bumps, skipped parameters, clipping, state round trips that continue bit for bit, and refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "models/lr_schedule.h"
#include "models/optim.h"
#include "ops/composite_path.h"
#include "ops/view.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::models;
using gs_test::contains;
using gs_test::error_of;

namespace {

Tensor leaf(const std::vector<double>& v, DType dt = DType::f64) {
  Tensor t = cast_copy(from_vector(v), dt);
  t.set_requires_grad(true);
  return t;
}
void set_grad(const Tensor& p, const std::vector<double>& g) { p.set_grad(cast_copy(from_vector(g), p.dtype())); }
double val(const Tensor& p, size_t i = 0) { return p.to_vector<double>()[i]; }

// Runs `opt` on the single scalar parameter p with gradients gs, returning p after each step.
std::vector<double> run(Optimizer& opt, const Tensor& p, const std::vector<double>& gs) {
  std::vector<double> out;
  for (double g : gs) {
    set_grad(p, {g});
    opt.step();
    out.push_back(val(p));
  }
  return out;
}

void check_seq(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    if (tol == 0) CHECK(got[i] == want[i]);
    else CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
  }
}

}  // namespace

TEST_CASE("SGD: plain, weight decay with momentum, nesterov, dampening (hand values)") {
  {
    Tensor p = leaf({1, -2});
    SGD opt(unnamed_parameters({p}), {.lr = 0.1});
    set_grad(p, {0.5, 1});
    opt.step();
    check_seq(p.to_vector<double>(), {0.95, -2.1});
  }
  {
    // lr 0.1, momentum 0.9, wd 0.1, g = 0.5 each step:
    //  1: d = 0.5 + 0.1*1 = 0.6, buf = d = 0.6,                        p = 1 - 0.06 = 0.94
    //  2: d = 0.5 + 0.094 = 0.594, buf = 0.9*0.6 + 0.594 = 1.134,       p = 0.94 - 0.1134 = 0.8266
    //  3: d = 0.5 + 0.08266 = 0.58266, buf = 1.0206 + 0.58266 = 1.60326, p = 0.8266 - 0.160326 = 0.666274
    Tensor p = leaf({1});
    SGD opt(unnamed_parameters({p}), {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1});
    check_seq(run(opt, p, {0.5, 0.5, 0.5}), {0.94, 0.8266, 0.666274});
  }
  {
    // nesterov: 1: buf = 0.5, d = 0.5 + 0.45 = 0.95, p = 0.905
    //           2: buf = 0.45 + 0.5 = 0.95, d = 0.5 + 0.855 = 1.355, p = 0.905 - 0.1355 = 0.7695
    Tensor p = leaf({1});
    SGD opt(unnamed_parameters({p}), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
    check_seq(run(opt, p, {0.5, 0.5}), {0.905, 0.7695});
  }
  {
    // dampening 0.5: the first step takes d undamped (torch), then buf = 0.9*0.5 + 0.5*0.5 = 0.7.
    Tensor p = leaf({1});
    SGD opt(unnamed_parameters({p}), {.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
    check_seq(run(opt, p, {0.5, 0.5}), {0.95, 0.88});
  }
  CHECK(contains(error_of([] {
                   Tensor p = leaf({1});
                   SGD(unnamed_parameters({p}), {.lr = 0.1, .nesterov = true});
                 }),
                 "nesterov momentum requires momentum > 0"));
}

TEST_CASE("Adam, AdamW, amsgrad: three steps against hand values") {
  // lr 0.1, betas (0.9, 0.999), eps 1e-8, g = 0.5, -1, 0.25:
  //  1: m = 0.05, v = 0.00025; bias-corrected 0.5 and 0.25: p = 1 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.900000002
  //  2: m = 0.045 - 0.1 = -0.055, v = 0.00024975 + 0.001 = 0.00124975, bc1 = 0.19, bc2 = 0.001999:
  //     p = 0.900000002 + (0.1 / 0.19) * 0.055 / (sqrt(0.00124975 / 0.001999) + 1e-8) = 0.93661035424...
  const std::vector<double> g{0.5, -1.0, 0.25};
  {
    Tensor p = leaf({1});
    Adam opt(unnamed_parameters({p}), {.lr = 0.1});
    check_seq(run(opt, p, g), {0.900000002, 0.9366103542405654, 0.9502794203389762});
    CHECK(opt.type_name() == "Adam");
  }
  {
    // Adam's L2 decay enters the gradient: step 1 uses g = 0.5 + 0.1 * 1 = 0.6; the normalised step
    // is again ~lr: p = 1 - 0.1 * 0.6 / (0.6 + 1e-8).
    Tensor p = leaf({1});
    Adam opt(unnamed_parameters({p}), {.lr = 0.1, .weight_decay = 0.1});
    check_seq(run(opt, p, g), {1 - 0.1 * 0.6 / (0.6 + 1e-8), 0.9252635194456061, 0.9247305742687093});
  }
  {
    // AdamW: p *= 1 - lr * wd = 0.99 first, then the Adam step of the plain case: 0.99 - 0.1 / (1 + 2e-8).
    Tensor p = leaf({1});
    AdamW opt(unnamed_parameters({p}), {.lr = 0.1, .weight_decay = 0.1});
    check_seq(run(opt, p, g), {0.890000002, 0.9177103542205653, 0.9222023167767704});
    CHECK(opt.type_name() == "AdamW");
    CHECK(AdamW(unnamed_parameters({leaf({1})})).options().weight_decay == 0.01);  // torch's default
  }
  {
    // amsgrad with g = 1, 0, 0: v = 0.001, 0.000999, ...; the max keeps 0.001, so the denominators
    // differ from plain Adam from step 2 on.
    Tensor p = leaf({1}), q = leaf({1});
    Adam ams(unnamed_parameters({p}), {.lr = 0.1, .amsgrad = true});
    Adam plain(unnamed_parameters({q}), {.lr = 0.1});
    check_seq(run(ams, p, {1, 0, 0}), {0.900000001, 0.8330276878258663, 0.7812837871703692});
    check_seq(run(plain, q, {1, 0, 0}), {0.900000001, 0.8329941765341887, 0.7811984801832372});
  }
}

TEST_CASE("Adam: f32 follows f64 to f32 rounding; complex is updated as (re, im) pairs") {
  Tensor p32 = leaf({1, -0.5, 2}, DType::f32), p64 = leaf({1, -0.5, 2});
  Adam a32(unnamed_parameters({p32}), {.lr = 0.01, .weight_decay = 0.05});
  Adam a64(unnamed_parameters({p64}), {.lr = 0.01, .weight_decay = 0.05});
  for (int s = 0; s < 5; ++s) {
    const std::vector<double> g{0.3 - s, 0.1 * s, -2.0};
    set_grad(p32, g);
    set_grad(p64, g);
    a32.step();
    a64.step();
  }
  check_seq(p32.to_vector<double>(), p64.to_vector<double>(), 1e-5);

  // A long parameter goes through the vectorised loops: every element still follows the formula.
  const int64_t n = 5003;
  Tensor big = randn({n}, {3, 1}, DType::f64);
  const std::vector<double> p0 = big.to_vector<double>();
  big.set_requires_grad(true);
  Tensor gbig = randn({n}, {3, 2}, DType::f64);
  const std::vector<double> g0 = gbig.to_vector<double>();
  big.set_grad(gbig);
  AdamW abig(unnamed_parameters({big}), {.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
  abig.step();
  const std::vector<double> p1 = big.to_vector<double>();
  for (int64_t i = 0; i < n; ++i) {
    // step 1: m = 0.1 g, v = 0.001 g^2, bias-corrected g and g^2: p (1 - 1e-3) - 0.01 g / (|g| + 1e-8)
    const double want = p0[i] * (1 - 1e-3) - 0.01 * (0.1 * g0[i] / 0.1) / (std::sqrt(0.001 * g0[i] * g0[i] / 0.001) + 1e-8);
    if (std::abs(p1[i] - want) > 1e-14 * (1 + std::abs(want))) {
      CAPTURE(i);
      CHECK(p1[i] == want);
      break;
    }
  }

  // torch's view_as_real: a complex parameter behaves exactly like its real and imaginary parts.
  Tensor z = cast_copy(from_vector(std::vector<c128>{{1, 2}, {-3, 0.5}}), DType::c128);
  z.set_requires_grad(true);
  Tensor r = leaf({1, 2, -3, 0.5});
  AdamW az(unnamed_parameters({z}), {.lr = 0.1, .weight_decay = 0.1, .amsgrad = true});
  AdamW ar(unnamed_parameters({r}), {.lr = 0.1, .weight_decay = 0.1, .amsgrad = true});
  for (int s = 0; s < 3; ++s) {
    z.set_grad(cast_copy(from_vector(std::vector<c128>{{0.5, -1.0 * s}, {0.25, 2}}), DType::c128));
    set_grad(r, {0.5, -1.0 * s, 0.25, 2});
    az.step();
    ar.step();
  }
  std::vector<double> zr;
  for (c128 x : z.to_vector<c128>()) zr.push_back(x.real()), zr.push_back(x.imag());
  CHECK(zr == r.to_vector<double>());  // bitwise
}

TEST_CASE("optimizer: a step bumps versions, skips parameters without grad, runs under no_grad") {
  Tensor a = leaf({1, 2}), b = leaf({3});
  Adam opt({{"a", a, {}}, {"b", b, {}}}, {.lr = 0.1});
  const uint64_t va = a.version(), vb = b.version();
  set_grad(a, {1, 1});
  opt.step();  // grad mode is on here: the step itself must not record or refuse the leaf write
  CHECK(a.version() == va + 1);
  CHECK(b.version() == vb);  // no grad: skipped, untouched
  CHECK(val(b) == 3);
  CHECK(opt.step_count(0) == 1);
  CHECK(opt.step_count(1) == 0);
  CHECK(a.is_leaf());
  CHECK(!a.grad_fn());
  // b's first update later uses bias correction of step 1 (per-parameter steps, as torch).
  set_grad(b, {0.5});
  opt.step();
  CHECK(opt.step_count(1) == 1);
  CHECK(val(b) == doctest::Approx(3 - 0.1 * 0.5 / (0.5 + 1e-8)).epsilon(1e-14));
  CHECK(a.version() == va + 2);
  // zero_grad drops the grads; a further step changes nothing.
  opt.zero_grad();
  CHECK(!a.grad().defined());
  const double a0 = val(a);
  opt.step();
  CHECK(val(a) == a0);

  // A graph that saved a parameter before the step refuses to backward after it.
  Tensor w = leaf({2});
  SGD sgd(unnamed_parameters({w}), {.lr = 0.1});
  Tensor loss = sum(mul(w, w));
  set_grad(w, {1});
  sgd.step();
  CHECK(contains(error_of([&] { loss.backward(); }), "version"));
}

TEST_CASE("optimizer: refusals") {
  Tensor p = leaf({1});
  CHECK(contains(error_of([&] { SGD(unnamed_parameters({p, p}), {}); }), "same tensor as an earlier one"));
  CHECK(contains(error_of([&] { SGD({{"x", p, {}}, {"x", leaf({2}), {}}}, {}); }), "'x' appears twice"));
  Tensor nonleaf = mul(p, 2.0);
  CHECK(contains(error_of([&] { Adam(unnamed_parameters({nonleaf})); }), "must be a leaf"));
  CHECK(contains(error_of([&] { Adam(unnamed_parameters({leaf({1})}), {.beta1 = 1.0}); }), "betas in [0, 1)"));
  CHECK(contains(error_of([&] { Adam(unnamed_parameters({leaf({1})}), {.lr = -1}); }), "learning rate >= 0"));
}

TEST_CASE("optimizer: state round trip continues bit for bit; mismatched states are refused") {
  auto grads = [](int s) { return std::vector<double>{std::sin(s + 1.0), std::cos(3.0 * s), 0.1 * s - 0.3}; };
  auto make = [](const std::vector<double>& init) { return leaf(init, DType::f32); };
  Tensor p = make({0.5, -1, 2});
  AdamW opt({{"w", p, {}}}, {.lr = 0.05, .weight_decay = 0.02, .amsgrad = true});
  for (int s = 0; s < 3; ++s) {
    set_grad(p, grads(s));
    opt.step();
  }
  const StateDict saved = opt.state();
  const std::vector<double> p_saved = p.to_vector<double>();
  CHECK(saved.size() == 5);  // lr, step.w, exp_avg.w, exp_avg_sq.w, max_exp_avg_sq.w
  CHECK(saved.at("step.w").item<int64_t>() == 3);
  CHECK(saved.at("lr").item<double>() == 0.05);
  for (int s = 3; s < 6; ++s) {
    set_grad(p, grads(s));
    opt.step();
  }
  // The snapshot was a copy: later steps did not change it.
  CHECK(saved.at("step.w").item<int64_t>() == 3);

  Tensor q = make(p_saved);
  AdamW resumed({{"w", q, {}}}, {.lr = 0.05, .weight_decay = 0.02, .amsgrad = true});
  resumed.load_state(saved);
  for (int s = 3; s < 6; ++s) {
    set_grad(q, grads(s));
    resumed.step();
  }
  CHECK(q.to_vector<float>() == p.to_vector<float>());
  CHECK(resumed.state().at("exp_avg_sq.w").to_vector<float>() == opt.state().at("exp_avg_sq.w").to_vector<float>());

  // Mismatches: no amsgrad buffer, another name, another shape, another algorithm. Nothing changes.
  Tensor r = make({0, 0, 0});
  AdamW other({{"w", r, {}}}, {.lr = 0.05});
  const std::string e1 = error_of([&] { other.load_state(saved); });
  CHECK(contains(e1, "unexpected keys [max_exp_avg_sq.w]"));
  AdamW renamed({{"v", make({0, 0, 0}), {}}}, {.lr = 0.05, .amsgrad = true});
  const std::string e2 = error_of([&] { renamed.load_state(saved); });
  CHECK(contains(e2, "missing keys [exp_avg.v, exp_avg_sq.v, max_exp_avg_sq.v, step.v]"));
  AdamW reshaped({{"w", leaf({0, 0}, DType::f32), {}}}, {.lr = 0.05, .amsgrad = true});
  const std::string e3 = error_of([&] { reshaped.load_state(saved); });
  CHECK_MESSAGE(contains(e3, "'exp_avg.w' expects f32 (2,) but the state holds f32 (3,)"), e3);
  CHECK(reshaped.step_count(0) == 0);
  SGD sgd({{"w", make({0, 0, 0}), {}}}, {.lr = 0.1, .momentum = 0.9});
  CHECK(contains(error_of([&] { sgd.load_state(saved); }), "missing keys [momentum_buffer.w]"));
  CHECK(sgd.state().size() == 3);  // lr, step.w, momentum_buffer.w
}

TEST_CASE("clip_grad_norm: total 2-norm over all grads, scaled only above max_norm; non-finite reported") {
  Tensor a = leaf({0, 0}), b = leaf({0}), c = leaf({0});  // c has no grad: ignored
  set_grad(a, {3, 4});
  set_grad(b, {12});
  CHECK(grad_norm({a, b, c}) == 13.0);
  const uint64_t va = a.grad().version();
  CHECK(clip_grad_norm({a, b, c}, 20.0) == 13.0);
  CHECK(a.grad().version() == va);  // below the limit: not touched
  CHECK(a.grad().to_vector<double>() == std::vector<double>{3, 4});
  CHECK(clip_grad_norm({a, b, c}, 6.5) == 13.0);
  const double s = 6.5 / (13.0 + 1e-6);
  check_seq(a.grad().to_vector<double>(), {3 * s, 4 * s}, 1e-15);
  check_seq(b.grad().to_vector<double>(), {12 * s}, 1e-15);
  CHECK(grad_norm({a, b}) == doctest::Approx(13.0 * s).epsilon(1e-14));

  // complex: |3 + 4i| = 5; f32 grads accumulate in f64.
  Tensor z = cast_copy(from_vector(std::vector<c128>{{3, 4}}), DType::c64);
  z.set_requires_grad(true);
  z.set_grad(cast_copy(from_vector(std::vector<c128>{{3, 4}}), DType::c64));
  CHECK(grad_norm({z}) == 5.0);
  Tensor f = leaf(std::vector<double>(100000, 0.0), DType::f32);
  set_grad(f, std::vector<double>(100000, 1e-3));
  CHECK(grad_norm({f}) == doctest::Approx(std::sqrt(100000.0) * 1e-3).epsilon(1e-7));

  // NaN / Inf: reported, grads untouched, or an error when asked.
  set_grad(a, {std::numeric_limits<double>::quiet_NaN(), 1});
  set_grad(b, {100});
  CHECK(std::isnan(clip_grad_norm({a, b}, 1.0)));
  CHECK(val(b.grad()) == 100);
  set_grad(a, {std::numeric_limits<double>::infinity(), 1});
  CHECK(std::isinf(clip_grad_norm({a, b}, 1.0)));
  CHECK(contains(error_of([&] { clip_grad_norm({a, b}, 1.0, /*error_if_nonfinite=*/true); }),
                 "total gradient norm is inf"));
  CHECK(val(b.grad()) == 100);
  CHECK(contains(error_of([&] { clip_grad_norm({a}, 0.0); }), "max_norm > 0"));
}

TEST_CASE("schedules: constant, warmup + cosine, step: lr sequences") {
  auto seq = [](LrSchedule& s, int n) {
    std::vector<double> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(s.lr());
      s.step();
    }
    return out;
  };
  ConstantLr c(0.25);
  check_seq(seq(c, 3), {0.25, 0.25, 0.25}, 0);
  // warmup 2, total 6, 1.0 -> 0.1: 0.5, 1.0, then 0.1 + 0.45 (1 + cos(pi p)) for p = 0, 1/4, 1/2, 3/4, then 0.1.
  WarmupCosineLr wc({.base_lr = 1.0, .min_lr = 0.1, .warmup_steps = 2, .total_steps = 6});
  const double h = std::sqrt(0.5);
  check_seq(seq(wc, 8), {0.5, 1.0, 1.0, 0.1 + 0.45 * (1 + h), 0.55, 0.1 + 0.45 * (1 - h), 0.1, 0.1}, 1e-15);
  CHECK(wc.lr_at(1000) == 0.1);
  WarmupCosineLr nowarm({.base_lr = 2.0, .min_lr = 0, .warmup_steps = 0, .total_steps = 2});
  check_seq(seq(nowarm, 3), {2.0, 1.0, 0.0}, 1e-15);
  StepLr st(1.0, 2, 0.5);
  check_seq(seq(st, 7), {1, 1, 0.5, 0.5, 0.25, 0.25, 0.125}, 0);
  CHECK(contains(error_of([] { WarmupCosineLr({.warmup_steps = 5, .total_steps = 5}); }), "warmup_steps < total_steps"));
  CHECK(contains(error_of([] { StepLr(1.0, 0, 0.5); }), "step_size > 0"));
}

TEST_CASE("schedules: reduce on plateau (mode min, relative threshold, patience, cooldown, min_lr)") {
  // factor 0.5, patience 2, threshold 0.1, cooldown 1, min_lr 0.2. An improvement must beat 0.9 * best.
  ReduceLrOnPlateau s({.base_lr = 1.0, .factor = 0.5, .patience = 2, .threshold = 0.1, .cooldown = 1, .min_lr = 0.2});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // metric: lr after it (why)
  const std::vector<std::pair<double, double>> steps{
      {10.0, 1.0},   // best 10
      {9.5, 1.0},    // not < 9: bad 1
      {9.2, 1.0},    // bad 2
      {9.1, 0.5},    // bad 3 > patience: halve, cooldown 1
      {9.0, 0.5},    // bad during cooldown: not counted
      {8.9, 0.5},    // < 9: best 8.9
      {8.8, 0.5},    // bad 1 (needs < 8.01)
      {nan, 0.5},    // NaN never improves: bad 2
      {8.8, 0.25},   // bad 3: halve
      {8.8, 0.25},   // cooldown
      {8.8, 0.25}, {8.8, 0.25},
      {8.8, 0.2},    // 0.125 clamped to min_lr 0.2
      {8.8, 0.2}, {8.8, 0.2}, {8.8, 0.2}, {8.8, 0.2},  // already at min_lr
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    CAPTURE(i);
    s.step_metric(steps[i].first);
    CHECK(s.lr() == steps[i].second);
    s.step();  // optimizer steps do not move it
    CHECK(s.lr() == steps[i].second);
  }
  CHECK(s.best() == 8.9);
}

TEST_CASE("schedules: state round trips continue bit for bit; another kind's state is refused") {
  WarmupCosineLr a({.base_lr = 0.3, .min_lr = 0.01, .warmup_steps = 3, .total_steps = 50});
  for (int i = 0; i < 17; ++i) a.step();
  WarmupCosineLr b({.base_lr = 0.3, .min_lr = 0.01, .warmup_steps = 3, .total_steps = 50});
  b.load_state(a.state());
  for (int i = 0; i < 40; ++i) {
    CHECK(a.lr() == b.lr());
    a.step(), b.step();
  }
  StepLr st(1.0, 3, 0.1);
  const std::string err = error_of([&] { st.load_state(a.state()); });
  CHECK(contains(err, "missing keys [step.step]"));
  CHECK(contains(err, "unexpected keys [warmup_cosine.step]"));

  PlateauOptions po{.base_lr = 1.0, .factor = 0.5, .patience = 1, .cooldown = 2};
  ReduceLrOnPlateau p(po), q(po);
  for (double m : {5.0, 5.0, 5.0, 4.0, 4.0}) p.step_metric(m);
  q.load_state(p.state());
  CHECK(q.best() == p.best());
  CHECK(q.cooldown_counter() == p.cooldown_counter());
  for (double m : {4.0, 4.0, 3.0, 3.0, 3.0, 3.0, 3.0}) {
    p.step_metric(m), q.step_metric(m);
    CHECK(p.lr() == q.lr());
    CHECK(p.num_bad() == q.num_bad());
  }
  CHECK(p.lr() < 0.5);
  // Before any metric the best is +inf; the state carries only finite numbers (a checkpoint refuses
  // anything else) and loads back to "no best yet".
  ReduceLrOnPlateau fresh(po), restored(po);
  for (const auto& [name, t] : fresh.state()) CHECK_MESSAGE(std::isfinite(gs::cast_copy(t, DType::f64).item<double>()), name);
  restored.load_state(fresh.state());
  CHECK(restored.best() == std::numeric_limits<double>::infinity());
  restored.step_metric(1e300);
  CHECK(restored.best() == 1e300);
  StateDict bad = p.state();
  bad["reduce_on_plateau.lr"] = zeros({}, DType::f32);
  CHECK(contains(error_of([&] { q.load_state(bad); }), "'reduce_on_plateau.lr' must be a one-element f64 tensor"));
}

TEST_CASE("optimizer: the composite update (the CUDA path) follows the CPU loops, real and complex, f64 and f32") {
  // Four steps of every algorithm variant on a real and a complex parameter, once through the
  // CPU loops and once through the tensor-op update that parameters on CUDA take.
  using Make = std::function<std::unique_ptr<Optimizer>(std::vector<NamedParameter>)>;
  const std::vector<std::pair<std::string, Make>> variants = {
      {"SGD momentum, weight decay", [](auto p) { return std::make_unique<SGD>(std::move(p), SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.2, .weight_decay = 0.01}); }},
      {"SGD nesterov", [](auto p) { return std::make_unique<SGD>(std::move(p), SGDOptions{.lr = 0.05, .momentum = 0.8, .nesterov = true}); }},
      {"SGD plain", [](auto p) { return std::make_unique<SGD>(std::move(p), SGDOptions{.lr = 0.3}); }},
      {"Adam weight decay", [](auto p) { return std::make_unique<Adam>(std::move(p), AdamOptions{.lr = 0.01, .weight_decay = 0.1}); }},
      {"Adam amsgrad", [](auto p) { return std::make_unique<Adam>(std::move(p), AdamOptions{.lr = 0.02, .amsgrad = true}); }},
      {"AdamW", [](auto p) { return std::make_unique<AdamW>(std::move(p), AdamOptions{.lr = 0.01, .weight_decay = 0.05}); }},
  };
  for (const auto& [name, make] : variants)
    for (DType dt : {DType::f64, DType::f32}) {
      CAPTURE(name);
      CAPTURE(dtype_name(dt));
      auto params_for = [&]() {
        Tensor a = cast_copy(randn({5, 3}, {11, 1}, DType::f64), dt);
        Tensor b = cast_copy(randn({4}, {11, 2}, DType::c128), dt == DType::f64 ? DType::c128 : DType::c64);
        a.set_requires_grad(true);
        b.set_requires_grad(true);
        return std::vector<NamedParameter>{{"a", a, {}}, {"b", b, {}}};
      };
      auto native = params_for(), composite = params_for();
      auto opt_n = make(native), opt_c = make(composite);
      for (uint64_t s = 0; s < 4; ++s)
        for (size_t i = 0; i < 2; ++i) {
          const Tensor g = cast_copy(randn(native[i].tensor.sizes(), {12, s * 2 + i}, DType::c128), native[i].tensor.dtype());
          native[i].tensor.set_grad(g);
          composite[i].tensor.set_grad(clone(g));
        }
      for (int s = 0; s < 4; ++s) {
        opt_n->step();
        {
          CompositePathsOnCpu on_cpu;
          opt_c->step();
        }
      }
      const double tol = dt == DType::f64 ? 1e-13 : 2e-6;
      for (size_t i = 0; i < 2; ++i) {
        const auto vn = native[i].tensor.to_vector<c128>(), vc = composite[i].tensor.to_vector<c128>();
        for (size_t k = 0; k < vn.size(); ++k) CHECK(std::abs(vn[k] - vc[k]) <= tol * (1 + std::abs(vn[k])));
      }
      // The state buffers agree too (a checkpoint of either resumes the other).
      const StateDict sn = opt_n->state(), sc = opt_c->state();
      for (const auto& [key, t] : sn) {
        CAPTURE(key);
        const auto vn = t.to_vector<c128>(), vc = sc.at(key).to_vector<c128>();
        for (size_t k = 0; k < vn.size(); ++k) CHECK(std::abs(vn[k] - vc[k]) <= tol * (1 + std::abs(vn[k])));
      }
    }
}

TEST_CASE("grad_norm: the composite reduction (the CUDA path) equals the CPU's") {
  Tensor a = randn({300, 7}, {13, 1}, DType::f32), b = randn({9}, {13, 2}, DType::c64);
  a.set_grad(randn({300, 7}, {13, 3}, DType::f32));
  b.set_grad(randn({9}, {13, 4}, DType::c64));
  const double native = grad_norm({a, b});
  double composite = 0;
  {
    CompositePathsOnCpu on_cpu;
    composite = grad_norm({a, b});
  }
  CHECK(composite == doctest::Approx(native).epsilon(1e-13));
}
