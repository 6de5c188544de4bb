#include "seqlab/nn/safetensors.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "seqlab/core/file_io.hpp"

namespace seqlab {
namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100000000;  // the format's limit (safetensors docs)
constexpr const char* kMetadataKey = "__metadata__";
constexpr int kMaxDepth = 8;  // the format nests 3 deep; deeper input is rejected, not recursed

// ---- little-endian bytes --------------------------------------------------------------------

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

std::uint64_t get_le(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// ---- JSON: the subset a safetensors header uses ---------------------------------------------
// Values: objects (members kept in file order), arrays, strings, non-negative integers.

struct Json {
  enum class Kind { object, array, string, integer };
  Kind kind = Kind::object;
  std::string text;                                   // string
  std::uint64_t number = 0;                           // integer
  std::vector<std::pair<std::string, Json>> members;  // object
  std::vector<Json> items;                            // array
};

const char* kind_name(Json::Kind k) {
  switch (k) {
    case Json::Kind::object:
      return "an object";
    case Json::Kind::array:
      return "an array";
    case Json::Kind::string:
      return "a string";
    case Json::Kind::integer:
      return "an integer";
  }
  return "?";
}

void put_json_string(std::string& out, const std::string& s) {
  out.push_back('"');
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xF]);
    } else {
      out.push_back(ch);  // UTF-8 bytes as they are
    }
  }
  out.push_back('"');
}

class JsonReader {
 public:
  JsonReader(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  // The whole header: one object, then only whitespace.
  Json document() {
    if (s_.empty() || s_[0] != '{') fail("must start with '{'");
    Json v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected " + shown() + " after the header's object");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw SafetensorsError("'" + what_ + "': header: " + why + " (at byte " + std::to_string(pos_) +
                           " of the header)");
  }
  std::string shown() const {
    if (pos_ >= s_.size()) return "end of header";
    const auto c = static_cast<unsigned char>(s_[pos_]);
    if (c >= 0x20 && c < 0x7F) return std::string("'") + s_[pos_] + "'";
    return "byte " + std::to_string(c);
  }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    skip_ws();
    if (pos_ >= s_.size() || s_[pos_] != c)
      fail(std::string("expected '") + c + "', found " + shown());
    ++pos_;
  }

  Json value(int depth) {
    if (depth > kMaxDepth) fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end of header");
    const char c = s_[pos_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') {
      Json v;
      v.kind = Json::Kind::string;
      v.text = string();
      return v;
    }
    if (c >= '0' && c <= '9') return integer();
    fail("unexpected " + shown() +
         " (a safetensors header holds objects, arrays, strings and non-negative integers only)");
  }

  Json object(int depth) {
    Json v;
    v.kind = Json::Kind::object;
    std::set<std::string> keys;
    ++pos_;  // '{'
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return v;
    }
    while (true) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key, found " + shown());
      std::string key = string();
      if (!keys.insert(key).second) fail("duplicate key \"" + key + "\"");
      expect(':');
      Json member = value(depth + 1);
      v.members.emplace_back(std::move(key), std::move(member));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return v;
    }
  }

  Json array(int depth) {
    Json v;
    v.kind = Json::Kind::array;
    ++pos_;  // '['
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return v;
    }
    while (true) {
      v.items.push_back(value(depth + 1));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      expect(']');
      return v;
    }
  }

  Json integer() {
    Json v;
    v.kind = Json::Kind::integer;
    const std::size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const std::uint64_t d = static_cast<std::uint64_t>(s_[pos_] - '0');
      if (v.number > (std::numeric_limits<std::uint64_t>::max() - d) / 10)
        fail("integer does not fit in 64 bits");
      v.number = v.number * 10 + d;
      ++pos_;
    }
    if (pos_ - start > 1 && s_[start] == '0') {
      pos_ = start;
      fail("integer with a leading zero");
    }
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))
      fail("only non-negative integers are allowed, found a fraction or exponent");
    return v;
  }

  unsigned hex4() {
    if (s_.size() - pos_ < 4) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<unsigned>(c - 'A' + 10);
      else {
        --pos_;
        fail("bad hex digit in a \\u escape");
      }
    }
    return v;
  }

  static void put_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // A string starting at '"'; escapes decoded, other bytes (UTF-8) kept as they are.
  std::string string() {
    std::string out;
    ++pos_;  // '"'
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) {
        --pos_;
        fail("control character in a string (must be escaped)");
      }
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string");
      const char e = s_[pos_++];
      // The one-character escapes \" \\ \/ \b \f \n \r \t, then \uXXXX.
      static const char kEscaped[] = "\"\\/bfnrt";
      static const char kMeaning[] = "\"\\/\b\f\n\r\t";
      if (const char* at = std::strchr(kEscaped, e); at != nullptr && e != '\0') {
        out.push_back(kMeaning[at - kEscaped]);
        continue;
      }
      if (e != 'u') {
        --pos_;
        fail(std::string("unknown escape '\\") + e + "'");
      }
      unsigned cp = hex4();
      if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate in a \\u escape");
      if (cp >= 0xD800 && cp <= 0xDBFF) {  // a surrogate pair: \uD8xx\uDCxx
        if (s_.compare(pos_, 2, "\\u") != 0) fail("high surrogate without its low surrogate");
        pos_ += 2;
        const unsigned lo = hex4();
        if (lo < 0xDC00 || lo > 0xDFFF) fail("high surrogate without its low surrogate");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      }
      put_utf8(out, cp);
    }
  }

  const std::string& s_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

