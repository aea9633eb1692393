// The parity suite of spatial model parallelism: on every grid of the world (data x h x w), each
// net trained through the stepper equals the one-process net on the global batch. Every rank builds
// the one-process net too (a one-process grid, no communication), runs the global batch through it,
// and compares its own part: the tile of the outputs and input gradients, the shard of every raw
// parameter gradient after the reducer and of every weight after 3 SGD and then 3 Adam steps, and
// the losses. Relative errors (largest difference over the largest value of the whole tensor): 1e-12 in
// f64, 1e-5 in f32. Nets: SFNO (instance norm, learnable lat-lon embedding, scaled residual across
// grids), SFNO with local 3x3 skips (layer norm over the grid, sequence embedding, diagonal
// operator), NoiseConditionedSFNO with gaussian and with isotropic noise; on an equiangular
// 9x18 and a legendre-gauss 17x32 grid; 2- and 3-step rollouts.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "distributed/shards.h"
#include "distributed/sphere_blocks.h"
#include "engine/autograd/engine.h"
#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "models/noise_sfno.h"
#include "models/optim.h"
#include "models/sfno.h"
#include "models/stepper.h"
#include "ops/ops.h"
#include "ops/sphere/grids.h"
#include "ops/sphere/sfno_blocks.h"
#include "tests/distributed/dist_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::models;
using dist::ProcessGrid;

namespace {

enum class Net { sfno, sfno_local, sfno_folded, noise_gaussian, noise_isotropic };
const char* net_name(Net n) {
  switch (n) {
    case Net::sfno: return "SFNO";
    case Net::sfno_local: return "SFNO local3x3";
    case Net::sfno_folded: return "SFNO folded";
    case Net::noise_gaussian: return "NoiseConditionedSFNO gaussian";
    case Net::noise_isotropic: return "NoiseConditionedSFNO isotropic";
  }
  return "?";
}

struct Case {
  Net net;
  std::string grid;
  int64_t nlat, nlon;
  DType dtype;
  int64_t steps;     // rollout steps
  int64_t embed = 4;
  int64_t per_replica = 2;  // samples per data replica (-1: `global` samples in all, which D must divide)
  int64_t global = 0;
  std::string label() const {
    return fmt::format("{} on {} {}x{}, {}, {}-step rollout", net_name(net), grid, nlat, nlon, dtype_name(dtype), steps);
  }
};

constexpr int64_t kChans = 2;

std::shared_ptr<Model> make_net(const Case& c, const ProcessGrid& g) {
  const bool equiangular = c.grid == "equiangular";
  if (c.net == Net::sfno || c.net == Net::sfno_local || c.net == Net::sfno_folded) {
    SfnoOptions o;
    o.img_size = {c.nlat, c.nlon};
    o.grid = c.grid;
    o.in_chans = o.out_chans = kChans;
    o.embed_dim = c.embed;
    o.num_layers = 2;
    o.dtype = c.dtype;
    o.seed = 5;
    if (c.net == Net::sfno) {
      // Internal legendre-gauss grid of ((H - 1) / 2 + 1) x W/2 (odd nlon on 9x18): a scaled residual.
      o.scale_factor = 2;
      o.normalization_layer = "instance_norm";
      o.pos_embed = "learnable latlon";
      o.inner_skip = "linear";
      // Dropout on (the nets train in train mode): masks keyed by global sample and global grid
      // index, on the input grid (pos_drop) and the internal one (the MLP's, drop path).
      o.drop_rate = 0.2;
      o.drop_path_rate = 0.3;
    } else if (c.net == Net::sfno_folded) {
      // torch-harmonics' block defaults, so the encoder and decoder are folded into the end blocks
      // (SfnoOptions::fold_encoder_decoder): coefficient products on each rank's block, the
      // encoder's bias through a constant field's coefficients, big_skip's slice of the decoder.
      o.scale_factor = 2;
      o.bias = true;
      o.big_skip = true;
    } else {
      o.scale_factor = 1;
      o.hard_thresholding_fraction = equiangular ? 0.5 : 0.25;
      o.normalization_layer = "layer_norm";
      o.pos_embed = "sequence";
      o.inner_skip = "local3x3";
      o.outer_skip = "local3x3";
      o.operator_type = "diagonal";
      // (no bias: the spectral filter's bias sits before a norm over the grid, which removes any
      // per-channel constant, so its gradient is zero up to rounding: noise Adam would amplify)
    }
    return std::make_shared<SFNO>(o, g);
  }
  NoiseSfnoOptions o;
  o.img_shape = {c.nlat, c.nlon};
  o.data_grid = c.grid;
  o.hard_thresholding_fraction = equiangular ? 0.5 : 0.25;
  o.in_chans = o.out_chans = kChans;
  o.embed_dim = c.embed;
  o.noise_embed_dim = 2;
  o.num_layers = 2;
  o.dtype = c.dtype;
  o.seed = 6;
  if (c.net == Net::noise_gaussian) {
    o.noise_type = "gaussian";
    o.pos_embed = false;
    o.context_pos_embed_dim = 2;
    o.affine_norms = true;
    o.filter_residual = true;
  } else {
    o.noise_type = "isotropic";
    o.filter_output = true;
  }
  return std::make_shared<NoiseConditionedSFNO>(o, g);
}

// The elements as doubles (complex: real and imaginary parts).
std::vector<double> flat_values(const Tensor& t) {
  const bool cplx = is_complex(t.dtype());
  const Tensor c = cast_copy(t.detach(), cplx ? DType::c128 : DType::f64);
  const double* p = static_cast<const double*>(c.raw_data());
  return std::vector<double>(p, p + c.numel() * (cplx ? 2 : 1));
}
double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : flat_values(t)) m = std::max(m, std::abs(v));
  return m;
}

