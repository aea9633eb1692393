#include "models/noise_sfno.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "distributed/shards.h"
#include "distributed/sphere_blocks.h"
#include "distributed/sphere_transforms.h"
#include "engine/autograd/checkpoint.h"
#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/complex_ops.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/shape_ops.h"
#include "ops/sphere/sht.h"
#include "ops/sphere/spectral_conv.h"
#include "ops/view.h"

namespace gs::models {
namespace {

const Init kAceInit = Init::trunc_normal(0.02);  // ACE's _init_weights for Conv2d / Linear


// ACE's SpectralConvS2 (dhconv): weight (G, L, C/G, C/G, 2) real pairs, bias (1, C, 1, 1).
class AceSpectralConv : public Module {
 public:
  AceSpectralConv(const sphere::ShtSpec& fwd, const sphere::ShtSpec& inv, int64_t C, int64_t groups,
                  bool filter_residual, const InitContext& ctx)
      : Module("SpectralConvS2"), fwd_(fwd), inv_(inv), grid_(ctx.grid), C_(C), G_(groups) {
    GS_CHECK(groups >= 1 && C % groups == 0, "SpectralConvS2: embed_dim {} is not divisible by filter_num_groups {}", C,
             groups);
    round_trip_ = filter_residual || fwd.nlat != inv.nlat || fwd.nlon != inv.nlon || fwd.grid != inv.grid;
    const int64_t L = inv.lmax, Cg = C / groups;
    Tensor w = ctx.make("weight", {groups, L, Cg, Cg, 2}, Init::normal(std::sqrt(1.0 / static_cast<double>(C))));
    {
      // "the first weight is not really complex": degree 0 gets sqrt(2) more.
      NoGradGuard ng;
      std::vector<double> f(static_cast<size_t>(L), 1.0);
      f[0] = std::numbers::sqrt2;
      w = mul(w, cast_copy(from_vector(f, {1, L, 1, 1, 1}), ctx.dtype));
    }
    // Split like the coefficients: degrees (dim 1) over h.
    const auto d = dist::Distribution::sharded_along(1, dist::GridAxis::h);
    weight_ = register_parameter("weight", dist::local_shard(w, d, ctx.grid), d);
    bias_ = register_parameter("bias", ctx.make("bias", {1, C, 1, 1}, Init::zeros()));
  }

  SpectralFilter::Output forward(const Tensor& x) const {
    Tensor coeffs = dist::sht(x, fwd_, grid_);  // (B, C, L, M): this rank's block
    Tensor residual = round_trip_ ? dist::isht(coeffs, inv_, grid_) : x;
    Tensor wc = view_as_complex(use_param(weight_));  // (G, L, C/G, C/G) complex
    Tensor y;
    if (G_ == 1) {
      y = sphere::spectral_conv_dh(coeffs, permute(select(wc, 0, 0), {2, 1, 0}));  // w (Cin, Cout, L)
    } else {
      std::vector<Tensor> parts;
      auto xs = split(coeffs, C_ / G_, 1);
      for (int64_t g = 0; g < G_; ++g)
        parts.push_back(sphere::spectral_conv_dh(xs[static_cast<size_t>(g)], permute(select(wc, 0, g), {2, 1, 0})));
      y = cat(parts, 1);
    }
    y = add(dist::isht(y, inv_, grid_), use_param(bias_));
    return {y, residual};
  }

 private:
  sphere::ShtSpec fwd_, inv_;
  dist::ProcessGrid grid_;
  int64_t C_, G_;
  bool round_trip_;
  Tensor weight_, bias_;
};

// ACE's SpectralFilterLayer: a wrapper whose only child is "filter".
class AceFilterLayer : public Module {
 public:
  AceFilterLayer(const sphere::ShtSpec& fwd, const sphere::ShtSpec& inv, const NoiseSfnoOptions& o,
                 const InitContext& ctx)
      : Module("SpectralFilterLayer") {
    filter_ = register_module("filter", std::make_shared<AceSpectralConv>(fwd, inv, o.embed_dim, o.filter_num_groups,
                                                                          o.filter_residual, ctx.child("filter")));
  }
  SpectralFilter::Output forward(const Tensor& x) const { return filter_->forward(x); }

