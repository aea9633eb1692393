#include "models/sfno.h"

#include <algorithm>
#include <cmath>

#include "engine/autograd/checkpoint.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/complex_ops.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/gelu_fused.h"
#include "ops/linalg.h"
#include "ops/shape_ops.h"
#include "ops/sphere/grids.h"
#include "ops/sphere/sfno_blocks.h"
#include "ops/view.h"

namespace gs::models {

RandomKey sfno_dropout_key(RandomKey noise_key, const std::string& site) {
  return {noise_key.seed, noise_key.stream ^ param_key(0, site).stream};
}

namespace {

// One forward pass's dropout: the mode, the pass's key, and where this rank's batch and tile sit
// in the global one (the masks are drawn by global index).
struct DropoutPass {
  bool training = false;
  RandomKey noise_key{};
  int64_t first_sample = 0;
  const dist::ProcessGrid* grid = nullptr;

  RandomKey key(const std::string& site) const { return sfno_dropout_key(noise_key, site); }
  // x (B, C, rows, cols): this rank's tile of a field on an (nlat, nlon) grid.
  RandomWindow window(const Tensor& x, int64_t nlat, int64_t nlon) const {
    return {{first_sample + x.size(0), x.size(1), nlat, nlon},
            {first_sample, 0, grid->local_lat(nlat).start, grid->local_lon(nlon).start}};
  }
};

// torch-harmonics' MLP with drop_rate > 0: Sequential(fc1, act, Dropout2d, fc2, Dropout2d), so the
// output layer is fwd.3. The arithmetic is Mlp's (models/layers.cpp: the fused GELU and bias, bf16
// storage) with the two channel dropouts inserted.
class DropoutMlp : public Module {
 public:
  DropoutMlp(const MlpSpec& s, double drop_rate, std::string site, const InitContext& ctx)
      : Module("MLP"), act_(s.act), bf16_(s.bf16_storage), drop_rate_(drop_rate), site_(std::move(site)) {
    GS_CHECK(!s.bf16_storage || s.act == Activation::gelu, "MLP: bf16 storage (mlp_storage bf16) needs activation "
                                                           "gelu, got {}",
             activation_name(s.act));
    auto fwd = register_module("fwd", std::make_shared<ModuleGroup>("Sequential"));
    const InitContext fctx = ctx.child("fwd");
    fc1_ = fwd->add("0", std::make_shared<Conv1x1>(s.in, s.hidden, true, s.fc1_weight, s.fc1_bias, fctx.child("0")));
    fc2_ = fwd->add("3", std::make_shared<Conv1x1>(s.hidden, s.out, s.output_bias, s.fc2_weight, s.fc2_bias,
                                                   fctx.child("3")));
  }

  // x on an (nlat, nlon) grid (this rank's tile of it).
  Tensor forward(const Tensor& x, const DropoutPass& pass, int64_t nlat, int64_t nlon) const {
    const Tensor in = bf16_ ? gs::to(x, DType::bf16) : x;
    Tensor h;
    if (act_ == Activation::gelu) {
      Tensor pre = fc1_->forward_without_bias(in);
      if (bf16_) pre = gs::to(pre, DType::bf16);
      h = gelu_fused(pre, use_param(fc1_->bias()));
    } else {
      h = activate(fc1_->forward(in), act_);
    }
    RandomWindow win = pass.window(h, nlat, nlon);
    h = feature_dropout(h, drop_rate_, pass.key(site_ + "fwd.2"), pass.training, &win);
    if (bf16_) h = gs::to(h, DType::bf16);
    Tensor y = fc2_->forward(h);
    win = pass.window(y, nlat, nlon);
    return feature_dropout(y, drop_rate_, pass.key(site_ + "fwd.4"), pass.training, &win);
  }

 private:
  Activation act_;
  bool bf16_;
  double drop_rate_;
  std::string site_;  // "blocks.<i>.mlp."
  std::shared_ptr<Conv1x1> fc1_, fc2_;
};

// torch.linspace(0, end, n) in T (f32 or f64: the model's default dtype in torch), bit for bit: its
// kernel counts the first half up from 0 and the second half down from end with a fused
// multiply-add (checked against torch 2.14 for n < 40).
template <typename T>
std::vector<double> torch_linspace(double end, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n), 0.0);
  if (n == 1) return out;
  const T e = static_cast<T>(end), step = e / static_cast<T>(n - 1);
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = i < n / 2 ? step * static_cast<T>(i) : std::fma(-step, static_cast<T>(n - 1 - i), e);
  return out;
}

}  // namespace

