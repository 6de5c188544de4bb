// Language modelling on real text (tasks/text.hpp): symbols, the corpus and its vocabulary,
// training windows, the deterministic evaluation windows, and the KJV prepared from Debian's
// `bible` into the cache.
#include "seqlab/tasks/text.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "seqlab/core/file_io.hpp"
#include "seqlab/core/hash.hpp"
#include "seqlab/models/model_config.hpp"  // ConfigError

extern char** environ;

namespace fs = std::filesystem;

namespace seqlab {

namespace {

std::size_t index_of(TextSplit s) { return static_cast<std::size_t>(s); }
constexpr std::array<TextSplit, 3> kSplits = {TextSplit::train, TextSplit::valid, TextSplit::test};

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// The split files of a corpus directory (prepared or given), train / valid / test.
std::array<std::string, 3> split_paths(const std::string& dir) {
  return {dir + "/train.txt", dir + "/valid.txt", dir + "/test.txt"};
}

std::string hex64(std::uint64_t h) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Strict UTF-8 (RFC 3629; Unicode 15 Table 3-7, well-formed byte sequences): decodes
// bytes[begin, end) into out[0..n) if out is not null (room for end - begin values). Returns the
// number n of code points. Throws std::invalid_argument naming the byte offset of the first bad
// sequence or NUL.
std::size_t decode_utf8(const std::string& bytes, std::size_t begin, std::size_t end,
                        std::int32_t* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t n = 0;
  std::size_t i = begin;
  while (i < end) {
    const unsigned char c = p[i];
    if (c < 0x80) {  // ASCII, the common case
      if (c == 0) throw std::invalid_argument("NUL at byte " + std::to_string(i));
      if (out != nullptr) out[n] = c;
      ++n;
      ++i;
      continue;
    }
    std::int32_t cp;
    std::size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      cp = c & 0x1F;
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      cp = c & 0x0F;
      len = 3;
      if (c == 0xE0) lo = 0xA0;       // no overlong forms
      else if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      cp = c & 0x07;
      len = 4;
      if (c == 0xF0) lo = 0x90;       // no overlong forms
      else if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
      throw std::invalid_argument("invalid UTF-8 at byte " + std::to_string(i));
    }
    if (len > end - i) throw std::invalid_argument("invalid UTF-8 at byte " + std::to_string(i));
    for (std::size_t k = 1; k < len; ++k) {
      const unsigned char b = p[i + k];
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF))
        throw std::invalid_argument("invalid UTF-8 at byte " + std::to_string(i));
      cp = (cp << 6) | (b & 0x3F);
    }
    if (out != nullptr) out[n] = cp;
    ++n;
    i += len;
  }
  return n;
}

// Byte offset of code point `k` of valid UTF-8 bytes[begin, ...) (counts the bytes that are not
// continuation bytes 10xxxxxx).
std::size_t utf8_offset(const std::string& bytes, std::size_t begin, std::size_t k) {
  std::size_t i = begin;
  for (std::size_t seen = 0; i < bytes.size(); ++i) {
    if ((static_cast<unsigned char>(bytes[i]) & 0xC0) != 0x80) {
      if (seen == k) return i;
      ++seen;
    }
  }
  return i;
}

std::vector<std::int32_t> symbols_of(const std::string& bytes, std::size_t begin, std::size_t end,
                                     TextUnit unit) {
  std::vector<std::int32_t> out(end - begin);  // an upper bound: a code point is >= 1 byte
  if (unit == TextUnit::byte) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + begin;
    std::copy(p, p + (end - begin), out.begin());
  } else {
    out.resize(decode_utf8(bytes, begin, end, out.data()));
    out.shrink_to_fit();
  }
  return out;
}

// Throws ConfigError for a split fraction given with a corpus that is split otherwise (`what`).
void reject_fractions(const TextCorpusOptions& o, const std::string& what) {
  if (!o.valid_fraction && !o.test_fraction) return;
  throw ConfigError(o.valid_fraction ? "valid_fraction" : "test_fraction",
                    std::to_string(o.valid_fraction ? *o.valid_fraction : *o.test_fraction),
                    "no value with " + what + "; the fractions split a corpus file");
}

}  // namespace

