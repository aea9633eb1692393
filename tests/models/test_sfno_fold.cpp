// The SFNO's encoder folded into its first block's coefficients and its decoder into its last
// block (SfnoOptions::fold_encoder_decoder): the folded model against the plain one with the same
// weights (output and every parameter's gradient, f64, to rounding) over the options the folds
// have to handle, a gradcheck through the folded form, and that the folds are taken where they
// apply (they keep fewer bytes for backward).
#include "engine/autograd/engine.h"
#include "engine/autograd/gradcheck.h"
#include "engine/storage.h"
#include "models/sfno.h"
#include "tests/models/net_test_util.h"

using namespace gs;
using namespace gs::models;
using namespace gs_test;

namespace {

SfnoOptions small_options() {
  SfnoOptions o;
  o.img_size = {9, 16};  // internal 5 x 8 (scale_factor 2), lmax = mmax = 4
  o.scale_factor = 2;
  o.in_chans = 3;
  o.out_chans = 2;
  o.embed_dim = 5;
  o.num_layers = 2;
  o.dtype = DType::f64;
  o.seed = 7;
  return o;
}

// Output and gradients of the folded model against the plain one (same seed, same randomized
// weights, same input and loss), each relative to its largest magnitude.
double largest_difference(SfnoOptions o, bool checkpoint_blocks = false) {
  o.fold_encoder_decoder = true;
  SFNO folded(o);
  o.fold_encoder_decoder = false;
  SFNO plain(o);
  randomize(folded, 31, 0.3, 1), randomize(plain, 31, 0.3, 1);
  const Tensor x = randn({2, o.in_chans, o.img_size[0], o.img_size[1]}, {3, 4}, DType::f64);
  const Tensor target = randn({2, o.out_chans, o.img_size[0], o.img_size[1]}, {5, 6}, DType::f64);
  ForwardContext ctx;
  ctx.checkpoint_blocks = checkpoint_blocks;
  const Tensor yf = folded.forward(x, ctx), yp = plain.forward(x, ctx);
  double worst = max_abs_diff(yf, yp) / max_abs(yp);
  mean(square(sub(yf, target))).backward();
  mean(square(sub(yp, target))).backward();
  const auto pp = plain.named_parameters();
  size_t i = 0;
  for (const auto& p : folded.named_parameters()) {
    CAPTURE(p.name);
    const Tensor& gf = p.tensor.grad();
    const Tensor& gp = pp[i++].tensor.grad();
    REQUIRE(gf.defined());
    REQUIRE(gp.defined());
    const Tensor d = sub(gf, gp);
    const double scale = max_abs(is_complex(gp.dtype()) ? abs(gp) : gp);
    REQUIRE(scale > 0);
    worst = std::max(worst, max_abs(is_complex(d.dtype()) ? abs(d) : d) / scale);
  }
  return worst;
}

}  // namespace

TEST_CASE("SFNO fold: the folded encoder, last block and decoder equal the plain ones to rounding (f64)") {
  struct Case {
    const char* name;
    void (*set)(SfnoOptions&);
    bool encoder, decoder;  // the folds these options take (models::sfno_folds_*)
    bool checkpoint = false;
  };
  const Case cases[] = {
      {"defaults", [](SfnoOptions&) {}, true, true},
      {"biases and big_skip", [](SfnoOptions& o) { o.bias = true, o.big_skip = true; }, true, true},
      {"outer_skip none, relu", [](SfnoOptions& o) { o.outer_skip = "none", o.activation_function = "relu"; }, true,
       true},
      {"identity activation, diagonal operator",
       [](SfnoOptions& o) { o.activation_function = "identity", o.operator_type = "diagonal"; }, true, true},
      {"one block (the residual is x), mlp_ratio 3", [](SfnoOptions& o) { o.num_layers = 1, o.mlp_ratio = 3; }, false,
       true},
      {"one block with biases, big_skip and drop_path (rate 0 on one block)",
       [](SfnoOptions& o) { o.num_layers = 1, o.bias = true, o.big_skip = true, o.drop_path_rate = 0.3; }, false, true},
      {"scale_factor 1, legendre-gauss inside an equiangular grid (the residual is x)",
       [](SfnoOptions& o) { o.scale_factor = 1, o.hard_thresholding_fraction = 0.5; }, false, true},
      {"residual_prediction, legendre-gauss input", [](SfnoOptions& o) {
         o.residual_prediction = true, o.grid = "legendre-gauss", o.img_size = {8, 16};
       }, true, true},
      {"checkpointed blocks, bias", [](SfnoOptions& o) { o.bias = true; }, true, true, true},
      {"checkpointed blocks, big_skip", [](SfnoOptions& o) { o.big_skip = true; }, true, true, true},
      {"position embedding, three blocks", [](SfnoOptions& o) { o.pos_embed = "learnable lat", o.num_layers = 3; },
       false, true},
      {"layer norm and a linear inner skip", [](SfnoOptions& o) { o.normalization_layer = "layer_norm", o.inner_skip = "linear"; },
       true, false},
      {"instance norm and a linear outer skip",
       [](SfnoOptions& o) { o.normalization_layer = "instance_norm", o.outer_skip = "linear"; }, true, false},
      {"drop_path in train mode (the last block's rate > 0)", [](SfnoOptions& o) { o.drop_path_rate = 0.3; }, true,
       false},
      {"no MLP", [](SfnoOptions& o) { o.use_mlp = false; }, true, false},
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    SfnoOptions o = small_options();
    c.set(o);
    CHECK(sfno_folds_encoder(o) == c.encoder);
    CHECK(sfno_folds_decoder(o) == c.decoder);
    const double d = largest_difference(o, c.checkpoint);
    MESSAGE(name << ": largest relative difference " << d);
    CHECK(d < 1e-12);
    CHECK(d > 0);  // bitwise equal would mean the folded form did not run
  }
}

