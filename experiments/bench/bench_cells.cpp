// bench_cells: Google Benchmark cases of the experiments' own training cells. One iteration is
// one training update as the experiment binaries make it (train/loop.hpp's train_loop with one
// step): zero the gradients, forward, cross-entropy over the scored positions, backward, gradient
// clipping, optimizer step. The models come from the model factory (models/factory.hpp) with the
// ModelConfig the experiment builds for that cell at its paper scale (configs/paper.ini), and the
// batch from the experiment's task generator at the cell's sizes. What each case is, its counters,
// and how compare_pytorch.py --cells uses them: README.md beside this file.
//
// Legend: B batch, T seq_len (the width the model sees), V vocabulary (= output classes), E
// embedding_dim, H hidden_size (d_model for the transformers), h n_heads, F d_ff, L layers or TCN
// levels, k kernel_size.
//
// Cells (sizes from each experiment's configs/paper.ini and main.cpp's model_config / choose_model):
//   long_range_recall, task copy_memory, length 1000 (Bai et al.'s copy memory: T = 1020, V = 10),
//   B 32, param_budget 16000 (hidden_size_for_budget), embedding_dim 8, Adam lr 1e-3, clip 1:
//     rnn (tanh), lstm, gru: one layer; tcn: kernel 8, weight norm, the fewest levels whose receptive
//     field covers T (7); transformer_decoder: 2 layers, 2 heads, d_ff = 2·d_model, RoPE, pre-norm.
//   position_extrapolation, task copy, positional_encoding rope: decoder d_model 128, 4 layers,
//     4 heads, d_ff 512, pre-norm; rows of lengths 48..64 right-padded to T = 64 (key-padding
//     mask), B 32, AdamW lr 1e-3, weight decay 0.01, clip 1.
//   attention_ablations, arm mqar:decoder:separate:8 (the reference arm): decoder d_model 64,
//     4 layers, 8 heads, d_ff 256, sinusoidal, pre-norm, T 32, B 64, Adam lr 1e-3, clip 1.
// The batch is drawn once (from the task's generator, fixed seed) and reused by every update, so
// an iteration times the model's work, not the data generator; the learning rate is constant (the
// experiments' schedules only change a scalar). The result of the updates is not checked here
// (the tests do that); every iteration's loss must stay finite or the case stops with an error.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/copy_memory.hpp"
#include "seqlab/tasks/mqar.hpp"
#include "seqlab/tasks/repeat_copy.hpp"
#include "seqlab/train/loop.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"
#include "seqlab/version.hpp"

