#include "models/optim.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <type_traits>

#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif

#include <fmt/format.h>

#include "engine/autograd/grad_clip.h"
#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/compare.h"
#include "ops/complex_ops.h"
#include "ops/composite_path.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace gs::models {
namespace {

// Below this many reals an update runs on one thread (thread start-up would cost more).
constexpr int64_t kParallelGrain = 1 << 15;

// Contiguous real view of a tensor's data: a complex tensor is 2 * numel interleaved reals.
template <typename T>
T* reals(const Tensor& t) {
  return static_cast<T*>(t.storage()->data()) + t.offset() * (is_complex(t.dtype()) ? 2 : 1);
}
int64_t real_count(const Tensor& t) { return t.numel() * (is_complex(t.dtype()) ? 2 : 1); }

// Calls f.template operator()<T>() with T the real type of d (f32/c64 -> float, f64/c128 -> double).
template <typename F>
void dispatch_real(DType d, const char* op, F&& f) {
  switch (real_dtype(d)) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    default: fail("{}: expected a floating or complex dtype, got {}", op, dtype_name(d));
  }
}

// x = sqrt(x), correctly rounded (the IEEE square-root instructions). std::sqrt in a loop does not
// vectorise (it may set errno), and Eigen's fast-math sqrt is not correctly rounded.
template <typename T>
void sqrt_inplace(T* x, int64_t n) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_sqrt_ps(_mm512_loadu_ps(x + i)));
#elif defined(__AVX__)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
#endif
  } else {
#if defined(__AVX512F__)
    for (; i + 8 <= n; i += 8) _mm512_storeu_pd(x + i, _mm512_sqrt_pd(_mm512_loadu_pd(x + i)));
#elif defined(__AVX__)
    for (; i + 4 <= n; i += 4) _mm256_storeu_pd(x + i, _mm256_sqrt_pd(_mm256_loadu_pd(x + i)));
#endif
  }
  for (; i < n; ++i) x[i] = std::sqrt(x[i]);
}

}  // namespace

std::vector<NamedParameter> unnamed_parameters(const std::vector<Tensor>& params) {
  std::vector<NamedParameter> out;
  for (size_t i = 0; i < params.size(); ++i) out.push_back({std::to_string(i), params[i], Distribution::replicated()});
  return out;
}

// ---- Optimizer

Optimizer::Optimizer(std::vector<NamedParameter> params, double lr, std::vector<std::string> buffer_names)
    : params_(std::move(params)), lr_(lr), buffer_names_(std::move(buffer_names)) {
  set_lr(lr);
  std::set<std::string> names;
  std::set<const TensorImpl*> seen;
  for (auto& p : params_) {
    GS_CHECK(!p.name.empty(), "optimizer: every parameter needs a non-empty name");
    GS_CHECK(names.insert(p.name).second, "optimizer: the parameter name '{}' appears twice", p.name);
    GS_CHECK(p.tensor.defined(), "optimizer: parameter '{}' is undefined", p.name);
    GS_CHECK(seen.insert(p.tensor.impl()).second,
             "optimizer: parameter '{}' is the same tensor as an earlier one (it would be updated twice)", p.name);
    GS_CHECK(p.tensor.is_leaf(), "optimizer: parameter '{}' must be a leaf tensor (it has a grad_fn)", p.name);
    GS_CHECK(is_differentiable(p.tensor.dtype()), "optimizer: parameter '{}' must be floating or complex, got {}",
             p.name, dtype_name(p.tensor.dtype()));
  }
  steps_.assign(params_.size(), 0);
  for (auto& p : params_) {
    std::vector<Tensor> bufs;
    for (size_t b = 0; b < buffer_names_.size(); ++b) bufs.push_back(zeros(p.tensor.sizes(), p.tensor.dtype(), p.tensor.device()));
    buffers_.push_back(std::move(bufs));
  }
}

void Optimizer::set_lr(double lr) {
  GS_CHECK(std::isfinite(lr) && lr >= 0, "optimizer: expected a finite learning rate >= 0, got {}", lr);
  lr_ = lr;
}

int64_t Optimizer::step_count(size_t i) const {
  GS_CHECK(i < steps_.size(), "optimizer: parameter index {} out of range ({} parameters)", i, steps_.size());
  return steps_[i];
}

