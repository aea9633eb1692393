// The progress line (see progress.h).
#include "tools/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/error.h"

namespace gs::tools {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  auto s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
  return fmt::format("{}d{:02}h", s / 86400, s % 86400 / 3600);
}

std::string format_progress(const ProgressStatus& s, int bar_width) {
  double frac = s.total > 0 ? std::clamp(static_cast<double>(s.step) / static_cast<double>(s.total), 0.0, 1.0) : 0.0;
  std::string out;
  if (bar_width > 0) {
    int filled = static_cast<int>(std::floor(frac * bar_width));
    out = "[" + std::string(filled, '#') + std::string(bar_width - filled, '-') + "] ";
  }
  out += fmt::format("step {}/{} {:5.1f}% | loss {:.4g}", s.step, s.total, 100 * frac, s.loss);
  bool known = std::isfinite(s.steps_per_s) && s.steps_per_s > 0;
  // Slow steps read better as seconds per step than as 0.03 steps/s.
  if (!known) out += " | -- steps/s";
  else if (s.steps_per_s >= 1) out += fmt::format(" | {:.2f} steps/s", s.steps_per_s);
  else out += fmt::format(" | {:.2f} s/step", 1 / s.steps_per_s);
  out += " | " + format_duration(s.elapsed_s) + " elapsed";
  double eta = known ? static_cast<double>(std::max<int64_t>(s.total - s.step, 0)) / s.steps_per_s : NAN;
  out += " | ETA " + format_duration(eta);
  return out;
}

ProgressBar::ProgressBar(int64_t total, int64_t first_step, ProgressOptions options)
    : opt_(std::move(options)), total_(total), first_step_(first_step), step_(first_step) {
  GS_CHECK(total >= 1 && first_step >= 0 && first_step <= total,
           "progress: expected total >= 1 and 0 <= first step <= total, got total {} and first step {}", total,
           first_step);
  GS_CHECK(opt_.out != nullptr, "progress: the output stream is null");
  GS_CHECK(opt_.plain_interval_s >= 0 && opt_.tty_interval_s >= 0,
           "progress: expected intervals >= 0 s, got {} and {}", opt_.plain_interval_s, opt_.tty_interval_s);
  tty_ = opt_.tty.value_or(::isatty(::fileno(opt_.out)) == 1);
  start_s_ = now();
}

ProgressBar::~ProgressBar() {
  if (on_screen_) std::fputc('\n', opt_.out), std::fflush(opt_.out);
}

double ProgressBar::now() const {
  if (opt_.clock) return opt_.clock();
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

ProgressStatus ProgressBar::status() const {
  double elapsed = now() - start_s_;
  double rate = elapsed > 0 ? static_cast<double>(step_ - first_step_) / elapsed : 0.0;
  return {step_, total_, loss_, rate, elapsed};
}

void ProgressBar::draw() {
  std::string line = format_progress(status(), tty_ ? opt_.bar_width : 0);
  if (tty_) {
    size_t len = line.size();
    if (len < last_len_) line.append(last_len_ - len, ' ');  // blank what a longer line left behind
    std::fprintf(opt_.out, "\r%s", line.c_str());
    last_len_ = len;
    on_screen_ = true;
  } else {
    std::fprintf(opt_.out, "%s\n", line.c_str());
  }
  std::fflush(opt_.out);
  last_draw_s_ = now();
  ++lines_;
}

void ProgressBar::update(int64_t step, double loss) {
  step_ = step;
  loss_ = loss;
  if (finished_) return;
  double interval = tty_ ? opt_.tty_interval_s : opt_.plain_interval_s;
  if (lines_ == 0 || now() - last_draw_s_ >= interval) draw();  // the first update shows the run started
}

void ProgressBar::message(std::string_view text) {
  if (tty_ && on_screen_) {
    // Overwrite the bar with the message, then put the bar back on the next line.
    std::string pad(last_len_ > text.size() ? last_len_ - text.size() : 0, ' ');
    std::fprintf(opt_.out, "\r%.*s%s\n", static_cast<int>(text.size()), text.data(), pad.c_str());
    on_screen_ = false;
    last_len_ = 0;
    if (!finished_) draw(), --lines_;  // a redraw, not a new progress line
  } else {
    std::fprintf(opt_.out, "%.*s\n", static_cast<int>(text.size()), text.data());
  }
  std::fflush(opt_.out);
}

void ProgressBar::finish() {
  if (finished_) return;
  draw();
  finished_ = true;
  if (tty_) std::fputc('\n', opt_.out), on_screen_ = false;
  std::fflush(opt_.out);
}

}  // namespace gs::tools