// max |a - b| over the elements, relative to `scale` (by default max |b|). A rank's part of a
// tensor is compared relative to the whole tensor's largest value: a shard can hold only entries
// whose true value is 0 (the degree-0 spectral weights before a norm that removes the mean), which
// are rounding noise on both sides.
double rel_err(const Tensor& a, const Tensor& b, double scale = -1) {
  REQUIRE(a.sizes() == b.sizes());
  const std::vector<double> va = flat_values(a), vb = flat_values(b);
  double num = 0, den = scale;
  if (den < 0) den = max_abs(b);
  for (size_t i = 0; i < va.size(); ++i) num = std::max(num, std::abs(va[i] - vb[i]));
  return den == 0 ? num : num / den;
}

double tolerance(DType d) { return d == DType::f64 ? 1e-12 : 1e-5; }

// This rank's samples and tile of a global (B, ..., H, W) tensor.
Tensor part_of(const Tensor& whole, const ProcessGrid& g) {
  const dist::Block s = dist::split_block(whole.size(0), g.data_size(), g.data_rank());
  const dist::Block r = g.local_lat(whole.size(-2)), c = g.local_lon(whole.size(-1));
  return contiguous(narrow(narrow(narrow(whole, 0, s.start, s.count), -2, r.start, r.count), -1, c.start, c.count));
}

// Every parameter moved off its initial value (conditional norms start at zero, which would hide
// their paths), the same values on both nets: the distributed one gets its shard of each.
void randomize_alike(Model& ref, Model& dm, const ProcessGrid& g, uint64_t seed) {
  NoGradGuard ng;
  auto pr = ref.named_parameters(), pd = dm.named_parameters();
  REQUIRE(pr.size() == pd.size());
  uint64_t s = 0;
  for (size_t i = 0; i < pr.size(); ++i) {
    REQUIRE(pr[i].name == pd[i].name);
    // Initial values: the shard of the one-process parameter, exactly.
    CHECK(rel_err(pd[i].tensor, dist::local_shard(pr[i].tensor, pd[i].distribution, g)) == 0.0);
    copy_values(pr[i].tensor, add(pr[i].tensor, init_normal(pr[i].tensor.sizes(), 0.1, {seed, s++}, pr[i].tensor.dtype())));
    copy_values(pd[i].tensor, dist::local_shard(pr[i].tensor, pd[i].distribution, g));
  }
}