 private:
  std::shared_ptr<AceSpectralConv> filter_;
};

ContextDims context_dims(const NoiseSfnoOptions& o) {
  return {o.noise_embed_dim, o.context_pos_embed_dim, o.n_labels};
}

// ACE's FourierNeuralOperatorBlock with inner_skip "linear", outer_skip "identity", filter "linear".
class AceBlock : public Module {
 public:
  AceBlock(const sphere::ShtSpec& fwd, const sphere::ShtSpec& inv, const NoiseSfnoOptions& o, const InitContext& ctx)
      : Module("FourierNeuralOperatorBlock"), act_(parse_activation(o.activation_function)) {
    const int64_t C = o.embed_dim, H = o.img_shape[0], W = o.img_shape[1];
    const ContextDims dims = context_dims(o);
    norm0_ = register_module("norm0", std::make_shared<ConditionalLayerNorm>(C, H, W, dims, o.global_layer_norm, 1e-5,
                                                                             o.affine_norms, ctx.child("norm0")));
    filter_ = register_module("filter", std::make_shared<AceFilterLayer>(fwd, inv, o, ctx.child("filter")));
    inner_skip_ = register_module("inner_skip", std::make_shared<Conv1x1>(C, C, true, kAceInit, Init::zeros(),
                                                                          ctx.child("inner_skip")));
    norm1_ = register_module("norm1", std::make_shared<ConditionalLayerNorm>(C, H, W, dims, o.global_layer_norm, 1e-5,
                                                                             o.affine_norms, ctx.child("norm1")));
    if (o.use_mlp) {
      MlpSpec s;
      s.in = C, s.out = C, s.hidden = static_cast<int64_t>(static_cast<double>(C) * o.mlp_ratio);
      s.bf16_storage = o.mlp_bf16_storage;
      GS_CHECK(s.hidden > 0, "NoiseConditionedSFNO: mlp_ratio {} leaves no hidden channels for embed_dim {}",
               o.mlp_ratio, C);
      s.act = act_, s.output_bias = true;
      s.fc1_weight = s.fc2_weight = kAceInit;
      mlp_ = register_module("mlp", std::make_shared<Mlp>(s, ctx.child("mlp")));
    }
  }

  Tensor forward(const Tensor& x, const ConditioningInputs& c) const {
    auto [y, residual] = filter_->forward(norm0_->forward(x, c));
    y = activate(add(y, inner_skip_->forward(residual)), act_);
    y = norm1_->forward(y, c);
    if (mlp_) y = mlp_->forward(y);
    return add(y, residual);
  }

 private:
  Activation act_;
  std::shared_ptr<ConditionalLayerNorm> norm0_, norm1_;
  std::shared_ptr<AceFilterLayer> filter_;
  std::shared_ptr<Conv1x1> inner_skip_;
  std::shared_ptr<Mlp> mlp_;
};

// nn.Sequential(conv(bias), act, ..., conv(no bias)): hidden layers at even indices 0, 2, ...,
// `layers` of them, then the output convolution at index 2 * layers.
class AceStack : public Module {
 public:
  AceStack(int64_t cin, int64_t hidden, int64_t cout, int64_t layers, Activation act, const InitContext& ctx)
      : Module("Sequential"), act_(act) {
    int64_t cur = cin;
    for (int64_t i = 0; i < layers; ++i) {
      const std::string n = std::to_string(2 * i);
      hidden_.push_back(register_module(n, std::make_shared<Conv1x1>(cur, hidden, true, kAceInit, Init::zeros(),
                                                                     ctx.child(n))));
      cur = hidden;
    }
    const std::string n = std::to_string(2 * layers);
    out_ = register_module(n, std::make_shared<Conv1x1>(cur, cout, false, kAceInit, Init::zeros(), ctx.child(n)));
  }
  Tensor forward(Tensor x) const {
    for (const auto& h : hidden_) x = activate(h->forward(x), act_);
    return out_->forward(x);
  }

