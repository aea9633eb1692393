// The strict config reader: typed getters, every kind of error and what its message says.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "engine/error.h"
#include "tools/config.h"
#include "tests/test_util.h"

using gs_test::contains;
using gs_test::error_of;

using gs::tools::ConfigNode;
using gs::tools::Count;
using gs::tools::IntRange;
using gs::tools::RealRange;

namespace {

const char* kModel = R"(# a small schema
model:
  embed_dim: 16
  num_layers: 4
  scale: 0.5
  grid: legendre-gauss
  use_mlp: true
  img_shape: [32, 64]
  betas: [0.9, 0.999]
  name: "sfno 1"
  tags: [a, b]
seed: -3
)";

}  // namespace

TEST_CASE("config: typed getters read values and defaults") {
  auto cfg = ConfigNode::from_string(kModel, "model.yaml");
  auto m = cfg.section("model");
  CHECK(m.path() == "model");
  CHECK(m.get_int("embed_dim", {.min = 1}) == 16);
  CHECK(m.get_int_or("num_layers", 8) == 4);
  CHECK(m.get_int_or("absent", 8) == 8);
  CHECK(m.get_real("scale", {.min = 0, .max = 1}) == 0.5);
  CHECK(m.get_real_or("lr", 1e-3) == 1e-3);
  CHECK(m.get_choice("grid", {"equiangular", "legendre-gauss"}) == "legendre-gauss");
  CHECK(m.get_bool("use_mlp") == true);
  CHECK(m.get_bool_or("absent_flag", false) == false);
  CHECK(m.get_int_list("img_shape", {.min = 1}, {.min = 2, .max = 2}) == std::vector<int64_t>{32, 64});
  CHECK(m.get_real_list("betas") == std::vector<double>{0.9, 0.999});
  CHECK(m.get_string("name") == "sfno 1");
  CHECK(m.get_string_list("tags") == std::vector<std::string>{"a", "b"});
  CHECK(cfg.get_int("seed") == -3);
  CHECK(cfg.get_real_or("seed", 0.0) == -3.0);  // an integer is a valid real
  CHECK(cfg.unknown_keys().empty());
  cfg.finish();
  CHECK(cfg.text() == kModel);
  CHECK(cfg.source() == "model.yaml");
}

TEST_CASE("config: integers are strict") {
  auto cfg = ConfigNode::from_string(
      "model:\n  a: abc\n  b: 1.5\n  c: '4'\n  d: [1]\n  e: 0\n  f: 99999999999999999999\n  g:\n", "config.yaml");
  auto m = cfg.section("model");
  std::string e = error_of([&] { m.get_int("a", {.min = 1}); });
  CHECK(e == "model.a: expected an integer >= 1, got 'abc' (config.yaml line 2, column 6)");
  e = error_of([&] { m.get_int("b"); });
  CHECK(e == "model.b: expected an integer, got '1.5' (config.yaml line 3, column 6)");
  e = error_of([&] { m.get_int("c"); });
  CHECK(contains(e, "got the quoted string '4'"));
  e = error_of([&] { m.get_int("d"); });
  CHECK(contains(e, "model.d: expected an integer, got a list of 1 item"));
  e = error_of([&] { m.get_int("e", {.min = 1, .max = 64}); });
  CHECK(contains(e, "model.e: expected an integer in [1, 64], got '0'"));
  e = error_of([&] { m.get_int("e", {.max = -1}); });
  CHECK(contains(e, "expected an integer <= -1"));
  e = error_of([&] { m.get_int("f"); });
  CHECK(contains(e, "outside the 64-bit integer range"));
  e = error_of([&] { m.get_int_or("g", 3); });  // present but empty is not "absent"
  CHECK(contains(e, "model.g: expected an integer, got an empty value (config.yaml line 8, column 3)"));
}