void check_parameters(const Model& ref, const Model& dm, const ProcessGrid& g, DType dt, bool grads, const char* when) {
  auto pr = ref.named_parameters(), pd = dm.named_parameters();
  for (size_t i = 0; i < pr.size(); ++i) {
    CAPTURE(std::string(when));
    CAPTURE(pr[i].name);
    const Tensor a = grads ? pd[i].tensor.grad() : pd[i].tensor, b = grads ? pr[i].tensor.grad() : pr[i].tensor;
    REQUIRE(a.defined() == b.defined());
    if (a.defined()) CHECK(rel_err(a, dist::local_shard(b, pd[i].distribution, g), max_abs(b)) <= tolerance(dt));
  }
}

std::vector<double> area_weights_for(const Case& c) {
  return sphere::make_quadrature(sphere::parse_grid_kind(c.grid), c.nlat).weights;
}

void run_parity(const Case& c, const ProcessGrid& g) {
  CAPTURE(c.label());
  const int64_t D = g.data_size();
  const int64_t B = c.global > 0 ? c.global : c.per_replica * D;
  if (B % D != 0) return;  // unequal shares are refused (tested below)
  auto ref = make_net(c, ProcessGrid()), dm = make_net(c, g);
  randomize_alike(*ref, *dm, g, 77);  // std 0.1 on every parameter
  const std::vector<double> aw = area_weights_for(c);
  auto batch = [&](uint64_t k) {
    Tensor x = randn({B, kChans, c.nlat, c.nlon}, {31, k}, c.dtype);
    Tensor t = randn({B, c.steps, kChans, c.nlat, c.nlon}, {32, k}, c.dtype);
    return std::pair<Batch, Batch>{Batch{x, t}, Batch{part_of(x, g), part_of(t, g)}};
  };
  const double tol = tolerance(c.dtype);

  // Forward, the loss and the input gradient.
  {
    auto [whole, mine] = batch(0);
    // This replica's samples start at data_rank * B / D: the noise is drawn per global sample.
    const ForwardContext ctx_r{RandomKey{9, 9}, {}, 0}, ctx_d{RandomKey{9, 9}, {}, g.data_rank() * (B / D)};
    Tensor xr = clone(whole.input), xd = clone(mine.input);
    xr.set_requires_grad(), xd.set_requires_grad();
    const Tensor yr = ref->forward(xr, ctx_r), yd = dm->forward(xd, ctx_d);
    CHECK(rel_err(yd, part_of(yr, g), max_abs(yr)) <= tol);
    const Tensor lr = sphere::area_weighted_mse(yr, select(whole.targets, 1, 0), aw);
    const Tensor ld = dist::area_weighted_mse(yd, select(mine.targets, 1, 0), aw, c.nlon, g);
    REQUIRE(std::isfinite(lr.item<double>()));
    // The replica's loss is its share's mean: the global loss is the replicas' mean.
    Tensor lsum = cast_copy(ld.detach(), DType::f64);
    g.comm(dist::Group::data)->all_reduce(lsum, dist::ReduceOp::sum);
    CHECK(std::abs(lsum.item<double>() / D - lr.item<double>()) <= tol * std::abs(lr.item<double>()));
    const Tensor gr = grad({lr}, {xr})[0], gd = grad({ld}, {xd})[0];
    CHECK(rel_err(mul(gd, 1.0 / static_cast<double>(D)), part_of(gr, g), max_abs(gr)) <= tol);
  }

  // The stepper: raw gradients after the reducer, then 3 SGD steps and 3 Adam steps.
  auto train = [&](std::shared_ptr<Optimizer> opt_r, std::shared_ptr<Optimizer> opt_d, StepperOptions so,
                   uint64_t first_batch, const char* phase) {
    Stepper sr(ref, opt_r, aw, so), sd(dm, opt_d, aw, so);
    sd.set_distributed(g);
    {
      auto [whole, mine] = batch(first_batch);
      const TrainResult rr = sr.compute_gradients(whole), rd = sd.compute_gradients(mine);
      CHECK(std::abs(rd.loss - rr.loss) <= tol * std::abs(rr.loss));
      CHECK(std::abs(rd.grad_norm - rr.grad_norm) <= tol * rr.grad_norm);
      check_parameters(*ref, *dm, g, c.dtype, true, phase);
    }
    for (uint64_t k = 0; k < 3; ++k) {
      auto [whole, mine] = batch(first_batch + k);
      const TrainResult rr = sr.train_on_batch(whole), rd = sd.train_on_batch(mine);
      CHECK(rd.applied);
      for (size_t s = 0; s < rr.step_losses.size(); ++s)
        CHECK(std::abs(rd.step_losses[s] - rr.step_losses[s]) <= tol * std::abs(rr.step_losses[s]));
    }
    check_parameters(*ref, *dm, g, c.dtype, false, phase);
    // predict: the rollout without a tape.
    auto [whole, mine] = batch(first_batch + 7);
    const Tensor pr = sr.predict(whole.input, 2, 3);
    CHECK(rel_err(sd.predict(mine.input, 2, 3), part_of(pr, g), max_abs(pr)) <= tol);
  };
  StepperOptions sgd_opts;
  sgd_opts.micro_batches = B / D >= 2 ? 2 : 1;
  sgd_opts.optimize_last_step_only = c.steps == 3;
  sgd_opts.clip_grad_norm = 1.0;  // randomized nets in rollouts have large gradients
  train(std::make_shared<SGD>(ref->named_parameters(), SGDOptions{.lr = 0.01, .momentum = 0.5}),
        std::make_shared<SGD>(dm->named_parameters(), SGDOptions{.lr = 0.01, .momentum = 0.5}), sgd_opts, 10,
        "after 3 SGD steps");
  // Adam's step g / (|g| + eps) turns a difference d in a small gradient entry into up to d lr / eps:
  // with torch's eps 1e-8, the last-bit difference of a clipping scale (the global norm is summed in
  // another order across ranks) grows to 1e-11 in weights whose gradient is small. eps = 1e-3 bounds
  // that gain at lr / eps = 10, so the comparison sees the implementation, not Adam's conditioning.
  StepperOptions adam_opts;
  adam_opts.clip_grad_norm = 0.5;
  const AdamOptions adam{.lr = 0.01, .eps = 1e-3};
  train(std::make_shared<Adam>(ref->named_parameters(), adam), std::make_shared<Adam>(dm->named_parameters(), adam),
        adam_opts, 20, "after 3 Adam steps");
}

