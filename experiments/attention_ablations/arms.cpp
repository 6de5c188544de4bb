// attention_ablations' arms: parsing, the registry task of an arm in its layout, and the model at a
// matched parameter count (arms.hpp).
#include "arms.hpp"

#include <algorithm>
#include <optional>
#include <sstream>
#include <utility>

#include "seqlab/models/encoder_decoder_model.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/tasks/mqar.hpp"  // kIgnoreTarget

namespace attention_ablations {

using seqlab::IndexTensor2;
using seqlab::ModelConfig;
using seqlab::TaskBatch;
using seqlab::TaskParams;
using seqlab::TaskSpec;
using seqlab::experiment::ConfigError;

const std::vector<std::string> kTasks = {"prev_token", "mqar", "induction", "majority", "reverse",
                                         "lm"};
const std::vector<std::string> kArchs = {"encoder", "decoder", "encoder_decoder"};
const std::vector<std::string> kQk = {"separate", "shared"};

namespace {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

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
  throw ConfigError("arm: invalid value '" + text + "': " + why +
                    "; expected task:arch:qk:n_heads with task " + join(kTasks, "|") + ", arch " +
                    join(kArchs, "|") + ", qk " + join(kQk, "|") +
                    ", n_heads an integer >= 1 dividing d_model");
}

}  // namespace

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
// Data.

ArmTask::ArmTask(const Cell& cell, const Arm& arm) : arm_(arm) {
  const int T = cell.get_int32("seq_len");
  const int V = cell.get_int32("vocab");
  const std::string& task = arm.task;
  const bool ed = arm.arch == "encoder_decoder";
  auto need = [&](bool ok, const std::string& key, const std::string& what) {
    if (!ok)
      throw ConfigError(key + ": invalid value '" + cell.params.text(key) + "': task " + task +
                        " needs " + what);
  };
  auto str = [](auto v) { return std::to_string(v); };
  if (task == "prev_token") {
    task_ = seqlab::make_task("previous_token",
                              TaskParams({{"seq_len", str(T)}, {"vocab_size", str(V)}, {"lag", "1"}}));
  } else if (task == "mqar") {
    const int P = cell.get_int32("mqar_pairs"), Q = cell.get_int32("mqar_queries");
    need(Q <= P, "mqar_queries", "mqar_queries <= mqar_pairs (" + str(P) + ")");
    need(V >= P, "vocab", "vocab >= mqar_pairs (" + str(P) + ", distinct keys)");
    need(T >= 2 * P + 2 * Q, "seq_len", "seq_len >= 2 * (mqar_pairs + mqar_queries) = " + str(2 * P + 2 * Q));
    task_ = seqlab::make_task("mqar", TaskParams({{"seq_len", str(T)},
                                                  {"n_pairs", str(P)},
                                                  {"n_queries", str(Q)},
                                                  {"n_keys", str(V)},
                                                  {"n_values", str(V)}}));
  } else if (task == "induction") {
    const int m = T / 3, n = T - m;
    need(m >= 2, "seq_len", "seq_len >= 6 (prefix 2/3, repeat 1/3 of it, >= 2 tokens)");
    need(V >= n, "vocab",
         "vocab >= the prefix length seq_len - seq_len/3 = " + str(n) + " (distinct prefix tokens)");
    task_ = seqlab::make_task(
        "induction_copy",
        TaskParams({{"prefix_len", str(n)}, {"copy_len", str(m)}, {"vocab_size", str(V)}}));
  } else if (task == "majority") {
    need(T >= 2, "seq_len", "seq_len >= 2");
    task_ = seqlab::make_task("majority",
                              TaskParams({{"seq_len", str(T)},
                                          {"pad_fraction", "0"},
                                          {"n_classes", str(cell.get_int32("majority_classes"))},
                                          {"n_noise", str(cell.get_int32("majority_noise"))},
                                          {"min_len", str(std::min(4, T))}}));
  } else if (task == "reverse") {
    need(T >= 2, "seq_len", "seq_len >= 2 (sequences of seq_len / 2 symbols)");
    const char* layout = ed ? "seq2seq" : arm.arch == "encoder" ? "tagging" : "prefix_lm";
    task_ = seqlab::make_task(
        "reverse", TaskParams({{"length", str(T / 2)}, {"n_symbols", str(V)}, {"layout", layout}}));
  } else {  // lm
    const int k = cell.get_int32("lm_order"), K = cell.get_int32("lm_branching");
    need(T / 2 >= k, "seq_len",
         "seq_len / 2 >= lm_order (" + str(k) + ": the source half holds the first context)");
    need(K <= V, "lm_branching", "lm_branching <= vocab (" + str(V) + ")");
    double contexts = 1;
    for (int i = 0; i < k; ++i) contexts *= V;
    need(contexts <= 1048576.0, "lm_order", "vocab^lm_order <= 2^20 contexts");
    task_ = seqlab::make_task("markov_lm",
                              TaskParams({{"seq_len", str(T)},
                                          {"vocab_size", str(V)},
                                          {"order", str(k)},
                                          {"branching", str(K)},
                                          {"grammar_seed", str(cell.stream_seed(kGrammarStream))}}));
  }
  spec_ = task_->spec();
  spec_.padded = false;  // majority at pad_fraction 0: no padded position
  if (ed && (task == "majority" || task == "lm")) {
    spec_.vocab_size += 1;  // + bos
    spec_.head = "per_position";
    spec_.seq_len = task == "lm" ? static_cast<std::size_t>(T / 2) : spec_.seq_len;
    spec_.decoder_len = task == "lm" ? static_cast<std::size_t>(T - T / 2) : 1;
  }
}

