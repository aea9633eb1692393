// Grad modes. no_grad: no tape, versions still bump. Inference mode: no tape and nothing saved.
// Both are thread-local, set by RAII guards.
#pragma once

namespace gs {

struct GradMode {
  static bool enabled();
  static void set_enabled(bool on);
};

struct InferenceMode {
  static bool enabled();
  static void set_enabled(bool on);
};

class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

class GradModeGuard {
 public:
  explicit GradModeGuard(bool on) : prev_(GradMode::enabled()) { GradMode::set_enabled(on); }
  ~GradModeGuard() { GradMode::set_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

class InferenceModeGuard {
 public:
  InferenceModeGuard() : prev_(InferenceMode::enabled()) { InferenceMode::set_enabled(true); }
  ~InferenceModeGuard() { InferenceMode::set_enabled(prev_); }
  InferenceModeGuard(const InferenceModeGuard&) = delete;
  InferenceModeGuard& operator=(const InferenceModeGuard&) = delete;

 private:
  bool prev_;
};

// True when ops should record nodes: grad mode on and not in inference mode.
inline bool recording_enabled() { return GradMode::enabled() && !InferenceMode::enabled(); }

}  // namespace gs
