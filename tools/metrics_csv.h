// Metrics files (loss per step, validation scores) as CSV: a fixed header, one row per record,
// flushed row by row so a crash loses nothing already written. Numbers are written so they read
// back to the same value; text fields are quoted when they need it (RFC 4180).
#pragma once
#include <concepts>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gs::tools {

// One CSV field, already formatted: integers as integers, doubles and floats in the shortest form that
// reads back to the same value (at most max_digits10 significant digits: full precision), nan/inf
// as "nan", "inf", "-inf" (what pandas and numpy read), text escaped.
class CsvCell {
 public:
  template <std::integral T>
    requires(!std::same_as<T, bool> && !std::same_as<T, char>)
  CsvCell(T v) : text_(std::to_string(v)) {}
  CsvCell(bool v) : text_(v ? "true" : "false") {}
  CsvCell(double v);
  CsvCell(float v);
  CsvCell(std::string_view s);
  CsvCell(const std::string& s) : CsvCell(std::string_view(s)) {}
  CsvCell(const char* s) : CsvCell(std::string_view(s)) {}
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// Quotes a field when it holds a comma, quote, CR or LF, or starts or ends with a space;
// quotes inside are doubled.
std::string csv_escape(std::string_view s);
// The shortest decimal text that reads back to exactly `v` ("0.1", "1e-07", "nan").
std::string csv_double(double v);
// Splits one CSV record (as written here) back into fields; for reading the header on resume.
std::vector<std::string> csv_split(std::string_view line);

class MetricsCsv {
 public:
  // Creates the file (replacing an old one) and writes the header.
  static MetricsCsv create(const std::string& path, const std::vector<std::string>& columns);
  // Resume: appends to the file, which must have exactly this header; creates it when missing or
  // empty. A last row cut short by a crash is dropped, and with keep_through_step so is every row
  // whose step (the first column) is later: the rows written after the checkpoint a run resumes
  // from, which it writes again (the file is rewritten atomically first).
  static MetricsCsv append(const std::string& path, const std::vector<std::string>& columns,
                           std::optional<int64_t> keep_through_step = std::nullopt);

  // One row, one cell per column, written and flushed.
  void write_row(const std::vector<CsvCell>& row);
  const std::string& path() const { return path_; }
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  MetricsCsv(std::string path, std::vector<std::string> columns, std::FILE* f);
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::vector<std::string> columns_;
  std::unique_ptr<std::FILE, Closer> file_;
};

}  // namespace gs::tools