// One process (sr) against the grid (sd) on one batch: the losses and raw gradients, then the losses
// of 3 optimizer steps and the weights after them, in f64.
void run_stepper_parity(const std::shared_ptr<Model>& ref, const std::shared_ptr<Model>& dm, const ProcessGrid& g,
                        Stepper& sr, Stepper& sd, const Batch& whole, const Batch& mine, const std::string& what,
                        DType dt = DType::f64) {
  const double tol = tolerance(dt);
  const TrainResult rr = sr.compute_gradients(whole), rd = sd.compute_gradients(mine);
  REQUIRE(std::isfinite(rr.loss));
  for (size_t s = 0; s < rr.step_losses.size(); ++s)
    CHECK(std::abs(rd.step_losses[s] - rr.step_losses[s]) <= tol * std::abs(rr.step_losses[s]));
  check_parameters(*ref, *dm, g, dt, true, ("raw gradients " + what).c_str());
  for (int k = 0; k < 3; ++k) {
    const TrainResult a = sr.train_on_batch(whole), b = sd.train_on_batch(mine);
    CHECK(b.applied);
    CHECK(std::abs(b.loss - a.loss) <= tol * std::abs(a.loss));
  }
  check_parameters(*ref, *dm, g, dt, false, ("after 3 Adam steps " + what).c_str());
}