 private:
  Activation act_;
  std::vector<std::shared_ptr<Conv1x1>> hidden_;
  std::shared_ptr<Conv1x1> out_;
};

}  // namespace

// ACE's conditional SphericalFourierNeuralOperatorNet (scale_factor 1).
class ConditionalSFNO : public Module {
 public:
  ConditionalSFNO(const NoiseSfnoOptions& o, const InitContext& ctx)
      : Module("SphericalFourierNeuralOperatorNet"), o_(o), grid_(ctx.grid) {
    const auto [H, W] = o.img_shape;
    const sphere::GridKind data_grid = sphere::parse_grid_kind(o.data_grid);
    const int64_t lmax = static_cast<int64_t>(static_cast<double>(H) * o.hard_thresholding_fraction);
    const int64_t mmax_ace = static_cast<int64_t>(static_cast<double>(W / 2 + 1) * o.hard_thresholding_fraction);
    const int64_t mmax = std::min(mmax_ace, lmax);
    GS_CHECK(lmax >= 1 && mmax >= 1, "NoiseConditionedSFNO: img_shape ({}, {}) with hard_thresholding_fraction {} "
             "leaves lmax {}, mmax {}; expected at least 1", H, W, o.hard_thresholding_fraction, lmax, mmax);
    try {
      data_ = sphere::make_sht_spec(data_grid, H, W, lmax, mmax);
      internal_ = sphere::make_sht_spec(sphere::GridKind::legendre_gauss, H, W, lmax, mmax);
    } catch (const Error& e) {
      fail("NoiseConditionedSFNO: the transforms for img_shape ({}, {}) on {} with lmax {}, mmax {} are not available "
           "(an equiangular grid resolves lmax <= (nlat + 1) / 2: lower hard_thresholding_fraction): {}",
           H, W, o.data_grid, lmax, mmax, e.what());
    }
    const Activation act = parse_activation(o.activation_function);
    const int64_t C = o.embed_dim;
    encoder_ = register_module("encoder", std::make_shared<AceStack>(o.in_chans, C, C, o.encoder_layers, act,
                                                                    ctx.child("encoder")));
    auto blocks = register_module("blocks", std::make_shared<ModuleGroup>("ModuleList"));
    for (int64_t i = 0; i < o.num_layers; ++i) {
      const bool first = i == 0, last = i == o.num_layers - 1;
      const std::string n = std::to_string(i);
      blocks_.push_back(blocks->add(n, std::make_shared<AceBlock>(first ? data_ : internal_, last ? data_ : internal_,
                                                                  o, ctx.child("blocks").child(n))));
    }
    decoder_ = register_module("decoder", std::make_shared<AceStack>(C + (o.big_skip ? o.in_chans : 0), C, o.out_chans,
                                                                    o.encoder_layers, act, ctx.child("decoder")));
    const auto tile = dist::Distribution::sharded_2d(2, 3);
    if (o.pos_embed)
      pos_embed_ = register_parameter("pos_embed", ctx.make_shard("pos_embed", {1, C, H, W}, kAceInit, tile), tile);
  }

  Tensor forward(const Tensor& x, const ConditioningInputs& c, bool checkpoint_blocks) const {
    Tensor residual;
    if (o_.big_skip) residual = o_.filter_residual ? dist::isht(dist::sht(x, data_, grid_), data_, grid_) : x;
    Tensor y = encoder_->forward(x);  // (B, C, H, W)
    if (pos_embed_.defined()) y = add(y, use_param(pos_embed_));
    for (const auto& blk : blocks_) {
      if (!checkpoint_blocks) {
        y = blk->forward(y, c);
        continue;
      }
      y = checkpoint([blk, c](const std::vector<Tensor>& in) { return std::vector<Tensor>{blk->forward(in[0], c)}; },
                     {y})[0];
    }
    if (o_.big_skip) y = cat({y, residual}, 1);
    y = decoder_->forward(y);  // (B, out_chans, H, W)
    if (o_.filter_output) y = dist::isht(dist::sht(y, data_, grid_), data_, grid_);
    return y;
  }

  const sphere::ShtSpec& data_spec() const { return data_; }
  const sphere::ShtSpec& internal_spec() const { return internal_; }