void Optimizer::step() {
  NoGradGuard no_grad;
  const std::string op = type_name() + ".step";
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].tensor;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    GS_CHECK(g.sizes() == p.sizes() && g.dtype() == p.dtype(),
             "{}: parameter '{}' is {} but its grad is {}", op, params_[i].name, p.meta_str(), g.meta_str());
    GS_CHECK(g.device() == p.device(), "{}: the grad of '{}' is on {}, expected the parameter's device {}", op,
             params_[i].name, g.device().str(), p.device().str());
    check_writable(p, op.c_str());
    for (const Tensor& b : buffers_[i])
      GS_CHECK(b.device() == p.device(),
               "{}: parameter '{}' is on {} but its optimizer state on {} (move the model before building its "
               "optimizer)",
               op, params_[i].name, p.device().str(), b.device().str());
    g = contiguous_copy(g);
    // Module parameters are contiguous; a strided one is updated through a contiguous copy.
    Tensor work = p.is_contiguous() ? p : contiguous_copy(p, /*force_copy=*/true);
    if (composite_path(work)) update_composite(work, g, buffers_[i], ++steps_[i]);
    else update(work, g, buffers_[i], ++steps_[i]);
    if (!work.is_same(p)) copy_values(p, work);
    bump_version(p);
  }
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.tensor.set_grad(Tensor{});
}

StateDict Optimizer::state() const {
  StateDict out;
  out["lr"] = state_scalar_f64(lr_);
  for (size_t i = 0; i < params_.size(); ++i) {
    out["step." + params_[i].name] = state_scalar_i64(steps_[i]);
    for (size_t b = 0; b < buffer_names_.size(); ++b)
      out[buffer_names_[b] + "." + params_[i].name] = contiguous_copy(buffers_[i][b], /*force_copy=*/true);
  }
  return out;
}

void Optimizer::load_state(const StateDict& state) {
  const std::string op = type_name() + ".load_state";
  // Every key this optimizer's state has, with the geometry its value must have (no copies made).
  struct Want {
    Shape sizes;
    DType dtype;
  };
  std::map<std::string, Want> expected{{"lr", {{}, DType::f64}}};
  for (size_t i = 0; i < params_.size(); ++i) {
    expected["step." + params_[i].name] = {{}, DType::i64};
    for (auto& b : buffer_names_) expected[b + "." + params_[i].name] = {params_[i].tensor.sizes(), params_[i].tensor.dtype()};
  }
  std::vector<std::string> missing, unexpected;
  for (auto& [key, w] : expected)
    if (!state.count(key)) missing.push_back(key);
  for (auto& [key, t] : state)
    if (!expected.count(key)) unexpected.push_back(key);
  GS_CHECK(missing.empty() && unexpected.empty(),
           "{}: the state does not match this optimizer ({} parameters, buffers [{}]): missing keys [{}], "
           "unexpected keys [{}]",
           op, params_.size(), fmt::join(buffer_names_, ", "), fmt::join(missing, ", "), fmt::join(unexpected, ", "));
  for (auto& [key, want] : expected) {
    const Tensor& got = state.at(key);
    GS_CHECK(got.defined() && got.sizes() == want.sizes && got.dtype() == want.dtype,
             "{}: '{}' expects {} {} but the state holds {}", op, key, dtype_name(want.dtype), shape_str(want.sizes),
             got.meta_str());
  }
  const double lr = state.at("lr").item<double>();
  GS_CHECK(std::isfinite(lr) && lr >= 0, "{}: 'lr' holds {}, expected a finite value >= 0", op, lr);
  std::vector<int64_t> steps;
  for (auto& p : params_) {
    steps.push_back(state.at("step." + p.name).item<int64_t>());
    GS_CHECK(steps.back() >= 0, "{}: 'step.{}' holds {}, expected >= 0", op, p.name, steps.back());
  }
  // Everything checked: write.
  lr_ = lr;
  steps_ = steps;
  for (size_t i = 0; i < params_.size(); ++i)
    for (size_t b = 0; b < buffer_names_.size(); ++b) {
      const Tensor& src = state.at(buffer_names_[b] + "." + params_[i].name);  // a checkpoint's: on the CPU
      const Tensor& dst = buffers_[i][b];
      copy_values(dst, src.device() == dst.device() ? src : to(src, dst.device()));
      bump_version(buffers_[i][b]);
    }
}

// ---- SGD

SGD::SGD(std::vector<NamedParameter> params, SGDOptions o)
    : Optimizer(std::move(params), o.lr,
                o.momentum != 0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{}),
      o_(o) {
  GS_CHECK(o.momentum >= 0 && o.weight_decay >= 0 && std::isfinite(o.momentum) && std::isfinite(o.dampening) &&
               std::isfinite(o.weight_decay),
           "SGD: expected finite momentum >= 0 and weight_decay >= 0, got momentum {}, weight_decay {}", o.momentum,
           o.weight_decay);
  GS_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
           "SGD: nesterov momentum requires momentum > 0 and dampening == 0, got momentum {}, dampening {}",
           o.momentum, o.dampening);
}