std::vector<Case> cases() {
  std::vector<Case> out;
  int i = 0;
  for (Net n : {Net::sfno, Net::sfno_local, Net::sfno_folded, Net::noise_gaussian, Net::noise_isotropic})
    for (auto [grid, nlat, nlon] : {std::tuple<const char*, int64_t, int64_t>{"equiangular", 9, 18},
                                    {"legendre-gauss", 17, 32}})
      for (DType dt : {DType::f64, DType::f32}) out.push_back({n, grid, nlat, nlon, dt, 2 + (i++ % 2)});
  return out;
}

}  // namespace

TEST_CASE("spatial parity: every net, sphere grid and dtype equals one process on every decomposition") {
  const auto all = cases();
  gs::test::for_each_grid([&](const ProcessGrid& g) {
    for (const Case& c : all) run_parity(c, g);
  });
}

TEST_CASE("spatial parity: the seed's regression shape (NoiseConditionedSFNO, embed 16, 9x18, 3 samples)") {
  gs::test::for_each_grid([&](const ProcessGrid& g) {
    Case c{Net::noise_gaussian, "equiangular", 9, 18, DType::f64, 2};
    c.embed = 16, c.global = 3;
    run_parity(c, g);
  });
}

// Activation checkpointing replays each block (or each rollout step after the first) in backward:
// its collectives are reissued then, in the same order on every rank (distributed-mpi3-checked runs
// this with the replica checker on, which fails any collective a rank issues out of order).
TEST_CASE("spatial parity: activation checkpointing (blocks; rollout steps after 1) equals one process") {
  using Mode = ActivationCheckpointing::Mode;
  // At 4 ranks (CI's slowest suite on 2 cores) only the grid split in both directions, which 2
  // and 3 ranks do not have; 3 ranks run it under the replica checker too.
  const bool four = dist::world_communicator()->size() == 4;
  gs::test::for_each_grid([&](const ProcessGrid& g) {
    if (g.h_size() == 1 && g.w_size() == 1) return;  // no spatial collectives to replay
    if (four && (g.h_size() == 1 || g.w_size() == 1)) return;
    for (auto [net, mode] : {std::pair{Net::noise_gaussian, Mode::blocks}, std::pair{Net::sfno, Mode::rollout_steps_after},
                             std::pair{Net::sfno_folded, Mode::blocks}}) {
      Case c{net, "equiangular", 9, 18, DType::f64, 2};
      CAPTURE(c.label());
      CAPTURE(static_cast<int>(mode));
      const int64_t D = g.data_size(), B = 2 * D;
      auto ref = make_net(c, ProcessGrid()), dm = make_net(c, g);
      randomize_alike(*ref, *dm, g, 78);
      StepperOptions so;
      so.activation_checkpointing = {mode, 1};
      so.clip_grad_norm = 0.5;
      const std::vector<double> aw = area_weights_for(c);
      const AdamOptions adam{.lr = 0.01, .eps = 1e-3};
      Stepper sr(ref, std::make_shared<Adam>(ref->named_parameters(), adam), aw, so);
      Stepper sd(dm, std::make_shared<Adam>(dm->named_parameters(), adam), aw, so);
      sd.set_distributed(g);
      Tensor x = randn({B, kChans, c.nlat, c.nlon}, {41, 1}, c.dtype);
      Tensor t = randn({B, c.steps, kChans, c.nlat, c.nlon}, {41, 2}, c.dtype);
      run_stepper_parity(ref, dm, g, sr, sd, Batch{x, t}, Batch{part_of(x, g), part_of(t, g)}, "with checkpointing");
    }
  });
}