// ---- the format -----------------------------------------------------------------------------

static_assert(sizeof(std::size_t) == sizeof(std::uint64_t), "shape entries are u64 in the format");

std::size_t item_size(const std::string& dtype) { return dtype == "I64" ? 8 : 4; }

struct Entry {
  std::string key;
  std::string dtype;
  std::vector<std::size_t> shape;
  std::uint64_t begin = 0, end = 0;
};

[[noreturn]] void bad_file(const std::string& what, const std::string& why) {
  throw SafetensorsError("'" + what + "': " + why);
}

[[noreturn]] void bad_entry(const std::string& what, const std::string& key,
                            const std::string& why) {
  throw SafetensorsError("'" + what + "': tensor \"" + key + "\": " + why);
}

Entry parse_entry(const std::string& what, const std::string& key, const Json& v) {
  if (v.kind != Json::Kind::object)
    bad_entry(what, key, std::string("is ") + kind_name(v.kind) + ", must be an object");
  Entry e;
  e.key = key;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  for (const auto& [field, x] : v.members) {
    if (field == "dtype") {
      if (x.kind != Json::Kind::string) bad_entry(what, key, "dtype must be a string");
      if (x.text != "F32" && x.text != "I64")
        bad_entry(what, key, "dtype '" + x.text + "' is not supported (allowed: F32, I64)");
      e.dtype = x.text;
      has_dtype = true;
    } else if (field == "shape") {
      if (x.kind != Json::Kind::array) bad_entry(what, key, "shape must be an array of integers");
      for (const Json& d : x.items) {
        if (d.kind != Json::Kind::integer)
          bad_entry(what, key, "shape must be an array of integers");
        e.shape.push_back(static_cast<std::size_t>(d.number));
      }
      has_shape = true;
    } else if (field == "data_offsets") {
      if (x.kind != Json::Kind::array || x.items.size() != 2 ||
          x.items[0].kind != Json::Kind::integer || x.items[1].kind != Json::Kind::integer)
        bad_entry(what, key, "data_offsets must be [begin, end], two integers");
      e.begin = x.items[0].number;
      e.end = x.items[1].number;
      has_offsets = true;
    } else {
      bad_entry(what, key, "unknown field \"" + field + "\" (allowed: dtype, shape, data_offsets)");
    }
  }
  if (!has_dtype) bad_entry(what, key, "dtype is missing");
  if (!has_shape) bad_entry(what, key, "shape is missing");
  if (!has_offsets) bad_entry(what, key, "data_offsets is missing");
  if (e.begin > e.end)
    bad_entry(what, key,
              "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                  "] end before they begin");
  // Bytes the shape needs, with overflow detection (a huge shape cannot match real offsets).
  std::uint64_t need = item_size(e.dtype);
  bool overflow = false;
  for (std::size_t d : e.shape) {
    if (d != 0 && need > std::numeric_limits<std::uint64_t>::max() / d) overflow = true;
    need *= d;
  }
  if (overflow || need != e.end - e.begin)
    bad_entry(what, key,
              "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                  "] hold " + std::to_string(e.end - e.begin) + " bytes, its dtype " + e.dtype +
                  " and shape " + shape_string(e.shape) + " need " +
                  (overflow ? std::string("more than 2^64") : std::to_string(need)));
  return e;
}

}  // namespace

