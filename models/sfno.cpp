#include "models/sfno.h"

#include <algorithm>
#include <cmath>

#include "engine/error.h"
#include "ops/elementwise.h"
#include "ops/shape_ops.h"
#include "ops/sphere/grids.h"

namespace gs::models {

// One SphericalFourierNeuralOperatorBlock (torch-harmonics' names: global_conv, norm, inner_skip,
// mlp, outer_skip). Initial scales follow its gain bookkeeping: the spectral weight's variance is
// gain / C with gain 2 (1 for the identity activation), halved when an inner skip shares the
// output; the MLP's output layer gets gain 1, halved when an outer linear or local3x3 skip or an inner
// identity skip shares it.
class SfnoBlock : public Module {
 public:
  enum class Skip { none, linear, identity, local3x3 };

  SfnoBlock(const sphere::ShtSpec& fwd, const sphere::ShtSpec& inv, const SfnoOptions& o, const InitContext& ctx)
      : Module("SphericalFourierNeuralOperatorBlock"), inner_(parse_skip(o.inner_skip, "inner_skip")),
        outer_(parse_skip(o.outer_skip, "outer_skip")) {
    const int64_t C = o.embed_dim;
    const Activation act = parse_activation(o.activation_function);
    double gain = act == Activation::identity ? 1.0 : 2.0;
    if (inner_ != Skip::none) gain /= 2.0;
    global_conv_ = register_module(
        "global_conv", std::make_shared<SpectralFilter>(fwd, inv, C, C, sphere::parse_spectral_operator(o.operator_type),
                                                        gain, o.bias, ctx.child("global_conv")));
    // torch-harmonics' LayerNorm / InstanceNorm2d here use eps = 1e-6.
    norm_ = register_module("norm", std::make_shared<GridNorm>(parse_norm_kind(o.normalization_layer), C, inv.nlat,
                                                               inv.nlon, 1e-6, ctx.child("norm")));
    if (inner_ == Skip::linear)
      inner_skip_ = register_module("inner_skip", std::make_shared<Conv1x1>(C, C, true, Init::normal(std::sqrt(gain / C)),
                                                                            Init::torch_default(C),
                                                                            ctx.child("inner_skip")));
    if (inner_ == Skip::local3x3)
      inner_local_ = register_module("inner_skip", std::make_shared<LocalConv3x3>(C, C, inv.nlat, inv.nlon,
                                                                                  ctx.child("inner_skip")));
    double mlp_gain = 1.0;
    if (outer_ == Skip::linear || outer_ == Skip::local3x3 || inner_ == Skip::identity) mlp_gain /= 2.0;
    if (o.use_mlp) {
      MlpSpec s;
      s.in = C, s.out = C, s.hidden = static_cast<int64_t>(static_cast<double>(C) * o.mlp_ratio);
      s.bf16_storage = o.mlp_bf16_storage;
      GS_CHECK(s.hidden > 0, "SFNO: mlp_ratio {} leaves no hidden channels for embed_dim {}", o.mlp_ratio, C);
      s.act = act, s.output_bias = false;
      s.fc1_weight = Init::normal(std::sqrt(2.0 / C));
      s.fc2_weight = Init::normal(std::sqrt(mlp_gain / static_cast<double>(s.hidden)));
      mlp_ = register_module("mlp", std::make_shared<Mlp>(s, ctx.child("mlp")));
    }
    if (outer_ == Skip::linear)
      outer_skip_ = register_module("outer_skip", std::make_shared<Conv1x1>(C, C, true, Init::normal(std::sqrt(mlp_gain / C)),
                                                                            Init::torch_default(C),
                                                                            ctx.child("outer_skip")));
    if (outer_ == Skip::local3x3)
      outer_local_ = register_module("outer_skip", std::make_shared<LocalConv3x3>(C, C, inv.nlat, inv.nlon,
                                                                                  ctx.child("outer_skip")));
  }

  Tensor forward(const Tensor& x) const {
    auto [y, residual] = global_conv_->forward(x);
    y = norm_->forward(y);
    if (inner_ == Skip::linear) y = add(y, inner_skip_->forward(residual));
    if (inner_ == Skip::identity) y = add(y, residual);
    if (inner_ == Skip::local3x3) y = add(y, inner_local_->forward(residual));
    if (mlp_) y = mlp_->forward(y);
    if (outer_ == Skip::linear) y = add(y, outer_skip_->forward(residual));
    if (outer_ == Skip::identity) y = add(y, residual);
    if (outer_ == Skip::local3x3) y = add(y, outer_local_->forward(residual));
    return y;
  }