TEST_CASE("spatial parity: a non-finite loss on one rank skips the step on every rank") {
  gs::test::for_each_grid([&](const ProcessGrid& g) {
    Case c{Net::sfno, "equiangular", 9, 18, DType::f64, 2};
    auto dm = make_net(c, g);
    auto opt = std::make_shared<SGD>(dm->named_parameters(), SGDOptions{.lr = 0.1});
    Stepper sd(dm, opt, area_weights_for(c), StepperOptions{.throw_on_nonfinite = false});
    sd.set_distributed(g);
    const int64_t B = 2 * g.data_size();
    Tensor x = randn({B, kChans, c.nlat, c.nlon}, {41, 1}, c.dtype);
    Tensor t = randn({B, 2, kChans, c.nlat, c.nlon}, {41, 2}, c.dtype);
    Tensor tt = part_of(t, g);
    if (g.world_rank() == g.world_size() - 1) {
      NoGradGuard ng;
      tt.data<double>()[0] = INFINITY;  // one value on the last rank only (a NaN would be masked)
    }
    const Tensor before = clone(dm->named_parameters()[0].tensor.detach());
    const TrainResult r = sd.train_on_batch({part_of(x, g), tt});
    CHECK(!r.applied);
    CHECK(rel_err(dm->named_parameters()[0].tensor, before) == 0.0);
    CHECK(sd.global_step() == 0);
  });
}

TEST_CASE("spatial parity: unequal data-parallel shares are refused on every rank with both sizes") {
  gs::test::for_each_grid([&](const ProcessGrid& g) {
    if (g.data_size() == 1) return;
    Case c{Net::sfno, "equiangular", 9, 18, DType::f64, 2};
    auto dm = make_net(c, g);
    auto opt = std::make_shared<SGD>(dm->named_parameters(), SGDOptions{.lr = 0.1});
    Stepper sd(dm, opt, area_weights_for(c));
    sd.set_distributed(g);
    const int64_t b = g.data_rank() == 0 ? 2 : 1;  // 2 + 1 + ...: not an even split
    const Tensor x = randn({b, kChans, g.local_lat(9).count, g.local_lon(18).count}, {42, 1}, c.dtype);
    const Tensor t = randn({b, 2, kChans, g.local_lat(9).count, g.local_lon(18).count}, {42, 2}, c.dtype);
    const std::string e = gs_test::error_of([&] { sd.train_on_batch({x, t}); });
    CHECK(gs_test::contains(e, "the data-parallel replicas hold batches of 1 to 2 samples"));
  });
}

