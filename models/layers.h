// Reusable SFNO layers as Modules, built on the differentiable ops of ops/ and ops/sphere/.
// Parameter names and shapes follow PyTorch's modules (nn.Conv2d keeps its (Cout, Cin, 1, 1)
// weight, nn.LayerNorm its normalized_shape) so that state dicts can be exchanged with
// torch-harmonics and ACE; where an op wants another layout the layer reshapes or permutes in
// forward and says so next to the parameter.
//
// Initial values are drawn per parameter from models::param_key(seed, full dotted name), so they
// do not depend on construction order and are equal on every rank (InitContext carries the prefix).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "distributed/distribution.h"
#include "distributed/process_grid.h"
#include "engine/tensor.h"
#include "models/module.h"
#include "ops/gelu_fused.h"
#include "ops/sphere/sht.h"
#include "ops/sphere/spectral_conv.h"

namespace gs::models {

// ---- initialisation

// How a parameter starts: PyTorch's init schemes by name. trunc_normal bounds are absolute
// (torch.nn.init.trunc_normal_: mean 0, [a, b] = [-2, 2] by default).
struct Init {
  enum class Kind { constant, normal, trunc_normal, uniform };
  Kind kind = Kind::constant;
  double p0 = 0.0, p1 = 0.0, p2 = 0.0;  // constant: value; normal: std; trunc_normal: std, a, b; uniform: lo, hi

  static Init constant(double value) { return {Kind::constant, value}; }
  static Init zeros() { return constant(0.0); }
  static Init ones() { return constant(1.0); }
  static Init normal(double std) { return {Kind::normal, std}; }
  static Init trunc_normal(double std, double a = -2.0, double b = 2.0) { return {Kind::trunc_normal, std, a, b}; }
  static Init uniform(double lo, double hi) { return {Kind::uniform, lo, hi}; }
  // PyTorch's default for nn.Conv2d / nn.Linear weights and biases (kaiming_uniform with a = sqrt(5),
  // and the matching bias rule): U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  static Init torch_default(int64_t fan_in);

  // A fresh tensor (no history). Complex dtypes only for normal (E|z|^2 = std^2, as torch.randn).
  Tensor make(const Shape& sizes, RandomKey key, DType dtype) const;
};

// Where a layer's parameters come from: the seed, the dtype, and the dotted prefix of the layer in
// the model ("blocks.0.mlp.fwd.0."), so each parameter's key is param_key(seed, prefix + name); and
// the process grid the layer runs on (a one-process grid by default).
struct InitContext {
  uint64_t seed = 0;
  DType dtype = DType::f32;
  std::string prefix;
  dist::ProcessGrid grid;

  InitContext child(const std::string& name) const { return {seed, dtype, prefix + name + ".", grid}; }
  Tensor make(const std::string& name, const Shape& sizes, const Init& init) const;
  Tensor make(const std::string& name, const Shape& sizes, const Init& init, DType dtype) const;
  // This rank's shard (distribution d over grid) of the whole parameter make() draws: the values a
  // one-process model holds at those indices, on every decomposition.
  Tensor make_shard(const std::string& name, const Shape& whole, const Init& init, const dist::Distribution& d) const;
  Tensor make_shard(const std::string& name, const Shape& whole, const Init& init, const dist::Distribution& d,
                    DType dtype) const;
};

// ---- functional parameter substitution (torch.func.functional_call): within the scope of a
// ParameterSubstitution, layers read the given tensors in place of the named parameters, so a
// gradient can be taken w.r.t. a tensor that is not the parameter itself (gradcheck of a model
// w.r.t. its parameters feeds fresh copies). Per thread; scopes nest (the innermost wins).

// The tensor a forward pass should read for parameter `p`: p itself, or its substitute.
const Tensor& use_param(const Tensor& p);

class ParameterSubstitution {
 public:
  // Each name must be a parameter of `module`, each tensor must have its shape and dtype.
  ParameterSubstitution(const Module& module, const std::map<std::string, Tensor>& by_name);
  ~ParameterSubstitution();
  ParameterSubstitution(const ParameterSubstitution&) = delete;
  ParameterSubstitution& operator=(const ParameterSubstitution&) = delete;

