// safetensors reading and writing (models/safetensors.h).
#include "models/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "models/atomic_file.h"

namespace gs::models {

// safetensors is little-endian and we copy tensor bytes verbatim.
static_assert(std::endian::native == std::endian::little, "checkpoint I/O assumes a little-endian host");

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Matches the safetensors reference reader: a larger header is taken as corruption, not data.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kChecksumKey = "gradsphere.checksum";
constexpr const char* kComplex128Key = "gradsphere.complex128";
constexpr const char* kMetadataChecksumKey = "gradsphere.metadata_checksum";
// A header of more tensors than this is taken as corruption too (each costs a few hundred bytes of
// bookkeeping; a 100 MB header of tiny entries would otherwise cost minutes and gigabytes).
constexpr size_t kMaxTensors = 1'000'000;

// ---- CRC-32, slicing by 8: table k advances a byte that sits k positions ahead in the word.
struct Crc32Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  Crc32Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (int k = 1; k < 8; ++k)
      for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
  }
};

}  // namespace

uint32_t crc32(const void* data, size_t n, uint32_t crc) {
  static const Crc32Tables tables;
  const auto& t = tables.t;
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][hi & 0xFF] ^
          t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) crc = (crc >> 8) ^ t[0][(crc ^ *p) & 0xFF];
  return ~crc;
}

// ---- safetensors

namespace {

struct StoredType {
  const char* name;
  DType dtype;
};
// What we read and write; c128 is written as F64 pairs (see checkpoint.h).
constexpr std::array<StoredType, 6> kStoredTypes{{{"F32", DType::f32},
                                                   {"F64", DType::f64},
                                                   {"I64", DType::i64},
                                                   {"BOOL", DType::b8},
                                                   {"C64", DType::c64},
                                                   {"BF16", DType::bf16}}};

std::optional<DType> parse_stored_type(const std::string& s) {
  for (const auto& st : kStoredTypes)
    if (s == st.name) return st.dtype;
  return std::nullopt;
}

const char* stored_type_name(DType d) {
  for (const auto& st : kStoredTypes)
    if (st.dtype == d) return st.name;
  return "F64";  // c128: pairs of F64
}

std::string stored_type_list() {
  std::string s;
  for (const auto& st : kStoredTypes) s += (s.empty() ? "" : ", ") + std::string(st.name);
  return s;
}

std::string crc_text(uint32_t crc) { return fmt::format("crc32:{:08x}", crc); }

// The CRC-32 of the caller's metadata: every key and value in key order, each ended by a NUL byte
// (NUL cannot occur inside JSON-decoded UTF-8 text without escaping, so the framing is unambiguous).
std::string metadata_crc(const Metadata& metadata) {
  uint32_t crc = 0;
  for (const auto& [key, value] : metadata) {
    crc = crc32(key.data(), key.size(), crc);
    crc = crc32("", 1, crc);
    crc = crc32(value.data(), value.size(), crc);
    crc = crc32("", 1, crc);
  }
  return crc_text(crc);
}

// One tensor as written: its contiguous CPU values and where they go.
struct OutEntry {
  std::string name;
  Tensor values;
  Shape stored_shape;
  const char* stored_type;
  uint64_t nbytes = 0;
  uint64_t begin = 0;
};

const unsigned char* bytes_of(const Tensor& t) { return static_cast<const unsigned char*>(t.raw_data()); }

}  // namespace

