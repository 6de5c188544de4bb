// attention_ablations' arms: parsing, the task of an arm in its layout, and the model at a
// matched parameter count (arms.hpp).
#include "arms.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <utility>

#include <xtensor/xview.hpp>

#include "seqlab/models/encoder_decoder_model.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/tasks/mqar.hpp"  // kIgnoreTarget
#include "seqlab/tasks/reverse.hpp"
#include "seqlab/tasks/text.hpp"

namespace attention_ablations {

using seqlab::IndexTensor2;
using seqlab::ModelConfig;
using seqlab::TaskBatch;
using seqlab::TaskParams;
using seqlab::TaskSpec;
using seqlab::experiment::ConfigError;

const std::vector<std::string> kTasks = {"prev_token", "mqar",     "induction",    "majority", "reverse",
                                         "lm",         "lag_pair", "dup_tag",      "text",     "continuation"};
const std::vector<std::string> kArchs = {"encoder", "decoder", "prefix_lm", "encoder_decoder",
                                         "encoder_decoder_compute"};
const std::vector<std::string> kQk = {"separate", "shared", "shared_noself", "shared_noself_norm"};

namespace {

constexpr auto kIgnore = seqlab::kIgnoreTarget;

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

/// Architectures that can do `task`.
std::vector<std::string> archs_for(const std::string& task) {
  if (task == "prev_token" || task == "mqar" || task == "lag_pair") return {"encoder", "decoder"};
  if (task == "induction" || task == "text") return {"decoder"};
  if (task == "lm" || task == "continuation")
    return {"decoder", "prefix_lm", "encoder_decoder", "encoder_decoder_compute"};
  if (task == "majority") return {"encoder", "decoder", "encoder_decoder"};
  return kArchs;  // reverse, dup_tag
}

std::string why_not(const std::string& task, const std::string& arch) {
  if (arch == "encoder" && (task == "induction" || task == "lm" || task == "text" || task == "continuation"))
    return "its target is the next input token, which a bidirectional encoder sees";
  if (task == "text") return "the text task scores every position of one stream (use continuation)";
  return "the per-position tasks run on single-stack models only";
}

[[noreturn]] void bad_arm(const std::string& text, const std::string& why) {
  throw ConfigError("arm: invalid value '" + text + "': " + why +
                    "; expected task:arch:qk:n_heads[/key=value...] with task " + join(kTasks, "|") +
                    ", arch " + join(kArchs, "|") + ", qk " + join(kQk, "|") +
                    ", n_heads an integer >= 1 dividing d_model, key an experiment key or seeds|seed_offset");
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> f;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, sep);) f.push_back(x);
  if (!s.empty() && s.back() == sep) f.push_back("");
  return f;
}

/// The open corpora of this process, by the value of `corpus` (a cell opens its corpus once).
std::shared_ptr<const seqlab::TextCorpus> open_corpus(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const seqlab::TextCorpus>> open;
  auto& c = open[name];
  if (!c) {
    seqlab::TextCorpusOptions o;
    o.corpus = name;
    c = std::make_shared<const seqlab::TextCorpus>(seqlab::TextCorpus::open(o));
  }
  return c;
}

}  // namespace

