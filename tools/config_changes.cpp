#include "tools/config_changes.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <set>

namespace gs::tools {
namespace {

constexpr const char* kNotSet = "(not set)";

std::string shown(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return kNotSet;
  if (n.IsScalar()) return n.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << n;
  return out.c_str();
}

bool same_scalar(const std::string& a, const std::string& b) {
  if (a == b) return true;
  char *ea = nullptr, *eb = nullptr;
  const double x = std::strtod(a.c_str(), &ea), y = std::strtod(b.c_str(), &eb);
  return !a.empty() && !b.empty() && *ea == '\0' && *eb == '\0' && x == y;
}

bool same(const YAML::Node& a, const YAML::Node& b) {
  const bool da = a.IsDefined() && !a.IsNull(), db = b.IsDefined() && !b.IsNull();
  if (!da || !db) return da == db;
  if (a.Type() != b.Type()) return false;
  if (a.IsScalar()) return same_scalar(a.Scalar(), b.Scalar());
  if (a.IsSequence()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!same(a[i], b[i])) return false;
    return true;
  }
  return shown(a) == shown(b);  // maps inside lists: compared as written
}

void diff(const YAML::Node& a, const YAML::Node& b, const std::string& path, std::vector<ConfigChange>& out) {
  const bool map_a = a.IsDefined() && a.IsMap(), map_b = b.IsDefined() && b.IsMap();
  const bool absent_a = !a.IsDefined() || a.IsNull(), absent_b = !b.IsDefined() || b.IsNull();
  // Sections compare key by key (a section absent on one side counts as an empty one).
  if ((map_a || absent_a) && (map_b || absent_b) && (map_a || map_b)) {
    std::vector<std::string> keys;
    std::set<std::string> seen;
    for (const YAML::Node* n : {&a, &b})
      if (n->IsDefined() && n->IsMap())
        for (const auto& kv : *n)
          if (seen.insert(kv.first.Scalar()).second) keys.push_back(kv.first.Scalar());
    for (const auto& k : keys)
      diff(map_a ? a[k] : YAML::Node(), map_b ? b[k] : YAML::Node(), path.empty() ? k : path + "." + k, out);
    return;
  }
  if (!same(a, b)) out.push_back({path, shown(a), shown(b)});
}

}  // namespace

std::vector<ConfigChange> config_changes(const std::string& before, const std::string& after) {
  std::vector<ConfigChange> out;
  diff(YAML::Load(before), YAML::Load(after), "", out);
  return out;
}

}  // namespace gs::tools
