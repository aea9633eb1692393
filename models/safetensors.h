// safetensors files (the HuggingFace format, so PyTorch and friends can read our weights and we can
// read theirs).
//
// Format decisions:
// - dtypes: f32 "F32", f64 "F64", i64 "I64", bool "BOOL", bf16 "BF16", c64 "C64" (safetensors >= 0.7 and torch
//   load it as complex64). safetensors has no 128-bit complex type, so a c128 tensor of shape S is
//   stored as "F64" of shape S + (2,) (real, imaginary pairs; torch.view_as_complex restores it) and
//   its name is listed in the metadata key "gradsphere.complex128" (a JSON array of names).
// - Integrity: "gradsphere.checksum" holds a JSON object {name: "crc32:xxxxxxxx"} with the CRC-32
//   (zlib's polynomial, so Python's zlib.crc32 agrees) of each tensor's data bytes. A flipped data
//   bit keeps the file structurally valid; only the checksum can catch it. "gradsphere.metadata_checksum"
//   covers the caller's metadata (every key and value): a checkpoint's metadata holds its
//   configuration and normaliser, which change results as much as the weights do, so an edited value
//   is an error too. Files without the keys (written by other tools) load unchecked, and say so
//   (SafetensorsContents::metadata_checked).
// - Those keys are the reader's and writer's business: load_safetensors() removes them from the
//   metadata it returns and save_safetensors() refuses them from the caller.
// - Writes are atomic (AtomicFile, models/atomic_file.h): a crash or an error never leaves a half-written file in
//   place of a good one.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "engine/tensor.h"
#include "models/module.h"

namespace gs::models {

using Metadata = std::map<std::string, std::string>;

// Writes `tensors` (any device, any strides; values are copied out contiguously) and `metadata` to
// `path`, replacing it atomically. Names must be non-empty UTF-8 and not "__metadata__".
void save_safetensors(const std::filesystem::path& path, const StateDict& tensors, const Metadata& metadata = {});

struct SafetensorsContents {
  StateDict tensors;  // contiguous CPU tensors
  Metadata metadata;
  bool metadata_checked = false;  // the file carried a metadata checksum and it matched
  bool tensors_checked = false;   // the file carried a checksum for every tensor and they matched
};

// Reads and validates a whole safetensors file: any structural defect (short file, bad header length,
// invalid JSON, missing or malformed fields, unknown dtype, sizes that disagree with offsets,
// overlapping, out-of-range or gapped data, trailing bytes, duplicate names, bool bytes other than
// 0/1, more than a million tensors) or a checksum mismatch throws gs::Error naming the file, what was expected and what was found.
SafetensorsContents load_safetensors(const std::filesystem::path& path);

// CRC-32 (IEEE 802.3 / zlib polynomial), continuing from `crc` (0 to start).
uint32_t crc32(const void* data, size_t nbytes, uint32_t crc = 0);

}  // namespace gs::models