// --- names, symbols, report helpers -----------------------------------------------------------------

TextUnit parse_text_unit(const std::string& name) {
  if (name == "char") return TextUnit::character;
  if (name == "byte") return TextUnit::byte;
  throw ConfigError("unit", quoted(name), "one of char, byte");
}

std::string text_unit_name(TextUnit unit) { return unit == TextUnit::byte ? "byte" : "char"; }

std::string text_split_name(TextSplit split) {
  switch (split) {
    case TextSplit::train: return "train";
    case TextSplit::valid: return "valid";
    case TextSplit::test: return "test";
  }
  return "?";
}

TextSplit parse_text_split(const std::string& name, const std::string& key) {
  for (const TextSplit s : kSplits)
    if (name == text_split_name(s)) return s;
  throw ConfigError(key, quoted(name), "one of train, valid, test");
}

std::vector<std::int32_t> text_symbols(const std::string& bytes, TextUnit unit) {
  return symbols_of(bytes, 0, bytes.size(), unit);
}

double bits_per_character(double nats_per_symbol) { return nats_per_symbol / std::log(2.0); }

double perplexity(double nats_per_symbol) { return std::exp(nats_per_symbol); }

// --- TextCorpus -------------------------------------------------------------------------------------

TextCorpus::TextCorpus(std::array<std::vector<std::int32_t>, 3> symbols, TextUnit unit,
                       std::string source, std::array<double, 2> fractions)
    : source_(std::move(source)), unit_(unit), fractions_(fractions), ids_(std::move(symbols)) {
  for (const TextSplit s : kSplits)
    if (ids_[index_of(s)].size() < 2)
      throw std::invalid_argument("TextCorpus: the " + text_split_name(s) + " split of " + source_ +
                                  " has " + std::to_string(ids_[index_of(s)].size()) +
                                  " symbols; each split needs >= 2");
  // Vocabulary: the distinct train symbols in increasing order. id_of_ is dense over every symbol
  // of the corpus, so mapping a split is one table lookup per symbol.
  std::int32_t max_symbol = 0;
  for (const auto& split : ids_)
    for (const std::int32_t x : split) max_symbol = std::max(max_symbol, x);
  std::vector<char> present(static_cast<std::size_t>(max_symbol) + 1, 0);
  for (const std::int32_t x : ids_[index_of(TextSplit::train)]) present[static_cast<std::size_t>(x)] = 1;
  for (std::size_t x = 0; x < present.size(); ++x)
    if (present[x]) symbols_.push_back(static_cast<std::int32_t>(x));
  id_of_.assign(present.size(), unknown_id());
  for (std::size_t i = 0; i < symbols_.size(); ++i)
    id_of_[static_cast<std::size_t>(symbols_[i])] = static_cast<std::int32_t>(i);
  for (auto& split : ids_)
    for (std::int32_t& x : split) x = id_of_[static_cast<std::size_t>(x)];
  std::vector<std::size_t> count(vocab_size(), 0);
  for (const std::int32_t x : ids_[index_of(TextSplit::train)]) ++count[static_cast<std::size_t>(x)];
  train_count_.assign(count.begin(), count.end());
}

TextCorpus::TextCorpus(const TextSplits& splits, TextUnit unit, std::string source)
    : TextCorpus(
          [&] {
            std::array<std::vector<std::int32_t>, 3> sym;
            const std::array<const std::string*, 3> text = {&splits.train, &splits.valid,
                                                            &splits.test};
            for (const TextSplit s : kSplits) {
              try {
                sym[index_of(s)] = text_symbols(*text[index_of(s)], unit);
              } catch (const std::invalid_argument& e) {
                throw std::invalid_argument("TextCorpus: the " + text_split_name(s) + " split of " +
                                            source + " is not UTF-8 text: " + e.what());
              }
            }
            return sym;
          }(),
          unit, source, {0.0, 0.0}) {}

