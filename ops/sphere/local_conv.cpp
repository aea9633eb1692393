// SFNO channel mixing and local convolution: conv1x1 and local_conv3x3 are GEMMs through
// gs::matmul; local_conv3x3 is fed by a pole-aware gather whose backward is the matching
// scatter-add (and the scatter's backward is the gather again). On CUDA the gather and scatter are
// kernels of their own (neighbours_cuda.cu) with the index rules of neighbours_math.h.
#include <algorithm>
#include <string>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/sphere/neighbours_cuda.h"
#include "ops/sphere/neighbours_math.h"
#include "ops/sphere/sfno_block_common.h"
#include "ops/sphere/sfno_blocks.h"
#include "ops/view.h"

namespace gs::sphere {
using namespace detail;
using V = std::vector<Tensor>;
namespace {

constexpr int64_t kTaps = 9;  // 3x3

// Where row h of tap k = dh*3 + dw reads from: a source row, and the source column of w = 0 (the
// rest of the row follows cyclically). One entry per (tap, row).
struct RowSource {
  int64_t row, col0;
};

std::vector<RowSource> row_sources(int64_t H, int64_t W) {
  std::vector<RowSource> src(static_cast<size_t>(kTaps * H));
  for (int64_t k = 0; k < kTaps; ++k)
    for (int64_t h = 0; h < H; ++h) {
      GridPoint p = sphere_neighbour_index(h, 0, k / 3, k % 3, H, W, 3);
      src[static_cast<size_t>(k * H + h)] = {p.row, p.col};
    }
  return src;
}

void check_even_lon(const Tensor& x, const char* op) {
  GS_CHECK(x.size(3) % 2 == 0 && x.size(2) >= 1,
           "{}: expected an even number of longitudes (across a pole the neighbour row is rotated by W/2) and at "
           "least one latitude, got x {} with W = {}",
           op, shape_str(x.sizes()), x.size(3));
}

Tensor neighbours_scatter(const Tensor& g, const Shape& x_sizes);

// The gather (out (planes, 9, H, W) from in (planes, H, W)) or the scatter (the reverse) on CUDA;
// in contiguous, out fresh.
void cuda_neighbours(bool gather, const Tensor& in, const Tensor& out, int64_t H, int64_t W, const char* name) {
  [[maybe_unused]] const int64_t planes = out.numel() / (gather ? kTaps * H * W : H * W);
  kernels::launch_cuda(name, gather ? "neighbours_gather" : "neighbours_scatter", in, [&](void* stream) {
    return gather ? GS_CUDA_CALL(cuda_kernels::neighbours_gather(in.dtype(), out.raw_data(), in.raw_data(), planes, H, W, stream))
                  : GS_CUDA_CALL(cuda_kernels::neighbours_scatter(in.dtype(), out.raw_data(), in.raw_data(), planes, H, W, stream));
  });
}

// x (B, C, H, W) -> (B, C, 3, 3, H, W): each output row is a source row rotated by col0 (two copies).
Tensor neighbours_gather(const Tensor& x) {
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), HW = H * W;
  Tensor out = empty({B, C, 3, 3, H, W}, x.dtype(), x.device());
  if (out.numel() > 0 && kernels::on_cuda(x)) {
    cuda_neighbours(true, contiguous_copy(x), out, H, W, "sphere_neighbours3x3");
  } else if (out.numel() > 0) {
    const std::vector<RowSource> src = row_sources(H, W);
    Tensor xc = contiguous_copy(x);
    dispatch_float_complex(x.dtype(), "sphere_neighbours3x3", [&]<typename T>() {
      const T* px = xc.data<T>();
      T* po = out.data<T>();
      parallel_tasks(B * C, out.numel(), [&](int64_t p) {
        for (int64_t j = 0; j < kTaps * H; ++j) {
          const T* s = px + p * HW + src[j].row * W;
          T* d = po + p * kTaps * HW + j * W;
          const int64_t c0 = src[j].col0;
          std::copy(s + c0, s + W, d);
          std::copy(s, s + c0, d + (W - c0));
        }
      });
    });
  }
  if (should_record({x})) {
    Shape xs = x.sizes();
    record_op("sphere_neighbours3x3", {x}, {&out}, {}, {}, [xs](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{neighbours_scatter(g[0], xs)};
    });
  }
  return out;
}

// The adjoint: g (B, C, 3, 3, H, W) -> (B, C, H, W), each tap's row added back onto the row it read.
Tensor neighbours_scatter(const Tensor& g, const Shape& x_sizes) {
  const int64_t B = x_sizes[0], C = x_sizes[1], H = x_sizes[2], W = x_sizes[3], HW = H * W;
  GS_CHECK(g.sizes() == Shape({B, C, 3, 3, H, W}), "sphere_neighbours3x3 backward: expected a gradient {}, got {}",
           shape_str({B, C, 3, 3, H, W}), g.meta_str());
  const bool on_cuda = kernels::on_cuda(g);
  Tensor out = on_cuda ? empty(x_sizes, g.dtype(), g.device()) : zeros(x_sizes, g.dtype(), g.device());
  if (out.numel() > 0 && on_cuda) {
    cuda_neighbours(false, contiguous_copy(g), out, H, W, "sphere_neighbours3x3_backward");
  } else if (out.numel() > 0) {
    const std::vector<RowSource> src = row_sources(H, W);
    Tensor gc = contiguous_copy(g);
    dispatch_float_complex(g.dtype(), "sphere_neighbours3x3_backward", [&]<typename T>() {
      const T* pg = gc.data<T>();
      T* po = out.data<T>();
      // One plane per task: every tap of a plane lands in that plane, so tasks never collide.
      parallel_tasks(B * C, g.numel(), [&](int64_t p) {
        for (int64_t j = 0; j < kTaps * H; ++j) {
          const T* s = pg + p * kTaps * HW + j * W;
          T* d = po + p * HW + src[j].row * W;
          const int64_t c0 = src[j].col0, n1 = W - c0;
          for (int64_t w = 0; w < n1; ++w) d[c0 + w] += s[w];
          for (int64_t w = 0; w < c0; ++w) d[w] += s[n1 + w];
        }
      });
    });
  }
  if (should_record({g}))
    record_op("sphere_neighbours3x3_backward", {g}, {&out}, {}, {}, [](BackwardContext&, const std::vector<Tensor>& gg) {
      return std::vector<Tensor>{neighbours_gather(gg[0])};
    });
  return out;
}

}  // namespace