 private:
  std::vector<std::pair<const void*, Tensor>> entries_;
  const ParameterSubstitution* previous_;
  friend const Tensor& use_param(const Tensor& p);
};

// ---- activations, by torch-harmonics' / ACE's names

enum class Activation { gelu, relu, silu, identity };
// "gelu" (nn.GELU: the erf form), "relu", "silu", "identity".
Activation parse_activation(std::string_view name);
std::string_view activation_name(Activation a);
Tensor activate(const Tensor& x, Activation a);

// gelu_fused (the MLP's activation with its first bias folded in) lives in ops/gelu_fused.h.

// ---- containers

// A module that only groups children under names ("fwd" holding "0" and "2", as nn.Sequential).
class ModuleGroup : public Module {
 public:
  explicit ModuleGroup(std::string type_name = "ModuleGroup") : Module(std::move(type_name)) {}
  template <typename M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    return register_module(name, std::move(m));
  }
};

// ---- pointwise layers

// nn.Conv2d(cin, cout, kernel_size=1): weight (Cout, Cin, 1, 1) (torch's layout; conv1x1 reads it
// as (Cout, Cin)), optional bias (Cout).
class Conv1x1 : public Module {
 public:
  Conv1x1(int64_t cin, int64_t cout, bool bias, const Init& weight_init, const Init& bias_init,
          const InitContext& ctx);
  Tensor forward(const Tensor& x) const;  // (B, Cin, H, W) -> (B, Cout, H, W)
  // The convolution without its bias (for a caller that fuses the bias into what follows).
  Tensor forward_without_bias(const Tensor& x) const;
  int64_t in_channels() const { return cin_; }
  int64_t out_channels() const { return cout_; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  int64_t cin_, cout_;
  Tensor weight_, bias_;
};

// nn.Linear(in, out): weight (out, in), optional bias (out). (B, in) -> (B, out).
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias, const Init& weight_init, const Init& bias_init, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;

 private:
  int64_t in_, out_;
  Tensor weight_, bias_;
};

// conv1x1 -> activation -> conv1x1, as torch-harmonics' / ACE's MLP: the two convolutions are
// children "fwd.0" and "fwd.2" (nn.Sequential(fc1, act, fc2)). fc1 always has a bias; with gelu
// it is added inside gelu_fused. The result has the weights' dtype (f32 under bf16 storage).
struct MlpSpec {
  int64_t in = 0, hidden = 0, out = 0;
  Activation act = Activation::gelu;
  bool output_bias = false;
  // bf16 storage: the activations backward keeps (the input, the pre-activation and the hidden
  // activation) are stored in bf16, half the bytes of f32; the products accumulate in f32 and the
  // weights and every gradient stay f32. Only for f32 models with gelu (the fused GELU reads bf16).
  bool bf16_storage = false;
  Init fc1_weight, fc1_bias = Init::zeros(), fc2_weight, fc2_bias = Init::zeros();
};
class Mlp : public Module {
 public:
  Mlp(const MlpSpec& spec, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;
  Activation activation() const { return act_; }
  bool bf16_storage() const { return bf16_storage_; }
  const Conv1x1& fc1() const { return *fc1_; }
  const Conv1x1& fc2() const { return *fc2_; }

 private:
  Activation act_;
  bool bf16_storage_;
  std::shared_ptr<Conv1x1> fc1_, fc2_;
};

// ---- spectral filter

// torch-harmonics' SpectralConvS2: forward SHT, per-degree (Driscoll-Healy) or per-(l, m)
// (diagonal) complex channel mixing, inverse SHT, optional bias. The weight keeps
// torch-harmonics' layout (Cout, Cin, lmax[, mmax]) complex; gs::sphere::spectral_conv wants
// (Cin, Cout, ...), so forward contracts with the permuted view (a copy of the small weight, not
// of the data). The residual is the input, or, when the two transforms live on different grids,
// the input taken through both (isht(sht(x))), as torch-harmonics' scale_residual.
// Coefficients are complex(dtype): c64 for f32 models, c128 for f64.
// On a grid that splits the sphere (ctx.grid) x is this rank's tile, the transforms are the
// distributed ones (distributed/sphere_transforms.h) and the weight is sharded the way the
// coefficients are: degrees (dim 2) over h, and for the diagonal operator orders (dim 3) over w.
class SpectralFilter : public Module {
 public:
  SpectralFilter(const sphere::ShtSpec& forward, const sphere::ShtSpec& inverse, int64_t cin, int64_t cout,
                 sphere::SpectralOperator op, double gain, bool bias, const InitContext& ctx);
  struct Output {
    Tensor y;         // (B, Cout, inverse.nlat, inverse.nlon)
    Tensor residual;  // (B, Cin, inverse.nlat, inverse.nlon)
  };
  Output forward(const Tensor& x) const;  // x (B, Cin, forward.nlat, forward.nlon)
  // forward in parts, for a caller that mixes channels in spectral space (models/sfno.cpp):
  // transform, the forward transform of any number of channels; filter, the channel mixing of
  // Cin channels' coefficients (B, Cin, L, M) into Cout (no bias); output, the rest of forward
  // from them (x is read only when the residual is x itself); synthesize, the inverse transform
  // of any number of channels.
  struct Spectra {
    Tensor coeffs, filtered;
  };
  Tensor transform(const Tensor& x) const;
  Tensor filter(const Tensor& coeffs) const;
  Spectra analyse(const Tensor& x) const { return spectra(transform(x)); }
  Spectra spectra(Tensor coeffs) const;
  Output output(const Spectra& s, const Tensor& x) const;
  Tensor synthesize(const Tensor& coeffs) const;
  // Whether the residual is isht(sht(x)) (the transforms' grids differ) rather than x.
  bool scales_residual() const { return scale_residual_; }
  const Tensor& bias() const { return bias_; }  // (1, Cout, 1, 1) or undefined
  const sphere::ShtSpec& forward_spec() const { return fwd_; }
  const sphere::ShtSpec& inverse_spec() const { return inv_; }

