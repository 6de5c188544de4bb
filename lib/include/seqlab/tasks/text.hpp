#pragma once
// Language modelling on real text: next-symbol prediction over a corpus with train / validation /
// test splits, at the level of characters (Unicode code points of UTF-8 text) or bytes, as the
// character-level benchmarks enwik8 and text8 (Al-Rfou et al. 2019) and the length-extrapolation
// evaluation of Press et al. 2021, "Train Short, Test Long" (ALiBi, arXiv 2108.12409), §2,
// Table 2, Figure 1 and their sliding-window evaluation.
//
// Symbols. unit = char: the text must be UTF-8 (strict: no overlong forms, surrogates, code points
// above U+10FFFF or NUL); each code point is one symbol. unit = byte: any file; each byte is one
// symbol. Sizes, windows, fractions and losses count symbols of the unit.
//
// Vocabulary. Built from the TRAIN split only: its distinct symbols in increasing code point (byte)
// order get ids 0..V_train-1; one more id, unknown_id() = V_train, stands for every symbol of the
// validation or test split that the train split lacks. vocab_size() = V = V_train + 1.
//
// Corpora (TextCorpus::open, the `corpus` key of the registry task `text`):
//   "kjv" (default)  the King James Version prepared from Debian's packages bible-kjv and
//                    bible-kjv-text into a cache outside the source tree (text_cache_dir()),
//                    split by book (kjv_splits(); README "Real text: the KJV corpus and
//                    --corpus"); each split file is checked against its size and FNV-1a 64
//                    checksum at every load.
//   a file path      any UTF-8 (unit = char) or byte (unit = byte) file: contiguous splits, train
//                    first, then validation, then test at the end (as enwik8's 90M / 5M / 5M), of
//                    n_valid = round(valid_fraction · N) and n_test = round(test_fraction · N) of its
//                    N symbols. A file literally named kjv is given as ./kjv.
//   a directory      its files train.txt, valid.txt and test.txt are the splits (a corpus that
//                    ships its own split, e.g. WikiText-103's wiki.{train,valid,test}.raw renamed).
//
// Training windows (TextCorpus::sample): a row is seq_len + 1 contiguous symbols of a split at
// offset o: inputs = ids[o, o + seq_len), targets = ids[o + 1, o + seq_len + 1) (the next symbol
// at every position, every position scored). Row by row, o = rng.uniform_int(S - seq_len) for a
// split of S symbols: deterministic given the Rng state, the same on every platform.
//
// Evaluation (TextEvaluation), deterministic, in windows of L symbols. The targets of a split of S
// symbols are its symbols 1..S-1 (target index j: the symbol predicted from the ones before it);
// the evaluation scores the first N = min(max_tokens, S - 1) of them (max_tokens = 0: all), each
// exactly once. Window k has inputs ids[s_k, s_k + L) and target index s_k + t + 1 at position t.
// Its end e_k = min(L + k · stride, max(N, L)) and start s_k = e_k - L; it scores the target
// indices in (e_{k-1}, min(e_k, N)] (e_{-1} = 0), every other position has target kIgnoreTarget:
//   non-overlapping (stride = L; Press et al.'s "nonoverlapping" inference): the windows tile the
//     split, every position of a window scored (the first N targets, in ⌈N / L⌉ windows);
//   sliding (1 <= stride < L; Press et al.'s "sliding window" evaluation): each window advances by
//     stride and scores only its last stride positions, so every scored symbol except those of the
//     first window (which scores all L) sees at least L - stride symbols of context.
// In both modes the last window ends exactly at target N: it is moved back to end there (it
// overlaps the window before it) and scores only the targets not yet scored, so every window has
// the full length L, nothing is padded, and the same N targets are scored in every mode, window
// length and stride: their mean losses are comparable. n_windows = 1 + ⌈max(0, N - L) / stride⌉.
// Cost: n_windows · L positions through the model (about N · L / stride).
//
// Units. Losses are natural-log cross-entropies, nats per symbol; bits_per_character and
// perplexity convert them for reports.
//
// Legend: B batch (rows or windows per chunk), T = seq_len (training), L window (evaluation),
// S symbols in a split, N scored targets, V vocab_size().
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/tasks/copy_memory.hpp"  // TokenBatch
#include "seqlab/tasks/mqar.hpp"         // kIgnoreTarget
#include "seqlab/tasks/task.hpp"

