// Checkpoints: safetensors round trips (bitwise, every dtype, odd shapes and strides), the on-disk
// layout other readers rely on, atomic replacement, every kind of malformed file, the checksum, and
// the training Checkpoint on top.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/factory.h"
#include "models/checkpoint.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::models;
using gs_test::contains;
using gs_test::error_of;
namespace fs = std::filesystem;
using TempDir = gs_test::TempDir;
using json = nlohmann::json;

namespace {

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file from a header text and data bytes, as a foreign writer would make it.
std::string make_file(const std::string& header, const std::string& data) {
  uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

json header_of(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return json::parse(bytes.substr(8, n));
}

std::string raw_bytes(const Tensor& t) {
  Tensor c = contiguous_copy(t);
  return std::string(static_cast<const char*>(c.raw_data()), static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && raw_bytes(a) == raw_bytes(b);
}

double bits_to_f64(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

// One tensor of every dtype, with the values that a careless writer would get wrong: NaN payloads,
// signed zero, infinities, denormals, integer extremes.
StateDict every_dtype() {
  StateDict s;
  s["f32"] = from_vector<float>({1.5f, -0.0f, std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::denorm_min(), std::nanf("0x1234"), 3e38f},
                                {2, 3});
  s["f64"] = from_vector<double>({bits_to_f64(0x7FF0000000000F0Full), -0.0, 1e-310, -1e308}, {4});
  s["i64"] =
      from_vector<int64_t>({std::numeric_limits<int64_t>::min(), -1, 0, std::numeric_limits<int64_t>::max()}, {2, 2});
  s["bool"] = from_vector(std::vector<bool>{true, false, false, true, true}, {5});
  s["c64"] = from_vector<c64>({{1.f, -2.f}, {-0.f, 3.5f}}, {2});
  s["c128"] = from_vector<c128>({{1.0, 2.0}, {-3.0, 1e-300}, {0.5, -0.25}}, {3, 1});
  s["scalar"] = from_vector<double>({42.0}, {});
  s["empty"] = zeros({0, 3}, DType::f32);
  s["empty_c128"] = zeros({2, 0}, DType::c128);
  s["randn"] = randn({3, 5, 7}, RandomKey{7, 1}, DType::f32);
  // bf16: a NaN payload, -0, inf, the smallest subnormal and an odd mantissa, bit for bit.
  std::vector<bfloat16> b16;
  for (uint16_t bits : {0x7fc1, 0x8000, 0x7f80, 0x0001, 0x3f81}) b16.push_back(bfloat16::from_bits(bits));
  s["bf16"] = from_vector(b16, {5});
  return s;
}

}  // namespace

TEST_CASE("crc32: the zlib check value and agreement with a bytewise reference") {
  CHECK(crc32("123456789", 9) == 0xCBF43926u);
  CHECK(crc32("", 0) == 0u);
  std::mt19937 gen(3);
  std::string data(1000, '\0');
  for (auto& c : data) c = static_cast<char>(gen());
  auto slow = [](const char* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) {
      c ^= static_cast<unsigned char>(p[i]);
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return ~c;
  };
  for (size_t start : {0, 1, 3, 7})
    for (size_t n : {0, 1, 7, 8, 9, 63, 900}) CHECK(crc32(data.data() + start, n) == slow(data.data() + start, n));
  // Continuing from a previous value equals one pass over the concatenation.
  CHECK(crc32(data.data() + 10, 90, crc32(data.data(), 10)) == crc32(data.data(), 100));
}

TEST_CASE("safetensors: bitwise round trip of every dtype, 0-dim and empty tensors, with metadata") {
  TempDir dir("checkpoint");
  StateDict in = every_dtype();
  Metadata meta{{"note", "trained on SWE"}, {"empty", ""}, {"unicode", "\xce\xbb = 2\xcf\x80 / k\nline 2"}};
  save_safetensors(dir / "all.safetensors", in, meta);
  SafetensorsContents out = load_safetensors(dir / "all.safetensors");
  CHECK(out.metadata == meta);  // the format's own keys are not handed back
  REQUIRE(out.tensors.size() == in.size());
  for (const auto& [name, t] : in) {
    CAPTURE(name);
    REQUIRE(out.tensors.count(name) == 1);
    const Tensor& u = out.tensors.at(name);
    CHECK(same_bits(t, u));
    CHECK(u.is_contiguous());
    CHECK(u.device().is_cpu());
  }
  CHECK(out.tensors.at("scalar").dim() == 0);
  CHECK(out.tensors.at("scalar").item<double>() == 42.0);
  CHECK(out.tensors.at("empty").sizes() == Shape{0, 3});
  CHECK(std::isnan(out.tensors.at("f32").to_vector<float>()[4]));
}

TEST_CASE("safetensors: non-contiguous and offset views are written as their values") {
  TempDir dir("checkpoint");
  Tensor base = arange(0.0, 24.0, 1.0, DType::f64);
  // The transpose of a (4, 6) matrix, and a strided window starting at element 5.
  Tensor transposed = alias_with_geometry(base, {6, 4}, {1, 6}, 0);
  Tensor window = alias_with_geometry(base, {2, 3}, {12, 2}, 5);
  Tensor expanded = alias_with_geometry(base, {3, 2}, {0, 1}, 1);  // stride 0: a broadcast row
  REQUIRE(!transposed.is_contiguous());
  save_safetensors(dir / "views.safetensors", {{"t", transposed}, {"w", window}, {"e", expanded}});
  auto out = load_safetensors(dir / "views.safetensors").tensors;
  CHECK(out.at("t").to_vector<double>() == transposed.to_vector<double>());
  CHECK(out.at("t").to_vector<double>()[1] == 6.0);  // row 0 of the transpose is column 0: 0, 6, 12, 18
  CHECK(out.at("w").to_vector<double>() == std::vector<double>{5, 7, 9, 17, 19, 21});
  CHECK(out.at("e").to_vector<double>() == std::vector<double>{1, 2, 1, 2, 1, 2});
}

TEST_CASE("safetensors: the layout other readers expect") {
  TempDir dir("checkpoint");
  save_safetensors(dir / "layout.safetensors", every_dtype(), {{"k", "v"}});
  std::string bytes = read_bytes(dir / "layout.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);  // header padded with spaces so the data starts 8-byte aligned
  std::string header = bytes.substr(8, n);
  CHECK(header.front() == '{');
  CHECK(header.find_last_not_of(' ') == header.rfind('}'));
  json h = json::parse(header);
  CHECK(h["f32"]["dtype"] == "F32");
  CHECK(h["bool"]["dtype"] == "BOOL");
  CHECK(h["c64"]["dtype"] == "C64");
  CHECK(h["bf16"]["dtype"] == "BF16");
  CHECK(h["c128"]["dtype"] == "F64");  // complex128 as (re, im) pairs
  CHECK(h["c128"]["shape"] == json::array({3, 1, 2}));
  CHECK(h["scalar"]["shape"] == json::array());
  CHECK(json::parse(h["__metadata__"]["gradsphere.complex128"].get<std::string>()) ==
        json::array({"c128", "empty_c128"}));
  // Every tensor starts at a multiple of its element size, data tiles the rest of the file exactly.
  uint64_t total = 0;
  for (auto& [name, e] : h.items()) {
    if (name == "__metadata__") continue;
    uint64_t begin = e["data_offsets"][0], end = e["data_offsets"][1];
    std::string dt = e["dtype"];
    uint64_t item = dt == "BOOL" ? 1 : dt == "BF16" ? 2 : dt == "F32" ? 4 : 8;
    CAPTURE(name);
    CHECK(begin % item == 0);
    total += end - begin;
  }
  CHECK(8 + n + total == bytes.size());
  // The stored checksum of a tensor is the CRC-32 of its data bytes.
  json sums = json::parse(h["__metadata__"]["gradsphere.checksum"].get<std::string>());
  uint64_t b = h["f64"]["data_offsets"][0], e = h["f64"]["data_offsets"][1];
  CHECK(sums["f64"] == fmt::format("crc32:{:08x}", crc32(bytes.data() + 8 + n + b, e - b)));
}

TEST_CASE("safetensors: a file written by another tool (no checksum, unpadded header) loads") {
  TempDir dir("checkpoint");
  std::string data(8, '\0');
  float v[2] = {1.25f, -2.0f};
  std::memcpy(data.data(), v, 8);
  write_bytes(
      dir / "py.safetensors",
      make_file(R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data));
  auto out = load_safetensors(dir / "py.safetensors");
  CHECK(out.metadata == Metadata{{"format", "pt"}});
  CHECK(out.tensors.at("w").to_vector<float>() == std::vector<float>{1.25f, -2.0f});
}

TEST_CASE("safetensors: overwriting replaces the file; bad input leaves the old one untouched") {
  TempDir dir("checkpoint");
  fs::path path = dir / "model.safetensors";
  save_safetensors(path, {{"a", ones({3}, DType::f32)}});
  save_safetensors(path, {{"b", zeros({2}, DType::f64)}});
  auto out = load_safetensors(path).tensors;
  CHECK(out.count("a") == 0);
  CHECK(out.at("b").sizes() == Shape{2});
  std::string before = read_bytes(path);

  std::string err = error_of([&] { save_safetensors(path, {{"ok", ones({2})}, {"bad", Tensor()}}); });
  CHECK(contains(err, "tensor 'bad' is undefined"));
  err = error_of([&] { save_safetensors(path, {{"ok", ones({2})}}, {{"gradsphere.checksum", "x"}}); });
  CHECK(contains(err, "reserved"));
  err = error_of([&] { save_safetensors(path, {{"__metadata__", ones({2})}}); });
  CHECK(contains(err, "'__metadata__'"));
  err = error_of([&] { save_safetensors(path, {{"bad\xff", ones({2})}}); });
  CHECK(contains(err, "must be valid UTF-8"));
  CHECK_FALSE(contains(err, "non-gs exception"));
  err = error_of([&] { save_safetensors(path, {{"ok", ones({2})}}, {{"note", "bad\xc3"}}); });
  CHECK(contains(err, "must be valid UTF-8"));
  CHECK(read_bytes(path) == before);
  CHECK(dir.entries() == 1);  // no temporary file left behind
}

TEST_CASE("safetensors: a failure after the temporary file exists removes it") {
  TempDir dir("checkpoint");
  // The target is a non-empty directory: the data is written, the final rename fails.
  fs::create_directories(dir / "target.safetensors" / "inside");
  std::string err = error_of([&] { save_safetensors(dir / "target.safetensors", {{"a", ones({4})}}); });
  CHECK(contains(err, "target.safetensors"));
  CHECK(contains(err, "renaming the temporary file"));
  CHECK(dir.entries() == 1);
  CHECK(fs::is_directory(dir / "target.safetensors" / "inside"));
  // A directory that does not exist: no temporary file can be created.
  err = error_of([&] { save_safetensors(dir / "missing" / "x.safetensors", {{"a", ones({4})}}); });
  CHECK(contains(err, "creating a temporary file"));
  CHECK(contains(err, "missing"));
}

TEST_CASE("safetensors: malformed files give errors that say what was expected and found") {
  TempDir dir("checkpoint");
  fs::path p = dir / "bad.safetensors";
  auto load_error = [&](const std::string& bytes) {
    write_bytes(p, bytes);
    return error_of([&] { load_safetensors(p); });
  };
  std::string f32x2(8, '\0');
  auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape, int b, int e) {
    return fmt::format(R"("{}":{{"dtype":"{}","shape":{},"data_offsets":[{},{}]}})", name, dtype, shape, b, e);
  };
  struct Case {
    std::string bytes, expect;
  };
  std::vector<Case> cases = {
      {"abc", "shorter than"},  // placeholder replaced below
      {make_file("{}", "") + "", "(no error)"},
      {std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}", "expected at most 100000000"},
      {make_file("{}", "").replace(0, 1, "\x40"), "but only 2 bytes follow"},
      {make_file("{\"a\":", ""), "not valid JSON"},
      {make_file("[1, 2]", ""), "found a JSON array"},
      {make_file("{" + entry("w", "F16", "[2]", 0, 4) + "}", std::string(4, '\0')), "dtype 'F16' is not supported"},
      {make_file(R"({"w":{"dtype":"F32","shape":[2]}})", f32x2), "missing field 'data_offsets'"},
      {make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", f32x2), "unexpected field 'x'"},
      {make_file(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f32x2), "non-negative integers"},
      {make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", f32x2), "end before they begin"},
      {make_file("{" + entry("w", "F32", "[3]", 0, 8) + "}", f32x2), "needs 12 bytes but data_offsets [0, 8] span 8"},
      {make_file("{" + entry("w", "F32", "[4611686018427387904, 8]", 0, 0) + "}", ""), "too large to address"},
      {make_file("{" + entry("w", "F32", "[0, 4611686018427387904, 4]", 0, 0) + "}", ""), "too large to address"},
      {make_file("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("b", "F32", "[1]", 4, 8) + "}", f32x2),
       "tensor 'b' (data_offsets [4, 8]) overlaps tensor 'a'"},
      {make_file("{" + entry("a", "F32", "[1]", 4, 8) + "}", f32x2), "starts at data offset 4"},
      {make_file("{" + entry("a", "F32", "[4]", 0, 16) + "}", f32x2), "holds only 8 data bytes"},
      {make_file("{" + entry("a", "F32", "[2]", 0, 8) + "}", f32x2 + "junk"), "4 trailing bytes"},
      {make_file("{" + entry("a", "F32", "[1]", 0, 4) + "," + entry("a", "F32", "[1]", 4, 8) + "}", f32x2),
       "the key 'a' more than once"},
      {make_file("{" + entry("a", "BOOL", "[2]", 0, 2) + "}", std::string("\x01\x02", 2)), "has byte 2 at element 1"},
      {make_file(R"({"__metadata__":{"k":3}})", ""), "value 'k' to be a string"},
      {make_file(R"({"__metadata__":{"gradsphere.complex128":"[\"w\"]"},)" + entry("w", "F32", "[2]", 0, 8) + "}",
                 f32x2),
       "listed as complex128"},
      {make_file(R"({"__metadata__":{"gradsphere.checksum":"{}"},)" + entry("w", "F32", "[2]", 0, 8) + "}", f32x2),
       "no checksum for tensor 'w'"},
  };
  cases[0].expect = "the file is 3 bytes long; expected at least the 8-byte header length";
  for (const auto& c : cases) {
    CAPTURE(c.expect);
    std::string err = load_error(c.bytes);
    CHECK(contains(err, c.expect));
    if (c.expect != "(no error)") CHECK(contains(err, p.string()));
  }
  std::string err = error_of([&] { load_safetensors(dir / "nope.safetensors"); });
  CHECK(contains(err, "does not exist"));
}

TEST_CASE("safetensors: every truncation and random header damage give a clean load or a gs::Error") {
  TempDir dir("checkpoint");
  fs::path good = dir / "good.safetensors";
  StateDict small{{"a", from_vector<float>({1, 2, 3})},
                  {"b", from_vector<int64_t>({7, -7})},
                  {"c", from_vector(std::vector<bool>{true, false})},
                  {"z", from_vector<c128>({{1.0, -1.0}})}};
  save_safetensors(good, small, {{"step", "12"}});
  const std::string bytes = read_bytes(good);
  fs::path p = dir / "damaged.safetensors";
  for (size_t len = 0; len < bytes.size(); ++len) {
    CAPTURE(len);
    write_bytes(p, bytes.substr(0, len));
    std::string err = error_of([&] { load_safetensors(p); });
    CHECK(contains(err, p.string()));  // a gs::Error, and the load of a truncated file always fails
  }
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  std::mt19937 gen(11);
  int clean = 0, errors = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string damaged = bytes;
    int flips = 1 + static_cast<int>(gen() % 3);
    for (int f = 0; f < flips; ++f) damaged[gen() % (8 + n)] = static_cast<char>(gen());
    write_bytes(p, damaged);
    std::string err = error_of([&] { load_safetensors(p); });
    CHECK_FALSE(contains(err, "non-gs exception"));
    (err == "(no error)" ? clean : errors)++;
  }
  CHECK(errors > 0);
  // Random bytes of every small length.
  for (size_t len = 0; len < 64; ++len) {
    std::string junk(len, '\0');
    for (auto& c : junk) c = static_cast<char>(gen());
    if (len >= 8) {
      uint64_t hn = gen() % (len - 7);
      std::memcpy(junk.data(), &hn, 8);
    }
    write_bytes(p, junk);
    CHECK_FALSE(contains(error_of([&] { load_safetensors(p); }), "non-gs exception"));
  }
}

TEST_CASE("safetensors: the checksum catches a flipped data bit") {
  TempDir dir("checkpoint");
  fs::path p = dir / "w.safetensors";
  save_safetensors(p, {{"weight", randn({4, 4}, RandomKey{1, 2}, DType::f64)}});
  std::string bytes = read_bytes(p);
  bytes[bytes.size() - 20] ^= 0x10;  // the structure stays valid, one value changes
  write_bytes(p, bytes);
  std::string err = error_of([&] { load_safetensors(p); });
  CHECK(contains(err, "tensor 'weight' fails its checksum"));
  CHECK(contains(err, p.string()));
}

TEST_CASE("checkpoint: round trip of model, optimizer, step, RNG, config, extra state and metadata") {
  TempDir dir("checkpoint");
  Checkpoint ck;
  ck.model = {{"blocks.0.filter.weight", randn({2, 3, 4}, RandomKey{5, 0}, DType::c64)},
              {"encoder.weight", randn({8, 3}, RandomKey{5, 1}, DType::f32)},
              {"decoder.bias", randn({3}, RandomKey{5, 2}, DType::f64)}};
  ck.optimizer = {{"encoder.weight.exp_avg", randn({8, 3}, RandomKey{6, 1}, DType::f32)},
                  {"step_count", from_vector<int64_t>({1234}, {})}};
  ck.extra_state = {{"scheduler", R"({"kind":"cosine","last_epoch":17})"}, {"stepper", "n_steps=2"}};
  ck.step = 9'000'000'000LL;
  ck.rng = RngState{0xFFFFFFFFFFFFFFFFull, {{"noise", 123456789012345ull}, {"dropout", 0}}};
  ck.config = "model:\n  embed_dim: 16\n  grid: legendre-gauss\n";
  ck.metadata = {{"git_commit", "abc123"}, {"host", "node7"}};
  fs::path p = dir / "ckpt.safetensors";
  save_checkpoint(p, ck);

  Checkpoint back = load_checkpoint(p);
  CHECK(back.step == ck.step);
  CHECK(back.rng == ck.rng);
  CHECK(back.config == ck.config);
  CHECK(back.extra_state == ck.extra_state);
  CHECK(back.metadata == ck.metadata);
  REQUIRE(back.model.size() == 3);
  REQUIRE(back.optimizer.size() == 2);
  for (const auto& [name, t] : ck.model) CHECK(same_bits(t, back.model.at(name)));
  for (const auto& [name, t] : ck.optimizer) CHECK(same_bits(t, back.optimizer.at(name)));

  // Python sees plain prefixed names and string metadata.
  json h = header_of(read_bytes(p));
  CHECK(h.contains("model.encoder.weight"));
  CHECK(h.contains("optim.step_count"));
  CHECK(h["__metadata__"]["gradsphere.step"] == "9000000000");
  CHECK(h["__metadata__"]["gradsphere.rng.counter.noise"] == "123456789012345");
  CHECK(h["__metadata__"]["git_commit"] == "abc123");
}

TEST_CASE("checkpoint: reserved keys, foreign files and malformed fields are errors") {
  TempDir dir("checkpoint");
  fs::path p = dir / "c.safetensors";
  Checkpoint ck;
  ck.metadata = {{"gradsphere.step", "5"}};
  CHECK(contains(error_of([&] { save_checkpoint(p, ck); }), "reserved prefix 'gradsphere.'"));
  CHECK_FALSE(fs::exists(p));

  save_safetensors(p, {{"model.w", ones({2})}});
  CHECK(contains(error_of([&] { load_checkpoint(p); }), "missing metadata 'gradsphere.format'"));

  Metadata meta{{"gradsphere.format", "checkpoint-2"},
                {"gradsphere.step", "12x"},
                {"gradsphere.config", ""},
                {"gradsphere.rng.seed", "1"}};
  save_safetensors(p, {{"model.w", ones({2})}}, meta);
  CHECK(contains(error_of([&] { load_checkpoint(p); }), "'gradsphere.step' should be an integer, found '12x'"));

  meta["gradsphere.step"] = "12";
  save_safetensors(p, {{"weights.w", ones({2})}}, meta);
  CHECK(contains(error_of([&] { load_checkpoint(p); }), "tensor 'weights.w' has neither"));

  meta["gradsphere.mystery"] = "1";
  save_safetensors(p, {{"model.w", ones({2})}}, meta);
  CHECK(contains(error_of([&] { load_checkpoint(p); }), "unknown metadata key 'gradsphere.mystery'"));

  meta.erase("gradsphere.mystery");
  meta["gradsphere.format"] = "checkpoint-1";
  save_safetensors(p, {{"model.w", ones({2})}}, meta);
  CHECK(contains(error_of([&] { load_checkpoint(p); }), "checkpoint-1 files, from earlier gradsphere versions"));
}

TEST_CASE("checkpoint: the metadata is under a checksum: one changed digit of the normaliser is an error") {
  TempDir dir("checkpoint");
  const fs::path p = dir / "c.safetensors";
  Checkpoint ck;
  ck.model = {{"w", ones({3})}};
  ck.step = 7;
  ck.config = "seed: 1\n";
  ck.metadata = {{"normalizer", "mean=1.25;std=2.5"}};
  save_checkpoint(p, ck);
  CHECK(load_checkpoint(p).metadata.at("normalizer") == "mean=1.25;std=2.5");
  // Edit one digit in place (same length, so the header stays valid JSON of the same size).
  std::string bytes = read_bytes(p);
  const auto at = bytes.find("mean=1.25");
  REQUIRE(at != std::string::npos);
  bytes[at + 5] = '7';
  write_bytes(p, bytes);
  const std::string e = error_of([&] { load_checkpoint(p); });
  CHECK(contains(e, "the metadata fails its checksum"));
  CHECK(contains(e, p.string()));
  // A checkpoint whose metadata checksum was stripped (rewritten by a tool that keeps the rest).
  SafetensorsContents plain;
  bytes[at + 5] = '1';
  write_bytes(p, bytes);
  plain = load_safetensors(p);
  CHECK(plain.metadata_checked);
  save_safetensors(dir / "copy.safetensors", plain.tensors, {});
  CHECK_FALSE(load_safetensors(dir / "copy.safetensors").metadata.count("gradsphere.metadata_checksum"));
}

TEST_CASE("checkpoint: a non-finite weight or optimizer state is never written and never loaded") {
  TempDir dir("checkpoint");
  const fs::path p = dir / "c.safetensors";
  Checkpoint ck;
  ck.config = "seed: 1\n";
  ck.model = {{"w", from_vector(std::vector<float>{1.0f, std::numeric_limits<float>::infinity()})}};
  CHECK(contains(error_of([&] { save_checkpoint(p, ck); }), "model.w[1] is inf; a checkpoint with a non-finite"));
  CHECK_FALSE(fs::exists(p));
  ck.model = {{"w", ones({2})}};
  ck.optimizer = {{"exp_avg_sq.w", from_vector(std::vector<double>{0.5, std::nan("")})}};
  CHECK(first_non_finite(ck) == "optim.exp_avg_sq.w[1] is nan");
  // A crafted file with a NaN weight (valid checksums) is refused on load.
  Metadata meta{{"gradsphere.format", "checkpoint-2"}, {"gradsphere.step", "1"}, {"gradsphere.config", ""},
                {"gradsphere.rng.seed", "1"}};
  save_safetensors(p, {{"model.w", from_vector(std::vector<float>{std::nanf(""), 1.0f})}}, meta);
  CHECK(contains(error_of([&] { load_checkpoint(p); }), "model.w[0] is nan; a checkpoint with a non-finite"));
}

TEST_CASE("safetensors: a header of 100k tensors loads (name lookups are hashed, so the load is linear)") {
  TempDir dir("checkpoint");
  const fs::path p = dir / "many.safetensors";
  StateDict many;
  for (int i = 0; i < 100'000; ++i) many[fmt::format("t{}", i)] = full({1}, static_cast<double>(i), DType::f32);
  save_safetensors(p, many);
  const auto back = load_safetensors(p);
  REQUIRE(back.tensors.size() == 100'000);
  CHECK(back.tensors.at("t99999").item<float>() == 99999.0f);
}