Arm parse_arm(const std::string& text) {
  const std::vector<std::string> parts = split(text, '/');
  const std::vector<std::string> f = split(parts[0], ':');
  if (f.size() != 4) bad_arm(text, "not four ':'-separated fields");
  Arm a;
  a.task = f[0];
  a.arch = f[1];
  a.qk = f[2];
  if (std::find(kTasks.begin(), kTasks.end(), a.task) == kTasks.end())
    bad_arm(text, "unknown task '" + a.task + "'");
  if (std::find(kArchs.begin(), kArchs.end(), a.arch) == kArchs.end())
    bad_arm(text, "unknown arch '" + a.arch + "'");
  if (std::find(kQk.begin(), kQk.end(), a.qk) == kQk.end()) bad_arm(text, "unknown qk '" + a.qk + "'");
  const std::string& h = f[3];
  if (h.empty() || h.size() > 6 || h.find_first_not_of("0123456789") != std::string::npos || std::stoul(h) < 1)
    bad_arm(text, "n_heads '" + h + "' is not an integer in [1, 999999]");
  a.n_heads = static_cast<std::size_t>(std::stoul(h));
  const auto ok = archs_for(a.task);
  if (std::find(ok.begin(), ok.end(), a.arch) == ok.end())
    bad_arm(text, "arch " + a.arch + " cannot run task " + a.task + " (" + why_not(a.task, a.arch) +
                      "; allowed for " + a.task + ": " + join(ok, "|") + ")");
  a.base = parts[0];
  bool has_seeds = false, has_offset = false;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::size_t eq = parts[i].find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == parts[i].size())
      bad_arm(text, "override '" + parts[i] + "' is not key=value");
    const std::string key = parts[i].substr(0, eq), value = parts[i].substr(eq + 1);
    if (key == "arm") bad_arm(text, "an arm cannot override the key arm");
    bool& seen = key == "seeds" ? has_seeds : has_offset;
    if (key == "seeds" || key == "seed_offset") {  // the arm-only keys (arms.hpp)
      if (seen) bad_arm(text, "key " + key + " is overridden twice");
      seen = true;
      const std::size_t lo = key == "seeds" ? 1 : 0;
      if (value.size() > 6 || value.find_first_not_of("0123456789") != std::string::npos ||
          std::stoul(value) < lo || std::stoul(value) > 100000)
        bad_arm(text, key + " '" + value + "' is not an integer in [" + std::to_string(lo) + ", 100000]");
      (key == "seeds" ? a.seeds : a.seed_offset) = static_cast<std::size_t>(std::stoul(value));
      continue;
    }
    for (const auto& kv : a.overrides)
      if (kv.first == key) bad_arm(text, "key " + key + " is overridden twice");
    a.overrides.emplace_back(key, value);
    a.base += "/" + parts[i];
  }
  return a;
}

std::vector<std::string> unread_keys(const Cell& cell) {
  try {
    if (parse_arm(cell.get_string("arm")).task != "reverse") return {"reverse_valid"};
  } catch (const ConfigError&) {
    // validate reports the arm
  }
  return {};
}

bool keep_cell(const Cell& cell) {
  try {
    const Arm a = parse_arm(cell.get_string("arm"));
    return a.seeds == 0 || cell.replicate < a.seeds;
  } catch (const ConfigError&) {
    return true;  // validate reports the arm
  }
}

Cell resolve_cell(const Cell& cell, const std::vector<OptionSpec>& options, Arm* arm) {
  const std::string& text = cell.get_string("arm");
  *arm = parse_arm(text);
  Cell c = cell;
  for (const auto& [key, value] : arm->overrides) {
    const auto spec = std::find_if(options.begin(), options.end(), [&](const OptionSpec& s) { return s.key == key; });
    if (spec == options.end() || spec->sweep)
      bad_arm(text, "override key '" + key + "' is not one of the experiment's keys (--help lists them)");
    c.params.set(key, spec->parse(value, "arm '" + text + "'").front());
  }
  if (arm->seed_offset > 0) {  // the streams and the reported seed of replicate r + seed_offset
    c.replicate += arm->seed_offset;
    c.seed = seqlab::experiment::replicate_seed(c.base_seed, c.replicate);
  }
  const std::size_t D = c.get_size("d_model");
  if (D % arm->n_heads != 0)
    bad_arm(text, "n_heads " + std::to_string(arm->n_heads) + " does not divide d_model = " + std::to_string(D));
  return c;
}

// ---------------------------------------------------------------------------------------------
// Data.

