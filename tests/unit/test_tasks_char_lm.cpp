#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "seqlab/core/rng.hpp"
#include "seqlab/tasks/char_lm.hpp"

using namespace seqlab;
using Catch::Matchers::WithinRel;

namespace {
std::string decode(const CharCorpus& c, const IndexTensor2& x, std::size_t r, std::size_t len) {
  std::string s;
  for (std::size_t t = 0; t < len; ++t) s.push_back(static_cast<char>(c.byte(x(r, t))));
  return s;
}
}  // namespace

TEST_CASE("char corpus has a byte vocabulary and contiguous splits", "[tasks][char_lm]") {
  const std::string text = "abracadabra, abracadabra!";  // 25 bytes
  const CharCorpus c(text, 0.2);                          // test: last 5 bytes
  CHECK(c.size() == 25);
  CHECK(c.split_size(CorpusSplit::test) == 5);
  CHECK(c.split_size(CorpusSplit::train) == 20);
  CHECK(c.vocab_size() == 8);  // ' ', '!', ',', a, b, c, d, r
  CHECK(c.id(' ') == 0);
  CHECK(c.id('!') == 1);
  CHECK(c.id('r') == 7);
  CHECK(c.byte(3) == 'a');
  CHECK_THROWS_AS(c.id('z'), std::out_of_range);
  CHECK_THROWS_AS(c.byte(8), std::out_of_range);
  // Test windows come only from the last 5 bytes "abra!": inputs and next-byte targets.
  Rng rng(3);
  const PaddedTokenBatch b = c.sample(20, 4, 4, CorpusSplit::test, rng);
  for (std::size_t r = 0; r < 20; ++r) {
    const std::string in = decode(c, b.inputs, r, 4);
    CHECK(in == "abra");  // the only 4-byte window with a next byte
    CHECK(c.byte(b.targets(r, 3)) == '!');
    CHECK(c.byte(b.targets(r, 0)) == 'b');
  }
}

TEST_CASE("char corpus windows are text slices with next-byte targets and padding", "[tasks][char_lm]") {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "the quick brown fox " + std::to_string(i) + ". ";
  const CharCorpus c(text, 0.25);
  Rng rng(9);
  const PaddedTokenBatch b = c.sample(30, 3, 17, CorpusSplit::train, rng);
  REQUIRE(b.inputs.shape()[1] == 17);
  const std::string train = text.substr(0, c.split_size(CorpusSplit::train));
  for (std::size_t r = 0; r < 30; ++r) {
    INFO("row " << r);
    const std::size_t len = b.lengths[r];
    REQUIRE(len >= 3);
    REQUIRE(len <= 17);
    const std::string in = decode(c, b.inputs, r, len);
    std::string tg;
    for (std::size_t t = 0; t < len; ++t) tg.push_back(static_cast<char>(c.byte(b.targets(r, t))));
    const auto pos = train.find(in + tg.back());
    CHECK(pos != std::string::npos);  // the window and its next byte lie in the train split
    CHECK(tg.substr(0, len - 1) == in.substr(1));
    for (std::size_t t = 0; t < 17; ++t) {
      CHECK(b.padding(r, t) == (t >= len ? 1 : 0));
      if (t >= len) CHECK(b.targets(r, t) == kIgnoreTarget);
    }
  }
  // Determinism and the documented draw order (length, then offset).
  Rng a(5), a2(5);
  const PaddedTokenBatch x = c.sample(4, 3, 17, CorpusSplit::train, a);
  const PaddedTokenBatch y = c.sample(4, 3, 17, CorpusSplit::train, a2);
  CHECK(x.inputs == y.inputs);
  CHECK(x.targets == y.targets);
  Rng ref(5);
  const std::size_t len0 = 3 + ref.uniform_int(std::uint64_t{15});
  const std::size_t off0 = ref.uniform_int(std::uint64_t{c.split_size(CorpusSplit::train) - len0});
  CHECK(x.lengths[0] == len0);
  CHECK(decode(c, x.inputs, 0, len0) == train.substr(off0, len0));
}

TEST_CASE("char corpus unigram baseline is the smoothed train unigram cross-entropy", "[tasks][char_lm]") {
  // Train "aaab" (a: 3, b: 1), test "abba": targets b, b, a. V = 2, N_train = 4.
  const CharCorpus c("aaababba", 0.5);
  const double pa = (3.0 + 1) / (4 + 2), pb = (1.0 + 1) / (4 + 2);
  const double expected = -(std::log(pb) + std::log(pb) + std::log(pa)) / 3;
  CHECK_THAT(c.unigram_test_loss(), WithinRel(expected, 1e-12));
}

TEST_CASE("char corpus reads files and rejects bad arguments", "[tasks][char_lm]") {
  CHECK_THROWS_WITH(CharCorpus("abc", 0.5), Catch::Contains("text"));
  CHECK_THROWS_WITH(CharCorpus("abcdefgh", 0.0), Catch::Contains("test_fraction"));
  CHECK_THROWS_WITH(CharCorpus("abcdefgh", 0.95), Catch::Contains("test_fraction"));
  CHECK_THROWS_WITH(CharCorpus::from_file("/nonexistent/corpus.txt", 0.1),
                    Catch::Contains("/nonexistent/corpus.txt"));
  const CharCorpus c("abcdefghijklmnop", 0.25);  // test split: 4 bytes, windows up to 3
  Rng rng(1);
  CHECK_THROWS_WITH(c.sample(0, 1, 2, CorpusSplit::test, rng), Catch::Contains("batch"));
  CHECK_THROWS_WITH(c.sample(1, 1, 4, CorpusSplit::test, rng), Catch::Contains("max_len") && Catch::Contains("4"));
  CHECK_THROWS_WITH(c.sample(1, 3, 2, CorpusSplit::test, rng), Catch::Contains("min_len"));
  CHECK_NOTHROW(c.sample(1, 3, 3, CorpusSplit::test, rng));
}
