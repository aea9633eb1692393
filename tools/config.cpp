// The strict YAML configuration reader (see config.h for the rules).
//
// yaml-cpp hands every scalar over as text, so the typing is done here: a plain (unquoted) scalar
// can be a number or a bool, a quoted one is always a string. That is what makes `lr: "1e-3"` an
// error instead of a silent conversion. Nodes are only ever copy-constructed, never assigned:
// assigning to a YAML::Node rebinds the node it referred to, which would rewrite the document.
#include "tools/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <yaml-cpp/eventhandler.h>

#include "engine/error.h"

namespace gs::tools {

struct SectionRecord {
  std::shared_ptr<const YAML::Node> node;
  std::vector<std::string> accepted;  // keys the program asked for, in the order it asked
};

struct ConfigDocument {
  std::string source;
  std::string text;
  std::map<std::string, SectionRecord> sections;  // by dotted path
};

namespace {

struct Entry {  // one key: value pair of a mapping
  YAML::Node key;
  YAML::Node value;
};

std::string quote(std::string_view s) {
  constexpr size_t kMax = 60;  // a long value is cut so the message stays one readable line
  std::string body(s.substr(0, kMax));
  return "'" + body + (s.size() > kMax ? "...'" : "'");
}

std::string join_quoted(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + quote(items[i]);
  return out;
}

bool is_quoted(const YAML::Node& n) { return n.Tag() == "!"; }

// What was found, for "got ..." in messages.
std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return "an empty value";
    case YAML::NodeType::Sequence: return fmt::format("a list of {} item{}", n.size(), n.size() == 1 ? "" : "s");
    case YAML::NodeType::Map: return "a section (key: value lines)";
    case YAML::NodeType::Scalar:
      return is_quoted(n) ? "the quoted string " + quote(n.Scalar()) : quote(n.Scalar());
    default: return "nothing";
  }
}

std::string line_col(const YAML::Mark& m) {
  if (m.is_null() || m.line < 0) return "";
  return fmt::format("line {}, column {}", m.line + 1, m.column + 1);
}

// "(config.yaml line 4, column 14)"
std::string where(const std::string& source, const YAML::Mark& m) {
  std::string lc = line_col(m);
  return lc.empty() ? "(" + source + ")" : "(" + source + " " + lc + ")";
}

std::vector<Entry> entries(const YAML::Node& map) {
  std::vector<Entry> out;
  if (!map.IsMap()) return out;
  for (auto it = map.begin(); it != map.end(); ++it) out.push_back({it->first, it->second});
  return out;
}

// A config document, expanded through its aliases, has at most this many nodes: a kilobyte of
// nested aliases ("billion laughs") would otherwise make every traversal run for minutes.
constexpr int64_t kMaxConfigNodes = 100'000;

// Rejects what yaml-cpp would accept silently: repeated keys (it keeps both), keys that are not
// plain names (lists or mappings used as keys), explicit tags (`!!str 8` would make a string of a
// number the reader refuses to take quoted), quoted strings that run past their line (an
// unterminated quote swallows every key after it), and documents that expand past kMaxConfigNodes.
struct StructureCheck {
  const std::string& source;
  const std::vector<std::string_view>& lines;  // the text's lines, for the quote check
  int64_t nodes = 0;

  void scalar(const YAML::Node& n, const std::string& path) {
    const std::string& tag = n.Tag();
    GS_CHECK(tag == "?" || tag == "!" || tag.empty(),
             "{}: YAML tags such as '{}' are not accepted {}; write the value plainly (a string in quotes)",
             path.empty() ? source : path, tag, where(source, n.Mark()));
    if (tag != "!") return;  // a plain scalar
    const YAML::Mark m = n.Mark();
    if (m.line < 0 || static_cast<size_t>(m.line) >= lines.size()) return;
    const std::string_view line = lines[static_cast<size_t>(m.line)];
    const auto col = static_cast<size_t>(m.column);
    if (col >= line.size() || (line[col] != '"' && line[col] != '\'')) return;  // block scalars: | and >
    const char q = line[col];
    for (size_t i = col + 1; i < line.size(); ++i) {
      if (q == '"' && line[i] == '\\') {
        ++i;
      } else if (line[i] == q) {
        if (q == '\'' && i + 1 < line.size() && line[i + 1] == '\'') {
          ++i;  // '' inside single quotes
          continue;
        }
        return;
      }
    }
    gs::fail("{}: the quoted string that starts {} does not end on its line; is a closing {} missing? (a string "
             "spanning lines would take in the keys after it)",
             path.empty() ? source : path, where(source, m), q);
  }