ArmTask::ArmTask(const Cell& cell, const Arm& arm) : arm_(arm) {
  const int T = cell.get_int32("seq_len");
  const int V = cell.get_int32("vocab");
  const std::string& task = arm.task;
  const bool ed = arm.encoder_decoder();
  auto need = [&](bool ok, const std::string& key, const std::string& what) {
    if (!ok)
      throw ConfigError(key + ": invalid value '" + cell.params.text(key) + "': task " + task + " needs " + what);
  };
  auto str = [](auto v) { return std::to_string(v); };
  if (task == "prev_token") {
    task_ = seqlab::make_task("previous_token", TaskParams({{"seq_len", str(T)}, {"vocab_size", str(V)}, {"lag", "1"}}));
  } else if (task == "mqar") {
    const int P = cell.get_int32("mqar_pairs"), Q = cell.get_int32("mqar_queries");
    need(Q <= P, "mqar_queries", "mqar_queries <= mqar_pairs (" + str(P) + ")");
    need(V >= P, "vocab", "vocab >= mqar_pairs (" + str(P) + ", distinct keys)");
    need(T >= 2 * P + 2 * Q, "seq_len", "seq_len >= 2 * (mqar_pairs + mqar_queries) = " + str(2 * P + 2 * Q));
    task_ = seqlab::make_task("mqar", TaskParams({{"seq_len", str(T)}, {"n_pairs", str(P)}, {"n_queries", str(Q)},
                                                  {"n_keys", str(V)}, {"n_values", str(V)}}));
  } else if (task == "induction") {
    const int m = T / 3, n = T - m;
    need(m >= 2, "seq_len", "seq_len >= 6 (prefix 2/3, repeat 1/3 of it, >= 2 tokens)");
    need(V >= n, "vocab", "vocab >= the prefix length seq_len - seq_len/3 = " + str(n) + " (distinct prefix tokens)");
    task_ = seqlab::make_task("induction_copy",
                              TaskParams({{"prefix_len", str(n)}, {"copy_len", str(m)}, {"vocab_size", str(V)}}));
  } else if (task == "majority") {
    task_ = seqlab::make_task("majority", TaskParams({{"seq_len", str(T)},
                                                      {"pad_fraction", "0"},
                                                      {"n_classes", str(cell.get_int32("majority_classes"))},
                                                      {"n_noise", str(cell.get_int32("majority_noise"))},
                                                      {"min_len", str(std::min(4, T))}}));
  } else if (task == "lag_pair") {
    const int a = cell.get_int32("lag_a"), b = cell.get_int32("lag_b");
    need(a != b, "lag_b", "lag_b != lag_a (" + str(a) + ")");
    need(std::max(a, b) < T, "seq_len", "seq_len > max(lag_a, lag_b) = " + str(std::max(a, b)));
    need(V <= 46340, "vocab", "vocab <= 46340 (vocab^2 classes)");
    task_ = seqlab::make_task("lag_pair", TaskParams({{"seq_len", str(T)}, {"vocab_size", str(V)},
                                                      {"lag_a", str(a)}, {"lag_b", str(b)}}));
  } else if (task == "dup_tag") {
    task_ = seqlab::make_task("duplicate_tag", TaskParams({{"length", str(T)}, {"vocab_size", str(V)}}));
    symbols_ = V;
    classes_ = 2;
    train_lengths_ = {T};
  } else if (task == "reverse") {
    const int lo = cell.get_int32("reverse_min_len"), hi = cell.get_int32("reverse_max_len");
    need(lo <= hi, "reverse_max_len", "reverse_max_len >= reverse_min_len (" + str(lo) + ")");
    for (const auto h : cell.get_int_list("reverse_holdout")) {
      need(h >= lo && h <= hi, "reverse_holdout", "held-out lengths within [reverse_min_len, reverse_max_len]");
      holdout_lengths_.push_back(static_cast<int>(h));
    }
    for (int n = lo; n <= hi; ++n)
      if (std::find(holdout_lengths_.begin(), holdout_lengths_.end(), n) == holdout_lengths_.end())
        train_lengths_.push_back(n);
    need(!train_lengths_.empty(), "reverse_holdout", "at least one training length left");
    valid_on_train_ = cell.get_string("reverse_valid") == "train";
    symbols_ = V;
    classes_ = V;
  } else if (task == "text" || task == "continuation") {
    corpus_ = open_corpus(cell.get_string("corpus"));
    window_ = static_cast<std::size_t>(T);
    need(task == "text" || T >= 4, "seq_len", "seq_len >= 4 (a context and a continuation of >= 2 symbols)");
    corpus_->require_window(window_);
  } else {  // lm
    const int k = cell.get_int32("lm_order"), K = cell.get_int32("lm_branching");
    need(T / 2 >= k, "seq_len", "seq_len / 2 >= lm_order (" + str(k) + ": the source half holds the first context)");
    need(K <= V, "lm_branching", "lm_branching <= vocab (" + str(V) + ")");
    double contexts = 1;
    for (int i = 0; i < k; ++i) contexts *= V;
    need(contexts <= 1048576.0, "lm_order", "vocab^lm_order <= 2^20 contexts");
    task_ = seqlab::make_task("markov_lm", TaskParams({{"seq_len", str(T)},
                                                       {"vocab_size", str(V)},
                                                       {"order", str(k)},
                                                       {"branching", str(K)},
                                                       {"grammar_seed", str(cell.stream_seed(kGrammarStream))}}));
  }
  const std::size_t Tz = static_cast<std::size_t>(T), m = Tz / 2;
  if (symbols_ > 0) {  // reverse, dup_tag: the transduction layouts
    const std::size_t n_max = static_cast<std::size_t>(*std::max_element(train_lengths_.begin(), train_lengths_.end()));
    const std::size_t n_all = std::max<std::size_t>(n_max, holdout_lengths_.empty() ? 0 : static_cast<std::size_t>(
        *std::max_element(holdout_lengths_.begin(), holdout_lengths_.end())));
    const double n_mean = std::accumulate(train_lengths_.begin(), train_lengths_.end(), 0.0) / train_lengths_.size();
    if (task_) {
      spec_ = task_->spec();  // dup_tag: baselines and ceiling
    } else {
      const seqlab::ReverseTask r(static_cast<int>(n_max), V);
      spec_.baseline_accuracy = r.chance_accuracy();
      spec_.baseline_loss = r.chance_loss();
      spec_.best_accuracy = 1.0;
      spec_.optimal_loss = 0.0;
    }
    spec_.vocab_size = static_cast<std::size_t>(symbols_ + 1 + classes_);
    spec_.output_size = static_cast<std::size_t>(classes_);
    spec_.head = "per_position";
    const bool stacked = arm.arch == "decoder" || arm.arch == "prefix_lm";
    spec_.seq_len = stacked ? 2 * n_all : n_all;
    spec_.decoder_len = ed ? n_all : 0;
    mean_src_ = stacked ? 2 * n_mean : n_mean;
    mean_tgt_ = ed ? n_mean : 0;
  } else if (corpus_) {
    const std::size_t Vt = corpus_->vocab_size();
    spec_.vocab_size = Vt + (ed ? 1 : 0);
    spec_.output_size = Vt;
    spec_.baseline_loss = corpus_->unigram_loss();
    spec_.baseline_accuracy = corpus_->unigram_accuracy();
    spec_.seq_len = task == "text" ? Tz : ed ? m : Tz - 1;
    spec_.decoder_len = ed ? Tz - m : 0;
  } else {
    spec_ = task_->spec();
    spec_.padded = false;  // majority at pad_fraction 0: no padded position
    if (ed) {  // majority, lm
      spec_.vocab_size += 1;  // + bos
      spec_.head = "per_position";
      spec_.seq_len = task == "lm" ? m : spec_.seq_len;
      spec_.decoder_len = task == "lm" ? Tz - m : 1;
    }
  }
  if (!symbols_) {
    mean_src_ = static_cast<double>(spec_.seq_len);
    mean_tgt_ = static_cast<double>(spec_.decoder_len);
  }
}