TaskBatch ArmTask::sample(std::size_t batch, seqlab::Rng& rng, bool eval) const {
  TaskBatch b = task_->sample(batch, rng);
  b.padding = seqlab::PaddingMask();  // majority: all zeros at pad_fraction 0
  if (arm_.arch == "encoder_decoder" && arm_.task == "majority") {
    b.decoder_tokens = IndexTensor2::from_shape({batch, 1});
    b.decoder_tokens.fill(static_cast<std::int32_t>(spec_.vocab_size - 1));  // bos
  } else if (arm_.task == "lm") {
    const std::size_t T = b.tokens.shape()[1], m = T / 2;
    if (arm_.arch == "encoder_decoder") {
      const auto bos = static_cast<std::int32_t>(spec_.vocab_size - 1);
      TaskBatch s;
      s.tokens = IndexTensor2::from_shape({batch, m});
      s.decoder_tokens = IndexTensor2::from_shape({batch, T - m});
      s.targets = IndexTensor2::from_shape({batch, T - m});
      for (std::size_t r = 0; r < batch; ++r) {
        for (std::size_t t = 0; t < m; ++t) s.tokens(r, t) = b.tokens(r, t);
        for (std::size_t j = 0; j < T - m; ++j) {
          s.decoder_tokens(r, j) = j == 0 ? bos : b.tokens(r, m + j - 1);
          s.targets(r, j) = b.tokens(r, m + j);
        }
      }
      return s;
    }
    // Position t predicts x_{t+1}: the continuation x_m .. x_{T-1} is predicted at m-1 .. T-2.
    if (eval)
      for (std::size_t r = 0; r < batch; ++r)
        for (std::size_t t = 0; t + 1 < m; ++t) b.targets(r, t) = seqlab::kIgnoreTarget;
  }
  return b;
}

// ---------------------------------------------------------------------------------------------
// Models.

