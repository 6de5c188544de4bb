// The norm_stability binary at tiny scale (bad input, valid CSVs, determinism, a recorded
// divergence, BatchNorm's train/eval statistics and the masked variant in the outputs), and the
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

// A tiny but real design: every study, three norms, one seed, a 1-layer d_model = 8 model.
// `extra` replaces a default of the same key (a key may be given only once).
std::vector<std::string> tiny(const fs::path& out, std::vector<std::string> extra = {}) {
  const std::vector<std::string> defaults = {
      "--norm=layer_norm,batch_norm,masked_batch_norm", "--seeds=1", "--seq_len=8", "--min_len=2",
      "--n_classes=2", "--n_noise=1", "--d_model=8", "--n_heads=2", "--d_ff=8", "--num_layers=1",
      "--steps=6", "--warmup_steps=2", "--test_size=8", "--batch=4", "--batch_sizes=1 4",
      "--pad_fractions=0 0.5", "--placements=pre post", "--warmups=0 2", "--lrs=0.01",
      "--eval_pad_fractions=0 0.5", "--log_every=2", "--quiet", "--out=" + out.string()};
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

// The field `k` as a number: std::stod of it, trailing text not checked (seqlab::test::cli::num
// would also require the whole field to be the number).
double num(const std::map<std::string, std::string>& r, const std::string& k) {
  return std::stod(r.at(k));
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
      {{"--study=batch,foo"}, {"study", "'foo' is not allowed", "batch|padding|warmup"}},
      {{"--norm=group_norm"}, {"norm", "group_norm"}},
      {{"--batch_sizes=1 x"}, {"batch_sizes", "'x' is not an integer", "space-separated list of distinct integers"}},
      {{"--batch_sizes=1 0"}, {"batch_sizes", "'0' is out of range", "[1, 4096]"}},
      {{"--batch_sizes=2 2"}, {"batch_sizes", "'2' is repeated"}},
      {{"--pad_fractions=0 0.99"}, {"pad_fractions", "'0.99' is out of range", "[0, 0.95]"}},
      {{"--pad_fractions=0 0.9"}, {"pad_fractions", "0.9", "min_len"}},
      {{"--eval_pad_fractions=nan"}, {"eval_pad_fractions", "'nan'"}},
      {{"--placements=pre middle"}, {"placements", "'middle' is not allowed", "pre|post"}},
      {{"--lrs=0.01 0"}, {"lrs", "'0' is out of range", "(0, 10]"}},
      {{"--lrs=1e400"}, {"lrs", "'1e400' is not a finite real number"}},
      {{"--warmups=0 100"}, {"warmups", "'100' is out of range", "<= steps (6)"}},
      {{"--placements="}, {"placements", "empty list"}},
      {{"--warmup_steps=7"}, {"warmup_steps", "'7'", "<= steps (6)"}},
      {{"--d_model=8", "--n_heads=3"}, {"n_heads", "3"}},
      {{"--min_len=9"}, {"min_len", "<= seq_len (8)"}},
      {{"--min_len=1"}, {"min_len", "'1'", "[2, 4096]"}},
      {{"--steps=0"}, {"steps", "'0'"}},
      {{"--stall_fraction=0"}, {"stall_fraction", "'0'"}},
      {{"--divergence_factor=1"}, {"divergence_factor", "'1'"}},
      {{"--schedule=inverse_sqrt"}, {"schedule", "inverse_sqrt", "constant|cosine"}},
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

TEST_CASE("norm_stability lists one cell per study, norm and seed", "[integration][norm_stability]") {
  TempDir d;
  const Run r = run(tiny(d.path / "res", {"--list-cells", "--norm=layer_norm"}), d.path);
  CHECK(r.code == 0);
  CHECK(r.out == "0 study=batch norm=layer_norm seed=0\n1 study=padding norm=layer_norm seed=0\n"
                 "2 study=warmup norm=layer_norm seed=0\n");
  CHECK_FALSE(fs::exists(d.path / "res"));
}

TEST_CASE("norm_stability writes valid deterministic CSVs of every run", "[integration][norm_stability]") {
  TempDir d;
  const fs::path ref = d.path / "ref";
  const Run a = run(tiny(ref), d.path);
  INFO(a.err);
  REQUIRE(a.code == 0);
  const std::string main_csv = slurp(ref / "norm_stability.csv");
  const std::string steps_csv = slurp(ref / "norm_stability_steps.csv");
  const std::string eval_csv = slurp(ref / "norm_stability_eval.csv");
  CHECK(fs::exists(ref / "norm_stability.meta.json"));
  const Csv m = parse_csv(main_csv), s = parse_csv(steps_csv), e = parse_csv(eval_csv);
  const std::vector<std::string> main_cols = {
      "experiment", "study", "norm", "norm_placement", "batch", "pad_fraction", "warmup_steps",
      "lr", "seed", "derived_seed", "n_params", "d_model", "num_layers", "seq_len", "steps",
      "expected_pad_fraction", "initial_loss", "blowup_loss", "diverged", "diverged_step",
      "diverged_reason", "steps_done", "final_train_loss", "failed", "loss_volatility",
      "grad_norm_first", "grad_norm_max", "mu_dev_late", "var_dev_late", "pad_mean_shift_late",
      "acc_train_mode", "acc_eval_mode", "train_eval_gap", "loss_train_mode", "loss_eval_mode",
      "chance_accuracy", "train_time_s"};
  CHECK(m.header == main_cols);
  // Runs: 3 norms x (batch: 2 sizes + padding: 2 fractions + warmup: 2 x 2 x 1) = 24.
  REQUIRE(m.rows.size() == 24);
  // 6 steps logged at 0, 2, 4, 5: 4 rows per run; eval: 2 fractions x 2 modes per run.
  CHECK(s.rows.size() == 24 * 4);
  CHECK(e.rows.size() == 24 * 4);
  CHECK(s.header.back() == "n_real");
  CHECK(e.header.back() == "loss");
  std::map<std::string, int> per_study;
  for (const auto& r : m.rows) {
    INFO(r.at("study") << " " << r.at("norm") << " batch " << r.at("batch"));
    ++per_study[r.at("study")];
    CHECK(r.at("diverged") == "0");
    CHECK(r.at("steps_done") == "6");
    const double acc_t = num(r, "acc_train_mode"), acc_e = num(r, "acc_eval_mode");
    CHECK(acc_t >= 0.0);
    CHECK(acc_t <= 1.0);
    CHECK_THAT(num(r, "train_eval_gap"), Catch::Matchers::WithinAbs(acc_t - acc_e, 1e-6));
    CHECK(std::isfinite(num(r, "initial_loss")));
    CHECK(std::isfinite(num(r, "loss_volatility")));
    CHECK(std::isfinite(num(r, "mu_dev_late")));
    // Without padding the statistics over all positions and over the real ones coincide.
    if (num(r, "pad_fraction") == 0.0) CHECK(num(r, "pad_mean_shift_late") == 0.0);
    if (r.at("norm") == "layer_norm") {
      // LayerNorm has no batch statistics: train and eval mode are the same computation.
      CHECK(r.at("acc_train_mode") == r.at("acc_eval_mode"));
      CHECK(r.at("loss_train_mode") == r.at("loss_eval_mode"));
    } else {
      // BatchNorm in eval mode uses the running statistics, so its loss differs from train mode.
      CHECK(r.at("loss_train_mode") != r.at("loss_eval_mode"));
    }
  }
  CHECK(per_study["batch"] == 6);
  CHECK(per_study["padding"] == 6);
  CHECK(per_study["warmup"] == 12);
  // Which positions enter the first norm's statistics: naive batch_norm all B x T, the masked
  // variant only the real ones.
  bool saw_padding = false;
  for (const auto& r : s.rows) {
    const std::string& norm = r.at("norm");
    const long all = std::stol(r.at("batch")) * 8;
    INFO(norm << " step " << r.at("step") << " batch " << r.at("batch"));
    if (norm == "batch_norm") CHECK(std::stol(r.at("stat_count")) == all);
    if (norm == "masked_batch_norm") CHECK(r.at("stat_count") == r.at("n_real"));
    saw_padding = saw_padding || std::stol(r.at("n_real")) < all;
    CHECK(std::isfinite(std::stod(r.at("mu_dev"))));
  }
  CHECK(saw_padding);

  // Same seed and threads: identical numbers (but the wall-clock column), byte for byte.
  const fs::path again = d.path / "again";
  REQUIRE(run(tiny(again), d.path).code == 0);
  CHECK(drop_column(slurp(again / "norm_stability.csv"), "train_time_s") ==
        drop_column(main_csv, "train_time_s"));
  CHECK(slurp(again / "norm_stability_steps.csv") == steps_csv);
  CHECK(slurp(again / "norm_stability_eval.csv") == eval_csv);
}

TEST_CASE("norm_stability records a diverging run instead of crashing", "[integration][norm_stability]") {
  TempDir d;
  const fs::path out = d.path / "res";
  // No norm, Post placement, no warm-up, lr 10: the loss blows up within the first updates.
  const Run r = run(tiny(out, {"--study=warmup", "--norm=none,layer_norm", "--placements=post",
                               "--warmups=0", "--lrs=10", "--steps=30"}),
                    d.path);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const Csv m = parse_csv(slurp(out / "norm_stability.csv"));
  REQUIRE(m.rows.size() == 2);
  bool any = false;
  for (const auto& row : m.rows) {
    INFO(row.at("norm"));
    if (row.at("diverged") != "1") continue;
    any = true;
    CHECK(row.at("failed") == "1");
    CHECK((row.at("diverged_reason") == "loss_blowup" || row.at("diverged_reason") == "non_finite"));
    const int step = std::stoi(row.at("diverged_step"));
    CHECK(step >= 0);
    CHECK(step < 30);
    CHECK(std::stoi(row.at("steps_done")) <= step + 1);
    // The loss blow-up rule: the mean of the last 10 losses above 3 x the initial loss.
    if (row.at("diverged_reason") == "loss_blowup")
      CHECK(num(row, "blowup_loss") == Approx(3 * num(row, "initial_loss")).epsilon(1e-6));
  }
  CHECK(any);
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
