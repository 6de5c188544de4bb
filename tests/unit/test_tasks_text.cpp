// tasks/text: symbols (strict UTF-8 and bytes), the corpus (splits by fraction, by directory, by
// book), the train-only vocabulary with its unknown id, training windows, both evaluation modes of
// Press et al. 2021 (exact windows and scored positions, hand-checked), the unigram baseline, the
// report conversions, the checked split files, the errors that experiments turn into exit 2, and
// the KJV prepared from Debian's `bible` (tests/golden/kjv_excerpt.txt without it; the real program
// for the split constants and the numbers in lib/README.md).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "seqlab/core/file_io.hpp"
#include "seqlab/core/hash.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/models/model_config.hpp"
#include "seqlab/tasks/text.hpp"
#include "temp_dir.hpp"

using namespace seqlab;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;
namespace fs = std::filesystem;

namespace {

std::string excerpt() { return read_file(std::string(SEQLAB_GOLDEN_DIR) + "/kjv_excerpt.txt"); }

void write(const fs::path& p, const std::string& content) {
  std::ofstream f(p, std::ios::binary);
  f << content;
}

bool same_ids(const IndexTensor2& a, const IndexTensor2& b) {
  return a.shape() == b.shape() && std::equal(a.begin(), a.end(), b.begin());
}

std::vector<std::int32_t> row(const IndexTensor2& x, std::size_t r) {
  const std::size_t T = x.shape()[1];
  return std::vector<std::int32_t>(x.data() + r * T, x.data() + (r + 1) * T);
}

// The ConfigError `f` throws (REQUIREs one).
template <class F>
ConfigError config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e;
  } catch (const std::exception& e) {
    FAIL("expected ConfigError, got: " << e.what());
  }
  FAIL("expected ConfigError, nothing thrown");
  return ConfigError("", "", "");
}

// A corpus whose every split is "abcdefghijk": ids a..k = 0..10, so target index j has id j.
std::shared_ptr<const TextCorpus> alphabet_corpus() {
  const std::string s = "abcdefghijk";
  return std::make_shared<const TextCorpus>(TextSplits{s, s, s}, TextUnit::character);
}

// Sets (or, with nullopt, unsets) an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(std::string n, const std::optional<std::string>& value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
    if (value) setenv(name.c_str(), value->c_str(), 1);
    else unsetenv(name.c_str());
  }
  ~ScopedEnv() {
    if (old) setenv(name.c_str(), old->c_str(), 1);
    else unsetenv(name.c_str());
  }
};

std::string thousands(std::size_t n) {
  std::string d = std::to_string(n), out;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

int book_index(const std::string& name) {
  for (std::size_t i = 0; i < kjv_books().size(); ++i)
    if (name == kjv_books()[i]) return static_cast<int>(i);
  return -1;
}

}  // namespace

// --- symbols, names, report helpers -----------------------------------------------------------------

TEST_CASE("text symbols are code points of strict UTF-8 or bytes", "[tasks][text]") {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀: 1 + 2 + 3 + 4 bytes
  CHECK(text_symbols(s, TextUnit::character) == std::vector<std::int32_t>{0x61, 0xE9, 0x20AC, 0x1F600});
  const auto bytes = text_symbols(s, TextUnit::byte);
  REQUIRE(bytes.size() == 10);
  CHECK(bytes[1] == 0xC3);
  CHECK(bytes[9] == 0x80);
  // Largest code point and the last before the surrogates.
  CHECK(text_symbols("\xF4\x8F\xBF\xBF\xED\x9F\xBF", TextUnit::character) ==
        std::vector<std::int32_t>{0x10FFFF, 0xD7FF});
  const std::map<std::string, std::string> bad = {
      {"ab\xFF", "invalid UTF-8 at byte 2"},           // never in UTF-8
      {"\x80", "invalid UTF-8 at byte 0"},             // a continuation byte first
      {"x\xC0\xAF", "invalid UTF-8 at byte 1"},        // overlong '/'
      {"\xE0\x9F\xBF", "invalid UTF-8 at byte 0"},     // overlong three-byte form
      {"\xF0\x8F\xBF\xBF", "invalid UTF-8 at byte 0"}, // overlong four-byte form
      {"\xED\xA0\x80", "invalid UTF-8 at byte 0"},     // a surrogate (U+D800)
      {"\xF4\x90\x80\x80", "invalid UTF-8 at byte 0"}, // above U+10FFFF
      {"ok\xE2\x82", "invalid UTF-8 at byte 2"},       // truncated
      {"\xC3(", "invalid UTF-8 at byte 0"},            // a missing continuation
      {std::string("a\0b", 3), "NUL at byte 1"},
  };
  for (const auto& [text, message] : bad) {
    INFO(message);
    CHECK_THROWS_WITH(text_symbols(text, TextUnit::character), message);
    CHECK(text_symbols(text, TextUnit::byte).size() == text.size());  // bytes: anything goes
  }
}

TEST_CASE("text units and splits parse by name with messages naming the key", "[tasks][text][errors]") {
  CHECK(parse_text_unit("char") == TextUnit::character);
  CHECK(parse_text_unit("byte") == TextUnit::byte);
  CHECK(text_unit_name(TextUnit::byte) == "byte");
  CHECK_THROWS_WITH(parse_text_unit("word"), "unit = 'word': allowed one of char, byte");
  CHECK(parse_text_split("valid") == TextSplit::valid);
  CHECK(text_split_name(TextSplit::test) == "test");
  CHECK_THROWS_WITH(parse_text_split("dev", "eval_split"), "eval_split = 'dev': allowed one of train, valid, test");
}

TEST_CASE("bits per character and perplexity convert nats", "[tasks][text]") {
  CHECK_THAT(bits_per_character(std::log(2.0)), WithinRel(1.0, 1e-15));
  CHECK_THAT(bits_per_character(std::log(256.0)), WithinRel(8.0, 1e-15));  // a uniform byte
  CHECK_THAT(bits_per_character(1.0), WithinRel(1.4426950408889634, 1e-15));
  CHECK_THAT(perplexity(std::log(27.0)), WithinRel(27.0, 1e-14));
  CHECK(perplexity(0.0) == 1.0);
}

// --- the corpus and its vocabulary ------------------------------------------------------------------