  int depth = 0;

  void visit(const YAML::Node& n, const std::string& path) {
    // An alias inside its own anchor's node (&a [*a]) is a cycle; deep nesting is never a config.
    GS_CHECK(depth < 64, "{}: values nest more than 64 levels deep {} (an alias inside its own anchor?)",
             path.empty() ? source : path, where(source, n.Mark()));
    struct Deeper {
      int& d;
      explicit Deeper(int& x) : d(++x) {}
      ~Deeper() { --d; }
    } deeper(depth);
    GS_CHECK(++nodes <= kMaxConfigNodes,
             "{}: the document expands to more than {} values through its aliases (*name); a config file is far "
             "smaller",
             source, kMaxConfigNodes);
    if (n.IsScalar()) return scalar(n, path);
    if (n.IsSequence()) {
      for (size_t i = 0; i < n.size(); ++i) visit(n[i], fmt::format("{}[{}]", path, i));
      return;
    }
    if (!n.IsMap()) return;
    std::map<std::string, YAML::Mark> seen;
    for (const Entry& e : entries(n)) {
      GS_CHECK(e.key.IsScalar(), "{}: keys must be plain names, got {} as a key {}", path.empty() ? source : path,
               describe(e.key), where(source, e.key.Mark()));
      const std::string& k = e.key.Scalar();
      std::string child = path.empty() ? k : path + "." + k;
      scalar(e.key, child);
      auto [it, fresh] = seen.emplace(k, e.key.Mark());
      GS_CHECK(fresh, "{}: duplicate key {} (first at {}); each key may appear once per section", child,
               where(source, e.key.Mark()), line_col(it->second));
      visit(e.value, child);
    }
  }
};