void SGD::update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& bufs, int64_t step) {
  dispatch_real(param.dtype(), "SGD.step", [&]<typename T>() {
    T* p = reals<T>(param);
    const T* g = reals<T>(grad);
    T* buf = bufs.empty() ? nullptr : reals<T>(bufs[0]);
    const int64_t n = real_count(param);
    const T rate = T(lr()), wd = T(o_.weight_decay), mom = T(o_.momentum), damp = T(1 - o_.dampening);
    const bool first = step == 1, nesterov = o_.nesterov;
#pragma omp parallel for simd if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      T d = g[i];
      if (wd != T(0)) d += wd * p[i];
      if (buf) {
        buf[i] = first ? d : mom * buf[i] + damp * d;
        d = nesterov ? d + mom * buf[i] : buf[i];
      }
      p[i] += -rate * d;
    }
  });
  if (!bufs.empty()) bump_version(bufs[0]);
}

namespace {
// The reals of t (view_as_real for complex), as update() walks them.
Tensor real_view(const Tensor& t) { return is_complex(t.dtype()) ? view_as_real(t) : t; }
}  // namespace

void SGD::update_composite(const Tensor& param, const Tensor& grad, std::vector<Tensor>& bufs, int64_t step) {
  Tensor p = real_view(param);
  Tensor d = real_view(grad);
  if (o_.weight_decay != 0) d = add(d, mul(p, o_.weight_decay));
  if (!bufs.empty()) {
    Tensor buf = real_view(bufs[0]);
    if (step == 1) {
      copy_(buf, d);
    } else {
      mul_(buf, o_.momentum);
      add_(buf, mul(d, 1 - o_.dampening));
    }
    d = o_.nesterov ? add(d, mul(buf, o_.momentum)) : buf;
    bump_version(bufs[0]);
  }
  add_(p, d, -lr());
}

// ---- Adam / AdamW

Adam::Adam(std::vector<NamedParameter> params, AdamOptions o) : Adam(std::move(params), o, false) {}

Adam::Adam(std::vector<NamedParameter> params, AdamOptions o, bool decoupled)
    : Optimizer(std::move(params), o.lr,
                o.amsgrad ? std::vector<std::string>{"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
                          : std::vector<std::string>{"exp_avg", "exp_avg_sq"}),
      o_(o),
      decoupled_(decoupled) {
  const char* name = decoupled ? "AdamW" : "Adam";
  GS_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "{}: expected betas in [0, 1), got ({}, {})",
           name, o.beta1, o.beta2);
  GS_CHECK(o.eps >= 0 && std::isfinite(o.eps), "{}: expected a finite eps >= 0, got {}", name, o.eps);
  GS_CHECK(o.weight_decay >= 0 && std::isfinite(o.weight_decay), "{}: expected a finite weight_decay >= 0, got {}",
           name, o.weight_decay);
}

AdamW::AdamW(std::vector<NamedParameter> params, AdamOptions o) : Adam(std::move(params), o, true) {}

void Adam::update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& bufs, int64_t step) {
  // Step-dependent scalars in f64, then rounded once to the parameter's precision (as torch's
  // Python-float scalars).
  const double bc1 = 1 - std::pow(o_.beta1, static_cast<double>(step));
  const double bc2 = 1 - std::pow(o_.beta2, static_cast<double>(step));
  dispatch_real(param.dtype(), "Adam.step", [&]<typename T>() {
    T* p = reals<T>(param);
    const T* g = reals<T>(grad);
    T* m = reals<T>(bufs[0]);
    T* v = reals<T>(bufs[1]);
    T* vmax = o_.amsgrad ? reals<T>(bufs[2]) : nullptr;
    const int64_t n = real_count(param);
    const T w1 = T(1 - o_.beta1), b2 = T(o_.beta2), w2 = T(1 - o_.beta2), eps = T(o_.eps);
    const T step_size = T(lr() / bc1), bc2_sqrt = T(std::sqrt(bc2));
    const T coupled_wd = decoupled_ ? T(0) : T(o_.weight_decay);
    const T decay = decoupled_ ? T(1 - lr() * o_.weight_decay) : T(1);
    // One pass over memory, in L1-sized blocks: the moments, their square roots, the parameter.
    constexpr int64_t kBlock = 2048;
    const int64_t nb = (n + kBlock - 1) / kBlock;
#pragma omp parallel for if (n >= kParallelGrain)
    for (int64_t blk = 0; blk < nb; ++blk) {
      const int64_t lo = blk * kBlock, len = std::min(kBlock, n - lo);
      T* pb = p + lo;
      T* mb = m + lo;
      T* vb = v + lo;
      const T* gb = g + lo;
      alignas(64) T root[kBlock];
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) {
        const T gi = gb[i] + coupled_wd * pb[i];
        mb[i] += w1 * (gi - mb[i]);  // torch's lerp for weight < 0.5: m + w (g - m)
        vb[i] = b2 * vb[i] + w2 * gi * gi;
        root[i] = vb[i];
      }
      if (vmax) {
        T* xb = vmax + lo;
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) root[i] = xb[i] = std::max(xb[i], root[i]);
      }
      sqrt_inplace(root, len);
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) pb[i] = pb[i] * decay - step_size * mb[i] / (root[i] / bc2_sqrt + eps);
    }
  });
  for (auto& b : bufs) bump_version(b);
}

