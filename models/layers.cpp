#include "models/layers.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <type_traits>
#include <numbers>

#include <fmt/format.h>

#include "distributed/shards.h"
#include "distributed/sphere_blocks.h"
#include "distributed/sphere_transforms.h"
#include "engine/autograd/custom_function.h"
#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/complex_ops.h"
#include "ops/elementwise.h"
#include "ops/gelu_fused.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/sphere/sfno_blocks.h"
#include "ops/view.h"

namespace gs::models {

// ---- initialisation

Init Init::torch_default(int64_t fan_in) {
  GS_CHECK(fan_in > 0, "Init::torch_default: expected fan_in > 0, got {}", fan_in);
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return uniform(-bound, bound);
}

Tensor Init::make(const Shape& sizes, RandomKey key, DType dtype) const {
  GS_CHECK(kind == Kind::normal || !is_complex(dtype), "Init: only normal initialisation draws complex values, got {}",
           dtype_name(dtype));
  switch (kind) {
    case Kind::constant: return full(sizes, p0, dtype);
    case Kind::normal: return init_normal(sizes, p0, key, dtype);
    case Kind::trunc_normal: return init_trunc_normal(sizes, 0.0, p0, p1, p2, key, dtype);
    case Kind::uniform: return init_uniform(sizes, p0, p1, key, dtype);
  }
  fail("Init: unknown kind");
}

Tensor InitContext::make(const std::string& name, const Shape& sizes, const Init& init) const {
  return make(name, sizes, init, dtype);
}
Tensor InitContext::make(const std::string& name, const Shape& sizes, const Init& init, DType dt) const {
  return init.make(sizes, param_key(seed, prefix + name), dt);
}

Tensor InitContext::make_shard(const std::string& name, const Shape& whole, const Init& init,
                               const dist::Distribution& d) const {
  return make_shard(name, whole, init, d, dtype);
}
Tensor InitContext::make_shard(const std::string& name, const Shape& whole, const Init& init,
                               const dist::Distribution& d, DType dt) const {
  return dist::local_shard(make(name, whole, init, dt), d, grid);
}

// ---- parameter substitution

namespace {
thread_local const ParameterSubstitution* t_substitution = nullptr;
}

ParameterSubstitution::ParameterSubstitution(const Module& module, const std::map<std::string, Tensor>& by_name)
    : previous_(t_substitution) {
  auto params = module.named_parameters();
  for (const auto& [name, t] : by_name) {
    const NamedParameter* p = nullptr;
    for (const auto& np : params)
      if (np.name == name) p = &np;
    GS_CHECK(p != nullptr, "ParameterSubstitution: {} has no parameter '{}'", module.type_name(), name);
    GS_CHECK(t.defined() && t.sizes() == p->tensor.sizes() && t.dtype() == p->tensor.dtype(),
             "ParameterSubstitution: '{}' is {}, the substitute is {}", name, p->tensor.meta_str(),
             t.meta_str());
    entries_.emplace_back(p->tensor.impl(), t);
  }
  t_substitution = this;
}

ParameterSubstitution::~ParameterSubstitution() { t_substitution = previous_; }

const Tensor& use_param(const Tensor& p) {
  for (const ParameterSubstitution* s = t_substitution; s != nullptr; s = s->previous_)
    for (const auto& [impl, t] : s->entries_)
      if (impl == p.impl()) return t;
  return p;
}

// ---- activations

Activation parse_activation(std::string_view name) {
  if (name == "gelu") return Activation::gelu;
  if (name == "relu") return Activation::relu;
  if (name == "silu") return Activation::silu;
  if (name == "identity") return Activation::identity;
  fail("unknown activation_function '{}'; expected one of gelu, relu, silu, identity", name);
}

std::string_view activation_name(Activation a) {
  switch (a) {
    case Activation::gelu: return "gelu";
    case Activation::relu: return "relu";
    case Activation::silu: return "silu";
    case Activation::identity: return "identity";
  }
  return "?";
}

Tensor activate(const Tensor& x, Activation a) {
  switch (a) {
    case Activation::gelu: return gelu_fused(x);
    case Activation::relu: return relu(x);
    case Activation::silu: return silu(x);
    case Activation::identity: return x;
  }
  return x;
}

// ---- Conv1x1, Linear, Mlp

Conv1x1::Conv1x1(int64_t cin, int64_t cout, bool bias, const Init& weight_init, const Init& bias_init,
                 const InitContext& ctx)
    : Module("Conv1x1"), cin_(cin), cout_(cout) {
  GS_CHECK(cin > 0 && cout > 0, "Conv1x1: expected positive channel counts, got {} -> {}", cin, cout);
  weight_ = register_parameter("weight", ctx.make("weight", {cout, cin, 1, 1}, weight_init));
  if (bias) bias_ = register_parameter("bias", ctx.make("bias", {cout}, bias_init));
}

Tensor Conv1x1::forward(const Tensor& x) const {
  GS_CHECK(x.defined() && x.dim() == 4 && x.size(1) == cin_, "Conv1x1: expected x (B, {}, H, W), got {}", cin_,
           x.meta_str());
  const Tensor w = reshape(use_param(weight_), {cout_, cin_});  // (Cout, Cin, 1, 1) -> (Cout, Cin), a view
  return sphere::conv1x1(x, w, bias_.defined() ? use_param(bias_) : Tensor());
}

Tensor Conv1x1::forward_without_bias(const Tensor& x) const {
  GS_CHECK(x.defined() && x.dim() == 4 && x.size(1) == cin_, "Conv1x1: expected x (B, {}, H, W), got {}", cin_,
           x.meta_str());
  return sphere::conv1x1(x, reshape(use_param(weight_), {cout_, cin_}));
}

Linear::Linear(int64_t in, int64_t out, bool bias, const Init& weight_init, const Init& bias_init,
               const InitContext& ctx)
    : Module("Linear"), in_(in), out_(out) {
  GS_CHECK(in > 0 && out > 0, "Linear: expected positive sizes, got {} -> {}", in, out);
  weight_ = register_parameter("weight", ctx.make("weight", {out, in}, weight_init));
  if (bias) bias_ = register_parameter("bias", ctx.make("bias", {out}, bias_init));
}

Tensor Linear::forward(const Tensor& x) const {
  GS_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in_, "Linear: expected x (..., {}), got {}", in_,
           x.meta_str());
  return linear(x, use_param(weight_), bias_.defined() ? use_param(bias_) : Tensor());
}

