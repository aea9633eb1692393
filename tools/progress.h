// The training progress line on stderr: step / total, loss, speed, elapsed time and ETA.
// On a terminal it is one line redrawn in place with '\r'; in a log file or CI (not a TTY) it is
// plain lines, at most one per `plain_interval_s`, so logs stay short. Only tools/ prints progress.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace gs::tools {

struct ProgressStatus {
  int64_t step = 0;    // steps done
  int64_t total = 0;   // steps in the run
  double loss = 0;     // latest training loss (NaN is shown as nan)
  double steps_per_s = 0;  // <= 0 or NaN: not known yet
  double elapsed_s = 0;
};

// "step 120/1000  12.0% | loss 0.01235 | 3.45 steps/s | 35s elapsed | ETA 4m15s", preceded by a
// bar "[###-----------------] " of bar_width characters when bar_width > 0. Testable without a TTY.
std::string format_progress(const ProgressStatus& s, int bar_width = 0);
// "42s", "4m15s", "2h05m", "3d04h"; "--" when unknown (negative, NaN, infinite).
std::string format_duration(double seconds);

struct ProgressOptions {
  std::FILE* out = stderr;
  std::optional<bool> tty = std::nullopt;  // default: isatty(out)
  double plain_interval_s = 30;            // not a TTY: at most one progress line per this many seconds
  double tty_interval_s = 0.2;             // TTY: redraw at most this often
  int bar_width = 20;                      // TTY only
  std::function<double()> clock = nullptr; // seconds, monotonic; default std::chrono::steady_clock
};

class ProgressBar {
 public:
  // `first_step`: where a resumed run starts, so steps/s counts only the steps run here.
  explicit ProgressBar(int64_t total, int64_t first_step = 0, ProgressOptions options = {});
  ~ProgressBar();  // ends a half-drawn TTY line so the shell prompt does not land on it
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `step` steps are done and the last one had this loss; prints when a line is due.
  void update(int64_t step, double loss);
  // A line of its own (validation loss, checkpoint written) that leaves the bar intact.
  void message(std::string_view text);
  // Prints the final state (always, whatever the interval) and ends the line.
  void finish();
  ProgressStatus status() const;
  int lines_printed() const { return lines_; }  // progress lines written (tests)

 private:
  double now() const;
  void draw();

  ProgressOptions opt_;
  bool tty_;
  int64_t total_, first_step_, step_;
  double loss_ = 0, start_s_, last_draw_s_ = 0;
  size_t last_len_ = 0;       // TTY: length of the line on screen, to blank a longer old one
  bool on_screen_ = false;    // TTY: a bar line is drawn and not yet ended
  bool finished_ = false;
  int lines_ = 0;
};

}  // namespace gs::tools
