// Golden parity with ACE's NoiseConditionedSFNO, run from its own package (fme 2026.10.0 on
// torch-harmonics 0.8.0; tests/models/data/golden_noise_sfno.safetensors, written by
// tools/make_golden_ace.py). Two configurations, each in f32 and f64, with the noise field given to
// both sides: ACE's state dict loads unchanged, and the output, the loss mean((y - target)^2) and
// the gradient of every parameter and of the input equal ACE's: f64 to 1e-12 and f32 to 1e-5,
// relative to each tensor's largest magnitude.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "models/noise_sfno.h"
#include "tests/models/golden_model_check.h"

using namespace gs;
using namespace gs::models;

namespace {

// The configurations of tools/make_golden_ace.py (CONFIGS).
NoiseSfnoOptions golden_options(const std::string& key) {
  NoiseSfnoOptions o;
  o.embed_dim = 8;
  if (key == "c") {
    o.img_shape = {8, 16}, o.in_chans = 3, o.out_chans = 2, o.n_labels = 2;
    o.noise_embed_dim = 4, o.num_layers = 2, o.context_pos_embed_dim = 3, o.pos_embed = false, o.affine_norms = true;
  } else {
    o.img_shape = {6, 12}, o.in_chans = 2, o.out_chans = 2;
    o.noise_embed_dim = 2, o.num_layers = 3, o.global_layer_norm = true, o.filter_residual = true;
    o.filter_output = true, o.filter_num_groups = 2, o.activation_function = "silu", o.encoder_layers = 2;
    o.mlp_ratio = 1.5;
  }
  return o;
}

}  // namespace

TEST_CASE("NoiseConditionedSFNO golden: ACE's output, loss and every gradient with a given noise (f64 to 1e-12, f32 to 1e-5)") {
  const auto golden = gs_test::load_golden("tests/models/data/golden_noise_sfno.safetensors").tensors;
  double worst[2] = {0, 0};  // f32, f64
  for (const std::string key : {"c", "d"}) {
    for (DType dt : {DType::f32, DType::f64}) {
      const gs_test::GoldenModelCase c{&golden, key + "." + std::string(dtype_name(dt)) + ".",
                                       dt == DType::f64 ? 1e-12 : 1e-5};
      CAPTURE(c.prefix);
      NoiseSfnoOptions o = golden_options(key);
      o.dtype = dt;
      NoiseConditionedSFNO model(o);
      const Tensor noise = golden.at(c.prefix + "noise");
      const Tensor labels = o.n_labels > 0 ? golden.at(c.prefix + "labels") : Tensor{};
      const double err = gs_test::check_model_against_golden(
          model, c, [&](const Tensor& x) { return model.forward_with_noise(x, noise, labels); });
      worst[dt == DType::f64] = std::max(worst[dt == DType::f64], err);
    }
  }
  MESSAGE("largest relative difference from ACE: f32 " << worst[0] << ", f64 " << worst[1]);
}