Mlp::Mlp(const MlpSpec& s, const InitContext& ctx) : Module("MLP"), act_(s.act), bf16_storage_(s.bf16_storage) {
  GS_CHECK(!s.bf16_storage || ctx.dtype == DType::f32, "MLP: bf16 storage is for f32 models, got a {} model",
           dtype_name(ctx.dtype));
  // relu and silu keep their own f32 input or output for backward, so a bf16 copy beside it would
  // add bytes, not save them; only the fused GELU reads the bf16 pre-activation itself.
  GS_CHECK(!s.bf16_storage || s.act == Activation::gelu,
           "MLP: bf16 storage (mlp_storage bf16) needs activation gelu, got {} (its backward would keep an f32 copy "
           "beside the bf16 one)",
           activation_name(s.act));
  auto fwd = register_module("fwd", std::make_shared<ModuleGroup>("Sequential"));
  InitContext fctx = ctx.child("fwd");
  fc1_ = fwd->add("0", std::make_shared<Conv1x1>(s.in, s.hidden, true, s.fc1_weight, s.fc1_bias, fctx.child("0")));
  fc2_ = fwd->add("2", std::make_shared<Conv1x1>(s.hidden, s.out, s.output_bias, s.fc2_weight, s.fc2_bias,
                                                 fctx.child("2")));
}

Tensor Mlp::forward(const Tensor& x) const {
  if (!bf16_storage_) {
    if (act_ == Activation::gelu)  // (B, hidden, H, W): the bias add and the GELU in one pass
      return fc2_->forward(gelu_fused(fc1_->forward_without_bias(x), use_param(fc1_->bias())));
    return fc2_->forward(activate(fc1_->forward(x), act_));
  }
  // bf16 storage: what the next op saves for backward is cast to bf16 first (the casts' backward
  // hands the f32 gradient through unrounded). One statement per step, so that each f32
  // intermediate is freed as soon as its bf16 copy exists, not at the end of one long expression.
  // Only with gelu (the constructor checks).
  const Tensor xs = gs::to(x, DType::bf16);
  const Tensor hs = gs::to(fc1_->forward_without_bias(xs), DType::bf16);
  const Tensor as = gs::to(gelu_fused(hs, use_param(fc1_->bias())), DType::bf16);
  return fc2_->forward(as);
}

