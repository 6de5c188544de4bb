// attention_ablations: claim 5 of the README — separate W_Q and W_K matter (a shared projection
// makes Q Kᵀ symmetric); several heads beat one; encoder-only, decoder-only and encoder-decoder
// suit different tasks. Claim, method, expected outcome and the CSV columns: README.md beside this
// file.
//
// One cell = one ARM (task, architecture, Q/K sharing, n_heads) and one replicate: a small
// Transformer is trained on fresh batches of a synthetic task and evaluated on a fixed test set.
// The grid is the list of arms (the union of three sub-designs, listed explicitly in the configs):
//   Q/K sharing  separate vs shared W_Q = W_K, decoder-only, on tasks whose attention must be
//                asymmetric (prev_token, mqar, induction) and one where it need not be (majority);
//   n_heads      1, 2, 4, 8 at fixed d_model on the same tasks;
//   architecture encoder-only vs decoder-only vs encoder-decoder at matched parameter counts on
//                classification (majority), transduction (reverse) and generation (lm).
//
// Models (models/ factory): token embedding + sinusoidal positions (added: keeps a shared-QK
// score matrix exactly symmetric) -> pre-norm layers -> linear head.
//   encoder          "transformer_encoder", num_layers bidirectional layers
//   decoder          "transformer_decoder", num_layers causal layers (GPT block)
//   encoder_decoder  "transformer_encoder_decoder", num_layers / 2 encoder + num_layers / 2
//                    decoder layers, the width shrunk and d_ff adjusted so that count_parameters
//                    matches the decoder-only model's at d_model (choose_model)
// Legend: B batch, T seq_len, V vocabulary, D d_model, h n_heads, L num_layers, O output classes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/encoder_decoder_model.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/attention.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/induction_copy.hpp"
#include "seqlab/tasks/majority.hpp"
#include "seqlab/tasks/markov_lm.hpp"
#include "seqlab/tasks/mqar.hpp"
#include "seqlab/tasks/previous_token.hpp"
#include "seqlab/tasks/reverse.hpp"
#include "seqlab/train/loop.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"

using namespace seqlab;
using namespace seqlab::experiment;

