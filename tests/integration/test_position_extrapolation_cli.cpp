// The position_extrapolation binary at tiny scale: every task x every encoding trains and writes
// valid tables; the analysis numbers match closed forms computed here independently (direct loops
// over the formulas, not the library); same seed gives the same metric columns; bad input (a
// learned table too small for the longest evaluation, a missing corpus...) exits 2 naming the key
// and writes nothing.
#include <catch2/catch.hpp>
#include "cli.hpp"
#include "temp_dir.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace seqlab::test::cli;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

const std::string kBinary = SEQLAB_EXPERIMENTS_BIN_DIR "/position_extrapolation";

Run run(const std::vector<std::string>& args, const fs::path& io_dir) {
  return seqlab::test::cli::run(kBinary, args, io_dir);
}

/// Every encoding, every task, 1 seed: a few updates of a width-8 decoder. `extra` ("--key=value")
/// replaces the tiny value of the same key (a key given twice is an error of the binary).
std::vector<std::string> tiny(const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::pair<std::string, std::string>> kv = {
      {"L_train", "8"}, {"min_train_len", "6"}, {"max_eval_ratio", "3"}, {"d_model", "8"},
      {"n_heads", "2"}, {"d_ff", "8"}, {"num_layers", "1"}, {"steps", "6"}, {"warmup_steps", "2"},
      {"batch", "4"}, {"eval_batch", "4"}, {"finetune_steps", "3"}, {"finetune_ratio", "2"},
      {"finetune_warmup_steps", "1"}, {"log_every", "3"}, {"mqar_n_pairs", "1"},
      {"mqar_n_queries", "1"}, {"mqar_n_keys", "4"}, {"mqar_n_values", "4"}, {"copy_alphabet", "4"},
      {"analysis_samples", "2000"}, {"rope_max_distance", "300"}, {"alias_search_to", "200"},
      {"seeds", "1"}};
  std::vector<std::string> a;
  for (const auto& [k, v] : kv) {
    bool overridden = false;
    for (const auto& e : extra) overridden = overridden || e.rfind("--" + k + "=", 0) == 0;
    if (!overridden) a.push_back("--" + k + "=" + v);
  }
  a.insert(a.end(), extra.begin(), extra.end());
  a.push_back("--quiet");
  a.push_back("--out=" + out.string());
  return a;
}

const std::vector<std::string> kEncodings = {"sinusoidal", "learned", "rope", "rope_pi",
                                             "rope_ntk", "alibi", "none"};

// Independent formulas (Vaswani et al. §3.5; RoFormer eq. 34, 37-38).
double omega(std::size_t i, std::size_t D) { return std::pow(10000.0, -2.0 * double(i) / double(D)); }
double pe(double p, std::size_t j, std::size_t D) {
  const double a = p * omega(j / 2, D);
  return j % 2 == 0 ? std::sin(a) : std::cos(a);
}

}  // namespace