// ---- SpectralFilter

SpectralFilter::SpectralFilter(const sphere::ShtSpec& forward, const sphere::ShtSpec& inverse, int64_t cin,
                               int64_t cout, sphere::SpectralOperator op, double gain, bool bias,
                               const InitContext& ctx)
    : Module("SpectralConvS2"), fwd_(forward), inv_(inverse), grid_(ctx.grid), cin_(cin), cout_(cout), op_(op) {
  GS_CHECK(fwd_.lmax == inv_.lmax && fwd_.mmax == inv_.mmax,
           "SpectralConvS2: the forward ({}) and inverse ({}) transforms must share lmax and mmax", fwd_.str(),
           inv_.str());
  GS_CHECK(cin > 0 && cout > 0 && gain > 0, "SpectralConvS2: expected positive channels and gain, got {} -> {}, gain {}",
           cin, cout, gain);
  scale_residual_ = fwd_.nlat != inv_.nlat || fwd_.nlon != inv_.nlon;
  Shape wshape = {cout, cin, inv_.lmax};  // torch-harmonics' (Cout, Cin, lmax[, mmax])
  if (op == sphere::SpectralOperator::diagonal) wshape.push_back(inv_.mmax);
  // torch-harmonics: scale * randn(complex64), scale = sqrt(gain / Cin); E|w|^2 = gain / Cin.
  // Split like the coefficients: degrees over h (and orders over w).
  const dist::Distribution d = op == sphere::SpectralOperator::diagonal ? dist::Distribution::sharded_2d(2, 3)
                                                                        : dist::Distribution::sharded_along(2, dist::GridAxis::h);
  weight_ = register_parameter("weight",
                               ctx.make_shard("weight", wshape, Init::normal(std::sqrt(gain / double(cin))), d,
                                              complex_dtype(ctx.dtype)),
                               d);
  if (bias) bias_ = register_parameter("bias", ctx.make("bias", {1, cout, 1, 1}, Init::zeros()));
}

Tensor SpectralFilter::transform(const Tensor& x) const {
  const int64_t rows = grid_.local_lat(fwd_.nlat).count, cols = grid_.local_lon(fwd_.nlon).count;
  GS_CHECK(x.defined() && x.dim() == 4 && x.size(2) == rows && x.size(3) == cols,
           "SpectralConvS2: expected x (B, C, {}, {}), got {}", rows, cols, x.meta_str());
  return dist::sht(x, fwd_, grid_);  // (B, C, L, M) complex (this rank's block)
}

Tensor SpectralFilter::filter(const Tensor& coeffs) const {
  GS_CHECK(coeffs.defined() && coeffs.dim() == 4 && coeffs.size(1) == cin_,
           "SpectralConvS2: expected coefficients (B, {}, L, M), got {}", cin_, coeffs.meta_str());
  const Tensor& w = use_param(weight_);
  // (Cout, Cin, L[, M]) -> (Cin, Cout, L[, M]), the op's layout.
  Tensor wt = op_ == sphere::SpectralOperator::diagonal ? permute(w, {1, 0, 2, 3}) : permute(w, {1, 0, 2});
  return sphere::spectral_conv(coeffs, wt, op_);
}

SpectralFilter::Spectra SpectralFilter::spectra(Tensor coeffs) const {
  Tensor filtered = filter(coeffs);
  return {std::move(coeffs), std::move(filtered)};
}

Tensor SpectralFilter::synthesize(const Tensor& coeffs) const { return dist::isht(coeffs, inv_, grid_); }

SpectralFilter::Output SpectralFilter::output(const Spectra& s, const Tensor& x) const {
  GS_CHECK(scale_residual_ || x.defined(), "SpectralConvS2: the residual on one grid is x itself, and x was not given");
  Tensor residual = scale_residual_ ? synthesize(s.coeffs) : x;
  Tensor y = synthesize(s.filtered);  // (B, Cout, H', W')
  if (bias_.defined()) y = add(y, use_param(bias_));
  return {y, residual};
}

