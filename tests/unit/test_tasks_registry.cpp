// tasks/task.hpp: the task registry and the common Task form.
//   - the built-in tasks, in their documented order, with their parameters' defaults;
//   - every built-in's batches match its spec (shapes, id ranges, scored targets, padding and the
//     rows' real lengths), are
//     deterministic given the rng state, equal the wrapped task class's own samples, and train a
//     model built from apply_task_spec (one forward + loss is finite);
//   - parameters: overrides, unknown keys, malformed values and bad values are errors naming the
//     key; unknown task names list the registered ones; a task registered by the test works;
//   - mqar with min_len: padded rows of lengths in [min_len, seq_len] drawn in the documented order;
//   - reverse in its three layouts (encoder-decoder batches with decoder_tokens), markov_lm with a
//     64-bit grammar seed, and the ceilings (best_accuracy, optimal_loss) the entries state.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "temp_dir.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/copy_memory.hpp"
#include "seqlab/tasks/distance_probe.hpp"
#include "seqlab/tasks/markov_lm.hpp"
#include "seqlab/tasks/majority.hpp"
#include "seqlab/tasks/mqar.hpp"
#include "seqlab/tasks/reverse.hpp"
#include "seqlab/tasks/task.hpp"

using namespace seqlab;

namespace {

// A task registered by the test: every target is the input token (identity), no parameters
// other than its length.
SEQLAB_REGISTER(task_registry(), "echo",
                TaskEntry{"output the input token (test)",
                          {{"seq_len", "5", "tokens"}},
                          [](const TaskParams& p) {
                            TaskSpec s;
                            s.vocab_size = s.output_size = 3;
                            s.seq_len = static_cast<std::size_t>(p.get_int("seq_len"));
                            s.baseline_accuracy = 1.0 / 3.0;
                            s.baseline_loss = std::log(3.0);
                            return make_task_from(s, [T = s.seq_len](std::size_t B, Rng& rng) {
                              TaskBatch b;
                              b.tokens = IndexTensor2::from_shape({B, T});
                              for (auto& v : b.tokens) v = static_cast<std::int32_t>(rng.uniform_int(3));
                              b.targets = b.tokens;
                              return b;
                            });
                          }});

bool equal(const IndexTensor2& a, const IndexTensor2& b) {
  return a.shape() == b.shape() && std::equal(a.begin(), a.end(), b.begin());
}

// Loss of one forward of a tiny transformer built from the task's spec (classes) or an MSE
// (values): finite, so spec and batch fit the model and the loss.
double one_forward_loss(const Task& task, const TaskBatch& b) {
  const TaskSpec s = task.spec();
  ModelConfig c;
  c.model = "transformer_encoder";
  apply_task_spec(s, c);
  c.embedding_dim = c.hidden_size = 8;
  c.n_heads = 2;
  c.d_ff = 8;
  c.num_layers = 1;
  c.max_len = s.seq_len;
  Rng rng(1);
  const auto m = make_model(c, rng);
  const Tensor3 y = s.input == "embedding" ? m->forward(b.tokens) : m->forward(b.features);
  if (s.target == "values") {
    double e = 0;
    for (std::size_t i = 0; i < y.size(); ++i) e += std::pow(y.data()[i] - b.values.data()[i], 2);
    return e / double(y.size());
  }
  const std::size_t N = y.shape()[0] * y.shape()[1];
  Tensor2 logits = Tensor2::from_shape({N, y.shape()[2]});
  std::copy(y.begin(), y.end(), logits.begin());
  IndexTensor1 t = IndexTensor1::from_shape({N});
  std::copy(b.targets.begin(), b.targets.end(), t.begin());
  CrossEntropyLoss ce(kIgnoreTarget);
  return ce.forward(logits, t);
}

}  // namespace

TEST_CASE("the task registry lists the built-in tasks in order", "[tasks][registry]") {
  const std::vector<std::string> builtins{"copy_memory",    "adding",    "mqar",        "distance_probe",
                                          "induction_copy", "markov_lm", "previous_token",
                                          "repeat_copy",    "majority",  "reverse",     "char_lm",
                                          "text",           "lag_pair",  "duplicate_tag",
                                          "mqar_scattered", "passkey"};
  REQUIRE(task_names().size() == builtins.size() + 1);
  CHECK(std::vector<std::string>(task_names().begin(), task_names().begin() + builtins.size()) == builtins);
  CHECK(task_names().back() == "echo");
  for (const auto& n : task_names()) {
    const TaskEntry& e = task_registry().get(n);
    CHECK_FALSE(e.description.empty());
    for (const auto& p : e.parameters) CHECK_FALSE(p.help.empty());
  }
}

