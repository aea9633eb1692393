// SFNO with dropout and stochastic depth (models/sfno.h): eval mode is torch-harmonics' golden
// output with the rates at 0; train mode draws its masks from the forward pass's key (the same key
// gives the same output, another key another), its expectation is the eval output where the net is
// affine in every mask, stochastic depth drops a sample's branch whole, and a batch split into
// shards with their first_sample draws what the whole batch draws.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "models/sfno.h"
#include "ops/shape_ops.h"
#include "tests/models/golden_model_check.h"
#include "tests/models/net_test_util.h"

using namespace gs;
using namespace gs::models;
using gs_test::max_abs;

namespace {

SfnoOptions small_options(DType dtype) {
  SfnoOptions o;
  o.img_size = {8, 16}, o.scale_factor = 2, o.in_chans = 2, o.out_chans = 2, o.embed_dim = 4, o.num_layers = 2;
  o.dtype = dtype, o.seed = 5;
  return o;
}

ForwardContext context(uint64_t stream, int64_t first_sample = 0) {
  ForwardContext ctx;
  ctx.noise_key = {77, stream};
  ctx.first_sample = first_sample;
  return ctx;
}

double max_diff(const Tensor& a, const Tensor& b) { return max_abs(sub(a, b)); }

// m's output on x in eval mode; m is left in train mode.
Tensor eval_output(SFNO& m, const Tensor& x) {
  m.eval();
  const Tensor e = m.forward(x);
  m.train();
  return e;
}


// torch-harmonics' golden configuration "a" (tests/models/test_sfno_golden.cpp) with drop_rate 0.3
// and drop_path_rate 0.5 (tools/make_golden_dropout.py).
SfnoOptions golden_a_with_dropout(DType dt) {
  SfnoOptions o;
  o.img_size = {16, 32}, o.grid = "equiangular", o.scale_factor = 2, o.in_chans = 3, o.out_chans = 2;
  o.embed_dim = 8, o.num_layers = 3, o.normalization_layer = "layer_norm", o.pos_embed = "learnable latlon";
  o.bias = true, o.residual_prediction = true, o.dtype = dt;
  o.drop_rate = 0.3, o.drop_path_rate = 0.5;
  return o;
}

// The golden file's tensors with the MLP's output layer renamed: the golden nets have drop rates
// 0, and with drop_rate > 0 torch-harmonics' MLP is Sequential(fc1, act, drop, fc2, drop), so the
// layer is fwd.3. `results` (when given) replaces the output, loss and gradients.
models::StateDict golden_for_dropout(const std::string& results = "") {
  models::StateDict golden;
  for (const auto& [name, t] : gs_test::load_golden("tests/models/data/golden_sfno.safetensors").tensors) {
    std::string renamed = name;
    const auto at = renamed.find("mlp.fwd.2.");
    if (at != std::string::npos) renamed.replace(at, 10, "mlp.fwd.3.");
    golden[renamed] = t;
  }
  if (!results.empty())
    for (const auto& [name, t] : gs_test::load_golden(results).tensors) golden[name] = t;
  return golden;
}

void check_golden_a(const models::StateDict& golden, bool train) {
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dt));
    SFNO model(golden_a_with_dropout(dt));
    gs_test::GoldenModelCase c{&golden, "a." + std::string(dtype_name(dt)) + ".", dt == DType::f64 ? 1e-12 : 1e-5};
    c.zero_gradient = [](const std::string& name) { return name.find("global_conv.bias") != std::string::npos; };
    // check_model_against_golden puts the model in train mode.
    const double err = gs_test::check_model_against_golden(model, c, [&](const Tensor& x) {
      if (!train) model.eval();
      return model.forward(x, context(1));  // noise key (77, 1), the golden's
    });
    const std::string what = std::string(dtype_name(dt)) + (train ? " train" : " eval");
    MESSAGE(what << ": largest relative difference " << err);
  }
}

}  // namespace

TEST_CASE("SFNO dropout: in eval mode the model with drop rates is torch-harmonics' golden model without") {
  check_golden_a(golden_for_dropout(), false);
}

TEST_CASE("SFNO dropout: in train mode with gradsphere's masks put into torch-harmonics' net, output and gradients agree") {
  // tools/make_golden_dropout.py draws the masks of every site (pos_drop, both Dropout2d of each MLP,
  // each block's DropPath) with Philox in Python and puts them into torch-harmonics' own modules.
  // A mask at another place (drop path after the outer skip, one MLP dropout missing, the input's
  // dropout before the position embedding), another rate per block, another key per site or
  // another scale changes the output by far more than the tolerance (dropout moves it by 24.5).
  check_golden_a(golden_for_dropout("tests/models/data/golden_sfno_dropout.safetensors"), true);
}