// A config's top level is key: value lines: each document must start with a key, and no line may
// be indented less than the document's first key. Checked before yaml-cpp parses, for a clear
// message: yaml-cpp 0.7 meets a stray ',' at a document's top level (",", "&a ,", "[a] ,",
// "- a\n,", "  a: 1\n ,"; found by tests/fuzz) by yielding empty documents forever, which
// from_yaml's bounded document count stops in any case. The same scan bounds the nesting of flow
// collections ([[[...]]]), which yaml-cpp parses recursively.
void check_document_starts(const std::string& text, const std::string& source) {
  const size_t bom = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;  // a UTF-8 byte-order mark (yaml-cpp skips it)
  bool at_start = true;
  size_t first_indent = 0, first_line = 0;
  int flow_depth = 0;  // [ and { open at the end of the previous line
  int deepest = 0;
  size_t line_no = 0;
  for (size_t b = bom; b <= text.size(); ++line_no) {
    size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    std::string_view line(text.data() + b, e - b);
    b = e + 1;
    if (line.substr(0, 3) == "---" || line.substr(0, 3) == "...") {
      at_start = true;
      flow_depth = 0;
      line.remove_prefix(3);
    } else if (at_start && !line.empty() && line[0] == '%') {
      continue;  // a directive
    }
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos || line[first] == '#') continue;
    if (at_start) {
      // A key: a plain name or a quoted one, then ':' followed by a blank or the end of the line.
      const char c = line[first];
      size_t colon = std::string_view::npos;
      if (c == '"' || c == '\'') {
        const size_t close = line.find(c, first + 1);
        if (close != std::string_view::npos && close + 1 < line.size() && line[close + 1] == ':') colon = close + 1;
      } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
        // A plain key: the first ": " (or ':' at the end) before any comment, with no flow
        // indicator before it (else yaml-cpp reads the line as a scalar or a flow collection).
        for (size_t i = first; i < line.size() && colon == std::string_view::npos; ++i) {
          const char k = line[i];
          if (k == '[' || k == ']' || k == '{' || k == '}' || k == ',' || (k == '#' && line[i - 1] == ' ')) break;
          if (k == ':' && (i + 1 == line.size() || line[i + 1] == ' ' || line[i + 1] == '\t' || line[i + 1] == '\r'))
            colon = i;
        }
      }
      const bool key = colon != std::string_view::npos &&
                       (colon + 1 == line.size() || line[colon + 1] == ' ' || line[colon + 1] == '\t' ||
                        line[colon + 1] == '\r');
      GS_CHECK(key, "{}: expected key: value lines at the top level, got {} at line {}", source,
               c == '-' ? std::string("a list") : fmt::format("'{}'", line.substr(first, 24)), line_no + 1);
      at_start = false;
      first_indent = first;
      first_line = line_no;
    } else if (flow_depth == 0) {
      GS_CHECK(first >= first_indent,
               "{}: line {} is indented less than the first key (line {}, column {}); the top-level keys must line up",
               source, line_no + 1, first_line + 1, first_indent + 1);
    }
    char quote = 0;
    for (size_t i = first; i < line.size(); ++i) {
      const char ch = line[i];
      if (quote) {
        if (ch == quote) quote = 0;
      } else if (ch == '"' || ch == '\'') {
        quote = ch;
      } else if (ch == '#' && (i == 0 || line[i - 1] == ' ')) {
        break;
      } else if (ch == '[' || ch == '{') {
        deepest = std::max(deepest, ++flow_depth);
      } else if ((ch == ']' || ch == '}') && flow_depth > 0) {
        --flow_depth;
      }
    }
    GS_CHECK(deepest <= 64, "{}: lists and mappings nest {} deep at line {}; expected at most 64 (a config file is flat)",
             source, deepest, line_no + 1);
  }
}

// Counts documents without building them (every event ignored).
struct DocumentCounter final : YAML::EventHandler {
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};
constexpr int kMaxDocumentsCounted = 16;

struct TextPosition {
  size_t line, column, offset;  // line and column from 1
};

// The first byte that is not part of valid UTF-8 (overlong forms, surrogates and code points past
// U+10FFFF included); nothing when the text is valid.
std::optional<TextPosition> first_invalid_utf8(std::string_view s) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; ok && k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      ok = (d >> 6) == 0x2;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (ok && len > 1) {
      static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }
    if (!ok) return TextPosition{line, col, i};
    if (c == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
    i += len;
  }
  return std::nullopt;
}

// ---- scalar parsing. Only plain scalars can be numbers or bools (YAML 1.2 core schema, decimal only).

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

enum class Parse { ok, bad, out_of_range };

Parse parse_int(const YAML::Node& n, int64_t& out) {
  if (!n.IsScalar() || is_quoted(n)) return Parse::bad;
  std::string_view s = n.Scalar();
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  std::string_view digits = (!s.empty() && s[0] == '-') ? s.substr(1) : s;
  if (!all_digits(digits)) return Parse::bad;
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc::result_out_of_range ? Parse::out_of_range : Parse::ok;
}

// Decimal with optional fraction and exponent ("3", "-0.5", ".5", "1e-3", "2.5E+4").
bool looks_decimal(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++frac_digits;
  }
  if (int_digits + frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (!all_digits(s.substr(i))) return false;
    return true;
  }
  return i == s.size();
}

bool looks_special_float(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  for (const char* w : {".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN", "inf", "nan"})
    if (s == w) return true;
  return false;
}

