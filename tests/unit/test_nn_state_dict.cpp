// Module::state_dict / load_state_dict (nn/parameter.hpp) and the safetensors weights file
// (nn/safetensors.hpp): keys and shapes as PyTorch's, buffers, all-or-nothing loads with messages
// naming the key, exact round trips through bytes and files, the byte layout itself, and the
// reader's validation of damaged or foreign files. tests/integration/safetensors_torch.py reads
// the files from Python (numpy, and torch.nn when installed).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "seqlab/core/file_io.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/nn/linear.hpp"
#include "seqlab/nn/norm.hpp"
#include "seqlab/nn/safetensors.hpp"
#include "temp_dir.hpp"

using namespace seqlab;
using Catch::Matchers::Contains;

namespace {

ModelConfig bn_transformer() {
  ModelConfig c;
  c.model = "transformer_encoder";
  c.vocab_size = 7;
  c.embedding_dim = 8;
  c.hidden_size = 8;
  c.num_layers = 1;
  c.n_heads = 2;
  c.d_ff = 12;
  c.output_size = 5;
  c.norm = "batch_norm";
  c.dropout = 0.1f;
  return c;
}

// Fills every parameter and float buffer with distinct values, counters with distinct integers.
void scramble(Module& m, std::uint64_t seed) {
  Rng rng(seed);
  for (auto& np : m.named_parameters()) rng.fill_uniform(np.param->value, -1.0f, 1.0f);
  std::int64_t k = 3;
  for (auto& nb : m.named_buffers()) {
    if (auto* const* t = std::get_if<Tensor1*>(&nb.ref)) rng.fill_uniform(**t, 0.5f, 2.0f);
    if (auto* const* c = std::get_if<std::int64_t*>(&nb.ref)) **c = k++;
  }
}

bool same(const StateTensor& a, const StateTensor& b) {
  if (a.index() != b.index() || state_shape(a) != state_shape(b)) return false;
  if (const auto* fa = std::get_if<Array>(&a)) {
    const Array& fb = std::get<Array>(b);
    return std::memcmp(fa->data(), fb.data(), fa->size() * sizeof(float)) == 0;
  }
  return std::get<ArrayOf<std::int64_t>>(a) == std::get<ArrayOf<std::int64_t>>(b);
}

bool same(const StateDict& a, const StateDict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : a) {
    const auto it = b.find(k);
    if (it == b.end() || !same(v, it->second)) return false;
  }
  return true;
}

std::string le64(std::uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}

// A file from a header string and a data buffer.
std::string file_of(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

std::string decode_error(const std::string& bytes) {
  try {
    decode_safetensors(bytes, "f.safetensors");
  } catch (const SafetensorsError& e) {
    return e.what();
  }
  return "no exception";
}

}  // namespace

TEST_CASE("state_dict lists parameters and BatchNorm buffers by PyTorch key", "[nn][state_dict]") {
  BatchNorm bn(3, false);
  const StateDict sd = bn.state_dict();
  REQUIRE(sd.size() == 5);
  CHECK(state_shape(sd.at("weight")) == std::vector<std::size_t>{3});
  CHECK(state_shape(sd.at("running_var")) == std::vector<std::size_t>{3});
  CHECK(std::string(state_dtype(sd.at("running_mean"))) == "F32");
  // num_batches_tracked: int64 of shape [] as torch's.
  const StateTensor& n = sd.at("num_batches_tracked");
  CHECK(std::string(state_dtype(n)) == "I64");
  CHECK(state_shape(n).empty());
  CHECK(std::get<ArrayOf<std::int64_t>>(n)() == 0);
  CHECK(std::get<Array>(sd.at("running_var"))(1) == 1.0f);

  Rng rng(1);
  auto model = make_model(bn_transformer(), rng);
  const StateDict msd = model->state_dict();
  // Parameters with their shapes; BatchNorm statistics; no dropout generators.
  CHECK(state_shape(msd.at("transformer_encoder.layers.0.self_attn.in_proj_weight")) ==
        std::vector<std::size_t>{24, 8});
  CHECK(msd.count("transformer_encoder.layers.0.norm1.running_mean") == 1);
  CHECK(msd.count("transformer_encoder.layers.0.norm2.num_batches_tracked") == 1);
  CHECK(msd.count("transformer_encoder.emb_dropout.rng") == 0);
  std::size_t params = 0;
  for (const auto& np : model->named_parameters()) {
    INFO(np.key);
    REQUIRE(msd.count(np.key) == 1);
    CHECK(state_shape(msd.at(np.key)) ==
          std::vector<std::size_t>(np.param->value.shape().begin(), np.param->value.shape().end()));
    ++params;
  }
  CHECK(msd.size() == params + 2 * 3);  // two BatchNorms with three buffers each
  // A prefix is prepended to every key; the dict holds copies.
  const StateDict pre = bn.state_dict("norm.");
  CHECK(pre.count("norm.weight") == 1);
  StateDict copy = bn.state_dict();
  std::get<Array>(copy.at("weight"))(0) = 42.0f;
  CHECK(bn.weight.value(0) == 1.0f);
}