void save_safetensors(const fs::path& path, const StateDict& tensors, const Metadata& metadata) {
  // Everything is checked and prepared before the temporary file exists: bad input never touches disk.
  for (const auto& [key, value] : metadata)
    GS_CHECK(key != kChecksumKey && key != kComplex128Key && key != kMetadataChecksumKey,
             "save_safetensors('{}'): metadata key '{}' is reserved for the file format (it is written "
             "automatically); choose another key",
             path.string(), key);
  std::vector<OutEntry> entries;
  std::vector<std::string> complex128_names;
  for (const auto& [name, t] : tensors) {
    GS_CHECK(!name.empty() && name != "__metadata__",
             "save_safetensors('{}'): expected a non-empty tensor name other than '__metadata__', got '{}'",
             path.string(), name);
    GS_CHECK(t.defined(), "save_safetensors('{}'): tensor '{}' is undefined", path.string(), name);
    OutEntry e;
    e.name = name;
    Tensor cpu = t.device().is_cpu() ? t : to_device_copy(t, Device::cpu());
    e.values = contiguous_copy(cpu);
    e.stored_shape = t.sizes();
    e.stored_type = stored_type_name(t.dtype());
    if (t.dtype() == DType::c128) {
      e.stored_shape.push_back(2);
      complex128_names.push_back(name);
    }
    e.nbytes = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    entries.push_back(std::move(e));
  }
  // safetensors orders data by decreasing alignment, then by name, so that every tensor starts at
  // a multiple of its element size once the header is padded to 8 bytes.
  auto align_of = [](const OutEntry& e) { return std::min<size_t>(dtype_size(e.values.dtype()), 8); };
  std::stable_sort(entries.begin(), entries.end(), [&](const OutEntry& a, const OutEntry& b) {
    if (align_of(a) != align_of(b)) return align_of(a) > align_of(b);
    return a.name < b.name;
  });

  json header = json::object();
  json checksums = json::object();
  uint64_t offset = 0;
  for (auto& e : entries) {
    e.begin = offset;
    offset += e.nbytes;
    header[e.name] = {{"dtype", e.stored_type}, {"shape", e.stored_shape}, {"data_offsets", {e.begin, offset}}};
    checksums[e.name] = crc_text(crc32(bytes_of(e.values), e.nbytes));
  }
  std::string text;
  try {  // dump() is where nlohmann rejects invalid UTF-8
    json meta = json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    meta[kChecksumKey] = checksums.dump();
    meta[kMetadataChecksumKey] = metadata_crc(metadata);
    if (!complex128_names.empty()) meta[kComplex128Key] = json(complex128_names).dump();
    header["__metadata__"] = meta;
    text = header.dump();
  } catch (const json::exception& ex) {
    fail("save_safetensors('{}'): tensor names and metadata must be valid UTF-8: {}", path.string(), ex.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  AtomicFile file(path);
  uint64_t n = text.size();
  file.write(&n, sizeof n);
  file.write(text.data(), text.size());
  for (const auto& e : entries)
    if (e.nbytes > 0) file.write(bytes_of(e.values), e.nbytes);
  file.commit();
}

namespace {

// A tensor entry of the header, validated field by field.
struct InEntry {
  std::string name;
  std::string type_name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

// A SAX handler that records the first key repeated within one object and the number of entries
// of the top-level object; it builds nothing.
struct KeyScanner {
  std::vector<std::unordered_set<std::string>> keys;  // one set per open object
  std::string duplicate;
  size_t top_level_entries = 0;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const std::string&) { return true; }
  bool string(std::string&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(size_t) {
    keys.emplace_back();
    return true;
  }
  bool key(std::string& k) {
    if (keys.size() == 1) ++top_level_entries;
    if (!keys.back().insert(k).second && duplicate.empty()) duplicate = k;
    return true;
  }
  bool end_object() {
    keys.pop_back();
    return true;
  }
  bool start_array(size_t) { return true; }
  bool end_array() { return true; }
  std::string error;  // the parser's message when the text is not JSON
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& ex) {
    error = ex.what();
    return false;
  }
};

class SafetensorsReader {
 public:
  explicit SafetensorsReader(const fs::path& path) : path_(path) {}

  SafetensorsContents read() {
    open();
    read_header();
    check_layout();
    SafetensorsContents out;
    apply_format_metadata();
    read_data(out.tensors);
    out.metadata = std::move(metadata_);
    out.metadata_checked = metadata_checked_;
    out.tensors_checked = !checksums_.empty() || entries_.empty();
    return out;
  }

 private:
  template <typename... Args>
  [[noreturn]] void bad(fmt::format_string<Args...> f, Args&&... args) const {
    fail("safetensors file '{}': {}", path_.string(), fmt::format(f, std::forward<Args>(args)...));
  }

  void open() {
    std::error_code ec;
    GS_CHECK(fs::is_regular_file(path_, ec), "safetensors file '{}': expected a regular file, {}", path_.string(),
             fs::exists(path_, ec) ? "found something else (a directory?)" : "but it does not exist");
    file_.reset(std::fopen(path_.c_str(), "rb"));
    GS_CHECK(file_ != nullptr, "safetensors file '{}': cannot open it: {}", path_.string(), errno_text(errno));
    size_ = fs::file_size(path_, ec);
    if (ec) bad("cannot read its size: {}", ec.message());
  }

  void read_exact(void* dst, uint64_t nbytes, const char* what) {
    if (nbytes == 0) return;
    size_t got = std::fread(dst, 1, nbytes, file_.get());
    if (got != nbytes)
      bad("expected {} bytes of {}, the file ended after {} (was it truncated while reading?)", nbytes, what, got);
  }

  void read_header() {
    if (size_ < 8) bad("the file is {} bytes long; expected at least the 8-byte header length", size_);
    uint64_t n = 0;
    read_exact(&n, 8, "header length");
    if (n > kMaxHeaderBytes)
      bad("the header length field says {} bytes; expected at most {} (corrupt file?)", n, kMaxHeaderBytes);
    if (n > size_ - 8) bad("the header length field says {} bytes but only {} bytes follow it", n, size_ - 8);
    header_bytes_ = n;
    std::string text(n, '\0');
    read_exact(text.data(), n, "header");
    parse_json(text);
  }

  void parse_json(const std::string& text) {
    // nlohmann keeps the last of duplicate keys silently, and its callback parser rescans a parent
    // object at the end of every child (quadratic in the tensor count), so a first SAX pass only
    // finds duplicate keys and counts entries, and a plain parse builds the tree. Both are linear.
    KeyScanner scan;
    json header;
    try {
      if (!json::sax_parse(text, &scan)) bad("the {}-byte header is not valid JSON: {}", text.size(), scan.error);
      if (scan.top_level_entries > kMaxTensors + 1)
        bad("the header lists {} entries; expected at most {} tensors (corrupt file?)", scan.top_level_entries,
            kMaxTensors);
      header = json::parse(text);
    } catch (const json::exception& ex) {
      bad("the {}-byte header is not valid JSON: {}", text.size(), ex.what());
    }
    const std::string& duplicate = scan.duplicate;
    if (!duplicate.empty()) bad("the header has the key '{}' more than once; expected unique names", duplicate);
    if (!header.is_object()) bad("expected the header to be a JSON object, found a JSON {}", header.type_name());
    entries_.reserve(header.size());
    for (auto& [key, value] : header.items()) {
      if (key == "__metadata__")
        parse_metadata(value);
      else
        entries_.push_back(parse_entry(key, value));
    }
  }

  void parse_metadata(const json& m) {
    if (!m.is_object()) bad("expected '__metadata__' to be an object of strings, found a JSON {}", m.type_name());
    for (auto& [key, value] : m.items()) {
      if (!value.is_string())
        bad("expected '__metadata__' value '{}' to be a string, found a JSON {}", key, value.type_name());
      metadata_[key] = value.get<std::string>();
    }
  }

  uint64_t as_count(const json& v, const std::string& name, const char* field) const {
    if (!v.is_number_unsigned())
      bad("tensor '{}': expected the entries of '{}' to be non-negative integers, found {}", name, field, v.dump());
    return v.get<uint64_t>();
  }

  InEntry parse_entry(const std::string& name, const json& v) const {
    if (!v.is_object())
      bad("tensor '{}': expected an object with dtype, shape and data_offsets, found a JSON {}", name, v.type_name());
    for (const auto& item : v.items())
      if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets")
        bad("tensor '{}': unexpected field '{}' (expected dtype, shape and data_offsets)", name, item.key());
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!v.contains(field)) bad("tensor '{}': missing field '{}'", name, field);
    InEntry e;
    e.name = name;
    const json& dt = v["dtype"];
    if (!dt.is_string()) bad("tensor '{}': expected dtype to be a string, found {}", name, dt.dump());
    e.type_name = dt.get<std::string>();
    auto parsed = parse_stored_type(e.type_name);
    if (!parsed)
      bad("tensor '{}': dtype '{}' is not supported (expected one of {})", name, e.type_name, stored_type_list());
    e.dtype = *parsed;
    const json& shape = v["shape"];
    if (!shape.is_array()) bad("tensor '{}': expected shape to be an array, found {}", name, shape.dump());
    for (const auto& s : shape) {
      uint64_t d = as_count(s, name, "shape");
      if (d > static_cast<uint64_t>(INT64_MAX)) bad("tensor '{}': shape entry {} is too large", name, d);
      e.shape.push_back(static_cast<int64_t>(d));
    }
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2)
      bad("tensor '{}': expected data_offsets to be [begin, end], found {}", name, off.dump());
    e.begin = as_count(off[0], name, "data_offsets");
    e.end = as_count(off[1], name, "data_offsets");
    if (e.end < e.begin) bad("tensor '{}': data_offsets [{}, {}] end before they begin", name, e.begin, e.end);
    // Strides multiply the non-zero dims even of an empty tensor, so they must fit in int64 too.
    uint64_t expected = dtype_size(e.dtype), extent = 1;
    for (int64_t d : e.shape)
      if (__builtin_mul_overflow(expected, static_cast<uint64_t>(d), &expected) ||
          __builtin_mul_overflow(extent, static_cast<uint64_t>(std::max<int64_t>(d, 1)), &extent) ||
          extent > static_cast<uint64_t>(INT64_MAX))
        bad("tensor '{}': shape {} is too large to address", name, shape_str(e.shape));
    if (e.end - e.begin != expected)
      bad("tensor '{}': {} of shape {} needs {} bytes but data_offsets [{}, {}] span {}", name, e.type_name,
          shape_str(e.shape), expected, e.begin, e.end, e.end - e.begin);
    return e;
  }

  // The data must be tiled exactly: no overlaps, no gaps, nothing past the last tensor.
  void check_layout() {
    std::sort(entries_.begin(), entries_.end(), [](const InEntry& a, const InEntry& b) {
      return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
    });
    index_.reserve(entries_.size());
    for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].name, i);
    uint64_t data_size = size_ - 8 - header_bytes_;
    uint64_t pos = 0;
    const InEntry* prev = nullptr;
    for (const auto& e : entries_) {
      if (e.begin < pos)
        bad("tensor '{}' (data_offsets [{}, {}]) overlaps tensor '{}' (which ends at {})", e.name, e.begin, e.end,
            prev->name, pos);
      if (e.begin > pos)
        bad("tensor '{}' starts at data offset {} but the previous data ends at {}: expected contiguous data", e.name,
            e.begin, pos);
      if (e.end > data_size)
        bad("tensor '{}' has data_offsets [{}, {}] but the file holds only {} data bytes (truncated?)", e.name, e.begin,
            e.end, data_size);
      pos = e.end;
      prev = &e;
    }
    if (pos != data_size)
      bad("the tensors' data ends at offset {} but {} data bytes follow the header: {} trailing bytes", pos, data_size,
          data_size - pos);
  }

  const InEntry* find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &entries_[it->second];
  }

  // Takes our own keys out of the metadata and checks them against the tensors.
  void apply_format_metadata() {
    if (auto it = metadata_.find(kComplex128Key); it != metadata_.end()) {
      json names = json::parse(it->second, nullptr, false);
      if (!names.is_array())
        bad("metadata '{}' should be a JSON array of tensor names, found '{}'", kComplex128Key, it->second);
      for (const auto& n : names) {
        if (!n.is_string()) bad("metadata '{}' should list tensor names, found {}", kComplex128Key, n.dump());
        const InEntry* e = find(n.get<std::string>());
        if (!e)
          bad("metadata '{}' lists '{}', which is not a tensor of the file", kComplex128Key, n.get<std::string>());
        if (e->dtype != DType::f64 || e->shape.empty() || e->shape.back() != 2)
          bad("tensor '{}' is listed as complex128 and so should be F64 with a last dim of 2, found {} of shape {}",
              e->name, e->type_name, shape_str(e->shape));
        complex128_.insert(e->name);
      }
      metadata_.erase(it);
    }
    if (auto it = metadata_.find(kChecksumKey); it != metadata_.end()) {
      json sums = json::parse(it->second, nullptr, false);
      if (!sums.is_object())
        bad("metadata '{}' should be a JSON object of checksums, found '{}'", kChecksumKey, it->second);
      for (auto& [name, value] : sums.items()) {
        if (!find(name))
          bad("metadata '{}' has a checksum for '{}', which is not a tensor of the file", kChecksumKey, name);
        if (!value.is_string())
          bad("metadata '{}': expected a string for '{}', found {}", kChecksumKey, name, value.dump());
        checksums_[name] = value.get<std::string>();
      }
      for (const auto& e : entries_)
        if (!checksums_.count(e.name)) bad("metadata '{}' has no checksum for tensor '{}'", kChecksumKey, e.name);
      metadata_.erase(it);
    }
    if (auto it = metadata_.find(kMetadataChecksumKey); it != metadata_.end()) {
      const std::string stored = it->second;
      metadata_.erase(it);
      const std::string actual = metadata_crc(metadata_);
      if (actual != stored)
        bad("the metadata fails its checksum: stored {}, computed {} (it was edited or is corrupt; the metadata "
            "holds values that change results, such as a checkpoint's configuration and normaliser)",
            stored, actual);
      metadata_checked_ = true;
    }
  }

  void read_data(StateDict& out) {
    // Entries are sorted by offset and tile the data, so one sequential pass reads them all.
    for (const auto& e : entries_) {
      bool as_c128 = complex128_.count(e.name) > 0;
      Shape shape = e.shape;
      if (as_c128) shape.pop_back();
      Tensor t = empty(shape, as_c128 ? DType::c128 : e.dtype);
      uint64_t nbytes = e.end - e.begin;
      read_exact(nbytes ? t.raw_data() : nullptr, nbytes, fmt::format("tensor '{}'", e.name).c_str());
      const auto* p = static_cast<const unsigned char*>(t.raw_data());
      if (auto it = checksums_.find(e.name); it != checksums_.end()) {
        std::string actual = crc_text(crc32(p, nbytes));
        if (actual != it->second)
          bad("tensor '{}' fails its checksum: stored {}, computed {} (the data is corrupt)", e.name, it->second,
              actual);
      }
      if (e.dtype == DType::b8)
        for (uint64_t i = 0; i < nbytes; ++i)
          if (p[i] > 1) bad("tensor '{}' (BOOL) has byte {} at element {}; expected 0 or 1", e.name, p[i], i);
      out.emplace(e.name, std::move(t));
    }
  }

  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  fs::path path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  uint64_t size_ = 0;
  uint64_t header_bytes_ = 0;
  std::vector<InEntry> entries_;
  std::unordered_map<std::string, size_t> index_;  // name -> entries_ position, after check_layout's sort
  Metadata metadata_;
  std::set<std::string> complex128_;
  std::map<std::string, std::string> checksums_;
  bool metadata_checked_ = false;
};

}  // namespace

SafetensorsContents load_safetensors(const fs::path& path) { return SafetensorsReader(path).read(); }

}  // namespace gs::models
