// Anomaly mode: nodes remember the scope they were created in, backward errors name the node,
// and (optionally) every backward output is checked for NaN/Inf.
#pragma once
#include <string>

namespace gs {

struct AnomalyMode {
  static bool enabled();
  static bool check_nan();
  static void set_enabled(bool on, bool check_nan = true);
};

class AnomalyModeGuard {
 public:
  explicit AnomalyModeGuard(bool check_nan = true);
  ~AnomalyModeGuard();
  AnomalyModeGuard(const AnomalyModeGuard&) = delete;
  AnomalyModeGuard& operator=(const AnomalyModeGuard&) = delete;

 private:
  bool prev_enabled_, prev_check_;
};

// A user scope string ("block 3/mlp") pushed while it lives; nodes created inside record it.
class AnomalyScope {
 public:
  explicit AnomalyScope(std::string name);
  ~AnomalyScope();
  AnomalyScope(const AnomalyScope&) = delete;
  AnomalyScope& operator=(const AnomalyScope&) = delete;
};

// The current scope path joined with '/', or "" when none.
std::string current_anomaly_scope();

}  // namespace gs
