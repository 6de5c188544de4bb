// The task registry, the common Task form and the built-in tasks' wrappers (tasks/task.hpp). The
// built-ins are registered in this file, which defines the registry function every lookup calls,
// so the static library always links them (core/registry.hpp).
#include "seqlab/tasks/task.hpp"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <utility>

#include "seqlab/tasks/adding_problem.hpp"
#include "seqlab/tasks/char_lm.hpp"
#include "seqlab/tasks/copy_memory.hpp"
#include "seqlab/tasks/distance_probe.hpp"
#include "seqlab/tasks/induction_copy.hpp"
#include "seqlab/tasks/majority.hpp"
#include "seqlab/tasks/markov_lm.hpp"
#include "seqlab/tasks/mqar.hpp"
#include "seqlab/tasks/padded_tokens.hpp"
#include "seqlab/tasks/passkey.hpp"
#include "seqlab/tasks/previous_token.hpp"
#include "seqlab/tasks/lag_pair.hpp"
#include "seqlab/tasks/duplicate_tag.hpp"
#include "seqlab/tasks/repeat_copy.hpp"
#include "seqlab/tasks/reverse.hpp"
#include "seqlab/tasks/scattered_recall.hpp"
#include "seqlab/tasks/text.hpp"

namespace seqlab {

// --- Task from a function, apply_task_spec ---------------------------------------------------------

namespace {

class FunctionTask : public Task {
 public:
  FunctionTask(TaskSpec spec, std::function<TaskBatch(std::size_t, Rng&)> sample)
      : spec_(std::move(spec)), sample_(std::move(sample)) {}
  TaskSpec spec() const override { return spec_; }
  TaskBatch sample(std::size_t batch, Rng& rng) const override {
    if (batch == 0) throw std::invalid_argument("Task.sample: batch = 0; must be >= 1");
    return sample_(batch, rng);
  }

 private:
  TaskSpec spec_;
  std::function<TaskBatch(std::size_t, Rng&)> sample_;
};

}  // namespace

std::unique_ptr<Task> make_task_from(TaskSpec spec,
                                     std::function<TaskBatch(std::size_t batch, Rng& rng)> sample) {
  if (!sample) throw std::invalid_argument("make_task_from: sample is empty");
  return std::make_unique<FunctionTask>(std::move(spec), std::move(sample));
}

void apply_task_spec(const TaskSpec& spec, ModelConfig& cfg) {
  cfg.input = spec.input;
  if (spec.input == "embedding") cfg.vocab_size = spec.vocab_size;
  else cfg.input_size = spec.input_size;
  cfg.output_size = spec.output_size;
  cfg.head = spec.head;
}

// --- parameters -------------------------------------------------------------------------------------

const std::string& TaskParams::get_string(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end() || it->second.empty()) throw ConfigError(key, "''", "a value (required)");
  return it->second;
}

int TaskParams::get_int(const std::string& key) const {
  const std::string& text = get_string(key);
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || v < INT_MIN || v > INT_MAX)
    throw ConfigError(key, "'" + text + "'", "an integer in [-2147483648, 2147483647]");
  return static_cast<int>(v);
}

double TaskParams::get_real(const std::string& key) const {
  const std::string& text = get_string(key);
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(v))
    throw ConfigError(key, "'" + text + "'", "a finite real");
  return v;
}

std::uint64_t TaskParams::get_uint64(const std::string& key) const {
  const std::string& text = get_string(key);
  errno = 0;
  char* end = nullptr;
  const bool digits = text[0] >= '0' && text[0] <= '9';  // strtoull would wrap a leading '-'
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (!digits || errno != 0 || *end != '\0')
    throw ConfigError(key, "'" + text + "'", "an integer in [0, 18446744073709551615]");
  return static_cast<std::uint64_t>(v);
}

// --- built-in tasks ---------------------------------------------------------------------------------

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TaskBatch from_tokens(TokenBatch b) {
  TaskBatch out;
  out.tokens = std::move(b.inputs);
  out.targets = std::move(b.targets);
  return out;
}