TEST_CASE("SFNO fold: forward mode through the folded form (jvpcheck, f64)") {
  SfnoOptions o = small_options();
  o.bias = true, o.big_skip = true, o.img_size = {7, 12}, o.embed_dim = 3;
  REQUIRE(sfno_folds_encoder(o));
  REQUIRE(sfno_folds_decoder(o));
  SFNO m(o);
  randomize(m, 17, 0.3, 1);
  const Tensor x = randn({1, 3, 7, 12}, {9, 2}, DType::f64).set_requires_grad(true);
  auto rep = jvpcheck([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{m.forward(in[0])}; }, {x});
  CHECK_MESSAGE(rep.ok, rep.failure << " (" << rep.detail << ")");
}

TEST_CASE("SFNO fold: gradcheck through the folded form w.r.t. the input and the folded parameters") {
  SfnoOptions o = small_options();
  o.bias = true, o.big_skip = true, o.img_size = {7, 12}, o.embed_dim = 3;
  SFNO m(o);
  randomize(m, 99, 0.3, 1);
  const std::vector<std::string> names = {"encoder.0.weight", "encoder.0.bias", "blocks.0.global_conv.weight",
                                          "blocks.1.global_conv.weight", "blocks.1.global_conv.bias",
                                          "blocks.1.mlp.fwd.0.weight",  "blocks.1.mlp.fwd.0.bias",
                                          "blocks.1.mlp.fwd.2.weight",  "decoder.0.weight",
                                          "decoder.0.bias"};
  const Tensor x = randn({1, 3, 7, 12}, {5, 6}, DType::f64).set_requires_grad();
  const Tensor proj = randn({3, 2 * 7 * 12}, {7, 8}, DType::f64);
  GradcheckReport r =
      gradcheck_input_and_parameters(m, names, x, proj, [&](const Tensor& in) { return m.forward(in); });
  CAPTURE(r.failure);
  CHECK(r.ok);
  CHECK(r.max_abs_error < 1e-6);
}

TEST_CASE("SFNO fold: taken where it applies, and then keeps fewer bytes for backward") {
  // The plain form keeps the encoder's output and the last block's (B, C) activations on the full
  // grid and the MLP's output; the folded one keeps spectral coefficients and Cout rows instead.
  auto kept_after_forward = [](SfnoOptions o) {
    SFNO m(o);
    const Tensor x = randn({2, o.in_chans, o.img_size[0], o.img_size[1]}, {1, 2}, o.dtype);
    Allocator& alloc = allocator_for(DeviceType::cpu);
    const size_t before = alloc.bytes_in_use();
    const Tensor y = m.forward(x);
    return alloc.bytes_in_use() - before;
  };
  SfnoOptions o = small_options();
  o.img_size = {33, 64}, o.embed_dim = 16, o.dtype = DType::f32;
  o.fold_encoder_decoder = false;
  const size_t plain = kept_after_forward(o);
  o.fold_encoder_decoder = true;
  const size_t folded = kept_after_forward(o);
  MESSAGE("bytes kept after forward: plain " << plain << ", folded " << folded);
  CHECK(static_cast<double>(folded) < 0.8 * static_cast<double>(plain));
  // A layer norm stops the decoder's fold and a position embedding the encoder's: the same bytes
  // either way.
  o.normalization_layer = "layer_norm", o.pos_embed = "learnable lat";
  const size_t with_norm = kept_after_forward(o);
  o.fold_encoder_decoder = false;
  CHECK(kept_after_forward(o) == with_norm);
}