TEST_CASE("position_extrapolation trains every encoding on every task at tiny scale", "[integration][position_extrapolation]") {
  REQUIRE(fs::exists(kBinary));
  seqlab::test::TempDir d("seqlab_pe_cli");
  const fs::path out = d.path / "res";
  const Run r = run(tiny(out), d.path);
  INFO(r.err);
  REQUIRE(r.code == 0);

  const Csv runs = read_csv(out / "position_extrapolation.csv");
  CHECK(runs.header == std::vector<std::string>{
                           "experiment", "task", "positional_encoding", "variant", "seed", "derived_seed",
                           "L_train", "max_eval_len", "d_model", "num_layers", "n_heads", "n_params",
                           "vocab_size", "steps", "finetune_len", "finetune_steps", "steps_done", "diverged",
                           "diverged_step", "final_train_loss", "train_time_s"});
  // 4 tasks x 7 encodings, plus one fine-tuned row per training task for rope_pi.
  CHECK(runs.rows.size() == 28 + 3);
  const Csv ev = read_csv(out / "position_extrapolation_eval.csv");
  CHECK(ev.header == std::vector<std::string>{
                         "experiment", "task", "positional_encoding", "variant", "seed", "L_train", "eval_len",
                         "eval_ratio", "bucket", "n_scored", "loss_nats", "perplexity", "accuracy",
                         "chance_accuracy", "chance_loss_nats"});
  // (3 tasks x 7 encodings + 3 fine-tuned) x 3 lengths x 3 buckets.
  CHECK(ev.rows.size() == (3 * 7 + 3) * 3 * 3);
  std::set<std::string> seen;
  for (std::size_t i = 0; i < ev.rows.size(); ++i) {
    INFO("eval row " << i);
    const std::string task = ev.at(i, "task"), enc = ev.at(i, "positional_encoding");
    seen.insert(task + "/" + enc + "/" + ev.at(i, "variant"));
    CHECK(ev.num(i, "eval_len") == 8 * ev.num(i, "eval_ratio"));
    const std::string bucket = ev.at(i, "bucket");
    const double n = ev.num(i, "n_scored");
    // At 1x L_train no position lies beyond L_train; the bucket is empty (n 0, loss nan).
    if (bucket == "beyond_train_len" && ev.num(i, "eval_ratio") == 1) {
      CHECK(n == 0);
      CHECK(ev.at(i, "loss_nats") == "nan");
      continue;
    }
    if (bucket == "all") CHECK(n > 0);
    if (n > 0) {
      CHECK(std::isfinite(ev.num(i, "loss_nats")));
      CHECK(ev.num(i, "accuracy") >= 0);
      CHECK(ev.num(i, "accuracy") <= 1);
      CHECK_THAT(ev.num(i, "perplexity"), WithinRel(std::exp(ev.num(i, "loss_nats")), 1e-6));
    }
    if (task == "copy") CHECK(ev.num(i, "chance_accuracy") == 0.25);
    // MQAR's baseline is the key-agnostic predictor's (the most frequent value of the context):
    // with one pair per row that value is the answer, loss 0 and accuracy 1.
    if (task == "mqar") CHECK(ev.num(i, "chance_loss_nats") == 0);
    if (task == "mqar") CHECK(ev.num(i, "chance_accuracy") == 1);
  }
  for (const char* task : {"copy", "mqar", "char_lm"}) {
    for (const auto& enc : kEncodings) CHECK(seen.count(std::string(task) + "/" + enc + "/zero_shot") == 1);
    CHECK(seen.count(std::string(task) + "/rope_pi/finetuned") == 1);
  }
  // Copy at length 8: n = 3 symbols, 4 rows -> 12 scored positions, all < L_train.
  for (std::size_t i = 0; i < ev.rows.size(); ++i)
    if (ev.at(i, "task") == "copy" && ev.num(i, "eval_len") == 8 && ev.at(i, "bucket") == "all")
      CHECK(ev.num(i, "n_scored") == 12);
  // Steps: pretraining 6 updates logged every 3 (rows 3, 6) per training cell, fine-tune 3 (row 3).
  const Csv steps = read_csv(out / "position_extrapolation_steps.csv");
  CHECK(steps.rows.size() == 21 * 2 + 3 * 1);
  CHECK(fs::exists(out / "position_extrapolation.meta.json"));
}