GridPoint sphere_neighbour_index(int64_t h, int64_t w, int64_t dh, int64_t dw, int64_t H, int64_t W, int64_t k) {
  GS_CHECK(k >= 1 && k % 2 == 1 && dh >= 0 && dh < k && dw >= 0 && dw < k && h >= 0 && h < H && w >= 0 && w < W,
           "sphere_neighbour_index: expected an odd k, 0 <= dh, dw < k and (h, w) on the {}x{} grid, got k = {}, "
           "(dh, dw) = ({}, {}), (h, w) = ({}, {})",
           H, W, k, dh, dw, h, w);
  GS_CHECK(W % 2 == 0, "sphere_neighbour_index: expected an even number of longitudes W, got {}", W);
  const int64_t r = h + dh - k / 2;
  GS_CHECK(r >= -H && r < 2 * H, "sphere_neighbour_index: a {}x{} stencil reaches past both poles of a grid of {} rows",
           k, k, H);
  const neighbours::Source s = neighbours::source(h, w, dh, dw, H, W, k);
  return {s.row, s.col};
}

Tensor conv1x1(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const char* op = "conv1x1";
  // x may be bf16 storage (an activation kept at half the bytes): matmul reads it as f32.
  check_field(x, op, "x (B, C, H, W)", /*allow_storage=*/true);
  const int64_t B = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Cout = check_conv_params(x, weight, bias, 1, op);
  Tensor y = reshape(matmul(weight, reshape(x, {B, Cin, H * W})), {B, Cout, H, W});  // (Cout, Cin) @ (B, Cin, HW)
  return bias.defined() ? add(y, reshape(bias, {Cout, 1, 1})) : y;
}

Tensor sphere_neighbours3x3(const Tensor& x) {
  check_field(x, "sphere_neighbours3x3");
  check_even_lon(x, "sphere_neighbours3x3");
  return neighbours_gather(x);
}

Tensor local_conv3x3(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const char* op = "local_conv3x3";
  check_field(x, op);
  check_even_lon(x, op);
  const int64_t B = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Cout = check_conv_params(x, weight, bias, 3, op);
  Tensor cols = reshape(neighbours_gather(x), {B, Cin * kTaps, H * W});               // (B, Cin*9, HW)
  Tensor y = reshape(matmul(reshape(weight, {Cout, Cin * kTaps}), cols), {B, Cout, H, W});
  return bias.defined() ? add(y, reshape(bias, {Cout, 1, 1})) : y;
}

namespace {
// conv1x1 is matmul and add, so it runs wherever they do.
const OpRegistrar composed{
    {"conv1x1",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"bias", {sample_leaf({2, 3, 2, 3}, sub_key(k, 1)), sample_leaf({2, 3}, sub_key(k, 2)), sample_leaf({2}, sub_key(k, 3))}},
           {"no bias, non-contiguous", {sample_leaf_transposed({2, 3, 3, 2}, sub_key(k, 4)), sample_leaf({2, 3}, sub_key(k, 5))}}};
     },
     [](const V& x) { return V{conv1x1(x[0], x[1], x.size() > 2 ? x[2] : Tensor())}; }},
};
const OpRegistrar registrar{{
    {"local_conv3x3",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"bias", {sample_leaf({2, 2, 3, 4}, sub_key(k, 1)), sample_leaf({2, 2, 3, 3}, sub_key(k, 2)), sample_leaf({2}, sub_key(k, 3))}},
           {"one row, no bias", {sample_leaf({1, 1, 1, 2}, sub_key(k, 4)), sample_leaf({2, 1, 3, 3}, sub_key(k, 5))}}};
     },
     [](const V& x) { return V{local_conv3x3(x[0], x[1], x.size() > 2 ? x[2] : Tensor())}; }},
    {"sphere_neighbours3x3",
     [](RandomKey k) { return std::vector<OpSample>{{"3x4 grid", {sample_leaf({1, 2, 3, 4}, sub_key(k, 1))}}}; },
     [](const V& x) { return V{sphere_neighbours3x3(x[0])}; }},
}};
}  // namespace
}  // namespace gs::sphere
