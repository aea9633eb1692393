// The training checkpoint: everything a run needs to resume, mapped onto one safetensors file
// (models/safetensors.h), written atomically (models/atomic_file.h).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "models/atomic_file.h"
#include "models/module.h"
#include "models/safetensors.h"

namespace gs::models {

// The counter-based generator has no hidden state: what a run must restore is its seed and the
// counters it advanced (e.g. how many noise draws the stepper made), by name.
struct RngState {
  uint64_t seed = 0;
  std::map<std::string, uint64_t> counters;
  bool operator==(const RngState&) const = default;
};

// Everything a training run needs to resume. Stored as one safetensors file:
//   tensors  "model.<name>", "optim.<name>"
//   metadata "gradsphere.format" = "checkpoint-1", "gradsphere.step", "gradsphere.config",
//            "gradsphere.rng.seed", "gradsphere.rng.counter.<name>", "gradsphere.extra.<name>",
//            and the free `metadata` under its own keys (which must not start with "gradsphere.").
struct Checkpoint {
  StateDict model;
  StateDict optimizer;
  std::map<std::string, std::string> extra_state;  // serialised scheduler and other state, by name
  int64_t step = 0;
  RngState rng;
  std::string config;  // the YAML text the run was started with
  Metadata metadata;
};

// "model.x[12] is nan" for the first non-finite value of the checkpoint's weights or optimizer
// state, or nothing when every value is finite.
std::optional<std::string> first_non_finite(const Checkpoint& ckpt);

// Refuses a checkpoint with a non-finite weight or optimizer state: it is never a good one.
void save_checkpoint(const std::filesystem::path& path, const Checkpoint& ckpt);
// Throws gs::Error when the file is not a valid safetensors file or not a gradsphere checkpoint
// (missing or malformed gradsphere.* keys, a metadata checksum missing or failing, tensors outside
// the model./optim. prefixes, a non-finite weight or optimizer state).
Checkpoint load_checkpoint(const std::filesystem::path& path);

}  // namespace gs::models