SpectralFilter::Output SpectralFilter::forward(const Tensor& x) const {
  GS_CHECK(x.defined() && x.dim() == 4 && x.size(1) == cin_, "SpectralConvS2: expected x (B, {}, H, W), got {}", cin_,
           x.meta_str());
  return output(analyse(x), x);
}

Tensor mix_coefficients(const Tensor& coeffs, const Tensor& weight) {
  GS_CHECK(coeffs.defined() && coeffs.dim() == 4 && is_complex(coeffs.dtype()) && weight.defined() &&
               weight.dim() == 2 && weight.size(1) == coeffs.size(1),
           "mix_coefficients: expected coeffs (B, Cin, L, M) complex and weight (Cout, Cin), got {} and {}",
           coeffs.meta_str(), weight.meta_str());
  const int64_t B = coeffs.size(0), L = coeffs.size(2), M = coeffs.size(3);
  // (B, Cin, L, M) complex as (B, Cin, L, 2M) real: the weight mixes real and imaginary parts alike.
  const Tensor parts = reshape(view_as_real(contiguous(coeffs)), {B, coeffs.size(1), L, 2 * M});
  const Tensor mixed = sphere::conv1x1(parts, weight);
  return view_as_complex(reshape(mixed, {B, weight.size(0), L, M, 2}));
}

// ---- norms

NormKind parse_norm_kind(std::string_view name) {
  if (name == "none") return NormKind::none;
  if (name == "layer_norm") return NormKind::layer_norm;
  if (name == "instance_norm") return NormKind::instance_norm;
  fail("unknown normalization_layer '{}'; expected one of none, layer_norm, instance_norm", name);
}

GridNorm::GridNorm(NormKind kind, int64_t channels, int64_t nlat, int64_t nlon, double eps, const InitContext& ctx)
    : Module(kind == NormKind::layer_norm ? "LayerNorm" : kind == NormKind::instance_norm ? "InstanceNorm2d"
                                                                                            : "Identity"),
      kind_(kind), nlat_(nlat), nlon_(nlon), grid_(ctx.grid), eps_(eps) {
  if (kind == NormKind::none) return;
  const bool grid_shaped = kind == NormKind::layer_norm;
  const Shape s = grid_shaped ? Shape{nlat, nlon} : Shape{channels};
  const dist::Distribution d = grid_shaped ? dist::Distribution::sharded_2d(0, 1) : dist::Distribution::replicated();
  weight_ = register_parameter("weight", ctx.make_shard("weight", s, Init::ones(), d), d);
  bias_ = register_parameter("bias", ctx.make_shard("bias", s, Init::zeros(), d), d);
}

Tensor GridNorm::forward(const Tensor& x) const {
  switch (kind_) {
    case NormKind::none: return x;
    case NormKind::instance_norm:
      return dist::instance_norm(x, use_param(weight_), use_param(bias_), eps_, {}, nlat_, nlon_, grid_);
    case NormKind::layer_norm: {
      GS_CHECK(x.dim() == 4 && x.size(2) == weight_.size(0) && x.size(3) == weight_.size(1),
               "LayerNorm over (H, W) = ({}, {}): got x {}", weight_.size(0), weight_.size(1), x.meta_str());
      // Same statistics as the instance norm; the affine is per grid point, broadcast over (B, C).
      return dist::grid_layer_norm(x, use_param(weight_), use_param(bias_), eps_, nlat_, nlon_, grid_);
    }
  }
  return x;
}

ChannelLayerNorm::ChannelLayerNorm(int64_t channels, double eps, bool affine, const InitContext& ctx)
    : Module("LayerNorm"), eps_(eps) {
  if (!affine) return;
  weight_ = register_parameter("weight", ctx.make("weight", {channels}, Init::ones()));
  bias_ = register_parameter("bias", ctx.make("bias", {channels}, Init::zeros()));
}

