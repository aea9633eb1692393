#include "models/module.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/view.h"

namespace gs::models {

void Module::check_new_name(const std::string& name) const {
  GS_CHECK(!name.empty() && name.find('.') == std::string::npos,
           "{}: a parameter, buffer or sub-module name must be non-empty and contain no '.', got '{}'", type_name_,
           name);
  auto taken = [&](const std::string& n) {
    for (auto& p : params_)
      if (p.name == n) return true;
    for (auto& b : buffers_)
      if (b.name == n) return true;
    for (auto& c : children_)
      if (c.first == n) return true;
    return false;
  };
  GS_CHECK(!taken(name), "{}: the name '{}' is already registered", type_name_, name);
}

Tensor Module::register_parameter(const std::string& name, Tensor value, Distribution d) {
  check_new_name(name);
  GS_CHECK(value.defined(), "{}: parameter '{}' is undefined", type_name_, name);
  GS_CHECK(is_floating(value.dtype()) || is_complex(value.dtype()),
           "{}: parameter '{}' must be floating or complex, got {}", type_name_, name, dtype_name(value.dtype()));
  GS_CHECK(d.h_dim < value.dim() && d.w_dim < value.dim() && (d.h_dim < 0 || d.h_dim != d.w_dim),
           "{}: parameter '{}' is declared {} but has {} dims", type_name_, name, d.str(), value.dim());
  // A fresh leaf that owns its storage, so no caller-side alias can write into it.
  Tensor leaf = contiguous_copy(value.detach(), /*force_copy=*/true);
  leaf.set_requires_grad(true);
  leaf.set_name(name);
  params_.push_back({name, leaf, d});
  return leaf;
}

Tensor Module::register_buffer(const std::string& name, Tensor value, BufferKind kind, Distribution d) {
  check_new_name(name);
  GS_CHECK(value.defined(), "{}: buffer '{}' is undefined", type_name_, name);
  Tensor buf = contiguous_copy(value.detach(), /*force_copy=*/true);
  buf.set_name(name);
  if (kind == BufferKind::constant)
    buf.storage()->set_read_only(fmt::format("{} buffer '{}' is constant (registered as BufferKind::constant)",
                                             type_name_, name));
  buffers_.push_back({name, buf, kind, d});
  return buf;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name(name);
  GS_CHECK(m != nullptr, "{}: sub-module '{}' is null", type_name_, name);
  // A module inside its own subtree would make every traversal recurse forever.
  auto holds = [this](const Module& root, auto&& self) -> bool {
    if (&root == this) return true;
    for (auto& c : root.children_)
      if (self(*c.second, self)) return true;
    return false;
  };
  GS_CHECK(!holds(*m, holds), "{}: sub-module '{}' ({}) contains this module: a module cannot be its own descendant",
           type_name_, name, m->type_name());
  children_.emplace_back(name, std::move(m));
}

namespace {
bool seen_before(std::vector<const TensorImpl*>& seen, const Tensor& t) {
  for (const TensorImpl* s : seen)
    if (s == t.impl()) return true;
  seen.push_back(t.impl());
  return false;
}
}  // namespace

void Module::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out,
                                std::vector<const TensorImpl*>& seen) const {
  for (auto& p : params_)
    if (!seen_before(seen, p.tensor)) out.push_back({prefix + p.name, p.tensor, p.distribution});
  for (auto& [cname, child] : children_) child->collect_parameters(prefix + cname + ".", out, seen);
}

void Module::collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out,
                             std::vector<const TensorImpl*>& seen) const {
  for (auto& b : buffers_)
    if (!seen_before(seen, b.tensor)) out.push_back({prefix + b.name, b.tensor, b.kind, b.distribution});
  for (auto& [cname, child] : children_) child->collect_buffers(prefix + cname + ".", out, seen);
}

std::vector<NamedParameter> Module::named_parameters() const {
  std::vector<NamedParameter> out;
  std::vector<const TensorImpl*> seen;
  collect_parameters("", out, seen);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& p : named_parameters()) out.push_back(p.tensor);
  return out;
}

std::vector<NamedBuffer> Module::named_buffers() const {
  std::vector<NamedBuffer> out;
  std::vector<const TensorImpl*> seen;
  collect_buffers("", out, seen);
  return out;
}

int64_t Module::num_parameters(bool complex_as_two) const {
  int64_t n = 0;
  for (auto& p : named_parameters()) n += p.tensor.numel() * (complex_as_two && is_complex(p.tensor.dtype()) ? 2 : 1);
  return n;
}

void Module::train(bool on) {
  training_ = on;
  on_mode_changed();
  for (auto& c : children_) c.second->train(on);
}

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& p : named_parameters()) out[p.name] = p.tensor.detach();
  for (auto& b : named_buffers()) out[b.name] = b.tensor.detach();
  return out;
}

