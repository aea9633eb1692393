// The registry walk's backends: which (device, precision) pairs each op runs on, and the
// comparison of a backend's run with the CPU f64 one (tests/ops/test_registry_backends.cpp and
// `gradsphere gradcheck --device cuda` use it).
#include <algorithm>
#include <cmath>

#include "engine/autograd/engine.h"
#include "engine/autograd/grad_mode.h"
#include "engine/cuda_runtime.h"
#include "engine/factory.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {

std::string Backend::str() const {
  return fmt::format("{} {}", device == DeviceType::cpu ? "cpu" : "cuda", single ? "f32" : "f64");
}

std::vector<Backend> supported_backends(const OpInfo& op) {
  std::vector<Backend> b = {{DeviceType::cpu, false}, {DeviceType::cpu, true}};
  if (op.cuda_missing.empty()) b.insert(b.end(), {{DeviceType::cuda, false}, {DeviceType::cuda, true}});
  return b;
}

bool backend_present(const Backend& b) { return b.device == DeviceType::cpu || cuda::device_count() > 0; }

namespace {

Device device_of(const Backend& b) { return b.device == DeviceType::cpu ? Device::cpu() : Device::cuda(0); }

DType precision_of(DType d, bool single) {
  if (!single) return d;
  return d == DType::f64 ? DType::f32 : d == DType::c128 ? DType::c64 : d;
}

// The sample's inputs as fresh leaves on `b` (the same requires_grad flags). On the CPU in f64 they
// keep their layouts; cast or moved, they are contiguous (the strided CUDA paths are exercised by
// the ops' own transposes, broadcasts and slices).
std::vector<Tensor> inputs_on(const std::vector<Tensor>& in, const Backend& b) {
  std::vector<Tensor> r;
  for (const Tensor& t : in) {
    if (!t.defined()) {
      r.push_back(t);
      continue;
    }
    Tensor c = t.detach();
    const DType want = precision_of(c.dtype(), b.single);
    if (want != c.dtype()) c = cast_copy(c, want);
    if (b.device != DeviceType::cpu) c = to_device_copy(c, device_of(b));
    // A leaf of its own over those bytes (a detach() alias may not become a leaf that needs grad).
    c = Tensor(std::make_shared<TensorImpl>(c.storage(), c.sizes(), c.strides(), c.offset(), c.dtype()));
    if (t.requires_grad()) c.set_requires_grad(true);
    r.push_back(c);
  }
  return r;
}

struct Run {
  std::vector<Tensor> outputs, grads;
};

// Outputs, and the gradients of sum(out_i * cotangent_i) for fixed random cotangents (made in f64
// on the CPU, then cast and moved, so every backend sees the same numbers).
Run run_on(const OpInfo& op, const OpSample& sample, const Backend& b) {
  GradModeGuard on(true);
  std::vector<Tensor> x = inputs_on(sample.inputs, b);
  Run r;
  r.outputs = op.fn(x);
  std::vector<Tensor> outs, cots, wrt;
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    const Tensor& o = r.outputs[i];
    if (!o.defined() || !o.requires_grad()) continue;
    Tensor c = randn(o.sizes(), {777, i + 1}, is_complex(o.dtype()) ? DType::c128 : DType::f64);
    c = to_device_copy(cast_copy(c, o.dtype()), o.device());
    outs.push_back(o);
    cots.push_back(c);
  }
  for (const Tensor& t : x)
    if (t.defined() && t.requires_grad()) wrt.push_back(t);
  if (!outs.empty() && !wrt.empty()) r.grads = grad(outs, wrt, cots, {.allow_unused = true});
  return r;
}

// max |a - b| / max(max |b|, tiny) over the elements, as doubles (complex: both parts).
double relative_difference(const Tensor& a, const Tensor& b) {
  auto flat = [](const Tensor& t) {
    std::vector<double> v;
    if (is_complex(t.dtype())) {
      for (auto z : t.to_vector<c128>()) v.push_back(z.real()), v.push_back(z.imag());
    } else if (t.dtype() == DType::b8) {
      for (bool z : t.to_vector<bool>()) v.push_back(z ? 1.0 : 0.0);
    } else {
      v = t.to_vector<double>();
    }
    return v;
  };
  const std::vector<double> x = flat(a), y = flat(b);
  double scale = 0, diff = 0;
  for (double v : y)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (x[i] == y[i]) continue;  // equal infinities too
    diff = std::max(diff, std::isfinite(x[i] - y[i]) ? std::abs(x[i] - y[i]) : HUGE_VAL);
  }
  return diff / std::max(scale, 1e-300);
}

}  // namespace

BackendCheck compare_with_cpu(const OpInfo& op, const OpSample& sample, const Backend& b) {
  BackendCheck c;
  const double tol = b.single ? op.single_tolerance : 1e-12;
  Run ref = run_on(op, sample, {DeviceType::cpu, false});
  Run got = run_on(op, sample, b);
  auto compare = [&](const std::vector<Tensor>& want, const std::vector<Tensor>& have, const char* what) {
    if (want.size() != have.size()) {
      c.ok = false;
      c.failure = fmt::format("{} {}s on {} against {} on cpu f64", have.size(), what, b.str(), want.size());
      return;
    }
    for (size_t i = 0; i < want.size(); ++i) {
      if (want[i].defined() != have[i].defined()) {
        c.ok = false;
        c.failure = fmt::format("{} {} is {} on {} but {} on cpu f64", what, i, have[i].defined() ? "defined" : "undefined",
                                b.str(), want[i].defined() ? "defined" : "undefined");
        return;
      }
      if (!want[i].defined()) continue;
      // Single-precision inputs give single-precision results, except from ops that fix their
      // output dtype (to(t, f64)).
      const bool dtype_ok =
          have[i].dtype() == precision_of(want[i].dtype(), b.single) || have[i].dtype() == want[i].dtype();
      if (have[i].sizes() != want[i].sizes() || have[i].device() != device_of(b) || !dtype_ok) {
        c.ok = false;
        c.failure = fmt::format("{} {} is {} on {}, expected {} {} on {}", what, i, have[i].meta_str(), b.str(),
                                dtype_name(precision_of(want[i].dtype(), b.single)), shape_str(want[i].sizes()),
                                device_of(b));
        return;
      }
      const double d = relative_difference(have[i], want[i]);
      c.max_error = std::max(c.max_error, d);
      if (!(d <= tol) && c.ok) {
        c.ok = false;
        c.failure = fmt::format("{} {} differs from cpu f64 by {:.3g} of its largest magnitude (tolerance {:.1g})",
                                what, i, d, tol);
      }
    }
  };
  compare(ref.outputs, got.outputs, "output");
  if (c.ok) compare(ref.grads, got.grads, "input gradient");
  return c;
}

DifferentiableFn on_device(const DifferentiableFn& fn, Device d) {
  return [fn, d](const std::vector<Tensor>& x) {
    std::vector<Tensor> moved;
    for (const Tensor& t : x) moved.push_back(t.defined() ? to(t, d) : t);
    std::vector<Tensor> out = fn(moved);
    for (Tensor& t : out)
      if (t.defined()) t = to(t, Device::cpu());
    return out;
  };
}

}  // namespace gs