ArmTask::~ArmTask() = default;

TaskBatch ArmTask::transduction(const TaskBatch& pair, int n_int) const {
  const std::size_t B = pair.tokens.shape()[0], n = static_cast<std::size_t>(n_int);
  const auto S = static_cast<std::int32_t>(symbols_);
  const auto target_token = [&](std::size_t r, std::size_t i) { return S + 1 + pair.targets(r, i); };
  if (arm_.arch == "encoder") return pair;
  TaskBatch out;
  if (arm_.encoder_decoder()) {
    out.tokens = pair.tokens;
    out.targets = pair.targets;
    out.decoder_tokens = IndexTensor2::from_shape({B, n});
    for (std::size_t r = 0; r < B; ++r)
      for (std::size_t i = 0; i < n; ++i) out.decoder_tokens(r, i) = i == 0 ? S : target_token(r, i - 1);
    return out;
  }
  out.tokens = IndexTensor2::from_shape({B, 2 * n});
  out.targets = IndexTensor2::from_shape({B, 2 * n});
  for (std::size_t r = 0; r < B; ++r)
    for (std::size_t t = 0; t < 2 * n; ++t) {
      out.tokens(r, t) = t < n ? pair.tokens(r, t) : t == n ? S : target_token(r, t - n - 1);
      out.targets(r, t) = t < n ? kIgnore : pair.targets(r, t - n);
    }
  return out;
}

