// The DType enum alone, for CUDA sources: nvcc's host pass cannot compile fmt's compile-time
// format checks, so .cu files include no header that uses fmt (engine/dtype.h has the rest).
#pragma once
#include <cstdint>

namespace gs {

// bf16 is a storage dtype (engine/dtype.h: is_storage_only): tensors hold it, arithmetic widens to f32.
enum class DType : uint8_t { f32, f64, c64, c128, i64, b8, bf16 };

}  // namespace gs