namespace {

constexpr const char* kName = "attention_ablations";
// Purposes of the replicate's random streams (Cell::stream_seed): shared by every arm with the
// same replicate index, so comparisons across arms are paired (same data, same test set; the
// initialisation stream is the same too, though models of different shapes draw it differently).
constexpr std::uint64_t kInitStream = 1;     // parameter initialisation
constexpr std::uint64_t kTrainStream = 2;    // training batches
constexpr std::uint64_t kTestStream = 3;     // the fixed test set
constexpr std::uint64_t kEvalStream = 4;     // the fixed set evaluated during training
constexpr std::uint64_t kGrammarStream = 5;  // the Markov source of the lm task
// Forwards for evaluation run in chunks of at most this many sequences.
constexpr std::size_t kEvalChunk = 128;
// Sequences of the test set used for the attention diagnostics (logit asymmetry, attention mass).
constexpr std::size_t kProbeRows = 32;

const std::vector<std::string> kTasks = {"prev_token", "mqar", "induction", "majority", "reverse",
                                         "lm"};
const std::vector<std::string> kArchs = {"encoder", "decoder", "encoder_decoder"};
const std::vector<std::string> kQk = {"separate", "shared"};
// The arms of configs/quick.ini (the built-in default of the `arm` key).
const std::vector<std::string> kQuickArms = {
    // Q/K sharing (decoder, 4 heads) on three asymmetric tasks and the symmetric control,
    // plus the bidirectional encoder on prev_token
    "prev_token:decoder:separate:4", "prev_token:decoder:shared:4", "mqar:decoder:separate:4",
    "mqar:decoder:shared:4", "induction:decoder:separate:4", "induction:decoder:shared:4",
    "majority:decoder:separate:4", "majority:decoder:shared:4", "prev_token:encoder:separate:4",
    "prev_token:encoder:shared:4",
    // n_heads 1, 2, 8 (4 is above) at d_model 32
    "prev_token:decoder:separate:1", "prev_token:decoder:separate:2", "prev_token:decoder:separate:8",
    "mqar:decoder:separate:1", "mqar:decoder:separate:2", "mqar:decoder:separate:8",
    "induction:decoder:separate:1", "induction:decoder:separate:2", "induction:decoder:separate:8",
    "majority:decoder:separate:1", "majority:decoder:separate:2", "majority:decoder:separate:8",
    // architectures at matched parameter counts (majority:decoder:separate:4 is above)
    "majority:encoder:separate:4", "majority:encoder_decoder:separate:4",
    "reverse:encoder:separate:4", "reverse:decoder:separate:4", "reverse:encoder_decoder:separate:4",
    "lm:decoder:separate:4", "lm:encoder_decoder:separate:4"};

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

// ---------------------------------------------------------------------------------------------
// Arms: "task:arch:qk:n_heads".

struct Arm {
  std::string task, arch, qk;
  std::size_t n_heads = 0;
};

/// Architectures that can do `task` (and why not, for the others).
std::vector<std::string> archs_for(const std::string& task) {
  if (task == "prev_token" || task == "mqar") return {"encoder", "decoder"};
  if (task == "induction") return {"decoder"};
  if (task == "lm") return {"decoder", "encoder_decoder"};
  return kArchs;  // majority, reverse
}

std::string why_not(const std::string& task, const std::string& arch) {
  if (arch == "encoder" && (task == "induction" || task == "lm"))
    return "its target is the next input token, which a bidirectional encoder sees";
  return "the per-position tagging tasks are run on single-stack models only";
}

[[noreturn]] void bad_arm(const std::string& text, const std::string& why) {
  throw experiment::ConfigError(
      "arm: invalid value '" + text + "': " + why + "; expected task:arch:qk:n_heads with task " +
      join(kTasks, "|") + ", arch " + join(kArchs, "|") + ", qk " + join(kQk, "|") +
      ", n_heads an integer >= 1 dividing d_model");
}

Arm parse_arm(const std::string& text, std::size_t d_model) {
  std::vector<std::string> f;
  std::stringstream ss(text);
  for (std::string x; std::getline(ss, x, ':');) f.push_back(x);
  if (f.size() != 4 || text.back() == ':') bad_arm(text, "not four ':'-separated fields");
  Arm a{f[0], f[1], f[2], 0};
  if (std::find(kTasks.begin(), kTasks.end(), a.task) == kTasks.end())
    bad_arm(text, "unknown task '" + a.task + "'");
  if (std::find(kArchs.begin(), kArchs.end(), a.arch) == kArchs.end())
    bad_arm(text, "unknown arch '" + a.arch + "'");
  if (std::find(kQk.begin(), kQk.end(), a.qk) == kQk.end())
    bad_arm(text, "unknown qk '" + a.qk + "'");
  const std::string& h = f[3];
  if (h.empty() || h.size() > 6 || h.find_first_not_of("0123456789") != std::string::npos)
    bad_arm(text, "n_heads '" + h + "' is not an integer in [1, 999999]");
  a.n_heads = static_cast<std::size_t>(std::stoul(h));
  if (a.n_heads < 1 || d_model % a.n_heads != 0)
    bad_arm(text, "n_heads " + h + " does not divide d_model = " + std::to_string(d_model));
  const auto ok = archs_for(a.task);
  if (std::find(ok.begin(), ok.end(), a.arch) == ok.end())
    bad_arm(text, "arch " + a.arch + " cannot run task " + a.task + " (" + why_not(a.task, a.arch) +
                      "; allowed for " + a.task + ": " + join(ok, "|") + ")");
  return a;
}

// ---------------------------------------------------------------------------------------------
// Problems: one task laid out for one architecture.

/// What a model consumes and is scored on. Single-stack models read src only; the encoder-decoder
/// reads src and tgt_in (teacher forcing). targets [B, T_out] (T_out = 1 for a last_position head),
/// kIgnoreTarget at unscored positions.
struct Batch {
  IndexTensor2 src, tgt_in, targets;
};

/// [B, T] columns [c0, c1) of x.
IndexTensor2 columns(const IndexTensor2& x, std::size_t c0, std::size_t c1) {
  const std::size_t B = x.shape()[0];
  IndexTensor2 y = IndexTensor2::from_shape({B, c1 - c0});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t c = c0; c < c1; ++c) y(b, c - c0) = x(b, c);
  return y;
}

/// [B] labels -> [B, 1].
IndexTensor2 as_column(const IndexTensor1& labels) {
  IndexTensor2 y = IndexTensor2::from_shape({labels.size(), 1});
  for (std::size_t b = 0; b < labels.size(); ++b) y(b, 0) = labels(b);
  return y;
}

/// [B, 1] filled with `id`.
IndexTensor2 constant_column(std::size_t B, std::int32_t id) {
  IndexTensor2 y = IndexTensor2::from_shape({B, 1});
  y.fill(id);
  return y;
}