TEST_CASE("every built-in task samples batches that match its spec", "[tasks][registry]") {
  seqlab::test::TempDir dir("seqlab_tasks_registry");
  const std::string text_file = (dir.path / "text.txt").string();
  {
    std::ofstream f(text_file);
    for (int i = 0; i < 40; ++i) f << "the quick brown fox jumps over the lazy dog. ";
  }
  for (const auto& name : task_names()) {
    INFO(name);
    TaskParams p;
    if (name == "char_lm") p.set("text_file", text_file);
    if (name == "text") p.set("corpus", text_file);
    const auto task = make_task(name, p);
    const TaskSpec s = task->spec();
    const std::size_t B = 6, T = s.seq_len;
    Rng r1(17), r2(17);
    const TaskBatch b = task->sample(B, r1);
    const TaskBatch again = task->sample(B, r2);
    CHECK(T >= 1);
    CHECK(s.output_size >= 1);
    if (s.input == "embedding") {
      REQUIRE(b.tokens.shape() == std::array<std::size_t, 2>{B, T});
      CHECK(equal(b.tokens, again.tokens));
      for (auto v : b.tokens) {
        CHECK(v >= 0);
        CHECK(static_cast<std::size_t>(v) < s.vocab_size);
      }
    } else {
      REQUIRE(s.input == "linear");
      REQUIRE(b.features.shape() == std::array<std::size_t, 3>{B, T, s.input_size});
      CHECK(std::equal(b.features.begin(), b.features.end(), again.features.begin()));
    }
    const std::size_t rows_out = s.head == "per_position" ? T : 1;
    if (s.target == "classes") {
      REQUIRE(b.targets.shape() == std::array<std::size_t, 2>{B, rows_out});
      CHECK(equal(b.targets, again.targets));
      std::size_t scored = 0;
      for (auto v : b.targets) {
        if (v == kIgnoreTarget) continue;
        ++scored;
        CHECK(v >= 0);
        CHECK(static_cast<std::size_t>(v) < s.output_size);
      }
      CHECK(scored >= B);  // at least one scored target per row
      CHECK(s.baseline_loss > 0);
    } else {
      REQUIRE(s.target == "values");
      REQUIRE(b.values.shape() == std::array<std::size_t, 3>{B, rows_out, s.output_size});
      CHECK(std::isnan(s.baseline_accuracy));
    }
    if (s.padded) {
      REQUIRE(b.padding.shape() == std::array<std::size_t, 2>{B, T});
      // Right padding: the mask is 1 exactly from each row's real length on.
      REQUIRE(b.lengths.shape() == std::array<std::size_t, 1>{B});
      for (std::size_t r = 0; r < B; ++r) {
        CHECK(b.lengths(r) >= 1);
        CHECK(static_cast<std::size_t>(b.lengths(r)) <= T);
        for (std::size_t t = 0; t < T; ++t)
          CHECK(b.padding(r, t) == (static_cast<std::int32_t>(t) >= b.lengths(r) ? 1 : 0));
      }
      CHECK(std::equal(b.lengths.begin(), b.lengths.end(), again.lengths.begin()));
    } else {
      CHECK(b.padding.size() == 0);
      CHECK(b.lengths.size() == 0);
    }
    if (name != "majority") CHECK(std::isnan(s.expected_pad_fraction));
    CHECK(std::isfinite(one_forward_loss(*task, b)));
    CHECK_THROWS_AS(task->sample(0, r1), std::invalid_argument);
  }
}