namespace seqlab {

/// What a symbol is: a Unicode code point of UTF-8 text ("char") or a byte ("byte").
enum class TextUnit { character, byte };
/// "char" -> character, "byte" -> byte. Throws ConfigError("unit", "'name'", "one of char, byte").
TextUnit parse_text_unit(const std::string& name);
/// "char" or "byte".
std::string text_unit_name(TextUnit unit);

enum class TextSplit { train, valid, test };
/// "train", "valid" or "test".
std::string text_split_name(TextSplit split);
/// "train" | "valid" | "test" -> the split. Throws ConfigError(key, "'name'", "one of train, valid,
/// test").
TextSplit parse_text_split(const std::string& name, const std::string& key = "split");

/// The three splits of a corpus as raw text (UTF-8 or bytes), in corpus order.
struct TextSplits {
  std::string train, valid, test;
};

/// The symbols of `bytes`: code points for unit = char, bytes (0..255) for unit = byte. Throws
/// std::invalid_argument for unit = char if `bytes` is not strict UTF-8 or holds NUL, naming the
/// byte offset ("invalid UTF-8 at byte 17", "NUL at byte 3").
std::vector<std::int32_t> text_symbols(const std::string& bytes, TextUnit unit);

// --- report helpers ---------------------------------------------------------------------------------

/// Bits per character (per symbol: per byte for unit = byte) of a cross-entropy in nats per symbol:
/// nats / ln 2 (the unit of enwik8/text8 results, e.g. Al-Rfou et al. 2019 Table 1).
double bits_per_character(double nats_per_symbol);
/// Perplexity of a cross-entropy in nats per symbol: exp(nats), the unit of Press et al. 2021's
/// tables (there per word; here per symbol).
double perplexity(double nats_per_symbol);

// --- the corpus -------------------------------------------------------------------------------------

/// The share of a corpus file's symbols each of the validation and test splits takes by default.
inline constexpr double kDefaultSplitFraction = 0.05;

/// How TextCorpus::open finds and splits a corpus (the file comment's "Corpora").
struct TextCorpusOptions {
  std::string corpus = "kjv";  // "kjv" or the path of a file
  TextUnit unit = TextUnit::character;
  /// Shares of a corpus FILE's symbols held out at its end, each in (0, 1), sum < 1; unset =
  /// kDefaultSplitFraction.
  /// Must stay unset with corpus = "kjv" (split by book).
  std::optional<double> valid_fraction, test_fraction;
  /// Cache of the prepared KJV; "" = text_cache_dir().
  std::string cache_dir;
  /// The `bible` program for preparing the KJV; "" = `bible` on PATH, else /usr/bin/bible.
  std::string bible_program;
};

class TextCorpus {
 public:
  /// The corpus of three splits of raw text, symbols of `unit`; `source` names it in messages
  /// (the value of the key `corpus`). Each split must hold at least 2 symbols (one window of
  /// length 1). Throws std::invalid_argument naming the split if it is shorter or (unit = char)
  /// not UTF-8 text (text_symbols).
  TextCorpus(const TextSplits& splits, TextUnit unit, std::string source = "text");