namespace {

/// The model of an arm at width D with `layers` layers per stack.
ModelConfig base_config(const Cell& cell, const Arm& arm, const TaskSpec& spec, const std::string& model,
                        std::size_t D, std::size_t layers) {
  ModelConfig mc;
  mc.model = model;
  seqlab::apply_task_spec(spec, mc);  // embedding input, vocabulary, classes, head
  mc.embedding_dim = D;
  mc.hidden_size = D;
  mc.num_layers = layers;
  mc.n_heads = arm.n_heads;
  mc.d_ff = cell.get_size("ff_mult") * D;
  mc.activation = "relu";
  mc.norm = "layer_norm";
  mc.norm_placement = cell.get_string("norm_placement");
  mc.positional_encoding = cell.get_string("positional_encoding");
  // The longest sequence any stack of an arm reads.
  if (mc.positional_encoding == "learned") mc.max_len = cell.get_size("seq_len");
  mc.shared_qk = arm.qk == "shared";
  mc.dropout = 0.0f;
  return mc;
}

}  // namespace

ModelChoice choose_model(const Cell& cell, const Arm& arm, const TaskSpec& spec) {
  const std::size_t D = cell.get_size("d_model"), L = cell.get_size("num_layers");
  ModelChoice mc;
  ModelConfig ref = base_config(cell, arm, spec, "transformer_decoder", D, L);
  if (arm.arch == "encoder_decoder") {
    // The reference is the decoder-only model of the same task: its vocabulary has no bos and
    // its majority head reads the last position.
    Arm dec = arm;
    dec.arch = "decoder";
    ref = base_config(cell, dec, ArmTask(cell, dec).spec(), "transformer_decoder", D, L);
  }
  mc.budget = seqlab::count_parameters(ref);
  if (arm.arch != "encoder_decoder") {
    mc.cfg = base_config(cell, arm, spec,
                         arm.arch == "encoder" ? "transformer_encoder" : "transformer_decoder", D, L);
    (arm.arch == "encoder" ? mc.encoder_layers : mc.decoder_layers) = L;
    return mc;
  }
  if (L % 2 != 0)
    throw ConfigError("num_layers: invalid value '" + std::to_string(L) +
                      "': arch encoder_decoder splits num_layers into equal encoder and decoder "
                      "stacks; expected an even integer");
  const std::string& pe = cell.get_string("positional_encoding");
  // Widths must be multiples of n_heads, even for sinusoidal, with an even head size for rope.
  const std::size_t h = arm.n_heads;
  const std::size_t step = pe == "rope" ? 2 * h : (pe == "sinusoidal" && h % 2 == 1) ? 2 * h : h;
  std::optional<ModelConfig> best;
  for (std::size_t w = step; w <= 4 * D; w += step) {
    ModelConfig c = base_config(cell, arm, spec, "transformer_encoder_decoder", w, L / 2);
    if (seqlab::count_parameters(c) > mc.budget) break;  // the count grows with the width
    best = c;
  }
  if (!best)
    throw ConfigError("d_model: invalid value '" + std::to_string(D) +
                      "': no encoder-decoder width (multiple of " + std::to_string(step) +
                      ") fits the parameter count of the decoder-only model (" +
                      std::to_string(mc.budget) + "); expected a larger d_model");
  // Then the largest d_ff that still fits: each unit adds 2·D' + 1 parameters to each of the L
  // feed-forward blocks (linear1 row and bias, linear2 column), so the counts match to within one
  // such unit.
  const std::size_t per_unit = L * (2 * best->hidden_size + 1);
  best->d_ff += (mc.budget - seqlab::count_parameters(*best)) / per_unit;
  mc.cfg = *best;
  mc.encoder_layers = mc.decoder_layers = L / 2;
  return mc;
}

seqlab::Tensor3 forward(seqlab::SequenceModel& model, const TaskBatch& b) {
  if (auto* ed = dynamic_cast<seqlab::EncoderDecoderModel*>(&model))
    return ed->forward(b.tokens, b.decoder_tokens);
  return model.forward(b.tokens);
}

}  // namespace attention_ablations
