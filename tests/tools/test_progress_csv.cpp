// The progress line (formatting, TTY redraws, throttled plain lines) and the CSV metrics writer.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "engine/error.h"
#include "tools/metrics_csv.h"
#include "tools/progress.h"
#include "tests/test_util.h"

using gs_test::contains;
using gs_test::error_of;

using namespace gs::tools;
namespace fs = std::filesystem;

namespace {

// Everything written to a FILE* so far.
std::string contents(std::FILE* f) {
  std::fflush(f);
  long end = std::ftell(f);
  std::string s(static_cast<size_t>(end), '\0');
  std::rewind(f);
  size_t got = std::fread(s.data(), 1, s.size(), f);
  s.resize(got);
  std::fseek(f, 0, SEEK_END);
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_csv(const std::string& name) {
  return (fs::temp_directory_path() / ("gs_test_" + name + ".csv")).string();
}

int count(const std::string& s, char c) { return static_cast<int>(std::count(s.begin(), s.end(), c)); }

}  // namespace

TEST_CASE("progress: durations") {
  CHECK(format_duration(0) == "0s");
  CHECK(format_duration(42.4) == "42s");
  CHECK(format_duration(255) == "4m15s");
  CHECK(format_duration(2 * 3600 + 5 * 60 + 10) == "2h05m");
  CHECK(format_duration(3 * 86400 + 4 * 3600) == "3d04h");
  CHECK(format_duration(-1) == "--");
  CHECK(format_duration(NAN) == "--");
  CHECK(format_duration(INFINITY) == "--");
}

TEST_CASE("progress: line formatting") {
  ProgressStatus s{.step = 120, .total = 1000, .loss = 0.0123456, .steps_per_s = 3.4512, .elapsed_s = 35};
  CHECK(format_progress(s) == "step 120/1000  12.0% | loss 0.01235 | 3.45 steps/s | 35s elapsed | ETA 4m15s");
  CHECK(format_progress(s, 10) ==
        "[#---------] step 120/1000  12.0% | loss 0.01235 | 3.45 steps/s | 35s elapsed | ETA 4m15s");
  s.steps_per_s = 0.25;  // slow steps read as seconds per step
  CHECK(format_progress(s) == "step 120/1000  12.0% | loss 0.01235 | 4.00 s/step | 35s elapsed | ETA 58m40s");
  s.steps_per_s = 0;
  s.loss = NAN;
  CHECK(format_progress(s) == "step 120/1000  12.0% | loss nan | -- steps/s | 35s elapsed | ETA --");
  ProgressStatus done{.step = 1000, .total = 1000, .loss = 1.5e-7, .steps_per_s = 10, .elapsed_s = 100};
  CHECK(format_progress(done, 4) ==
        "[####] step 1000/1000 100.0% | loss 1.5e-07 | 10.00 steps/s | 1m40s elapsed | ETA 0s");
}

TEST_CASE("progress: plain lines are throttled when not a TTY") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  double t = 0;
  {
    ProgressBar bar(100, 0, {.out = f, .tty = false, .plain_interval_s = 10, .clock = [&] { return t; }});
    for (int step = 1; step <= 100; ++step) {
      t = step * 0.5;  // 2 steps/s: 50 s in all
      bar.update(step, 1.0 / step);
      if (step == 40) bar.message("validation loss 0.5");
    }
    // First update, then one line per 10 s: t = 0.5, 10.5, 20.5, 30.5, 40.5 -> 5 progress lines.
    CHECK(bar.lines_printed() == 5);
    bar.finish();
    CHECK(bar.lines_printed() == 6);
    bar.update(100, 0.0);  // after finish: nothing more
    CHECK(bar.lines_printed() == 6);
  }
  std::string out = contents(f);
  CHECK(out.find('\r') == std::string::npos);
  CHECK(count(out, '\n') == 7);  // 6 progress lines and the message
  CHECK(out.rfind("step 1/100   1.0% | loss 1 | 2.00 steps/s | 1s elapsed | ETA 50s\n", 0) == 0);
  CHECK(out.find("validation loss 0.5\n") != std::string::npos);
  CHECK(out.find("step 100/100 100.0% | loss 0.01 | 2.00 steps/s | 50s elapsed | ETA 0s\n") != std::string::npos);
  std::fclose(f);
}

TEST_CASE("progress: a TTY line is redrawn in place and messages keep the bar") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  double t = 0;
  {
    ProgressBar bar(10, 5, {.out = f, .tty = true, .tty_interval_s = 0, .bar_width = 10, .clock = [&] { return t; }});
    t = 1;
    bar.update(6, 2.0);
    t = 2;
    bar.update(7, 1.0);
    bar.message("checkpoint written");
    // Resumed at step 5: 2 steps in 2 s is 1 step/s, 3 left.
    CHECK(bar.status().steps_per_s == 1.0);
    CHECK(format_progress(bar.status()).find("ETA 3s") != std::string::npos);
  }  // the destructor ends the half-drawn line
  std::string out = contents(f);
  CHECK(out.rfind("\r[######----] step 6/10  60.0% | loss 2 |", 0) == 0);
  CHECK(out.find("\r[#######---] step 7/10  70.0% | loss 1 |") != std::string::npos);
  CHECK(out.find("\rcheckpoint written") != std::string::npos);
  CHECK(out.back() == '\n');
  CHECK(count(out, '\n') == 2);  // the message's line and the one the destructor ends
  std::fclose(f);
  CHECK(error_of([] { ProgressBar(0); }) ==
        "progress: expected total >= 1 and 0 <= first step <= total, got total 0 and first step 0");
}