namespace {

// A constant buffer in a state dict must be the one these options build (it is rebuilt, not
// loaded): the same shape and, to float rounding, the same values (torch computes them in f32).
void check_constant_buffer(const std::string& type, const std::string& name, const Tensor& mine, const Tensor& src) {
  GS_CHECK(src.defined() && src.sizes() == mine.sizes(),
           "{}: load_state_dict: constant buffer '{}' is {} here but the state dict holds {}", type, name,
           mine.meta_str(false), src.meta_str(false));
  const auto a = cast_copy(mine, is_complex(mine.dtype()) ? DType::c128 : DType::f64);
  const auto b = cast_copy(src, a.dtype());
  double diff = 0, scale = 0;
  if (is_complex(a.dtype())) {
    auto va = a.to_vector<c128>(), vb = b.to_vector<c128>();
    for (size_t k = 0; k < va.size(); ++k) diff = std::max(diff, std::abs(va[k] - vb[k])), scale = std::max(scale, std::abs(va[k]));
  } else {
    auto va = a.to_vector<double>(), vb = b.to_vector<double>();
    for (size_t k = 0; k < va.size(); ++k) {
      const double d = std::abs(va[k] - vb[k]);
      diff = std::max(diff, std::isnan(d) ? INFINITY : d);
      scale = std::max(scale, std::abs(va[k]));
    }
  }
  GS_CHECK(diff <= 1e-5 * std::max(scale, 1.0),
           "{}: load_state_dict: constant buffer '{}' in the state dict differs from the one these options build "
           "(largest difference {:.3g}); constant buffers are rebuilt from the model's options, not loaded: check "
           "the options that define it (image size, embedding width, embedding kind)",
           type, name, diff);
}

}  // namespace

void Module::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::pair<std::string, Tensor>> targets;
  for (auto& p : named_parameters()) targets.emplace_back(p.name, p.tensor);
  for (auto& b : named_buffers())
    if (b.kind == BufferKind::mutable_state) targets.emplace_back(b.name, b.tensor);
  // Constant buffers are optional (older state dicts leave them out) and only checked.
  std::map<std::string, Tensor> constants;
  for (auto& b : named_buffers())
    if (b.kind == BufferKind::constant) constants[b.name] = b.tensor;

  std::vector<std::string> missing, unexpected;
  for (auto& [name, t] : targets)
    if (!state.count(name)) missing.push_back(name);
  for (auto& [name, t] : state) {
    bool known = constants.count(name) > 0;
    for (auto& tg : targets) known = known || tg.first == name;
    if (!known) unexpected.push_back(name);
  }
  if (strict)
    GS_CHECK(missing.empty() && unexpected.empty(),
             "{}: load_state_dict(strict): missing keys [{}], unexpected keys [{}]", type_name_,
             fmt::join(missing, ", "), fmt::join(unexpected, ", "));
  // Validate everything before writing anything, so a bad state dict leaves the model untouched.
  for (auto& [name, t] : targets) {
    auto it = state.find(name);
    if (it == state.end()) continue;
    const Tensor& src = it->second;
    // One cast is accepted: c64 into c128, exact. torch's model.double() leaves complex parameters
    // (the spectral weights) c64, so a torch-harmonics state dict saved that way loads into an f64
    // model unchanged.
    const bool widening = src.defined() && src.dtype() == DType::c64 && t.dtype() == DType::c128;
    GS_CHECK(src.defined() && src.sizes() == t.sizes() && (src.dtype() == t.dtype() || widening),
             "{}: load_state_dict: '{}' expects {} but the state dict holds {}", type_name_, name, t.meta_str(false),
             src.meta_str(false));
  }
  for (auto& [name, t] : constants)
    if (auto it = state.find(name); it != state.end()) check_constant_buffer(type_name_, name, t, it->second);
  NoGradGuard no_grad;
  for (auto& [name, t] : targets) {
    auto it = state.find(name);
    if (it == state.end()) continue;
    Tensor dst = t;
    const Tensor& src = it->second;  // a checkpoint's tensors are on the CPU; the module's may not be
    copy_(dst, src.device() == dst.device() ? src : gs::to(src, dst.device()));
  }
}

namespace {
void move_storage(const Tensor& t, Device device) {
  if (t.device() == device) return;  // also a tensor registered twice, moved already
  GS_CHECK(t.is_contiguous() && t.offset() == 0 && !t.is_view(),
           "Module::to: expected a parameter or buffer that owns its contiguous storage, got {}", t.meta_str());
  const Storage& old = t.storage();
  Storage moved = to_device_copy(t, device).storage();
  if (old->read_only()) moved->set_read_only(old->read_only_reason());
  // The version counter lives on the storage: the new one starts past the old one, so a graph that
  // saved the tensor before the move sees a write (as it should) rather than a matching version.
  for (uint64_t v = 0; v <= old->version(); ++v) moved->bump_version();
  t.impl()->storage = std::move(moved);
}
}  // namespace

