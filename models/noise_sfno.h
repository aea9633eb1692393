// NoiseConditionedSFNO: ACE's stochastic SFNO (ai2cm/ace: fme/ace/registry NoiseConditionedSFNOBuilder,
// NoiseConditionedSFNO, and fme/core/models/conditional_sfno sfnonet.py / layers.py / s2convolutions.py).
//
// A conditional SFNO whose layer norms are modulated by a context: a noise field drawn anew on
// every forward pass (so repeated calls give an ensemble), optionally a learned position embedding
// (context_pos_embed_dim) and labels (n_labels). The wrapper draws the noise with gs::randn keyed
// by ForwardContext::noise_key, so a resumed run draws exactly the noise of an uninterrupted one.
//
//   noise (B, noise_embed_dim, H, W): "gaussian" N(0, 1) per point, or "isotropic": random
//     coefficients a_lm (m = 0 real N(0, 1); m > 0 real and imaginary parts N(0, 1/2)) times
//     sqrt(4 pi) / lmax, through the inverse SHT on the data grid (unit variance per point).
//   conditional model, as ACE's SphericalFourierNeuralOperatorNet (scale_factor 1):
//     [big skip r = x, or isht(sht(x)) with filter_residual]
//     x -> encoder -> + pos_embed -> blocks -> [cat r] -> decoder -> [isht(sht(.)) with filter_output]
//     block: n = norm0(x, ctx); (y, r) = filter(n); y = act(y + inner_skip(r)); y = norm1(y, ctx);
//            y = mlp(y); y = y + r
//     filter: Driscoll-Healy spectral convolution with bias; r is its input, or the input taken
//     through both transforms when they differ (data grid != legendre-gauss) or with filter_residual.
//
// State dict (ACE's names; C = embed_dim, E = noise_embed_dim, P = context_pos_embed_dim,
// N = n_labels, L = lmax, G = filter_num_groups, hid = int(C * mlp_ratio)):
//   pos_embed (1, P, H, W), label_pos_embed (N, P, H, W)                   P > 0 (N > 0)
//   conditional_model.encoder.{2k}.weight (C, in_or_C, 1, 1), .bias (C)  k < encoder_layers
//   conditional_model.encoder.{2*encoder_layers}.weight (C, C, 1, 1)
//   conditional_model.pos_embed (1, C, H, W)                               pos_embed
//   conditional_model.blocks.i.norm{0,1}.W_scale_2d.weight / W_bias_2d.weight (C, E, 1, 1)       E > 0
//   conditional_model.blocks.i.norm{0,1}.W_scale_pos.weight / W_bias_pos.weight (C, P, 1, 1)     P > 0
//   conditional_model.blocks.i.norm{0,1}.W_scale_labels.{weight (C, N), bias (C)}, W_bias_labels  N > 0
//   conditional_model.blocks.i.norm{0,1}.norm.weight / .bias (C) or (C, H, W) global            affine_norms
//   conditional_model.blocks.i.filter.filter.weight (G, L, C/G, C/G, 2) real (re, im) pairs
//     layout note: ACE's current layout (groups, lmax, Cout, Cin); gs::sphere::spectral_conv_dh
//     takes complex (Cin, Cout, L), so forward contracts, per group, with
//     permute(view_as_complex(weight)[g], {2, 1, 0}).
//   conditional_model.blocks.i.filter.filter.bias (1, C, 1, 1)
//   conditional_model.blocks.i.inner_skip.weight (C, C, 1, 1), .bias (C)
//   conditional_model.blocks.i.mlp.fwd.0.{weight (hid, C, 1, 1), bias}, mlp.fwd.2.{weight (C, hid, 1, 1), bias}
//   conditional_model.decoder.{2k}.weight (C, C [+ in_chans for k = 0 with big_skip], 1, 1), .bias (C)
//   conditional_model.decoder.{2*encoder_layers}.weight (out_chans, C, 1, 1)
// f32 models hold f32 parameters (the spectral weight as real pairs, as ACE), f64 models f64.
//
// Initialisation as ACE: every 1x1 convolution and linear map trunc_normal(std 0.02, [-2, 2]) with
// zero bias, then the conditional norms' maps reset to zero (a fresh model ignores its context);
// spectral weights N(0, 1/C) per real component (times sqrt 2 at l = 0); position embeddings
// trunc_normal(std 0.02).
//
// Choices:
//   - lmax = int(H * hard_thresholding_fraction), mmax = min(int((W/2 + 1) * h.t.f.), lmax): ACE
//     asks for mmax = W/2 + 1, beyond lmax on its usual 2:1 grids; the orders m >= lmax hold only
//     coefficients with l < m, which are zero, so clamping changes no output (and no parameter:
//     Driscoll-Healy weights are per degree). gs::sphere's truncation rules refuse mmax > lmax.
//   - An equiangular data grid needs lmax <= (H + 1) / 2 (its quadrature's limit; ACE runs with
//     lmax = H and an inexact quadrature): use hard_thresholding_fraction <= 0.5 there.
//   - Unsupported builder settings are errors: operator_type other than "dhconv", filter_type other
//     than "linear", residual_filter_factor != 1, context_pos_embed_dim > 0 together with pos_embed.
//   - On a ProcessGrid that splits the sphere forward takes this rank's tile; the transforms are
//     the distributed ones, the noise is drawn by global index (gaussian: the tile of the
//     one-process field; isotropic: the block of its coefficients through the distributed inverse
//     SHT), the spectral weights are split over h by degree and the position embeddings by tile.
//     global_layer_norm is refused there.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "distributed/process_grid.h"
#include "models/layers.h"
#include "models/module.h"

