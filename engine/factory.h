// Tensor factories (no autograd history; set_requires_grad() makes a leaf).
#pragma once
#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"

namespace gs {

Tensor zeros(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
Tensor ones(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
Tensor full(const Shape& sizes, double value, DType dtype = DType::f32, Device device = Device::cpu());
Tensor full_complex(const Shape& sizes, c128 value, DType dtype = DType::c64, Device device = Device::cpu());
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor scalar_tensor(double value, DType dtype = DType::f32);
// [start, end) in steps of `step`.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::f32);
Tensor arange(int64_t n, DType dtype = DType::i64);
// `steps` evenly spaced values from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, DType dtype = DType::f32);

// From a row-major vector; the shape defaults to 1-D.
template <typename T>
Tensor from_vector(const std::vector<T>& values, Shape sizes = {});
Tensor from_vector(const std::vector<bool>& values, Shape sizes = {});

// The window [start, start + local_sizes) of a field of `global_sizes` whose random values are
// keyed by global element index. rand/randn on a whole tensor is the window at the origin.
struct RandomWindow {
  Shape global_sizes;
  Shape start;
};
// Uniform in [0, 1). Complex dtypes draw real and imaginary parts independently.
Tensor rand(const Shape& sizes, RandomKey key, DType dtype = DType::f32, const RandomWindow* window = nullptr);
// Standard normal (Box-Muller). Complex: real and imaginary parts each with variance 1/2.
Tensor randn(const Shape& sizes, RandomKey key, DType dtype = DType::f32, const RandomWindow* window = nullptr);

}  // namespace gs