 private:
  sphere::ShtSpec fwd_, inv_;
  dist::ProcessGrid grid_;
  int64_t cin_, cout_;
  sphere::SpectralOperator op_;
  bool scale_residual_;
  Tensor weight_, bias_;
};

// A 1x1 convolution of spectral coefficients: coeffs (B, Cin, L, M) complex, weight (Cout, Cin)
// real -> (B, Cout, L, M). The transforms act on each channel alike, so
// conv1x1(isht(c), w) == isht(mix_coefficients(c, w)) up to rounding, on far fewer points.
Tensor mix_coefficients(const Tensor& coeffs, const Tensor& weight);

// ---- normalisations

// torch-harmonics' block norms (normalization_layer):
//   layer_norm:    nn.LayerNorm((H, W), eps): each (b, c) normalised over the grid, affine weight and
//                  bias of shape (H, W) (not per channel: that is torch-harmonics' choice);
//   instance_norm: nn.InstanceNorm2d(C, eps, affine=True): the same statistics, affine per channel (C);
//   none:          identity (no parameters).
// Both use the uniform mean over the H*W points (instance_norm_sphere without quadrature weights).
// On a split sphere (ctx.grid) the statistics are global (dist::instance_norm) and the layer
// norm's (H, W) weight and bias are sharded: rows over h, columns over w.
enum class NormKind { none, layer_norm, instance_norm };
NormKind parse_norm_kind(std::string_view name);  // "none", "layer_norm", "instance_norm"

class GridNorm : public Module {
 public:
  GridNorm(NormKind kind, int64_t channels, int64_t nlat, int64_t nlon, double eps, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;
  NormKind kind() const { return kind_; }

 private:
  NormKind kind_;
  int64_t nlat_, nlon_;
  dist::ProcessGrid grid_;
  double eps_;
  Tensor weight_, bias_;
};

// A pole-aware 3x3 convolution (sphere::local_conv3x3; nn.Conv2d(cin, cout, 3, padding=1) away
// from the poles) on an (nlat, nlon) grid, nlon even: weight (Cout, Cin, 3, 3), bias (Cout),
// PyTorch's default initialisation. On a split sphere it reads its neighbours through the halo
// exchange (dist::local_conv3x3).
class LocalConv3x3 : public Module {
 public:
  LocalConv3x3(int64_t cin, int64_t cout, int64_t nlat, int64_t nlon, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;  // (B, Cin, rows, cols) -> (B, Cout, rows, cols)

 private:
  int64_t nlat_, nlon_;
  dist::ProcessGrid grid_;
  Tensor weight_, bias_;
};

// LayerNorm over the channel dim per grid point (torch-harmonics' LayerNorm wrapper, ACE's
// ChannelLayerNorm), with optional affine weight and bias (C).
class ChannelLayerNorm : public Module {
 public:
  ChannelLayerNorm(int64_t channels, double eps, bool affine, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;

 private:
  double eps_;
  Tensor weight_, bias_;
};

// ---- position embeddings (torch-harmonics' pos_embed), added to a (B, C, H, W) field:
//   sequence:         sinusoids of the flat grid index, sin for even channels, cos for odd (a constant buffer);
//   spectral:         channel i is the real spherical harmonic of degree floor(sqrt(i)) and order
//                     i - l^2 - l (negative: the sine part), normalised to max |.| = 1 (a constant buffer);
//   learnable lat:    a parameter (1, C, H, 1), zeros;
//   learnable latlon: a parameter (1, C, H, W), zeros.
// Always named "position_embeddings". torch's state dict also lists the sequence and spectral
// buffers (persistent buffers); here constant buffers are rebuilt from the options instead, so
// drop those two keys when loading a torch state dict.
// On a split sphere (ctx.grid) each rank holds its tile: learnable lat sharded along dim 2 over h,
// learnable latlon also along dim 3 over w; the constant tables are cut to the tile.
enum class PosEmbedKind { none, sequence, spectral, learnable_lat, learnable_latlon };
PosEmbedKind parse_pos_embed(std::string_view name);  // "none", "sequence", "spectral", "learnable lat", "learnable latlon"

class PositionEmbedding : public Module {
 public:
  PositionEmbedding(PosEmbedKind kind, int64_t channels, sphere::GridKind grid, int64_t nlat, int64_t nlon,
                    const InitContext& ctx);
  Tensor forward(const Tensor& x) const;  // x + position_embeddings

