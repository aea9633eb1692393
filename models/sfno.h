// SFNO: torch-harmonics' example SphericalFourierNeuralOperator (torch_harmonics/examples/models/
// sfno.py, v0.9.3), with its hyper-parameters, defaults, initialisation and state-dict names:
//
//   x (B, in_chans, H, W) -> [residual] -> encoder (1x1) -> pos_embed -> blocks -> decoder (1x1)
//     [+ residual_projection(x) when residual_prediction]
//   block i: (y, r) = global_conv(x)      spectral filter; block 0 analyses on the input grid and
//            y = norm(y)                  block num_layers-1 synthesises on it, the others work on
//            y += inner_skip(r)           the internal grid (h, w) = ((H-1)/scale_factor + 1,
//            y = mlp(y)                   W/scale_factor) of kind grid_internal; r is the input, or
//            y += outer_skip(r)           the input taken through both transforms when they differ
//   modes: lmax = mmax = int(min(h, w/2) * hard_thresholding_fraction) on every transform.
//
// State dict (torch-harmonics' names and shapes; C = embed_dim, L = lmax, M = mmax, hid = int(C*mlp_ratio)):
//   encoder.0.weight (C, in_chans, 1, 1) [encoder.0.bias (C) with bias]
//   pos_embed.position_embeddings (1, C, H, 1) "learnable lat" | (1, C, H, W) "learnable latlon"
//   blocks.i.global_conv.weight (C, C, L) complex (diagonal: (C, C, L, M)) [.bias (1, C, 1, 1) with bias]
//     layout note: torch-harmonics' (Cout, Cin, ...), kept as is; gs::sphere::spectral_conv takes
//     (Cin, Cout, ...), so SpectralFilter::forward contracts with permute({1, 0, 2[, 3]}) of it.
//   blocks.i.norm.weight / .bias ((h, w), or (H, W) in the last block) layer_norm | (C) instance_norm
//   blocks.i.inner_skip.weight (C, C, 1, 1), .bias (C)   inner_skip "linear"
//   blocks.i.mlp.fwd.0.weight (hid, C, 1, 1), .bias (hid); blocks.i.mlp.fwd.2.weight (C, hid, 1, 1)   use_mlp
//   blocks.i.outer_skip.weight (C, C, 1, 1), .bias (C)   outer_skip "linear"
//   decoder.0.weight (out_chans, C [+ in_chans with big_skip], 1, 1) [decoder.0.bias]
//   residual_projection.weight (out_chans, in_chans, 1, 1)   residual_prediction and in_chans != out_chans
// Complex weights are c64 in f32 models (torch.complex64) and c128 in f64 models.
// torch-harmonics also stores the "sequence" / "spectral" position tables as persistent buffers;
// here they are constant buffers rebuilt from the options (not in state_dict()).
//
// Choices where torch-harmonics' example is silent or loose:
//   - encoder_layers: torch-harmonics 0.9.3 builds a one-layer encoder and decoder whatever it is
//     given; any other value is an error here rather than silently ignored.
//   - big_skip (default false; absent from 0.9.3, present in earlier torch-harmonics): the input is
//     concatenated to the decoder's input, as ACE does.
//   - inner_skip ("none") / outer_skip ("identity") and operator_type ("driscoll-healy") are the
//     block's and SpectralConvS2's defaults, which the 0.9.3 net does not expose; exposed here.
//   - Dropout as torch-harmonics places it, in train mode only (Module::train / eval): drop_rate is
//     nn.Dropout on the embedded input (pos_drop, after the position embedding) and nn.Dropout2d (one
//     decision per sample and channel) after the MLP's activation and after its output layer; with
//     drop_rate > 0 the MLP's output layer is blocks.i.mlp.fwd.3 (torch's Sequential(fc1, act, drop,
//     fc2, drop)), not .2, so state dicts stay exchangeable with torch-harmonics'. drop_path_rate is
//     stochastic depth on the block's MLP branch before the outer skip, block i at rate
//     linspace(0, drop_path_rate, num_layers)[i] (computed in the model's dtype, as torch does).
//     Masks are ops/dropout.h's, keyed by sfno_dropout_key(ctx.noise_key, site) and the GLOBAL
//     sample (ctx.first_sample), so a split batch or sphere drops what one process drops.
//   - The transforms use gs::sphere's ortho SHT; a truncation beyond what a grid's quadrature
//     resolves (e.g. equiangular with scale_factor 1) is refused by make_sht_spec, where
//     torch-harmonics would run with an inexact quadrature.
//   - inner_skip / outer_skip "local3x3" (gradsphere's local variant): a pole-aware 3x3
//     convolution with bias of the residual (LocalConv3x3; blocks.i.inner_skip.weight (C, C, 3, 3),
//     .bias (C)); needs an even nlon on the grid it runs on.
//   - On a ProcessGrid that splits the sphere (h * w > 1) forward takes and returns this rank's
//     tile; the transforms, norms, local convolutions and position embeddings are the distributed
//     ones, parameters split with the coefficients or the grid declare their Distribution
//     (layers.h), and the result equals one process's.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/process_grid.h"
#include "models/layers.h"
#include "models/module.h"