TEST_CASE("position_extrapolation analysis numbers match closed forms", "[integration][position_extrapolation]") {
  seqlab::test::TempDir d("seqlab_pe_cli");
  const fs::path out = d.path / "res";
  const Run r = run(tiny(out, {"--task=analysis"}), d.path);
  INFO(r.err);
  REQUIRE(r.code == 0);

  // Similarity: 4 d_model x 4 k x 5 positions, dot from a direct loop over sin/cos in double.
  const Csv sim = read_csv(out / "position_extrapolation_similarity.csv");
  REQUIRE(sim.rows.size() == 80);
  for (std::size_t i = 0; i < sim.rows.size(); ++i) {
    const auto D = static_cast<std::size_t>(sim.num(i, "d_model"));
    const double k = sim.num(i, "distance"), p = sim.num(i, "position");
    double dot = 0, na = 0, nb = 0;
    for (std::size_t j = 0; j < D; ++j) {
      dot += pe(p, j, D) * pe(p + k, j, D);
      na += pe(p, j, D) * pe(p, j, D);
      nb += pe(p + k, j, D) * pe(p + k, j, D);
    }
    INFO("d_model " << D << " k " << k << " p " << p);
    CHECK_THAT(sim.num(i, "dot"), WithinAbs(dot, 1e-4 * double(D)));  // float32 table
    CHECK_THAT(sim.num(i, "cosine"), WithinAbs(dot / std::sqrt(na * nb), 1e-5));
    CHECK_THAT(sim.num(i, "dot_closed_form"), WithinAbs(dot, 1e-9 * double(D)));
    CHECK_THAT(sim.num(i, "cosine_closed_form"), WithinAbs(dot / (double(D) / 2), 1e-9));
    if (D == 512) {
      const double claimed = k == 1 ? 0.92 : k == 10 ? 0.65 : k == 100 ? 0.12 : -0.06;
      CHECK(sim.num(i, "claimed_cosine") == claimed);
    } else {
      CHECK(sim.at(i, "claimed_cosine") == "nan");
    }
  }
  // The values behind the verdict (numpy: mean(cos(k * 10000**(-2i/512)))).
  for (std::size_t i = 0; i < sim.rows.size(); ++i) {
    if (sim.num(i, "d_model") != 512 || sim.num(i, "position") != 0) continue;
    const double k = sim.num(i, "distance");
    const double expect = k == 1 ? 0.9731 : k == 10 ? 0.6789 : k == 100 ? 0.4373 : 0.1757;
    CHECK_THAT(sim.num(i, "cosine"), WithinAbs(expect, 1e-4));
  }

  // Resolution: separation(k) = sqrt(2 - 2 mean_{i in band} cos(k w_i)).
  const Csv res = read_csv(out / "position_extrapolation_resolution.csv");
  REQUIRE(!res.rows.empty());
  for (std::size_t i = 0; i < res.rows.size(); ++i) {
    const auto D = static_cast<std::size_t>(res.num(i, "d_model"));
    const std::string band = res.at(i, "band");
    const std::size_t lo = band == "low" ? D / 4 : 0, hi = band == "high" ? D / 4 : D / 2;
    const double k = res.num(i, "distance");
    double c = 0;
    for (std::size_t f = lo; f < hi; ++f) c += std::cos(k * omega(f, D));
    c /= double(hi - lo);
    INFO("d_model " << D << " band " << band << " k " << k);
    CHECK_THAT(res.num(i, "cosine"), WithinAbs(c, 1e-5));
    CHECK_THAT(res.num(i, "separation"), WithinAbs(std::sqrt(std::max(0.0, 2 - 2 * c)), 2e-4));
  }
  const Csv al = read_csv(out / "position_extrapolation_aliasing.csv");
  REQUIRE(al.rows.size() == 12);
  for (std::size_t i = 0; i < al.rows.size(); ++i) {
    const auto D = static_cast<std::size_t>(al.num(i, "d_model"));
    const std::string band = al.at(i, "band");
    const std::size_t lo = band == "low" ? D / 4 : 0, hi = band == "high" ? D / 4 : D / 2;
    const double two_pi = 2 * std::acos(-1.0);
    CHECK(al.num(i, "n_frequencies") == double(hi - lo));
    CHECK_THAT(al.num(i, "period_min"), WithinRel(two_pi / omega(lo, D), 1e-6));
    CHECK_THAT(al.num(i, "period_max"), WithinRel(two_pi / omega(hi - 1, D), 1e-6));
    double c1 = 0;
    for (std::size_t f = lo; f < hi; ++f) c1 += std::cos(omega(f, D));
    CHECK_THAT(al.num(i, "separation_at_1"), WithinAbs(std::sqrt(2 - 2 * c1 / double(hi - lo)), 2e-4));
    CHECK(al.num(i, "searched_to") == 200);
    // Within 200 positions no band comes back as close as one step apart.
    CHECK(al.num(i, "first_alias_distance") == 0);
  }

  // RoPE decay: bound term from RoFormer eq. 37-38 with theta_i / s (PI) or theta_i (rope).
  const Csv rd = read_csv(out / "position_extrapolation_rope_decay.csv");
  REQUIRE(!rd.rows.empty());
  std::set<std::string> curves;
  const std::size_t hd = 64;
  // E|q.k| for independent q, k ~ N(0, I_hd): sqrt(2/pi) * sqrt(2) Gamma((hd+1)/2) / Gamma(hd/2).
  const double e_abs = std::sqrt(2 / std::acos(-1.0)) * std::sqrt(2.0) *
                       std::exp(std::lgamma((hd + 1) / 2.0) - std::lgamma(hd / 2.0));
  for (std::size_t i = 0; i < rd.rows.size(); ++i) {
    const std::string enc = rd.at(i, "positional_encoding");
    const double s = rd.num(i, "scale"), dist = rd.num(i, "distance");
    curves.insert(enc + "/" + rd.at(i, "scale"));
    CHECK(rd.num(i, "head_dim") == hd);
    CHECK(rd.num(i, "n_samples") == 2000);
    std::vector<double> theta(hd / 2);
    for (std::size_t l = 0; l < hd / 2; ++l) {
      theta[l] = std::pow(10000.0, -2.0 * double(l) / double(hd));
      if (enc == "rope_pi") theta[l] /= s;
      if (enc == "rope_ntk") theta[l] = std::pow(10000.0 * std::pow(s, hd / (hd - 2.0)), -2.0 * double(l) / double(hd));
    }
    double re = 0, im = 0, bound = 0, shared = 0;
    for (std::size_t l = 0; l < hd / 2; ++l) {
      re += std::cos(dist * theta[l]);
      im += std::sin(dist * theta[l]);
      bound += std::sqrt(re * re + im * im);
      shared += 2 * std::cos(dist * theta[l]);  // E[q^T R q] = sum_i 2 cos(d theta_i)
    }
    INFO(enc << " s " << s << " distance " << dist);
    CHECK_THAT(rd.num(i, "roformer_bound"), WithinAbs(bound / double(hd / 2), 1e-3));
    // Monte Carlo with 2000 samples: sd of the shared mean <= sqrt(2 hd / 2000) = 0.25, of the iid
    // |score| mean <= sqrt(hd / 2000) = 0.18; 5 sd margins.
    CHECK_THAT(rd.num(i, "mean_score_shared"), WithinAbs(shared, 1.3));
    CHECK_THAT(rd.num(i, "mean_abs_score_iid"), WithinAbs(e_abs, 0.9));
  }
  // rope: scale 1; rope_pi / rope_ntk: scales 2 (powers of two up to max_eval_ratio 3).
  CHECK(curves == std::set<std::string>{"rope/1", "rope_pi/2", "rope_ntk/2"});
  // Analysis cells write one main-table row each and no training rows.
  const Csv runs = read_csv(out / "position_extrapolation.csv");
  CHECK(runs.rows.size() == 7);
  for (std::size_t i = 0; i < runs.rows.size(); ++i) CHECK(runs.at(i, "variant") == "analysis");
  CHECK(read_csv(out / "position_extrapolation_eval.csv").rows.empty());
}

