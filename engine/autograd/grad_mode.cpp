#include "engine/autograd/grad_mode.h"

#include <vector>

#include "engine/autograd/anomaly.h"

namespace gs {
namespace {
thread_local bool t_grad_enabled = true;
thread_local bool t_inference = false;
bool g_anomaly = false;
bool g_anomaly_nan = true;
thread_local std::vector<std::string> t_scopes;
}  // namespace

bool GradMode::enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool on) { t_grad_enabled = on; }
bool InferenceMode::enabled() { return t_inference; }
void InferenceMode::set_enabled(bool on) { t_inference = on; }

bool AnomalyMode::enabled() { return g_anomaly; }
bool AnomalyMode::check_nan() { return g_anomaly && g_anomaly_nan; }
void AnomalyMode::set_enabled(bool on, bool check_nan) {
  g_anomaly = on;
  g_anomaly_nan = check_nan;
}

AnomalyModeGuard::AnomalyModeGuard(bool check_nan) : prev_enabled_(g_anomaly), prev_check_(g_anomaly_nan) {
  AnomalyMode::set_enabled(true, check_nan);
}
AnomalyModeGuard::~AnomalyModeGuard() { AnomalyMode::set_enabled(prev_enabled_, prev_check_); }

AnomalyScope::AnomalyScope(std::string name) { t_scopes.push_back(std::move(name)); }
AnomalyScope::~AnomalyScope() { t_scopes.pop_back(); }

std::string current_anomaly_scope() {
  std::string s;
  for (const auto& p : t_scopes) s += (s.empty() ? "" : "/") + p;
  return s;
}

}  // namespace gs