Parse parse_real(const YAML::Node& n, double& out) {
  if (!n.IsScalar() || is_quoted(n)) return Parse::bad;
  std::string_view s = n.Scalar();
  if (looks_special_float(s)) return Parse::out_of_range;
  if (!looks_decimal(s)) return Parse::bad;
  if (s[0] == '+') s.remove_prefix(1);  // from_chars takes no '+'
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  if (r.ec == std::errc::result_out_of_range || !std::isfinite(out)) return Parse::out_of_range;
  return r.ec == std::errc() ? Parse::ok : Parse::bad;
}

std::string int_expectation(IntRange r, bool plural = false) {
  std::string what = plural ? "integers" : "an integer";
  constexpr int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  if (r.min != lo && r.max != hi) return fmt::format("{} in [{}, {}]", what, r.min, r.max);
  if (r.min != lo) return fmt::format("{} >= {}", what, r.min);
  if (r.max != hi) return fmt::format("{} <= {}", what, r.max);
  return what;
}

std::string real_expectation(RealRange r, bool plural = false) {
  std::string what = plural ? "finite numbers" : "a finite number";
  bool has_lo = std::isfinite(r.min), has_hi = std::isfinite(r.max);
  if (has_lo && has_hi)
    return fmt::format("{} in {}{}, {}{}", what, r.min_exclusive ? "(" : "[", r.min, r.max,
                       r.max_exclusive ? ")" : "]");
  if (has_lo) return fmt::format("{} {} {}", what, r.min_exclusive ? ">" : ">=", r.min);
  if (has_hi) return fmt::format("{} {} {}", what, r.max_exclusive ? "<" : "<=", r.max);
  return what;
}

bool in_range(double v, RealRange r) {
  if (r.min_exclusive ? !(v > r.min) : !(v >= r.min)) return false;
  if (r.max_exclusive ? !(v < r.max) : !(v <= r.max)) return false;
  return true;
}