TaskBatch ArmTask::window(const TaskBatch& w) const {
  // w: tokens x_0 .. x_{W-2}, targets x_1 .. x_{W-1} (position t predicts x_{t+1}); the
  // continuation x_m .. x_{W-1} is predicted at positions m-1 .. W-2.
  const std::size_t B = w.tokens.shape()[0], W = w.tokens.shape()[1] + 1, m = W / 2;
  if (arm_.encoder_decoder()) {
    const auto bos = static_cast<std::int32_t>(spec_.vocab_size - 1);
    TaskBatch s;
    s.tokens = IndexTensor2::from_shape({B, m});
    s.decoder_tokens = IndexTensor2::from_shape({B, W - m});
    s.targets = IndexTensor2::from_shape({B, W - m});
    for (std::size_t r = 0; r < B; ++r) {
      for (std::size_t t = 0; t < m; ++t) s.tokens(r, t) = w.tokens(r, t);
      for (std::size_t j = 0; j < W - m; ++j) {
        s.decoder_tokens(r, j) = j == 0 ? bos : w.tokens(r, m + j - 1);
        s.targets(r, j) = w.targets(r, m - 1 + j);
      }
    }
    return s;
  }
  TaskBatch s = w;
  for (std::size_t r = 0; r < B; ++r)
    for (std::size_t t = 0; t + 1 < m; ++t) s.targets(r, t) = kIgnore;
  return s;
}