TEST_CASE("a registered task is the wrapped class with its defaults", "[tasks][registry]") {
  const auto task = make_task("copy_memory");
  const CopyMemoryTask direct(50, 10, 8);  // the documented defaults
  Rng r1(3), r2(3);
  const TaskBatch b = task->sample(4, r1);
  const TokenBatch d = direct.sample(4, r2);
  CHECK(equal(b.tokens, d.inputs));
  CHECK(equal(b.targets, d.targets));
  const TaskSpec s = task->spec();
  CHECK(s.seq_len == 70);
  CHECK(s.vocab_size == 10);
  // The predictor that ignores the symbols' order: exact on the 60 blank targets, the most
  // frequent source symbol on the 10 recall targets.
  CHECK(s.baseline_loss == Approx(10 * direct.most_frequent_symbol_loss() / 70.0));
  CHECK(s.baseline_accuracy == Approx((60 + 10 * direct.most_frequent_symbol_accuracy()) / 70.0));
  CHECK(s.dependent_baseline_accuracy == Approx(direct.most_frequent_symbol_accuracy()));
  CHECK(s.dependent_baseline_accuracy > direct.chance_recall_accuracy());

  TaskParams p;
  p.set("T", "5");
  p.set("n_symbols", "3");
  const TaskSpec small = make_task("copy_memory", p)->spec();
  CHECK(small.seq_len == 25);
  CHECK(small.vocab_size == 5);

  ModelConfig c;
  c.input = "linear";
  apply_task_spec(make_task("mqar")->spec(), c);
  CHECK(c.input == "embedding");
  CHECK(c.vocab_size == 33);
  CHECK(c.output_size == 33);
  CHECK(c.head == "per_position");
  apply_task_spec(make_task("adding")->spec(), c);
  CHECK(c.input == "linear");
  CHECK(c.input_size == 2);
  CHECK(c.output_size == 1);
  CHECK(c.head == "last_position");
}

TEST_CASE("the majority task carries each row's label, real length and padding fraction", "[tasks][registry]") {
  const auto task = make_task("majority", TaskParams({{"seq_len", "12"}, {"pad_fraction", "0.5"},
                                                      {"n_classes", "3"}, {"min_len", "2"}}));
  const MajorityTask direct(12, 0.5, 3, 4, 2);
  Rng r1(7), r2(7);
  const TaskBatch b = task->sample(9, r1);
  const PaddedClassificationBatch d = direct.sample(9, r2);  // the same draws
  CHECK(equal(b.tokens, d.inputs));
  REQUIRE(b.targets.shape() == std::array<std::size_t, 2>{9, 1});
  REQUIRE(b.lengths.shape() == std::array<std::size_t, 1>{9});
  bool varied = false;
  for (std::size_t r = 0; r < 9; ++r) {
    CHECK(b.targets(r, 0) == d.labels(r));
    CHECK(b.lengths(r) == d.lengths(r));
    varied = varied || b.lengths(r) != b.lengths(0);
  }
  CHECK(varied);  // p = 0.5, T = 12, min_len 2: L uniform on {2..10}
  const TaskSpec s = task->spec();
  CHECK(s.expected_pad_fraction == direct.expected_pad_fraction());
  CHECK(s.expected_pad_fraction == 0.5);
  CHECK(s.baseline_accuracy == direct.chance_accuracy());
  // Slicing keeps each row's length with its row.
  const TaskBatch part = slice_rows(b, 3, 4);
  REQUIRE(part.lengths.size() == 4);
  for (std::size_t r = 0; r < 4; ++r) CHECK(part.lengths(r) == b.lengths(3 + r));
}

TEST_CASE("task names and parameters are checked with messages naming the key", "[tasks][registry][errors]") {
  CHECK_THROWS_WITH(make_task("copy"), "task = 'copy': allowed one of " + task_registry().names_string());
  TaskParams unknown;
  unknown.set("length", "10");
  CHECK_THROWS_WITH(make_task("copy_memory", unknown),
                    "length = '10': allowed a parameter of task = copy_memory: one of T, n_memorize, "
                    "n_symbols");
  TaskParams malformed;
  malformed.set("T", "ten");
  CHECK_THROWS_WITH(make_task("copy_memory", malformed),
                    "T = 'ten': allowed an integer in [-2147483648, 2147483647]");
  malformed.set("T", "1e99");
  CHECK_THROWS_AS(make_task("copy_memory", malformed), ConfigError);
  TaskParams real;
  real.set("pad_fraction", "lots");
  CHECK_THROWS_WITH(make_task("majority", real), "pad_fraction = 'lots': allowed a finite real");
  // Values the task class rejects: its own std::invalid_argument, naming the argument.
  TaskParams zero;
  zero.set("T", "0");
  CHECK_THROWS_AS(make_task("copy_memory", zero), std::invalid_argument);
  // char_lm needs a text file.
  CHECK_THROWS_WITH(make_task("char_lm"), "text_file = '': allowed a value (required)");
  TaskParams missing;
  missing.set("text_file", "/nonexistent/seqlab/text.txt");
  CHECK_THROWS_AS(make_task("char_lm", missing), std::runtime_error);
  TaskParams split;
  split.set("text_file", "x");
  split.set("split", "valid");
  CHECK_THROWS_WITH(make_task("char_lm", split), "split = 'valid': allowed one of train, test");
  CHECK_THROWS_AS(make_task_from(TaskSpec{}, {}), std::invalid_argument);
}