TextCorpus TextCorpus::open(const TextCorpusOptions& o) {
  if (o.corpus == "kjv") {
    reject_fractions(o, "corpus = kjv (the KJV is split by book, see README)");
    return TextCorpus(load_kjv(o.cache_dir, o.bible_program), o.unit, "kjv");
  }
  if (o.corpus.empty())
    throw ConfigError("corpus", "''", "kjv or the path of a UTF-8 (unit = char) or any (unit = byte) file");
  std::error_code ec;
  if (fs::is_directory(o.corpus, ec)) {  // train.txt, valid.txt, test.txt
    reject_fractions(o, "a corpus directory (its files are the splits)");
    TextSplits splits;
    const auto paths = split_paths(o.corpus);
    const std::array<std::string*, 3> text = {&splits.train, &splits.valid, &splits.test};
    for (std::size_t i = 0; i < 3; ++i) {
      try {
        *text[i] = read_file(paths[i]);
      } catch (const std::runtime_error& e) {
        throw ConfigError("corpus", quoted(o.corpus),
                          std::string("a directory holding train.txt, valid.txt and test.txt (") +
                              e.what() + ")");
      }
    }
    try {
      return TextCorpus(splits, o.unit, o.corpus);
    } catch (const std::invalid_argument& e) {
      throw ConfigError("corpus", quoted(o.corpus),
                        std::string("a directory of three splits of text (") + e.what() +
                            (o.unit == TextUnit::character ? "; unit = byte reads any file)" : ")"));
    }
  }
  const double vf = o.valid_fraction.value_or(kDefaultSplitFraction);
  const double tf = o.test_fraction.value_or(kDefaultSplitFraction);
  if (!(vf > 0.0 && vf < 1.0)) throw ConfigError("valid_fraction", std::to_string(vf), "a real in (0, 1)");
  if (!(tf > 0.0 && tf < 1.0)) throw ConfigError("test_fraction", std::to_string(tf), "a real in (0, 1)");
  if (!(vf + tf < 1.0))
    throw ConfigError("test_fraction", std::to_string(tf),
                      "a real in (0, 1 - valid_fraction = " + std::to_string(1.0 - vf) + ")");
  std::string bytes;
  try {
    bytes = read_file(o.corpus);
  } catch (const std::runtime_error& e) {
    throw ConfigError("corpus", quoted(o.corpus),
                      std::string("kjv or a readable file (") + e.what() + ")");
  }
  if (bytes.empty()) throw ConfigError("corpus", quoted(o.corpus), "a non-empty file");
  std::size_t n = bytes.size();
  if (o.unit == TextUnit::character) {
    try {
      n = decode_utf8(bytes, 0, bytes.size(), nullptr);
    } catch (const std::invalid_argument& e) {
      throw ConfigError("corpus", quoted(o.corpus),
                        std::string("a UTF-8 text file with unit = char (") + e.what() +
                            "); unit = byte reads any file");
    }
  }
  const auto count = [n](double f) {
    return static_cast<std::size_t>(std::llround(f * static_cast<double>(n)));
  };
  const std::size_t n_valid = count(vf), n_test = count(tf);
  const std::size_t n_train = n > n_valid + n_test ? n - n_valid - n_test : 0;
  if (n_train < 2 || n_valid < 2 || n_test < 2)
    throw ConfigError("corpus", quoted(o.corpus),
                      "a file whose splits hold >= 2 symbols each: its " + std::to_string(n) + " " +
                          text_unit_name(o.unit) + " symbols split into " + std::to_string(n_train) +
                          " / " + std::to_string(n_valid) + " / " + std::to_string(n_test) +
                          " (train / valid / test)");
  // Symbol boundaries as byte offsets (the same for unit = byte).
  std::size_t b1 = n_train, b2 = n_train + n_valid;
  if (o.unit == TextUnit::character) {
    b1 = utf8_offset(bytes, 0, n_train);
    b2 = utf8_offset(bytes, b1, n_valid);
  }
  std::array<std::vector<std::int32_t>, 3> sym = {symbols_of(bytes, 0, b1, o.unit),
                                                  symbols_of(bytes, b1, b2, o.unit),
                                                  symbols_of(bytes, b2, bytes.size(), o.unit)};
  bytes.clear();
  bytes.shrink_to_fit();
  return TextCorpus(std::move(sym), o.unit, o.corpus, {vf, tf});
}

std::int32_t TextCorpus::id(std::int32_t symbol) const {
  if (symbol < 0 || static_cast<std::size_t>(symbol) >= id_of_.size()) return unknown_id();
  return id_of_[static_cast<std::size_t>(symbol)];
}