TaskBatch ArmTask::draw(std::size_t batch, seqlab::Rng& rng, SetKind kind, int length) const {
  if (arm_.task == "reverse") {
    const seqlab::TransductionBatch p = seqlab::ReverseTask(length, symbols_).sample(batch, rng);
    TaskBatch pair;
    pair.tokens = p.source;
    pair.targets = p.target;
    return transduction(pair, length);
  }
  if (corpus_) {
    const seqlab::TextSplit split = kind == SetKind::valid ? seqlab::TextSplit::valid
                                    : kind == SetKind::test ? seqlab::TextSplit::test
                                                            : seqlab::TextSplit::train;
    const std::size_t len = arm_.task == "text" ? window_ : window_ - 1;
    seqlab::TokenBatch t = corpus_->sample(batch, len, rng, split);
    TaskBatch b;
    b.tokens = std::move(t.inputs);
    b.targets = std::move(t.targets);
    return arm_.task == "text" ? b : window(b);
  }
  TaskBatch b = task_->sample(batch, rng);
  if (arm_.task == "dup_tag") return transduction(b, length);
  b.padding = seqlab::PaddingMask();  // majority: all zeros at pad_fraction 0
  if (arm_.encoder_decoder() && arm_.task == "majority") {
    b.decoder_tokens = IndexTensor2::from_shape({batch, 1});
    b.decoder_tokens.fill(static_cast<std::int32_t>(spec_.vocab_size - 1));  // bos
  } else if (arm_.task == "lm") {
    // markov_lm: position t predicts x_{t+1}; as a window of T + 1 symbols with the last dropped.
    TaskBatch w;
    const std::size_t T = b.tokens.shape()[1];
    w.tokens = xt::view(b.tokens, xt::all(), xt::range(0, T - 1));
    w.targets = xt::view(b.targets, xt::all(), xt::range(0, T - 1));
    if (arm_.encoder_decoder()) return window(w);
    // Single stack: the whole row is read; scored on the continuation only.
    const std::size_t m = T / 2;
    for (std::size_t r = 0; r < batch; ++r)
      for (std::size_t t = 0; t + 1 < m; ++t) b.targets(r, t) = kIgnore;
  }
  return b;
}

TaskBatch ArmTask::sample(std::size_t batch, seqlab::Rng& rng) const {
  int n = train_lengths_.empty() ? 0 : train_lengths_.front();
  if (train_lengths_.size() > 1) n = train_lengths_[rng.uniform_int(train_lengths_.size())];
  return draw(batch, rng, SetKind::seen, n);
}

std::vector<TaskBatch> ArmTask::fixed_set(SetKind kind, std::size_t rows, seqlab::Rng& rng) const {
  if (arm_.task != "reverse") return {draw(rows, rng, kind, train_lengths_.empty() ? 0 : train_lengths_.front())};
  const bool train = kind == SetKind::seen || (kind == SetKind::valid && valid_on_train_) || holdout_lengths_.empty();
  const std::vector<int>& lengths = train ? train_lengths_ : holdout_lengths_;
  std::vector<TaskBatch> out;
  const std::size_t per = std::max<std::size_t>(1, rows / lengths.size());
  for (const int n : lengths) out.push_back(draw(per, rng, kind, n));
  return out;
}

void ArmTask::prepare(seqlab::SequenceModel& model, const TaskBatch& b) const {
  if (arm_.arch != "prefix_lm") return;
  // reverse, dup_tag: [x, sep] (n + 1 of the 2n positions); lm, continuation: the first half of
  // the window (T/2 of the T - 1 inputs: T = tokens + 1 for continuation, tokens for lm).
  const std::size_t w = b.tokens.shape()[1];
  const std::size_t prefix = symbols_ ? w / 2 + 1 : arm_.task == "lm" ? w / 2 : (w + 1) / 2;
  for (seqlab::MultiheadAttention* a : self_attentions(model)) a->set_causal_prefix(prefix);
}

// ---------------------------------------------------------------------------------------------
// Models.

namespace {

/// The model of an arm at width D with `layers` layers per stack.
ModelConfig base_config(const Cell& cell, const Arm& arm, const TaskSpec& spec, const std::string& model, std::size_t D,
                        std::size_t layers) {
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
  if (mc.positional_encoding == "learned") mc.max_len = std::max(spec.seq_len, spec.decoder_len);
  mc.shared_qk = arm.shared();
  mc.dropout = 0.0f;
  return mc;
}

std::string stack_model(const std::string& arch) {
  return arch == "encoder" ? "transformer_encoder" : "transformer_decoder";  // prefix_lm: a decoder
}

}  // namespace

