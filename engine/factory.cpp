#include "engine/factory.h"

#include <cmath>
#include <numbers>

#include "engine/cuda_runtime.h"
#include "engine/tensor_cuda.h"
#include "gradsphere_config.h"

namespace gs {

Tensor full(const Shape& sizes, double value, DType dtype, Device device) {
  return full_complex(sizes, c128(value, 0.0), dtype, device);
}

Tensor full_complex(const Shape& sizes, c128 value, DType dtype, Device device) {
  GS_CHECK(is_complex(dtype) || value.imag() == 0.0, "full: a complex value needs a complex dtype, got {}",
           dtype_name(dtype));
  if (device.type == DeviceType::cuda) {
    Tensor t = empty(sizes, dtype, device);  // checks that the device is usable
#if GS_HAVE_CUDA
    cuda_kernels::fill(dtype, t.raw_data(), t.numel(), value.real(), value.imag(),
                       cuda::current_stream(device.index).handle);
    cuda::check_launch("fill", "full");
#endif
    return t;
  }
  Tensor cpu = empty(sizes, dtype, Device::cpu());
  dispatch_storage(dtype, "full", [&]<typename T>() {
    T v;
    if constexpr (is_complex_v<T>) {
      v = T(static_cast<real_t<T>>(value.real()), static_cast<real_t<T>>(value.imag()));
    } else {
      GS_CHECK(value.imag() == 0.0, "full: a complex value needs a complex dtype, got {}", dtype_name(dtype));
      v = static_cast<T>(value.real());
    }
    T* p = cpu.data<T>();
    std::fill(p, p + cpu.numel(), v);
  });
  return cpu;
}

Tensor zeros(const Shape& sizes, DType dtype, Device device) { return full(sizes, 0.0, dtype, device); }
Tensor ones(const Shape& sizes, DType dtype, Device device) { return full(sizes, 1.0, dtype, device); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), t.dtype(), t.device()); }
Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }

Tensor arange(double start, double end, double step, DType dtype) {
  GS_CHECK(step != 0.0, "arange: step must be non-zero");
  GS_CHECK((end - start) * step >= 0, "arange: step {} does not move from {} towards {}", step, start, end);
  auto n = static_cast<int64_t>(std::ceil((end - start) / step));
  Tensor t = empty({n}, dtype);
  dispatch_real(dtype, "arange", [&]<typename T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return t;
}

Tensor arange(int64_t n, DType dtype) { return arange(0.0, static_cast<double>(n), 1.0, dtype); }

Tensor linspace(double start, double end, int64_t steps, DType dtype) {
  GS_CHECK(steps >= 0, "linspace: steps must be non-negative, got {}", steps);
  Tensor t = empty({steps}, dtype);
  dispatch_float(dtype, "linspace", [&]<typename T>() {
    T* p = t.data<T>();
    double h = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
    // Fill symmetrically from both ends so the last value is exactly `end`. The first half is
    // rounded up so that a single step gives `start` (as numpy and torch do), not `end`.
    for (int64_t i = 0; i < steps; ++i)
      p[i] = static_cast<T>(i < (steps + 1) / 2 ? start + h * static_cast<double>(i)
                                                : end - h * static_cast<double>(steps - 1 - i));
  });
  return t;
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, Shape sizes) {
  if (sizes.empty() && values.size() != 1) sizes = {static_cast<int64_t>(values.size())};
  GS_CHECK(numel_of(sizes) == static_cast<int64_t>(values.size()),
           "from_vector: {} values do not fill shape {} ({} elements)", values.size(), shape_str(sizes),
           numel_of(sizes));
  Tensor t = empty(sizes, dtype_of<T>::value);
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}
template Tensor from_vector(const std::vector<float>&, Shape);
template Tensor from_vector(const std::vector<double>&, Shape);
template Tensor from_vector(const std::vector<c64>&, Shape);
template Tensor from_vector(const std::vector<c128>&, Shape);
template Tensor from_vector(const std::vector<int64_t>&, Shape);
template Tensor from_vector(const std::vector<bfloat16>&, Shape);

Tensor from_vector(const std::vector<bool>& values, Shape sizes) {
  if (sizes.empty() && values.size() != 1) sizes = {static_cast<int64_t>(values.size())};
  GS_CHECK(numel_of(sizes) == static_cast<int64_t>(values.size()), "from_vector: {} values do not fill shape {}",
           values.size(), shape_str(sizes));
  Tensor t = empty(sizes, DType::b8);
  bool* p = t.data<bool>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

namespace {

// Calls f(local_linear_index, global_linear_index) for every element of the window.
template <typename F>
void for_each_global_index(const Shape& sizes, const RandomWindow* w, F&& f) {
  int64_t n = numel_of(sizes);
  if (!w) {
    for (int64_t i = 0; i < n; ++i) f(i, static_cast<uint64_t>(i));
    return;
  }
  GS_CHECK(w->global_sizes.size() == sizes.size() && w->start.size() == sizes.size(),
           "random window: expected global sizes and start with {} dims, got {} and {}", sizes.size(),
           shape_str(w->global_sizes), shape_str(w->start));
  for (size_t d = 0; d < sizes.size(); ++d)
    GS_CHECK(w->start[d] >= 0 && w->start[d] + sizes[d] <= w->global_sizes[d],
             "random window: block start {} with sizes {} does not fit in the global shape {}",
             shape_str(w->start), shape_str(sizes), shape_str(w->global_sizes));
  Shape gstride = contiguous_strides(w->global_sizes);
  Shape idx(sizes.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t g = 0;
    for (size_t d = 0; d < sizes.size(); ++d) g += static_cast<uint64_t>((idx[d] + w->start[d]) * gstride[d]);
    f(i, g);
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
}

template <typename R>
void normal_pair(const std::array<uint32_t, 4>& w, R& a, R& b) {
  // Box-Muller on two uniforms in (0, 1].
  double u1 = 1.0 - uniform_f64(w[0], w[1]);
  double u2 = uniform_f64(w[2], w[3]);
  double r = std::sqrt(-2.0 * std::log(u1));
  a = static_cast<R>(r * std::cos(2.0 * std::numbers::pi * u2));
  b = static_cast<R>(r * std::sin(2.0 * std::numbers::pi * u2));
}

}  // namespace

Tensor rand(const Shape& sizes, RandomKey key, DType dtype, const RandomWindow* window) {
  Tensor t = empty(sizes, dtype);
  dispatch_float_complex(dtype, "rand", [&]<typename T>() {
    T* p = t.data<T>();
    for_each_global_index(sizes, window, [&](int64_t i, uint64_t g) {
      auto w = philox4x32(key, g);
      if constexpr (is_complex_v<T>) {
        p[i] = T(static_cast<real_t<T>>(uniform_f64(w[0], w[1])), static_cast<real_t<T>>(uniform_f64(w[2], w[3])));
      } else {
        p[i] = static_cast<T>(uniform_f64(w[0], w[1]));
        if constexpr (std::is_same_v<T, float>) p[i] = std::min(p[i], std::nextafter(1.0f, 0.0f));
      }
    });
  });
  return t;
}

Tensor randn(const Shape& sizes, RandomKey key, DType dtype, const RandomWindow* window) {
  Tensor t = empty(sizes, dtype);
  dispatch_float_complex(dtype, "randn", [&]<typename T>() {
    T* p = t.data<T>();
    for_each_global_index(sizes, window, [&](int64_t i, uint64_t g) {
      real_t<T> a, b;
      normal_pair(philox4x32(key, g), a, b);
      if constexpr (is_complex_v<T>) {
        p[i] = T(a * static_cast<real_t<T>>(std::numbers::sqrt2 / 2), b * static_cast<real_t<T>>(std::numbers::sqrt2 / 2));
      } else {
        p[i] = a;
      }
    });
  });
  return t;
}

}  // namespace gs