TEST_CASE("config: reals must be finite numbers in range") {
  auto cfg = ConfigNode::from_string(
      "lr: 1e-3\nneg: -2.5E+2\ninf: .inf\nnan: .nan\nbig: 1e999\nzero: 0\nword: fast\nq: \"0.1\"\n");
  CHECK(cfg.get_real("lr") == 1e-3);
  CHECK(cfg.get_real("neg") == -250.0);
  CHECK(contains(error_of([&] { cfg.get_real("inf"); }), "inf: expected a finite number, got '.inf' (not finite)"));
  CHECK(contains(error_of([&] { cfg.get_real("nan"); }), "(not finite)"));
  CHECK(contains(error_of([&] { cfg.get_real("big"); }), "(not finite)"));
  CHECK(contains(error_of([&] { cfg.get_real("zero", {.min = 0, .min_exclusive = true}); }),
                 "zero: expected a finite number > 0, got '0'"));
  CHECK(contains(error_of([&] { cfg.get_real("lr", {.min = 0, .max = 1e-4, .max_exclusive = true}); }),
                 "expected a finite number in [0, 0.0001), got '1e-3'"));
  CHECK(
      contains(error_of([&] { cfg.get_real("word"); }), "word: expected a finite number, got 'fast' (<string> line 7"));
  CHECK(contains(error_of([&] { cfg.get_real("q"); }), "got the quoted string '0.1'"));
}

TEST_CASE("config: bools are only true and false") {
  auto cfg = ConfigNode::from_string("a: yes\nb: 1\nc: 'true'\nd: false\ne: True\n");
  CHECK(cfg.get_bool("d") == false);
  CHECK(error_of([&] { cfg.get_bool("a"); }) == "a: expected true or false, got 'yes' (<string> line 1, column 4)");
  CHECK(contains(error_of([&] { cfg.get_bool("b"); }), "expected true or false, got '1'"));
  CHECK(contains(error_of([&] { cfg.get_bool("c"); }), "got the quoted string 'true'"));
  CHECK(contains(error_of([&] { cfg.get_bool("e"); }), "got 'True'"));
}

TEST_CASE("config: strings and choices") {
  auto cfg = ConfigNode::from_string("opt: adma\nname: [x]\nkind: sgd\nsub:\n  k: 1\n");
  CHECK(cfg.get_choice("kind", {"adam", "sgd"}) == "sgd");
  CHECK(error_of([&] { cfg.get_choice("opt", {"adam", "sgd"}); }) ==
        "opt: expected one of 'adam', 'sgd', got 'adma' (did you mean 'adam'?) (<string> line 1, column 6)");
  CHECK(contains(error_of([&] { cfg.get_choice("kind", {"adamw"}); }), "expected one of 'adamw', got 'sgd' (<string>"));
  CHECK(contains(error_of([&] { cfg.get_string("name"); }), "name: expected a string, got a list of 1 item"));
  CHECK(contains(error_of([&] { cfg.get_string("sub"); }), "sub: expected a string, got a section (key: value lines)"));
  CHECK(cfg.get_choice_or("absent", "adam", {"adam", "sgd"}) == "adam");
}

TEST_CASE("config: lists check their length and every element") {
  auto cfg = ConfigNode::from_string("shape: [32, 64, 2]\nbad: [1, x, 3]\nnum: 5\nw: [0.5, -1]\nnames: [a, [b]]\n");
  CHECK(contains(error_of([&] { cfg.get_int_list("shape", {}, {.min = 2, .max = 2}); }),
                 "shape: expected a list of exactly 2 integers, got a list of 3 items (<string> line 1"));
  CHECK(contains(error_of([&] { cfg.get_int_list("shape", {}, {.min = 4}); }), "a list of at least 4 integers"));
  CHECK(contains(error_of([&] { cfg.get_int_list("shape", {}, {.max = 1}); }), "a list of at most 1 integers"));
  CHECK(error_of([&] { cfg.get_int_list("bad", {.min = 1}); }) ==
        "bad[1]: expected an integer >= 1, got 'x' (<string> line 2, column 10)");
  CHECK(contains(error_of([&] { cfg.get_int_list("num"); }), "num: expected a list of integers, got '5'"));
  CHECK(
      contains(error_of([&] { cfg.get_real_list("w", {.min = 0}); }), "w[1]: expected a finite number >= 0, got '-1'"));
  CHECK(contains(error_of([&] { cfg.get_string_list("names"); }), "names[1]: expected a string, got a list of 1 item"));
  CHECK(cfg.get_int_list_or("absent", {1, 2}) == std::vector<int64_t>{1, 2});
  CHECK(cfg.get_real_list_or("absent2", {0.5}) == std::vector<double>{0.5});
  CHECK(cfg.get_string_list_or("absent3", {"x"}) == std::vector<std::string>{"x"});
}