Tensor ChannelLayerNorm::forward(const Tensor& x) const {
  if (!weight_.defined()) return sphere::layer_norm_channels(x, {}, {}, eps_);
  return sphere::layer_norm_channels(x, use_param(weight_), use_param(bias_), eps_);
}

// ---- position embeddings

PosEmbedKind parse_pos_embed(std::string_view name) {
  if (name == "none") return PosEmbedKind::none;
  if (name == "sequence") return PosEmbedKind::sequence;
  if (name == "spectral") return PosEmbedKind::spectral;
  if (name == "learnable lat") return PosEmbedKind::learnable_lat;
  if (name == "learnable latlon") return PosEmbedKind::learnable_latlon;
  fail("unknown pos_embed '{}'; expected one of none, sequence, spectral, learnable lat, learnable latlon", name);
}

namespace {

// (1, C, H, W) f64: sin(pos / 10000^(2k/C)) for even channels k, cos for odd, pos the flat grid index.
Tensor sequence_embedding(int64_t C, int64_t H, int64_t W) {
  std::vector<double> v(static_cast<size_t>(C * H * W));
  for (int64_t k = 0; k < C; ++k) {
    const double denom = std::pow(10000.0, 2.0 * static_cast<double>(k) / static_cast<double>(C));
    for (int64_t p = 0; p < H * W; ++p) {
      const double a = static_cast<double>(p) / denom;
      v[static_cast<size_t>(k * H * W + p)] = k % 2 == 0 ? std::sin(a) : std::cos(a);
    }
  }
  return from_vector(v, {1, C, H, W});
}

// (1, C, H, W) f64: channel i is the harmonic (l, m) = (floor(sqrt i), i - l^2 - l) synthesised by the
// inverse SHT with the grid's default truncation (coefficient 1, or i at |m| for m < 0), each
// channel scaled to max |.| = 1.
Tensor spectral_embedding(int64_t C, sphere::GridKind grid, int64_t H, int64_t W) {
  const sphere::ShtSpec spec = sphere::make_sht_spec(grid, H, W);
  std::vector<c128> coeffs(static_cast<size_t>(C * spec.lmax * spec.mmax), c128(0, 0));
  for (int64_t i = 0; i < C; ++i) {
    const auto l = static_cast<int64_t>(std::floor(std::sqrt(static_cast<double>(i))));
    const int64_t m = i - l * l - l, am = m < 0 ? -m : m;
    GS_CHECK(l < spec.lmax && am < spec.mmax,
             "spectral position embedding: channel {} needs the harmonic (l {}, m {}), beyond the grid's truncation "
             "({}); use fewer channels or a finer grid",
             i, l, m, spec.str());
    coeffs[static_cast<size_t>((i * spec.lmax + l) * spec.mmax + am)] = m < 0 ? c128(0, 1) : c128(1, 0);
  }
  Tensor pe = sphere::isht(from_vector(coeffs, {1, C, spec.lmax, spec.mmax}), spec);  // (1, C, H, W)
  return div(pe, max(abs(pe), {-1, -2}, true));
}

}  // namespace

PositionEmbedding::PositionEmbedding(PosEmbedKind kind, int64_t C, sphere::GridKind grid, int64_t H, int64_t W,
                                     const InitContext& ctx)
    : Module(kind == PosEmbedKind::sequence   ? "SequencePositionEmbedding"
             : kind == PosEmbedKind::spectral ? "SpectralPositionEmbedding"
                                              : "LearnablePositionEmbedding") {
  GS_CHECK(kind != PosEmbedKind::none, "PositionEmbedding: kind none has no embedding (use no module instead)");
  NoGradGuard no_grad;
  const auto tile = dist::Distribution::sharded_2d(2, 3), rows = dist::Distribution::sharded_along(2, dist::GridAxis::h);
  switch (kind) {
    case PosEmbedKind::sequence:
      table_ = register_buffer("position_embeddings",
                               dist::local_shard(cast_copy(sequence_embedding(C, H, W), ctx.dtype), tile, ctx.grid),
                               BufferKind::constant, tile);
      break;
    case PosEmbedKind::spectral:
      table_ = register_buffer("position_embeddings",
                               dist::local_shard(cast_copy(spectral_embedding(C, grid, H, W), ctx.dtype), tile, ctx.grid),
                               BufferKind::constant, tile);
      break;
    case PosEmbedKind::learnable_lat:
      table_ = register_parameter("position_embeddings",
                                  ctx.make_shard("position_embeddings", {1, C, H, 1}, Init::zeros(), rows), rows);
      break;
    case PosEmbedKind::learnable_latlon:
      table_ = register_parameter("position_embeddings",
                                  ctx.make_shard("position_embeddings", {1, C, H, W}, Init::zeros(), tile), tile);
      break;
    case PosEmbedKind::none: break;
  }
}

