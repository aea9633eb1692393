#include "tools/grid_plan.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "distributed/reducer.h"
#include "distributed/world.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "models/data/swe_data.h"
#include "models/ensemble_loss.h"
#include "models/sfno.h"
#include "ops/linalg.h"
#include "tools/train_run.h"
#include "tools/train_setup.h"

namespace gs::tools {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// (l, m) pairs with m < mmax and m <= l < lmax: the coefficients one field's contraction touches.
double pairs(const sphere::ShtSpec& s) {
  double n = 0;
  for (int64_t m = 0; m < s.mmax; ++m) n += static_cast<double>(std::max<int64_t>(s.lmax - m, 0));
  return n;
}

// Forward flops of one transform of one field, split into the FFT and the Legendre contraction
// (tools/scaling_model.py: 2.5 n log2 n per real FFT row; a real table times complex data).
struct TransformFlops {
  double fft = 0, legendre = 0;
};
TransformFlops transform_flops(const sphere::ShtSpec& s) {
  const double rows = static_cast<double>(s.nlat), n = static_cast<double>(s.nlon);
  return {rows * 2.5 * n * std::log2(n), rows * pairs(s) * 4};
}

// The counts a block structure needs, whichever SFNO it is.
struct ModelShape {
  sphere::ShtSpec first, inner, last;  // block 0's forward spec, the internal one, the last block's output spec
  int64_t layers = 1, embed = 1, hidden = 0, in = 1, out = 1, decoder_in = 1;
  int64_t skip_macs_per_point = 0;  // inner/outer linear and 3x3 skips, multiply-adds per output point
  std::vector<dist::PlannedTransform> extra;  // transforms outside the blocks (ACE's filters)
  // When a block's residual goes through an isht of its coefficients: SFNO when the grid size
  // changes; ACE's blocks also when the grid kind changes, or always with filter_residual.
  bool residual_on_kind_change = false, residual_always = false;
  // SFNO's folds (models::sfno_folds_encoder / _decoder): the encoder's product on the first
  // block's coefficients, the last block's first MLP layer on its coefficients and the decoder
  // joined with its output layer (models/NOTES.md).
  bool fold_encoder = false, fold_decoder = false;
  bool encoder_bias = false, outer_identity = false;  // what the folded forms add (SFNO)
};

ModelShape sfno_shape(const models::SfnoOptions& o, const models::TrajectoryInfo& d) {
  ModelShape m;
  const int64_t H = d.nlat, W = d.nlon, h = (H - 1) / o.scale_factor + 1, w = W / o.scale_factor;
  const int64_t modes = static_cast<int64_t>(static_cast<double>(std::min(h, w / 2)) * o.hard_thresholding_fraction);
  m.first = m.last = sphere::ShtSpec{d.grid, H, W, modes, modes};
  m.inner = sphere::ShtSpec{sphere::parse_grid_kind(o.grid_internal), h, w, modes, modes};
  m.layers = o.num_layers, m.embed = o.embed_dim;
  m.hidden = o.use_mlp ? static_cast<int64_t>(static_cast<double>(o.embed_dim) * o.mlp_ratio) : 0;
  m.in = d.layout().model_inputs(), m.out = d.layout().model_outputs();
  m.decoder_in = o.embed_dim + (o.big_skip ? m.in : 0);
  const int64_t C2 = o.embed_dim * o.embed_dim;
  for (const std::string& skip : {o.inner_skip, o.outer_skip})
    m.skip_macs_per_point += skip == "linear" ? C2 : skip == "local3x3" ? 9 * C2 : 0;
  m.fold_encoder = models::sfno_folds_encoder(o), m.fold_decoder = models::sfno_folds_decoder(o);
  m.encoder_bias = o.bias, m.outer_identity = o.outer_skip == "identity";
  return m;
}

ModelShape noise_sfno_shape(const models::NoiseSfnoOptions& o, const models::TrajectoryInfo& d) {
  ModelShape m;
  const int64_t H = d.nlat, W = d.nlon;
  const int64_t lmax = static_cast<int64_t>(static_cast<double>(H) * o.hard_thresholding_fraction);
  const int64_t mmax = std::min(static_cast<int64_t>(static_cast<double>(W / 2 + 1) * o.hard_thresholding_fraction), lmax);
  m.first = m.last = sphere::ShtSpec{d.grid, H, W, lmax, mmax};
  m.inner = sphere::ShtSpec{sphere::GridKind::legendre_gauss, H, W, lmax, mmax};
  m.layers = o.num_layers, m.embed = o.embed_dim;
  m.hidden = o.use_mlp ? static_cast<int64_t>(static_cast<double>(o.embed_dim) * o.mlp_ratio) : 0;
  m.in = d.layout().model_inputs(), m.out = d.layout().model_outputs();
  m.decoder_in = o.embed_dim + (o.big_skip ? m.in : 0);
  m.skip_macs_per_point = o.embed_dim * o.embed_dim;  // ACE's block: a linear inner skip
  m.residual_on_kind_change = true, m.residual_always = o.filter_residual;
  if (o.big_skip && o.filter_residual) m.extra.push_back({m.first, m.in, 2});
  if (o.filter_output) m.extra.push_back({m.first, m.out, 2});
  return m;
}

// Flops, transforms and activation bytes of one forward pass of one sample.
struct ForwardCount {
  double flops = 0, legendre = 0;
  // Elements held for backward: the encoder and decoder, the blocks, the blocks' inputs alone.
  double outer_elements = 0, block_elements = 0, checkpointed_elements = 0, largest_block = 0;
  std::vector<dist::PlannedTransform> transforms;
};

ForwardCount count_forward(const ModelShape& m) {
  ForwardCount f;
  const double C = static_cast<double>(m.embed), hidden = static_cast<double>(m.hidden);
  auto points = [](const sphere::ShtSpec& s) { return static_cast<double>(s.nlat * s.nlon); };
  auto transform = [&](const sphere::ShtSpec& s, int64_t fields) {
    const TransformFlops t = transform_flops(s);
    f.flops += (t.fft + t.legendre) * static_cast<double>(fields);
    f.legendre += t.legendre * static_cast<double>(fields);
    f.transforms.push_back({s, fields, 1});
  };
  const double full = points(m.first);
  // A product of Cin -> Cout channels on a spec's L x M coefficients (real and imaginary parts).
  auto on_coefficients = [](const sphere::ShtSpec& s, double cin, double cout) {
    return 2.0 * cin * cout * 2.0 * static_cast<double>(s.lmax * s.mmax);
  };
  const double in = static_cast<double>(m.in), out = static_cast<double>(m.out);
  f.flops += m.fold_encoder ? on_coefficients(m.first, in, C) : 2.0 * in * C * full;  // encoder
  if (m.fold_encoder && m.encoder_bias) transform(m.first, 1);  // a constant field's coefficients
  // The decoder on the full grid; folded, only its part on big_skip's input channels is left there.
  f.flops += 2.0 * static_cast<double>(m.fold_decoder ? m.decoder_in - m.embed : m.decoder_in) * out * full;
  f.outer_elements += static_cast<double>(m.in + m.out) * full + (m.fold_encoder ? 0 : C * full) +
                      (m.fold_decoder ? 0 : static_cast<double>(m.decoder_in) * full);
  for (int64_t i = 0; i < m.layers; ++i) {
    const sphere::ShtSpec& fwd = i == 0 ? m.first : m.inner;
    const sphere::ShtSpec& inv = i == m.layers - 1 ? m.last : m.inner;
    const bool decoded = m.fold_decoder && i == m.layers - 1, from_coefficients = m.fold_encoder && i == 0;
    transform(fwd, from_coefficients ? m.in : m.embed);
    transform(inv, decoded ? m.hidden : m.embed);  // folded: fc1 before the inverse transform
    const bool resized = fwd.nlat != inv.nlat || fwd.nlon != inv.nlon;
    const double p = points(inv);
    f.flops += pairs(inv) * C * C * 8;  // the spectral contraction, complex
    if (decoded) {
      // fc1 on the coefficients, fc2 joined with the decoder (Cout rows on the grid), and the
      // identity residual through the decoder: on its coefficients and synthesised when the
      // grids differ, else a product on the grid.
      f.flops += on_coefficients(inv, C, hidden) + 2.0 * hidden * out * p;
      if (m.outer_identity && resized) transform(inv, m.out);
      if (m.outer_identity) f.flops += resized ? on_coefficients(inv, C, out) : 2.0 * C * out * p;
    } else {
      if (resized || m.residual_always || (m.residual_on_kind_change && fwd.grid != inv.grid))
        transform(inv, m.embed);  // the residual's round trip
      f.flops += 2.0 * (2.0 * C * hidden + static_cast<double>(m.skip_macs_per_point)) * p;
    }
    // Held for backward: the block's input, its transforms' outputs, the norm, the MLP (in, hidden
    // before and after the activation, out) and the skip sums: about 6 C + 2 hidden per point;
    // the folded last block keeps the hidden activations before and after and the Cout rows.
    const double block = decoded ? (2 * hidden + out) * p : (6 * C + 2 * hidden) * p;
    f.block_elements += block;
    // A checkpointed block keeps its input only: grid values, or block 0's coefficients when folded.
    f.checkpointed_elements += from_coefficients ? C * 2.0 * static_cast<double>(fwd.lmax * fwd.mmax) : C * points(fwd);
    f.largest_block = std::max(f.largest_block, block);
  }
  for (const auto& t : m.extra)
    for (int64_t k = 0; k < t.count; ++k) transform(t.spec, t.fields_per_sample);
  return f;
}

double optimizer_state_factor(const OptimizerConfig& o) {
  if (o.type == "sgd") return o.sgd.momentum > 0 ? 1 : 0;
  return o.adam.amsgrad ? 3 : 2;
}

// The node's ranks, from the launcher (MPICH / Open MPI / Slurm); else every rank of the job.
int64_t ranks_on_this_node(int64_t world_size) {
  for (const char* var : {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"})
    if (const char* v = std::getenv(var)) {
      const long long n = std::atoll(v);
      if (n >= 1) return n;
    }
  return world_size;
}

double probe_flops_per_second() {
  constexpr int64_t n = 192;
  const Tensor a = full({n, n}, 0.5), b = full({n, n}, 0.25);
  (void)matmul(a, b);  // warm-up
  int reps = 0;
  const auto t0 = Clock::now();
  while (reps < 4 || seconds_since(t0) < 0.1) {
    (void)matmul(a, b);
    ++reps;
  }
  return 2.0 * static_cast<double>(n * n * n) * reps / seconds_since(t0);
}

// The median time of `reps` all-reduces of `elements` floats over the world.
double time_all_reduce(const dist::CommPtr& world, int64_t elements, int reps) {
  const Tensor t = full({elements}, 1.0);
  world->all_reduce(t, dist::ReduceOp::sum);  // warm-up
  std::vector<double> times;
  for (int k = 0; k < reps; ++k) {
    world->barrier();
    const auto t0 = Clock::now();
    world->all_reduce(t, dist::ReduceOp::sum);
    times.push_back(seconds_since(t0));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

models::TrajectoryInfo planned_data_info(const TrainConfig& c) {
  if (c.data.source == "netcdf") return open_data_files(c, c.data.train_files)->info();
  models::TrajectoryInfo info;
  info.grid = c.data.swe.grid, info.nlat = c.data.swe.nlat, info.nlon = c.data.swe.nlon, info.dtype = c.data.dtype;
  if (c.data.variables.empty()) {
    for (int64_t k = 0; k < models::swe_channels(c.data.swe); ++k) info.variables.push_back(fmt::format("c{}", k));
    return info;
  }
  for (const auto& r : models::in_role_order(c.data.variables)) info.variables.push_back(r.name), info.roles.push_back(r.role);
  return info;
}

dist::PlannerWorkload planner_workload(const TrainConfig& c, const models::TrajectoryInfo& d) {
  const ModelShape shape = c.model.type == "sfno" ? sfno_shape(c.model.sfno, d) : noise_sfno_shape(c.model.noise_sfno, d);
  const ForwardCount f = count_forward(shape);
  dist::PlannerWorkload w;
  w.flops_per_sample = 3 * f.flops;  // backward: twice the forward (the input and the weight gradients)
  w.legendre_share = f.flops > 0 ? f.legendre / f.flops : 0;
  w.compute_spec = shape.inner;
  w.nlat = d.nlat, w.nlon = d.nlon;
  w.transforms = f.transforms;
  w.element_bytes = static_cast<int64_t>(dtype_size(c.data.dtype));
  // The parameters as the model declares them: built once, whole, on one process.
  const auto model = build_model(c, d, dist::ProcessGrid{});
  for (const auto& p : model->named_parameters()) {
    const double bytes = static_cast<double>(p.tensor.numel() * static_cast<int64_t>(dtype_size(p.tensor.dtype())));
    switch (dist::reduction_group(p.distribution)) {
      case dist::Group::data_w: w.h_split_bytes += bytes; break;
      case dist::Group::data_h: w.w_split_bytes += bytes; break;
      case dist::Group::replicas: w.hw_split_bytes += bytes; break;
      default: w.replicated_bytes += bytes;
    }
  }
  w.optimizer_state_factor = optimizer_state_factor(c.optimizer);
  const auto& s = c.training.stepper;
  const bool checkpointed = s.activation_checkpointing.mode != models::ActivationCheckpointing::Mode::none;
  // Checkpointed blocks keep their inputs; one block's activations exist again while it is replayed.
  const double elements = checkpointed ? f.outer_elements + f.checkpointed_elements + f.largest_block
                                       : f.outer_elements + f.block_elements;
  w.activation_bytes_per_sample = elements * static_cast<double>(w.element_bytes);
  w.batch = c.training.batch_size, w.members = s.ensemble_members, w.rollout_steps = c.training.rollout_steps;
  w.micro_batches = s.micro_batches;
  if (checkpointed) w.compute_recompute = 4.0 / 3.0, w.transpose_recompute = 1.5;  // the forward runs again
  return w;
}

dist::CostInputs cost_inputs(const CostModelConfig& config, const dist::CommPtr& world) {
  dist::CostInputs in;
  in.transpose_hidden_share = config.transpose_hidden_share;
  in.allreduce_hidden_share = config.allreduce_hidden_share;
  const int64_t n = world->size();
  std::vector<double> v(4);
  v[0] = config.flops_per_second ? *config.flops_per_second : probe_flops_per_second();
  // One process has no network: any positive figure (only 1x1x1 is planned).
  v[2] = config.latency_seconds ? *config.latency_seconds : n > 1 ? time_all_reduce(world, 2, 9) : 0.0;
  if (config.bandwidth_bytes_per_second) {
    v[1] = *config.bandwidth_bytes_per_second;
  } else if (n > 1) {  // the ring all-reduce of 4 MB, less its latency
    const double bytes = 4.0 * (1 << 20), k = static_cast<double>(n);
    const double t = time_all_reduce(world, 1 << 20, 3) - 2 * (k - 1) * v[2];
    v[1] = 2 * (k - 1) / k * bytes / std::max(t, 1e-6);
  } else {
    v[1] = 1e9;
  }
  const double host = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  v[3] = config.memory_limit_bytes ? *config.memory_limit_bytes : host / static_cast<double>(ranks_on_this_node(n));
  if (n > 1) {  // every rank plans with rank 0's figures
    Tensor t = from_vector(v, {4});
    world->broadcast(t, 0);
    v = t.to_vector<double>();
  }
  in.flops_per_second = v[0], in.bandwidth_bytes_per_second = v[1], in.latency_seconds = v[2];
  in.memory_limit_bytes = v[3];
  return in;
}

dist::GridCheck training_grid_check(const TrainConfig& c, Device device) {
  return [&c, device](const dist::GridSpec& g) -> std::string {
    const dist::ProcessGrid layout(g.data, g.h, g.w, 0, g.ensemble);
    try {
      check_device_grid(device, layout, "train");
      check_batch_grid(c.training.batch_size, layout, "train");
      models::member_share(c.training.stepper.ensemble_members, layout);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
}

dist::GridSpec choose_grid(const TrainConfig& c, const dist::CommPtr& world, Device device) {
  const dist::CostInputs in = cost_inputs(c.distributed.cost_model, world);
  std::vector<int64_t> chosen(4, 0);
  if (world->rank() == 0) {  // the model is built once, on rank 0 (an error there ends the job)
    const dist::PlannerWorkload work = planner_workload(c, planned_data_info(c));
    const dist::GridPlan plan = dist::plan_grids(world->size(), work, in, training_grid_check(c, device));
    fmt::print(stderr, "{}", dist::format_plan(plan, in));
    const dist::GridSpec& g = plan.best().grid;
    chosen = {g.ensemble, g.data, g.h, g.w};
  }
  if (world->size() > 1) {
    Tensor t = from_vector(chosen, {4});
    world->broadcast(t, 0);
    chosen = t.to_vector<int64_t>();
  }
  return dist::GridSpec{chosen[1], chosen[2], chosen[3], chosen[0]};
}

}  // namespace gs::tools