class Problem {
 public:
  /// Builds the task of `arm` from the cell's task keys. Throws experiment::ConfigError naming the
  /// key for sizes the task rejects (also called from validate, before anything runs).
  Problem(const Cell& cell, const Arm& arm) : arm_(arm) {
    const int T = cell.get_int32("seq_len");
    const int V = cell.get_int32("vocab");
    const std::string& task = arm.task;
    auto need = [&](bool ok, const std::string& key, const std::string& what) {
      if (!ok)
        throw experiment::ConfigError(key + ": invalid value '" + cell.params.text(key) +
                                      "': task " + task + " needs " + what);
    };
    if (task == "prev_token") {
      prev_.emplace(T, V, 1);
      vocab_ = V;
      n_out_ = static_cast<std::size_t>(V);
      chance_acc_ = prev_->chance_accuracy();
      chance_loss_ = prev_->chance_loss();
    } else if (task == "mqar") {
      const int P = cell.get_int32("mqar_pairs"), Q = cell.get_int32("mqar_queries");
      need(Q <= P, "mqar_queries", "mqar_queries <= mqar_pairs (" + std::to_string(P) + ")");
      need(V >= P, "vocab", "vocab >= mqar_pairs (" + std::to_string(P) + ", distinct keys)");
      need(T >= 2 * P + 2 * Q, "seq_len",
           "seq_len >= 2 * (mqar_pairs + mqar_queries) = " + std::to_string(2 * P + 2 * Q));
      mqar_.emplace(T, P, Q, V, V);
      vocab_ = mqar_->vocab_size();
      n_out_ = static_cast<std::size_t>(vocab_);
      chance_acc_ = mqar_->chance_accuracy();
      chance_loss_ = mqar_->chance_loss();
    } else if (task == "induction") {
      const int m = T / 3, n = T - m;
      need(m >= 2, "seq_len", "seq_len >= 6 (prefix 2/3, repeat 1/3 of it, >= 2 tokens)");
      need(V >= n, "vocab", "vocab >= the prefix length seq_len - seq_len/3 = " + std::to_string(n) +
                                " (distinct prefix tokens)");
      induction_.emplace(n, m, V);
      vocab_ = V;
      n_out_ = static_cast<std::size_t>(V);
      chance_acc_ = induction_->chance_accuracy();
      chance_loss_ = induction_->chance_loss();
    } else if (task == "majority") {
      const int K = cell.get_int32("majority_classes"), M = cell.get_int32("majority_noise");
      need(T >= 2, "seq_len", "seq_len >= 2");
      majority_.emplace(T, 0.0, K, M, std::min(4, T));
      vocab_ = majority_->vocab_size() + (arm.arch == "encoder_decoder" ? 1 : 0);  // + bos
      n_out_ = static_cast<std::size_t>(K);
      last_position_ = arm.arch != "encoder_decoder";
      chance_acc_ = majority_->chance_accuracy();
      chance_loss_ = majority_->chance_loss();
    } else if (task == "reverse") {
      need(T >= 2, "seq_len", "seq_len >= 2 (sequences of seq_len / 2 symbols)");
      reverse_.emplace(T / 2, V);
      vocab_ = reverse_->vocab_size();  // symbols + separator/bos, for every architecture
      n_out_ = static_cast<std::size_t>(V);
      chance_acc_ = reverse_->chance_accuracy();
      chance_loss_ = reverse_->chance_loss();
    } else {  // lm
      const int k = cell.get_int32("lm_order"), K = cell.get_int32("lm_branching");
      need(T / 2 >= k, "seq_len", "seq_len / 2 >= lm_order (" + std::to_string(k) +
                                      ": the source half holds the first context)");
      need(K <= V, "lm_branching", "lm_branching <= vocab (" + std::to_string(V) + ")");
      double contexts = 1;
      for (int i = 0; i < k; ++i) contexts *= V;
      need(contexts <= 1048576.0, "lm_order", "vocab^lm_order <= 2^20 contexts");
      lm_.emplace(T, V, k, K, cell.stream_seed(kGrammarStream));
      vocab_ = V + (arm.arch == "encoder_decoder" ? 1 : 0);  // + bos
      n_out_ = static_cast<std::size_t>(V);
      chance_acc_ = lm_->chance_accuracy();
      chance_loss_ = lm_->chance_loss();
      best_acc_ = lm_->bayes_accuracy();
      optimal_loss_ = lm_->optimal_loss();
    }
  }

  /// `batch` examples from `rng`. `eval`: for the decoder-only lm, score only the continuation
  /// half (the positions the encoder-decoder is scored on); training scores every position.
  Batch sample(std::size_t batch, Rng& rng, bool eval) const {
    const std::string& task = arm_.task;
    const bool ed = arm_.arch == "encoder_decoder";
    Batch out;
    if (task == "prev_token" || task == "mqar" || task == "induction") {
      TokenBatch tb = prev_ ? prev_->sample(batch, rng)
                            : mqar_ ? mqar_->sample(batch, rng) : induction_->sample(batch, rng);
      out.src = std::move(tb.inputs);
      out.targets = std::move(tb.targets);
    } else if (task == "majority") {
      PaddedClassificationBatch mb = majority_->sample(batch, rng);
      out.src = std::move(mb.inputs);
      out.targets = as_column(mb.labels);
      if (ed) out.tgt_in = constant_column(batch, majority_->vocab_size());  // bos
    } else if (task == "reverse") {
      TransductionBatch pair = reverse_->sample(batch, rng);
      if (arm_.arch == "decoder") {
        TokenBatch tb = reverse_->prefix_lm(pair);
        out.src = std::move(tb.inputs);
        out.targets = std::move(tb.targets);
      } else {
        if (ed) out.tgt_in = reverse_->decoder_input(pair);
        out.src = std::move(pair.source);
        out.targets = std::move(pair.target);
      }
    } else {  // lm
      TokenBatch tb = lm_->sample(batch, rng);
      const std::size_t T = static_cast<std::size_t>(lm_->seq_len()), m = T / 2;
      if (ed) {
        const std::int32_t bos = lm_->vocab_size();
        out.src = columns(tb.inputs, 0, m);
        out.tgt_in = IndexTensor2::from_shape({batch, T - m});
        for (std::size_t b = 0; b < batch; ++b) {
          out.tgt_in(b, 0) = bos;
          for (std::size_t j = 1; j < T - m; ++j) out.tgt_in(b, j) = tb.inputs(b, m + j - 1);
        }
        out.targets = columns(tb.inputs, m, T);
      } else {
        out.src = std::move(tb.inputs);
        out.targets = std::move(tb.targets);
        // Position t predicts x_{t+1}: the continuation x_m .. x_{T-1} is predicted at m-1 .. T-2.
        if (eval)
          for (std::size_t b = 0; b < batch; ++b)
            for (std::size_t t = 0; t + 1 < m; ++t) out.targets(b, t) = kIgnoreTarget;
      }
    }
    return out;
  }