ModelChoice choose_model(const Cell& cell, const Arm& arm, const ArmTask& task) {
  const std::size_t D = cell.get_size("d_model"), L = cell.get_size("num_layers");
  ModelChoice mc;
  // The reference: the decoder-only model of the same task with separate W_Q, W_K (its
  // vocabulary has no bos and its majority head reads the last position).
  Arm ref = arm;
  ref.arch = "decoder";
  ref.qk = "separate";
  const ArmTask ref_task(cell, ref);
  mc.budget = seqlab::count_parameters(base_config(cell, ref, ref_task.spec(), "transformer_decoder", D, L));
  if (!arm.encoder_decoder()) {
    mc.cfg = base_config(cell, arm, task.spec(), stack_model(arm.arch), D, L);
    (arm.arch == "encoder" ? mc.encoder_layers : mc.decoder_layers) = L;
    if (arm.shared() && cell.get_string("shared_match") == "d_ff") {
      // W_K and b_K removed from each layer (D² + D) come back as feed-forward units (2D + 1 each).
      const std::size_t count = seqlab::count_parameters(mc.cfg);
      if (count < mc.budget) mc.cfg.d_ff += (mc.budget - count) / (L * (2 * D + 1));
    }
    return mc;
  }
  if (arm.arch == "encoder_decoder_compute") {
    mc.cfg = base_config(cell, arm, task.spec(), "transformer_encoder_decoder", D, L);
    mc.encoder_layers = mc.decoder_layers = L;
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
    ModelConfig c = base_config(cell, arm, task.spec(), "transformer_encoder_decoder", w, L / 2);
    if (seqlab::count_parameters(c) > mc.budget) break;  // the count grows with the width
    best = c;
  }
  if (!best)
    throw ConfigError("d_model: invalid value '" + std::to_string(D) + "': no encoder-decoder width (multiple of " +
                      std::to_string(step) + ") fits the parameter count of the decoder-only model (" +
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

double forward_macs(const ModelConfig& cfg, const Arm& arm, double S, double T_dec) {
  const double D = static_cast<double>(cfg.hidden_size), F = static_cast<double>(cfg.d_ff);
  const double O = static_cast<double>(cfg.output_size), L = static_cast<double>(cfg.num_layers);
  const double proj = (arm.shared() ? 3.0 : 4.0) * D * D;  // q(k)v and out projections per token
  // One self-attention layer over N tokens: projections, feed-forward, scores and context.
  const auto layer = [&](double N) { return N * (proj + 2 * D * F) + 2 * N * N * D; };
  if (!arm.encoder_decoder()) return L * layer(S) + S * D * O;
  // Cross-attention of T' queries over S keys: q and out projections per query, k and v per key.
  const double cross = T_dec * 2 * D * D + S * 2 * D * D + 2 * T_dec * S * D;
  return L * layer(S) + L * (layer(T_dec) + cross) + T_dec * D * O;
}

std::vector<seqlab::MultiheadAttention*> self_attentions(seqlab::SequenceModel& model) {
  std::vector<seqlab::MultiheadAttention*> out;
  if (auto* t = dynamic_cast<seqlab::TransformerModel*>(&model)) {
    for (auto& l : t->layers) out.push_back(&l->self_attn);
  } else if (auto* ed = dynamic_cast<seqlab::EncoderDecoderModel*>(&model)) {
    for (auto& l : ed->encoder_layers) out.push_back(&l->self_attn);
    for (auto& l : ed->decoder_layers) out.push_back(&l->self_attn);
  }
  return out;
}

std::vector<seqlab::MultiheadAttention*> layer_attentions(seqlab::SequenceModel& model) {
  if (dynamic_cast<seqlab::TransformerModel*>(&model) == nullptr) return {};
  return self_attentions(model);
}

seqlab::Tensor3 forward(seqlab::SequenceModel& model, const ArmTask& task, const TaskBatch& b) {
  task.prepare(model, b);
  if (auto* ed = dynamic_cast<seqlab::EncoderDecoderModel*>(&model)) return ed->forward(b.tokens, b.decoder_tokens);
  return model.forward(b.tokens);
}

}  // namespace attention_ablations