TaskBatch from_padded(PaddedTokenBatch b) {
  TaskBatch out;
  out.tokens = std::move(b.inputs);
  out.targets = std::move(b.targets);
  out.padding = std::move(b.padding);
  out.lengths = IndexTensor1::from_shape({b.lengths.size()});
  for (std::size_t i = 0; i < b.lengths.size(); ++i) out.lengths(i) = static_cast<std::int32_t>(b.lengths[i]);
  return out;
}

TaskSpec token_spec(int vocab, int seq_len, double loss, double accuracy, int output = -1) {
  TaskSpec s;
  s.vocab_size = static_cast<std::size_t>(vocab);
  s.seq_len = static_cast<std::size_t>(seq_len);
  s.output_size = static_cast<std::size_t>(output < 0 ? vocab : output);
  s.baseline_loss = loss;
  s.baseline_accuracy = accuracy;
  return s;
}

// MQAR's dependency distances: a query (a key at a scored position) depends on that key's
// position in the context [0, 2P) of key-value pairs; 0 elsewhere.
IndexTensor2 mqar_distances(const TaskBatch& b, std::size_t P) {
  const std::size_t B = b.tokens.shape()[0], S = b.tokens.shape()[1];
  IndexTensor2 d = IndexTensor2::from_shape({B, S});
  d.fill(0);
  for (std::size_t r = 0; r < B; ++r)
    for (std::size_t c = 0; c < S; ++c) {
      if (b.targets(r, c) == kIgnoreTarget) continue;
      for (std::size_t i = 0; i < P; ++i)
        if (b.tokens(r, 2 * i) == b.tokens(r, c)) {
          d(r, c) = static_cast<std::int32_t>(c - 2 * i);
          break;
        }
    }
  return d;
}

// MQAR rows of lengths in [min_len, seq_len], right-padded to seq_len with the blank 0 (mqar's
// min_len >= 1): per row, its length min_len + uniform_int(seq_len - min_len + 1) (drawn also when
// the range holds one length), then MultiQueryAssociativeRecall(length, ...).sample(1, rng).
PaddedTokenBatch mqar_padded(std::size_t batch, int min_len, int seq_len, int P, int Q, int K,
                             int V, Rng& rng) {
  const auto W = static_cast<std::size_t>(seq_len);
  PaddedTokenBatch out{IndexTensor2::from_shape({batch, W}), IndexTensor2::from_shape({batch, W}),
                       PaddingMask::from_shape({batch, W}), std::vector<std::size_t>(batch)};
  out.inputs.fill(MultiQueryAssociativeRecall::blank());
  out.targets.fill(kIgnoreTarget);
  out.padding.fill(1);
  for (std::size_t b = 0; b < batch; ++b) {
    const std::size_t len = static_cast<std::size_t>(min_len) +
        static_cast<std::size_t>(rng.uniform_int(static_cast<std::uint64_t>(seq_len - min_len + 1)));
    const TokenBatch row = MultiQueryAssociativeRecall(static_cast<int>(len), P, Q, K, V).sample(1, rng);
    for (std::size_t t = 0; t < len; ++t) {
      out.inputs(b, t) = row.inputs(0, t);
      out.targets(b, t) = row.targets(0, t);
      out.padding(b, t) = 0;
    }
    out.lengths[b] = len;
  }
  return out;
}

// Tasks whose every scored target is a function of the inputs: the best predictor is exact.
void set_exact_ceiling(TaskSpec& s) {
  s.best_accuracy = 1.0;
  s.optimal_loss = 0.0;
}

// Wraps a task object whose sample(batch, rng) returns TokenBatch or PaddedTokenBatch.
template <class T, class Convert>
std::unique_ptr<Task> wrap(std::shared_ptr<const T> task, TaskSpec spec, Convert convert) {
  return make_task_from(std::move(spec), [task, convert](std::size_t batch, Rng& rng) {
    return convert(task->sample(batch, rng));
  });
}