void Adam::update_composite(const Tensor& param, const Tensor& grad, std::vector<Tensor>& bufs, int64_t step) {
  const double bc1 = 1 - std::pow(o_.beta1, static_cast<double>(step));
  const double bc2 = 1 - std::pow(o_.beta2, static_cast<double>(step));
  Tensor p = real_view(param), m = real_view(bufs[0]), v = real_view(bufs[1]);
  Tensor g = real_view(grad);
  if (!decoupled_ && o_.weight_decay != 0) g = add(g, mul(p, o_.weight_decay));
  add_(m, mul(sub(g, m), 1 - o_.beta1));  // m + w (g - m), as update()
  mul_(v, o_.beta2);
  add_(v, mul(mul(g, 1 - o_.beta2), g));  // (1 - beta2) g g, in update()'s order
  Tensor root = v;
  if (o_.amsgrad) {
    Tensor vmax = real_view(bufs[2]);
    copy_(vmax, where(gt(vmax, v), vmax, v));
    root = vmax;
  }
  const Tensor denom = add(div(sqrt(root), std::sqrt(bc2)), o_.eps);
  if (decoupled_ && o_.weight_decay != 0) mul_(p, 1 - lr() * o_.weight_decay);
  add_(p, div(mul(m, lr() / bc1), denom), -1.0);
  for (auto& b : bufs) bump_version(b);
}

// ---- clipping

namespace {

// Sum of squares of every defined grad, in f64, over fixed blocks whose partial sums are added in
// block order: the result does not depend on the number of threads.
double grad_sq_sum(const std::vector<Tensor>& params, const char* op) {
  constexpr int64_t kBlock = 1 << 14;
  double total = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    GS_CHECK(params[k].defined(), "{}: parameter {} is undefined", op, k);
    Tensor g = params[k].grad();
    if (!g.defined()) continue;
    if (composite_path(g)) {  // on the device: one deterministic reduction per parameter, read back
      const Tensor r = cast_copy(real_view(g), DType::f64);
      total += sum(mul(r, r)).item<double>();
      continue;
    }
    g = contiguous_copy(g);
    dispatch_real(g.dtype(), op, [&]<typename T>() {
      const T* d = reals<T>(g);
      const int64_t n = real_count(g), nb = (n + kBlock - 1) / kBlock;
      std::vector<double> partial(nb, 0.0);
#pragma omp parallel for if (n >= kParallelGrain)
      for (int64_t b = 0; b < nb; ++b) {
        double s = 0;
        const int64_t end = std::min(n, (b + 1) * kBlock);
        // simd lanes fix the summation order at compile time: still independent of the thread count.
#pragma omp simd reduction(+ : s)
        for (int64_t i = b * kBlock; i < end; ++i) s += static_cast<double>(d[i]) * static_cast<double>(d[i]);
        partial[b] = s;
      }
      for (double s : partial) total += s;
    });
  }
  return total;
}

}  // namespace

double grad_norm(const std::vector<Tensor>& params) { return std::sqrt(grad_sq_sum(params, "grad_norm")); }

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, bool error_if_nonfinite) {
  GS_CHECK(max_norm > 0 && !std::isnan(max_norm), "clip_grad_norm: expected max_norm > 0, got {}", max_norm);
  const double norm = std::sqrt(grad_sq_sum(params, "clip_grad_norm"));
  if (!std::isfinite(norm)) {
    GS_CHECK(!error_if_nonfinite,
             "clip_grad_norm: the total gradient norm is {}; the gradients were left unscaled (a NaN or Inf in "
             "some .grad: enable anomaly mode to find the op that produced it)",
             norm);
    return norm;
  }
  clip_grads_to_norm(params, norm, max_norm);
  return norm;
}

void clip_grads_to_norm(const std::vector<Tensor>& params, double norm, double max_norm) {
  const double scale = grad_clip_factor(norm, max_norm);
  if (scale < 1) {
    NoGradGuard no_grad;
    for (auto& p : params) {
      Tensor g = p.grad();
      if (g.defined()) mul_(g, scale);
    }
  }
}

}  // namespace gs::models
