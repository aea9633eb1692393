// Golden parity with torch-harmonics 0.9.3's example SFNO (tests/models/data/golden_sfno.safetensors,
// written by tools/make_golden.py; no Python at test time). Two configurations, each in f32 and
// f64: torch's state dict loads unchanged (parameters and the persistent position buffer), and the
// output, the loss mean((y - target)^2), the gradient of every parameter and of the input equal
// torch's: f64 to 1e-12 and f32 to 1e-5, relative to each tensor's largest magnitude.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "models/sfno.h"
#include "tests/models/golden_model_check.h"

using namespace gs;
using namespace gs::models;

namespace {

// The configurations of tools/make_golden.py (SFNO_CONFIGS).
SfnoOptions golden_options(const std::string& key) {
  SfnoOptions o;
  if (key == "a") {
    o.img_size = {16, 32}, o.grid = "equiangular", o.scale_factor = 2, o.in_chans = 3, o.out_chans = 2;
    o.embed_dim = 8, o.num_layers = 3, o.normalization_layer = "layer_norm", o.pos_embed = "learnable latlon";
    o.bias = true, o.residual_prediction = true;
  } else {
    o.img_size = {12, 24}, o.grid = "legendre-gauss", o.scale_factor = 1, o.in_chans = 2, o.out_chans = 2;
    o.embed_dim = 6, o.num_layers = 2, o.normalization_layer = "instance_norm", o.pos_embed = "spectral";
    o.activation_function = "relu", o.residual_prediction = true, o.hard_thresholding_fraction = 0.75;
    o.mlp_ratio = 1.5;
  }
  return o;
}

}  // namespace

TEST_CASE("SFNO golden: torch-harmonics 0.9.3's output, loss and every gradient (f64 to 1e-12, f32 to 1e-5)") {
  const auto golden = gs_test::load_golden("tests/models/data/golden_sfno.safetensors").tensors;
  double worst[2] = {0, 0};  // f32, f64
  for (const std::string key : {"a", "b"}) {
    for (DType dt : {DType::f32, DType::f64}) {
      gs_test::GoldenModelCase c{&golden, key + "." + std::string(dtype_name(dt)) + ".", dt == DType::f64 ? 1e-12 : 1e-5};
      CAPTURE(c.prefix);
      SfnoOptions o = golden_options(key);
      o.dtype = dt;
      // A per-channel constant added before a layer norm over (lat, lon) is removed by the norm:
      // the filter biases' true gradient is 0 there.
      if (o.normalization_layer == "layer_norm")
        c.zero_gradient = [](const std::string& name) { return name.find("global_conv.bias") != std::string::npos; };
      SFNO model(o);
      const double err = gs_test::check_model_against_golden(model, c, [&](const Tensor& x) { return model.forward(x); });
      worst[dt == DType::f64] = std::max(worst[dt == DType::f64], err);
    }
  }
  MESSAGE("largest relative difference from torch-harmonics: f32 " << worst[0] << ", f64 " << worst[1]);
}
