// What changed between two configuration texts, key by key: for `train --resume`, which allows the
// changes a resumed run can follow (learning rate, schedule, steps, output cadence) and names the
// ones it cannot.
#pragma once
#include <string>
#include <vector>

namespace gs::tools {

struct ConfigChange {
  std::string key;            // dotted path, "optimizer.lr"; a list changes as a whole
  std::string before, after;  // the values as written, or "(not set)"
};

// Both texts must be valid YAML mappings (configs already read once). Numbers compare by value
// ("3e-3" equals "0.003"); a key absent on one side differs from any value on the other (the
// default is the reader's business, so an explicit default counts as a change).
std::vector<ConfigChange> config_changes(const std::string& before, const std::string& after);

}  // namespace gs::tools