  /// The corpus `options` names (file comment). Throws ConfigError:
  ///   key corpus: a file that is missing, unreadable, empty, not UTF-8 text (unit = char; "use
  ///     unit = byte"), or so short that a split holds fewer than 2 symbols; a directory without
  ///     the three files or with a split of fewer than 2 symbols; for "kjv" a missing package, a
  ///     `bible` that fails or prints another text than the split constants expect, a cached split
  ///     file whose size or checksum is wrong, an unwritable cache directory;
  ///   key valid_fraction / test_fraction: a fraction outside (0, 1), a sum >= 1, or a fraction
  ///     given with corpus = kjv or a directory.
  static TextCorpus open(const TextCorpusOptions& options);

  /// The value of `corpus` it was opened from ("kjv", a path, or the constructor's source).
  const std::string& source() const { return source_; }
  TextUnit unit() const { return unit_; }
  /// V = V_train + 1 (the train split's distinct symbols plus the unknown id).
  std::size_t vocab_size() const { return symbols_.size() + 1; }
  /// V_train: the id of every symbol the train split lacks (the last id).
  std::int32_t unknown_id() const { return static_cast<std::int32_t>(symbols_.size()); }
  /// The id of a symbol (code point or byte); unknown_id() for a symbol not in the train split.
  std::int32_t id(std::int32_t symbol) const;
  /// The symbol of an id in [0, V_train). Throws std::out_of_range for unknown_id() or outside.
  std::int32_t symbol(std::int32_t id) const;
  /// The ids of a split, in corpus order [S].
  const std::vector<std::int32_t>& ids(TextSplit split) const;
  /// S: symbols in the split.
  std::size_t split_size(TextSplit split) const { return ids(split).size(); }
  /// Symbols of the split mapped to unknown_id() (0 for train).
  std::size_t unknown_count(TextSplit split) const;

  /// Throws ConfigError unless every split holds a training window of seq_len + 1 symbols: for a
  /// corpus file split by fractions the key test_fraction / valid_fraction for a short test /
  /// validation split, corpus for a short train split; otherwise (the KJV, a directory, given
  /// splits) the key seq_len. The message gives the split's size.
  void require_window(std::size_t seq_len) const;

  /// `batch` >= 1 training windows of `seq_len` >= 1 from `split` (file comment), [B, T] inputs
  /// and targets (every position scored). Throws std::invalid_argument for batch = 0, seq_len = 0
  /// or a split of fewer than seq_len + 1 symbols.
  TokenBatch sample(std::size_t batch, std::size_t seq_len, Rng& rng,
                    TextSplit split = TextSplit::train) const;

  /// Baseline: cross-entropy in nats per symbol of the add-one smoothed unigram of the train split,
  /// p(v) = (count_train(v) + 1) / (S_train + V) over all V ids (an unknown symbol has count 0),
  /// on the targets an evaluation of `split` scores: its symbols 1..N, N = min(max_tokens, S - 1)
  /// (max_tokens = 0: all). The best predictor that ignores context cannot do much better.
  double unigram_loss(TextSplit split = TextSplit::test, std::size_t max_tokens = 0) const;
  /// The accuracy of always predicting the train split's most frequent id (the smallest such id on
  /// a tie) on the same targets as unigram_loss.
  double unigram_accuracy(TextSplit split = TextSplit::test, std::size_t max_tokens = 0) const;

 private:
  TextCorpus(std::array<std::vector<std::int32_t>, 3> symbols, TextUnit unit, std::string source,
             std::array<double, 2> fractions);
  std::size_t scored_targets(TextSplit split, std::size_t max_tokens) const;