TEST_CASE("a task registered by the program works like a built-in", "[tasks][registry]") {
  TaskParams p;
  p.set("seq_len", "4");
  const auto task = make_task("echo", p);
  Rng rng(2);
  const TaskBatch b = task->sample(3, rng);
  CHECK(b.tokens.shape() == std::array<std::size_t, 2>{3, 4});
  CHECK(equal(b.tokens, b.targets));
  CHECK(std::isfinite(one_forward_loss(*task, b)));
}

TEST_CASE("dependency tasks report how far back each scored target's evidence lies", "[tasks][registry][distances]") {
  Rng rng(11);
  SECTION("mqar: a query's distance is back to its key in the context") {
    const auto t = make_task("mqar", TaskParams({{"seq_len", "16"}, {"n_pairs", "3"}, {"n_queries", "3"}}));
    const TaskBatch b = t->sample(20, rng);
    REQUIRE(b.distances.shape() == b.targets.shape());
    std::size_t queries = 0;
    for (std::size_t r = 0; r < 20; ++r)
      for (std::size_t c = 0; c < 16; ++c) {
        const int d = b.distances(r, c);
        if (b.targets(r, c) == kIgnoreTarget) {
          CHECK(d == 0);
          continue;
        }
        ++queries;
        REQUIRE(d >= 1);
        REQUIRE(static_cast<int>(c) - d >= 0);
        CHECK(b.tokens(r, c - d) == b.tokens(r, c));          // the queried key
        CHECK(b.tokens(r, c - d + 1) == b.targets(r, c));     // followed by its value
      }
    CHECK(queries == 60);
    CHECK(t->spec().dependent_baseline_accuracy == t->spec().baseline_accuracy);
  }
  SECTION("distance_probe: the symbol lies d back from the query; a fixed distance draws as sample_at") {
    const auto t = make_task("distance_probe", TaskParams(std::map<std::string, std::string>{{"seq_len", "12"}}));
    const TaskBatch b = t->sample(30, rng);
    for (std::size_t r = 0; r < 30; ++r) {
      const int d = b.distances(r, 11);
      REQUIRE(d >= 1);
      CHECK(b.tokens(r, 11 - d) == b.targets(r, 11));
      for (std::size_t c = 0; c < 11; ++c) CHECK(b.distances(r, c) == 0);
    }
    const auto fixed = make_task("distance_probe",
                                 TaskParams({{"seq_len", "12"}, {"min_distance", "4"}, {"max_distance", "4"}}));
    Rng a(5), c(5);
    const TaskBatch f = fixed->sample(8, a);
    const TokenBatch ref = DistanceProbe(12, 8, 8).sample_at(8, 4, c);
    CHECK(f.tokens == ref.inputs);
    CHECK(f.targets == ref.targets);
  }
  SECTION("adding: the distance from the first marked value to the last step") {
    const auto t = make_task("adding", TaskParams(std::map<std::string, std::string>{{"seq_len", "10"}}));
    const TaskBatch b = t->sample(15, rng);
    REQUIRE(b.distances.shape() == std::array<std::size_t, 2>{15, 1});
    for (std::size_t r = 0; r < 15; ++r) {
      std::size_t first = 10;
      for (std::size_t c = 0; c < 10 && first == 10; ++c)
        if (b.features(r, c, 1) == 1.0f) first = c;
      CHECK(b.distances(r, 0) == static_cast<int>(9 - first));
    }
    CHECK(t->spec().dependent_baseline_loss == t->spec().baseline_loss);
  }
  SECTION("copy_memory: recall targets depend on the symbol T + n_memorize back, blanks on none") {
    const auto t = make_task("copy_memory", TaskParams({{"T", "5"}, {"n_memorize", "3"}}));
    const TaskBatch b = t->sample(4, rng);
    for (std::size_t c = 0; c < b.targets.shape()[1]; ++c) {
      CHECK(b.distances(0, c) == (c >= 8 ? 8 : 0));
      if (c >= 8) CHECK(b.tokens(0, c - 8) == b.targets(0, c));
    }
    CHECK(t->spec().dependent_baseline_accuracy == CopyMemoryTask(5, 3).most_frequent_symbol_accuracy());
  }
}