  std::size_t vocab() const { return static_cast<std::size_t>(vocab_); }
  std::size_t n_out() const { return n_out_; }
  bool last_position() const { return last_position_; }
  double chance_accuracy() const { return chance_acc_; }
  /// Best achievable accuracy: 1 (deterministic targets) or the Bayes accuracy (lm).
  double best_accuracy() const { return best_acc_; }
  double chance_loss() const { return chance_loss_; }
  /// Best achievable cross-entropy: 0 (deterministic targets) or H(p) (lm).
  double optimal_loss() const { return optimal_loss_; }

 private:
  Arm arm_;
  std::optional<PreviousTokenTask> prev_;
  std::optional<MultiQueryAssociativeRecall> mqar_;
  std::optional<InductionCopyTask> induction_;
  std::optional<MajorityTask> majority_;
  std::optional<ReverseTask> reverse_;
  std::optional<MarkovLanguageTask> lm_;
  int vocab_ = 0;
  std::size_t n_out_ = 0;
  bool last_position_ = false;
  double chance_acc_ = 0, best_acc_ = 1, chance_loss_ = 0, optimal_loss_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Models.

/// The model of an arm at width D with `layers` layers per stack.
ModelConfig base_config(const Cell& cell, const Arm& arm, const Problem& pr, const std::string& model,
                        std::size_t D, std::size_t layers, std::size_t max_len) {
  ModelConfig mc;
  mc.model = model;
  mc.input = "embedding";
  mc.vocab_size = pr.vocab();
  mc.embedding_dim = D;
  mc.hidden_size = D;
  mc.num_layers = layers;
  mc.n_heads = arm.n_heads;
  mc.d_ff = cell.get_size("ff_mult") * D;
  mc.activation = "relu";
  mc.norm = "layer_norm";
  mc.norm_placement = cell.get_string("norm_placement");
  mc.positional_encoding = cell.get_string("positional_encoding");
  if (mc.positional_encoding == "learned") mc.max_len = max_len;
  mc.shared_qk = arm.qk == "shared";
  mc.dropout = 0.0f;
  mc.output_size = pr.n_out();
  mc.head = pr.last_position() ? "last_position" : "per_position";
  return mc;
}

struct ModelChoice {
  ModelConfig cfg;
  std::size_t budget = 0;  // count_parameters of the decoder-only reference at d_model
  std::size_t encoder_layers = 0, decoder_layers = 0;
};

/// Longest sequence any stack of this arm reads (for learned positions).
std::size_t max_len_of(const Cell& cell) { return cell.get_size("seq_len"); }

/// The arm's model. encoder / decoder: d_model, num_layers (both have the same count). encoder_
/// decoder: num_layers / 2 per stack, the largest width D' (a multiple of n_heads; even for
/// sinusoidal, with an even head size for rope) whose parameter count at d_ff = ff_mult·D' is <=
/// the budget, the count of the decoder-only model of this task at d_model; then d_ff raised to
/// the largest value that keeps the count <= the budget. Throws experiment::ConfigError naming
/// num_layers (odd) or d_model (no width fits).
ModelChoice choose_model(const Cell& cell, const Arm& arm, const Problem& pr) {
  const std::size_t D = cell.get_size("d_model"), L = cell.get_size("num_layers");
  ModelChoice mc;
  const std::size_t max_len = max_len_of(cell);
  ModelConfig ref = base_config(cell, arm, pr, "transformer_decoder", D, L, max_len);
  if (arm.arch == "encoder_decoder") {
    // The reference is the decoder-only model of the same task: its vocabulary has no bos and
    // its majority head reads the last position.
    Arm dec = arm;
    dec.arch = "decoder";
    const Problem ref_pr(cell, dec);
    ref = base_config(cell, dec, ref_pr, "transformer_decoder", D, L, max_len);
  }
  mc.budget = count_parameters(ref);
  if (arm.arch != "encoder_decoder") {
    mc.cfg = base_config(cell, arm, pr,
                         arm.arch == "encoder" ? "transformer_encoder" : "transformer_decoder", D,
                         L, max_len);
    (arm.arch == "encoder" ? mc.encoder_layers : mc.decoder_layers) = L;
    return mc;
  }
  if (L % 2 != 0)
    throw experiment::ConfigError("num_layers: invalid value '" + std::to_string(L) +
                                  "': arch encoder_decoder splits num_layers into equal encoder "
                                  "and decoder stacks; expected an even integer");
  const std::string& pe = cell.get_string("positional_encoding");
  // Widths must be multiples of n_heads, even for sinusoidal, with an even head size for rope.
  const std::size_t h = arm.n_heads;
  const std::size_t step = pe == "rope" ? 2 * h : (pe == "sinusoidal" && h % 2 == 1) ? 2 * h : h;
  std::optional<ModelConfig> best;
  for (std::size_t w = step; w <= 4 * D; w += step) {
    ModelConfig c = base_config(cell, arm, pr, "transformer_encoder_decoder", w, L / 2, max_len);
    if (count_parameters(c) > mc.budget) break;  // the count grows with the width
    best = c;
  }
  if (!best)
    throw experiment::ConfigError(
        "d_model: invalid value '" + std::to_string(D) + "': no encoder-decoder width (multiple of " +
        std::to_string(step) + ") fits the parameter count of the decoder-only model (" +
        std::to_string(mc.budget) + "); expected a larger d_model");
  // Then the largest d_ff that still fits: each unit adds 2·D' + 1 parameters to each of the L
  // feed-forward blocks (linear1 row and bias, linear2 column), so the counts match to within one
  // such unit.
  const std::size_t per_unit = L * (2 * best->hidden_size + 1);
  best->d_ff += (mc.budget - count_parameters(*best)) / per_unit;
  mc.cfg = *best;
  mc.encoder_layers = mc.decoder_layers = L / 2;
  return mc;
}

Tensor3 forward(SequenceModel& model, const Batch& b) {
  if (auto* ed = dynamic_cast<EncoderDecoderModel*>(&model)) return ed->forward(b.src, b.tgt_in);
  return model.forward(b.src);
}

/// Rows [r0, r1) of a batch.
Batch slice(const Batch& b, std::size_t r0, std::size_t r1) {
  auto rows = [&](const IndexTensor2& x) {
    if (x.size() == 0) return IndexTensor2{};
    const std::size_t C = x.shape()[1];
    IndexTensor2 y = IndexTensor2::from_shape({r1 - r0, C});
    std::copy(x.data() + r0 * C, x.data() + r1 * C, y.data());
    return y;
  };
  return {rows(b.src), rows(b.tgt_in), rows(b.targets)};
}


struct Evaluation {
  double loss = NAN;         // mean CE over scored positions, nats
  double accuracy = NAN;     // fraction of scored positions whose argmax is the target
  double exact_match = NAN;  // fraction of sequences with every scored position right
};

/// Eval-mode forward of `set` in chunks; argmax takes the first maximum, as torch.argmax.
Evaluation evaluate(SequenceModel& model, const Batch& set) {
  const std::size_t n = set.src.shape()[0];
  double sum = 0;
  std::size_t count = 0, correct = 0, rows_exact = 0, rows_scored = 0;
  CrossEntropyLoss ce(kIgnoreTarget);
  for (std::size_t r0 = 0; r0 < n; r0 += kEvalChunk) {
    const std::size_t r1 = std::min(n, r0 + kEvalChunk);
    const Batch b = slice(set, r0, r1);
    const Tensor3 logits3 = forward(model, b);
    const std::size_t Tout = logits3.shape()[1], O = logits3.shape()[2];
    ce.forward(rows_of(logits3), ids_of(b.targets));
    const Tensor1& rl = ce.row_losses();
    const Tensor2& p = ce.probabilities();
    for (std::size_t b_i = 0; b_i < r1 - r0; ++b_i) {
      bool all_right = true, any = false;
      for (std::size_t t = 0; t < Tout; ++t) {
        const std::int32_t y = b.targets(b_i, t);
        if (y == kIgnoreTarget) continue;
        const std::size_t row = b_i * Tout + t;
        any = true;
        sum += rl(row);
        ++count;
        std::size_t arg = 0;
        for (std::size_t c = 1; c < O; ++c)
          if (p(row, c) > p(row, arg)) arg = c;
        if (static_cast<std::int32_t>(arg) == y && std::isfinite(rl(row))) {
          ++correct;
        } else {
          all_right = false;
        }
      }
      if (any) {
        ++rows_scored;
        rows_exact += all_right ? 1 : 0;
      }
    }
  }
  Evaluation ev;
  if (count > 0) {
    ev.loss = sum / static_cast<double>(count);
    ev.accuracy = static_cast<double>(correct) / static_cast<double>(count);
  }
  if (rows_scored > 0) ev.exact_match = static_cast<double>(rows_exact) / rows_scored;
  return ev;
}

/// Every self-attention of the model (encoder layers, then decoder layers).
std::vector<MultiheadAttention*> self_attentions(SequenceModel& model) {
  std::vector<MultiheadAttention*> out;
  if (auto* t = dynamic_cast<TransformerModel*>(&model)) {
    for (auto& l : t->layers) out.push_back(&l->self_attn);
  } else if (auto* ed = dynamic_cast<EncoderDecoderModel*>(&model)) {
    for (auto& l : ed->encoder_layers) out.push_back(&l->self_attn);
    for (auto& l : ed->decoder_layers) out.push_back(&l->self_attn);
  }
  return out;
}

struct AttentionDiagnostics {
  double logit_asymmetry = NAN;  // mean over self-attentions of MultiheadAttention::logit_asymmetry
  double diag_attention = NAN;   // mean attention probability of a query on its own position
  double prev_attention = NAN;   // max over self-attentions and heads of the mean probability of
                                 // query t on key t-1 (t >= 1)
};

/// One eval-mode forward of `probe`, then the diagnostics of every self-attention.
AttentionDiagnostics diagnose(SequenceModel& model, const Batch& probe) {
  model.eval();
  forward(model, probe);
  AttentionDiagnostics d;
  double asym = 0, diag = 0, diag_n = 0, prev_best = -1;
  const auto attns = self_attentions(model);
  for (MultiheadAttention* a : attns) {
    asym += a->logit_asymmetry();
    const Tensor4& P = a->attention_probs();  // [B, h, T, T]
    const std::size_t B = P.shape()[0], H = P.shape()[1], T = P.shape()[2];
    for (std::size_t h = 0; h < H; ++h) {
      double prev = 0;
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t t = 0; t < T; ++t) {
          diag += P(b, h, t, t);
          diag_n += 1;
          if (t >= 1) prev += P(b, h, t, t - 1);
        }
      if (T >= 2) prev_best = std::max(prev_best, prev / static_cast<double>(B * (T - 1)));
    }
  }
  if (!attns.empty()) d.logit_asymmetry = asym / static_cast<double>(attns.size());
  if (diag_n > 0) d.diag_attention = diag / diag_n;
  if (prev_best >= 0) d.prev_attention = prev_best;
  return d;
}