TEST_CASE("SFNO dropout: train mode is keyed (same key, same output), differs from eval, rates as torch") {
  SfnoOptions o = small_options(DType::f64);
  o.drop_rate = 0.2, o.drop_path_rate = 0.4;
  o.num_layers = 3;
  SFNO m(o);
  CHECK(m.drop_path_rates() == std::vector<double>{0.0, 0.2, 0.4});
  gs_test::randomize(m, 3);
  const Tensor x = randn({3, 2, 8, 16}, {1, 9}, DType::f64);
  m.train();
  const Tensor a = m.forward(x, context(1)), again = m.forward(x, context(1)), other = m.forward(x, context(2));
  m.eval();
  const Tensor e = m.forward(x, context(1));
  CHECK(gs_test::exactly_equal(a, again));
  CHECK(max_diff(a, other) > 1e-3 * max_abs(e));
  CHECK(max_diff(a, e) > 1e-3 * max_abs(e));
  CHECK(gs_test::exactly_equal(e, m.forward(x, context(2))));  // eval ignores the key
  // The rates are torch's linspace in the model's dtype, bit for bit: torch.linspace(0, 0.1, 10,
  // dtype=float32 / float64)[6] with torch 2.14 (its second half is fma(-step, 3, end)).
  SfnoOptions f = small_options(DType::f32);
  f.num_layers = 10, f.drop_path_rate = 0.1;
  CHECK(SFNO(f).drop_path_rates()[6] == 0.06666667014360428);
  f.dtype = DType::f64;
  CHECK(SFNO(f).drop_path_rates()[6] == 0.06666666666666667);
}

TEST_CASE("SFNO dropout: a batch split into shards with their first_sample draws the whole batch's masks") {
  SfnoOptions o = small_options(DType::f64);
  o.drop_rate = 0.3, o.drop_path_rate = 0.5;
  SFNO m(o);
  gs_test::randomize(m, 4);
  m.train();
  const Tensor x = randn({4, 2, 8, 16}, {2, 9}, DType::f64);
  const Tensor whole = m.forward(x, context(5));
  const Tensor first = m.forward(narrow(x, 0, 0, 2), context(5, 0));
  const Tensor second = m.forward(narrow(x, 0, 2, 2), context(5, 2));
  CHECK(max_diff(cat({first, second}, 0), whole) <= 1e-13 * max_abs(whole));
  // The shard without its first_sample draws the first samples' masks instead.
  CHECK(max_diff(m.forward(narrow(x, 0, 2, 2), context(5, 0)), second) > 1e-6);
}

TEST_CASE("SFNO dropout: stochastic depth drops a sample's last branch whole; the mean over keys is the eval output") {
  // Two blocks: block 0's rate is linspace(0, r, 2)[0] = 0, block 1's is r. After block 1 the net is
  // affine (outer identity skip, linear decoder), so a sample's output is A + B / keep with its
  // branch kept and A without: eval = A + B = keep * y_kept + (1 - keep) * y_dropped exactly.
  SfnoOptions o = small_options(DType::f64);
  o.drop_path_rate = 0.4;
  SFNO m(o);
  gs_test::randomize(m, 6);
  const Tensor x = randn({1, 2, 8, 16}, {3, 9}, DType::f64);
  const Tensor e = eval_output(m, x);
  std::vector<Tensor> seen;  // the distinct outputs, and how often each came
  std::vector<int> count;
  const int keys = 200;
  for (int k = 0; k < keys; ++k) {
    const Tensor y = m.forward(x, context(100 + k));
    size_t i = 0;
    while (i < seen.size() && max_diff(y, seen[i]) != 0) ++i;
    if (i == seen.size()) seen.push_back(y), count.push_back(0);
    ++count[i];
  }
  REQUIRE(seen.size() == 2);  // kept and dropped, nothing in between
  // Which of the two is the kept one: the one that makes the affine identity hold.
  const double keep = 0.6;
  const double err_a = max_diff(add(mul(seen[0], keep), mul(seen[1], 1 - keep)), e);
  const double err_b = max_diff(add(mul(seen[1], keep), mul(seen[0], 1 - keep)), e);
  CHECK(std::min(err_a, err_b) <= 1e-12 * max_abs(e));
  const int k_count = err_a <= err_b ? count[0] : count[1];
  // Binomial(200, 0.6) kept samples: within 5 standard deviations.
  CHECK(std::abs(k_count - keys * keep) < 5 * std::sqrt(keys * keep * (1 - keep)));
}

TEST_CASE("SFNO dropout: where the net is affine in every mask, the mean over keys approaches eval") {
  // identity activation and no norm: the net is affine in each mask, and the masks of the sites
  // are independent with mean 1, so E[output] = eval output exactly; the mean of N keyed outputs
  // is within a few standard errors s / sqrt(N) of it (s: the sample deviation of each element).
  SfnoOptions o = small_options(DType::f64);
  o.activation_function = "identity", o.drop_rate = 0.3, o.drop_path_rate = 0.4;
  SFNO m(o);
  gs_test::randomize(m, 8);
  const Tensor x = randn({2, 2, 8, 16}, {4, 9}, DType::f64);
  const Tensor e = eval_output(m, x);
  const int n = 400;
  Tensor s1 = zeros_like(e), s2 = zeros_like(e);
  for (int k = 0; k < n; ++k) {
    const Tensor y = m.forward(x, context(1000 + k));
    s1 = add(s1, y), s2 = add(s2, mul(y, y));
  }
  const Tensor mean = div(s1, static_cast<double>(n));
  const Tensor sd = sqrt(div(sub(s2, mul(mul(mean, mean), static_cast<double>(n))), static_cast<double>(n - 1)));
  // |mean - eval| <= 6 standard errors everywhere (6 sigma over 512 correlated elements: a miss
  // would be a bias, not chance), and the spread is real (the test is not vacuous).
  const Tensor excess = sub(abs(sub(mean, e)), mul(sd, 6.0 / std::sqrt(static_cast<double>(n))));
  CHECK(gs_test::values_f64(max(excess))[0] <= 0.0);
  CHECK(max_abs(sd) > 1e-2 * max_abs(e));
}