TEST_CASE("text corpus vocabulary comes from the train split with one unknown id", "[tasks][text]") {
  const TextCorpus c(TextSplits{"abcab", "abz", "ca!"}, TextUnit::character, "tiny");
  CHECK(c.source() == "tiny");
  CHECK(c.vocab_size() == 4);  // a, b, c + unknown
  CHECK(c.unknown_id() == 3);
  CHECK(c.id('a') == 0);
  CHECK(c.id('c') == 2);
  CHECK(c.id('z') == 3);
  CHECK(c.id(0x10FFFF) == 3);
  CHECK(c.symbol(1) == 'b');
  CHECK_THROWS_AS(c.symbol(3), std::out_of_range);
  CHECK_THROWS_AS(c.symbol(-1), std::out_of_range);
  CHECK(c.ids(TextSplit::train) == std::vector<std::int32_t>{0, 1, 2, 0, 1});
  CHECK(c.ids(TextSplit::valid) == std::vector<std::int32_t>{0, 1, 3});
  CHECK(c.ids(TextSplit::test) == std::vector<std::int32_t>{2, 0, 3});
  CHECK(c.unknown_count(TextSplit::train) == 0);
  CHECK(c.unknown_count(TextSplit::valid) == 1);
  CHECK(c.unknown_count(TextSplit::test) == 1);

  // Code points, in increasing order: α (U+03B1) before β (U+03B2) before ω (U+03C9).
  const TextCorpus g(TextSplits{"\xCF\x89\xCE\xB1\xCE\xB2", "\xCE\xB1\xCE\xB2", "\xCE\xB2\xCE\xB3"},
                     TextUnit::character);
  CHECK(g.vocab_size() == 4);
  CHECK(g.symbol(0) == 0x3B1);
  CHECK(g.symbol(2) == 0x3C9);
  CHECK(g.ids(TextSplit::test) == std::vector<std::int32_t>{1, 3});  // γ is unknown
  const TextCorpus b(TextSplits{"\xCF\x89\xCE\xB1\xCE\xB2", "\xCE\xB1\xCE\xB2", "\xCE\xB2\xCE\xB3"},
                     TextUnit::byte);
  CHECK(b.vocab_size() == 6);  // bytes CE, CF, 89, B1, B2 + unknown
  CHECK(b.split_size(TextSplit::train) == 6);

  CHECK_THROWS_WITH(TextCorpus(TextSplits{"ab", "a", "ab"}, TextUnit::character, "x"),
                    Contains("valid split of x has 1 symbols"));
  CHECK_THROWS_WITH(TextCorpus(TextSplits{"ab", "ab", "a\xFF"}, TextUnit::character, "x"),
                    Contains("test split of x is not UTF-8 text: invalid UTF-8 at byte 1"));
}

TEST_CASE("a corpus file is split by fractions at its end, in symbols of the unit", "[tasks][text]") {
  seqlab::test::TempDir dir("seqlab_text_split");
  std::string digits;
  for (int i = 0; i < 10; ++i) digits += "0123456789";
  write(dir.path / "digits.txt", digits);
  TextCorpusOptions o;
  o.corpus = (dir.path / "digits.txt").string();
  o.valid_fraction = 0.1;
  o.test_fraction = 0.2;
  const TextCorpus c = TextCorpus::open(o);
  CHECK(c.source() == o.corpus);
  CHECK(c.split_size(TextSplit::train) == 70);
  CHECK(c.split_size(TextSplit::valid) == 10);
  CHECK(c.split_size(TextSplit::test) == 20);
  CHECK(c.vocab_size() == 11);
  CHECK(c.ids(TextSplit::valid) == std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});

  // Defaults 5 % + 5 %; rounding to the nearest symbol.
  o.valid_fraction.reset();
  o.test_fraction.reset();
  const TextCorpus d = TextCorpus::open(o);
  CHECK(d.split_size(TextSplit::valid) == 5);
  CHECK(d.split_size(TextSplit::test) == 5);
  CHECK(d.split_size(TextSplit::train) == 90);

  // Multi-byte characters: the fractions count code points (unit = char) or bytes (unit = byte).
  std::string mixed;
  for (int i = 0; i < 50; ++i) mixed += "a\xC3\xA9";  // "aé": 2 code points, 3 bytes
  write(dir.path / "mixed.txt", mixed);
  o.corpus = (dir.path / "mixed.txt").string();
  o.valid_fraction = 0.1;
  o.test_fraction = 0.2;
  const TextCorpus m = TextCorpus::open(o);
  CHECK(m.split_size(TextSplit::train) == 70);
  CHECK(m.split_size(TextSplit::valid) == 10);
  CHECK(m.split_size(TextSplit::test) == 20);
  CHECK(m.vocab_size() == 3);
  CHECK(m.symbol(1) == 0xE9);
  o.unit = TextUnit::byte;
  const TextCorpus mb = TextCorpus::open(o);
  CHECK(mb.split_size(TextSplit::train) == 105);
  CHECK(mb.split_size(TextSplit::valid) == 15);
  CHECK(mb.split_size(TextSplit::test) == 30);
  CHECK(mb.vocab_size() == 4);  // 'a', C3, A9 + unknown
}

TEST_CASE("a corpus directory holds its own three splits", "[tasks][text]") {
  seqlab::test::TempDir dir("seqlab_text_dir");
  write(dir.path / "train.txt", "the train text\n");
  write(dir.path / "valid.txt", "valid text\n");
  write(dir.path / "test.txt", "test text!\n");
  TextCorpusOptions o;
  o.corpus = dir.path.string();
  const TextCorpus c = TextCorpus::open(o);
  CHECK(c.split_size(TextSplit::train) == 15);
  CHECK(c.split_size(TextSplit::valid) == 11);
  CHECK(c.unknown_count(TextSplit::test) == 2);  // 's', '!'
  o.test_fraction = 0.1;
  CHECK(config_error([&] { TextCorpus::open(o); }).key() == "test_fraction");
  o.test_fraction.reset();
  fs::remove(dir.path / "valid.txt");
  const ConfigError e = config_error([&] { TextCorpus::open(o); });
  CHECK(e.key() == "corpus");
  CHECK_THAT(e.what(), Contains("valid.txt"));
}

// --- the KJV's format, from the committed excerpt ---------------------------------------------------