TEST_CASE("csv: escaping and numbers") {
  CHECK(csv_escape("plain") == "plain");
  CHECK(csv_escape("a,b") == "\"a,b\"");
  CHECK(csv_escape("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_escape("two\nlines") == "\"two\nlines\"");
  CHECK(csv_escape(" padded") == "\" padded\"");
  CHECK(csv_escape("") == "");
  CHECK(csv_double(0.1) == "0.1");
  CHECK(csv_double(1e-7) == "1e-07");
  CHECK(csv_double(std::numeric_limits<double>::quiet_NaN()) == "nan");
  CHECK(csv_double(-std::numeric_limits<double>::infinity()) == "-inf");
  // Full precision: every double reads back to itself.
  for (double v : {1.0 / 3.0, 2.0 / 3.0 * 1e-300, 123456789.123456789, std::nextafter(1.0, 2.0),
                   std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min()}) {
    std::string s = csv_double(v);
    CHECK(std::strtod(s.c_str(), nullptr) == v);
    CHECK(s.size() <= 24);
  }
  CHECK(CsvCell(0.1f).text() == "0.1");  // a float's own shortest form
  CHECK(CsvCell(int64_t{-12}).text() == "-12");
  CHECK(CsvCell(size_t{7}).text() == "7");
  CHECK(CsvCell(true).text() == "true");
  CHECK(CsvCell("x,y").text() == "\"x,y\"");
  CHECK(csv_split("a,\"b,c\",\"d\"\"e\",") == std::vector<std::string>{"a", "b,c", "d\"e", ""});
}

TEST_CASE("csv: rows are written and flushed one by one") {
  std::string path = temp_csv("rows");
  auto csv = MetricsCsv::create(path, {"step", "loss", "note"});
  csv.write_row({1, 0.5, "warm-up, slow"});
  // Flushed: another reader sees the row before the writer is closed.
  CHECK(read_file(path) == "step,loss,note\n1,0.5,\"warm-up, slow\"\n");
  csv.write_row({2, 1.0 / 3.0, ""});
  CHECK(read_file(path) == "step,loss,note\n1,0.5,\"warm-up, slow\"\n2,0.3333333333333333,\n");
  CHECK(error_of([&] { csv.write_row({3, 0.1}); }) ==
        "metrics file '" + path + "': expected 3 values per row (step,loss,note), got 2");
  fs::remove(path);
  CHECK(error_of([&] {
          MetricsCsv::create(path, {"a", "a"});
        }) == "metrics file '" + path + "': column 'a' appears twice");
  CHECK(error_of([&] { MetricsCsv::create(path, {}); }) ==
        "metrics file '" + path + "': expected at least one column, got none");
  CHECK(error_of([] { MetricsCsv::create("/nonexistent_dir_gs/m.csv", {"a"}); }) ==
        "cannot open metrics file '/nonexistent_dir_gs/m.csv': No such file or directory");
}

TEST_CASE("csv: appending on resume checks the header") {
  std::string path = temp_csv("append");
  fs::remove(path);
  {
    auto csv = MetricsCsv::append(path, {"step", "loss"});  // missing: created with the header
    csv.write_row({1, 0.25});
  }
  {
    auto csv = MetricsCsv::append(path, {"step", "loss"});
    csv.write_row({2, 0.125});
  }
  CHECK(read_file(path) == "step,loss\n1,0.25\n2,0.125\n");
  CHECK(error_of([&] { MetricsCsv::append(path, {"step", "loss", "lr"}); }) ==
        "cannot append to metrics file '" + path + "': its header is 'step,loss' but this run writes 'step,loss,lr' "
        "(a different run or version; move the old file away or write to a new one)");
  // A row cut short by a crash is dropped: the next row starts on its own line.
  {
    std::ofstream out(path, std::ios::app | std::ios::binary);
    out << "3,0.06";
  }
  {
    auto csv = MetricsCsv::append(path, {"step", "loss"});
    csv.write_row({4, 0.03125});
  }
  CHECK(read_file(path) == "step,loss\n1,0.25\n2,0.125\n4,0.03125\n");
  fs::remove(path);
}

TEST_CASE("csv: resuming from a checkpoint drops the rows written after it, so they are not there twice") {
  std::string path = temp_csv("resume");
  {
    auto csv = MetricsCsv::create(path, {"step", "lead", "rmse"});
    for (int step : {2, 4, 4, 6, 8}) csv.write_row({step, 6.0, 0.5 * step});  // 4 twice: two leads
  }
  {
    std::ofstream out(path, std::ios::app | std::ios::binary);
    out << "10,6,";  // torn by the crash
  }
  {
    auto csv = MetricsCsv::append(path, {"step", "lead", "rmse"}, /*keep_through_step=*/4);
    csv.write_row({6, 6.0, 3.5});
  }
  CHECK(read_file(path) == "step,lead,rmse\n2,6,1\n4,6,2\n4,6,2\n6,6,3.5\n");
  // Nothing after the checkpoint: the file is left as it is.
  const auto before = fs::last_write_time(path);
  { auto csv = MetricsCsv::append(path, {"step", "lead", "rmse"}, 6); }
  CHECK(fs::last_write_time(path) == before);
  CHECK(read_file(path) == "step,lead,rmse\n2,6,1\n4,6,2\n4,6,2\n6,6,3.5\n");
  fs::remove(path);
}
