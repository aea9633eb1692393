// Roles and channel names (variables.h).
#include "models/data/variables.h"

#include <set>

#include <fmt/format.h>

#include "engine/error.h"

namespace gs::models {

const char* role_name(VariableRole r) {
  switch (r) {
    case VariableRole::prognostic: return "prognostic";
    case VariableRole::forcing: return "forcing";
    case VariableRole::diagnostic: return "diagnostic";
  }
  return "unknown";
}

ChannelLayout layout_of(const std::vector<VariableRole>& roles, int64_t channels) {
  if (roles.empty()) return ChannelLayout::all_prognostic(channels);
  GS_CHECK(static_cast<int64_t>(roles.size()) == channels, "channel roles: expected one role per channel ({}), got {}",
           channels, roles.size());
  ChannelLayout l;
  int last = 0;
  for (size_t c = 0; c < roles.size(); ++c) {
    const int r = static_cast<int>(roles[c]);
    GS_CHECK(r >= last, "channel roles: expected the channels in role order (prognostic, forcing, diagnostic), but "
             "channel {} is {} after a {} channel", c, role_name(roles[c]), role_name(static_cast<VariableRole>(last)));
    last = r;
    (roles[c] == VariableRole::prognostic ? l.prognostic : roles[c] == VariableRole::forcing ? l.forcing : l.diagnostic)++;
  }
  GS_CHECK(l.model_outputs() > 0, "channel roles: expected at least one prognostic or diagnostic channel (the model "
           "predicts them), got only {} forcing channel(s)", l.forcing);
  return l;
}

std::vector<VariableRequest> in_role_order(const std::vector<VariableRequest>& requests) {
  std::set<std::string> seen;
  for (const auto& r : requests)
    GS_CHECK(seen.insert(r.name).second, "variables: '{}' is listed twice (a variable has one role)", r.name);
  std::vector<VariableRequest> out;
  for (VariableRole role : {VariableRole::prognostic, VariableRole::forcing, VariableRole::diagnostic})
    for (const auto& r : requests)
      if (r.role == role) out.push_back(r);
  return out;
}

std::vector<int64_t> output_channel_indices(const ChannelLayout& l) {
  std::vector<int64_t> out;
  for (int64_t c = 0; c < l.prognostic; ++c) out.push_back(c);
  for (int64_t c = 0; c < l.diagnostic; ++c) out.push_back(l.model_inputs() + c);
  return out;
}

std::string level_channel_name(const std::string& name, int64_t k) { return fmt::format("{}_{}", name, k); }

}  // namespace gs::models