 private:
  static Skip parse_skip(const std::string& s, const char* what) {
    if (s == "none") return Skip::none;
    if (s == "linear") return Skip::linear;
    if (s == "identity") return Skip::identity;
    if (s == "local3x3") return Skip::local3x3;
    fail("SFNO: unknown {} '{}'; expected one of none, linear, identity, local3x3", what, s);
  }

  Skip inner_, outer_;
  std::shared_ptr<SpectralFilter> global_conv_;
  std::shared_ptr<GridNorm> norm_;
  std::shared_ptr<Conv1x1> inner_skip_, outer_skip_;
  std::shared_ptr<LocalConv3x3> inner_local_, outer_local_;
  std::shared_ptr<Mlp> mlp_;
};

namespace {

void check_options(const SfnoOptions& o) {
  GS_CHECK(o.img_size[0] >= 2 && o.img_size[1] >= 2, "SFNO: expected img_size of at least (2, 2), got ({}, {})",
           o.img_size[0], o.img_size[1]);
  GS_CHECK(o.scale_factor >= 1, "SFNO: expected scale_factor >= 1, got {}", o.scale_factor);
  GS_CHECK(o.in_chans >= 1 && o.out_chans >= 1 && o.embed_dim >= 1,
           "SFNO: expected in_chans, out_chans and embed_dim >= 1, got {}, {}, {}", o.in_chans, o.out_chans,
           o.embed_dim);
  GS_CHECK(o.num_layers >= 1, "SFNO: expected num_layers >= 1, got {}", o.num_layers);
  GS_CHECK(o.encoder_layers == 1,
           "SFNO: encoder_layers = {} is not supported: torch-harmonics 0.9.3 always builds a one-layer encoder and "
           "decoder (it ignores encoder_layers), so only 1 keeps the state dicts exchangeable",
           o.encoder_layers);
  GS_CHECK(o.drop_rate == 0.0, "SFNO: drop_rate = {} (dropout) is not implemented; use 0", o.drop_rate);
  GS_CHECK(o.drop_path_rate == 0.0, "SFNO: drop_path_rate = {} (stochastic depth) is not implemented; use 0",
           o.drop_path_rate);
  GS_CHECK(o.mlp_ratio > 0, "SFNO: expected mlp_ratio > 0, got {}", o.mlp_ratio);
  GS_CHECK(o.hard_thresholding_fraction > 0 && o.hard_thresholding_fraction <= 1,
           "SFNO: expected hard_thresholding_fraction in (0, 1], got {}", o.hard_thresholding_fraction);
  GS_CHECK(is_floating(o.dtype), "SFNO: expected dtype f32 or f64, got {}", dtype_name(o.dtype));
  GS_CHECK(!o.mlp_bf16_storage || o.dtype == DType::f32,
           "SFNO: bf16 MLP storage (mlp_storage bf16) widens to f32, so it needs dtype f32, got {}", dtype_name(o.dtype));
  GS_CHECK(o.activation_function != "silu", "SFNO: activation_function silu is ACE's, not torch-harmonics' "
                                            "(gelu, relu, identity)");
}

}  // namespace

SFNO::SFNO(const SfnoOptions& o, const dist::ProcessGrid& pgrid) : Model("SphericalFourierNeuralOperator"), opt_(o),
                                                                   pgrid_(pgrid) {
  check_options(o);
  const auto [H, W] = o.img_size;
  const sphere::GridKind grid = sphere::parse_grid_kind(o.grid);
  const sphere::GridKind grid_internal = sphere::parse_grid_kind(o.grid_internal);

  // torch-harmonics: the internal grid assumes the input latitudes include both poles.
  h_ = (H - 1) / o.scale_factor + 1;
  w_ = W / o.scale_factor;
  // One longitude mode less than the internal grid's Nyquist limit (torch-harmonics' cufft caveat).
  const int64_t modes_lon = w_ / 2;
  modes_ = static_cast<int64_t>(static_cast<double>(std::min(h_, modes_lon)) * o.hard_thresholding_fraction);
  GS_CHECK(w_ >= 2 && modes_ >= 1,
           "SFNO: img_size ({}, {}) with scale_factor {} and hard_thresholding_fraction {} leaves an internal grid "
           "{}x{} with {} modes; expected at least 1 mode (a smaller scale_factor or a larger image)",
           H, W, o.scale_factor, o.hard_thresholding_fraction, h_, w_, modes_);
  try {
    spec_img_ = sphere::make_sht_spec(grid, H, W, modes_, modes_);
    spec_int_ = sphere::make_sht_spec(grid_internal, h_, w_, modes_, modes_);
  } catch (const Error& e) {
    fail("SFNO: the transforms for img_size ({}, {}) on {} (internal {}x{} on {}) with lmax = mmax = {} are not "
         "available: {}",
         H, W, o.grid, h_, w_, o.grid_internal, modes_, e.what());
  }

  const InitContext root{o.seed, o.dtype, "", pgrid};
  const int64_t C = o.embed_dim;
  const PosEmbedKind pe = parse_pos_embed(o.pos_embed);
  if (pe != PosEmbedKind::none)
    pos_embed_ = register_module("pos_embed", std::make_shared<PositionEmbedding>(pe, C, grid, H, W, root.child("pos_embed")));

  auto encoder = register_module("encoder", std::make_shared<ModuleGroup>("Sequential"));
  encoder_ = encoder->add("0", std::make_shared<Conv1x1>(o.in_chans, C, o.bias, Init::normal(std::sqrt(1.0 / o.in_chans)),
                                                         Init::zeros(), root.child("encoder").child("0")));

  auto blocks = register_module("blocks", std::make_shared<ModuleGroup>("ModuleList"));
  for (int64_t i = 0; i < o.num_layers; ++i) {
    const bool first = i == 0, last = i == o.num_layers - 1;
    const std::string name = std::to_string(i);
    blocks_.push_back(blocks->add(name, std::make_shared<SfnoBlock>(first ? spec_img_ : spec_int_,
                                                                    last ? spec_img_ : spec_int_, o,
                                                                    root.child("blocks").child(name))));
  }

  const int64_t dec_in = C + (o.big_skip ? o.in_chans : 0);
  auto decoder = register_module("decoder", std::make_shared<ModuleGroup>("Sequential"));
  decoder_ = decoder->add("0", std::make_shared<Conv1x1>(dec_in, o.out_chans, o.bias,
                                                         Init::normal(std::sqrt(1.0 / static_cast<double>(dec_in))),
                                                         Init::zeros(), root.child("decoder").child("0")));
  if (o.residual_prediction && o.in_chans != o.out_chans)
    residual_projection_ = register_module(
        "residual_projection", std::make_shared<Conv1x1>(o.in_chans, o.out_chans, false, Init::torch_default(o.in_chans),
                                                         Init::zeros(), root.child("residual_projection")));
}

SFNO::~SFNO() = default;

Tensor SFNO::forward(const Tensor& x, const ForwardContext& ctx) {
  GS_CHECK(!ctx.labels.defined(), "SFNO: this model takes no labels, but the context holds {}", ctx.labels.meta_str());
  const int64_t H = pgrid_.local_lat(opt_.img_size[0]).count, W = pgrid_.local_lon(opt_.img_size[1]).count;
  GS_CHECK(x.defined() && x.dim() == 4 && x.size(1) == opt_.in_chans && x.size(2) == H && x.size(3) == W &&
               x.dtype() == opt_.dtype,
           "SFNO: expected x (B, in_chans, nlat, nlon) = (B, {}, {}, {}) of dtype {}, got {}", opt_.in_chans, H, W,
           dtype_name(opt_.dtype), x.meta_str());
  GS_CHECK(x.size(0) >= 1, "SFNO: expected a batch of at least one field, got {}", x.meta_str());

  Tensor y = encoder_->forward(x);  // (B, C, H, W)
  if (pos_embed_) y = pos_embed_->forward(y);
  for (const auto& blk : blocks_) y = blk->forward(y);  // (B, C, h, w) inside, (B, C, H, W) after the last
  if (opt_.big_skip) y = cat({y, x}, 1);
  y = decoder_->forward(y);  // (B, out_chans, H, W)
  if (opt_.residual_prediction) y = add(y, residual_projection_ ? residual_projection_->forward(x) : x);
  return y;
}

}  // namespace gs::models