// One SphericalFourierNeuralOperatorBlock (torch-harmonics' names: global_conv, norm, inner_skip,
// mlp, outer_skip). Initial scales follow its gain bookkeeping: the spectral weight's variance is
// gain / C with gain 2 (1 for the identity activation), halved when an inner skip shares the
// output; the MLP's output layer gets gain 1, halved when an outer linear or local3x3 skip or an inner
// identity skip shares it.
class SfnoBlock : public Module {
 public:
  enum class Skip { none, linear, identity, local3x3 };

  SfnoBlock(const sphere::ShtSpec& fwd, const sphere::ShtSpec& inv, const SfnoOptions& o, double drop_path_rate,
            const InitContext& ctx)
      : Module("SphericalFourierNeuralOperatorBlock"), inner_(parse_skip(o.inner_skip, "inner_skip")),
        outer_(parse_skip(o.outer_skip, "outer_skip")), nlat_(inv.nlat), nlon_(inv.nlon),
        drop_path_rate_(drop_path_rate), site_(ctx.prefix) {
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
      if (o.drop_rate > 0)
        drop_mlp_ = register_module("mlp", std::make_shared<DropoutMlp>(s, o.drop_rate, site_ + "mlp.", ctx.child("mlp")));
      else
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

  Tensor forward(const Tensor& x, const DropoutPass& pass) const { return finish(global_conv_->forward(x), pass); }

  // Whether forward_from_coefficients applies: the residual is synthesised from the coefficients,
  // so the block never reads its input on the grid.
  bool takes_coefficients() const { return global_conv_->scales_residual(); }
  // forward from the input's coefficients (B, C, L, M) (the encoder folded into them, SFNO::forward).
  Tensor forward_from_coefficients(const Tensor& coeffs, const DropoutPass& pass) const {
    return finish(global_conv_->output(global_conv_->spectra(coeffs), Tensor()), pass);
  }
  const SpectralFilter& global_conv() const { return *global_conv_; }

  // The block after its spectral filter.
  Tensor finish(SpectralFilter::Output filtered, const DropoutPass& pass) const {
    Tensor y = std::move(filtered.y);
    const Tensor residual = std::move(filtered.residual);
    y = norm_->forward(y);
    if (inner_ == Skip::linear) y = add(y, inner_skip_->forward(residual));
    if (inner_ == Skip::identity) y = add(y, residual);
    if (inner_ == Skip::local3x3) y = add(y, inner_local_->forward(residual));
    if (mlp_) y = mlp_->forward(y);
    if (drop_mlp_) y = drop_mlp_->forward(y, pass, nlat_, nlon_);
    if (drop_path_rate_ > 0) {  // torch-harmonics: the branch before the outer skip joins it
      const RandomWindow win = pass.window(y, nlat_, nlon_);
      y = drop_path(y, drop_path_rate_, pass.key(site_ + "drop_path"), pass.training, &win);
    }
    if (outer_ == Skip::linear) y = add(y, outer_skip_->forward(residual));
    if (outer_ == Skip::identity) y = add(y, residual);
    if (outer_ == Skip::local3x3) y = add(y, outer_local_->forward(residual));
    return y;
  }

  // Whether forward_decoded applies: the block's output reaches the decoder only through linear
  // maps after the MLP's activation (no norm, inner skip, dropout or stochastic depth; the outer
  // skip the identity or none), so the decoder can be folded into them.
  bool folds_into_decoder() const {
    return mlp_ && drop_path_rate_ == 0 && norm_->kind() == NormKind::none &&
           inner_ == Skip::none && (outer_ == Skip::identity || outer_ == Skip::none);
  }

  // dec_w . forward(x) + dec_b (dec_w (Cout, C), dec_b (Cout) or undefined) with the linear maps
  // reordered, equal up to rounding: the transforms act on each channel alike, so the MLP's first
  // layer mixes the filtered coefficients before the inverse transform (isht(W1 s) = W1 isht(s)),
  // and the decoder is folded into the MLP's output layer (dec_w W2, Cout x hidden) and taken into
  // the residual's coefficients. On the output grid only the activation and a Cout-row product
  // remain, where the plain form runs two C x hidden products there (and their gradients).
  Tensor forward_decoded(const Tensor& x, const Tensor& dec_w, const Tensor& dec_b) const {
    const SpectralFilter::Spectra spectra = global_conv_->analyse(x);
    const Conv1x1& fc1 = mlp_->fc1();
    const Conv1x1& fc2 = mlp_->fc2();
    const int64_t C = fc1.in_channels(), hidden = fc1.out_channels();
    const Tensor w1 = reshape(use_param(fc1.weight()), {hidden, C});
    Tensor b1 = use_param(fc1.bias());
    // The filter's bias is a constant per channel on the grid: W1 takes it into fc1's bias.
    if (global_conv_->bias().defined())
      b1 = add(b1, reshape(matmul(w1, reshape(use_param(global_conv_->bias()), {C, 1})), {hidden}));
    // Under bf16 MLP storage the pre-activation and the hidden activation are kept in bf16, as
    // Mlp::forward keeps them (gelu only); the coefficients fc1 reads are few and stay as they are.
    const bool bf16 = mlp_->bf16_storage();
    Tensor pre = global_conv_->synthesize(mix_coefficients(spectra.filtered, w1));  // (B, hidden, H, W)
    if (bf16) pre = gs::to(pre, DType::bf16);
    const Activation act = mlp_->activation();
    Tensor h = act == Activation::gelu ? gelu_fused(pre, b1) : activate(add(pre, reshape(b1, {1, hidden, 1, 1})), act);
    if (bf16) h = gs::to(h, DType::bf16);
    const Tensor w2 = reshape(use_param(fc2.weight()), {C, hidden});
    Tensor bias = dec_b;
    if (fc2.bias().defined()) {
      const Tensor b2 = reshape(matmul(dec_w, reshape(use_param(fc2.bias()), {C, 1})), {dec_w.size(0)});
      bias = bias.defined() ? add(bias, b2) : b2;
    }
    Tensor y = sphere::conv1x1(h, matmul(dec_w, w2), bias);
    if (outer_ == Skip::identity)
      y = add(y, global_conv_->scales_residual() ? global_conv_->synthesize(mix_coefficients(spectra.coeffs, dec_w))
                                                 : sphere::conv1x1(x, dec_w));
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
  int64_t nlat_, nlon_;  // the whole grid of the block's output
  double drop_path_rate_;
  std::string site_;  // "blocks.<i>."
  std::shared_ptr<SpectralFilter> global_conv_;
  std::shared_ptr<GridNorm> norm_;
  std::shared_ptr<Conv1x1> inner_skip_, outer_skip_;
  std::shared_ptr<LocalConv3x3> inner_local_, outer_local_;
  std::shared_ptr<Mlp> mlp_;
  std::shared_ptr<DropoutMlp> drop_mlp_;
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
  GS_CHECK(o.drop_rate >= 0 && o.drop_rate <= 1 && o.drop_path_rate >= 0 && o.drop_path_rate <= 1,
           "SFNO: expected drop_rate and drop_path_rate in [0, 1], got {} and {}", o.drop_rate, o.drop_path_rate);
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

  drop_path_rates_ = o.dtype == DType::f32 ? torch_linspace<float>(o.drop_path_rate, o.num_layers)
                                            : torch_linspace<double>(o.drop_path_rate, o.num_layers);
  auto blocks = register_module("blocks", std::make_shared<ModuleGroup>("ModuleList"));
  for (int64_t i = 0; i < o.num_layers; ++i) {
    const bool first = i == 0, last = i == o.num_layers - 1;
    const std::string name = std::to_string(i);
    blocks_.push_back(blocks->add(name, std::make_shared<SfnoBlock>(first ? spec_img_ : spec_int_,
                                                                    last ? spec_img_ : spec_int_, o,
                                                                    drop_path_rates_[static_cast<size_t>(i)],
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
  fold_encoder_ = sfno_folds_encoder(o), fold_decoder_ = sfno_folds_decoder(o);
  // The options' rule (shared with the grid planner) against the blocks themselves.
  GS_CHECK(!fold_encoder_ || (!pos_embed_ && blocks_.front()->takes_coefficients()),
           "SFNO: internal: the encoder fold's rule disagrees with the first block");
  GS_CHECK(!fold_decoder_ || blocks_.back()->folds_into_decoder(),
           "SFNO: internal: the decoder fold's rule disagrees with the last block");
}

SFNO::~SFNO() = default;

bool sfno_folds_encoder(const SfnoOptions& o) {
  if (!o.fold_encoder_decoder || o.pos_embed != "none" || o.drop_rate > 0 || o.num_layers < 2) return false;
  // Block 0's residual is synthesised from its coefficients only when its two grids differ in size.
  const auto [H, W] = o.img_size;
  return (H - 1) / o.scale_factor + 1 != H || W / o.scale_factor != W;
}

bool sfno_folds_decoder(const SfnoOptions& o) {
  // The last block's stochastic depth rate is linspace(0, drop_path_rate, num_layers)'s last.
  const bool no_drop_path = o.drop_path_rate == 0 || o.num_layers == 1;
  return o.fold_encoder_decoder && o.use_mlp && o.drop_rate == 0 && no_drop_path &&
         o.normalization_layer == "none" && o.inner_skip == "none" &&
         (o.outer_skip == "identity" || o.outer_skip == "none");
}

// The first block's input coefficients from x's: the encoder is a 1x1 convolution, and the
// transform acts on each channel alike, so sht(W x + b) = W sht(x) + b sht(1), with x's
// in_chans channels transformed instead of the encoder's C.
Tensor SFNO::encoded_coefficients(const Tensor& x) const {
  const SpectralFilter& conv = blocks_.front()->global_conv();
  const int64_t C = opt_.embed_dim;
  Tensor coeffs = mix_coefficients(conv.transform(x), reshape(use_param(encoder_->weight()), {C, opt_.in_chans}));
  if (!encoder_->bias().defined()) return coeffs;
  // A constant field's coefficients, as this rank's transform gives them (the quadrature's, not
  // the exact sqrt(4 pi) at degree 0), times each channel's bias.
  const Tensor one = view_as_real(conv.transform(ones({1, 1, x.size(2), x.size(3)}, x.dtype(), x.device())));  // (1, 1, L, M, 2)
  const Tensor per_channel = mul(one, reshape(use_param(encoder_->bias()), {1, C, 1, 1, 1}));
  return add(coeffs, view_as_complex(contiguous(per_channel)));
}

// The decoder's weight (out_chans, C [+ in_chans]) as a matrix, columns [first, first + count):
// all of it, or under big_skip the block's part or the input's.
Tensor SFNO::decoder_columns(int64_t first, int64_t count) const {
  const Tensor w = reshape(use_param(decoder_->weight()), {opt_.out_chans, decoder_->in_channels()});
  return count == decoder_->in_channels() ? w : contiguous(narrow(w, 1, first, count));
}

Tensor SFNO::forward(const Tensor& x, const ForwardContext& ctx) {
  GS_CHECK(!ctx.labels.defined(), "SFNO: this model takes no labels, but the context holds {}", ctx.labels.meta_str());
  const int64_t H = pgrid_.local_lat(opt_.img_size[0]).count, W = pgrid_.local_lon(opt_.img_size[1]).count;
  GS_CHECK(x.defined() && x.dim() == 4 && x.size(1) == opt_.in_chans && x.size(2) == H && x.size(3) == W &&
               x.dtype() == opt_.dtype,
           "SFNO: expected x (B, in_chans, nlat, nlon) = (B, {}, {}, {}) of dtype {}, got {}", opt_.in_chans, H, W,
           dtype_name(opt_.dtype), x.meta_str());
  GS_CHECK(x.size(0) >= 1, "SFNO: expected a batch of at least one field, got {}", x.meta_str());

  const DropoutPass pass{is_training(), ctx.noise_key, ctx.first_sample, &pgrid_};
  Tensor y;
  // The encoder folded into the first block's coefficients and the decoder into the last block
  // (SfnoBlock::forward_from_coefficients, forward_decoded) where they allow it (NOTES.md).
  if (fold_encoder_) {
    y = encoded_coefficients(x);  // (B, C, L, M)
  } else {
    y = encoder_->forward(x);  // (B, C, H, W)
    if (pos_embed_) y = pos_embed_->forward(y);
    if (opt_.drop_rate > 0) {  // torch-harmonics' pos_drop
      const RandomWindow win = pass.window(y, opt_.img_size[0], opt_.img_size[1]);
      y = dropout(y, opt_.drop_rate, pass.key("pos_drop"), pass.training, &win);
    }
  }
  for (size_t i = 0; i < blocks_.size(); ++i) {  // (B, C, h, w) inside, (B, C, H, W) after the last
    const std::shared_ptr<SfnoBlock>& blk = blocks_[i];
    const bool decode = fold_decoder_ && i + 1 == blocks_.size(), from_coefficients = fold_encoder_ && i == 0;
    // Under checkpointing the decoder's parameters are read inside, so the recomputation reaches them.
    auto run = [this, blk, pass, decode, from_coefficients](const Tensor& in) {
      if (from_coefficients) return blk->forward_from_coefficients(in, pass);
      if (!decode) return blk->forward(in, pass);
      return blk->forward_decoded(in, decoder_columns(0, opt_.embed_dim),
                                  decoder_->bias().defined() ? use_param(decoder_->bias()) : Tensor());
    };
    if (!ctx.checkpoint_blocks) {
      y = run(y);
      continue;
    }
    y = checkpoint([run](const std::vector<Tensor>& in) { return std::vector<Tensor>{run(in[0])}; }, {y})[0];
  }
  if (fold_decoder_) {  // y is the decoder's output already, less its input channels under big_skip
    if (opt_.big_skip) y = add(y, sphere::conv1x1(x, decoder_columns(opt_.embed_dim, opt_.in_chans)));
  } else {
    if (opt_.big_skip) y = cat({y, x}, 1);
    y = decoder_->forward(y);  // (B, out_chans, H, W)
  }
  if (opt_.residual_prediction) y = add(y, residual_projection_ ? residual_projection_->forward(x) : x);
  return y;
}

}  // namespace gs::models