std::string count_phrase(Count c) {
  if (c.min == c.max) return fmt::format("exactly {} ", c.min);
  bool has_max = c.max != std::numeric_limits<size_t>::max();
  if (c.min > 0 && has_max) return fmt::format("{} to {} ", c.min, c.max);
  if (c.min > 0) return fmt::format("at least {} ", c.min);
  if (has_max) return fmt::format("at most {} ", c.max);
  return "";
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

// ---- loading

ConfigNode::ConfigNode(std::shared_ptr<ConfigDocument> doc, std::string path, YAML::Node node)
    : doc_(std::move(doc)), path_(std::move(path)) {
  SectionRecord& rec = doc_->sections[path_];
  if (!rec.node) rec.node = std::make_shared<const YAML::Node>(node);
  node_ = rec.node;
}

ConfigNode ConfigNode::from_yaml(const std::string& text, const std::string& source) {
  // The text is stored verbatim in checkpoints (whose JSON header must be UTF-8): checked now, not
  // at the first checkpoint.
  if (auto at = first_invalid_utf8(text))
    gs::fail("{}: line {}, column {}: byte 0x{:02x} is not valid UTF-8; a config file must be UTF-8 text", source,
             at->line, at->column, static_cast<unsigned char>(text[at->offset]));
  check_document_starts(text, source);
  // yaml-cpp's LoadAll loops forever on some malformed streams (each turn yields another empty
  // document): the first document is loaded alone, and the documents are counted up to a bound.
  YAML::Node first;
  int documents = 0;
  try {
    first = YAML::Load(text);
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentCounter counter;
    while (documents < kMaxDocumentsCounted && parser.HandleNextDocument(counter)) ++documents;
  } catch (const YAML::Exception& e) {
    gs::fail("{}: invalid YAML at {}: {}", source, line_col(e.mark), e.msg);
  }
  GS_CHECK(documents <= 1, "{}: holds {}{} YAML documents (separated by '---'); a config file holds exactly one",
           source, documents, documents == kMaxDocumentsCounted ? " or more" : "");
  // An empty file, or one of comments only, is an empty top level.
  bool empty = !first.IsDefined() || first.IsNull();
  YAML::Node root = empty ? YAML::Node(YAML::NodeType::Map) : first;
  GS_CHECK(root.IsMap(), "{}: expected key: value lines at the top level, got {} {}", source, describe(root),
           where(source, root.Mark()));
  std::vector<std::string_view> lines;
  for (size_t b = 0; b <= text.size();) {
    size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    lines.emplace_back(text.data() + b, e - b);
    b = e + 1;
  }
  StructureCheck{source, lines}.visit(root, "");
  auto doc = std::make_shared<ConfigDocument>();
  doc->source = source;
  doc->text = text;
  return ConfigNode(std::move(doc), "", root);
}

ConfigNode ConfigNode::from_string(const std::string& text, const std::string& source) {
  return from_yaml(text, source);
}

ConfigNode ConfigNode::load_file(const std::string& path) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  GS_CHECK(std::filesystem::exists(st), "cannot read config file '{}': no such file", path);
  GS_CHECK(!std::filesystem::is_directory(st), "cannot read config file '{}': it is a directory", path);
  std::ifstream in(path, std::ios::binary);
  GS_CHECK(in.good(), "cannot open config file '{}': {}", path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  GS_CHECK(!in.bad(), "cannot read config file '{}': read error", path);
  return from_yaml(text.str(), path);
}

const std::string& ConfigNode::source() const { return doc_->source; }
const std::string& ConfigNode::text() const { return doc_->text; }

// ---- lookup and bookkeeping

std::string ConfigNode::child_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void ConfigNode::accept(std::string_view key) const {
  auto& acc = doc_->sections[path_].accepted;
  if (std::find(acc.begin(), acc.end(), key) == acc.end()) acc.emplace_back(key);
}

bool ConfigNode::has(std::string_view key) const {
  for (const Entry& e : entries(*node_))
    if (e.key.Scalar() == key) return true;
  return false;
}

bool ConfigNode::has_list(std::string_view key) const {
  for (const Entry& e : entries(*node_))
    if (e.key.Scalar() == key) return e.value.IsSequence();
  return false;
}

std::vector<std::string> ConfigNode::keys() const {
  std::vector<std::string> out;
  for (const Entry& e : entries(*node_)) out.push_back(e.key.Scalar());
  return out;
}

void ConfigNode::fail_missing(std::string_view key, std::string_view expected) const {
  std::string at = line_col(node_->Mark());
  std::string section = path_.empty() ? doc_->source + ", top level"
                                      : doc_->source + ", section '" + path_ + "'" + (at.empty() ? "" : " at " + at);
  std::string hint;
  std::vector<std::string> unread;
  const auto& acc = doc_->sections[path_].accepted;
  for (const Entry& e : entries(*node_))
    if (std::find(acc.begin(), acc.end(), e.key.Scalar()) == acc.end()) unread.push_back(e.key.Scalar());
  std::string near = closest_match(key, unread);
  if (!near.empty()) {
    for (const Entry& e : entries(*node_))
      if (e.key.Scalar() == near) hint = fmt::format("; found {} at {}: a typo?", quote(near), line_col(e.key.Mark()));
  }
  gs::fail("{}: required key is missing ({}); expected {}{}", child_path(key), section, expected, hint);
}

namespace {
// Every "present but wrong" message has one shape.
[[noreturn]] void fail_value(const std::string& path, std::string_view expected, const YAML::Node& v,
                             const YAML::Mark& key_mark, const std::string& source, std::string_view extra = "") {
  // An empty value's own mark points at the next line, so it is reported at its key.
  const YAML::Mark& m = v.IsNull() ? key_mark : v.Mark();
  gs::fail("{}: expected {}, got {}{} {}", path, expected, describe(v), extra, where(source, m));
}

int64_t read_int(const YAML::Node& v, const std::string& path, IntRange r, const YAML::Mark& km,
                 const std::string& src) {
  int64_t x = 0;
  Parse p = parse_int(v, x);
  std::string expected = int_expectation(r);
  if (p == Parse::out_of_range) fail_value(path, expected, v, km, src, " (outside the 64-bit integer range)");
  if (p != Parse::ok) fail_value(path, expected, v, km, src);
  if (x < r.min || x > r.max) fail_value(path, expected, v, km, src);
  return x;
}

double read_real(const YAML::Node& v, const std::string& path, RealRange r, const YAML::Mark& km,
                 const std::string& src) {
  double x = 0;
  Parse p = parse_real(v, x);
  std::string expected = real_expectation(r);
  if (p == Parse::out_of_range) fail_value(path, expected, v, km, src, " (not finite)");
  if (p != Parse::ok || !in_range(x, r)) fail_value(path, expected, v, km, src);
  return x;
}

std::string read_string(const YAML::Node& v, const std::string& path, const YAML::Mark& km,
                        const std::string& src) {
  if (!v.IsScalar()) fail_value(path, "a string", v, km, src);
  return v.Scalar();
}

}  // namespace

YAML::Node ConfigNode::require(std::string_view key, std::string_view expected, YAML::Mark& key_mark) const {
  accept(key);
  for (const Entry& e : entries(*node_)) {
    if (e.key.Scalar() != key) continue;
    key_mark = e.key.Mark();
    return e.value;
  }
  fail_missing(key, expected);
}

int64_t ConfigNode::get_int(std::string_view key, IntRange range) const {
  YAML::Mark km;
  YAML::Node v = require(key, int_expectation(range), km);
  return read_int(v, child_path(key), range, km, doc_->source);
}

int64_t ConfigNode::get_int_or(std::string_view key, int64_t def, IntRange range) const {
  return has(key) ? get_int(key, range) : (accept(key), def);
}

double ConfigNode::get_real(std::string_view key, RealRange range) const {
  YAML::Mark km;
  YAML::Node v = require(key, real_expectation(range), km);
  return read_real(v, child_path(key), range, km, doc_->source);
}

double ConfigNode::get_real_or(std::string_view key, double def, RealRange range) const {
  return has(key) ? get_real(key, range) : (accept(key), def);
}

bool ConfigNode::get_bool(std::string_view key) const {
  YAML::Mark km;
  YAML::Node v = require(key, "true or false", km);
  if (v.IsScalar() && !is_quoted(v) && (v.Scalar() == "true" || v.Scalar() == "false")) return v.Scalar() == "true";
  fail_value(child_path(key), "true or false", v, km, doc_->source);
}

bool ConfigNode::get_bool_or(std::string_view key, bool def) const {
  return has(key) ? get_bool(key) : (accept(key), def);
}

std::string ConfigNode::get_string(std::string_view key) const {
  YAML::Mark km;
  YAML::Node v = require(key, "a string", km);
  return read_string(v, child_path(key), km, doc_->source);
}

std::string ConfigNode::get_string_or(std::string_view key, std::string def) const {
  return has(key) ? get_string(key) : (accept(key), std::move(def));
}

std::string ConfigNode::get_choice(std::string_view key, const std::vector<std::string>& accepted) const {
  std::string expected = "one of " + join_quoted(accepted);
  YAML::Mark km;
  YAML::Node v = require(key, expected, km);
  if (v.IsScalar() && std::find(accepted.begin(), accepted.end(), v.Scalar()) != accepted.end()) return v.Scalar();
  std::string near = v.IsScalar() ? closest_match(v.Scalar(), accepted) : "";
  fail_value(child_path(key), expected, v, km, doc_->source,
             near.empty() ? "" : " (did you mean " + quote(near) + "?)");
}

std::string ConfigNode::get_choice_or(std::string_view key, std::string def,
                                      const std::vector<std::string>& accepted) const {
  return has(key) ? get_choice(key, accepted) : (accept(key), std::move(def));
}

// ---- lists

namespace {
template <typename T, typename ReadOne>
std::vector<T> read_list(const YAML::Node& v, const std::string& path, std::string_view each, Count count,
                         const YAML::Mark& km, const std::string& src, ReadOne read_one) {
  std::string expected = fmt::format("a list of {}{}", count_phrase(count), each);
  if (!v.IsSequence()) fail_value(path, expected, v, km, src);
  if (v.size() < count.min || v.size() > count.max) fail_value(path, expected, v, km, src);
  std::vector<T> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(read_one(v[i], fmt::format("{}[{}]", path, i)));
  return out;
}
}  // namespace

std::vector<int64_t> ConfigNode::get_int_list(std::string_view key, IntRange each, Count count) const {
  std::string each_text = int_expectation(each, true);
  YAML::Mark km;
  YAML::Node v = require(key, "a list of " + count_phrase(count) + each_text, km);
  const std::string& src = doc_->source;
  return read_list<int64_t>(v, child_path(key), each_text, count, km, src,
                            [&](const YAML::Node& x, const std::string& p) { return read_int(x, p, each, km, src); });
}

std::vector<int64_t> ConfigNode::get_int_list_or(std::string_view key, std::vector<int64_t> def, IntRange each,
                                                 Count count) const {
  return has(key) ? get_int_list(key, each, count) : (accept(key), std::move(def));
}

std::vector<double> ConfigNode::get_real_list(std::string_view key, RealRange each, Count count) const {
  std::string each_text = real_expectation(each, true);
  YAML::Mark km;
  YAML::Node v = require(key, "a list of " + count_phrase(count) + each_text, km);
  const std::string& src = doc_->source;
  return read_list<double>(v, child_path(key), each_text, count, km, src,
                           [&](const YAML::Node& x, const std::string& p) { return read_real(x, p, each, km, src); });
}

std::vector<double> ConfigNode::get_real_list_or(std::string_view key, std::vector<double> def, RealRange each,
                                                 Count count) const {
  return has(key) ? get_real_list(key, each, count) : (accept(key), std::move(def));
}

std::vector<std::string> ConfigNode::get_string_list(std::string_view key, Count count) const {
  YAML::Mark km;
  YAML::Node v = require(key, "a list of " + count_phrase(count) + "strings", km);
  const std::string& src = doc_->source;
  return read_list<std::string>(v, child_path(key), "strings", count, km, src,
                                [&](const YAML::Node& x, const std::string& p) { return read_string(x, p, km, src); });
}

std::vector<std::string> ConfigNode::get_string_list_or(std::string_view key, std::vector<std::string> def,
                                                        Count count) const {
  return has(key) ? get_string_list(key, count) : (accept(key), std::move(def));
}

// ---- sections

ConfigNode ConfigNode::section(std::string_view key) const {
  YAML::Mark km;
  YAML::Node v = require(key, "a section (key: value lines)", km);
  // `model:` with every line below commented out is an empty section, not an error.
  if (v.IsNull()) return ConfigNode(doc_, child_path(key), YAML::Node(YAML::NodeType::Map));
  if (!v.IsMap()) fail_value(child_path(key), "a section (key: value lines)", v, km, doc_->source);
  return ConfigNode(doc_, child_path(key), v);
}

ConfigNode ConfigNode::optional_section(std::string_view key) const {
  if (has(key)) return section(key);
  accept(key);
  return ConfigNode(doc_, child_path(key), YAML::Node(YAML::NodeType::Map));
}

std::vector<ConfigNode> ConfigNode::section_list(std::string_view key, Count count) const {
  std::string expected = "a list of " + count_phrase(count) + "sections";
  YAML::Mark km;
  YAML::Node v = require(key, expected, km);
  std::string path = child_path(key);
  if (!v.IsSequence() || v.size() < count.min || v.size() > count.max)
    fail_value(path, expected, v, km, doc_->source);
  std::vector<ConfigNode> out;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string item = fmt::format("{}[{}]", path, i);
    if (!v[i].IsMap()) fail_value(item, "a section (key: value lines)", v[i], km, doc_->source);
    out.push_back(ConfigNode(doc_, item, v[i]));
  }
  return out;
}