 private:
  Tensor table_;  // the parameter or the buffer
};

// ---- ACE's conditional layer norm (fme conditional_sfno ConditionalLayerNorm, no scalar
// embedding): LayerNorm without affine (over channels, or over (C, H, W) when global), then
//   y = xhat * scale + bias,  scale = 1 + W_scale_2d(noise) + W_scale_pos(pos) + W_scale_labels(labels),
//                             bias  =     W_bias_2d(noise)  + W_bias_pos(pos)  + W_bias_labels(labels),
// each term present when its context dimension is > 0: W_*_2d and W_*_pos are 1x1 convolutions
// without bias, W_*_labels are linear maps with bias. All start at zero (ACE's reset_parameters),
// so a fresh layer is a plain layer norm. With `affine`, the norm's own weight and bias follow
// (ACE's elementwise_affine: (C) per channel, (C, H, W) when global), before the modulation.
// On a split sphere (ctx.grid) the per-pixel norm works on this rank's tile unchanged; the global
// variant (statistics over (C, H, W)) is refused there.
struct ContextDims {
  int64_t noise = 0;   // channels of the noise field (B, noise, H, W)
  int64_t pos = 0;     // channels of the position embedding (B, pos, H, W)
  int64_t labels = 0;  // width of the labels (B, labels)
};
struct ConditioningInputs {
  Tensor noise;          // (B, noise, H, W) or undefined
  Tensor embedding_pos;  // (B, pos, H, W) or undefined
  Tensor labels;         // (B, labels) or undefined
};
class ConditionalLayerNorm : public Module {
 public:
  // nlat, nlon: the whole sphere's; x and the context fields are this rank's tiles.
  ConditionalLayerNorm(int64_t channels, int64_t nlat, int64_t nlon, const ContextDims& dims, bool global,
                       double eps, bool affine, const InitContext& ctx);
  Tensor forward(const Tensor& x, const ConditioningInputs& c) const;

 private:
  int64_t channels_, nlat_, nlon_;
  ContextDims dims_;
  bool global_;
  double eps_;
  std::shared_ptr<Linear> scale_labels_, bias_labels_;
  std::shared_ptr<Conv1x1> scale_noise_, bias_noise_, scale_pos_, bias_pos_;
  Tensor norm_weight_, norm_bias_;
};

}  // namespace gs::models
