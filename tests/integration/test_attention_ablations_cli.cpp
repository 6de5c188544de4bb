// The attention_ablations binary at tiny scale: bad input (exit 2, nothing written), --list-cells,
// a run over every task and architecture whose CSVs have every column, the measured symmetry of
// the attention logits (shared W_Q = W_K: 0 up to rounding; separate: clearly not), matched
// parameter counts, and determinism. Runs the built executable in temporary directories.
#include <catch2/catch.hpp>
#include "cli.hpp"
#include "temp_dir.hpp"

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace seqlab::test::cli;

namespace {
struct TempDir : seqlab::test::TempDir {
  TempDir() : seqlab::test::TempDir("seqlab_attn_cli") {}
};

const std::string kBinary = SEQLAB_EXPERIMENTS_BIN_DIR "/attention_ablations";

// Runs the binary with `args` to completion; stdout/stderr go to files in `io_dir`.
Run run(const std::vector<std::string>& args, const fs::path& io_dir) {
  return seqlab::test::cli::run(kBinary, args, io_dir);
}

const std::vector<std::string> kArms = {
    "prev_token:decoder:separate:2", "prev_token:decoder:shared:2",  "prev_token:encoder:shared:1",
    "mqar:decoder:separate:4",       "induction:decoder:shared:2",   "majority:encoder:separate:2",
    "majority:encoder_decoder:separate:2", "reverse:decoder:separate:2",
    "reverse:encoder:separate:2",    "reverse:encoder_decoder:shared:2", "lm:decoder:separate:2",
    "lm:encoder_decoder:separate:2"};

std::string arm_list() {
  std::string s;
  for (const auto& a : kArms) s += (s.empty() ? "" : ",") + a;
  return s;
}

// Seconds of work: d_model 8, 2 layers, 6 updates of batch 4 on sequences of 8 tokens.
std::vector<std::string> tiny(const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {
      "--arm=" + arm_list(), "--seeds=1",        "--d_model=8",     "--num_layers=2",
      "--seq_len=8",         "--vocab=8",        "--mqar_pairs=2",  "--mqar_queries=2",
      "--batch=4",           "--steps=6",        "--warmup_steps=2", "--eval_every=3",
      "--eval_batch=4",      "--test_batch=40",  "--out=" + out.string()};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

const std::vector<std::string> kMainColumns = {
    "experiment", "arm", "task", "arch", "qk", "n_heads", "seed", "derived_seed", "d_model", "d_ff",
    "head_dim", "encoder_layers", "decoder_layers", "n_params", "param_budget", "src_len",
    "tgt_len", "batch", "steps", "lr", "test_loss", "test_accuracy", "test_exact_match",
    "chance_accuracy", "best_accuracy", "chance_loss", "optimal_loss", "target_accuracy",
    "steps_to_target", "logit_asymmetry_init", "logit_asymmetry", "diag_attention",
    "prev_attention", "diverged", "diverged_step", "steps_done", "final_train_loss",
    "train_time_s"};
const std::vector<std::string> kCurveColumns = {
    "experiment", "arm", "task", "arch", "qk", "n_heads", "seed", "step", "train_loss",
    "eval_loss", "eval_accuracy"};

}  // namespace

TEST_CASE("attention_ablations rejects bad input with exit 2 and writes nothing",
          "[integration][attention_ablations]") {
  REQUIRE(fs::exists(kBinary));
  TempDir d;
  const fs::path out = d.path / "res";
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {{"--arm=prev_token:decoder:sharedd:4"}, {"arm", "'prev_token:decoder:sharedd:4'", "unknown qk", "separate|shared"}},
      {{"--arm=mqar:decoder:separate"}, {"arm", "four ':'-separated fields"}},
      {{"--arm=copy:decoder:separate:4"}, {"arm", "unknown task 'copy'", "prev_token|mqar|induction|majority|reverse|lm"}},
      {{"--arm=lm:gpt:separate:4"}, {"arm", "unknown arch 'gpt'", "encoder|decoder|encoder_decoder"}},
      {{"--arm=lm:encoder:separate:4"}, {"arm", "arch encoder cannot run task lm", "decoder|encoder_decoder"}},
      {{"--arm=induction:encoder:shared:4"}, {"arm", "arch encoder cannot run task induction", "allowed for induction: decoder"}},
      {{"--arm=mqar:encoder_decoder:separate:4"}, {"arm", "arch encoder_decoder cannot run task mqar"}},
      {{"--arm=prev_token:decoder:separate:3"}, {"arm", "n_heads 3 does not divide d_model = 32"}},
      {{"--arm=prev_token:decoder:separate:x"}, {"arm", "n_heads 'x' is not an integer"}},
      {{"--arm=reverse:encoder_decoder:separate:4", "--num_layers=3"}, {"num_layers", "'3'", "even"}},
      {{"--arm=mqar:decoder:separate:4", "--seq_len=12"}, {"seq_len", "'12'", "mqar", ">= 2 * (mqar_pairs + mqar_queries) = 16"}},
      {{"--arm=mqar:decoder:separate:4", "--mqar_queries=5"}, {"mqar_queries", "<= mqar_pairs"}},
      {{"--arm=induction:decoder:separate:4", "--vocab=8"}, {"vocab", "'8'", "prefix length"}},
      {{"--arm=lm:decoder:separate:4", "--lm_branching=17"}, {"lm_branching", "<= vocab"}},
      {{"--positional_encoding=alibi"}, {"positional_encoding", "'alibi'", "sinusoidal"}},
      {{"--steps=10", "--warmup_steps=11"}, {"warmup_steps", "'11'", "<= steps (10)"}},
      {{"--target_fraction=0"}, {"target_fraction", "'0'"}},
      {{"--arm=prev_token:encoder:separate:2,prev_token:encoder:separate:2"}, {"arm"}},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"--out=" + out.string()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Run r = run(args, d.path);
    INFO(c.args.front() << " -> " << r.err);
    CHECK(r.code == 2);
    CHECK(count_lines(r.err) == 1);
    for (const auto& e : c.expect) CHECK_THAT(r.err, Catch::Contains(e));
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("attention_ablations lists its arms", "[integration][attention_ablations]") {
  TempDir d;
  const Run r = run({"--arm=mqar:decoder:separate:4,majority:encoder_decoder:shared:2",
                     "--seeds=2", "--list-cells"},
                    d.path);
  CHECK(r.code == 0);
  CHECK(r.out ==
        "0 arm=mqar:decoder:separate:4 seed=0\n1 arm=mqar:decoder:separate:4 seed=1\n"
        "2 arm=majority:encoder_decoder:shared:2 seed=0\n"
        "3 arm=majority:encoder_decoder:shared:2 seed=1\n");
  // The quick scale's grid is valid (every arm passes validation).
  const Run q = run({"--scale=quick", "--list-cells"}, d.path);
  CHECK(q.code == 0);
  CHECK(count_lines(q.out) >= 3 * 20);
  const Run p = run({"--scale=paper", "--list-cells"}, d.path);
  CHECK(p.code == 0);
}

TEST_CASE("attention_ablations writes every column, symmetric shared-QK logits and matched sizes",
          "[integration][attention_ablations]") {
  TempDir d;
  const fs::path ref = d.path / "ref";
  const Run a = run(tiny(ref), d.path);
  INFO(a.err);
  REQUIRE(a.code == 0);
  const std::string csv = slurp(ref / "attention_ablations.csv");
  const std::string curve = slurp(ref / "attention_ablations_curve.csv");
  CHECK(fs::exists(ref / "attention_ablations.meta.json"));

  const Csv main_table = parse_csv(csv);
  const auto& header = main_table.header;
  const auto& rows = main_table.rows;
  CHECK(header == kMainColumns);
  REQUIRE(rows.size() == kArms.size());
  std::map<std::string, std::map<std::string, std::string>> by_arm;
  for (const auto& r : rows) {
    INFO(r.at("arm"));
    for (const auto& c : kMainColumns) CHECK_FALSE(r.at(c).empty());
    by_arm[r.at("arm")] = r;
    CHECK(r.at("experiment") == "attention_ablations");
    CHECK(r.at("arm") == r.at("task") + ":" + r.at("arch") + ":" + r.at("qk") + ":" + r.at("n_heads"));
    CHECK(r.at("diverged") == "0");
    CHECK(r.at("steps_done") == "6");
    const double acc = num(r, "test_accuracy");
    CHECK(acc >= 0.0);
    CHECK(acc <= 1.0);
    CHECK(num(r, "test_loss") > 0.0);
    CHECK(num(r, "chance_accuracy") > 0.0);
    CHECK(num(r, "chance_accuracy") < num(r, "best_accuracy"));
    CHECK(num(r, "target_accuracy") > num(r, "chance_accuracy"));
    const double st = num(r, "steps_to_target");
    CHECK((st == -1 || st == 3 || st == 6));
    // The measured symmetry ||S - S^T|| / ||S|| of the pre-softmax logits, averaged over the
    // self-attentions: 0 up to float rounding with W_Q = W_K and added (sinusoidal) positions,
    // clearly positive with separate projections — at initialisation and after training.
    for (const char* col : {"logit_asymmetry_init", "logit_asymmetry"}) {
      INFO(col);
      const double s = num(r, col);
      if (r.at("qk") == "shared") {
        CHECK(s >= 0.0);
        CHECK(s < 1e-5);
      } else {
        CHECK(s > 0.05);
        CHECK(s <= 2.0);
      }
    }
    // Parameter counts: single-stack models are the reference (param_budget, the decoder-only
    // model of the same task, heads and sharing); the encoder-decoder is matched to within one
    // d_ff unit (2 * d_model + 1 parameters per feed-forward block).
    const double np = num(r, "n_params"), budget = num(r, "param_budget");
    if (r.at("arch") == "encoder_decoder") {
      CHECK(np <= budget);
      CHECK(np > budget - 2 * (2 * num(r, "d_model") + 1));
      CHECK(r.at("encoder_layers") == "1");
      CHECK(r.at("decoder_layers") == "1");
    } else {
      CHECK(np == budget);  // the budget is the decoder-only count of the same arm
    }
  }
  // Sharing drops W_K [D, D] and b_K [D] from every layer: L·(D² + D) fewer parameters.
  CHECK(num(by_arm.at("prev_token:decoder:separate:2"), "n_params") -
            num(by_arm.at("prev_token:decoder:shared:2"), "n_params") ==
        2 * (8 * 8 + 8));
  // Layouts: decoder-only reverse is a prefix LM over [x, sep, y_<n]; the encoder reads x; the
  // encoder-decoder reads x and [bos, y_<n].
  CHECK(by_arm.at("reverse:decoder:separate:2").at("src_len") == "8");
  CHECK(by_arm.at("reverse:encoder:separate:2").at("src_len") == "4");
  CHECK(by_arm.at("reverse:encoder_decoder:shared:2").at("src_len") == "4");
  CHECK(by_arm.at("reverse:encoder_decoder:shared:2").at("tgt_len") == "4");
  CHECK(by_arm.at("majority:encoder_decoder:separate:2").at("tgt_len") == "1");
  CHECK(by_arm.at("lm:encoder_decoder:separate:2").at("src_len") == "4");
  CHECK(by_arm.at("lm:decoder:separate:2").at("src_len") == "8");
  CHECK(num(by_arm.at("lm:decoder:separate:2"), "optimal_loss") > 0.0);
  CHECK(num(by_arm.at("lm:decoder:separate:2"), "best_accuracy") < 1.0);
  CHECK(by_arm.at("majority:encoder:separate:2").at("chance_accuracy") == "0.25");

  const Csv curve_table = parse_csv(curve);
  const auto& curve_header = curve_table.header;
  const auto& crows = curve_table.rows;
  CHECK(curve_header == kCurveColumns);
  CHECK(crows.size() == 2 * kArms.size());  // evaluations after updates 3 and 6
  for (const auto& r : crows) {
    CHECK((r.at("step") == "3" || r.at("step") == "6"));
    const double acc = num(r, "eval_accuracy");
    CHECK(acc >= 0.0);
    CHECK(acc <= 1.0);
  }

  // Same seed and threads: identical metric columns; another base seed changes them.
  const fs::path again = d.path / "again";
  REQUIRE(run(tiny(again), d.path).code == 0);
  CHECK(drop_column(slurp(again / "attention_ablations.csv"), "train_time_s") ==
        drop_column(csv, "train_time_s"));
  CHECK(slurp(again / "attention_ablations_curve.csv") == curve);
  const fs::path other = d.path / "other";
  REQUIRE(run(tiny(other, {"--seed=7"}), d.path).code == 0);
  CHECK(drop_column(slurp(other / "attention_ablations.csv"), "train_time_s") !=
        drop_column(csv, "train_time_s"));
}