TEST_CASE("config: missing required keys suggest a present near miss") {
  auto cfg = ConfigNode::from_string("model:\n  embeddim: 16\n  depth: 2\n", "c.yaml");
  auto m = cfg.section("model");
  std::string e = error_of([&] { m.get_int("embed_dim", {.min = 1}); });
  CHECK(e == "model.embed_dim: required key is missing (c.yaml, section 'model' at line 2, column 3); expected an "
             "integer >= 1; found 'embeddim' at line 2, column 3: a typo?");
  e = error_of([&] { cfg.get_real("lr"); });
  CHECK(e == "lr: required key is missing (c.yaml, top level); expected a finite number");
  CHECK(contains(error_of([&] { cfg.section("optimizer"); }), "optimizer: required key is missing"));
}

TEST_CASE("config: unknown keys are all reported at once with accepted keys") {
  const char* text = "model:\n  embeddim: 16\n  num_layers: 4\n  colour: red\ntrainer:\n  steps: 10\nextra: 1\n";
  auto cfg = ConfigNode::from_string(text, "run.yaml");
  auto m = cfg.section("model");
  m.get_int_or("embed_dim", 8);
  m.get_int_or("num_layers", 2);
  cfg.optional_section("trainer").get_int("steps");
  cfg.optional_section("optimizer").get_real_or("lr", 1e-3);  // absent section: defaults
  auto unknown = cfg.unknown_keys();
  REQUIRE(unknown.size() == 3);
  CHECK(unknown[0] ==
        "model.embeddim (line 2, column 3): unknown key (did you mean 'embed_dim'?); accepted keys in 'model': "
        "embed_dim, num_layers");
  CHECK(unknown[1] == "model.colour (line 4, column 3): unknown key; accepted keys in 'model': embed_dim, num_layers");
  CHECK(contains(unknown[2],
                 "extra (line 7, column 1): unknown key; accepted keys in the top level: model, trainer, optimizer"));
  std::string e = error_of([&] { cfg.finish(); });
  CHECK(contains(e, "run.yaml: 3 unknown keys"));
  CHECK(contains(e, "\n  model.embeddim (line 2"));
  CHECK(contains(e, "\n  extra (line 7"));
  // Accepting a key explicitly silences it.
  cfg.accept("extra");
  m.accept("colour");
  m.accept("embeddim");
  CHECK_NOTHROW(cfg.finish());
}

TEST_CASE("config: an unread section is one unknown key; an opened one is checked inside") {
  auto cfg = ConfigNode::from_string("a:\n  x: 1\nb:\n  y: 2\n");
  cfg.section("a");  // opened, but x never read
  auto unknown = cfg.unknown_keys();
  REQUIRE(unknown.size() == 2);
  CHECK(contains(unknown[0], "a.x (line 2, column 3): unknown key; 'a' takes no keys"));
  CHECK(contains(unknown[1], "b (line 3, column 1): unknown key; accepted keys in the top level: a"));
}

