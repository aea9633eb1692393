// Which form the sphere ops' contractions take on a device (CUDA; on the CPU only inside a
// CompositePathsOnCpu scope, where the tests run them):
//   gemm     batched GEMMs through matmul on rearranged operands: the Legendre contractions on
//            dense per-order tables (legendre_gemm.h), the spectral convolutions per degree or
//            per (degree, order) (spectral_conv_gemm.h);
//   kernels  hand-written kernels, one thread per output value, with their arithmetic in plain
//            headers shared with CPU loops: the Legendre contractions on the CPU's blocked table
//            (legendre_blocked.h), the spectral contractions on the operands as they are
//            (spectral_conv_kernels.h).
// Process-wide. The default is gemm until the two are timed against each other on a GPU
// (tools/gpu_check.sh runs the benchmarks in both); GS_DEVICE_SPHERE=gemm|kernels in the
// environment sets it at the first read.
#pragma once

namespace gs::sphere {

enum class DeviceSphereForm { gemm, kernels };

// Returns the previous setting.
DeviceSphereForm set_device_sphere_form(DeviceSphereForm form);
DeviceSphereForm device_sphere_form();
const char* device_sphere_form_name(DeviceSphereForm form);  // "gemm", "kernels"

}  // namespace gs::sphere