std::int32_t TextCorpus::symbol(std::int32_t i) const {
  if (i < 0 || i >= unknown_id())
    throw std::out_of_range("TextCorpus::symbol: id " + std::to_string(i) + " is not in [0, " +
                            std::to_string(unknown_id()) + ") (the train split's symbols)");
  return symbols_[static_cast<std::size_t>(i)];
}

const std::vector<std::int32_t>& TextCorpus::ids(TextSplit split) const { return ids_[index_of(split)]; }

std::size_t TextCorpus::unknown_count(TextSplit split) const {
  const auto& v = ids(split);
  return static_cast<std::size_t>(std::count(v.begin(), v.end(), unknown_id()));
}

void TextCorpus::require_window(std::size_t seq_len) const {
  for (const TextSplit s : kSplits) {
    const std::size_t S = split_size(s);
    if (S >= seq_len + 1) continue;
    const std::string what = "the " + text_split_name(s) + " split of " + source_ + " has " +
                             std::to_string(S) + " symbols, fewer than one window of seq_len + 1 = " +
                             std::to_string(seq_len + 1);
    if (fractions_[0] == 0.0)
      throw ConfigError("seq_len", std::to_string(seq_len), "at most " + std::to_string(S - 1) + ": " + what);
    if (s == TextSplit::train)
      throw ConfigError("corpus", quoted(source_),
                        "a longer file or smaller valid_fraction / test_fraction: " + what);
    const bool valid = s == TextSplit::valid;
    throw ConfigError(valid ? "valid_fraction" : "test_fraction", std::to_string(fractions_[valid ? 0 : 1]),
                      "a larger fraction (or a longer file): " + what);
  }
}

TokenBatch TextCorpus::sample(std::size_t batch, std::size_t seq_len, Rng& rng, TextSplit split) const {
  if (batch == 0) throw std::invalid_argument("TextCorpus::sample: batch must be >= 1, got 0");
  if (seq_len == 0) throw std::invalid_argument("TextCorpus::sample: seq_len must be >= 1, got 0");
  const std::vector<std::int32_t>& v = ids(split);
  if (v.size() < seq_len + 1)
    throw std::invalid_argument("TextCorpus::sample: seq_len must be <= " + std::to_string(v.size() - 1) +
                                " (the " + text_split_name(split) + " split's symbols - 1), got " +
                                std::to_string(seq_len));
  TokenBatch out{IndexTensor2::from_shape({batch, seq_len}), IndexTensor2::from_shape({batch, seq_len})};
  const std::uint64_t n_offsets = v.size() - seq_len;
  for (std::size_t b = 0; b < batch; ++b) {
    const std::size_t o = static_cast<std::size_t>(rng.uniform_int(n_offsets));
    std::copy_n(v.data() + o, seq_len, out.inputs.data() + b * seq_len);
    std::copy_n(v.data() + o + 1, seq_len, out.targets.data() + b * seq_len);
  }
  return out;
}

std::size_t TextCorpus::scored_targets(TextSplit split, std::size_t max_tokens) const {
  const std::size_t all = split_size(split) - 1;
  return max_tokens == 0 ? all : std::min(max_tokens, all);
}

double TextCorpus::unigram_loss(TextSplit split, std::size_t max_tokens) const {
  const std::vector<std::int32_t>& v = ids(split);
  const std::size_t N = scored_targets(split, max_tokens);
  std::vector<double> n_target(vocab_size(), 0.0);
  for (std::size_t j = 1; j <= N; ++j) n_target[static_cast<std::size_t>(v[j])] += 1.0;
  const double denom =
      static_cast<double>(split_size(TextSplit::train)) + static_cast<double>(vocab_size());
  double sum = 0.0;
  for (std::size_t i = 0; i < n_target.size(); ++i)
    if (n_target[i] > 0) sum -= n_target[i] * std::log((train_count_[i] + 1.0) / denom);
  return sum / static_cast<double>(N);
}