TEST_CASE("spatial parity: roles (a forcing in, a diagnostic out), missing values and loss scales equal one process") {
  // Data channels: 2 prognostic | 1 forcing | 1 diagnostic; the SFNO maps 3 channels to 3. NaN at
  // fixed global points (a few tiles only): every rank must take the masked loss alike.
  const ChannelLayout layout{2, 1, 1};
  gs::test::for_each_grid([&](const ProcessGrid& g) {
    for (auto [grid, nlat, nlon] : {std::tuple<const char*, int64_t, int64_t>{"equiangular", 9, 18},
                                    {"legendre-gauss", 17, 32}}) {
      Case c{Net::sfno, grid, nlat, nlon, DType::f64, 2};
      CAPTURE(c.label());
      const int64_t D = g.data_size(), B = 2 * D;
      auto make = [&](const ProcessGrid& pg) {
        SfnoOptions o;
        o.img_size = {nlat, nlon};
        o.grid = grid;
        o.in_chans = layout.model_inputs();
        o.out_chans = layout.model_outputs();
        o.embed_dim = 4;
        o.num_layers = 2;
        o.scale_factor = 1;
        o.hard_thresholding_fraction = 0.5;
        o.dtype = DType::f64;
        o.seed = 8;
        return std::make_shared<SFNO>(o, pg);
      };
      auto ref = make(ProcessGrid()), dm = make(g);
      randomize_alike(*ref, *dm, g, 79);
      const std::vector<double> aw = area_weights_for(c);
      Tensor x = randn({B, layout.total(), nlat, nlon}, {51, 1}, DType::f64);
      Tensor t = randn({B, 2, layout.total(), nlat, nlon}, {51, 2}, DType::f64);
      {
        NoGradGuard ng;
        double* pt = t.data<double>();
        double* px = x.data<double>();
        const int64_t field = nlat * nlon;
        pt[((0 * 2 + 0) * 4 + 0) * field + 3 * nlon + 1] = NAN;        // a prognostic target, north
        pt[((B - 1) * 2 + 1) * 4 * field + 3 * field + field - 2] = NAN;  // the diagnostic, south-east
        pt[((1 * 2 + 0) * 4 + 2) * field + 5] = NAN;                   // the forcing of step 1
        px[(0 * 4 + 1) * field + field / 2] = NAN;                     // the initial state
      }
      StepperOptions so;
      so.layout = layout;
      so.loss_scale = {1.5, 1.0, 0.5};
      so.residual_prediction = true;
      so.micro_batches = 2;
      const AdamOptions adam{.lr = 0.01, .eps = 1e-3};
      Stepper sr(ref, std::make_shared<Adam>(ref->named_parameters(), adam), aw, so);
      Stepper sd(dm, std::make_shared<Adam>(dm->named_parameters(), adam), aw, so);
      sd.set_distributed(g);
      const Batch whole{x, t}, mine{part_of(x, g), part_of(t, g)};
      run_stepper_parity(ref, dm, g, sr, sd, whole, mine, "with masks");
      const Tensor pr = sr.predict(whole.input, 2, 3, 0, whole.targets);
      CHECK(rel_err(sd.predict(mine.input, 2, 3, g.data_rank() * 2, mine.targets), part_of(pr, g), max_abs(pr)) <= 1e-12);
    }
  });
}

TEST_CASE("spatial parity: ensemble training (3 members, MSE + CRPS + energy score, masks, loss scales) equals one process") {
  // Members draw their own noise (stepper_noise_key's member), so the CRPS pair term and the energy
  // score (a distributed transform of every member) see different fields; a NaN in one tile makes
  // every rank take the masked form.
  gs::test::for_each_grid([&](const ProcessGrid& g) {
    {
      const char* grid = "legendre-gauss";  // odd splits of 8 latitudes and 16 longitudes on 3 ranks
      const int64_t nlat = 8, nlon = 16;
      Case c{Net::noise_gaussian, grid, nlat, nlon, DType::f64, 2};
      CAPTURE(c.label());
      const int64_t D = g.data_size(), B = 2 * D;
      auto ref = make_net(c, ProcessGrid()), dm = make_net(c, g);
      randomize_alike(*ref, *dm, g, 81);
      const std::vector<double> aw = area_weights_for(c);
      Tensor x = randn({B, kChans, nlat, nlon}, {61, 1}, DType::f64);
      Tensor t = randn({B, 2, kChans, nlat, nlon}, {61, 2}, DType::f64);
      {
        NoGradGuard ng;
        t.data<double>()[(1 * kChans + 1) * nlat * nlon + 2 * nlon + 3] = NAN;  // sample 0, step 1, channel 1
      }
      StepperOptions so;
      so.ensemble_members = 3;
      so.loss = LossTerms{.mse = 0.5, .crps = 1, .energy_score = 0.25, .crps_alpha = 0.9,
                          .grid = sphere::parse_grid_kind(grid)};
      so.loss_scale = {1.5, 0.5};
      so.micro_batches = 2;
      const AdamOptions adam{.lr = 0.01, .eps = 1e-3};
      Stepper sr(ref, std::make_shared<Adam>(ref->named_parameters(), adam), aw, so);
      Stepper sd(dm, std::make_shared<Adam>(dm->named_parameters(), adam), aw, so);
      sd.set_distributed(g);
      run_stepper_parity(ref, dm, g, sr, sd, Batch{x, t}, Batch{part_of(x, g), part_of(t, g)}, "of the ensemble loss");
    }
  });
}