TEST_CASE("mqar with min_len draws padded rows of lengths in [min_len, seq_len]", "[tasks][registry][padded]") {
  const TaskParams p({{"seq_len", "20"}, {"n_pairs", "2"}, {"n_queries", "2"}, {"n_keys", "6"},
                      {"n_values", "5"}, {"min_len", "9"}});
  const auto t = make_task("mqar", p);
  const TaskSpec s = t->spec();
  CHECK(s.padded);
  CHECK(s.seq_len == 20);
  CHECK(s.vocab_size == 12);
  // As without min_len: the same key-agnostic predictor (the most frequent context value).
  const MultiQueryAssociativeRecall direct(20, 2, 2, 6, 5);
  CHECK(s.baseline_accuracy == direct.key_agnostic_accuracy());
  CHECK(s.baseline_loss == direct.key_agnostic_loss());
  CHECK(s.baseline_accuracy == Approx(0.6));  // P = 2 over 5 values: E[max count] / P = (6/5) / 2
  Rng a(3), replay(3);
  const TaskBatch b = t->sample(40, a);
  REQUIRE(b.padding.shape() == std::array<std::size_t, 2>{40, 20});
  std::set<std::size_t> lengths;
  for (std::size_t r = 0; r < 40; ++r) {
    INFO("row " << r);
    // The documented draw order: the row's length, then one row of MQAR at that length.
    const auto len = static_cast<std::size_t>(9 + replay.uniform_int(std::uint64_t{12}));
    const TokenBatch ref = MultiQueryAssociativeRecall(static_cast<int>(len), 2, 2, 6, 5).sample(1, replay);
    lengths.insert(len);
    for (std::size_t c = 0; c < 20; ++c) {
      CHECK(b.padding(r, c) == (c >= len ? 1 : 0));
      CHECK(b.tokens(r, c) == (c < len ? ref.inputs(0, c) : 0));
      CHECK(b.targets(r, c) == (c < len ? ref.targets(0, c) : kIgnoreTarget));
      if (b.targets(r, c) == kIgnoreTarget) {
        CHECK(b.distances(r, c) == 0);
      } else {
        const int d = b.distances(r, c);
        REQUIRE(d >= 1);
        CHECK(b.tokens(r, c - d) == b.tokens(r, c));       // the queried key
        CHECK(b.tokens(r, c - d + 1) == b.targets(r, c));  // followed by its value
      }
    }
  }
  CHECK(lengths.size() > 6);  // 12 possible lengths over 40 rows
  CHECK(*lengths.begin() >= 9);
  CHECK(*lengths.rbegin() <= 20);
  // min_len = seq_len: every row full length, nothing padded; the length draw still happens.
  Rng c(4), d(4);
  const TaskBatch full = make_task("mqar", TaskParams({{"seq_len", "12"}, {"n_pairs", "2"}, {"n_queries", "2"},
                                                       {"min_len", "12"}}))->sample(3, c);
  for (auto v : full.padding) CHECK(v == 0);
  d.uniform_int(std::uint64_t{1});
  const IndexTensor2 first = slice_rows(full.tokens, 0, 1);
  const TokenBatch ref = MultiQueryAssociativeRecall(12, 2, 2, 16, 16).sample(1, d);
  CHECK(first == ref.inputs);
  // min_len outside [2P + 2Q, seq_len] names the key.
  for (const char* bad : {"7", "21", "-1"}) {
    TaskParams q = p;
    q.set("min_len", bad);
    INFO(bad);
    try {
      make_task("mqar", q);
      FAIL("no error");
    } catch (const ConfigError& e) {
      CHECK(e.key() == "min_len");
      CHECK_THAT(e.what(), Catch::Contains("[2 * n_pairs + 2 * n_queries = 8, seq_len = 20]"));
    }
  }
}

