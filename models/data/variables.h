// Variables and their roles, as ACE has them (fme's in_names / out_names):
//   prognostic  in and out: predicted, and the prediction is fed back as the next input;
//   forcing     in only: read from the data at every step (the forcing at the step's input time,
//               as ACE), never predicted (sea-surface temperature, insolation, land fraction);
//   diagnostic  out only: predicted and scored, never fed back (precipitation).
// A data source holds its channels in role order, prognostic | forcing | diagnostic, so the model's
// input is the first P + F channels and its output the prognostic and diagnostic ones.
//
// A variable over levels, (time, lev, lat, lon), becomes one channel per selected level, named as
// ACE names them: <name>_<k> with k its index along the level dimension in file order.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gs::models {

enum class VariableRole { prognostic, forcing, diagnostic };
const char* role_name(VariableRole r);  // "prognostic", "forcing", "diagnostic"

// Which levels of a variable over levels to use. Empty lists: every level.
struct LevelSelection {
  std::vector<double> values;   // by the level coordinate's value (e.g. 850, 500 hPa)
  std::vector<int64_t> indices;  // by index along the level dimension (file order)
  bool all() const { return values.empty() && indices.empty(); }
};

// One variable asked for: its name in the data, its role, and (for a variable over levels) the
// levels to take.
struct VariableRequest {
  std::string name;
  VariableRole role = VariableRole::prognostic;
  LevelSelection levels;
  VariableRequest() = default;
  VariableRequest(std::string n, VariableRole r = VariableRole::prognostic, LevelSelection l = {})  // NOLINT: a name alone asks for a prognostic variable
      : name(std::move(n)), role(r), levels(std::move(l)) {}
  VariableRequest(const char* n) : VariableRequest(std::string(n)) {}  // NOLINT
};

// The channel counts of each role; the channels are in role order.
struct ChannelLayout {
  int64_t prognostic = 0, forcing = 0, diagnostic = 0;
  int64_t total() const { return prognostic + forcing + diagnostic; }
  int64_t model_inputs() const { return prognostic + forcing; }
  int64_t model_outputs() const { return prognostic + diagnostic; }
  // Every channel prognostic (the layout of data without roles).
  static ChannelLayout all_prognostic(int64_t channels) { return {channels, 0, 0}; }
  bool operator==(const ChannelLayout&) const = default;
};

// The data channels the model predicts, in its output order: the prognostic, then the diagnostic.
std::vector<int64_t> output_channel_indices(const ChannelLayout& l);

// The layout of per-channel roles that must already be in role order (throws otherwise); empty
// roles: every one of `channels` prognostic.
ChannelLayout layout_of(const std::vector<VariableRole>& roles, int64_t channels);

// The requests in role order (prognostic, then forcing, then diagnostic), each list in its given
// order. Throws when a name appears twice.
std::vector<VariableRequest> in_role_order(const std::vector<VariableRequest>& requests);

// "T_0", "T_1", ...: the channel name of level index k of variable `name`.
std::string level_channel_name(const std::string& name, int64_t k);

}  // namespace gs::models