namespace gs::models {

struct SfnoOptions {
  // torch-harmonics' SphericalFourierNeuralOperator arguments and defaults
  std::array<int64_t, 2> img_size{128, 256};  // (nlat, nlon) of the input and output
  std::string grid = "equiangular";
  std::string grid_internal = "legendre-gauss";
  int64_t scale_factor = 3;
  int64_t in_chans = 3;
  int64_t out_chans = 3;
  int64_t embed_dim = 256;
  int64_t num_layers = 4;
  std::string activation_function = "gelu";  // gelu, relu, identity
  int64_t encoder_layers = 1;
  bool use_mlp = true;
  double mlp_ratio = 2.0;
  // gradsphere: the MLP keeps its saved activations in bf16 (MlpSpec::bf16_storage; f32 models only).
  // The transforms, norms and skips stay in the model's dtype.
  bool mlp_bf16_storage = false;
  double drop_rate = 0.0;
  double drop_path_rate = 0.0;
  std::string normalization_layer = "none";  // none, layer_norm, instance_norm
  double hard_thresholding_fraction = 1.0;
  bool residual_prediction = false;
  std::string pos_embed = "none";  // none, sequence, spectral, learnable lat, learnable latlon
  bool bias = false;
  // block-level settings of torch-harmonics that its net leaves at their defaults
  std::string inner_skip = "none";      // none, linear, identity, local3x3
  std::string outer_skip = "identity";  // none, linear, identity, local3x3
  std::string operator_type = "driscoll-healy";  // driscoll-healy, diagonal
  bool big_skip = false;
  // gradsphere
  DType dtype = DType::f32;  // f64 for gradcheck
  uint64_t seed = 0;
  // Fold the encoder into the first block's coefficients and the decoder into the last block
  // where they allow it (models/NOTES.md, "The encoder and decoder folded into the blocks"): the
  // same model up to rounding, with the products and transforms on the full grid replaced by
  // spectral ones and Cout-row ones. false: the plain form.
  bool fold_encoder_decoder = true;
};

class SfnoBlock;

// Whether an SFNO with these options folds its encoder into the first block's coefficients, and
// its decoder into the last block (SfnoOptions::fold_encoder_decoder, where the maps between are
// linear; models/NOTES.md). The grid planner counts the folded form's work by them.
bool sfno_folds_encoder(const SfnoOptions& o);
bool sfno_folds_decoder(const SfnoOptions& o);

class SFNO : public Model {
 public:
  explicit SFNO(const SfnoOptions& options, const dist::ProcessGrid& grid = {});
  ~SFNO() override;

  // x (B, in_chans, H, W) -> (B, out_chans, H, W). In train mode with drop rates > 0, ctx.noise_key
  // and ctx.first_sample key the dropout masks; otherwise ctx is unused (labels are an error).
  Tensor forward(const Tensor& x, const ForwardContext& ctx = {}) override;

  const SfnoOptions& options() const { return opt_; }
  const dist::ProcessGrid& process_grid() const { return pgrid_; }
  std::array<int64_t, 2> grid_shape() const override { return opt_.img_size; }
  // The internal grid (h, w) and the number of modes (lmax = mmax) of every transform.
  int64_t internal_nlat() const { return h_; }
  int64_t internal_nlon() const { return w_; }
  int64_t modes() const { return modes_; }
  // The transforms: on the input grid (first block analyses, last synthesises) and the internal one.
  const sphere::ShtSpec& input_spec() const { return spec_img_; }
  const sphere::ShtSpec& internal_spec() const { return spec_int_; }
  // Block i's stochastic-depth rate: torch's linspace(0, drop_path_rate, num_layers)[i].
  const std::vector<double>& drop_path_rates() const { return drop_path_rates_; }

 private:
  SfnoOptions opt_;
  dist::ProcessGrid pgrid_;
  int64_t h_ = 0, w_ = 0, modes_ = 0;
  sphere::ShtSpec spec_img_, spec_int_;
  std::shared_ptr<Conv1x1> encoder_, decoder_, residual_projection_;
  std::shared_ptr<PositionEmbedding> pos_embed_;
  std::vector<std::shared_ptr<SfnoBlock>> blocks_;
  Tensor encoded_coefficients(const Tensor& x) const;
  Tensor decoder_columns(int64_t first, int64_t count) const;
  std::vector<double> drop_path_rates_;
  bool fold_encoder_ = false, fold_decoder_ = false;  // sfno_folds_encoder / _decoder of the options
};

// The key of dropout site `site` ("pos_drop", "blocks.<i>.mlp.fwd.2" and "blocks.<i>.mlp.fwd.4" for
// the MLP's two, "blocks.<i>.drop_path": torch-harmonics' module names) in a forward pass under
// `noise_key` (the stepper's: a function of seed, step, rollout step and member): the noise key's
// stream XOR the FNV-1a hash of the site's name (param_key), as the noise models derive sub-streams.
RandomKey sfno_dropout_key(RandomKey noise_key, const std::string& site);

}  // namespace gs::models