// A token task whose baseline already ignores only the dependency tested (so it is also the
// dependent positions' baseline), with an exact ceiling and each scored target's distance from
// task->distances(batch).
template <class T>
std::unique_ptr<Task> wrap_with_distances(std::shared_ptr<const T> task, TaskSpec spec) {
  spec.dependent_baseline_loss = spec.baseline_loss;
  spec.dependent_baseline_accuracy = spec.baseline_accuracy;
  set_exact_ceiling(spec);
  return wrap(task, std::move(spec), [task](TokenBatch b) {
    IndexTensor2 d = task->distances(b);
    TaskBatch out = from_tokens(std::move(b));
    out.distances = std::move(d);
    return out;
  });
}

// Order = the order of messages and --help choices.
void register_builtin_tasks(Registry<TaskEntry>& r) {
  r.add("copy_memory",
        {"copy memory (Bai et al. 2018 sec. 4): recall n_memorize symbols after T blanks; every "
         "position scored",
         {{"T", "50", "steps: blank length"},
          {"n_memorize", "10", "symbols to recall"},
          {"n_symbols", "8", "alphabet size"}},
         [](const TaskParams& p) {
           auto t = std::make_shared<const CopyMemoryTask>(p.get_int("T"), p.get_int("n_memorize"),
                                                           p.get_int("n_symbols"));
           // The best predictor that ignores the order of the source symbols: exact on the
           // T + n_memorize blank targets, the most frequent source symbol at every recall position
           // (CopyMemoryTask::most_frequent_symbol_accuracy / _loss).
           const double n = t->n_memorize(), S = t->seq_len();
           const double acc = (t->recall_start() + n * t->most_frequent_symbol_accuracy()) / S;
           TaskSpec s = token_spec(t->vocab_size(), t->seq_len(), n * t->most_frequent_symbol_loss() / S, acc);
           s.dependent_baseline_loss = t->most_frequent_symbol_loss();
           s.dependent_baseline_accuracy = t->most_frequent_symbol_accuracy();
           return wrap(t, s, [t](TokenBatch b) {
             TaskBatch out = from_tokens(std::move(b));
             // Recall target i (position recall_start + i) repeats input i: recall_start back.
             const auto rs = static_cast<std::size_t>(t->recall_start());
             out.distances = IndexTensor2::from_shape(out.targets.shape());
             for (std::size_t r = 0; r < out.distances.shape()[0]; ++r)
               for (std::size_t c = 0; c < out.distances.shape()[1]; ++c)
                 out.distances(r, c) = c >= rs ? static_cast<std::int32_t>(rs) : 0;
             return out;
           });
         }});
  r.add("adding",
        {"adding problem (Bai et al. 2018 sec. 4): sum of the two marked values, MSE at the last "
         "step",
         {{"seq_len", "50", "steps"}},
         [](const TaskParams& p) {
           auto t = std::make_shared<const AddingProblem>(p.get_int("seq_len"));
           TaskSpec s;
           s.input = "linear";
           s.input_size = static_cast<std::size_t>(AddingProblem::input_size());
           s.seq_len = static_cast<std::size_t>(t->seq_len());
           s.target = "values";
           s.output_size = 1;
           s.head = "last_position";
           s.baseline_loss = s.dependent_baseline_loss = t->markerless_mse();
           s.baseline_accuracy = kNaN;
           return wrap(t, s, [t](AddingBatch b) {
             TaskBatch out;
             out.features = std::move(b.inputs);
             const std::size_t B = b.targets.shape()[0];
             out.values = Tensor3::from_shape({B, 1, 1});
             out.distances = IndexTensor2::from_shape({B, 1});
             for (std::size_t i = 0; i < B; ++i) {
               out.values(i, 0, 0) = b.targets(i, 0);
               out.distances(i, 0) = t->dependency_distance(b.positions[i]);
             }
             return out;
           });
         }});
  r.add("mqar",
        {"multi-query associative recall (Arora et al. 2023, Zoology sec. 3)",
         {{"seq_len", "64", "tokens"},
          {"n_pairs", "8", "key-value pairs"},
          {"n_queries", "8", "queries per row"},
          {"n_keys", "16", "key vocabulary"},
          {"n_values", "16", "value vocabulary"},
          {"min_len", "0",
           "tokens: 0 = every row seq_len long; else rows of lengths uniform in [min_len, seq_len], "
           "right-padded (a padded task)"}},
         [](const TaskParams& p) {
           auto t = std::make_shared<const MultiQueryAssociativeRecall>(
               p.get_int("seq_len"), p.get_int("n_pairs"), p.get_int("n_queries"),
               p.get_int("n_keys"), p.get_int("n_values"));
           // The best predictor that ignores which key is queried: the most frequent value of the
           // context (MultiQueryAssociativeRecall::key_agnostic_accuracy / _loss).
           TaskSpec s = token_spec(t->vocab_size(), t->seq_len(), t->key_agnostic_loss(),
                                   t->key_agnostic_accuracy());
           s.dependent_baseline_loss = s.baseline_loss;
           s.dependent_baseline_accuracy = s.baseline_accuracy;
           set_exact_ceiling(s);
           const auto P = static_cast<std::size_t>(t->n_pairs());
           const int min_len = p.get_int("min_len");
           if (min_len == 0)
             return wrap(t, s, [P](TokenBatch b) {
               TaskBatch out = from_tokens(std::move(b));
               out.distances = mqar_distances(out, P);
               return out;
             });
           const int need = 2 * t->n_pairs() + 2 * t->n_queries();
           if (min_len < need || min_len > t->seq_len())
             throw ConfigError("min_len", std::to_string(min_len),
                               "0 or an integer in [2 * n_pairs + 2 * n_queries = " + std::to_string(need) +
                                   ", seq_len = " + std::to_string(t->seq_len()) + "]");
           s.padded = true;
           return make_task_from(s, [t, min_len, P](std::size_t batch, Rng& rng) {
             TaskBatch out = from_padded(mqar_padded(batch, min_len, t->seq_len(), t->n_pairs(),
                                                     t->n_queries(), t->n_keys(), t->n_values(), rng));
             out.distances = mqar_distances(out, P);
             return out;
           });
         }});
  r.add("distance_probe",
        {"recall one symbol placed d tokens before the query, d uniform in [min, max]",
         {{"seq_len", "32", "tokens"},
          {"n_symbols", "8", "symbols"},
          {"n_fillers", "8", "distractor tokens"},
          {"min_distance", "1", "tokens"},
          {"max_distance", "0", "tokens (0 = seq_len - 1)"}},
         [](const TaskParams& p) {
           auto t = std::make_shared<const DistanceProbe>(
               p.get_int("seq_len"), p.get_int("n_symbols"), p.get_int("n_fillers"),
               p.get_int("min_distance"), p.get_int("max_distance"));
           TaskSpec s = token_spec(t->vocab_size(), t->seq_len(), t->chance_loss(), t->chance_accuracy());
           s.dependent_baseline_loss = s.baseline_loss;
           s.dependent_baseline_accuracy = s.baseline_accuracy;
           return make_task_from(s, [t](std::size_t batch, Rng& rng) {
             std::vector<int> d;
             TaskBatch out = from_tokens(t->sample(batch, rng, &d));
             const std::size_t S = out.tokens.shape()[1];
             out.distances = IndexTensor2::from_shape({batch, S});
             out.distances.fill(0);
             for (std::size_t r = 0; r < batch; ++r) out.distances(r, S - 1) = d[r];
             return out;
           });
         }});
  r.add("induction_copy",
        {"induction-style copy: predict the token that followed the earlier occurrence",
         {{"prefix_len", "16", "tokens"}, {"copy_len", "8", "tokens"}, {"vocab_size", "32", "tokens"}},
         [](const TaskParams& p) {
           auto t = std::make_shared<const InductionCopyTask>(
               p.get_int("prefix_len"), p.get_int("copy_len"), p.get_int("vocab_size"));
           TaskSpec s = token_spec(t->vocab_size(), t->seq_len(), t->chance_loss(), t->chance_accuracy());
           set_exact_ceiling(s);
           return wrap(t, s, from_tokens);
         }});
  r.add("markov_lm",
        {"next-token prediction on a random order-k Markov grammar (baseline: uniform guess)",
         {{"seq_len", "64", "tokens"},
          {"vocab_size", "16", "tokens"},
          {"order", "2", "tokens of context"},
          {"branching", "2", "successors per context"},
          {"grammar_seed", "1", "seed of the grammar, in [0, 2^64)"}},
         [](const TaskParams& p) {
           auto t = std::make_shared<const MarkovLanguageTask>(
               p.get_int("seq_len"), p.get_int("vocab_size"), p.get_int("order"),
               p.get_int("branching"), p.get_uint64("grammar_seed"));
           TaskSpec s = token_spec(t->vocab_size(), t->seq_len(), t->chance_loss(), t->chance_accuracy());
           s.best_accuracy = t->bayes_accuracy();
           s.optimal_loss = t->optimal_loss();
           return wrap(t, s, from_tokens);
         }});
  r.add("previous_token",
        {"output the token lag positions earlier",
         {{"seq_len", "32", "tokens"}, {"vocab_size", "16", "tokens"}, {"lag", "1", "tokens"}},
         [](const TaskParams& p) {
           auto t = std::make_shared<const PreviousTokenTask>(
               p.get_int("seq_len"), p.get_int("vocab_size"), p.get_int("lag"));
           TaskSpec s = token_spec(t->vocab_size(), t->seq_len(), t->chance_loss(), t->chance_accuracy());
           set_exact_ceiling(s);
           return wrap(t, s, from_tokens);
         }});
  r.add("repeat_copy",
        {"repeat n symbols after a separator, rows right-padded (Kazemnejad et al. 2023 sec. 4)",
         {{"min_len", "9", "tokens per row"}, {"max_len", "17", "tokens per row"}, {"alphabet", "8", "symbols"}},
         [](const TaskParams& p) {
           auto t = std::make_shared<const RepeatCopyTask>(p.get_int("min_len"), p.get_int("max_len"),
                                                           p.get_int("alphabet"));
           TaskSpec s = token_spec(t->vocab_size(), t->max_len(), t->chance_loss(), t->chance_accuracy());
           s.padded = true;
           return wrap(t, s, from_padded);
         }});
  r.add("majority",
        {"majority class of variable-length padded sequences, one label per row",
         {{"seq_len", "32", "tokens"},
          {"pad_fraction", "0.25", "1: expected padded fraction"},
          {"n_classes", "4", "classes"},
          {"n_noise", "4", "distractor tokens"},
          {"min_len", "4", "tokens"}},
         [](const TaskParams& p) {
           auto t = std::make_shared<const MajorityTask>(
               p.get_int("seq_len"), p.get_real("pad_fraction"), p.get_int("n_classes"),
               p.get_int("n_noise"), p.get_int("min_len"));
           TaskSpec s = token_spec(t->vocab_size(), t->seq_len(), t->chance_loss(),
                                   t->chance_accuracy(), t->n_classes());
           s.head = "last_position";
           s.padded = true;
           set_exact_ceiling(s);
           s.expected_pad_fraction = t->expected_pad_fraction();
           return wrap(t, s, [](PaddedClassificationBatch b) {
             TaskBatch out;
             out.tokens = std::move(b.inputs);
             out.padding = std::move(b.padding);
             out.lengths = std::move(b.lengths);
             out.targets = IndexTensor2::from_shape({b.labels.size(), 1});
             for (std::size_t i = 0; i < b.labels.size(); ++i) out.targets(i, 0) = b.labels(i);
             return out;
           });
         }});
  r.add("reverse",
        {"sequence reversal y = reversed x, in ReverseTask's layouts: prefix LM [x, sep, y] with y "
         "scored (decoder-only), tagging x -> y (encoder-only), seq2seq (encoder-decoder)",
         {{"length", "8", "tokens"},
          {"n_symbols", "8", "symbols"},
          {"layout", "prefix_lm", "prefix_lm | tagging | seq2seq"}},
         [](const TaskParams& p) {
           const std::string& layout = p.get_string("layout");
           if (layout != "prefix_lm" && layout != "tagging" && layout != "seq2seq")
             throw ConfigError("layout", "'" + layout + "'", "one of prefix_lm, tagging, seq2seq");
           auto t = std::make_shared<const ReverseTask>(p.get_int("length"), p.get_int("n_symbols"));
           const int n = t->length();
           // The separator / bos is an input only: the head predicts the n_symbols symbols.
           TaskSpec s = token_spec(t->vocab_size(), layout == "prefix_lm" ? 2 * n : n,
                                   t->chance_loss(), t->chance_accuracy(), t->n_symbols());
           if (layout == "seq2seq") s.decoder_len = static_cast<std::size_t>(n);
           set_exact_ceiling(s);
           return make_task_from(s, [t, layout](std::size_t batch, Rng& rng) {
             TransductionBatch pair = t->sample(batch, rng);
             if (layout == "prefix_lm") return from_tokens(t->prefix_lm(pair));
             TaskBatch out;
             if (layout == "seq2seq") out.decoder_tokens = t->decoder_input(pair);
             out.tokens = std::move(pair.source);
             out.targets = std::move(pair.target);
             return out;
           });
         }});
  r.add("char_lm",
        {"next-byte prediction on windows of a text file (baseline: unigram, no accuracy)",
         {{"text_file", "", "path of the text (required)"},
          {"test_fraction", "0.1", "1: share of the text held out"},
          {"min_len", "32", "bytes per window"},
          {"max_len", "64", "bytes per window"},
          {"split", "train", "train | test"}},
         [](const TaskParams& p) {
           const std::string& split = p.get_string("split");
           if (split != "train" && split != "test")
             throw ConfigError("split", "'" + split + "'", "one of train, test");
           const int lo = p.get_int("min_len"), hi = p.get_int("max_len");
           if (lo < 1) throw ConfigError("min_len", std::to_string(lo), ">= 1");
           if (hi < lo) throw ConfigError("max_len", std::to_string(hi), ">= min_len = " + std::to_string(lo));
           auto c = std::make_shared<const CharCorpus>(
               CharCorpus::from_file(p.get_string("text_file"), p.get_real("test_fraction")));
           const CorpusSplit which = split == "train" ? CorpusSplit::train : CorpusSplit::test;
           TaskSpec s = token_spec(c->vocab_size(), hi, c->unigram_test_loss(), kNaN);
           s.padded = true;
           const auto min_len = static_cast<std::size_t>(lo), max_len = static_cast<std::size_t>(hi);
           return make_task_from(s, [c, min_len, max_len, which](std::size_t batch, Rng& rng) {
             return from_padded(c->sample(batch, min_len, max_len, which, rng));
           });
         }});
  r.add("text",
        {"next-symbol language modelling on real text, char or byte level (Press et al. 2021); "
         "default corpus the KJV from Debian (baseline: the smoothed train unigram)",
         {{"corpus", "kjv", "kjv (the King James Version, split by book), a file, or a directory of "
                              "train.txt, valid.txt, test.txt"},
          {"unit", "char", "char (UTF-8 code points) | byte"},
          {"seq_len", "64", "symbols per training window"},
          {"valid_fraction", "0.05", "1: share of a corpus file for validation (kjv: by book)"},
          {"test_fraction", "0.05", "1: share at the end of a corpus file for test (kjv: by book)"},
          {"split", "train", "train | valid | test: the split windows are sampled from"}},
         [](const TaskParams& p) {
           TextCorpusOptions o;
           o.corpus = p.get_string("corpus");
           o.unit = parse_text_unit(p.get_string("unit"));
           const TextSplit split = parse_text_split(p.get_string("split"));
           const int seq_len = p.get_int("seq_len");
           if (seq_len < 1) throw ConfigError("seq_len", std::to_string(seq_len), ">= 1");
           // A fraction equal to its default counts as unset (the KJV takes none).
           const double vf = p.get_real("valid_fraction"), tf = p.get_real("test_fraction");
           if (vf != kDefaultSplitFraction) o.valid_fraction = vf;
           if (tf != kDefaultSplitFraction) o.test_fraction = tf;
           auto corpus = std::make_shared<const TextCorpus>(TextCorpus::open(o));
           return std::make_unique<TextTask>(corpus, static_cast<std::size_t>(seq_len), split);
         }});
  r.add("lag_pair",
        {"output the ordered pair of the tokens lag_a and lag_b positions earlier (V^2 classes; "
         "two relations per position; baseline: one of the two lookups)",
         {{"seq_len", "32", "tokens"},
          {"vocab_size", "8", "tokens"},
          {"lag_a", "1", "tokens"},
          {"lag_b", "3", "tokens"}},
         [](const TaskParams& p) {
           auto t = std::make_shared<const LagPairTask>(p.get_int("seq_len"), p.get_int("vocab_size"),
                                                        p.get_int("lag_a"), p.get_int("lag_b"));
           TaskSpec s = token_spec(t->vocab_size(), t->seq_len(), t->one_lookup_loss(),
                                   t->one_lookup_accuracy(), t->n_classes());
           set_exact_ceiling(s);
           return wrap(t, s, from_tokens);
         }});
  r.add("duplicate_tag",
        {"tag each position 1 if its token occurs elsewhere in the row, before or after (needs "
         "bidirectional context; baseline: the tag's prior)",
         {{"length", "24", "tokens"}, {"vocab_size", "32", "tokens"}},
         [](const TaskParams& p) {
           auto t = std::make_shared<const DuplicateTagTask>(p.get_int("length"), p.get_int("vocab_size"));
           TaskSpec s = token_spec(t->vocab_size(), t->length(), t->prior_loss(), t->prior_accuracy(), 2);
           set_exact_ceiling(s);
           return wrap(t, s, from_tokens);
         }});
  r.add("mqar_scattered",
        {"multi-query associative recall with pairs and queries scattered over the whole row "
         "(tasks/scattered_recall.hpp; baseline: the key-agnostic predictor on a fixed sample)",
         {{"seq_len", "64", "tokens"},
          {"n_pairs", "8", "key-value pairs"},
          {"n_queries", "4", "queries per row"},
          {"n_keys", "16", "key vocabulary"},
          {"n_values", "16", "value vocabulary"}},
         [](const TaskParams& p) {
           auto t = std::make_shared<const ScatteredAssociativeRecall>(
               p.get_int("seq_len"), p.get_int("n_pairs"), p.get_int("n_queries"), p.get_int("n_keys"),
               p.get_int("n_values"));
           const RecallBaseline base = t->expected_key_agnostic();
           return wrap_with_distances(t, token_spec(t->vocab_size(), t->seq_len(), base.loss, base.accuracy));
         }});
  r.add("passkey",
        {"passkey retrieval: n distinct digits hidden at a random depth in repeated filler, asked for "
         "at the end (Mohtashami & Jaggi 2023; Chen et al. 2023 sec. 3.2)",
         {{"seq_len", "64", "tokens"}, {"n_digits", "5", "digits of the key"}, {"filler_period", "5", "tokens of the repeated filler sentence"}},
         [](const TaskParams& p) {
           auto t = std::make_shared<const PasskeyTask>(p.get_int("seq_len"), p.get_int("n_digits"),
                                                        p.get_int("filler_period"));
           return wrap_with_distances(t, token_spec(t->vocab_size(), t->seq_len(), t->chance_loss(), t->chance_accuracy()));
         }});
}

}  // namespace

Registry<TaskEntry>& task_registry() {
  static Registry<TaskEntry> registry = [] {
    Registry<TaskEntry> r("task");
    register_builtin_tasks(r);
    return r;
  }();
  return registry;
}

const std::vector<std::string>& task_names() { return task_registry().names(); }

std::unique_ptr<Task> make_task(const std::string& name, const TaskParams& params) {
  const TaskEntry* entry = task_registry().find(name);
  if (entry == nullptr)
    throw ConfigError("task", "'" + name + "'", "one of " + task_registry().names_string());
  TaskParams full;
  std::string keys;
  for (const auto& prm : entry->parameters) {
    full.set(prm.name, prm.default_value);
    keys += (keys.empty() ? "" : ", ") + prm.name;
  }
  for (const auto& [key, value] : params.values()) {
    if (!full.has(key))
      throw ConfigError(key, "'" + value + "'",
                        "a parameter of task = " + name + ": one of " + (keys.empty() ? "(none)" : keys));
    full.set(key, value);
  }
  return entry->create(full);
}

}  // namespace seqlab