TEST_CASE("split_kjv removes the page furniture and splits the excerpt by book", "[tasks][text][kjv]") {
  const std::string raw = excerpt();
  REQUIRE(raw.size() < 50000);
  const TextSplits s = split_kjv(raw);
  // Verses of the excerpt (tests/golden/make_kjv_excerpt.sh): train Genesis 1-3 (31 + 25 + 24),
  // Ruth 1 (22), Psalms 23 (6), Matthew 5 (48), Acts 2 (47); valid Romans 8 (39), Philippians 4
  // (23); test Colossians 3 (25), Hebrews 11 (40), Jude (25), Revelation 22 (21).
  const auto lines = [](const std::string& t) { return std::count(t.begin(), t.end(), '\n'); };
  CHECK(lines(s.train) == 80 + 22 + 6 + 48 + 47);
  CHECK(lines(s.valid) == 39 + 23);
  CHECK(lines(s.test) == 25 + 40 + 25 + 21);
  CHECK(s.train.rfind("In the beginning God created the heaven and the earth.\nAnd the earth was", 0) == 0);
  CHECK(s.valid.rfind("There is therefore now no condemnation", 0) == 0);
  CHECK(s.test.rfind("If ye then be risen with Christ", 0) == 0);
  const std::string last = "The grace of our Lord Jesus Christ be with you all. Amen.\n";
  CHECK(s.test.compare(s.test.size() - last.size(), last.size(), last) == 0);
  // Every verse line of the excerpt, number removed, is a line of exactly one split; nothing else is.
  std::size_t verses = 0, chars = 0;
  std::istringstream in(raw);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("  ", 0) != 0) continue;
    ++verses;
    chars += line.size() - line.find(' ', 2);  // the text after "  <n> ", plus its '\n'
  }
  CHECK(static_cast<std::size_t>(lines(s.train) + lines(s.valid) + lines(s.test)) == verses);
  CHECK(s.train.size() + s.valid.size() + s.test.size() == chars);
  for (const std::string* t : {&s.train, &s.valid, &s.test}) {
    CHECK(t->find("\n\n") == std::string::npos);
    CHECK(t->find("Genesis 1") == std::string::npos);
    CHECK(t->find(' ', 0) != 0);
    for (std::size_t i = 0; i + 1 < t->size(); ++i)
      if ((*t)[i] == '\n') CHECK(std::isdigit(static_cast<unsigned char>((*t)[i + 1])) == 0);
  }
  // Trailing blanks of a verse go.
  CHECK(split_kjv("Genesis 1\n\n  1 In the beginning. \n").train == "In the beginning.\n");
}

TEST_CASE("split_kjv rejects lines it does not know", "[tasks][text][kjv][errors]") {
  CHECK_THROWS_WITH(split_kjv("Genesis 1\n\n  1 In\nfoo bar\n"),
                    Contains("line 4 'foo bar': neither a verse nor a chapter header"));
  CHECK_THROWS_WITH(split_kjv("Hezekiah 1\n"), Contains("line 1 'Hezekiah 1': a chapter header of an unknown book"));
  CHECK_THROWS_WITH(split_kjv("\n  1 In the beginning\n"), Contains("line 2"));
  CHECK_THROWS_WITH(split_kjv("Genesis 1\n  x no number\n"), Contains("line 2"));
  CHECK(kjv_books().front() == std::string("Genesis"));
  CHECK(kjv_books().back() == std::string("Revelation"));
  // The split by book is contiguous and covers the 66 books.
  const auto& k = kjv_splits();
  CHECK(book_index(k[0].first_book) == 0);
  CHECK(book_index(k[1].first_book) == book_index(k[0].last_book) + 1);
  CHECK(book_index(k[2].first_book) == book_index(k[1].last_book) + 1);
  CHECK(book_index(k[2].last_book) == 65);
}

// --- training windows -------------------------------------------------------------------------------

TEST_CASE("training windows are contiguous slices with next-symbol targets, deterministic", "[tasks][text]") {
  const TextSplits s = split_kjv(excerpt());
  const TextCorpus c(s, TextUnit::character, "excerpt");
  const std::size_t B = 16, T = 40;
  Rng r1(5), r2(5), replay(5);
  const TokenBatch b = c.sample(B, T, r1);
  const TokenBatch again = c.sample(B, T, r2);
  REQUIRE(b.inputs.shape() == std::array<std::size_t, 2>{B, T});
  REQUIRE(b.targets.shape() == std::array<std::size_t, 2>{B, T});
  CHECK(same_ids(b.inputs, again.inputs));
  CHECK(same_ids(b.targets, again.targets));
  const std::vector<std::int32_t>& ids = c.ids(TextSplit::train);
  for (std::size_t r = 0; r < B; ++r) {
    INFO("row " << r);
    // The documented draw: one offset per row, o = uniform_int(S - T).
    const auto o = static_cast<std::size_t>(replay.uniform_int(ids.size() - T));
    CHECK(row(b.inputs, r) == std::vector<std::int32_t>(ids.begin() + o, ids.begin() + o + T));
    CHECK(row(b.targets, r) == std::vector<std::int32_t>(ids.begin() + o + 1, ids.begin() + o + T + 1));
    for (std::size_t t = 0; t + 1 < T; ++t) CHECK(b.targets(r, t) == b.inputs(r, t + 1));
  }
  // A train window never holds the unknown id; the windows of another split come from it.
  for (auto v : b.inputs) CHECK((v >= 0 && v < c.unknown_id()));
  Rng r3(8);
  const TokenBatch t = c.sample(4, 12, r3, TextSplit::test);
  const std::string test_text = s.test;
  for (std::size_t r = 0; r < 4; ++r) {
    std::string in;
    for (std::size_t i = 0; i < 12; ++i) {
      const std::int32_t id = t.inputs(r, i);
      in += id == c.unknown_id() ? '?' : static_cast<char>(c.symbol(id));
    }
    bool found = false;
    for (std::size_t o = 0; o + 12 < test_text.size() && !found; ++o) {
      bool same = true;
      for (std::size_t i = 0; i < 12 && same; ++i)
        same = in[i] == '?' ? c.id(static_cast<unsigned char>(test_text[o + i])) == c.unknown_id()
                            : in[i] == test_text[o + i];
      found = same;
    }
    CHECK(found);
  }
}