double TextCorpus::unigram_accuracy(TextSplit split, std::size_t max_tokens) const {
  const std::vector<std::int32_t>& v = ids(split);
  const std::size_t N = scored_targets(split, max_tokens);
  const auto best = static_cast<std::int32_t>(
      std::max_element(train_count_.begin(), train_count_.end()) - train_count_.begin());
  const auto hits = std::count(v.begin() + 1, v.begin() + 1 + static_cast<std::ptrdiff_t>(N), best);
  return static_cast<double>(hits) / static_cast<double>(N);
}

// --- TextEvaluation ---------------------------------------------------------------------------------

TextEvaluation::TextEvaluation(std::shared_ptr<const TextCorpus> corpus, TextSplit split,
                               std::size_t window, std::size_t stride, std::size_t max_tokens,
                               std::size_t batch)
    : corpus_(std::move(corpus)), split_(split), window_(window), stride_(stride), batch_(batch) {
  if (!corpus_) throw std::invalid_argument("TextEvaluation: corpus is null");
  const std::size_t S = corpus_->split_size(split);
  if (window < 1 || window + 1 > S)
    throw std::invalid_argument("TextEvaluation: window = " + std::to_string(window) +
                                ": allowed an integer in [1, " + std::to_string(S - 1) + "] (the " +
                                text_split_name(split) + " split's " + std::to_string(S) +
                                " symbols - 1)");
  if (stride < 1 || stride > window)
    throw std::invalid_argument("TextEvaluation: stride = " + std::to_string(stride) +
                                ": allowed an integer in [1, window = " + std::to_string(window) + "]");
  if (batch < 1) throw std::invalid_argument("TextEvaluation: batch = 0: allowed an integer >= 1");
  n_scored_ = max_tokens == 0 ? S - 1 : std::min(max_tokens, S - 1);
  n_windows_ = n_scored_ > window ? 1 + (n_scored_ - window + stride - 1) / stride : 1;
}

TextEvaluation TextEvaluation::non_overlapping(std::shared_ptr<const TextCorpus> corpus, TextSplit split,
                                               std::size_t window, std::size_t max_tokens,
                                               std::size_t batch) {
  return TextEvaluation(std::move(corpus), split, window, window, max_tokens, batch);
}

TextEvaluation TextEvaluation::sliding(std::shared_ptr<const TextCorpus> corpus, TextSplit split,
                                       std::size_t window, std::size_t stride, std::size_t max_tokens,
                                       std::size_t batch) {
  return TextEvaluation(std::move(corpus), split, window, stride, max_tokens, batch);
}

std::size_t TextEvaluation::window_end(std::size_t k) const {
  return std::min(window_ + k * stride_, std::max(n_scored_, window_));
}

std::size_t TextEvaluation::window_start(std::size_t k) const {
  if (k >= n_windows_)
    throw std::out_of_range("TextEvaluation::window_start: window " + std::to_string(k) +
                            " of " + std::to_string(n_windows_));
  return window_end(k) - window_;
}

std::pair<std::size_t, std::size_t> TextEvaluation::scored_positions(std::size_t k) const {
  const std::size_t s = window_start(k);  // checks k
  const std::size_t prev = k == 0 ? 0 : window_end(k - 1);
  return {prev - s, std::min(window_end(k), n_scored_) - s};
}

TaskBatch TextEvaluation::chunk(std::size_t i) const {
  if (i >= n_chunks())
    throw std::out_of_range("TextEvaluation::chunk: chunk " + std::to_string(i) + " of " +
                            std::to_string(n_chunks()));
  const std::size_t first = i * batch_, b = std::min(batch_, n_windows_ - first), L = window_;
  const std::vector<std::int32_t>& v = corpus_->ids(split_);
  TaskBatch out;
  out.tokens = IndexTensor2::from_shape({b, L});
  out.targets = IndexTensor2::from_shape({b, L});
  for (std::size_t r = 0; r < b; ++r) {
    const std::size_t k = first + r, s = window_start(k);
    const auto [lo, hi] = scored_positions(k);
    std::copy_n(v.data() + s, L, out.tokens.data() + r * L);
    std::int32_t* t = out.targets.data() + r * L;
    std::fill(t, t + lo, kIgnoreTarget);
    std::copy(v.data() + s + lo + 1, v.data() + s + hi + 1, t + lo);
    std::fill(t + hi, t + L, kIgnoreTarget);
  }
  return out;
}

