// The training checkpoint layout on a safetensors file (models/checkpoint.h).
#include "models/checkpoint.h"

#include <charconv>
#include <cmath>

#include "engine/error.h"
#include "engine/factory.h"

namespace gs::models {

namespace fs = std::filesystem;

// ---- training checkpoints

namespace {

constexpr const char* kFormatKey = "gradsphere.format";
// checkpoint-2: the metadata (configuration, normaliser) is under a checksum too.
constexpr const char* kFormatValue = "checkpoint-2";
constexpr const char* kStepKey = "gradsphere.step";
constexpr const char* kConfigKey = "gradsphere.config";
constexpr const char* kSeedKey = "gradsphere.rng.seed";
const std::string kCounterPrefix = "gradsphere.rng.counter.";
const std::string kExtraPrefix = "gradsphere.extra.";
const std::string kReservedPrefix = "gradsphere.";
const std::string kModelPrefix = "model.";
const std::string kOptimPrefix = "optim.";

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

template <typename Int>
Int parse_int(const fs::path& path, const std::string& key, const std::string& text) {
  Int v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  GS_CHECK(ec == std::errc() && end == text.data() + text.size() && !text.empty(),
           "checkpoint '{}': metadata '{}' should be an integer, found '{}'", path.string(), key, text);
  return v;
}

// The first non-finite value of t, as "[i] is nan".
std::optional<std::string> non_finite_in(const Tensor& t) {
  if (is_storage_only(t.dtype())) return non_finite_in(cast_copy(t, compute_dtype(t.dtype())));
  if (!is_floating(t.dtype()) && !is_complex(t.dtype())) return std::nullopt;
  const Tensor c = contiguous_copy(t.device().is_cpu() ? t : to_device_copy(t, Device::cpu()));
  const int64_t n = c.numel() * (is_complex(c.dtype()) ? 2 : 1);
  auto scan = [&](const auto* p) -> std::optional<std::string> {
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(p[i]))
        return fmt::format("[{}] is {}", is_complex(c.dtype()) ? i / 2 : i, static_cast<double>(p[i]));
    return std::nullopt;
  };
  if (c.dtype() == DType::f32 || c.dtype() == DType::c64) return scan(static_cast<const float*>(c.raw_data()));
  return scan(static_cast<const double*>(c.raw_data()));
}

}  // namespace

std::optional<std::string> first_non_finite(const Checkpoint& ckpt) {
  for (const auto& [prefix, dict] : {std::pair{&kModelPrefix, &ckpt.model}, std::pair{&kOptimPrefix, &ckpt.optimizer}})
    for (const auto& [name, t] : *dict)
      if (auto where = non_finite_in(t)) return *prefix + name + *where;
  return std::nullopt;
}

void save_checkpoint(const fs::path& path, const Checkpoint& ckpt) {
  if (auto bad = first_non_finite(ckpt))
    fail("save_checkpoint('{}'): {}; a checkpoint with a non-finite weight or optimizer state is never written",
         path.string(), *bad);
  StateDict tensors;
  for (const auto& [name, t] : ckpt.model) tensors[kModelPrefix + name] = t;
  for (const auto& [name, t] : ckpt.optimizer) tensors[kOptimPrefix + name] = t;
  Metadata meta;
  for (const auto& [key, value] : ckpt.metadata) {
    GS_CHECK(!starts_with(key, kReservedPrefix),
             "save_checkpoint('{}'): metadata key '{}' uses the reserved prefix 'gradsphere.'; expected a key "
             "outside it (step, config, RNG and extra state have their own fields)",
             path.string(), key);
    meta[key] = value;
  }
  meta[kFormatKey] = kFormatValue;
  meta[kStepKey] = std::to_string(ckpt.step);
  meta[kConfigKey] = ckpt.config;
  meta[kSeedKey] = std::to_string(ckpt.rng.seed);
  for (const auto& [name, count] : ckpt.rng.counters) meta[kCounterPrefix + name] = std::to_string(count);
  for (const auto& [name, text] : ckpt.extra_state) meta[kExtraPrefix + name] = text;
  save_safetensors(path, tensors, meta);
}

Checkpoint load_checkpoint(const fs::path& path) {
  SafetensorsContents file = load_safetensors(path);
  auto required = [&](const char* key) -> const std::string& {
    auto it = file.metadata.find(key);
    GS_CHECK(it != file.metadata.end(),
             "checkpoint '{}': missing metadata '{}'; expected a checkpoint written by save_checkpoint", path.string(),
             key);
    return it->second;
  };
  GS_CHECK(required(kFormatKey) == kFormatValue,
           "checkpoint '{}': metadata '{}' is '{}', expected '{}'{}", path.string(), kFormatKey, required(kFormatKey),
           kFormatValue,
           required(kFormatKey) == "checkpoint-1"
               ? " (checkpoint-1 files, from earlier gradsphere versions, carry no checksum of their configuration "
                 "and normaliser, so they cannot be trusted: train again)"
               : "");
  GS_CHECK(file.metadata_checked,
           "checkpoint '{}': its metadata has no checksum; a checkpoint's configuration and normaliser change results, "
           "so a gradsphere checkpoint always carries one (the file was rewritten by another tool?)",
           path.string());
  GS_CHECK(file.tensors_checked,
           "checkpoint '{}': its tensors have no checksums; a gradsphere checkpoint always carries one per tensor (the "
           "file was rewritten by another tool?)",
           path.string());
  Checkpoint ckpt;
  ckpt.step = parse_int<int64_t>(path, kStepKey, required(kStepKey));
  ckpt.config = required(kConfigKey);
  ckpt.rng.seed = parse_int<uint64_t>(path, kSeedKey, required(kSeedKey));
  for (const auto& [key, value] : file.metadata) {
    if (starts_with(key, kCounterPrefix)) {
      ckpt.rng.counters[key.substr(kCounterPrefix.size())] = parse_int<uint64_t>(path, key, value);
    } else if (starts_with(key, kExtraPrefix)) {
      ckpt.extra_state[key.substr(kExtraPrefix.size())] = value;
    } else if (!starts_with(key, kReservedPrefix)) {
      ckpt.metadata[key] = value;
    } else {
      GS_CHECK(key == kFormatKey || key == kStepKey || key == kConfigKey || key == kSeedKey,
               "checkpoint '{}': unknown metadata key '{}' in the reserved 'gradsphere.' namespace (written by a "
               "newer version?)",
               path.string(), key);
    }
  }
  for (auto& [name, t] : file.tensors) {
    if (starts_with(name, kModelPrefix))
      ckpt.model[name.substr(kModelPrefix.size())] = std::move(t);
    else if (starts_with(name, kOptimPrefix))
      ckpt.optimizer[name.substr(kOptimPrefix.size())] = std::move(t);
    else
      fail("checkpoint '{}': tensor '{}' has neither the 'model.' nor the 'optim.' prefix", path.string(), name);
  }
  if (auto bad = first_non_finite(ckpt))
    fail("checkpoint '{}': {}; a checkpoint with a non-finite weight or optimizer state is not a usable one",
         path.string(), *bad);
  return ckpt;
}

}  // namespace gs::models