Tensor PositionEmbedding::forward(const Tensor& x) const { return add(x, use_param(table_)); }

// ---- LocalConv3x3

LocalConv3x3::LocalConv3x3(int64_t cin, int64_t cout, int64_t nlat, int64_t nlon, const InitContext& ctx)
    : Module("LocalConv3x3"), nlat_(nlat), nlon_(nlon), grid_(ctx.grid) {
  GS_CHECK(cin > 0 && cout > 0, "LocalConv3x3: expected positive channel counts, got {} -> {}", cin, cout);
  GS_CHECK(nlon % 2 == 0,
           "LocalConv3x3: the pole rule turns a row by half a revolution, so nlon must be even; got a {}x{} grid", nlat,
           nlon);
  weight_ = register_parameter("weight", ctx.make("weight", {cout, cin, 3, 3}, Init::torch_default(cin * 9)));
  bias_ = register_parameter("bias", ctx.make("bias", {cout}, Init::torch_default(cin * 9)));
}

Tensor LocalConv3x3::forward(const Tensor& x) const {
  return dist::local_conv3x3(x, use_param(weight_), use_param(bias_), nlat_, nlon_, grid_);
}

// ---- ConditionalLayerNorm

namespace {
// The norm's own affine parameters, as a child named "norm" (ACE's ChannelLayerNorm / nn.LayerNorm).
class NormAffine : public Module {
 public:
  NormAffine(const Shape& s, const InitContext& ctx) : Module("LayerNorm") {
    weight = register_parameter("weight", ctx.make("weight", s, Init::ones()));
    bias = register_parameter("bias", ctx.make("bias", s, Init::zeros()));
  }
  Tensor weight, bias;
};
}  // namespace

ConditionalLayerNorm::ConditionalLayerNorm(int64_t channels, int64_t nlat, int64_t nlon, const ContextDims& dims,
                                           bool global, double eps, bool affine, const InitContext& ctx)
    : Module("ConditionalLayerNorm"), channels_(channels), nlat_(ctx.grid.local_lat(nlat).count),
      nlon_(ctx.grid.local_lon(nlon).count), dims_(dims), global_(global), eps_(eps) {
  GS_CHECK(!(global && ctx.grid.spatially_split()),
           "ConditionalLayerNorm: the global layer norm (statistics over (C, H, W)) is not available on a process grid "
           "that splits the sphere ({}); use the per-pixel norm (global_layer_norm false) or h = w = 1",
           ctx.grid.str());
  GS_CHECK(dims.noise >= 0 && dims.pos >= 0 && dims.labels >= 0,
           "ConditionalLayerNorm: context dimensions must be >= 0, got noise {}, pos {}, labels {}", dims.noise,
           dims.pos, dims.labels);
  const Init z = Init::zeros();
  if (dims.labels > 0) {
    scale_labels_ = register_module("W_scale_labels",
                                    std::make_shared<Linear>(dims.labels, channels, true, z, z, ctx.child("W_scale_labels")));
    bias_labels_ = register_module("W_bias_labels",
                                   std::make_shared<Linear>(dims.labels, channels, true, z, z, ctx.child("W_bias_labels")));
  }
  if (dims.noise > 0) {
    scale_noise_ = register_module("W_scale_2d",
                                   std::make_shared<Conv1x1>(dims.noise, channels, false, z, z, ctx.child("W_scale_2d")));
    bias_noise_ = register_module("W_bias_2d",
                                  std::make_shared<Conv1x1>(dims.noise, channels, false, z, z, ctx.child("W_bias_2d")));
  }
  if (dims.pos > 0) {
    scale_pos_ = register_module("W_scale_pos",
                                 std::make_shared<Conv1x1>(dims.pos, channels, false, z, z, ctx.child("W_scale_pos")));
    bias_pos_ = register_module("W_bias_pos",
                                std::make_shared<Conv1x1>(dims.pos, channels, false, z, z, ctx.child("W_bias_pos")));
  }
  if (affine) {
    auto n = register_module("norm", std::make_shared<NormAffine>(global ? Shape{channels, nlat, nlon} : Shape{channels},
                                                                  ctx.child("norm")));
    norm_weight_ = n->weight, norm_bias_ = n->bias;
  }
}

