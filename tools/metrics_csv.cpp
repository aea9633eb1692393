// CSV metrics files (see metrics_csv.h).
#include "tools/metrics_csv.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/error.h"
#include "models/atomic_file.h"

namespace gs::tools {

namespace {

template <typename T>
std::string shortest(T v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form, "nan", "inf", "-inf"
  return std::string(buf, r.ptr);
}

std::string header_line(const std::vector<std::string>& columns) {
  std::string line;
  for (size_t i = 0; i < columns.size(); ++i) line += (i ? "," : "") + csv_escape(columns[i]);
  return line;
}

void check_columns(const std::string& path, const std::vector<std::string>& columns) {
  GS_CHECK(!columns.empty(), "metrics file '{}': expected at least one column, got none", path);
  std::set<std::string> seen;
  for (const auto& c : columns) {
    GS_CHECK(!c.empty() && c.find_first_of("\r\n") == std::string::npos,
             "metrics file '{}': expected column names that are non-empty and on one line, got '{}'", path, c);
    GS_CHECK(seen.insert(c).second, "metrics file '{}': column '{}' appears twice", path, c);
  }
}

std::FILE* open_or_fail(const std::string& path, const char* mode) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  GS_CHECK(f != nullptr, "cannot open metrics file '{}': {}", path, std::strerror(errno));
  return f;
}

void write_or_fail(std::FILE* f, const std::string& path, const std::string& text) {
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
  GS_CHECK(ok, "cannot write metrics file '{}': {}", path, std::strerror(errno));
}

}  // namespace

CsvCell::CsvCell(double v) : text_(csv_double(v)) {}
// A float gets its own shortest form: 0.1f is "0.1", not the "0.10000000149011612" of its double value.
CsvCell::CsvCell(float v) : text_(shortest(v)) {}
CsvCell::CsvCell(std::string_view s) : text_(csv_escape(s)) {}

std::string csv_escape(std::string_view s) {
  bool quote = s.find_first_of(",\"\r\n") != std::string_view::npos ||
               (!s.empty() && (s.front() == ' ' || s.back() == ' '));
  if (!quote) return std::string(s);
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_double(double v) { return shortest(v); }

std::vector<std::string> csv_split(std::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') fields.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else fields.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  return fields;
}

MetricsCsv::MetricsCsv(std::string path, std::vector<std::string> columns, std::FILE* f)
    : path_(std::move(path)), columns_(std::move(columns)), file_(f) {}

MetricsCsv MetricsCsv::create(const std::string& path, const std::vector<std::string>& columns) {
  check_columns(path, columns);
  MetricsCsv csv(path, columns, open_or_fail(path, "wb"));
  write_or_fail(csv.file_.get(), path, header_line(columns) + "\n");
  return csv;
}

MetricsCsv MetricsCsv::append(const std::string& path, const std::vector<std::string>& columns,
                              std::optional<int64_t> keep_through_step) {
  check_columns(path, columns);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0) return create(path, columns);
  std::ifstream in(path, std::ios::binary);
  GS_CHECK(in.good(), "cannot open metrics file '{}': {}", path, std::strerror(errno));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  GS_CHECK(!in.bad(), "cannot read metrics file '{}': {}", path, std::strerror(errno));
  std::string first = text.substr(0, text.find('\n'));
  if (!first.empty() && first.back() == '\r') first.pop_back();
  const std::string expected = header_line(columns);
  GS_CHECK(first == expected,
           "cannot append to metrics file '{}': its header is '{}' but this run writes '{}' (a different run or "
           "version; move the old file away or write to a new one)",
           path, first, expected);
  // The rows a resumed run keeps: complete ones (a crash mid-row leaves the last without its newline)
  // of the steps up to the checkpoint. The steps after it run again, so their old rows go; the file
  // is then what an uninterrupted run would have written so far.
  std::string kept = expected + "\n";
  size_t pos = text.find('\n');
  bool dropped = false;
  while (pos != std::string::npos && pos + 1 < text.size()) {
    const size_t end = text.find('\n', pos + 1);
    if (end == std::string::npos) {
      dropped = true;  // the torn last row
      break;
    }
    const std::string_view row(text.data() + pos + 1, end - pos - 1);
    int64_t step = 0;
    const auto comma = row.find(',');
    const std::string_view first_field = row.substr(0, comma);
    const auto [ptr, err] = std::from_chars(first_field.data(), first_field.data() + first_field.size(), step);
    const bool keep = !keep_through_step ||
                      (err == std::errc() && ptr == first_field.data() + first_field.size() && step <= *keep_through_step);
    if (keep)
      kept.append(row).push_back('\n');
    else
      dropped = true;
    pos = end;
  }
  if (dropped || text.back() != '\n') {
    models::AtomicFile rewrite(path);
    rewrite.write(kept.data(), kept.size());
    rewrite.commit();
  }
  return MetricsCsv(path, columns, open_or_fail(path, "ab"));
}

void MetricsCsv::write_row(const std::vector<CsvCell>& row) {
  GS_CHECK(row.size() == columns_.size(), "metrics file '{}': expected {} values per row ({}), got {}", path_,
           columns_.size(), header_line(columns_), row.size());
  std::string line;
  for (size_t i = 0; i < row.size(); ++i) line += (i ? "," : "") + row[i].text();
  // One write and a flush per row: after a crash, the file holds every complete row written before it.
  write_or_fail(file_.get(), path_, line + "\n");
}

}  // namespace gs::tools