std::vector<std::pair<std::string, ConfigNode>> ConfigNode::get_named_list(std::string_view key, Count count) const {
  const std::string expected = "a list of " + count_phrase(count) + "names or {name: {settings}} items";
  YAML::Mark km;
  YAML::Node v = require(key, expected, km);
  const std::string path = child_path(key);
  if (!v.IsSequence() || v.size() < count.min || v.size() > count.max) fail_value(path, expected, v, km, doc_->source);
  std::vector<std::pair<std::string, ConfigNode>> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item = fmt::format("{}[{}]", path, i);
    const YAML::Node& x = v[i];
    if (x.IsScalar()) {
      out.emplace_back(x.Scalar(), ConfigNode(doc_, item, YAML::Node(YAML::NodeType::Map)));
      continue;
    }
    const auto e = x.IsMap() ? entries(x) : std::vector<Entry>{};
    if (e.size() != 1 || !e[0].key.IsScalar() || !(e[0].value.IsMap() || e[0].value.IsNull()))
      fail_value(item, "a name, or one name with its settings ({name: {key: value, ...}})", x, km, doc_->source);
    const std::string name = e[0].key.Scalar();
    out.emplace_back(name, ConfigNode(doc_, item + "." + name,
                                      e[0].value.IsNull() ? YAML::Node(YAML::NodeType::Map) : e[0].value));
  }
  return out;
}

