// Which kernels a sphere contraction runs: the one rule, for the Legendre contractions
// (contraction.h) and the spectral convolutions (spectral_conv.cpp).
//
//   1. composite_path(x) (x on CUDA, or on the CPU inside a CompositePathsOnCpu scope, where the
//      tests run these paths): the device form decides,
//        gemm    -> device_gemm:    batched GEMMs through matmul on rearranged operands (gemm.h,
//                                   spectral_conv_gemm.h);
//        kernels -> device_kernels: hand-written kernels, one thread per output value, arithmetic in
//                                   plain headers shared with CPU loops (blocked.h,
//                                   spectral_conv_kernels.h).
//   2. otherwise, on the CPU: the native kernels (cpu_table: the cached blocked table for Legendre,
//      table_kernels.h; the spectral convolution's own loops), except that a scalar Legendre
//      contraction over every order takes cpu_recurrence (Pbar generated on the fly,
//      recurrence.h) when its table is large per field: the measured rule of ops/sphere/NOTES.md,
//      "On-the-fly path", in use_recurrence below.
//
// Both settings are process-wide. The device form is gemm by default: on an H200 it trains faster
// in every case, the kernels form winning only single-field SHTs on large grids (ops/BENCHMARKS.md,
// "CUDA on an H200");
// GS_DEVICE_SPHERE=gemm|kernels in the environment sets it at the first read. The CPU Legendre
// path can be forced (tests compare the paths, benchmarks time each).
#pragma once
#include <cstdint>

#include "engine/tensor.h"
#include "ops/sphere/legendre/table.h"

namespace gs::sphere {

enum class ContractionPath { cpu_table, cpu_recurrence, device_gemm, device_kernels };
const char* contraction_path_name(ContractionPath path);  // "cpu_table", ...

// The path of a Legendre contraction of x (batch fields) with the table of `key`; `vector` data
// never takes the recurrence (it has no on-the-fly kernels).
ContractionPath legendre_contraction_path(const Tensor& x, const LegendreTableKey& key, int64_t batch, bool vector);
// The path of a spectral convolution's contraction of x: cpu_table (its native loops) or a device form.
ContractionPath spectral_contraction_path(const Tensor& x);

// ---- the settings

enum class DeviceSphereForm { gemm, kernels };
DeviceSphereForm set_device_sphere_form(DeviceSphereForm form);  // returns the previous setting
DeviceSphereForm device_sphere_form();
const char* device_sphere_form_name(DeviceSphereForm form);  // "gemm", "kernels"

// The CPU Legendre path: `automatic` applies the measured rule, the others force one path.
enum class LegendrePath { automatic, table, recurrence };
LegendrePath set_legendre_path(LegendrePath path);  // returns the previous setting
LegendrePath legendre_path();

// Whether a CPU contraction with table `key` on `batch` fields runs on the fly: the setting if
// forced, else the measured rule. A key of a slice of the orders always takes the table path.
bool use_recurrence(const LegendreTableKey& key, int64_t batch);

}  // namespace gs::sphere