TEST_CASE("training windows reach every offset of a split and never past it", "[tasks][text]") {
  const auto c = alphabet_corpus();  // 11 symbols per split
  Rng rng(1);
  const std::size_t T = 3;
  std::set<std::int32_t> first;
  for (int i = 0; i < 20; ++i) {
    const TokenBatch b = c->sample(10, T, rng, TextSplit::valid);
    for (std::size_t r = 0; r < 10; ++r) {
      first.insert(b.inputs(r, 0));
      CHECK(b.targets(r, T - 1) <= 10);
      CHECK(b.targets(r, T - 1) == b.inputs(r, 0) + 3);
    }
  }
  CHECK(first == std::set<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7});  // o in [0, S - T) = [0, 8)
  Rng r(2);
  const TokenBatch whole = c->sample(3, 10, r);  // the only window of 10 + 1 symbols
  for (std::size_t i = 0; i < 3; ++i) CHECK(row(whole.targets, i) == std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  CHECK_THROWS_AS(c->sample(0, 3, r), std::invalid_argument);
  CHECK_THROWS_AS(c->sample(2, 0, r), std::invalid_argument);
  CHECK_THROWS_WITH(c->sample(2, 11, r), Contains("seq_len must be <= 10"));
}

// --- evaluation -------------------------------------------------------------------------------------

