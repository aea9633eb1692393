// The training checkpoint: everything a run needs to resume, mapped onto one safetensors file
// (models/safetensors.h), written atomically (models/atomic_file.h).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
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

void save_checkpoint(const std::filesystem::path& path, const Checkpoint& ckpt);
// Throws gs::Error when the file is not a valid safetensors file or not a gradsphere checkpoint
// (missing or malformed gradsphere.* keys, tensors outside the model./optim. prefixes).
Checkpoint load_checkpoint(const std::filesystem::path& path);

}  // namespace gs::models