TEST_CASE("spatial parity: members split over the ensemble axis (ExDxHxW, uneven splits) equal one process with all") {
  // K = 3 members over E = 2 or 3 ranks (2 + 1: uneven), K = 5 over E = 4; the CRPS pair term and
  // the energy score gather members over the ensemble group, and the reducer sums the ensemble
  // ranks' parts. f64 on every grid with E > 1, f32 on the first.
  bool f32_done = false;
  gs::test::for_each_grid(
      [&](const ProcessGrid& g) {
        if (g.ensemble_size() == 1) return;  // the E = 1 grids: the case above
        for (DType dt : {DType::f64, DType::f32}) {
          if (dt == DType::f32 && f32_done) continue;
          const char* grid = "legendre-gauss";
          const int64_t nlat = 8, nlon = 16;
          Case c{Net::noise_gaussian, grid, nlat, nlon, dt, 2};
          CAPTURE(c.label());
          const int64_t D = g.data_size(), B = 2 * D;
          auto ref = make_net(c, ProcessGrid()), dm = make_net(c, g);
          randomize_alike(*ref, *dm, g, 83);
          const std::vector<double> aw = area_weights_for(c);
          Tensor x = randn({B, kChans, nlat, nlon}, {63, 1}, dt);
          Tensor t = randn({B, 2, kChans, nlat, nlon}, {63, 2}, dt);
          StepperOptions so;
          so.ensemble_members = g.ensemble_size() <= 3 ? 3 : 5;
          so.loss = LossTerms{.mse = 0.5, .crps = 1, .energy_score = 0.25, .crps_alpha = 0.9,
                              .grid = sphere::parse_grid_kind(grid)};
          so.micro_batches = 2;
          const AdamOptions adam{.lr = 0.01, .eps = 1e-3};
          Stepper sr(ref, std::make_shared<Adam>(ref->named_parameters(), adam), aw, so);
          Stepper sd(dm, std::make_shared<Adam>(dm->named_parameters(), adam), aw, so);
          sd.set_distributed(g);
          run_stepper_parity(ref, dm, g, sr, sd, Batch{x, t}, Batch{part_of(x, g), part_of(t, g)},
                             fmt::format("with {} members over {} ensemble ranks", so.ensemble_members,
                                         g.ensemble_size()),
                             dt);
          if (dt == DType::f32) f32_done = true;
        }
      },
      /*with_ensemble=*/true);
}

TEST_CASE("spatial parity: an ensemble axis with more ranks than members is refused on every rank") {
  auto world = dist::world_communicator();
  if (world->size() < 2) return;
  const ProcessGrid g = ProcessGrid::create(world, dist::GridSpec{1, 1, 1, world->size()});
  Case c{Net::noise_gaussian, "legendre-gauss", 8, 16, DType::f64, 1};
  auto dm = make_net(c, g);
  StepperOptions so;
  so.ensemble_members = world->size() - 1;
  Stepper sd(dm, std::make_shared<Adam>(dm->named_parameters(), AdamOptions{}), area_weights_for(c), so);
  CHECK(gs_test::contains(gs_test::error_of([&] { sd.set_distributed(g); }),
                          fmt::format("the grid's ensemble axis has {} ranks but there are {} members",
                                      world->size(), world->size() - 1)));
}