namespace gs::models {

struct NoiseSfnoOptions {
  // from the dataset (ACE's build(n_in_channels, n_out_channels, dataset_info))
  std::array<int64_t, 2> img_shape{180, 360};
  int64_t in_chans = 1;
  int64_t out_chans = 1;
  int64_t n_labels = 0;  // len(dataset_info.all_labels)
  // ACE's NoiseConditionedSFNOBuilder fields and defaults
  std::string filter_type = "linear";
  std::string operator_type = "dhconv";
  int64_t residual_filter_factor = 1;
  int64_t embed_dim = 256;
  int64_t noise_embed_dim = 256;
  int64_t context_pos_embed_dim = 0;
  std::string noise_type = "gaussian";  // gaussian, isotropic
  bool global_layer_norm = false;
  int64_t num_layers = 12;
  bool use_mlp = true;
  double mlp_ratio = 2.0;
  // gradsphere: the MLP keeps its saved activations in bf16 (MlpSpec::bf16_storage; f32 models only).
  // The transforms, norms and skips stay in the model's dtype.
  bool mlp_bf16_storage = false;
  std::string activation_function = "gelu";  // gelu, relu, silu
  int64_t encoder_layers = 1;
  bool pos_embed = true;
  bool big_skip = true;
  std::string data_grid = "legendre-gauss";  // legendre-gauss, equiangular
  bool filter_residual = false;
  bool filter_output = false;
  bool affine_norms = false;
  int64_t filter_num_groups = 1;
  // read by ACE's get_lat_lon_sfnonet when present (default 1)
  double hard_thresholding_fraction = 1.0;
  // gradsphere
  DType dtype = DType::f32;
  uint64_t seed = 0;
};

class ConditionalSFNO;

class NoiseConditionedSFNO : public Model {
 public:
  explicit NoiseConditionedSFNO(const NoiseSfnoOptions& options, const dist::ProcessGrid& grid = {});
  ~NoiseConditionedSFNO() override;

  // x (B, in_chans, H, W) -> (B, out_chans, H, W), with noise drawn under ctx.noise_key and
  // ctx.labels (B, n_labels) when n_labels > 0.
  Tensor forward(const Tensor& x, const ForwardContext& ctx = {}) override;
  // The same with a given noise field (B, noise_embed_dim, H, W) (undefined when noise_embed_dim is 0).
  // checkpoint_blocks: each block under gs::checkpoint (ForwardContext::checkpoint_blocks).
  Tensor forward_with_noise(const Tensor& x, const Tensor& noise, const Tensor& labels = {},
                            bool checkpoint_blocks = false);
  // The noise forward() draws for `batch` fields under `key`: (batch, noise_embed_dim, H, W), no
  // history (this rank's tile on a split sphere), for global samples first_sample onwards.
  Tensor make_noise(int64_t batch, RandomKey key, int64_t first_sample = 0) const;

  const NoiseSfnoOptions& options() const { return opt_; }
  const dist::ProcessGrid& process_grid() const { return pgrid_; }
  std::array<int64_t, 2> grid_shape() const override { return opt_.img_shape; }
  // The transform on the data grid (the isotropic noise, filter_residual, filter_output) and the
  // internal legendre-gauss one.
  const sphere::ShtSpec& data_spec() const;
  const sphere::ShtSpec& internal_spec() const;

 private:
  NoiseSfnoOptions opt_;
  dist::ProcessGrid pgrid_;
  std::shared_ptr<ConditionalSFNO> model_;
  Tensor pos_embed_, label_pos_embed_;
};

}  // namespace gs::models