void validate(const Cell& cell) {
  const Arm arm = parse_arm(cell.get_string("arm"), cell.get_size("d_model"));
  experiment::cell_schedule(cell);  // schedule, lr, warmup_steps, steps
  const Problem pr(cell, arm);
  choose_model(cell, arm, pr).cfg.validate();  // e.g. rope with an odd head size
}

void run_cell(const Cell& cell, CellOutput& out) {
  const Arm arm = parse_arm(cell.get_string("arm"), cell.get_size("d_model"));
  const Problem pr(cell, arm);
  const ModelChoice choice = choose_model(cell, arm, pr);
  const std::size_t batch = cell.get_size("batch");
  const int steps = cell.get_int32("steps");
  const int eval_every = cell.get_int32("eval_every");
  const double target_fraction = cell.get_real("target_fraction");
  const double target_accuracy =
      pr.chance_accuracy() + target_fraction * (pr.best_accuracy() - pr.chance_accuracy());

  Rng init_rng(cell.stream_seed(kInitStream));
  const std::unique_ptr<SequenceModel> model_ptr = make_model(choice.cfg, init_rng);
  SequenceModel& model = *model_ptr;
  const std::vector<Parameter*> params = model.parameters();

  OptimizerConfig oc;
  oc.lr = cell.get_float("lr");
  oc.weight_decay = cell.get_float("weight_decay");
  auto optim = make_optimizer(cell.get_string("optimizer"), params, oc);
  const LrSchedule schedule = experiment::cell_schedule(cell);

  Rng test_rng(cell.stream_seed(kTestStream));
  const Batch test = pr.sample(cell.get_size("test_batch"), test_rng, true);
  Rng eval_rng(cell.stream_seed(kEvalStream));
  const Batch eval_set = pr.sample(cell.get_size("eval_batch"), eval_rng, true);
  const Batch probe = slice(test, 0, std::min(kProbeRows, test.src.shape()[0]));
  Rng train_rng(cell.stream_seed(kTrainStream));

  const AttentionDiagnostics init_diag = diagnose(model, probe);
  model.train();

  Row id;
  id.add("experiment", kName)
      .add("arm", cell.get_string("arm"))
      .add("task", arm.task)
      .add("arch", arm.arch)
      .add("qk", arm.qk)
      .add("n_heads", arm.n_heads)
      .add("seed", cell.replicate);

  CrossEntropyLoss ce(kIgnoreTarget);
  auto loss_and_grad = [&](int /*step*/) -> double {
    const Batch b = pr.sample(batch, train_rng, false);
    const Tensor3 logits = forward(model, b);
    const double loss = ce.forward(rows_of(logits), ids_of(b.targets));
    model.backward(unrows(ce.backward(), logits.shape()[0], logits.shape()[1]));
    return loss;
  };
  // Curve: one row per eval_every updates (and after the last): mean training loss over the
  // window, then loss and accuracy on the fixed eval set.
  double win_loss = 0, last_window_loss = NAN;
  int win_n = 0, steps_to_target = -1;
  auto on_step = [&](const StepRecord& r) {
    win_loss += r.loss;
    ++win_n;
    const int done = r.step + 1;
    if (done % eval_every == 0 || done == steps) {
      last_window_loss = win_loss / win_n;
      model.eval();
      const Evaluation ev = evaluate(model, eval_set);
      model.train();
      if (steps_to_target < 0 && ev.accuracy >= target_accuracy) steps_to_target = done;
      out.add_row(Row(id)
                      .add("step", done)
                      .add("train_loss", last_window_loss)
                      .add("eval_loss", ev.loss)
                      .add("eval_accuracy", ev.accuracy),
                  "curve");
      win_loss = 0;
      win_n = 0;
    }
  };
  TrainOptions topt;
  topt.steps = steps;
  topt.clip_norm = cell.get_real("clip_norm");
  topt.quiet = cell.quiet;
  topt.label = cell.get_string("arm") + " seed " + std::to_string(cell.replicate);
  // --checkpoint-every: the steps change the model, the optimizer, the training data stream, the
  // curve window, steps_to_target and the "curve" rows.
  topt.checkpoint = cell_checkpoint(cell, "train", &model, out);
  topt.checkpoint.state.add("train_rng", train_rng);
  topt.checkpoint.state.add("win_loss", win_loss);
  topt.checkpoint.state.add("win_n", win_n);
  topt.checkpoint.state.add("last_window_loss", last_window_loss);
  topt.checkpoint.state.add("steps_to_target", steps_to_target);
  const auto t0 = std::chrono::steady_clock::now();
  const TrainResult tr = train_loop(topt, params, *optim, schedule, loss_and_grad, on_step);
  const double train_time =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (win_n > 0) last_window_loss = win_loss / win_n;  // diverged mid-window

  model.eval();
  const Evaluation ev = evaluate(model, test);
  const AttentionDiagnostics diag = diagnose(model, probe);
  bool diverged = tr.diverged;
  int diverged_step = tr.diverged_step;
  if (!diverged && !std::isfinite(ev.loss)) {
    diverged = true;
    diverged_step = tr.steps_done;
  }
  const ModelConfig& mc = choice.cfg;
  out.add_row(Row(id)
                  .add("derived_seed", cell.seed)
                  .add("d_model", mc.hidden_size)
                  .add("d_ff", mc.d_ff)
                  .add("head_dim", mc.hidden_size / mc.n_heads)
                  .add("encoder_layers", choice.encoder_layers)
                  .add("decoder_layers", choice.decoder_layers)
                  .add("n_params", model.num_parameters())
                  .add("param_budget", choice.budget)
                  .add("src_len", test.src.shape()[1])
                  .add("tgt_len", test.tgt_in.size() == 0 ? std::size_t{0} : test.tgt_in.shape()[1])
                  .add("batch", batch)
                  .add("steps", steps)
                  .add("lr", cell.get_real("lr"))
                  .add("test_loss", ev.loss)
                  .add("test_accuracy", ev.accuracy)
                  .add("test_exact_match", ev.exact_match)
                  .add("chance_accuracy", pr.chance_accuracy())
                  .add("best_accuracy", pr.best_accuracy())
                  .add("chance_loss", pr.chance_loss())
                  .add("optimal_loss", pr.optimal_loss())
                  .add("target_accuracy", target_accuracy)
                  .add("steps_to_target", steps_to_target)
                  .add("logit_asymmetry_init", init_diag.logit_asymmetry)
                  .add("logit_asymmetry", diag.logit_asymmetry)
                  .add("diag_attention", diag.diag_attention)
                  .add("prev_attention", diag.prev_attention)
                  .add("diverged", diverged ? 1 : 0)
                  .add("diverged_step", diverged_step)
                  .add("steps_done", tr.steps_done)
                  .add("final_train_loss", last_window_loss)
                  .add("train_time_s", train_time));
}

}  // namespace