std::string encode_safetensors(const StateDict& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    put_json_string(header, kMetadataKey);
    header += ":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) header.push_back(',');
      first = false;
      put_json_string(header, k);
      header.push_back(':');
      put_json_string(header, v);
    }
    header.push_back('}');
  }
  std::uint64_t offset = 0;
  for (const auto& [key, t] : tensors) {
    if (key.empty()) throw std::invalid_argument("encode_safetensors: a tensor key is empty");
    if (key == kMetadataKey)
      throw std::invalid_argument(
          "encode_safetensors: tensor key \"__metadata__\" is reserved by the format");
    const std::vector<std::size_t> shape = state_shape(t);
    const std::uint64_t bytes = std::visit(
        [](const auto& a) { return static_cast<std::uint64_t>(a.size() * sizeof(a.data()[0])); },
        t);
    if (header.size() > 1) header.push_back(',');
    put_json_string(header, key);
    header += ":{\"dtype\":\"" + std::string(state_dtype(t)) + "\",\"shape\":[";
    for (std::size_t i = 0; i < shape.size(); ++i)
      header += (i ? "," : "") + std::to_string(shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header.push_back('}');
  // Pad with spaces so that the data starts at a multiple of 8 bytes (as the reference implementation does).
  while ((8 + header.size()) % 8 != 0) header.push_back(' ');

  std::string out;
  out.reserve(8 + header.size() + offset);
  put_le(out, header.size(), 8);
  out += header;
  for (const auto& kv : tensors) {
    if (const auto* f = std::get_if<Array>(&kv.second)) {
      for (const float v : *f) {
        std::uint32_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        put_le(out, bits, 4);
      }
    } else {
      for (const std::int64_t v : std::get<ArrayOf<std::int64_t>>(kv.second))
        put_le(out, static_cast<std::uint64_t>(v), 8);
    }
  }
  return out;
}

SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& what) {
  auto fail = [&what](const std::string& why) { bad_file(what, why); };
  if (bytes.size() < 8)
    fail("not a safetensors file: " + std::to_string(bytes.size()) +
         " bytes, shorter than the 8-byte header size");
  const std::uint64_t n = get_le(bytes.data(), 8);
  if (n > kMaxHeaderBytes)
    fail("header size " + std::to_string(n) + " exceeds the format's limit of " +
         std::to_string(kMaxHeaderBytes) + " bytes");
  if (n > bytes.size() - 8)
    fail("header size " + std::to_string(n) + " exceeds the " + std::to_string(bytes.size() - 8) +
         " bytes after the size field (truncated file?)");
  const std::string header = bytes.substr(8, static_cast<std::size_t>(n));
  const Json root = JsonReader(header, what).document();

  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [key, v] : root.members) {
    if (key == kMetadataKey) {
      if (v.kind != Json::Kind::object) fail("header: __metadata__ must be an object of strings");
      for (const auto& [mk, mv] : v.members) {
        if (mv.kind != Json::Kind::string)
          fail("header: __metadata__ \"" + mk + "\" is " + kind_name(mv.kind) +
               ", must be a string");
        file.metadata[mk] = mv.text;
      }
      continue;
    }
    if (key.empty()) fail("header: a tensor key is empty");
    entries.push_back(parse_entry(what, key, v));
  }

  // The tensors must tile the data buffer: sorted by offsets, each starts where the last ended.
  const std::uint64_t data_size = bytes.size() - 8 - n;
  std::vector<const Entry*> order;
  for (const Entry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t covered = 0;
  for (const Entry* e : order) {
    if (e->begin != covered)
      bad_entry(what, e->key,
                "data_offsets [" + std::to_string(e->begin) + ", " + std::to_string(e->end) + "] " +
                    (e->begin > covered ? "leave a gap" : "overlap another tensor") +
                    " (the previous tensors end at " + std::to_string(covered) + ")");
    covered = e->end;
  }
  if (covered != data_size)
    fail("the data buffer has " + std::to_string(data_size) + " bytes, the tensors cover " +
         std::to_string(covered));

  const char* data = bytes.data() + 8 + n;
  for (const Entry& e : entries) {
    const char* p = data + e.begin;
    if (e.dtype == "F32") {
      Array a = Array::from_shape(e.shape);
      float* out = a.data();
      for (std::size_t i = 0; i < a.size(); ++i) {
        const auto bits = static_cast<std::uint32_t>(get_le(p + 4 * i, 4));
        std::memcpy(out + i, &bits, sizeof bits);
      }
      file.tensors.emplace(e.key, std::move(a));
    } else {
      ArrayOf<std::int64_t> a = ArrayOf<std::int64_t>::from_shape(e.shape);
      std::int64_t* out = a.data();
      for (std::size_t i = 0; i < a.size(); ++i)
        out[i] = static_cast<std::int64_t>(get_le(p + 8 * i, 8));
      file.tensors.emplace(e.key, std::move(a));
    }
  }
  return file;
}

void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, encode_safetensors(tensors, metadata));
}

SafetensorsFile load_safetensors(const std::string& path) {
  return decode_safetensors(read_file(path), path);
}

}  // namespace seqlab