TEST_CASE("position_extrapolation is deterministic for the same seed", "[integration][position_extrapolation]") {
  seqlab::test::TempDir d("seqlab_pe_cli");
  const std::vector<std::string> sub = {"--task=copy,char_lm", "--positional_encoding=rope_pi,learned"};
  REQUIRE(run(tiny(d.path / "a", sub), d.path).code == 0);
  REQUIRE(run(tiny(d.path / "b", sub), d.path).code == 0);
  REQUIRE(run(tiny(d.path / "c", [&] { auto s = sub; s.push_back("--seed=7"); return s; }()), d.path).code == 0);
  for (const char* t : {"_eval.csv", "_steps.csv"}) {
    INFO(t);
    const std::string a = slurp(d.path / "a" / (std::string("position_extrapolation") + t));
    CHECK(a == slurp(d.path / "b" / (std::string("position_extrapolation") + t)));
    CHECK(a != slurp(d.path / "c" / (std::string("position_extrapolation") + t)));
  }
}

TEST_CASE("position_extrapolation rejects bad input with exit 2 and writes nothing", "[integration][position_extrapolation]") {
  seqlab::test::TempDir d("seqlab_pe_cli");
  const fs::path out = d.path / "res";
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      // A learned table of 16 rows cannot cover the evaluation at 3 x 8 = 24 positions.
      {{"--positional_encoding=learned", "--learned_max_len=16"},
       {"learned_max_len", "'16'", "24"}},
      {{"--min_train_len=9"}, {"min_train_len", "'9'", "<= L_train (8)"}},
      {{"--task=mqar", "--mqar_n_pairs=2", "--mqar_n_queries=2"}, {"min_train_len", "8 tokens"}},
      {{"--task=mqar", "--mqar_n_queries=2"}, {"mqar_n_queries", "mqar_n_pairs"}},
      {{"--task=mqar", "--mqar_n_keys=0"}, {"mqar_n_keys"}},
      {{"--task=char_lm", "--corpus=/nonexistent/text.txt"}, {"corpus", "/nonexistent/text.txt"}},
      {{"--task=char_lm", "--max_eval_ratio=64", "--L_train=512"}, {"corpus", "test split"}},
      {{"--positional_encoding=rope", "--d_model=6", "--n_heads=2"}, {"n_heads"}},
      {{"--positional_encoding=cosine"}, {"positional_encoding", "'cosine'", "rope_pi"}},
      {{"--task=translation"}, {"task", "'translation'"}},
      {{"--steps=10", "--warmup_steps=20"}, {"warmup_steps", "<= steps"}},
      {{"--max_eval_ratio=0"}, {"max_eval_ratio", "'0'"}},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = tiny(out, c.args);
    const Run r = run(args, d.path);
    INFO(c.args.back() << " -> " << r.err);
    CHECK(r.code == 2);
    for (const auto& e : c.expect) CHECK_THAT(r.err, Catch::Contains(e));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(out));
  }
  // The same learned table is fine when it covers the longest evaluation (24 rows).
  const Run ok = run(tiny(out, {"--positional_encoding=learned", "--learned_max_len=24", "--task=copy"}), d.path);
  INFO(ok.err);
  CHECK(ok.code == 0);
}