TEST_CASE("non-overlapping evaluation tiles the split, hand-checked", "[tasks][text][eval]") {
  const auto c = alphabet_corpus();  // targets 1..10, target index j has id j
  const TextEvaluation e = TextEvaluation::non_overlapping(c, TextSplit::test, 4, 0, 2);
  CHECK(e.window() == 4);
  CHECK(e.stride() == 4);
  CHECK(e.n_scored() == 10);
  REQUIRE(e.n_windows() == 3);
  REQUIRE(e.n_chunks() == 2);
  CHECK(e.window_start(0) == 0);
  CHECK(e.window_start(1) == 4);
  CHECK(e.window_start(2) == 6);  // moved back to end at target 10
  CHECK(e.scored_positions(0) == std::pair<std::size_t, std::size_t>{0, 4});
  CHECK(e.scored_positions(1) == std::pair<std::size_t, std::size_t>{0, 4});
  CHECK(e.scored_positions(2) == std::pair<std::size_t, std::size_t>{2, 4});
  const TaskBatch a = e.chunk(0), b = e.chunk(1);
  REQUIRE(a.tokens.shape() == std::array<std::size_t, 2>{2, 4});
  REQUIRE(b.tokens.shape() == std::array<std::size_t, 2>{1, 4});
  CHECK(row(a.tokens, 0) == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(row(a.targets, 0) == std::vector<std::int32_t>{1, 2, 3, 4});
  CHECK(row(a.tokens, 1) == std::vector<std::int32_t>{4, 5, 6, 7});
  CHECK(row(a.targets, 1) == std::vector<std::int32_t>{5, 6, 7, 8});
  CHECK(row(b.tokens, 0) == std::vector<std::int32_t>{6, 7, 8, 9});
  CHECK(row(b.targets, 0) == std::vector<std::int32_t>{kIgnoreTarget, kIgnoreTarget, 9, 10});
  CHECK(a.padding.size() == 0);
  CHECK_THROWS_AS(e.chunk(2), std::out_of_range);
  CHECK_THROWS_AS(e.window_start(3), std::out_of_range);

  // A cap of 5 targets: the second window ends at target 5 and scores only it.
  const TextEvaluation capped = TextEvaluation::non_overlapping(c, TextSplit::test, 4, 5, 8);
  CHECK(capped.n_scored() == 5);
  REQUIRE(capped.n_windows() == 2);
  const TaskBatch cb = capped.chunk(0);
  CHECK(row(cb.tokens, 1) == std::vector<std::int32_t>{1, 2, 3, 4});
  CHECK(row(cb.targets, 1) == std::vector<std::int32_t>{kIgnoreTarget, kIgnoreTarget, kIgnoreTarget, 5});
  // A cap below the window: one window, its first 3 positions scored.
  const TextEvaluation small = TextEvaluation::non_overlapping(c, TextSplit::test, 4, 3, 8);
  REQUIRE(small.n_windows() == 1);
  CHECK(row(small.chunk(0).targets, 0) == std::vector<std::int32_t>{1, 2, 3, kIgnoreTarget});
  // A cap above the split is the whole split.
  CHECK(TextEvaluation::non_overlapping(c, TextSplit::test, 4, 1000, 8).n_scored() == 10);
  // A window of the whole split.
  const TextEvaluation whole = TextEvaluation::non_overlapping(c, TextSplit::test, 10, 0, 1);
  REQUIRE(whole.n_windows() == 1);
  CHECK(row(whole.chunk(0).targets, 0) == std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
}

TEST_CASE("sliding evaluation scores the last stride positions of each window, hand-checked", "[tasks][text][eval]") {
  const auto c = alphabet_corpus();
  const TextEvaluation e = TextEvaluation::sliding(c, TextSplit::valid, 4, 2, 0, 3);
  REQUIRE(e.n_windows() == 4);  // 1 + ceil((10 - 4) / 2)
  REQUIRE(e.n_chunks() == 2);
  const TaskBatch a = e.chunk(0), b = e.chunk(1);
  const std::int32_t I = kIgnoreTarget;
  CHECK(row(a.tokens, 0) == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(row(a.targets, 0) == std::vector<std::int32_t>{1, 2, 3, 4});  // the first window: all
  CHECK(row(a.tokens, 1) == std::vector<std::int32_t>{2, 3, 4, 5});
  CHECK(row(a.targets, 1) == std::vector<std::int32_t>{I, I, 5, 6});
  CHECK(row(a.tokens, 2) == std::vector<std::int32_t>{4, 5, 6, 7});
  CHECK(row(a.targets, 2) == std::vector<std::int32_t>{I, I, 7, 8});
  CHECK(row(b.tokens, 0) == std::vector<std::int32_t>{6, 7, 8, 9});
  CHECK(row(b.targets, 0) == std::vector<std::int32_t>{I, I, 9, 10});
  // Stride 3: the last window is moved back to end at target 10 and scores what is left.
  const TextEvaluation s3 = TextEvaluation::sliding(c, TextSplit::valid, 4, 3, 0, 8);
  REQUIRE(s3.n_windows() == 3);  // ends 4, 7, 10
  const TaskBatch t = s3.chunk(0);
  CHECK(row(t.targets, 1) == std::vector<std::int32_t>{I, 5, 6, 7});
  CHECK(row(t.targets, 2) == std::vector<std::int32_t>{I, 8, 9, 10});
  // Stride 1, as Press et al.'s most expensive setting: one new target per window.
  const TextEvaluation s1 = TextEvaluation::sliding(c, TextSplit::valid, 4, 1, 0, 100);
  REQUIRE(s1.n_windows() == 7);
  CHECK(row(s1.chunk(0).targets, 6) == std::vector<std::int32_t>{I, I, I, 10});
  // Stride = window is the non-overlapping evaluation.
  const TextEvaluation same = TextEvaluation::sliding(c, TextSplit::valid, 4, 4, 0, 2);
  const TextEvaluation non = TextEvaluation::non_overlapping(c, TextSplit::valid, 4, 0, 2);
  CHECK(same_ids(same.chunk(1).targets, non.chunk(1).targets));

  CHECK_THROWS_WITH(TextEvaluation::sliding(c, TextSplit::valid, 0, 1, 0, 1), Contains("window = 0"));
  CHECK_THROWS_WITH(TextEvaluation::sliding(c, TextSplit::valid, 11, 1, 0, 1),
                    Contains("window = 11: allowed an integer in [1, 10]"));
  CHECK_THROWS_WITH(TextEvaluation::sliding(c, TextSplit::valid, 4, 0, 0, 1), Contains("stride = 0"));
  CHECK_THROWS_WITH(TextEvaluation::sliding(c, TextSplit::valid, 4, 5, 0, 1),
                    Contains("stride = 5: allowed an integer in [1, window = 4]"));
  CHECK_THROWS_WITH(TextEvaluation::sliding(c, TextSplit::valid, 4, 2, 0, 0), Contains("batch = 0"));
  CHECK_THROWS_AS(TextEvaluation::sliding(nullptr, TextSplit::valid, 4, 2, 0, 1), std::invalid_argument);
}

TEST_CASE("both evaluation modes score each of the first N targets exactly once", "[tasks][text][eval]") {
  const auto c = std::make_shared<const TextCorpus>(split_kjv(excerpt()), TextUnit::character);
  const std::vector<std::int32_t>& ids = c->ids(TextSplit::test);
  const std::size_t S = ids.size();
  struct Case {
    std::size_t L, stride, cap, batch;
  };
  for (const Case k : {Case{64, 64, 0, 7}, Case{64, 16, 0, 5}, Case{100, 1, 2000, 64}, Case{256, 64, 5000, 3},
                       Case{512, 512, 777, 2}, Case{S - 1, 7, 0, 1}}) {
    INFO("L " << k.L << " stride " << k.stride << " cap " << k.cap);
    const TextEvaluation e(c, TextSplit::test, k.L, k.stride, k.cap, k.batch);
    const std::size_t N = k.cap == 0 ? S - 1 : std::min(k.cap, S - 1);
    CHECK(e.n_scored() == N);
    std::vector<int> times(S, 0);
    std::size_t windows = 0, scored = 0;
    for (std::size_t i = 0; i < e.n_chunks(); ++i) {
      const TaskBatch b = e.chunk(i);
      REQUIRE(b.tokens.shape()[1] == k.L);
      REQUIRE(b.tokens.shape()[0] <= k.batch);
      for (std::size_t r = 0; r < b.tokens.shape()[0]; ++r, ++windows) {
        const std::size_t s = e.window_start(windows);
        const auto [lo, hi] = e.scored_positions(windows);
        for (std::size_t t = 0; t < k.L; ++t) {
          REQUIRE(b.tokens(r, t) == ids[s + t]);
          const bool in = t >= lo && t < hi;
          if (!in) {
            CHECK(b.targets(r, t) == kIgnoreTarget);
            continue;
          }
          ++scored;
          CHECK(b.targets(r, t) == ids[s + t + 1]);
          ++times[s + t + 1];
          // Sliding: every scored target after the first window has >= L - stride of context.
          if (windows > 0) CHECK(t >= k.L - k.stride);
        }
      }
    }
    CHECK(windows == e.n_windows());
    CHECK(scored == N);
    bool once = true;
    for (std::size_t j = 1; j <= N; ++j) once = once && times[j] == 1;
    CHECK(once);
    for (std::size_t j = N + 1; j < S; ++j) CHECK(times[j] == 0);
  }
}

// --- baseline ---------------------------------------------------------------------------------------

TEST_CASE("the unigram baseline is the add-one smoothed train unigram on the scored targets", "[tasks][text]") {
  // Train "aab": counts a 2, b 1, unknown 0; V = 3; p = (count + 1) / (3 + 3).
  const TextCorpus c(TextSplits{"aab", "ab", "abc"}, TextUnit::character);
  // Test targets: symbols 1.. of "abc" = b, c (unknown).
  CHECK_THAT(c.unigram_loss(TextSplit::test), WithinRel(-(std::log(2.0 / 6) + std::log(1.0 / 6)) / 2, 1e-14));
  CHECK_THAT(c.unigram_loss(TextSplit::test, 1), WithinRel(-std::log(2.0 / 6), 1e-14));
  CHECK_THAT(c.unigram_loss(TextSplit::valid), WithinRel(-std::log(2.0 / 6), 1e-14));
  CHECK(c.unigram_accuracy(TextSplit::test) == 0.0);  // always 'a'
  const TextCorpus d(TextSplits{"aab", "xaa", "ba"}, TextUnit::character);
  CHECK(d.unigram_accuracy(TextSplit::valid) == 1.0);
  CHECK(d.unigram_accuracy(TextSplit::test) == 1.0);
  // A uniform train text: the baseline is close to ln V.
  const TextCorpus u(TextSplits{"abcdabcdabcdabcd", "abcd", "dcba"}, TextUnit::character);
  CHECK_THAT(u.unigram_loss(), WithinRel(-std::log(5.0 / 21), 1e-14));
}

// --- the registry task ------------------------------------------------------------------------------

TEST_CASE("the registry task text samples windows of a corpus file", "[tasks][text][registry]") {
  seqlab::test::TempDir dir("seqlab_text_registry");
  const std::string path = (dir.path / "excerpt.txt").string();
  const TextSplits s = split_kjv(excerpt());
  write(path, s.train + s.valid + s.test);
  TaskParams p;
  p.set("corpus", path);
  p.set("seq_len", "48");
  p.set("valid_fraction", "0.1");
  const auto task = make_task("text", p);
  const auto* text = dynamic_cast<const TextTask*>(task.get());
  REQUIRE(text != nullptr);
  const TaskSpec spec = task->spec();
  CHECK(spec.input == "embedding");
  CHECK(spec.seq_len == 48);
  CHECK(spec.vocab_size == text->corpus()->vocab_size());
  CHECK(spec.output_size == spec.vocab_size);
  CHECK(spec.head == "per_position");
  CHECK_FALSE(spec.padded);
  CHECK(spec.baseline_loss == text->corpus()->unigram_loss(TextSplit::test));
  CHECK(spec.baseline_accuracy == text->corpus()->unigram_accuracy(TextSplit::test));
  CHECK(text->corpus()->split_size(TextSplit::valid) ==
        static_cast<std::size_t>(std::llround(0.1 * double(s.train.size() + s.valid.size() + s.test.size()))));
  Rng r1(4), r2(4);
  const TaskBatch b = task->sample(3, r1);
  const TokenBatch d = text->corpus()->sample(3, 48, r2);
  CHECK(same_ids(b.tokens, d.inputs));
  CHECK(same_ids(b.targets, d.targets));
  // The evaluation of the task's corpus, through the cast.
  const TextEvaluation e = TextEvaluation::sliding(text->corpus(), TextSplit::test, 96, 48, 1000, 4);
  CHECK(e.n_scored() == 1000);
  p.set("split", "test");
  p.set("unit", "byte");
  const auto bytes = make_task("text", p);
  CHECK(dynamic_cast<const TextTask*>(bytes.get())->split() == TextSplit::test);
  CHECK(dynamic_cast<const TextTask*>(bytes.get())->corpus()->unit() == TextUnit::byte);
}

// --- errors that experiments report with exit status 2 ----------------------------------------------

TEST_CASE("text corpus errors name the key, the value and what is allowed", "[tasks][text][errors]") {
  seqlab::test::TempDir dir("seqlab_text_errors");
  TextCorpusOptions o;
  TaskParams p;

  // Missing file.
  o.corpus = "/nonexistent/seqlab/corpus.txt";
  ConfigError e = config_error([&] { TextCorpus::open(o); });
  CHECK(e.key() == "corpus");
  CHECK(e.value() == "'/nonexistent/seqlab/corpus.txt'");
  CHECK_THAT(e.what(), Contains("a readable file") && Contains("No such file or directory"));
  p.set("corpus", o.corpus);
  CHECK(config_error([&] { make_task("text", p); }).key() == "corpus");

  // Empty file.
  write(dir.path / "empty.txt", "");
  o.corpus = (dir.path / "empty.txt").string();
  e = config_error([&] { TextCorpus::open(o); });
  CHECK(e.key() == "corpus");
  CHECK(e.allowed() == "a non-empty file");

  // Not text in char mode (a byte file is fine in byte mode).
  std::string binary;
  for (int i = 0; i < 4000; ++i) binary.push_back(static_cast<char>((i * 37) % 256));
  write(dir.path / "data.bin", binary);
  o.corpus = (dir.path / "data.bin").string();
  e = config_error([&] { TextCorpus::open(o); });
  CHECK(e.key() == "corpus");
  CHECK_THAT(e.allowed(), Contains("a UTF-8 text file with unit = char (NUL at byte 0)") &&
                              Contains("unit = byte reads any file"));
  write(dir.path / "latin1.txt", std::string(200, 'a') + "caf\xE9 " + std::string(200, 'b'));
  o.corpus = (dir.path / "latin1.txt").string();
  CHECK_THAT(config_error([&] { TextCorpus::open(o); }).allowed(), Contains("invalid UTF-8 at byte 203"));
  o.corpus = (dir.path / "data.bin").string();
  o.unit = TextUnit::byte;
  CHECK(TextCorpus::open(o).vocab_size() == 257);
  o.unit = TextUnit::character;

  // Fractions.
  write(dir.path / "text.txt", std::string(1000, 'x') + std::string(1000, 'y'));
  o.corpus = (dir.path / "text.txt").string();
  o.valid_fraction = 0.0;
  CHECK(config_error([&] { TextCorpus::open(o); }).key() == "valid_fraction");
  o.valid_fraction = 0.6;
  o.test_fraction = 0.4;
  e = config_error([&] { TextCorpus::open(o); });
  CHECK(e.key() == "test_fraction");
  CHECK_THAT(e.allowed(), Contains("(0, 1 - valid_fraction = 0.4"));
  o.test_fraction = 1.0;
  CHECK(config_error([&] { TextCorpus::open(o); }).key() == "test_fraction");
  o.valid_fraction.reset();
  o.test_fraction.reset();
  // A file too short for any split.
  write(dir.path / "short.txt", "abcdefghij");
  o.corpus = (dir.path / "short.txt").string();
  e = config_error([&] { TextCorpus::open(o); });
  CHECK(e.key() == "corpus");
  CHECK_THAT(e.allowed(), Contains("split into 8 / 1 / 1 (train / valid / test)"));
  // The KJV takes no fractions.
  o.corpus = "kjv";
  o.test_fraction = 0.1;
  e = config_error([&] { TextCorpus::open(o); });
  CHECK(e.key() == "test_fraction");
  CHECK_THAT(e.allowed(), Contains("split by book"));
  p.set("corpus", "kjv");
  p.set("valid_fraction", "0.2");
  CHECK(config_error([&] { make_task("text", p); }).key() == "valid_fraction");
}

TEST_CASE("a split smaller than one window is refused naming the key that makes it small", "[tasks][text][errors]") {
  seqlab::test::TempDir dir("seqlab_text_window");
  write(dir.path / "text.txt", std::string(2000, 'a'));  // 1800 / 100 / 100 symbols by default
  TaskParams p;
  p.set("corpus", (dir.path / "text.txt").string());
  p.set("seq_len", "99");
  CHECK_NOTHROW(make_task("text", p));
  p.set("seq_len", "100");
  ConfigError e = config_error([&] { make_task("text", p); });
  CHECK(e.key() == "valid_fraction");
  CHECK(e.value() == "0.050000");
  p.set("valid_fraction", "0.1");
  e = config_error([&] { make_task("text", p); });
  CHECK(e.key() == "test_fraction");
  CHECK_THAT(e.allowed(), Contains("the test split of") && Contains("has 100 symbols, fewer than one window "
                                                                     "of seq_len + 1 = 101"));
  p.set("valid_fraction", "0.45");
  p.set("test_fraction", "0.5");
  p.set("seq_len", "150");
  CHECK(config_error([&] { make_task("text", p); }).key() == "corpus");  // train: 100 symbols
  p.set("seq_len", "0");
  CHECK(config_error([&] { make_task("text", p); }).key() == "seq_len");
  p.set("seq_len", "8");
  p.set("unit", "word");
  CHECK(config_error([&] { make_task("text", p); }).key() == "unit");
  p.set("unit", "char");
  p.set("split", "dev");
  CHECK(config_error([&] { make_task("text", p); }).key() == "split");
  // Given splits (the KJV, a directory): the key is seq_len.
  const TextCorpus c(TextSplits{"abcdefgh", "abcdefgh", "abc"}, TextUnit::character);
  e = config_error([&] { c.require_window(3); });
  CHECK(e.key() == "seq_len");
  CHECK(e.allowed().rfind("at most 2: the test split", 0) == 0);
  CHECK_NOTHROW(c.require_window(2));
}

// --- checked split files and the cache --------------------------------------------------------------

TEST_CASE("split files are checked by size and checksum and a tampered file is refused", "[tasks][text][cache]") {
  seqlab::test::TempDir dir("seqlab_text_checked");
  const TextSplits s = split_kjv(excerpt());
  const std::array<const std::string*, 3> text = {&s.train, &s.valid, &s.test};
  const std::array<const char*, 3> names = {"train.txt", "valid.txt", "test.txt"};
  std::array<SplitChecksum, 3> want{};
  for (std::size_t i = 0; i < 3; ++i) {
    write_file_atomic((dir.path / names[i]).string(), *text[i]);
    want[i] = {text[i]->size(), fnv1a64(*text[i])};
  }
  const TextSplits back = read_checked_splits(dir.path.string(), want, "excerpt");
  CHECK(back.train == s.train);
  CHECK(back.valid == s.valid);
  CHECK(back.test == s.test);

  // One character changed, same size: the checksum refuses it.
  std::string changed = s.valid;
  changed[10] = changed[10] == 'e' ? 'a' : 'e';
  write((dir.path / "valid.txt"), changed);
  ConfigError e = config_error([&] { read_checked_splits(dir.path.string(), want, "excerpt"); });
  CHECK(e.key() == "corpus");
  CHECK(e.value() == "'excerpt'");
  CHECK_THAT(e.allowed(), Contains((dir.path / "valid.txt").string() + " has " + std::to_string(s.valid.size()) +
                                   " bytes and fnv1a64 0x") &&
                              Contains("delete " + dir.path.string() + " and it is prepared again"));
  // Truncated: the size refuses it before reading.
  write((dir.path / "valid.txt"), s.valid.substr(0, 100));
  CHECK_THAT(config_error([&] { read_checked_splits(dir.path.string(), want, "excerpt"); }).allowed(),
             Contains("valid.txt has 100 bytes, expected " + std::to_string(s.valid.size())));
  // Missing.
  fs::remove(dir.path / "valid.txt");
  CHECK_THAT(config_error([&] { read_checked_splits(dir.path.string(), want, "excerpt"); }).allowed(),
             Contains("valid.txt cannot be read"));
}

TEST_CASE("the cache directory follows SEQLAB_CACHE_DIR, XDG_CACHE_HOME, HOME", "[tasks][text][cache]") {
  {
    ScopedEnv a("SEQLAB_CACHE_DIR", std::string("/data/seqlab-cache"));
    ScopedEnv b("XDG_CACHE_HOME", std::string("/xdg"));
    CHECK(text_cache_dir() == "/data/seqlab-cache");
  }
  {
    ScopedEnv a("SEQLAB_CACHE_DIR", std::string(""));
    ScopedEnv b("XDG_CACHE_HOME", std::string("/xdg"));
    CHECK(text_cache_dir() == "/xdg/seqlab");
  }
  {
    ScopedEnv a("SEQLAB_CACHE_DIR", std::nullopt);
    ScopedEnv b("XDG_CACHE_HOME", std::string("relative/is/ignored"));
    ScopedEnv c("HOME", std::string("/home/u"));
    CHECK(text_cache_dir() == "/home/u/.cache/seqlab");
  }
  {
    ScopedEnv a("SEQLAB_CACHE_DIR", std::nullopt);
    ScopedEnv b("XDG_CACHE_HOME", std::nullopt);
    ScopedEnv c("HOME", std::nullopt);
    CHECK_THROWS_WITH(text_cache_dir(), Contains("set SEQLAB_CACHE_DIR"));
    // As the corpus: a ConfigError for kjv.
    CHECK(config_error([] { load_kjv(); }).key() == "corpus");
  }
}

TEST_CASE("a missing bible program is an error naming the Debian packages", "[tasks][text][kjv][errors]") {
  seqlab::test::TempDir dir("seqlab_text_nobible");
  ConfigError e = config_error([&] { load_kjv(dir.path.string(), "/nonexistent/bin/bible"); });
  CHECK(e.key() == "corpus");
  CHECK(e.value() == "'kjv'");
  CHECK_THAT(e.allowed(), Contains("install the Debian packages bible-kjv and bible-kjv-text (./run_all.sh deps)") &&
                              Contains("No such file or directory"));
  // A program that fails: its status and message are reported; nothing is written.
  const fs::path fake = dir.path / "bible";
  write(fake, "#!/bin/sh\necho 'Cannot open data file bible.data' >&2\nexit 3\n");
  fs::permissions(fake, fs::perms::owner_all);
  e = config_error([&] { load_kjv(dir.path.string(), fake.string()); });
  CHECK_THAT(e.allowed(), Contains("exited with status 3 (Cannot open data file bible.data)"));
  // A program that prints another text: refused by the split constants, nothing is written.
  write(fake, "#!/bin/sh\nprintf '\\nGenesis 1\\n\\n  1 In the beginning.\\n\\nRomans 1\\n\\n  1 Paul.\\n"
              "\\nJude 1\\n\\n  1 Jude.\\n'\n");
  e = config_error([&] { load_kjv(dir.path.string(), fake.string()); });
  CHECK_THAT(e.allowed(), Contains("printed a train split of 18 characters"));
  CHECK_FALSE(fs::exists(dir.path / "kjv" / "train.txt"));
}

// --- the KJV from the real `bible` (Debian's bible-kjv, bible-kjv-text: run_all.sh PACKAGES) ------

TEST_CASE("the KJV prepared from the bible program matches the split constants", "[tasks][text][kjv]") {
  seqlab::test::TempDir dir("seqlab_text_kjv");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string kjv = prepare_kjv(dir.path.string());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  WARN("preparing the KJV took " << ms << " ms (wall clock; a loaded machine makes it longer)");
  CHECK(kjv == dir.path.string() + "/kjv");
  const std::array<const char*, 3> names = {"train.txt", "valid.txt", "test.txt"};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::string t = read_file(kjv + "/" + names[i]);
    INFO(names[i]);
    CHECK(t.size() == kjv_splits()[i].characters);
    CHECK(fnv1a64(t) == kjv_splits()[i].fnv1a64);
  }
  // The cache is used as it is: no program is run once the files exist.
  const auto t1 = std::chrono::steady_clock::now();
  const TextSplits s = load_kjv(dir.path.string(), "/nonexistent/bin/bible");
  const TextCorpus corpus(s, TextUnit::character, "kjv");
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  WARN("loading it from the cache took " << load_ms << " ms (wall clock; vocab_size " << corpus.vocab_size() << ")");
  CHECK(s.train.rfind("In the beginning God created the heaven and the earth.\n", 0) == 0);
  CHECK(s.valid.rfind("Paul, a servant of Jesus Christ, called to be an apostle", 0) == 0);
  CHECK(s.test.rfind("Paul, an apostle of Jesus Christ by the will of God, and Timotheus", 0) == 0);
  // Every verse of the excerpt is a line of the prepared split of its book.
  const TextSplits ex = split_kjv(excerpt());
  const std::array<std::pair<const std::string*, const std::string*>, 3> parts = {
      {{&ex.train, &s.train}, {&ex.valid, &s.valid}, {&ex.test, &s.test}}};
  for (const auto& [part, whole] : parts) {
    std::istringstream in(*part);
    for (std::string line; std::getline(in, line);) CHECK(whole->find(line + "\n") != std::string::npos);
  }
  // A tampered cache file is refused at load; a deleted one is prepared again.
  std::string changed = s.test;
  changed[0] = 'p';
  write(kjv + "/test.txt", changed);
  const ConfigError e = config_error([&] { load_kjv(dir.path.string()); });
  CHECK(e.key() == "corpus");
  CHECK_THAT(e.allowed(), Contains("test.txt has 208167 bytes and fnv1a64"));
  fs::remove(kjv + "/test.txt");
  CHECK(load_kjv(dir.path.string()).test == s.test);
}

TEST_CASE("two processes preparing the KJV at once both succeed", "[tasks][text][kjv]") {
  seqlab::test::TempDir dir("seqlab_text_race");
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int status = 1;
    try {
      status = load_kjv(dir.path.string()).test.size() == kjv_splits()[2].characters ? 0 : 1;
    } catch (...) {
    }
    _exit(status);
  }
  const TextSplits s = load_kjv(dir.path.string());
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(s.train.size() == kjv_splits()[0].characters);
  CHECK_NOTHROW(load_kjv(dir.path.string()));
  std::size_t files = 0;
  for (const auto& f : fs::directory_iterator(dir.path / "kjv")) {
    INFO(f.path());
    CHECK(f.path().extension() == ".txt");
    CHECK(f.path().filename().string()[0] != '.');  // no temporary file left
    ++files;
  }
  CHECK(files == 3);
}

TEST_CASE("lib/README.md states the KJV's split sizes, vocabulary and unigram baseline as computed", "[tasks][text][kjv]") {
  seqlab::test::TempDir dir("seqlab_text_readme");
  const std::string readme = read_file(std::string(SEQLAB_SOURCE_DIR) + "/lib/README.md");
  const std::string title = "## Real text: the KJV corpus and --corpus";
  const auto at = readme.find("\n" + title + "\n");
  REQUIRE(at != std::string::npos);
  CHECK(readme.find("\n## ", at + 1) == std::string::npos);  // the last section
  // The section with every run of blanks and line breaks as one space (prose wraps anywhere).
  std::string section;
  for (const char ch : readme.substr(at)) {
    const bool blank = ch == ' ' || ch == '\n';
    if (!blank || section.empty() || section.back() != ' ') section += blank ? ' ' : ch;
  }
  std::vector<std::string> expected;

  expected.push_back("(" + thousands(run_bible().size()) + " bytes)");
  TextCorpusOptions o;
  o.cache_dir = dir.path.string();
  const TextCorpus c = TextCorpus::open(o);
  std::size_t total = 0;
  for (const TextSplit s : {TextSplit::train, TextSplit::valid, TextSplit::test}) total += c.split_size(s);
  std::size_t i = 0;
  for (const TextSplit s : {TextSplit::train, TextSplit::valid, TextSplit::test}) {
    const KjvSplit& k = kjv_splits()[i++];
    const int books = book_index(k.last_book) - book_index(k.first_book) + 1;
    const std::size_t n = c.split_size(s);
    CHECK(n == k.characters);  // ASCII: characters = bytes
    expected.push_back("| " + text_split_name(s) + " | " + k.first_book + "–" + k.last_book + " (" +
                       std::to_string(books) + " books) | " + thousands(n) + " | " +
                       fixed(100.0 * double(n) / double(total), 1) + " % |");
  }
  expected.push_back("vocab_size = " + std::to_string(c.vocab_size()) + " (" + std::to_string(c.vocab_size() - 1) +
                     " characters of the train split plus the unknown id)");
  expected.push_back("Unknown characters: " + std::to_string(c.unknown_count(TextSplit::valid)) + " in valid, " +
                     std::to_string(c.unknown_count(TextSplit::test)) + " in test.");
  for (const TextSplit s : {TextSplit::valid, TextSplit::test}) {
    const double l = c.unigram_loss(s);
    expected.push_back("| " + text_split_name(s) + " | " + thousands(c.split_size(s) - 1) + " | " + fixed(l, 3) +
                       " | " + fixed(bits_per_character(l), 3) + " | " + fixed(perplexity(l), 2) + " | " +
                       fixed(100.0 * c.unigram_accuracy(s), 1) + " % |");
  }
  for (const auto& line : expected) {
    INFO("lib/README.md section '" << title << "' should contain: " << line);
    CHECK(section.find(line) != std::string::npos);
  }
}