TEST_CASE("config: sections and lists of sections") {
  auto cfg = ConfigNode::from_string(
      "empty:\nsources:\n  - {name: era5, weight: 1.0}\n  - {name: swe, wieght: 2}\nflat: 3\nlist: [1, 2]\n");
  CHECK(cfg.section("empty").get_int_or("k", 5) == 5);  // `empty:` is an empty section
  auto sources = cfg.section_list("sources", {.min = 1});
  REQUIRE(sources.size() == 2);
  CHECK(sources[1].path() == "sources[1]");
  for (auto& s : sources) {
    s.get_string("name");
    s.get_real_or("weight", 1.0);
  }
  auto unknown = cfg.unknown_keys();
  REQUIRE(unknown.size() == 3);  // flat and list are not read yet
  CHECK(unknown[0] == "sources[1].wieght (line 4, column 17): unknown key (did you mean 'weight'?); accepted keys in "
                      "'sources[1]': name, weight");
  CHECK(contains(unknown[1], "flat (line 5, column 1)"));
  CHECK(contains(unknown[2], "list (line 6, column 1)"));
  CHECK(contains(error_of([&] { cfg.section("flat"); }), "flat: expected a section (key: value lines), got '3'"));
  CHECK(
      contains(error_of([&] { cfg.section_list("list"); }), "list[0]: expected a section (key: value lines), got '1'"));
  CHECK(contains(error_of([&] { cfg.section_list("sources", {.max = 1}); }),
                 "sources: expected a list of at most 1 sections, got a list of 2 items"));
  std::vector<std::string> keys = cfg.keys();
  CHECK(keys == std::vector<std::string>{"empty", "sources", "flat", "list"});
  CHECK(cfg.has("flat"));
  CHECK_FALSE(cfg.has("nope"));
  // ConfigNode is assignable without disturbing the document.
  ConfigNode a = cfg.section("empty");
  a = sources[0];
  CHECK(a.get_string("name") == "era5");
  CHECK(sources[1].get_string("name") == "swe");
}

TEST_CASE("config: loading errors") {
  CHECK(error_of([] { ConfigNode::load_file("/nonexistent/dir/x.yaml"); }) ==
        "cannot read config file '/nonexistent/dir/x.yaml': no such file");
  auto dir = std::filesystem::temp_directory_path();
  CHECK(contains(error_of([&] { ConfigNode::load_file(dir.string()); }), "it is a directory"));
  CHECK(error_of([] { ConfigNode::from_string("a: [1, 2\nb: 3", "bad.yaml"); }) ==
        "bad.yaml: invalid YAML at line 2, column 2: end of sequence flow not found");
  CHECK(contains(error_of([] { ConfigNode::from_string("a: 1\n---\nb: 2\n", "two.yaml"); }),
                 "two.yaml: holds 2 YAML documents"));
  CHECK(contains(error_of([] { ConfigNode::from_string("- 1\n- 2\n", "l.yaml"); }),
                 "l.yaml: expected key: value lines at the top level, got a list at line 1"));
  // yaml-cpp 0.7 would loop forever on these (tests/fuzz found the first).
  for (const char* hang : {",", "# c\n  ,*a", "- a\n,", "a: 1\n---\n,", "--- ,", "&a ,", "\"a\" ,", "[a] ,", "|\n x\n,", "agrid [x, *a #c *i: 1\n,"})
    CHECK(contains(error_of([&] { ConfigNode::from_string(hang, "h.yaml"); }), "h.yaml: expected key: value lines"));
  CHECK(error_of([] { ConfigNode::from_string("# c\n    a: 1\n   , x]\n", "h.yaml"); }) ==
        "h.yaml: line 3 is indented less than the first key (line 2, column 5); the top-level keys must line up");
  // A UTF-8 byte-order mark is skipped, as yaml-cpp skips it.
  CHECK(ConfigNode::from_string("\xEF\xBB\xBFseed: 4\n", "bom.yaml").get_int("seed") == 4);
  // Keys that are quoted or indented as a whole still read.
  CHECK(ConfigNode::from_string("  \"a b\": 1\n  c: [1,\n2]\n", "q.yaml").get_int("a b") == 1);
  CHECK(
      error_of([] { ConfigNode::from_string("m:\n  a: 1\n  a: 2\n", "d.yaml"); }) ==
      "m.a: duplicate key (d.yaml line 3, column 3) (first at line 2, column 3); each key may appear once per section");
  CHECK(contains(error_of([] { ConfigNode::from_string("m:\n  ? [a, b]\n  : 1\n", "k.yaml"); }), "keys must be plain names"));
  // An empty file is an empty top level: defaults apply, required keys are reported missing.
  auto empty = ConfigNode::from_string("# nothing here\n");
  CHECK(empty.get_int_or("steps", 7) == 7);
}