namespace {

using seqlab::IndexTensor2;
using seqlab::ModelConfig;
using seqlab::Rng;

constexpr std::uint64_t kSeed = 20240601;  // parameters and the batch; timings do not depend on it
// Used when the command line gives no --benchmark_min_time (Google Benchmark's default is 0.5 s).
constexpr const char* kDefaultMinTime = "--benchmark_min_time=1";

/// One update's inputs: token ids [B, T], targets [B, T] (seqlab::kIgnoreTarget where not
/// scored) and, for padded batches, the key-padding mask [B, T] (1 = padded).
struct CellBatch {
  IndexTensor2 inputs, targets;
  std::optional<seqlab::PaddingMask> padding;
};

/// A cell: the model, its batch and its optimizer, as the experiment builds them.
struct CellSpec {
  std::string name;  // case name: Cell_<experiment>_<variant>
  ModelConfig model;
  std::function<CellBatch(Rng&)> batch;
  std::string optimizer;  // adam | adamw
  float lr = 1e-3f, weight_decay = 0.0f;
  double clip_norm = 1.0;
};

// --- long_range_recall (experiments/long_range_recall/main.cpp: task_setup, model_config) -------

constexpr int kLrrLength = 1000;           // copy memory blank length T (sequence T + 20)
constexpr std::size_t kLrrBudget = 16000;  // param_budget
constexpr std::size_t kLrrBatch = 32;

/// main.cpp's tcn_levels_for: the fewest levels whose receptive field 1 + 2(k−1)(2^L − 1) covers
/// seq_len (at most 30).
std::size_t tcn_levels_for(std::size_t seq_len, std::size_t k) {
  std::size_t L = 1;
  while (L < 30 && 1 + 2 * (k - 1) * ((std::size_t{1} << L) - 1) < seq_len) ++L;
  return L;
}

CellSpec long_range_recall_cell(const std::string& model) {
  const seqlab::CopyMemoryTask task(kLrrLength);
  ModelConfig mc;
  mc.model = model;
  mc.input = "embedding";
  mc.vocab_size = mc.output_size = static_cast<std::size_t>(task.vocab_size());
  mc.head = "per_position";
  mc.dropout = 0.0f;
  mc.embedding_dim = 8;
  mc.hidden_size = 32;
  constexpr double kDffRatio = 2.0;
  if (mc.is_recurrent()) {
    mc.num_layers = 1;
    mc.nonlinearity = "tanh";
  } else if (model == "tcn") {
    mc.kernel_size = 8;
    mc.num_layers = tcn_levels_for(static_cast<std::size_t>(task.seq_len()), mc.kernel_size);
    mc.weight_norm = true;
  } else {  // transformer_decoder
    mc.num_layers = 2;
    mc.n_heads = 2;
    mc.positional_encoding = "rope";
    mc.norm_placement = "pre";
    mc.max_len = mc.train_len = static_cast<std::size_t>(task.seq_len());
    mc.embedding_dim = mc.hidden_size;
    mc.d_ff = static_cast<std::size_t>(std::llround(kDffRatio * static_cast<double>(mc.hidden_size)));
  }
  mc = seqlab::hidden_size_for_budget(mc, kLrrBudget, kDffRatio);
  CellSpec c;
  c.name = "Cell_long_range_recall_" + model;
  c.model = mc;
  c.batch = [task](Rng& rng) {
    seqlab::TokenBatch b = task.sample(kLrrBatch, rng);
    return CellBatch{std::move(b.inputs), std::move(b.targets), std::nullopt};
  };
  c.optimizer = "adam";
  return c;
}

// --- position_extrapolation (main.cpp: make_task "copy", model_config) --------------------------

CellSpec position_extrapolation_cell() {
  constexpr int kLTrain = 64, kMinTrainLen = 48, kAlphabet = 16;
  constexpr std::size_t kMaxEvalRatio = 8;
  ModelConfig mc;
  mc.model = "transformer_decoder";
  mc.input = "embedding";
  mc.vocab_size = mc.output_size = kAlphabet + 2;
  mc.embedding_dim = mc.hidden_size = 128;
  mc.num_layers = 4;
  mc.n_heads = 4;
  mc.d_ff = 512;
  mc.norm = "layer_norm";
  mc.norm_placement = "pre";
  mc.positional_encoding = "rope";
  mc.rope_pairing = "interleaved";
  mc.max_len = kLTrain * kMaxEvalRatio;  // learned_rows (used by `learned` only)
  mc.train_len = kLTrain;
  mc.dropout = 0.0f;
  mc.head = "per_position";
  CellSpec c;
  c.name = "Cell_position_extrapolation_copy_rope";
  c.model = mc;
  c.batch = [](Rng& rng) {
    seqlab::PaddedTokenBatch b = seqlab::RepeatCopyTask(kMinTrainLen, kLTrain, kAlphabet).sample(32, rng);
    return CellBatch{std::move(b.inputs), std::move(b.targets), std::move(b.padding)};
  };
  c.optimizer = "adamw";
  c.weight_decay = 0.01f;
  return c;
}

// --- attention_ablations (main.cpp: Problem for mqar, base_config, choose_model) ----------------

CellSpec attention_ablations_cell() {
  constexpr int kSeqLen = 32, kVocab = 32, kPairs = 8, kQueries = 8;
  const seqlab::MultiQueryAssociativeRecall task(kSeqLen, kPairs, kQueries, kVocab, kVocab);
  ModelConfig mc;
  mc.model = "transformer_decoder";
  mc.input = "embedding";
  mc.vocab_size = mc.output_size = static_cast<std::size_t>(task.vocab_size());
  mc.embedding_dim = mc.hidden_size = 64;
  mc.num_layers = 4;
  mc.n_heads = 8;
  mc.d_ff = 4 * 64;  // ff_mult · d_model
  mc.activation = "relu";
  mc.norm = "layer_norm";
  mc.norm_placement = "pre";
  mc.positional_encoding = "sinusoidal";
  mc.shared_qk = false;
  mc.dropout = 0.0f;
  mc.head = "per_position";
  CellSpec c;
  c.name = "Cell_attention_ablations_mqar_decoder_separate_8";
  c.model = mc;
  c.batch = [task](Rng& rng) {
    seqlab::TokenBatch b = task.sample(64, rng);
    return CellBatch{std::move(b.inputs), std::move(b.targets), std::nullopt};
  };
  c.optimizer = "adam";
  return c;
}

std::vector<CellSpec> all_cells() {
  std::vector<CellSpec> cells;
  for (const char* m : {"rnn", "lstm", "gru", "tcn", "transformer_decoder"})
    cells.push_back(long_range_recall_cell(m));
  cells.push_back(position_extrapolation_cell());
  cells.push_back(attention_ablations_cell());
  return cells;
}

/// Peak resident set size of this process so far, bytes (getrusage's ru_maxrss, KiB on Linux).
double peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) * 1024.0;
}