// --- TextTask ---------------------------------------------------------------------------------------

TextTask::TextTask(std::shared_ptr<const TextCorpus> corpus, std::size_t seq_len, TextSplit split)
    : corpus_(std::move(corpus)), seq_len_(seq_len), split_(split) {
  if (!corpus_) throw std::invalid_argument("TextTask: corpus is null");
  if (seq_len == 0) throw std::invalid_argument("TextTask: seq_len must be >= 1, got 0");
  corpus_->require_window(seq_len);
  spec_.input = "embedding";
  spec_.vocab_size = corpus_->vocab_size();
  spec_.seq_len = seq_len;
  spec_.target = "classes";
  spec_.output_size = corpus_->vocab_size();
  spec_.head = "per_position";
  spec_.padded = false;
  spec_.baseline_loss = corpus_->unigram_loss(TextSplit::test);
  spec_.baseline_accuracy = corpus_->unigram_accuracy(TextSplit::test);
}

TaskBatch TextTask::sample(std::size_t batch, Rng& rng) const {
  TokenBatch b = corpus_->sample(batch, seq_len_, rng, split_);
  TaskBatch out;
  out.tokens = std::move(b.inputs);
  out.targets = std::move(b.targets);
  return out;
}

// --- the KJV ----------------------------------------------------------------------------------------

namespace {

const char* const kInstallHint =
    "install the Debian packages bible-kjv and bible-kjv-text (./run_all.sh deps)";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

[[noreturn]] void kjv_error(const std::string& allowed) {
  throw ConfigError("corpus", "'kjv'", allowed);
}

// Reads fd until EOF into out (EINTR retried). Returns false at EOF.
bool drain(int fd, std::string& out) {
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    out.append(buf, static_cast<std::size_t>(n));
    return true;
  }
}

}  // namespace

std::string text_cache_dir() {
  const std::string own = env("SEQLAB_CACHE_DIR");
  if (!own.empty()) return own;
  const std::string xdg = env("XDG_CACHE_HOME");
  if (!xdg.empty() && xdg[0] == '/') return xdg + "/seqlab";  // the XDG spec: relative paths are invalid
  const std::string home = env("HOME");
  if (!home.empty()) return home + "/.cache/seqlab";
  throw std::runtime_error(
      "text_cache_dir: none of SEQLAB_CACHE_DIR, XDG_CACHE_HOME, HOME is set; set SEQLAB_CACHE_DIR "
      "to a writable directory");
}

const std::array<const char*, 66>& kjv_books() {
  static const std::array<const char*, 66> books = {
      "Genesis",       "Exodus",          "Leviticus",       "Numbers",         "Deuteronomy",
      "Joshua",        "Judges",          "Ruth",            "1 Samuel",        "2 Samuel",
      "1 Kings",       "2 Kings",         "1 Chronicles",    "2 Chronicles",    "Ezra",
      "Nehemiah",      "Esther",          "Job",             "Psalms",          "Proverbs",
      "Ecclesiastes",  "Song of Solomon", "Isaiah",          "Jeremiah",        "Lamentations",
      "Ezekiel",       "Daniel",          "Hosea",           "Joel",            "Amos",
      "Obadiah",       "Jonah",           "Micah",           "Nahum",           "Habakkuk",
      "Zephaniah",     "Haggai",          "Zechariah",       "Malachi",         "Matthew",
      "Mark",          "Luke",            "John",            "Acts",            "Romans",
      "1 Corinthians", "2 Corinthians",   "Galatians",       "Ephesians",       "Philippians",
      "Colossians",    "1 Thessalonians", "2 Thessalonians", "1 Timothy",       "2 Timothy",
      "Titus",         "Philemon",        "Hebrews",         "James",           "1 Peter",
      "2 Peter",       "1 John",          "2 John",          "3 John",          "Jude",
      "Revelation"};
  return books;
}