// ---- unknown keys

std::vector<std::string> ConfigNode::unknown_keys() const {
  struct Unknown {
    int line;
    std::string text;
  };
  std::vector<Unknown> found;
  for (const auto& [path, rec] : doc_->sections) {
    for (const Entry& e : entries(*rec.node)) {
      const std::string& k = e.key.Scalar();
      if (std::find(rec.accepted.begin(), rec.accepted.end(), k) != rec.accepted.end()) continue;
      std::string full = path.empty() ? k : path + "." + k;
      std::string near = closest_match(k, rec.accepted);
      std::string section = path.empty() ? "the top level" : "'" + path + "'";
      std::string accepted = rec.accepted.empty() ? section + " takes no keys"
                                                  : "accepted keys in " + section + ": " +
                                                        fmt::format("{}", fmt::join(rec.accepted, ", "));
      found.push_back(
          {e.key.Mark().line, fmt::format("{} ({}): unknown key{}; {}", full, line_col(e.key.Mark()),
                                          near.empty() ? "" : " (did you mean " + quote(near) + "?)", accepted)});
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const Unknown& a, const Unknown& b) { return a.line < b.line; });
  std::vector<std::string> out;
  for (auto& u : found) out.push_back(std::move(u.text));
  return out;
}

void ConfigNode::finish() const {
  std::vector<std::string> unknown = unknown_keys();
  if (unknown.empty()) return;
  std::string msg = fmt::format("{}: {} unknown key{} (misspelt, or not used by this command):", doc_->source,
                                unknown.size(), unknown.size() == 1 ? "" : "s");
  for (const auto& u : unknown) msg += "\n  " + u;
  throw gs::Error(msg);
}

// ---- "did you mean"

// Optimal string alignment distance: Levenshtein plus adjacent transpositions, the commonest typo
// ("adma" is one edit from "adam", not two).
size_t edit_distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<size_t> d((n + 1) * (m + 1));
  auto at = [&](size_t i, size_t j) -> size_t& { return d[i * (m + 1) + j]; };
  for (size_t i = 0; i <= n; ++i) at(i, 0) = i;
  for (size_t j = 0; j <= m; ++j) at(0, j) = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      at(i, j) = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        at(i, j) = std::min(at(i, j), at(i - 2, j - 2) + 1);
    }
  }
  return at(n, m);
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  // Case is ignored (Adam vs adam); roughly one edit in three characters still reads as a typo, but
  // rewriting the whole word does not ("b" is no typo of "a").
  std::string w = lower(word);
  size_t limit = std::max<size_t>(1, std::min<size_t>(3, w.size() / 3));
  std::string best;
  size_t best_d = limit + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(w, lower(c));
    if (d < best_d && d < w.size()) best_d = d, best = c;
  }
  return best;
}

}  // namespace gs::tools