int main(int argc, char** argv) {
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 5 (README.md claims table): separate W_Q and W_K matter (a shared projection makes "
      "the attention logits symmetric); several heads beat one; encoder-only, decoder-only and "
      "encoder-decoder suit different tasks. Each cell trains one arm task:arch:qk:n_heads (a "
      "small Transformer on a synthetic task: prev_token, mqar, induction, majority, reverse, lm) "
      "and reports test accuracy, steps to a target accuracy, and the measured symmetry "
      "||S - S^T||/||S|| of the pre-softmax attention logits.";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  // Built-in defaults = configs/quick.ini (keys missing from a config file fall back to these).
  spec.options = {
      string_sweep("arm", kQuickArms,
                   "task:arch:qk:n_heads; task prev_token|mqar|induction|majority|reverse|lm, "
                   "arch encoder|decoder|encoder_decoder, qk separate|shared"),
      int_option("d_model", 32, "units",
                 "model width D (encoder_decoder: the reference width; its own is matched)")
          .at_least(1)
          .at_most(4096),
      int_option("num_layers", 2, "layers",
                 "layers of encoder / decoder models; encoder_decoder: num_layers / 2 per stack")
          .at_least(1)
          .at_most(64),
      int_option("ff_mult", 2, "1", "feed-forward inner size d_ff = ff_mult * width")
          .at_least(1)
          .at_most(64),
      string_option("norm_placement", "pre", "LayerNorm placement").one_of({"pre", "post"}),
      string_option("positional_encoding", "sinusoidal",
                    "positions (sinusoidal/learned/none are added or absent, rope rotates q and k: "
                    "all keep shared-QK logits symmetric)")
          .one_of({"sinusoidal", "learned", "rope", "none"}),
      int_option("seq_len", 16, "tokens",
                 "sequence length (reverse: seq_len/2 symbols; induction: prefix seq_len - "
                 "seq_len/3, repeat seq_len/3; lm: encoder_decoder source = first seq_len/2)")
          .at_least(2)
          .at_most(4096),
      int_option("vocab", 16, "tokens",
                 "symbols of prev_token, induction, reverse, lm; keys and values of mqar")
          .at_least(2)
          .at_most(100000),
      int_option("mqar_pairs", 4, "pairs", "mqar: key-value pairs per sequence")
          .at_least(1)
          .at_most(10000),
      int_option("mqar_queries", 4, "queries", "mqar: queries per sequence (<= mqar_pairs)")
          .at_least(1)
          .at_most(10000),
      int_option("majority_classes", 4, "classes", "majority: class tokens (output classes)")
          .at_least(2)
          .at_most(1000),
      int_option("majority_noise", 4, "tokens", "majority: distractor tokens")
          .at_least(0)
          .at_most(1000),
      int_option("lm_order", 2, "tokens", "lm: Markov order (context length)")
          .at_least(1)
          .at_most(20),
      int_option("lm_branching", 3, "tokens", "lm: successors per context (p_j ~ 2^-j)")
          .at_least(1)
          .at_most(100000),
      int_option("batch", 32, "sequences", "training batch size (fresh batch every step)")
          .at_least(1)
          .at_most(65536),
      int_option("steps", 800, "updates", "optimizer updates").at_least(1).at_most(1e9),
      real_option("lr", 3e-3, "1", "peak learning rate").greater_than(0),
      string_option("optimizer", "adam", "optimizer").one_of({"adam", "adamw", "sgd"}),
      real_option("weight_decay", 0, "1", "weight decay (L2 for adam/sgd, decoupled for adamw)")
          .at_least(0),
      real_option("clip_norm", 1, "1", "max global gradient norm; 0 disables clipping").at_least(0),
      string_option("schedule", "constant", "learning-rate schedule")
          .one_of({"constant", "cosine", "inverse_sqrt"}),
      int_option("warmup_steps", 20, "updates", "linear warm-up length").at_least(0).at_most(1e9),
      int_option("eval_every", 25, "updates", "updates between evaluations on the eval set")
          .at_least(1)
          .at_most(1e9),
      int_option("eval_batch", 64, "sequences", "size of the fixed eval set (curve, steps to target)")
          .at_least(1)
          .at_most(1e6),
      int_option("test_batch", 256, "sequences", "size of the fixed test set")
          .at_least(1)
          .at_most(1e6),
      real_option("target_fraction", 0.9, "1",
                  "target accuracy = chance + target_fraction * (best - chance)")
          .greater_than(0)
          .at_most(1),
  };
  const std::vector<std::string> id_cols = {"experiment", "arm", "task", "arch", "qk", "n_heads",
                                            "seed"};
  std::vector<std::string> main_cols = id_cols;
  for (const char* c :
       {"derived_seed", "d_model", "d_ff", "head_dim", "encoder_layers", "decoder_layers",
        "n_params", "param_budget", "src_len", "tgt_len", "batch", "steps", "lr", "test_loss",
        "test_accuracy", "test_exact_match", "chance_accuracy", "best_accuracy", "chance_loss",
        "optimal_loss", "target_accuracy", "steps_to_target", "logit_asymmetry_init",
        "logit_asymmetry", "diag_attention", "prev_attention", "diverged", "diverged_step",
        "steps_done", "final_train_loss", "train_time_s"})
    main_cols.push_back(c);
  std::vector<std::string> curve_cols = id_cols;
  for (const char* c : {"step", "train_loss", "eval_loss", "eval_accuracy"}) curve_cols.push_back(c);
  spec.tables = {{kMainTable, main_cols}, {"curve", curve_cols}};
  spec.default_seeds = 5;
  spec.timing_columns = {"train_time_s"};
  spec.validate = validate;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}