/// Arg: nthreads. Builds the cell's model and optimizer, draws its batch, runs one untimed update
/// (allocations), then times updates.
void bm_cell(benchmark::State& state, const CellSpec& spec) {
  std::size_t n_params = 0, B = 0, T = 0;
  try {
    seqlab::set_num_threads(static_cast<int>(state.range(0)));
    Rng rng(kSeed);
    const std::unique_ptr<seqlab::SequenceModel> model = seqlab::make_model(spec.model, rng);
    model->train();
    auto* tm = dynamic_cast<seqlab::TransformerModel*>(model.get());
    const std::vector<seqlab::Parameter*> params = model->parameters();
    n_params = model->num_parameters();
    seqlab::OptimizerConfig oc;
    oc.lr = spec.lr;
    oc.weight_decay = spec.weight_decay;
    const std::unique_ptr<seqlab::Optimizer> optim = seqlab::make_optimizer(spec.optimizer, params, oc);
    seqlab::LrSchedule schedule;
    schedule.base_lr = spec.lr;
    const CellBatch batch = spec.batch(rng);
    B = batch.inputs.shape()[0];
    T = batch.inputs.shape()[1];
    if (batch.padding && !tm)
      throw std::logic_error(spec.name + ": a padded batch needs a Transformer model");
    if (tm) tm->set_padding(batch.padding ? &*batch.padding : nullptr);

    seqlab::CrossEntropyLoss ce(seqlab::kIgnoreTarget);
    const seqlab::IndexTensor1 targets = seqlab::ids_of(batch.targets);
    seqlab::TrainOptions topt;
    topt.steps = 1;
    topt.clip_norm = spec.clip_norm;
    topt.quiet = true;
    const auto loss_and_grad = [&](int) -> double {
      const double loss = ce.forward(seqlab::rows_of(model->forward(batch.inputs)), targets);
      model->backward(seqlab::unrows(ce.backward(), B, T));
      return loss;
    };
    const auto update = [&] {
      const seqlab::TrainResult r = seqlab::train_loop(topt, params, *optim, schedule, loss_and_grad);
      if (r.diverged) throw std::runtime_error(spec.name + ": the update diverged (" + r.diverged_what + ")");
      return r.last_loss;
    };
    update();  // warm-up: caches and optimizer state allocated
    for (auto _ : state) {
      double loss = update();
      benchmark::DoNotOptimize(loss);
    }
    if (tm) tm->set_padding(nullptr);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  using benchmark::Counter;
  state.counters["tokens_per_s"] = Counter(static_cast<double>(B * T), Counter::kIsIterationInvariantRate);
  state.counters["n_params"] = Counter(static_cast<double>(n_params));
  state.counters["batch"] = Counter(static_cast<double>(B));
  state.counters["seq_len"] = Counter(static_cast<double>(T));
  state.counters["peak_rss_bytes"] = Counter(peak_rss_bytes(), Counter::kDefaults, Counter::kIs1024);
}

/// Thread budgets: 1 and the machine's cores (just 1 on a one-core machine).
std::vector<std::int64_t> thread_counts() {
  const int hw = seqlab::hardware_threads();
  if (hw <= 1) return {1};
  return {1, hw};
}

}  // namespace

int main(int argc, char** argv) {
  seqlab::ensure_blas_kernels(argv);  // OpenBLAS's generic fallback kernels on a CPU it does not know
  // argv with the default min time first, so that a --benchmark_min_time given later wins.
  std::vector<char*> args;
  std::string default_min_time = kDefaultMinTime;
  args.push_back(argv[0]);
  args.push_back(default_min_time.data());
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);

  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  // The specs outlive RunSpecifiedBenchmarks (the cases hold references to them).
  static const std::vector<CellSpec> cells = all_cells();
  for (const CellSpec& c : cells)
    benchmark::RegisterBenchmark(c.name.c_str(), bm_cell, c)
        ->ArgName("nthreads")
        ->ArgsProduct({thread_counts()})
        ->UseRealTime()  // OpenBLAS (and seqlab's own loops) run threads of their own
        ->Unit(benchmark::kMillisecond);
  benchmark::AddCustomContext("seqlab_version", seqlab::kVersion);
  benchmark::AddCustomContext("blas_config", seqlab::blas_config());
  benchmark::AddCustomContext("hardware_threads", std::to_string(seqlab::hardware_threads()));
  benchmark::AddCustomContext("peak_rss_bytes",
                              "ru_maxrss of the whole process at the end of the case: the case's "
                              "own peak only when the process runs one case");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