Tensor ConditionalLayerNorm::forward(const Tensor& x, const ConditioningInputs& c) const {
  GS_CHECK(x.defined() && x.dim() == 4 && x.size(1) == channels_ && x.size(2) == nlat_ && x.size(3) == nlon_,
           "ConditionalLayerNorm: expected x (B, {}, {}, {}), got {}", channels_, nlat_, nlon_,
           x.meta_str());
  const int64_t B = x.size(0);
  auto need = [&](const Tensor& t, int64_t dim, const char* what, bool field) {
    GS_CHECK(t.defined(), "ConditionalLayerNorm: {} must be provided (its context dimension is {})", what, dim);
    const bool ok = field ? (t.dim() == 4 && t.size(0) == B && t.size(1) == dim && t.size(2) == nlat_ &&
                             t.size(3) == nlon_)
                          : (t.dim() == 2 && t.size(0) == B && t.size(1) == dim);
    GS_CHECK(ok && t.dtype() == x.dtype(), "ConditionalLayerNorm: expected {} of shape {} and dtype {}, got {}", what,
             field ? shape_str({B, dim, nlat_, nlon_}) : shape_str({B, dim}), dtype_name(x.dtype()), t.meta_str());
  };
  // Sums of the conditioning terms: (B, C, H, W) from fields, (B, C, 1, 1) from labels.
  Tensor scale, bias;
  auto accumulate = [](Tensor& acc, const Tensor& term) { acc = acc.defined() ? add(acc, term) : term; };
  if (dims_.noise > 0) {
    need(c.noise, dims_.noise, "the noise", true);
    accumulate(scale, scale_noise_->forward(c.noise));
    accumulate(bias, bias_noise_->forward(c.noise));
  }
  if (dims_.pos > 0) {
    need(c.embedding_pos, dims_.pos, "embedding_pos", true);
    accumulate(scale, scale_pos_->forward(c.embedding_pos));
    accumulate(bias, bias_pos_->forward(c.embedding_pos));
  }
  if (dims_.labels > 0) {
    need(c.labels, dims_.labels, "the labels", false);
    accumulate(scale, reshape(scale_labels_->forward(c.labels), {B, channels_, 1, 1}));
    accumulate(bias, reshape(bias_labels_->forward(c.labels), {B, channels_, 1, 1}));
  }

  const bool affine = norm_weight_.defined();
  if (!global_ && !affine && scale.defined()) {
    // The fused op wants (B, C) or (B, C, H, W) modulations.
    auto full_shape = [&](const Tensor& t) {
      return t.size(2) == 1 && t.size(3) == 1 ? reshape(t, {B, channels_}) : t;
    };
    return sphere::conditional_layer_norm(x, full_shape(scale), full_shape(bias), eps_);
  }
  Tensor xhat;
  if (global_) {
    // LayerNorm over (C, H, W): the channel norm of the field seen as one pixel of C*H*W channels.
    xhat = reshape(sphere::layer_norm_channels(reshape(x, {B, channels_ * nlat_ * nlon_, 1, 1}), {}, {}, eps_),
                   x.sizes());
    if (affine) xhat = add(mul(xhat, use_param(norm_weight_)), use_param(norm_bias_));
  } else {
    xhat = affine ? sphere::layer_norm_channels(x, use_param(norm_weight_), use_param(norm_bias_), eps_)
                  : sphere::layer_norm_channels(x, {}, {}, eps_);
  }
  if (!scale.defined()) return xhat;
  return add(add(xhat, mul(xhat, scale)), bias);  // xhat * (1 + scale) + bias
}

}  // namespace gs::models