  std::string source_;
  TextUnit unit_ = TextUnit::character;
  std::array<double, 2> fractions_{};          // valid, test of a file split by them (else 0)
  std::array<std::vector<std::int32_t>, 3> ids_;  // [S] per split, train / valid / test
  std::vector<std::int32_t> symbols_;          // [V_train] symbol of each id, increasing
  std::vector<std::int32_t> id_of_;            // dense: id of symbol s (s < size), else unknown
  std::vector<double> train_count_;            // [V] occurrences of each id in the train split
};

// --- deterministic evaluation -----------------------------------------------------------------------

/// The evaluation windows of one split (file comment), as chunks of at most `batch` windows:
/// chunk i holds windows [i · batch, min((i + 1) · batch, n_windows)), tokens and targets
/// [b, L] int32, b <= batch, kIgnoreTarget where not scored. Chunks are built on request from the
/// corpus (memory O(batch · L)), so a generic "mean loss over scored positions" over all chunks is
/// the evaluation's loss. Keeps the corpus alive.
class TextEvaluation {
 public:
  /// `window` L >= 1 with L + 1 <= S; `stride` in [1, L] (L: non-overlapping); `max_tokens` the
  /// cap N on scored targets (0 = all S - 1); `batch` >= 1. Throws std::invalid_argument naming
  /// the argument, its value and what is allowed (the caller names its own keys).
  TextEvaluation(std::shared_ptr<const TextCorpus> corpus, TextSplit split, std::size_t window,
                 std::size_t stride, std::size_t max_tokens, std::size_t batch);
  /// Press et al.'s non-overlapping evaluation: stride = window.
  static TextEvaluation non_overlapping(std::shared_ptr<const TextCorpus> corpus, TextSplit split,
                                        std::size_t window, std::size_t max_tokens,
                                        std::size_t batch);
  /// Press et al.'s sliding-window evaluation (stride < window scores the last stride positions).
  static TextEvaluation sliding(std::shared_ptr<const TextCorpus> corpus, TextSplit split,
                                std::size_t window, std::size_t stride, std::size_t max_tokens,
                                std::size_t batch);

  TextSplit split() const { return split_; }
  std::size_t window() const { return window_; }
  std::size_t stride() const { return stride_; }
  std::size_t batch() const { return batch_; }
  /// N: scored targets over all windows (each target index 1..N once).
  std::size_t n_scored() const { return n_scored_; }
  std::size_t n_windows() const { return n_windows_; }
  /// ⌈n_windows / batch⌉.
  std::size_t n_chunks() const { return (n_windows_ + batch_ - 1) / batch_; }
  /// s_k: the split offset of window k's first input. Throws std::out_of_range for k >= n_windows.
  std::size_t window_start(std::size_t k) const;
  /// The positions [first, last) of window k that are scored. Throws std::out_of_range.
  std::pair<std::size_t, std::size_t> scored_positions(std::size_t k) const;
  /// Chunk i (class comment): TaskBatch with tokens and targets [b, L]. Throws std::out_of_range
  /// for i >= n_chunks().
  TaskBatch chunk(std::size_t i) const;

 private:
  std::size_t window_end(std::size_t k) const;  // e_k

  std::shared_ptr<const TextCorpus> corpus_;
  TextSplit split_;
  std::size_t window_, stride_, batch_, n_scored_, n_windows_;
};

// --- the registry task ------------------------------------------------------------------------------

/// The registry task `text` (tasks/task.hpp): training windows of seq_len from one split of a
/// corpus. spec(): embedding input, vocab_size = output_size = V, per_position head, not padded,
/// baseline = the corpus's unigram_loss / unigram_accuracy on the whole test split. A caller that
/// needs the deterministic evaluation casts a Task from make_task("text", ...) to TextTask and
/// builds a TextEvaluation over corpus().
class TextTask : public Task {
 public:
  /// Throws std::invalid_argument if corpus is null or seq_len = 0, ConfigError as
  /// TextCorpus::require_window if a split holds no window of seq_len + 1 symbols.
  TextTask(std::shared_ptr<const TextCorpus> corpus, std::size_t seq_len,
           TextSplit split = TextSplit::train);
  TaskSpec spec() const override { return spec_; }
  /// TextCorpus::sample(batch, seq_len, rng, split) as tokens / targets [B, T].
  TaskBatch sample(std::size_t batch, Rng& rng) const override;
  const std::shared_ptr<const TextCorpus>& corpus() const { return corpus_; }
  std::size_t seq_len() const { return seq_len_; }
  TextSplit split() const { return split_; }

