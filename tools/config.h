// A strict reader for YAML configuration files (training and rollout configs).
//
// Strict means: a wrong type is an error (1.5 or "4" where an integer is expected, yes/no or 1 for a
// bool, a list where a number is expected), and a key nobody asked for is an error, so a typo such as
// `embeddim:` cannot silently fall back to a default. Every error names the file, the dotted key path,
// the line and column, what is accepted and what was found:
//   model.embed_dim: expected an integer >= 1, got 'abc' (config.yaml line 4, column 14)
//
// Usage: read every key through the getters, then call finish(), which reports all unknown keys of
// the document at once (the accepted keys of a section are the ones the program asked for).
//   auto cfg = ConfigNode::load_file("train.yaml");
//   auto model = cfg.section("model");
//   int64_t embed = model.get_int("embed_dim", {.min = 1});
//   double lr = cfg.section("optimizer").get_real_or("lr", 1e-3, {.min = 0, .min_exclusive = true});
//   cfg.finish();
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace gs::tools {

// Inclusive bounds for integers.
struct IntRange {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
};

// Bounds for reals; values must be finite in every case.
struct RealRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  bool max_exclusive = false;
};

// Accepted list lengths (inclusive).
struct Count {
  size_t min = 0;
  size_t max = std::numeric_limits<size_t>::max();
};

struct ConfigDocument;  // shared by every node of one document (config.cpp)

class ConfigNode {
 public:
  // Reads a file; a missing or unreadable file, invalid YAML, several documents, duplicate keys, or
  // a top level that is not a mapping is a gs::Error naming the file (and line for YAML errors).
  static ConfigNode load_file(const std::string& path);
  // Parses text (tests; checkpoints that store the config text). `source` names it in messages.
  static ConfigNode from_string(const std::string& text, const std::string& source = "<string>");

  // Dotted path of this section ("" for the top level, "model", "data.sources[1]").
  const std::string& path() const { return path_; }
  // The file name (or `source`) and the full original text, so a checkpoint can store it verbatim.
  const std::string& source() const;
  const std::string& text() const;

  // Whether the key is present. Does not count as reading it.
  bool has(std::string_view key) const;
  // Whether the key is present and holds a list (`key: [a, b]`). Does not count as reading it.
  bool has_list(std::string_view key) const;
  // Keys present in this section, in file order.
  std::vector<std::string> keys() const;
  // Accept a key without reading it (e.g. an option that only matters for another mode).
  void accept(std::string_view key) const;

  // Required getters throw when the key is missing; *_or getters return `def` when it is absent.
  // A key that is present but empty (`lr:`) is an error in both.
  int64_t get_int(std::string_view key, IntRange range = {}) const;
  int64_t get_int_or(std::string_view key, int64_t def, IntRange range = {}) const;
  double get_real(std::string_view key, RealRange range = {}) const;
  double get_real_or(std::string_view key, double def, RealRange range = {}) const;
  bool get_bool(std::string_view key) const;
  bool get_bool_or(std::string_view key, bool def) const;
  std::string get_string(std::string_view key) const;
  std::string get_string_or(std::string_view key, std::string def) const;
  // One of `accepted` (case-sensitive), with a "did you mean" on near misses.
  std::string get_choice(std::string_view key, const std::vector<std::string>& accepted) const;
  std::string get_choice_or(std::string_view key, std::string def, const std::vector<std::string>& accepted) const;

  std::vector<int64_t> get_int_list(std::string_view key, IntRange each = {}, Count count = {}) const;
  std::vector<int64_t> get_int_list_or(std::string_view key, std::vector<int64_t> def, IntRange each = {},
                                       Count count = {}) const;
  std::vector<double> get_real_list(std::string_view key, RealRange each = {}, Count count = {}) const;
  std::vector<double> get_real_list_or(std::string_view key, std::vector<double> def, RealRange each = {},
                                       Count count = {}) const;
  std::vector<std::string> get_string_list(std::string_view key, Count count = {}) const;
  std::vector<std::string> get_string_list_or(std::string_view key, std::vector<std::string> def,
                                              Count count = {}) const;

  // A nested mapping. section() requires it; optional_section() gives an empty section when the key is
  // absent, so its *_or getters give their defaults. section_list() reads a list of mappings.
  ConfigNode section(std::string_view key) const;
  ConfigNode optional_section(std::string_view key) const;
  std::vector<ConfigNode> section_list(std::string_view key, Count count = {}) const;
  // A list whose items are names or one-key sections naming something with its settings, e.g.
  // `variables: [T, {Q: {levels: [850]}}]`: each item's name and its section (empty for a plain
  // name), in order.
  std::vector<std::pair<std::string, ConfigNode>> get_named_list(std::string_view key, Count count = {}) const;

  // Throws one gs::Error listing every unknown key of every section that was read, each with its
  // line, a "did you mean" when a near match exists, and the accepted keys of its section.
  void finish() const;
  // The same check without throwing: one line per unknown key (empty when all keys were read).
  std::vector<std::string> unknown_keys() const;

 private:
  ConfigNode(std::shared_ptr<ConfigDocument> doc, std::string path, YAML::Node node);
  static ConfigNode from_yaml(const std::string& text, const std::string& source);
  YAML::Node lookup(std::string_view key) const;  // records the key as accepted
  // The value of a required key (throws when missing); `key_mark` gets the key's position.
  YAML::Node require(std::string_view key, std::string_view expected, YAML::Mark& key_mark) const;
  [[noreturn]] void fail_missing(std::string_view key, std::string_view expected) const;
  std::string child_path(std::string_view key) const;

  std::shared_ptr<ConfigDocument> doc_;
  std::string path_;
  // Held by pointer: assigning one YAML::Node to another rewrites the node it referred to, so a
  // ConfigNode must never assign its YAML::Node (ConfigNode itself stays assignable).
  std::shared_ptr<const YAML::Node> node_;
};

// Levenshtein distance (tests and "did you mean" hints).
size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word` if it is close enough to be a plausible typo, else "".
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace gs::tools