TEST_CASE("config: load_file reads a real file and names it in errors") {
  auto path = std::filesystem::temp_directory_path() / "gs_test_config.yaml";
  {
    std::ofstream out(path);
    out << "steps: ten\n";
  }
  auto cfg = ConfigNode::load_file(path.string());
  CHECK(error_of([&] { cfg.get_int("steps"); }) ==
        "steps: expected an integer, got 'ten' (" + path.string() + " line 1, column 8)");
  std::filesystem::remove(path);
}

TEST_CASE("config: edit distance and closest match") {
  using gs::tools::closest_match;
  using gs::tools::edit_distance;
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("same", "same") == 0);
  CHECK(edit_distance("adma", "adam") == 1);  // a transposition is one edit
  CHECK(closest_match("b", {"a"}).empty());
  CHECK(closest_match("embeddim", {"embed_dim", "num_layers"}) == "embed_dim");
  CHECK(closest_match("Adam", {"adam", "sgd"}) == "adam");
  CHECK(closest_match("zzz", {"adam", "sgd"}).empty());
}

TEST_CASE("config: hostile documents: an unterminated quote, tags, alias bombs and bytes that are not UTF-8") {
  // An unterminated quote would take in every key after it.
  std::string e = error_of([] { ConfigNode::from_string("name: \"sfno\nlr: 3\nsteps: 4\n", "c.yaml"); });
  CHECK(contains(e, "name: the quoted string that starts"));
  CHECK(contains(e, "line 1"));
  CHECK(contains(e, "is a closing \" missing?"));
  CHECK(contains(error_of([] { ConfigNode::from_string("a:\n  b: 'it''s\nc: 1\n", "c.yaml"); }),
                 "a.b: the quoted string that starts"));
  // Quotes that close on their line, escapes and doubled single quotes included, are fine.
  auto ok = ConfigNode::from_string("a: \"x\\\"y\"\nb: 'it''s'\nc: [\"p\", 'q']\nd: |\n  two\n  lines\n", "c.yaml");
  CHECK(ok.get_string("a") == "x\"y");
  CHECK(ok.get_string("b") == "it's");
  // A tag would turn a number into a string the reader refuses when quoted.
  e = error_of([] { ConfigNode::from_string("embed_dim: !!str 8\n", "c.yaml"); });
  CHECK(contains(e, "embed_dim: YAML tags such as 'tag:yaml.org,2002:str' are not accepted"));
  // A kilobyte of nested aliases (10^8 values when expanded) is refused at once.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c)
    bomb += fmt::format("{0}: &{0} [*{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}]\n", c,
                        static_cast<char>(c - 1));
  CHECK(bomb.size() < 1024);
  CHECK(contains(error_of([&] { ConfigNode::from_string(bomb, "bomb.yaml"); }),
                 "bomb.yaml: the document expands to more than 100000 values through its aliases"));
  // A small alias is fine.
  auto aliased = ConfigNode::from_string("base: &b [1, 2]\ncopy: *b\n", "c.yaml");
  CHECK(aliased.get_int_list("copy").size() == 2);
  // Bytes that are not UTF-8, named by line and column.
  CHECK(error_of([] { ConfigNode::from_string("a: 1\nname: caf\xe9\n", "latin1.yaml"); }) ==
        "latin1.yaml: line 2, column 10: byte 0xe9 is not valid UTF-8; a config file must be UTF-8 text");
  CHECK(contains(error_of([] { ConfigNode::from_string("a: \xc0\xaf\n", "c.yaml"); }), "byte 0xc0 is not valid"));
  CHECK(ConfigNode::from_string("name: \"caf\xc3\xa9\"\n", "c.yaml").get_string("name") == "caf\xc3\xa9");
}
