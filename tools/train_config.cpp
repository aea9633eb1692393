#include "tools/train_config.h"

#include <optional>

#include "distributed/process_grid.h"

#include "engine/error.h"

namespace gs::tools {
namespace {

const std::vector<std::string> kGrids = {"equiangular", "legendre-gauss", "lobatto"};

DType read_dtype(const ConfigNode& n, const std::string& key, DType def) {
  std::string s = n.get_choice_or(key, def == DType::f64 ? "f64" : "f32", {"f32", "f64"});
  return s == "f64" ? DType::f64 : DType::f32;
}

sphere::GridKind read_grid(const ConfigNode& n, const std::string& key, sphere::GridKind def) {
  return sphere::parse_grid_kind(n.get_choice_or(key, std::string(sphere::grid_name(def)), kGrids));
}

void read_swe(const ConfigNode& n, DataConfig& d) {
  auto& s = d.swe;
  s.grid = read_grid(n, "grid", s.grid);
  s.nlat = n.get_int_or("nlat", s.nlat, {.min = 4, .max = 4096});
  s.nlon = n.get_int_or("nlon", s.nlon, {.min = 8, .max = 8192});
  if (n.has("lmax")) s.lmax = n.get_int("lmax", {.min = 2});
  s.n_trajectories = n.get_int_or("train_trajectories", s.n_trajectories, {.min = 1});
  s.states_per_trajectory = n.get_int_or("states_per_trajectory", s.states_per_trajectory, {.min = 2});
  s.dt_hours = n.get_real_or("dt_hours", s.dt_hours, {.min = 0, .min_exclusive = true});
  s.solver_dt_seconds = n.get_real_or("solver_dt_seconds", s.solver_dt_seconds, {.min = 0});
  s.spinup_hours = n.get_real_or("spinup_hours", s.spinup_hours, {.min = 0});
  s.seed = static_cast<uint64_t>(n.get_int_or("seed", 1, {.min = 0}));
  s.initial.rms_wind = n.get_real_or("rms_wind", s.initial.rms_wind, {.min = 0, .min_exclusive = true});
  s.initial.peak_degree = n.get_real_or("peak_degree", s.initial.peak_degree, {.min = 0, .min_exclusive = true});
  s.hyperdiffusion.enabled = n.get_bool_or("hyperdiffusion", s.hyperdiffusion.enabled);
  s.hyperdiffusion.efold_hours =
      n.get_real_or("hyperdiffusion_efold_hours", s.hyperdiffusion.efold_hours, {.min = 0, .min_exclusive = true});
  // The forced set (swe_solver.h, SweForcing): a moving mass source, read as a forcing channel.
  auto& f = s.forcing;
  f.enabled = n.get_bool_or("forcing", f.enabled);
  const std::vector<std::string> forcing_keys = {"forcing_amplitude", "forcing_period_days", "forcing_max_lat_deg",
                                                 "forcing_width_deg", "forcing_wave1", "forcing_relaxation_days"};
  if (!f.enabled)
    for (const auto& key : forcing_keys)
      GS_CHECK(!n.has(key), "data.swe.{} is given but data.swe.forcing is false (set forcing: true to use it)", key);
  f.amplitude = n.get_real_or("forcing_amplitude", f.amplitude, {.min = 0, .min_exclusive = true});
  f.period_days = n.get_real_or("forcing_period_days", f.period_days, {.min = 0, .min_exclusive = true});
  f.max_lat_deg = n.get_real_or("forcing_max_lat_deg", f.max_lat_deg, {.min = 0, .max = 90});
  f.width_deg = n.get_real_or("forcing_width_deg", f.width_deg, {.min = 0, .max = 180, .min_exclusive = true});
  f.wave1 = n.get_real_or("forcing_wave1", f.wave1, {.min = 0, .max = 1});
  f.relaxation_days = n.get_real_or("forcing_relaxation_days", f.relaxation_days, {.min = 0});
  d.validation_trajectories = n.get_int_or("validation_trajectories", d.validation_trajectories, {.min = 1});
  d.max_generation_minutes =
      n.get_real_or("max_minutes", d.max_generation_minutes, {.min = 0, .min_exclusive = true});
  d.validation_seed = static_cast<uint64_t>(n.get_int_or("validation_seed", 1000, {.min = 0}));
  GS_CHECK(d.validation_seed != s.seed,
           "data.swe.validation_seed must differ from data.swe.seed (both {}): validation needs unseen trajectories",
           s.seed);
}

void read_netcdf(const ConfigNode& n, DataConfig& d) {
  d.train_files = n.get_string_list("train_files", {.min = 1});
  d.validation_files = n.get_string_list("validation_files", {.min = 1});
  // The flat list of earlier versions (all prognostic); data.variables is the full form.
  for (const auto& v : n.get_string_list_or("variables", {})) d.variables.emplace_back(v);
  if (n.has("grid")) d.netcdf.grid = sphere::parse_grid_kind(n.get_choice("grid", kGrids));
  if (n.has("dt_hours")) d.netcdf.dt_hours = n.get_real("dt_hours", {.min = 0, .min_exclusive = true});
  d.netcdf.lat_name = n.get_string_or("lat_name", "");
  d.netcdf.lon_name = n.get_string_or("lon_name", "");
  d.netcdf.time_name = n.get_string_or("time_name", "");
  const std::string join = n.get_choice_or("join", "automatic", {"automatic", "time", "trajectories"});
  d.netcdf.join = join == "time" ? models::NetcdfJoin::time
                  : join == "trajectories" ? models::NetcdfJoin::trajectories
                                           : models::NetcdfJoin::automatic;
}

// One role's list: names, or {name: {levels: [values]}} / {name: {level_indices: [indices]}}.
void read_variable_list(const ConfigNode& n, const char* key, models::VariableRole role,
                        std::vector<models::VariableRequest>& out) {
  for (auto& [name, item] : n.get_named_list(key)) {
    GS_CHECK(!name.empty(), "{}.{}: expected variable names, got an empty one", n.path(), key);
    models::VariableRequest r(name, role);
    r.levels.values = item.get_real_list_or("levels", {}, {}, {.min = 1});
    r.levels.indices = item.get_int_list_or("level_indices", {}, {.min = 0}, {.min = 1});
    out.push_back(std::move(r));
  }
}

// data.variables: a flat list (every variable prognostic) or {prognostic: [...], forcing: [...],
// diagnostic: [...]}.
std::vector<models::VariableRequest> read_variables(const ConfigNode& data) {
  std::vector<models::VariableRequest> out;
  if (!data.has("variables")) return out;
  if (data.has_list("variables")) {
    read_variable_list(data, "variables", models::VariableRole::prognostic, out);
  } else {
    const ConfigNode v = data.section("variables");
    for (auto role : {models::VariableRole::prognostic, models::VariableRole::forcing, models::VariableRole::diagnostic})
      if (v.has(models::role_name(role))) read_variable_list(v, models::role_name(role), role, out);
      else v.accept(models::role_name(role));
    GS_CHECK(!out.empty(), "data.variables: expected a list of variables, or lists under prognostic, forcing and "
             "diagnostic; got the keys [{}]", fmt::join(v.keys(), ", "));
  }
  (void)models::in_role_order(out);  // a name listed twice is an error here, before any data is read
  int64_t predicted = 0;
  for (const auto& r : out) predicted += r.role != models::VariableRole::forcing;
  GS_CHECK(predicted > 0, "data.variables: expected at least one prognostic or diagnostic variable (the model "
           "predicts them), got only forcings");
  return out;
}

void read_data(const ConfigNode& n, DataConfig& d) {
  d.source = n.get_choice_or("source", d.source, {"swe", "netcdf"});
  d.dtype = read_dtype(n, "dtype", d.dtype);
  if (d.source == "swe") {
    read_swe(n.optional_section("swe"), d);
    GS_CHECK(!n.has("netcdf"), "data.netcdf is given but data.source is 'swe' (set source: netcdf to use it)");
  } else {
    read_netcdf(n.section("netcdf"), d);
    GS_CHECK(!n.has("swe"), "data.swe is given but data.source is 'netcdf' (set source: swe to use it)");
  }
  d.swe.dtype = d.dtype;
  d.netcdf.dtype = d.dtype;
  if (n.has("variables")) {
    GS_CHECK(d.variables.empty(), "data.variables and data.netcdf.variables are both given; keep data.variables");
    d.variables = read_variables(n);
  }
}

void read_loss(const ConfigNode& n, LossConfig& l) {
  const ConfigNode w = n.optional_section("weights");
  for (const auto& key : w.keys()) l.weights.emplace_back(key, w.get_real(key, {.min = 0}));
  l.residual_scaling = n.get_bool_or("residual_scaling", l.residual_scaling);
  l.type = n.get_choice_or("type", l.type, {"mse", "crps", "energy_score", "mix"});
  models::LossTerms& t = l.terms;
  t.crps_alpha = n.get_real_or("crps_alpha", t.crps_alpha, {.min = 0, .max = 1});
  if (l.type == "mix") {
    const ConfigNode mix = n.section("mix");
    t.mse = mix.get_real_or("mse", 0, {.min = 0});
    t.crps = mix.get_real_or("crps", 0, {.min = 0});
    t.energy_score = mix.get_real_or("energy_score", 0, {.min = 0});
    GS_CHECK(t.mse + t.crps + t.energy_score > 0,
             "loss.mix: expected a positive weight for at least one of mse, crps and energy_score, got all 0");
  } else {
    GS_CHECK(!n.has("mix"), "loss.mix is given but loss.type is '{}' (set type: mix to weigh several terms)", l.type);
    t.mse = l.type == "mse" ? 1 : 0;
    t.crps = l.type == "crps" ? 1 : 0;
    t.energy_score = l.type == "energy_score" ? 1 : 0;
  }
}

// mlp_storage: "dtype" (the model's, the default) or "bf16" (MlpSpec::bf16_storage).
bool read_mlp_storage(const ConfigNode& n, bool def) {
  return n.get_choice_or("mlp_storage", def ? std::string("bf16") : std::string("dtype"), {"dtype", "bf16"}) == "bf16";
}

void read_sfno(const ConfigNode& n, models::SfnoOptions& o) {
  o.grid_internal = n.get_choice_or("grid_internal", o.grid_internal, kGrids);
  o.scale_factor = n.get_int_or("scale_factor", o.scale_factor, {.min = 1});
  o.embed_dim = n.get_int_or("embed_dim", 32, {.min = 1});
  o.num_layers = n.get_int_or("num_layers", o.num_layers, {.min = 1});
  o.activation_function = n.get_choice_or("activation_function", o.activation_function, {"gelu", "relu", "identity"});
  o.encoder_layers = n.get_int_or("encoder_layers", o.encoder_layers, {.min = 1});
  o.use_mlp = n.get_bool_or("use_mlp", o.use_mlp);
  o.mlp_ratio = n.get_real_or("mlp_ratio", o.mlp_ratio, {.min = 0, .min_exclusive = true});
  o.mlp_bf16_storage = read_mlp_storage(n, o.mlp_bf16_storage);
  o.drop_rate = n.get_real_or("drop_rate", o.drop_rate, {.min = 0, .max = 1});
  o.drop_path_rate = n.get_real_or("drop_path_rate", o.drop_path_rate, {.min = 0, .max = 1});
  o.normalization_layer = n.get_choice_or("normalization_layer", o.normalization_layer,
                                          {"none", "layer_norm", "instance_norm"});
  o.hard_thresholding_fraction =
      n.get_real_or("hard_thresholding_fraction", o.hard_thresholding_fraction, {.min = 0, .max = 1, .min_exclusive = true});
  o.residual_prediction = n.get_bool_or("residual_prediction", o.residual_prediction);
  o.pos_embed = n.get_choice_or("pos_embed", o.pos_embed,
                                {"none", "sequence", "spectral", "learnable lat", "learnable latlon"});
  o.bias = n.get_bool_or("bias", o.bias);
  o.inner_skip = n.get_choice_or("inner_skip", o.inner_skip, {"none", "linear", "identity", "local3x3"});
  o.outer_skip = n.get_choice_or("outer_skip", o.outer_skip, {"none", "linear", "identity", "local3x3"});
  o.operator_type = n.get_choice_or("operator_type", o.operator_type, {"driscoll-healy", "diagonal"});
  o.big_skip = n.get_bool_or("big_skip", o.big_skip);
  o.fold_encoder_decoder = n.get_bool_or("fold_encoder_decoder", o.fold_encoder_decoder);
}

void read_noise_sfno(const ConfigNode& n, models::NoiseSfnoOptions& o) {
  o.embed_dim = n.get_int_or("embed_dim", 32, {.min = 1});
  o.noise_embed_dim = n.get_int_or("noise_embed_dim", 8, {.min = 0});
  o.context_pos_embed_dim = n.get_int_or("context_pos_embed_dim", o.context_pos_embed_dim, {.min = 0});
  o.noise_type = n.get_choice_or("noise_type", o.noise_type, {"gaussian", "isotropic"});
  o.global_layer_norm = n.get_bool_or("global_layer_norm", o.global_layer_norm);
  o.num_layers = n.get_int_or("num_layers", 4, {.min = 1});
  o.use_mlp = n.get_bool_or("use_mlp", o.use_mlp);
  o.mlp_ratio = n.get_real_or("mlp_ratio", o.mlp_ratio, {.min = 0, .min_exclusive = true});
  o.mlp_bf16_storage = read_mlp_storage(n, o.mlp_bf16_storage);
  o.activation_function = n.get_choice_or("activation_function", o.activation_function, {"gelu", "relu", "silu"});
  o.encoder_layers = n.get_int_or("encoder_layers", o.encoder_layers, {.min = 1});
  o.pos_embed = n.get_bool_or("pos_embed", o.pos_embed);
  o.big_skip = n.get_bool_or("big_skip", o.big_skip);
  o.filter_residual = n.get_bool_or("filter_residual", o.filter_residual);
  o.filter_output = n.get_bool_or("filter_output", o.filter_output);
  o.affine_norms = n.get_bool_or("affine_norms", o.affine_norms);
  o.filter_num_groups = n.get_int_or("filter_num_groups", o.filter_num_groups, {.min = 1});
  o.hard_thresholding_fraction =
      n.get_real_or("hard_thresholding_fraction", o.hard_thresholding_fraction, {.min = 0, .max = 1, .min_exclusive = true});
}

void read_model(const ConfigNode& n, ModelConfig& m) {
  m.type = n.get_choice_or("type", m.type, {"sfno", "noise_sfno"});
  if (m.type == "sfno")
    read_sfno(n, m.sfno);
  else
    read_noise_sfno(n, m.noise_sfno);
}

void read_optimizer(const ConfigNode& n, OptimizerConfig& o) {
  o.type = n.get_choice_or("type", o.type, {"sgd", "adam", "adamw"});
  const double lr = n.get_real_or("lr", 1e-3, {.min = 0, .min_exclusive = true});
  if (o.type == "sgd") {
    o.sgd.lr = lr;
    o.sgd.momentum = n.get_real_or("momentum", o.sgd.momentum, {.min = 0, .max = 1});
    o.sgd.dampening = n.get_real_or("dampening", o.sgd.dampening, {.min = 0, .max = 1});
    o.sgd.weight_decay = n.get_real_or("weight_decay", o.sgd.weight_decay, {.min = 0});
    o.sgd.nesterov = n.get_bool_or("nesterov", o.sgd.nesterov);
  } else {
    o.adam.lr = lr;
    auto betas = n.get_real_list_or("betas", {o.adam.beta1, o.adam.beta2},
                                    {.min = 0, .max = 1, .max_exclusive = true}, {.min = 2, .max = 2});
    o.adam.beta1 = betas[0];
    o.adam.beta2 = betas[1];
    o.adam.eps = n.get_real_or("eps", o.adam.eps, {.min = 0, .min_exclusive = true});
    o.adam.weight_decay = n.get_real_or("weight_decay", o.type == "adamw" ? 1e-2 : 0.0, {.min = 0});
    o.adam.amsgrad = n.get_bool_or("amsgrad", o.adam.amsgrad);
  }
}

void read_schedule(const ConfigNode& n, ScheduleConfig& s) {
  s.type = n.get_choice_or("type", s.type, {"constant", "warmup_cosine", "step", "reduce_on_plateau"});
  if (s.type == "warmup_cosine") {
    s.warmup_steps = n.get_int_or("warmup_steps", s.warmup_steps, {.min = 0});
    s.min_lr = n.get_real_or("min_lr", s.min_lr, {.min = 0});
  } else if (s.type == "step") {
    s.step_size = n.get_int_or("step_size", s.step_size, {.min = 1});
    s.gamma = n.get_real_or("gamma", s.gamma, {.min = 0, .max = 1, .min_exclusive = true});
  } else if (s.type == "reduce_on_plateau") {
    s.factor = n.get_real_or("factor", s.factor, {.min = 0, .max = 1, .min_exclusive = true, .max_exclusive = true});
    s.patience = n.get_int_or("patience", s.patience, {.min = 0});
    s.threshold = n.get_real_or("threshold", s.threshold, {.min = 0});
    s.cooldown = n.get_int_or("cooldown", s.cooldown, {.min = 0});
    s.min_lr = n.get_real_or("min_lr", s.min_lr, {.min = 0});
  }
}

// `activation_checkpointing: none | blocks`, or `activation_checkpointing: {rollout_steps_after: N}`.
void read_activation_checkpointing(const ConfigNode& n, models::ActivationCheckpointing& a) {
  using Mode = models::ActivationCheckpointing::Mode;
  const char* key = "activation_checkpointing";
  if (!n.has(key)) return;
  std::optional<ConfigNode> section;
  try {
    section = n.section(key);
  } catch (const Error&) {  // a plain value: read below, with its own error
  }
  if (section) {
    a.mode = Mode::rollout_steps_after;
    a.after = section->get_int("rollout_steps_after", {.min = 0});
    return;
  }
  std::string mode;
  try {
    mode = n.get_choice(key, {"none", "blocks"});
  } catch (const Error& e) {
    fail("{} (or the mapping `{}: {{rollout_steps_after: N}}` to replay rollout steps k >= N)", e.what(), key);
  }
  a.mode = mode == "blocks" ? Mode::blocks : Mode::none;
}

void read_training(const ConfigNode& n, TrainingConfig& t) {
  t.steps = n.get_int_or("steps", t.steps, {.min = 1});
  t.batch_size = n.get_int_or("batch_size", t.batch_size, {.min = 1});
  t.rollout_steps = n.get_int_or("rollout_steps", t.rollout_steps, {.min = 1, .max = 64});
  auto& s = t.stepper;
  s.step_weights = n.get_real_list_or("step_weights", {}, {.min = 0});
  GS_CHECK(s.step_weights.empty() || static_cast<int64_t>(s.step_weights.size()) == t.rollout_steps,
           "training.step_weights: expected one weight per rollout step ({}), got {}", t.rollout_steps,
           s.step_weights.size());
  s.optimize_last_step_only = n.get_bool_or("optimize_last_step_only", s.optimize_last_step_only);
  s.micro_batches = n.get_int_or("micro_batches", s.micro_batches, {.min = 1});
  GS_CHECK(s.micro_batches <= t.batch_size, "training.micro_batches: expected at most batch_size ({}), got {}",
           t.batch_size, s.micro_batches);
  s.clip_grad_norm = n.get_real_or("clip_grad_norm", s.clip_grad_norm, {.min = 0});
  s.residual_prediction = n.get_bool_or("residual_prediction", s.residual_prediction);
  s.ensemble_members = n.get_int_or("ensemble_members", s.ensemble_members, {.min = 1, .max = 64});
  read_activation_checkpointing(n, s.activation_checkpointing);
  t.log_every = n.get_int_or("log_every", t.log_every, {.min = 1});
  t.checkpoint_every = n.get_int_or("checkpoint_every", t.checkpoint_every, {.min = 1});
  // A non-finite loss stops the run from the training loop, which keeps the last good checkpoint.
  s.throw_on_nonfinite = false;
}

void read_validation(const ConfigNode& n, ValidationConfig& v) {
  v.every = n.get_int_or("every", v.every, {.min = 0});
  v.samples = n.get_int_or("samples", v.samples, {.min = 1});
  v.lead_steps = n.get_int_or("lead_steps", v.lead_steps, {.min = 1, .max = 1000});
}

void read_output(const ConfigNode& n, OutputConfig& o) {
  o.dir = n.get_string_or("dir", o.dir);
  GS_CHECK(!o.dir.empty(), "output.dir: expected a directory name, got an empty string");
  o.maps = n.get_bool_or("maps", o.maps);
  o.map_scale = static_cast<int>(n.get_int_or("map_scale", o.map_scale, {.min = 1, .max = 32}));
}

void read_distributed(const ConfigNode& n, DistributedConfig& d) {
  d.grid = n.get_string_or("grid", d.grid);
  try {
    if (!d.grid.empty() && d.grid != "auto") dist::parse_grid(d.grid);  // a malformed grid is an error now
  } catch (const Error& e) {
    fail("distributed.grid: {} (or auto, to choose it from the cost model)", e.what());
  }
  d.tape_reducer = n.get_choice_or("reducer", "tape", {"tape", "hooks"}) == "tape";
  const ConfigNode m = n.optional_section("cost_model");
  CostModelConfig& c = d.cost_model;
  for (auto [key, value] : {std::pair{"flops_per_second", &c.flops_per_second},
                            std::pair{"bandwidth_bytes_per_second", &c.bandwidth_bytes_per_second},
                            std::pair{"latency_seconds", &c.latency_seconds},
                            std::pair{"memory_limit_bytes", &c.memory_limit_bytes}})
    if (m.has(key)) *value = m.get_real(key, {.min = 0, .min_exclusive = std::string(key) != "latency_seconds"});
  c.transpose_hidden_share = m.get_real_or("transpose_hidden_share", c.transpose_hidden_share, {.min = 0, .max = 1});
  c.allreduce_hidden_share = m.get_real_or("allreduce_hidden_share", c.allreduce_hidden_share, {.min = 0, .max = 1});
}

}  // namespace

TrainConfig parse_train_config(const ConfigNode& root) {
  TrainConfig c;
  c.seed = static_cast<uint64_t>(root.get_int_or("seed", 0, {.min = 0}));
  read_data(root.optional_section("data"), c.data);
  read_model(root.optional_section("model"), c.model);
  read_optimizer(root.optional_section("optimizer"), c.optimizer);
  read_schedule(root.optional_section("schedule"), c.schedule);
  read_training(root.optional_section("training"), c.training);
  read_validation(root.optional_section("validation"), c.validation);
  read_loss(root.optional_section("loss"), c.loss);
  read_output(root.optional_section("output"), c.output);
  read_distributed(root.optional_section("distributed"), c.distributed);
  c.training.stepper.seed = c.seed;
  c.training.stepper.loss = c.loss.terms;
  // CRPS with one member, or several members of a deterministic model: errors before anything runs.
  c.loss.terms.check(c.training.stepper.ensemble_members);
  GS_CHECK(c.training.stepper.ensemble_members == 1 || c.model.type == "noise_sfno",
           "training.ensemble_members: {} members need a stochastic model (model.type: noise_sfno); model.type '{}' "
           "is deterministic, so every member would be the same",
           c.training.stepper.ensemble_members, c.model.type);
  c.model.sfno.seed = c.model.noise_sfno.seed = c.seed;
  c.model.sfno.dtype = c.model.noise_sfno.dtype = c.data.dtype;
  root.finish();
  c.text = root.text();
  c.source = root.source();
  return c;
}

TrainConfig load_train_config(const std::string& path) { return parse_train_config(ConfigNode::load_file(path)); }

TrainConfig train_config_from_string(const std::string& text, const std::string& source) {
  return parse_train_config(ConfigNode::from_string(text, source));
}

}  // namespace gs::tools