TEST_CASE("reverse comes in the prefix LM, tagging and seq2seq layouts of ReverseTask", "[tasks][registry]") {
  const ReverseTask direct(4, 5);
  auto layout = [](const char* l) {
    return make_task("reverse", TaskParams({{"length", "4"}, {"n_symbols", "5"}, {"layout", l}}));
  };
  Rng r0(9);
  const TransductionBatch pair = direct.sample(3, r0);
  SECTION("prefix_lm (the default): [x, sep, y_<n-1], the target half scored") {
    const auto t = make_task("reverse", TaskParams({{"length", "4"}, {"n_symbols", "5"}}));
    Rng rng(9);
    const TaskBatch b = t->sample(3, rng);
    const TokenBatch ref = direct.prefix_lm(pair);
    CHECK(b.tokens == ref.inputs);
    CHECK(b.targets == ref.targets);
    CHECK(b.decoder_tokens.size() == 0);
    CHECK(t->spec().seq_len == 8);
    CHECK(t->spec().decoder_len == 0);
  }
  SECTION("tagging: x -> y position by position") {
    const auto t = layout("tagging");
    Rng rng(9);
    const TaskBatch b = t->sample(3, rng);
    CHECK(b.tokens == pair.source);
    CHECK(b.targets == pair.target);
    CHECK(b.decoder_tokens.size() == 0);
    CHECK(t->spec().seq_len == 4);
    CHECK(t->spec().decoder_len == 0);
  }
  SECTION("seq2seq: source x, decoder input [bos, y_<n-1], targets y") {
    const auto t = layout("seq2seq");
    Rng rng(9);
    const TaskBatch b = t->sample(3, rng);
    CHECK(b.tokens == pair.source);
    CHECK(b.decoder_tokens == direct.decoder_input(pair));
    CHECK(b.targets == pair.target);
    const TaskSpec s = t->spec();
    CHECK(s.seq_len == 4);
    CHECK(s.decoder_len == 4);
    const TaskBatch part = slice_rows(b, 1, 2);
    CHECK(part.decoder_tokens(0, 1) == b.decoder_tokens(1, 1));
    CHECK(eval_set(b).decoder_tokens == &b.decoder_tokens);
  }
  // Every layout: the separator / bos is input only; the head predicts the 5 symbols.
  for (const char* l : {"prefix_lm", "tagging", "seq2seq"}) {
    const TaskSpec s = layout(l)->spec();
    CHECK(s.vocab_size == 6);
    CHECK(s.output_size == 5);
  }
  CHECK_THROWS_WITH(layout("lm"), "layout = 'lm': allowed one of prefix_lm, tagging, seq2seq");
}

TEST_CASE("markov_lm takes any 64-bit grammar seed and states its Bayes ceiling", "[tasks][registry]") {
  const std::uint64_t seed = 18446744073709551557ull;  // above 2^63
  const auto t = make_task("markov_lm", TaskParams({{"seq_len", "12"}, {"vocab_size", "6"},
                                                    {"branching", "3"},
                                                    {"grammar_seed", std::to_string(seed)}}));
  const MarkovLanguageTask direct(12, 6, 2, 3, seed);
  Rng r1(4), r2(4);
  const TaskBatch b = t->sample(5, r1);
  const TokenBatch d = direct.sample(5, r2);
  CHECK(b.tokens == d.inputs);
  CHECK(b.targets == d.targets);
  CHECK(t->spec().best_accuracy == direct.bayes_accuracy());
  CHECK(t->spec().optimal_loss == direct.optimal_loss());
  CHECK(t->spec().best_accuracy == Approx(4.0 / 7.0));
  for (const char* bad : {"-1", "18446744073709551616", "7x", " 7"}) {
    INFO(bad);
    CHECK_THROWS_WITH(make_task("markov_lm", TaskParams(std::map<std::string, std::string>{{"grammar_seed", bad}})),
                      std::string("grammar_seed = '") + bad +
                          "': allowed an integer in [0, 18446744073709551615]");
  }
}

TEST_CASE("tasks with exact targets state a ceiling of accuracy 1 and loss 0", "[tasks][registry]") {
  for (const char* name : {"mqar", "induction_copy", "previous_token", "majority", "reverse"}) {
    INFO(name);
    const TaskSpec s = make_task(name)->spec();
    CHECK(s.best_accuracy == 1.0);
    CHECK(s.optimal_loss == 0.0);
  }
  // Entries that state none leave NaN.
  CHECK(std::isnan(make_task("adding")->spec().best_accuracy));
}