const std::array<KjvSplit, 3>& kjv_splits() {
  // Computed by prepare_kjv from bible-kjv / bible-kjv-text 4.38 (Debian 12); the test
  // "the KJV prepared from the bible program matches the split constants" recomputes them.
  static const std::array<KjvSplit, 3> splits = {{
      {"train", "Genesis", "Acts", 3754452, 0x8cf2ed684debee14ULL},
      {"valid", "Romans", "Philippians", 175230, 0xf19950c60fa78a15ULL},
      {"test", "Colossians", "Revelation", 208167, 0xd180cbe8adcca41aULL},
  }};
  return splits;
}

TextSplits split_kjv(const std::string& out) {
  // Book index -> split: the first book of valid and of test (kjv_splits()).
  const auto& books = kjv_books();
  const auto book_index = [&](const std::string& name) -> int {
    for (std::size_t i = 0; i < books.size(); ++i)
      if (name == books[i]) return static_cast<int>(i);
    return -1;
  };
  const int first_valid = book_index(kjv_splits()[1].first_book);
  const int first_test = book_index(kjv_splits()[2].first_book);
  TextSplits s;
  std::string* current = nullptr;
  std::size_t line_no = 0;
  const auto bad = [&](const std::string& line, const std::string& why) {
    throw std::runtime_error("split_kjv: line " + std::to_string(line_no) + " '" + line.substr(0, 80) +
                             "': " + why);
  };
  std::size_t pos = 0;
  while (pos < out.size()) {
    std::size_t end = out.find('\n', pos);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.empty()) continue;
    if (line.size() > 2 && line[0] == ' ' && line[1] == ' ') {  // "  <verse> <text>"
      std::size_t i = 2;
      while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
      if (i == 2 || i >= line.size() || line[i] != ' ') bad(line, "neither a verse nor a chapter header");
      if (current == nullptr) bad(line, "a verse before the first chapter header");
      std::size_t last = line.size();
      while (last > i + 1 && (line[last - 1] == ' ' || line[last - 1] == '\t')) --last;
      current->append(line, i + 1, last - i - 1);
      current->push_back('\n');
      continue;
    }
    // "<Book> <chapter>"
    const std::size_t sp = line.rfind(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() ||
        line.find_first_not_of("0123456789", sp + 1) != std::string::npos)
      bad(line, "neither a verse nor a chapter header");
    const int b = book_index(line.substr(0, sp));
    if (b < 0) bad(line, "a chapter header of an unknown book");
    current = b >= first_test ? &s.test : b >= first_valid ? &s.valid : &s.train;
  }
  return s;
}