TEST_CASE("load_state_dict restores every parameter and buffer exactly", "[nn][state_dict]") {
  Rng r1(1), r2(2);
  auto a = make_model(bn_transformer(), r1);
  auto b = make_model(bn_transformer(), r2);
  scramble(*a, 11);
  const StateDict sd = a->state_dict();
  REQUIRE_FALSE(same(sd, b->state_dict()));
  const LoadStateResult res = b->load_state_dict(sd);
  CHECK(res.missing_keys.empty());
  CHECK(res.unexpected_keys.empty());
  CHECK(same(b->state_dict(), sd));
  // The loaded model computes what the original does.
  a->eval();
  b->eval();
  IndexTensor2 ids = IndexTensor2::from_shape({2, 4});
  for (std::size_t i = 0; i < ids.size(); ++i) ids.data()[i] = static_cast<std::int32_t>(i % 7);
  const Tensor3 ya = a->forward(ids), yb = b->forward(ids);
  CHECK(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)) == 0);
}

TEST_CASE("load_state_dict names every bad key and changes nothing", "[nn][state_dict][errors]") {
  BatchNorm bn(3, false);
  const StateDict good = bn.state_dict();
  scramble(bn, 5);
  const StateDict before = bn.state_dict();
  auto load_error = [&](const StateDict& sd, bool strict = true) {
    try {
      bn.load_state_dict(sd, strict);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  StateDict sd = good;
  sd.erase("bias");
  sd.erase("running_var");
  sd["fc.weight"] = Array(xt::zeros<float>({2, 2}));
  CHECK_THAT(load_error(sd), Contains("missing key(s) \"bias\", \"running_var\"") &&
                                 Contains("unexpected key(s) \"fc.weight\""));
  CHECK(same(bn.state_dict(), before));

  sd = good;
  sd["weight"] = Array(xt::zeros<float>({4}));
  sd["running_mean"] = Array(xt::zeros<float>({3, 1}));
  const std::string msg = load_error(sd);
  CHECK_THAT(
      msg,
      Contains("size mismatch for \"weight\": the state dict has [4], the module [3]") &&
          Contains(
              "size mismatch for \"running_mean\": the state dict has [3, 1], the module [3]"));
  sd = good;
  sd["num_batches_tracked"] = Array(xt::zeros<float>(std::vector<std::size_t>{}));
  CHECK_THAT(load_error(sd),
             Contains("dtype mismatch for \"num_batches_tracked\": the state dict has F32, "
                      "the module I64"));
  sd = good;
  sd["weight"] = ArrayOf<std::int64_t>(xt::zeros<std::int64_t>({3}));
  CHECK_THAT(load_error(sd), Contains("dtype mismatch for \"weight\""));
  // strict = false lets missing and unexpected keys through (returned), never a size mismatch.
  sd = good;
  sd.erase("bias");
  sd["extra"] = Array(xt::zeros<float>({1}));
  sd["weight"] = Array(xt::zeros<float>({5}));
  CHECK_THAT(load_error(sd, false),
             Contains("size mismatch for \"weight\"") && !Contains("missing"));
  CHECK(same(bn.state_dict(), before));
  sd["weight"] = good.at("weight");
  const LoadStateResult res = bn.load_state_dict(sd, false);
  CHECK(res.missing_keys == std::vector<std::string>{"bias"});
  CHECK(res.unexpected_keys == std::vector<std::string>{"extra"});
  CHECK(bn.weight.value(0) == 1.0f);                                 // loaded
  CHECK(bn.bias.value(0) == std::get<Array>(before.at("bias"))(0));  // left as it was
}

TEST_CASE("safetensors bytes have the documented layout", "[nn][safetensors]") {
  // One F32 [2] = {1, -2} and one I64 [] = 5, with metadata: the exact bytes of the format.
  StateDict sd;
  sd["a"] = Array({1.0f, -2.0f});
  ArrayOf<std::int64_t> n = ArrayOf<std::int64_t>::from_shape(std::vector<std::size_t>{});
  n() = 5;
  sd["n"] = n;
  const std::string bytes = encode_safetensors(sd, {{"format", "pt"}});
  const std::string header =
      "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_"
      "offsets\":[0,8]},"
      "\"n\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[8,16]}}";
  std::string padded = header;
  while ((8 + padded.size()) % 8 != 0) padded.push_back(' ');
  const std::string data("\x00\x00\x80\x3f\x00\x00\x00\xc0\x05\x00\x00\x00\x00\x00\x00\x00", 16);
  CHECK(bytes == file_of(padded, data));
  CHECK((8 + padded.size()) % 8 == 0);
  // And back.
  const SafetensorsFile f = decode_safetensors(bytes);
  CHECK(same(f.tensors, sd));
  CHECK(f.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  // No metadata: no __metadata__ entry.
  CHECK(encode_safetensors(sd).find("__metadata__") == std::string::npos);
  CHECK_THROWS_WITH(encode_safetensors({{"", Array({1.0f})}}), Contains("empty"));
  CHECK_THROWS_WITH(encode_safetensors({{"__metadata__", Array({1.0f})}}), Contains("reserved"));
}

TEST_CASE("a model's weights round-trip through a safetensors file bit for bit",
          "[nn][safetensors]") {
  test::TempDir dir("seqlab_safetensors");
  const std::string path = (dir.path / "model.safetensors").string();
  Rng r1(1), r2(2);
  auto a = make_model(bn_transformer(), r1);
  auto b = make_model(bn_transformer(), r2);
  scramble(*a, 3);
  // Values a text format would round: NaN, infinities, subnormals, -0.
  auto& w = a->named_parameters().front().param->value;
  w.data()[0] = std::numeric_limits<float>::quiet_NaN();
  w.data()[1] = -std::numeric_limits<float>::infinity();
  w.data()[2] = std::numeric_limits<float>::denorm_min();
  w.data()[3] = -0.0f;
  const std::map<std::string, std::string> meta = {
      {"model", "transformer_encoder"}, {"note", "quote \" backslash \\ newline \n tab \t é"}};
  save_safetensors(path, a->state_dict(), meta);
  const SafetensorsFile f = load_safetensors(path);
  CHECK(f.metadata == meta);
  CHECK(same(f.tensors, a->state_dict()));
  b->load_state_dict(f.tensors);
  CHECK(same(b->state_dict(), a->state_dict()));
  // No temporary file is left beside it.
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) {
    (void)e;
    ++files;
  }
  CHECK(files == 1);
  CHECK_THROWS_WITH(load_safetensors((dir.path / "missing.safetensors").string()),
                    Contains("missing.safetensors"));
}

TEST_CASE("the safetensors reader accepts any valid JSON layout of the header",
          "[nn][safetensors]") {
  // Whitespace, keys in another order, metadata last, escapes (\u with a surrogate pair), tensors
  // stored in another order than their keys, an empty tensor and trailing padding.
  const std::string header =
      " {\n  \"b\\u00e9\" : { \"shape\" : [ 1 ] , \"data_offsets\" : [ 0 , 4 ] , \"dtype\" : "
      "\"F32\" } ,\r\n"
      "\t\"a\": {\"data_offsets\": [4, 12], \"dtype\": \"F32\", \"shape\": [2, 1]},"
      "\"empty\": {\"dtype\": \"F32\", \"shape\": [0, 3], \"data_offsets\": [12, 12]},"
      "\"__metadata__\": {\"k\\\"\\\\\\/\\b\\f\\n\\r\\t\": \"\\ud83d\\ude00\"}}    ";
  std::string data;
  for (float v : {3.0f, 1.0f, 2.0f}) data.append(reinterpret_cast<const char*>(&v), 4);
  // The format requires '{' first; this header starts with a space.
  CHECK_THAT(decode_error(file_of(header, data)), Contains("must start with '{'"));
  const SafetensorsFile f = decode_safetensors(file_of(header.substr(1), data));
  REQUIRE(f.tensors.size() == 3);
  CHECK(std::get<Array>(f.tensors.at("b\xc3\xa9"))(0) == 3.0f);
  const Array& a = std::get<Array>(f.tensors.at("a"));
  CHECK(state_shape(f.tensors.at("a")) == std::vector<std::size_t>{2, 1});
  CHECK(a(0, 0) == 1.0f);
  CHECK(a(1, 0) == 2.0f);
  CHECK(std::get<Array>(f.tensors.at("empty")).size() == 0);
  CHECK(f.metadata.at("k\"\\/\b\f\n\r\t") == "\xf0\x9f\x98\x80");
}

TEST_CASE("the safetensors reader rejects damaged and foreign files naming the problem",
          "[nn][safetensors][errors]") {
  const std::string ok_header = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  const std::string data(8, '\0');
  REQUIRE_NOTHROW(decode_safetensors(file_of(ok_header, data)));
  auto with = [&](const std::string& entry) { return file_of("{\"w\":" + entry + "}", data); };

  // The container.
  CHECK_THAT(decode_error("abc"),
             Contains("'f.safetensors'") && Contains("shorter than the 8-byte header size"));
  CHECK_THAT(decode_error(le64(1000) + ok_header + data), Contains("header size 1000 exceeds"));
  CHECK_THAT(decode_error(le64(200000000) + ok_header), Contains("limit of 100000000"));
  CHECK_THAT(decode_error(file_of(ok_header, data.substr(0, 4))),
             Contains("data buffer has 4 bytes"));
  CHECK_THAT(decode_error(file_of(ok_header, data + "xx")),
             Contains("data buffer has 10 bytes") && Contains("cover 8"));
  // The JSON.
  CHECK_THAT(decode_error(file_of("{\"w\":", data)), Contains("unexpected end of header"));
  CHECK_THAT(decode_error(file_of(ok_header + "}", data)), Contains("after the header's object"));
  CHECK_THAT(decode_error(file_of("[1]", data)), Contains("must start with '{'"));
  CHECK_THAT(decode_error(file_of("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                  "\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}",
                                  data)),
             Contains("duplicate key \"w\""));
  CHECK_THAT(decode_error(with("{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}")),
             Contains("non-negative integers"));
  CHECK_THAT(decode_error(with("{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}")),
             Contains("fraction or exponent"));
  CHECK_THAT(decode_error(with("{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}")),
             Contains("leading zero"));
  CHECK_THAT(decode_error(with(
                 "{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}")),
             Contains("does not fit in 64 bits"));
  CHECK_THAT(
      decode_error(with("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":true}")),
      Contains("unexpected 't'"));
  CHECK_THAT(decode_error(file_of("{\"w\\q\":1}", data)), Contains("unknown escape"));
  CHECK_THAT(decode_error(file_of("{\"\\ud800\":1}", data)), Contains("surrogate"));
  CHECK_THAT(decode_error(file_of("{\"a\nb\":1}", data)), Contains("control character"));
  CHECK_THAT(decode_error(file_of(std::string(100, '['), data)), Contains("must start with '{'"));
  CHECK_THAT(decode_error(file_of("{\"a\":" + std::string(100, '['), data)),
             Contains("nested deeper"));
  // The entries.
  CHECK_THAT(
      decode_error(with("{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}")),
      Contains("tensor \"w\"") && Contains("dtype 'F16' is not supported (allowed: F32, I64)"));
  CHECK_THAT(decode_error(with("{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}")),
             Contains("hold 8 bytes, its dtype F32 and shape [3] need 12"));
  CHECK_THAT(decode_error(with("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}")),
             Contains("end before they begin"));
  CHECK_THAT(decode_error(with(
                 "{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}")),
             Contains("more than 2^64"));
  CHECK_THAT(decode_error(with("{\"dtype\":\"F32\",\"shape\":[2]}")),
             Contains("data_offsets is missing"));
  CHECK_THAT(decode_error(with("{\"shape\":[2],\"data_offsets\":[0,8]}")),
             Contains("dtype is missing"));
  CHECK_THAT(
      decode_error(with("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}")),
      Contains("unknown field \"extra\""));
  CHECK_THAT(decode_error(with("[1]")), Contains("is an array, must be an object"));
  CHECK_THAT(decode_error(file_of("{\"__metadata__\":{\"k\":1}," + ok_header.substr(1), data)),
             Contains("__metadata__ \"k\" is an integer, must be a string"));
  CHECK_THAT(decode_error(
                 file_of("{\"\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data)),
             Contains("tensor key is empty"));
  // The tiling of the buffer: a gap, an overlap.
  CHECK_THAT(decode_error(
                 file_of("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", data)),
             Contains("leave a gap"));
  CHECK_THAT(decode_error(file_of("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                                  data)),
             Contains("overlap another tensor"));
}