void Module::to(Device device) {
  for (auto& p : params_) {
    p.tensor.set_grad(Tensor{});
    move_storage(p.tensor, device);
  }
  for (auto& b : buffers_) move_storage(b.tensor, device);
  for (auto& [name, child] : children_) child->to(device);
}

void Module::zero_grad() {
  for (auto& p : named_parameters()) p.tensor.set_grad(Tensor{});
}

std::string Module::summary() const {
  std::string s;
  for (auto& p : named_parameters())
    s += fmt::format("  {:<48} {:<28} {}\n", p.name, p.tensor.meta_str(false), p.distribution.str());
  s += fmt::format("  {} parameters ({} real degrees of freedom)\n", num_parameters(), num_parameters(true));
  return s;
}

Tensor state_scalar_f64(double v) {
  Tensor t = empty({}, DType::f64);
  *t.data<double>() = v;
  return t;
}

Tensor state_scalar_i64(int64_t v) {
  Tensor t = empty({}, DType::i64);
  *t.data<int64_t>() = v;
  return t;
}

// ---- initialisers

RandomKey param_key(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ULL;
  return RandomKey{seed, h};
}

Tensor init_normal(const Shape& sizes, double std, RandomKey key, DType dtype) {
  GS_CHECK(std >= 0, "init_normal: std must be >= 0, got {}", std);
  NoGradGuard no_grad;
  return mul(randn(sizes, key, dtype), std);
}

Tensor init_uniform(const Shape& sizes, double lo, double hi, RandomKey key, DType dtype) {
  GS_CHECK(hi >= lo, "init_uniform: expected lo <= hi, got [{}, {})", lo, hi);
  NoGradGuard no_grad;
  return add(mul(rand(sizes, key, dtype), hi - lo), lo);
}

namespace {
double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
// Inverse of normal_cdf on (0, 1): bisection to bracket, then Newton steps (init only, f64).
double normal_quantile(double p) {
  double lo = -40, hi = 40, x = 0;
  for (int i = 0; i < 80; ++i) {
    x = 0.5 * (lo + hi);
    (normal_cdf(x) < p ? lo : hi) = x;
  }
  for (int i = 0; i < 3; ++i) {
    double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    if (pdf < 1e-300) break;
    x -= (normal_cdf(x) - p) / pdf;
  }
  return x;
}
}  // namespace

void sync_mutable_buffers(const Module& module, const dist::ProcessGrid& grid) {
  const auto& world = grid.comm(dist::Group::world);
  for (const auto& b : module.named_buffers()) {
    if (b.kind != BufferKind::mutable_state) continue;
    GS_CHECK(b.tensor.is_contiguous(), "sync_mutable_buffers: buffer '{}' ({}) must be contiguous", b.name,
             b.tensor.meta_str(false));
    world->broadcast(b.tensor, 0);
  }
}

Tensor init_trunc_normal(const Shape& sizes, double mean, double std, double a, double b, RandomKey key,
                         DType dtype) {
  GS_CHECK(std > 0 && a < b, "init_trunc_normal: expected std > 0 and a < b, got std {}, [a, b] = [{}, {}]", std, a, b);
  GS_CHECK(is_floating(dtype), "init_trunc_normal: expected a real dtype, got {}", dtype_name(dtype));
  // Rejection from a few normal candidates per element (the usual case: [a, b] holds most of the
  // mass); an element whose candidates all fall outside is drawn by inverting the CDF instead.
  constexpr int64_t kTries = 8;
  Tensor out = empty(sizes, DType::f64);
  const int64_t n = out.numel();
  Tensor cand = randn({kTries, n}, key, DType::f64);
  Tensor u = rand({n}, RandomKey{key.seed, key.stream ^ 0x7472756e63ULL}, DType::f64);
  const double* c = cand.data<double>();
  const double* ud = u.data<double>();
  double* d = out.data<double>();
  const double ca = normal_cdf((a - mean) / std), cb = normal_cdf((b - mean) / std);
  for (int64_t i = 0; i < n; ++i) {
    bool done = false;
    for (int64_t k = 0; k < kTries && !done; ++k) {
      double x = mean + std * c[k * n + i];
      if (x >= a && x <= b) d[i] = x, done = true;
    }
    if (done) continue;
    double p = std::min(std::max(ca + (cb - ca) * ud[i], 1e-300), 1.0 - 1e-16);
    d[i] = std::min(std::max(mean + std * normal_quantile(p), a), b);
  }
  return dtype == DType::f64 ? out : cast_copy(out, dtype);
}

}  // namespace gs::models