std::string run_bible(const std::string& program) {
  // -p /usr/lib: the data directory of bible-kjv-text (by default bible looks in the current
  // directory first). -l10000: no line wrapping (the longest verse has about 530 characters).
  std::string prog = program.empty() ? std::string("bible") : program;
  std::array<std::string, 5> args = {prog, "-p", "/usr/lib", "-l10000", "Gen1:1-Rev22:21"};
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) kjv_error(std::string("a pipe to run bible: ") + std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    kjv_error(std::string("a pipe to run bible: ") + std::strerror(e));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  std::array<char*, 6> argv{};
  for (std::size_t i = 0; i < args.size(); ++i) argv[i] = args[i].data();
  pid_t pid = 0;
  int rc;
  if (program.empty()) {
    rc = posix_spawnp(&pid, "bible", &fa, nullptr, argv.data(), environ);
    if (rc == ENOENT) {  // not on PATH: Debian's location
      prog = "/usr/bin/bible";
      args[0] = prog;
      argv[0] = args[0].data();
      rc = posix_spawn(&pid, prog.c_str(), &fa, nullptr, argv.data(), environ);
    }
  } else {
    rc = posix_spawn(&pid, prog.c_str(), &fa, nullptr, argv.data(), environ);
  }
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    kjv_error(std::string(kInstallHint) + ": cannot run " + (program.empty() ? "bible (PATH, /usr/bin/bible)" : prog) +
              ": " + std::strerror(rc) + "; or give corpus = the path of a text file");
  }
  std::string text, err;
  std::array<pollfd, 2> fds = {pollfd{out_pipe[0], POLLIN, 0}, pollfd{err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      if (!drain(fds[i].fd, i == 0 ? text : err)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    const std::string how = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                              : "was killed by signal " + std::to_string(WTERMSIG(status));
    kjv_error(std::string(kInstallHint) + ": " + prog + " " + how +
              (err.empty() ? std::string() : " (" + err.substr(0, 200) + ")") +
              "; or give corpus = the path of a text file");
  }
  return text;
}

std::string prepare_kjv(const std::string& cache_dir, const std::string& bible_program) {
  // Threads of one process share write_file_atomic's temporary file names (host and pid): one
  // preparation at a time per process. Processes need no lock (identical files, atomic renames).
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  const std::string dir = cache_dir + "/kjv";
  const auto paths = split_paths(dir);
  std::error_code ec;
  bool complete = true;
  for (const auto& p : paths) complete = complete && fs::is_regular_file(p, ec);
  if (complete) return dir;
  fs::create_directories(dir, ec);
  if (ec)
    kjv_error("a writable cache directory (SEQLAB_CACHE_DIR, XDG_CACHE_HOME/seqlab or "
              "HOME/.cache/seqlab): cannot create '" + dir + "': " + ec.message());
  TextSplits s;
  try {
    s = split_kjv(run_bible(bible_program));
  } catch (const std::runtime_error& e) {
    kjv_error(std::string("the output of bible-kjv 4.38 (Debian 12): ") + e.what());
  }
  const std::array<const std::string*, 3> text = {&s.train, &s.valid, &s.test};
  for (std::size_t i = 0; i < 3; ++i) {
    const KjvSplit& want = kjv_splits()[i];
    const std::uint64_t h = fnv1a64(*text[i]);
    if (text[i]->size() != want.characters || h != want.fnv1a64)
      kjv_error("the text of bible-kjv 4.38 (Debian 12): the installed bible printed a " +
                std::string(want.split) + " split of " + std::to_string(text[i]->size()) +
                " characters (fnv1a64 " + hex64(h) + "), expected " + std::to_string(want.characters) +
                " (" + hex64(want.fnv1a64) + "); reinstall the Debian packages bible-kjv and "
                "bible-kjv-text, or give corpus = the path of a text file");
  }
  remove_stale_temp_files(dir);
  try {
    for (std::size_t i = 0; i < 3; ++i) write_file_atomic(paths[i], *text[i]);
  } catch (const std::runtime_error& e) {
    kjv_error(std::string("a writable cache directory (SEQLAB_CACHE_DIR): ") + e.what());
  }
  return dir;
}

TextSplits read_checked_splits(const std::string& dir, const std::array<SplitChecksum, 3>& expected,
                               const std::string& corpus_name) {
  const auto paths = split_paths(dir);
  TextSplits s;
  const std::array<std::string*, 3> text = {&s.train, &s.valid, &s.test};
  for (std::size_t i = 0; i < 3; ++i) {
    std::error_code ec;
    const auto size = fs::file_size(paths[i], ec);
    if (!ec && size == expected[i].bytes) *text[i] = read_file(paths[i], expected[i].bytes);
    const std::uint64_t h = fnv1a64(*text[i]);
    if (ec || size != expected[i].bytes || h != expected[i].fnv1a64) {
      const std::string found =
          ec ? "cannot be read (" + ec.message() + ")"
             : "has " + std::to_string(size) + " bytes" +
                   (size == expected[i].bytes ? " and fnv1a64 " + hex64(h) : std::string());
      throw ConfigError("corpus", quoted(corpus_name),
                        corpus_name + " with intact prepared files: " + paths[i] + " " + found +
                            ", expected " + std::to_string(expected[i].bytes) + " bytes and fnv1a64 " +
                            hex64(expected[i].fnv1a64) + "; delete " + dir +
                            " and it is prepared again");
    }
  }
  return s;
}

TextSplits load_kjv(const std::string& cache_dir, const std::string& bible_program) {
  std::string root = cache_dir;
  if (root.empty()) {
    try {
      root = text_cache_dir();
    } catch (const std::runtime_error& e) {
      kjv_error(std::string("a cache directory: ") + e.what());
    }
  }
  const std::string dir = prepare_kjv(root, bible_program);
  std::array<SplitChecksum, 3> expected{};
  for (std::size_t i = 0; i < 3; ++i) expected[i] = {kjv_splits()[i].characters, kjv_splits()[i].fnv1a64};
  return read_checked_splits(dir, expected, "kjv");
}

}  // namespace seqlab