 private:
  NoiseSfnoOptions o_;
  dist::ProcessGrid grid_;
  sphere::ShtSpec data_, internal_;
  std::shared_ptr<AceStack> encoder_, decoder_;
  std::vector<std::shared_ptr<AceBlock>> blocks_;
  Tensor pos_embed_;
};

namespace {

void check_options(const NoiseSfnoOptions& o) {
  const char* me = "NoiseConditionedSFNO";
  GS_CHECK(o.img_shape[0] >= 2 && o.img_shape[1] >= 2, "{}: expected img_shape of at least (2, 2), got ({}, {})", me,
           o.img_shape[0], o.img_shape[1]);
  GS_CHECK(o.in_chans >= 1 && o.out_chans >= 1 && o.embed_dim >= 1,
           "{}: expected in_chans, out_chans and embed_dim >= 1, got {}, {}, {}", me, o.in_chans, o.out_chans,
           o.embed_dim);
  GS_CHECK(o.n_labels >= 0 && o.noise_embed_dim >= 0 && o.context_pos_embed_dim >= 0,
           "{}: expected n_labels, noise_embed_dim and context_pos_embed_dim >= 0, got {}, {}, {}", me, o.n_labels,
           o.noise_embed_dim, o.context_pos_embed_dim);
  GS_CHECK(o.num_layers >= 1 && o.encoder_layers >= 0, "{}: expected num_layers >= 1 and encoder_layers >= 0, got {}, {}",
           me, o.num_layers, o.encoder_layers);
  GS_CHECK(o.filter_type == "linear", "{}: filter_type '{}' is not supported; only 'linear' is", me, o.filter_type);
  GS_CHECK(o.operator_type == "dhconv", "{}: only the 'dhconv' operator_type is supported (as ACE), got '{}'", me,
           o.operator_type);
  GS_CHECK(o.residual_filter_factor == 1, "{}: residual_filter_factor {} is not supported; only 1 is", me,
           o.residual_filter_factor);
  GS_CHECK(!(o.context_pos_embed_dim > 0 && o.pos_embed),
           "{}: context_pos_embed_dim ({}) and pos_embed should not both be set (as ACE)", me, o.context_pos_embed_dim);
  GS_CHECK(o.noise_type == "gaussian" || o.noise_type == "isotropic",
           "{}: unknown noise_type '{}'; expected gaussian or isotropic", me, o.noise_type);
  GS_CHECK(o.mlp_ratio > 0, "{}: expected mlp_ratio > 0, got {}", me, o.mlp_ratio);
  GS_CHECK(o.hard_thresholding_fraction > 0 && o.hard_thresholding_fraction <= 1,
           "{}: expected hard_thresholding_fraction in (0, 1], got {}", me, o.hard_thresholding_fraction);
  GS_CHECK(is_floating(o.dtype), "{}: expected dtype f32 or f64, got {}", me, dtype_name(o.dtype));
  GS_CHECK(!o.mlp_bf16_storage || o.dtype == DType::f32,
           "{}: bf16 MLP storage (mlp_storage bf16) widens to f32, so it needs dtype f32, got {}", me,
           dtype_name(o.dtype));
  GS_CHECK(o.activation_function != "identity", "{}: activation_function must be gelu, relu or silu (as ACE), got "
           "identity", me);
  parse_activation(o.activation_function);
}

}  // namespace

NoiseConditionedSFNO::NoiseConditionedSFNO(const NoiseSfnoOptions& o, const dist::ProcessGrid& pgrid)
    : Model("NoiseConditionedSFNO"), opt_(o), pgrid_(pgrid) {
  check_options(o);
  const InitContext root{o.seed, o.dtype, "", pgrid};
  model_ = register_module("conditional_model", std::make_shared<ConditionalSFNO>(o, root.child("conditional_model")));
  const auto [H, W] = o.img_shape;
  if (o.context_pos_embed_dim > 0) {
    const int64_t P = o.context_pos_embed_dim;
    const auto tile = dist::Distribution::sharded_2d(2, 3);
    pos_embed_ = register_parameter("pos_embed", root.make_shard("pos_embed", {1, P, H, W}, kAceInit, tile), tile);
    if (o.n_labels > 0)
      label_pos_embed_ = register_parameter(
          "label_pos_embed", root.make_shard("label_pos_embed", {o.n_labels, P, H, W}, kAceInit, tile), tile);
  }
}

NoiseConditionedSFNO::~NoiseConditionedSFNO() = default;

const sphere::ShtSpec& NoiseConditionedSFNO::data_spec() const { return model_->data_spec(); }
const sphere::ShtSpec& NoiseConditionedSFNO::internal_spec() const { return model_->internal_spec(); }

Tensor NoiseConditionedSFNO::make_noise(int64_t batch, RandomKey key, int64_t first_sample) const {
  GS_CHECK(batch >= 1, "NoiseConditionedSFNO: expected a batch >= 1, got {}", batch);
  const int64_t E = opt_.noise_embed_dim, H = opt_.img_shape[0], W = opt_.img_shape[1];
  if (E == 0) return {};
  NoGradGuard ng;
  // Drawn by global element index, so every decomposition draws the one-process field (its tile).
  if (opt_.noise_type == "gaussian") return dist::randn_tile({batch, E}, H, W, key, opt_.dtype, pgrid_, first_sample);
  // isotropic: unit-variance coefficients (m = 0 real), scaled so the field has unit variance per point.
  const sphere::ShtSpec& s = model_->data_spec();
  const int64_t L = s.lmax, M = s.mmax;
  const dist::Block orders = dist::local_orders(pgrid_, M);
  Tensor re = dist::randn_coeff_block({batch, E}, L, M, key, opt_.dtype, pgrid_, first_sample);
  Tensor im = dist::randn_coeff_block({batch, E}, L, M, RandomKey{key.seed, key.stream ^ 0x69736f74726f70ULL},
                                      opt_.dtype, pgrid_, first_sample);
  std::vector<double> fr(static_cast<size_t>(orders.count), 1.0 / std::numbers::sqrt2), fi = fr;
  if (orders.start == 0 && orders.count > 0) fr[0] = 1.0, fi[0] = 0.0;
  const double scale = std::sqrt(4.0 * std::numbers::pi) / static_cast<double>(L);
  Tensor alm = complex(mul(re, cast_copy(from_vector(fr, {orders.count}), opt_.dtype)),
                       mul(im, cast_copy(from_vector(fi, {orders.count}), opt_.dtype)));
  return dist::isht(mul(alm, scalar_like(alm, scale)), s, pgrid_);
}

Tensor NoiseConditionedSFNO::forward(const Tensor& x, const ForwardContext& ctx) {
  GS_CHECK(x.defined() && x.dim() == 4, "NoiseConditionedSFNO: expected x (B, in_chans, nlat, nlon), got {}",
           x.meta_str());
  Tensor noise = make_noise(x.size(0), ctx.noise_key, ctx.first_sample);
  // The noise is drawn on the CPU (counter-based, so every device and decomposition draws the same).
  if (noise.defined() && noise.device() != x.device()) noise = gs::to(noise, x.device());
  return forward_with_noise(x, noise, ctx.labels, ctx.checkpoint_blocks);
}

Tensor NoiseConditionedSFNO::forward_with_noise(const Tensor& x, const Tensor& noise, const Tensor& labels,
                                                bool checkpoint_blocks) {
  const int64_t H = pgrid_.local_lat(opt_.img_shape[0]).count, W = pgrid_.local_lon(opt_.img_shape[1]).count;
  GS_CHECK(x.defined() && x.dim() == 4 && x.size(0) >= 1 && x.size(1) == opt_.in_chans && x.size(2) == H &&
               x.size(3) == W && x.dtype() == opt_.dtype,
           "NoiseConditionedSFNO: expected x (B, in_chans, nlat, nlon) = (B, {}, {}, {}) of dtype {}, got {}",
           opt_.in_chans, H, W, dtype_name(opt_.dtype), x.meta_str());
  const int64_t B = x.size(0);
  if (opt_.n_labels > 0)
    GS_CHECK(labels.defined() && labels.dim() == 2 && labels.size(0) == B && labels.size(1) == opt_.n_labels &&
                 labels.dtype() == opt_.dtype,
             "NoiseConditionedSFNO: expected labels (B, n_labels) = ({}, {}) of dtype {}, got {}", B, opt_.n_labels,
             dtype_name(opt_.dtype), labels.meta_str());
  else
    GS_CHECK(!labels.defined(), "NoiseConditionedSFNO: the model was built with n_labels = 0 but got labels {}",
             labels.meta_str());

  ConditioningInputs c;
  c.noise = noise;
  c.labels = opt_.n_labels > 0 ? labels : Tensor();
  if (pos_embed_.defined()) {
    const int64_t P = opt_.context_pos_embed_dim;
    Tensor pos = expand(use_param(pos_embed_), {B, P, H, W});  // (B, P, H, W)
    if (label_pos_embed_.defined()) {
      // einsum("bl, lpxy -> bpxy"): (B, N) @ (N, P*H*W)
      Tensor lp = matmul(labels, reshape(use_param(label_pos_embed_), {opt_.n_labels, P * H * W}));
      pos = add(pos, reshape(lp, {B, P, H, W}));
    }
    c.embedding_pos = pos;
  }
  return model_->forward(x, c, checkpoint_blocks);
}

}  // namespace gs::models