 private:
  std::shared_ptr<const TextCorpus> corpus_;
  std::size_t seq_len_;
  TextSplit split_;
  TaskSpec spec_;
};

// --- the KJV from Debian ----------------------------------------------------------------------------

/// The cache of prepared corpora: $SEQLAB_CACHE_DIR if set and not empty, else
/// $XDG_CACHE_HOME/seqlab if XDG_CACHE_HOME is an absolute path, else $HOME/.cache/seqlab.
/// Throws std::runtime_error if none of these variables is usable.
std::string text_cache_dir();

/// One split of the KJV as prepared by prepare_kjv: the books first_book..last_book (Debian's
/// names, in canonical order), its size and its checksum (FNV-1a 64, core/hash.hpp, of the file's
/// bytes). The text is ASCII: characters = bytes.
struct KjvSplit {
  const char* split;  // "train" | "valid" | "test"
  const char* first_book;
  const char* last_book;
  std::size_t characters;
  std::uint64_t fnv1a64;
};
/// The fixed split by book, train / valid / test (Genesis–Acts, Romans–Philippians,
/// Colossians–Revelation: about 90.7 / 4.2 / 5.0 % of the characters), with the constants the
/// prepared files are checked against.
const std::array<KjvSplit, 3>& kjv_splits();

/// The KJV's 66 book names in canonical order, as Debian's `bible` prints them in chapter headers.
const std::array<const char*, 66>& kjv_books();

/// Splits the output of `bible -l10000 "Gen1:1-Rev22:21"` (or of any list of chapters in that
/// format) by book (kjv_splits()), removing the page furniture: empty lines, chapter headers
/// ("<Book> <chapter>") and verse numbers (a verse line is two spaces, the number, a space, the
/// text). Each verse becomes one line: its text without trailing blanks, then '\n'. Throws
/// std::runtime_error naming the line (1-based) for a line of another form or an unknown book.
TextSplits split_kjv(const std::string& bible_output);

/// Runs `program -p /usr/lib -l10000 Gen1:1-Rev22:21` ("" = `bible` on PATH, else /usr/bin/bible)
/// and returns its standard output. Throws ConfigError(corpus = 'kjv', "install the Debian packages
/// bible-kjv and bible-kjv-text (./run_all.sh deps) ...") if it cannot be started or fails.
std::string run_bible(const std::string& program = "");

/// Makes sure `<cache_dir>/kjv/{train,valid,test}.txt` hold the prepared KJV (split_kjv of
/// run_bible), preparing it if a file is missing; returns the directory. Each file is written
/// atomically (core/file_io.hpp) after the new splits were checked against kjv_splits(), so two
/// processes preparing at once both succeed and a reader never sees a partial file. Throws
/// ConfigError (key corpus) if the program fails, its output does not match kjv_splits(), or the
/// directory cannot be created or written.
std::string prepare_kjv(const std::string& cache_dir, const std::string& bible_program = "");

/// What a split file must be: its size in bytes and the FNV-1a 64 of its bytes.
struct SplitChecksum {
  std::size_t bytes;
  std::uint64_t fnv1a64;
};
/// Reads `<dir>/train.txt`, `valid.txt`, `test.txt` and checks each against `expected` (train,
/// valid, test). Throws ConfigError(corpus = 'corpus_name', ...) naming the file, its size and
/// checksum and what was expected if one differs ("delete <dir> to prepare it again"), or
/// std::runtime_error if a file cannot be read.
TextSplits read_checked_splits(const std::string& dir, const std::array<SplitChecksum, 3>& expected,
                               const std::string& corpus_name);

/// The KJV's splits: prepare_kjv(cache_dir or text_cache_dir(), bible_program), then
/// read_checked_splits against kjv_splits(). Throws as those do.
TextSplits load_kjv(const std::string& cache_dir = "", const std::string& bible_program = "");

}  // namespace seqlab
