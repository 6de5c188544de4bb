// The norm_stability binary at tiny scale (bad input, the cells, valid CSVs of every table,
// determinism, the pilot's choice, the evaluation modes, a recorded divergence or stall), and the
// two mechanisms the experiment relies on, through the model itself: BatchNorm's eval mode uses
// the running statistics, and masked_batch_norm ignores the padded positions.
#include <catch2/catch.hpp>
#include "cli.hpp"
#include "temp_dir.hpp"

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "seqlab/core/rng.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/norm.hpp"
#include "seqlab/tasks/majority.hpp"

namespace fs = std::filesystem;
using namespace seqlab;
using seqlab::test::cli::count_lines;
using seqlab::test::cli::Csv;
using seqlab::test::cli::drop_column;
using seqlab::test::cli::parse_csv;
using seqlab::test::cli::Run;
using seqlab::test::cli::slurp;

namespace {
struct TempDir : seqlab::test::TempDir {
  TempDir() : seqlab::test::TempDir("seqlab_norm_cli") {}
};

const std::string kBinary = SEQLAB_EXPERIMENTS_BIN_DIR "/norm_stability";

Run run(const std::vector<std::string>& args, const fs::path& io_dir) {
  return seqlab::test::cli::run(kBinary, args, io_dir);
}

// A tiny but real design (configs/tiny.ini's sizes): every study, one seed, 1- and 2-layer
// d_model = 8 models on 8-symbol windows of the KJV. `extra` replaces a default of the same key
// (a key may be given only once).
std::vector<std::string> tiny(const fs::path& out, std::vector<std::string> extra = {}) {
  const std::vector<std::string> defaults = {
      "--seeds=1", "--seq_len=8", "--d_model=8", "--n_heads=2", "--d_ff=8", "--depths=1 2",
      "--placements=pre post", "--warmups=0 2", "--lrs=0.01 0.1", "--steps=6", "--batch=4",
      "--valid_tokens=64", "--init_batches=1", "--norms=layer_norm batch_norm masked_batch_norm power_norm",
      "--train_pad_maxes=0.5", "--pad_step=0.25", "--test_pads=0 0.5", "--bn_steps=6", "--bn_batch=4",
      "--bn_layers=1", "--lr_grid=0.003 0.01", "--pilot_fraction=0.5", "--valid_size=4", "--test_size=8",
      "--calib_examples=8", "--batch_norms=layer_norm batch_norm", "--batch_sizes=2 4", "--batch_ref=4",
      "--examples=16", "--log_points=3", "--divergence_window=2", "--quiet", "--out=" + out.string()};
  auto key = [](const std::string& arg) { return arg.substr(0, arg.find('=')); };
  std::vector<std::string> a;
  for (const auto& d : defaults) {
    bool replaced = false;
    for (const auto& e : extra) replaced = replaced || key(e) == key(d);
    if (!replaced) a.push_back(d);
  }
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// The field `k` as a number: std::stod of it ("nan" included), trailing text not checked.
double num(const std::map<std::string, std::string>& r, const std::string& k) {
  return std::stod(r.at(k));
}

// The identifying columns of a row, joined (the run it belongs to).
std::string run_of(const std::map<std::string, std::string>& r) {
  std::string k;
  for (const char* c : {"study", "norm", "norm_placement", "num_layers", "batch", "train_pad_max",
                        "warmup_steps", "lr", "seed"})
    k += r.at(c) + "|";
  return k;
}

}  // namespace

TEST_CASE("norm_stability rejects bad input with exit 2 and writes nothing", "[integration][norm_stability]") {
  REQUIRE(fs::exists(kBinary));
  TempDir d;
  const fs::path out = d.path / "res";
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {{"--study=batch,foo"}, {"study", "'foo' is not allowed", "warmup|padding|batch"}},
      {{"--norms=layer_norm group_norm"}, {"norms", "group_norm"}},
      {{"--batch_sizes=2 x"}, {"batch_sizes", "'x' is not an integer", "space-separated list of distinct integers"}},
      {{"--batch_sizes=2 0"}, {"batch_sizes", "'0' is out of range", "[1, 4096]"}},
      {{"--batch_sizes=2 2"}, {"batch_sizes", "'2' is repeated"}},
      {{"--batch_sizes=2 32"}, {"batch_sizes", "32", "at most examples = 16"}},
      {{"--examples=2"}, {"examples", ">= batch_ref = 4"}},
      {{"--test_pads=0 0.99"}, {"test_pads", "'0.99' is out of range", "[0, 0.95]"}},
      {{"--train_pad_maxes=nan"}, {"train_pad_maxes", "'nan'"}},
      {{"--placements=pre middle"}, {"placements", "'middle' is not allowed", "pre|post"}},
      {{"--lrs=0.01 0"}, {"lrs", "'0' is out of range", "(0, 10]"}},
      {{"--lr_grid=1e400"}, {"lr_grid", "'1e400' is not a finite real number"}},
      {{"--warmups=0 100"}, {"warmups", "'100' is out of range", "<= steps (6)"}},
      {{"--placements="}, {"placements", "empty list"}},
      {{"--d_model=8", "--n_heads=3"}, {"n_heads", "3"}},
      {{"--min_len=9"}, {"min_len", "<= seq_len (8)"}},
      {{"--min_len=1"}, {"min_len", "'1'", "[2, 4096]"}},
      {{"--steps=0"}, {"steps", "'0'"}},
      {{"--mask_fraction=0"}, {"mask_fraction", "'0'"}},
      {{"--divergence_factor=1"}, {"divergence_factor", "'1'"}},
      {{"--warmup_schedule=inverse_sqrt"}, {"warmup_schedule", "inverse_sqrt", "constant|cosine"}},
      {{"--unit=word"}, {"unit", "word", "char|byte"}},
      {{"--corpus=/nonexistent/text.txt"}, {"corpus", "/nonexistent/text.txt"}},
  };
  for (const auto& c : cases) {
    const Run r = run(tiny(out, c.args), d.path);
    INFO(c.args.back() << " -> " << r.err);
    CHECK(r.code == 2);
    CHECK(count_lines(r.err) == 1);
    for (const auto& e : c.expect) CHECK_THAT(r.err, Catch::Contains(e));
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("norm_stability lists one cell per study and seed", "[integration][norm_stability]") {
  TempDir d;
  const Run r = run(tiny(d.path / "res", {"--list-cells", "--seeds=2"}), d.path);
  CHECK(r.code == 0);
  CHECK(r.out == "0 study=warmup seed=0\n1 study=warmup seed=1\n2 study=padding seed=0\n"
                 "3 study=padding seed=1\n4 study=batch seed=0\n5 study=batch seed=1\n");
  CHECK_FALSE(fs::exists(d.path / "res"));
}

TEST_CASE("norm_stability writes valid deterministic CSVs of every run", "[integration][norm_stability]") {
  TempDir d;
  const fs::path ref = d.path / "ref";
  const Run a = run(tiny(ref), d.path);
  INFO(a.err);
  REQUIRE(a.code == 0);
  const std::vector<std::string> tables = {"", "_steps", "_eval", "_pilot", "_init_grads"};
  std::map<std::string, std::string> text;
  for (const auto& t : tables) text[t] = slurp(ref / ("norm_stability" + t + ".csv"));
  CHECK(fs::exists(ref / "norm_stability.meta.json"));
  const Csv m = parse_csv(text[""]), s = parse_csv(text["_steps"]), e = parse_csv(text["_eval"]);
  const Csv p = parse_csv(text["_pilot"]), g = parse_csv(text["_init_grads"]);
  const std::vector<std::string> ids = {"experiment", "study", "norm", "norm_placement", "num_layers",
                                        "batch", "train_pad_max", "warmup_steps", "lr", "seed"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> c = ids;
    c.insert(c.end(), more.begin(), more.end());
    return c;
  };
  CHECK(m.header == with({"derived_seed", "n_params", "d_model", "seq_len", "steps", "examples", "lr_source",
                          "initial_loss", "baseline_loss", "diverged", "diverged_step", "diverged_reason",
                          "steps_done", "final_train_loss", "valid_loss", "failed", "loss_volatility",
                          "grad_norm_first", "grad_norm_max", "mu_dev_late", "var_dev_late", "mu_dev_max",
                          "var_dev_max", "pad_mean_shift_late", "train_time_s"}));
  CHECK(s.header == with({"step", "loss", "grad_norm", "step_lr", "pad_share", "mu_dev", "var_dev",
                          "pad_mean_shift"}));
  CHECK(e.header == with({"test_pad", "mode", "loss", "accuracy", "n_scored"}));
  CHECK(p.header == with({"trial_lr", "pilot_steps", "val_loss", "chosen"}));
  CHECK(g.header == with({"layer", "param", "grad_norm", "init_batches"}));
  // Runs: warmup 2 depths x 2 placements x 2 warm-ups x 2 lrs = 16; padding 4 norms x 1
  // condition = 4; batch 2 norms x 2 sizes = 4.
  std::map<std::string, int> per_study;
  for (const auto& r : m.rows) ++per_study[r.at("study")];
  CHECK(per_study["warmup"] == 16);
  CHECK(per_study["padding"] == 4);
  CHECK(per_study["batch"] == 4);
  // eval: padding 4 runs x 2 shares x 4 modes, batch 4 runs x 1 share x 3 modes; pilot: one row per
  // grid value per arm (4 + 2 arms); init_grads: (1 + 2) layers x 2 placements x 2 parameters.
  CHECK(e.rows.size() == 4 * 2 * 4 + 4 * 3);
  CHECK(p.rows.size() == 6 * 2);
  CHECK(g.rows.size() == 12);
  // 6 updates logged every 2: 3 rows per warm-up and padding run; batch runs 8 and 4 updates.
  CHECK(s.rows.size() == 16 * 3 + 4 * 3 + 2 * (4 + 4));
  for (const auto& r : m.rows) {
    INFO(run_of(r));
    CHECK(r.at("diverged") == "0");
    CHECK(std::isfinite(num(r, "initial_loss")));
    CHECK(std::isfinite(num(r, "valid_loss")));
    CHECK(num(r, "baseline_loss") > 2.5);  // the KJV's train unigram, nats per character
    CHECK(num(r, "baseline_loss") < 3.5);
    const bool bn_study = r.at("study") != "warmup";
    CHECK(r.at("lr_source") == (bn_study ? "pilot" : "grid"));
    CHECK(std::isfinite(num(r, "mu_dev_late")) == bn_study);
    if (r.at("study") == "batch")  // equal training examples: updates = examples / B
      CHECK(std::stol(r.at("steps")) * std::stol(r.at("batch")) == 16);
  }
  // The pilot chooses exactly one grid value per arm, and the arm's run uses it (the batch study
  // scales it by sqrt(B / batch_ref)).
  std::map<std::string, int> chosen;
  for (const auto& r : p.rows) {
    chosen[run_of(r)] += std::stoi(r.at("chosen"));
    if (r.at("chosen") == "1") CHECK(num(r, "trial_lr") == num(r, "lr"));
  }
  CHECK(chosen.size() == 6);
  for (const auto& [k, n] : chosen) CHECK(n == 1);
  // Modes: LayerNorm keeps no statistics, so every mode is the same computation; BatchNorm's
  // running, batch and precise statistics give different losses.
  std::map<std::string, std::map<std::string, std::string>> loss;  // run|share -> mode -> loss
  for (const auto& r : e.rows) loss[run_of(r) + r.at("norm") + "|" + r.at("test_pad")][r.at("mode")] = r.at("loss");
  for (const auto& [k, modes] : loss) {
    INFO(k);
    if (k.find("|layer_norm|") != std::string::npos)
      for (const auto& [mode, v] : modes) CHECK(v == modes.at("eval"));
    if (k.find("|batch_norm|") != std::string::npos) {
      CHECK(modes.at("train") != modes.at("eval"));
      CHECK(modes.at("precise") != modes.at("eval"));
    }
  }
  // The padding study draws a share per batch from 0, 0.25, 0.5; the others have none.
  bool saw_padding = false;
  for (const auto& r : s.rows) {
    const double share = num(r, "pad_share");
    CHECK(share >= 0.0);
    CHECK(share <= 0.5);
    saw_padding = saw_padding || share > 0;
    if (r.at("study") != "padding") CHECK(share == 0.0);
  }
  CHECK(saw_padding);

  // Same seed and threads: identical numbers (but the wall-clock column), byte for byte.
  const fs::path again = d.path / "again";
  REQUIRE(run(tiny(again), d.path).code == 0);
  CHECK(drop_column(slurp(again / "norm_stability.csv"), "train_time_s") == drop_column(text[""], "train_time_s"));
  for (const auto& t : tables)
    if (!t.empty()) CHECK(slurp(again / ("norm_stability" + t + ".csv")) == text[t]);
}

TEST_CASE("norm_stability records a diverging run instead of crashing", "[integration][norm_stability]") {
  TempDir d;
  const fs::path out = d.path / "res";
  // Post-LN, no warm-up, lr 10: the loss blows up or stalls within the first updates.
  const Run r = run(tiny(out, {"--study=warmup", "--placements=post", "--warmups=0", "--lrs=10",
                               "--steps=30", "--depths=2", "--divergence_window=5"}),
                    d.path);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const Csv m = parse_csv(slurp(out / "norm_stability.csv"));
  REQUIRE(m.rows.size() == 1);
  const auto& row = m.rows[0];
  CHECK(row.at("failed") == "1");
  if (row.at("diverged") == "1") {
    CHECK((row.at("diverged_reason") == "loss_blowup" || row.at("diverged_reason") == "non_finite"));
    const int step = std::stoi(row.at("diverged_step"));
    CHECK(step >= 0);
    CHECK(step < 30);
    CHECK(std::stoi(row.at("steps_done")) <= step + 1);
    CHECK(std::isnan(num(row, "valid_loss")));
  } else {
    // A stall: not diverged, but not below the unigram baseline minus stall_margin.
    CHECK(num(row, "valid_loss") >= num(row, "baseline_loss") - 0.1);
  }
}

namespace {

ModelConfig tiny_model(const std::string& norm) {
  ModelConfig mc;
  mc.model = "transformer_encoder";
  mc.vocab_size = 4;
  mc.embedding_dim = mc.hidden_size = 8;
  mc.num_layers = 1;
  mc.n_heads = 2;
  mc.d_ff = 8;
  mc.norm = norm;
  mc.norm_placement = "post";
  mc.output_size = 2;
  mc.padding_idx = 0;
  return mc;
}

BatchNorm& first_bn(TransformerModel& m) {
  auto* bn = dynamic_cast<BatchNorm*>(m.layers.at(0)->norm1.get());
  REQUIRE(bn != nullptr);
  return *bn;
}

}  // namespace

TEST_CASE("BatchNorm's eval mode normalises with the running statistics", "[integration][norm_stability]") {
  Rng rng(3);
  auto ptr = make_model(tiny_model("batch_norm"), rng);
  auto& m = dynamic_cast<TransformerModel&>(*ptr);
  const MajorityTask task(6, 0.0, 2, 1, 2);
  Rng data(5);
  m.train();
  for (int i = 0; i < 3; ++i) (void)m.forward(task.sample(4, data).inputs);  // running stats move
  BatchNorm& bn = first_bn(m);
  CHECK(bn.num_batches_tracked == 3);
  const PaddedClassificationBatch b = task.sample(4, data);
  IndexTensor2 one = xt::view(b.inputs, xt::range(0, 1), xt::all());
  // Eval mode: a sequence's output does not depend on the rest of the batch...
  m.eval();
  const Tensor3 all_eval = m.forward(b.inputs);
  const Tensor3 one_eval = m.forward(one);
  for (std::size_t t = 0; t < 6; ++t)
    for (std::size_t k = 0; k < 2; ++k) CHECK_THAT(one_eval(0, t, k), Catch::Matchers::WithinAbs(all_eval(0, t, k), 1e-5));
  // ... and the running statistics are what it uses: changing them changes the output, and the
  // forward leaves them (and num_batches_tracked) unchanged.
  const Tensor1 saved_mean = bn.running_mean;
  CHECK(bn.num_batches_tracked == 3);
  bn.running_mean += 0.5f;
  const Tensor3 shifted = m.forward(b.inputs);
  CHECK(xt::amax(xt::abs(shifted - all_eval))() > 1e-3f);
  bn.running_mean = saved_mean;
  const Tensor3 restored = m.forward(b.inputs);
  CHECK(xt::amax(xt::abs(restored - all_eval))() < 1e-6f);
  // Train mode: batch statistics, so the same sequence gives another output alone than in the batch.
  m.train();
  const Tensor3 all_train = m.forward(b.inputs);
  const Tensor3 one_train = m.forward(one);
  float diff = 0;
  for (std::size_t t = 0; t < 6; ++t)
    for (std::size_t k = 0; k < 2; ++k) diff = std::max(diff, std::abs(one_train(0, t, k) - all_train(0, t, k)));
  CHECK(diff > 1e-4f);
  CHECK(bn.num_batches_tracked == 5);
}

TEST_CASE("masked BatchNorm ignores padded positions and naive BatchNorm does not", "[integration][norm_stability]") {
  const MajorityTask task(8, 0.5, 2, 1, 2);
  Rng data(9);
  const PaddedClassificationBatch b = task.sample(4, data);
  // The same batch with other tokens at the padded positions (the padding mask unchanged).
  IndexTensor2 other = b.inputs;
  std::size_t n_pad = 0;
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t t = 0; t < 8; ++t)
      if (b.padding(i, t)) {
        other(i, t) = 3;
        ++n_pad;
      }
  REQUIRE(n_pad > 0);
  for (const std::string norm : {"masked_batch_norm", "batch_norm"}) {
    INFO(norm);
    Rng rng(3);
    auto ptr = make_model(tiny_model(norm), rng);
    auto& m = dynamic_cast<TransformerModel&>(*ptr);
    m.train();
    m.set_padding(&b.padding);
    const Tensor3 y1 = m.forward(b.inputs);
    const BatchNorm::BatchStats s1 = first_bn(m).last_batch_stats();
    const Tensor3 y2 = m.forward(other);
    const BatchNorm::BatchStats s2 = first_bn(m).last_batch_stats();
    float real_diff = 0;
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t t = 0; t < 8; ++t)
        if (!b.padding(i, t))
          for (std::size_t k = 0; k < 2; ++k) real_diff = std::max(real_diff, std::abs(y1(i, t, k) - y2(i, t, k)));
    if (norm == "masked_batch_norm") {
      CHECK(s1.count == 32 - n_pad);  // only the real positions enter the statistics
      CHECK(xt::amax(xt::abs(s1.mean - s2.mean))() < 1e-6f);
      CHECK(real_diff < 1e-5f);       // so the real positions' outputs do not change
    } else {
      CHECK(s1.count == 32);
      CHECK(xt::amax(xt::abs(s1.mean - s2.mean))() > 1e-4f);
      CHECK(real_diff > 1e-4f);       // the padded tokens leak into every real position
    }
  }
}
