// The position_extrapolation binary at tiny scale: every task x every encoding trains and writes
// valid tables on the KJV (Debian's bible-kjv, prepared by the text task) and with --corpus on
// another file (the committed KJV excerpt, whose unigram baseline is recomputed here directly);
// the analysis numbers match closed forms computed here independently (direct loops over the
// formulas, not the library); same seed gives the same metric columns; bad input exits 2 naming
// the key and writes nothing.
#include <catch2/catch.hpp>
#include "cli.hpp"
#include "temp_dir.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace seqlab::test::cli;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

const std::string kBinary = SEQLAB_EXPERIMENTS_BIN_DIR "/position_extrapolation";
const std::string kExcerpt = SEQLAB_SOURCE_DIR "/tests/golden/kjv_excerpt.txt";

Run run(const std::vector<std::string>& args, const fs::path& io_dir) {
  return seqlab::test::cli::run(kBinary, args, io_dir);
}

const std::vector<std::string> kEncodings = {"sinusoidal", "learned", "rope", "alibi", "none", "t5_bias"};

/// configs/tiny.ini (every task, L_train 16, ratios 1 and 2, a width-8 decoder for a few updates)
/// with every encoding and 1 seed, plus `extra` ("--key=value"; a key given twice is an error of
/// the binary, so the encoding and seeds are only added when `extra` does not set them).
std::vector<std::string> tiny(const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"--scale=tiny", "--quiet", "--out=" + out.string()};
  const auto has = [&](const std::string& k) {
    return std::any_of(extra.begin(), extra.end(), [&](const std::string& e) { return e.rfind("--" + k + "=", 0) == 0; });
  };
  if (!has("encoding")) a.push_back("--encoding=sinusoidal,learned,rope,alibi,none,t5_bias");
  if (!has("seeds")) a.push_back("--seeds=1");
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// Independent formulas (Vaswani et al. §3.5; RoFormer eq. 34, 37-38).
double omega(std::size_t i, std::size_t D) { return std::pow(10000.0, -2.0 * double(i) / double(D)); }
double pe(double p, std::size_t j, std::size_t D) {
  const double a = p * omega(j / 2, D);
  return j % 2 == 0 ? std::sin(a) : std::cos(a);
}

/// The add-one unigram of a corpus file's train split on the first n targets of its test split
/// (tasks/text.hpp TextCorpus::unigram_loss), for an ASCII file split contiguously by fractions.
double unigram_loss_of_file(const std::string& path, double valid_fraction, double test_fraction, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t N = text.size();
  const auto n_valid = static_cast<std::size_t>(std::llround(valid_fraction * double(N)));
  const auto n_test = static_cast<std::size_t>(std::llround(test_fraction * double(N)));
  const std::string train = text.substr(0, N - n_valid - n_test), test = text.substr(N - n_test);
  std::map<char, double> count;
  for (char c : train) count[c] += 1;
  const double V = double(count.size()) + 1;  // + the unknown id
  double loss = 0;
  const std::size_t k = std::min(n, test.size() - 1);
  for (std::size_t j = 1; j <= k; ++j) {
    const auto it = count.find(test[j]);
    loss -= std::log(((it == count.end() ? 0.0 : it->second) + 1) / (double(train.size()) + V));
  }
  return loss / double(k);
}

/// Checks shared by the KJV and the --corpus runs: the tables' columns, the rope variants and the
/// fine-tunes, the buckets, both text evaluation modes scoring the same targets.
void check_tables(const fs::path& out, std::size_t n_tasks, std::size_t finetune_tasks) {
  const Csv runs = read_csv(out / "position_extrapolation.csv");
  CHECK(runs.header == std::vector<std::string>{
                           "experiment", "task", "positional_encoding", "variant", "seed", "derived_seed", "L_train",
                           "max_eval_len", "d_model", "num_layers", "n_heads", "n_params", "vocab_size", "steps",
                           "lr", "lr_pilot", "finetune_len", "finetune_steps", "finetune_lr_scale",
                           "finetune_lr", "steps_done", "diverged", "diverged_step", "final_train_loss",
                           "untrained_position_rows", "train_time_s"});
  // Per task: 6 encodings + rope_pi and rope_ntk zero-shot, + 3 fine-tuned where fine-tuned.
  CHECK(runs.rows.size() == n_tasks * 8 + finetune_tasks * 3);
  std::set<std::string> seen;
  for (std::size_t i = 0; i < runs.rows.size(); ++i) {
    INFO("run row " << i);
    seen.insert(runs.at(i, "task") + "/" + runs.at(i, "positional_encoding") + "/" + runs.at(i, "variant"));
    // The pilot chose one of the grid's rates and reports both trials.
    CHECK((runs.at(i, "lr") == "0.001" || runs.at(i, "lr") == "0.003"));
    CHECK(runs.at(i, "lr_pilot").find("0.001:") == 0);
    CHECK(runs.at(i, "lr_pilot").find(";0.003:") != std::string::npos);
    // Learned: the table's rows past L_train (16 of 32) are exactly their initial values.
    CHECK(runs.num(i, "untrained_position_rows") == (runs.at(i, "positional_encoding") == "learned" ? 16 : 0));
    if (runs.at(i, "variant") == "finetuned") {
      CHECK(runs.num(i, "finetune_len") == 32);
      CHECK(runs.num(i, "finetune_steps") == 3);
      CHECK(runs.num(i, "finetune_lr_scale") == 0.2);
      CHECK_THAT(runs.num(i, "finetune_lr"), WithinRel(0.2 * runs.num(i, "lr"), 1e-6));
    } else {
      CHECK(runs.num(i, "finetune_lr_scale") == 0);
    }
  }
  for (const char* v : {"rope_pi", "rope_ntk"}) CHECK(seen.count(std::string("text/") + v + "/zero_shot") == 1);
  for (const char* v : {"rope", "rope_pi", "rope_ntk"}) CHECK(seen.count(std::string("text/") + v + "/finetuned") == 1);

  const Csv ev = read_csv(out / "position_extrapolation_eval.csv");
  CHECK(ev.header == std::vector<std::string>{"experiment", "task", "positional_encoding", "variant", "seed",
                                              "finetune_lr_scale", "finetune_step", "mode", "stride", "L_train",
                                              "eval_len", "eval_ratio", "bucket", "n_scored", "loss_nats",
                                              "perplexity", "accuracy", "baseline_accuracy", "baseline_loss_nats"});
  std::map<std::string, double> text_all;  // "mode/length/encoding/variant/finetune_step" -> n_scored
  std::set<std::string> budgets;           // "task/encoding/finetune_step" of the fine-tuned evaluations
  for (std::size_t i = 0; i < ev.rows.size(); ++i) {
    INFO("eval row " << i);
    const std::string task = ev.at(i, "task"), bucket = ev.at(i, "bucket"), mode = ev.at(i, "mode");
    CHECK(ev.num(i, "eval_len") == 16 * ev.num(i, "eval_ratio"));
    // Fine-tunes are evaluated after finetune_eval_steps (tiny.ini: 1 2) and after the last update (3).
    if (ev.at(i, "variant") == "finetuned") {
      CHECK(ev.num(i, "finetune_lr_scale") == 0.2);
      budgets.insert(task + "/" + ev.at(i, "positional_encoding") + "/" + ev.at(i, "finetune_step"));
    } else {
      CHECK(ev.num(i, "finetune_lr_scale") == 0);
      CHECK(ev.num(i, "finetune_step") == 0);
    }
    const double n = ev.num(i, "n_scored");
    if (bucket == "beyond_train_len" && ev.num(i, "eval_ratio") == 1) {  // nothing lies beyond at 1x
      CHECK(n == 0);
      CHECK(ev.at(i, "loss_nats") == "nan");
      continue;
    }
    if (bucket == "all") CHECK(n > 0);
    if (n > 0) {
      CHECK(std::isfinite(ev.num(i, "loss_nats")));
      CHECK_THAT(ev.num(i, "perplexity"), WithinRel(std::exp(ev.num(i, "loss_nats")), 1e-6));
    }
    if (task == "text") {
      CHECK((mode == "non_overlapping" || mode == "sliding"));
      CHECK(ev.num(i, "stride") == (mode == "sliding" ? 8 : ev.num(i, "eval_len")));
      if (bucket == "all") {
        CHECK(n == 64);  // eval_tokens: the same targets at every length and in both modes
        text_all[mode + "/" + ev.at(i, "eval_len") + "/" + ev.at(i, "positional_encoding") + "/" + ev.at(i, "variant") +
                 "/" + ev.at(i, "finetune_step")] = n;
      }
    } else {
      CHECK(mode == "rows");
      CHECK(ev.num(i, "stride") == 0);
      const bool dist = bucket.rfind("distance_", 0) == 0;
      if (dist) CHECK(task != "copy");  // copy's evidence is always copy_lag back: no distance buckets
    }
    // Baselines: passkey guesses among the unused digits (2 digits: (1/10 + 1/9) / 2).
    if (task == "passkey") CHECK_THAT(ev.num(i, "baseline_accuracy"), WithinRel((0.1 + 1.0 / 9) / 2, 1e-6));
    if (task == "mqar" || task == "copy") {
      CHECK(ev.num(i, "baseline_accuracy") > 0);
      CHECK(ev.num(i, "baseline_accuracy") <= 1);
    }
  }
  // text: 2 modes x 2 lengths x (6 encodings + 2 zero-shot variants + 3 fine-tuned x 3 budgets).
  CHECK(text_all.size() == 2 * 2 * 17);
  for (const char* v : {"rope", "rope_pi", "rope_ntk"})
    for (const char* k : {"1", "2", "3"}) CHECK(budgets.count(std::string("text/") + v + "/" + k) == 1);
  CHECK(budgets.size() == finetune_tasks * 3 * 3);
  CHECK(fs::exists(out / "position_extrapolation.meta.json"));
  // The pilot table: each trained arm's two trials once (replicate 0), one chosen.
  const Csv pilot = read_csv(out / "position_extrapolation_pilot.csv");
  CHECK(pilot.rows.size() == n_tasks * 6 * 2);
  double chosen = 0;
  for (std::size_t i = 0; i < pilot.rows.size(); ++i) chosen += pilot.num(i, "chosen");
  CHECK(chosen == n_tasks * 6);
}

}  // namespace

TEST_CASE("position_extrapolation trains every encoding on every task at tiny scale on the KJV",
          "[integration][position_extrapolation]") {
  REQUIRE(fs::exists(kBinary));
  seqlab::test::TempDir d("seqlab_pe_cli");
  const fs::path out = d.path / "res";
  const Run r = run(tiny(out, {"--task=text,copy,mqar,passkey"}), d.path);
  INFO(r.err);
  REQUIRE(r.code == 0);
  check_tables(out, 4, 2);  // tiny.ini fine-tunes text and passkey
  // The KJV's vocabulary: 63 characters of the train split plus the unknown id (lib/README.md).
  const Csv runs = read_csv(out / "position_extrapolation.csv");
  for (std::size_t i = 0; i < runs.rows.size(); ++i)
    if (runs.at(i, "task") == "text") CHECK(runs.num(i, "vocab_size") == 64);
  // The pilots are cached once per arm.
  std::size_t cached = 0;
  for (const auto& e : fs::directory_iterator(out / "pilots")) cached += e.path().extension() == ".json" ? 1 : 0;
  CHECK(cached == 4 * 6);
  // Steps: pretraining 6 updates logged every 3 (rows 3, 6) per training cell; fine-tunes of 3
  // updates evaluated after 1 and 2: a curve row per update (the windows end at the evaluations).
  const Csv steps = read_csv(out / "position_extrapolation_steps.csv");
  CHECK(steps.rows.size() == 4 * 6 * 2 + 2 * 3 * 3);
  // The fine-tune schedule (tiny.ini: constant after 1 warm-up update): every update at 0.2 x lr.
  for (std::size_t i = 0; i < steps.rows.size(); ++i)
    if (steps.at(i, "variant") == "finetuned") {
      CHECK(steps.num(i, "finetune_lr_scale") == 0.2);
      CHECK(steps.at(i, "phase") == "finetune_" + steps.at(i, "positional_encoding"));
      for (std::size_t j = 0; j < runs.rows.size(); ++j)
        if (runs.at(j, "task") == steps.at(i, "task") && runs.at(j, "positional_encoding") == "rope" &&
            runs.at(j, "variant") == "zero_shot")
          CHECK_THAT(steps.num(i, "lr"), WithinRel(0.2 * runs.num(j, "lr"), 1e-6));
    }
}

TEST_CASE("position_extrapolation fine-tunes once per rate of finetune_lr_scale", "[integration][position_extrapolation]") {
  seqlab::test::TempDir d("seqlab_pe_cli");
  const fs::path out = d.path / "res";
  const Run r = run(tiny(out, {"--task=passkey", "--encoding=rope", "--finetune_lr_scale=0.2 0.05",
                               "--finetune_eval_steps=none", "--finetune_schedule=cosine"}),
                    d.path);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const Csv runs = read_csv(out / "position_extrapolation.csv");
  std::map<std::string, double> lr;  // "variant/encoding/scale" -> finetune_lr
  double base = 0;
  for (std::size_t i = 0; i < runs.rows.size(); ++i) {
    if (runs.at(i, "variant") == "zero_shot" && runs.at(i, "positional_encoding") == "rope") base = runs.num(i, "lr");
    if (runs.at(i, "variant") == "finetuned")
      lr[runs.at(i, "positional_encoding") + "/" + runs.at(i, "finetune_lr_scale")] = runs.num(i, "finetune_lr");
  }
  REQUIRE(lr.size() == 6);
  for (const char* v : {"rope", "rope_pi", "rope_ntk"}) {
    CHECK_THAT(lr[std::string(v) + "/0.2"], WithinRel(0.2 * base, 1e-6));
    CHECK_THAT(lr[std::string(v) + "/0.05"], WithinRel(0.05 * base, 1e-6));
  }
  // No intermediate evaluations: one per fine-tune, after its 3 updates.
  const Csv ev = read_csv(out / "position_extrapolation_eval.csv");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < ev.rows.size(); ++i)
    if (ev.at(i, "variant") == "finetuned") {
      CHECK(ev.num(i, "finetune_step") == 3);
      seen.insert(ev.at(i, "positional_encoding") + "/" + ev.at(i, "finetune_lr_scale"));
    }
  CHECK(seen.size() == 6);
  // Phases: finetune_<variant> for the first rate, finetune_<variant>_1 for the second; cosine: the
  // rate falls after the warm-up update.
  const Csv steps = read_csv(out / "position_extrapolation_steps.csv");
  std::set<std::string> phases;
  for (std::size_t i = 0; i < steps.rows.size(); ++i) {
    if (steps.at(i, "variant") != "finetuned") continue;
    phases.insert(steps.at(i, "phase"));
    CHECK(steps.at(i, "phase") == "finetune_" + steps.at(i, "positional_encoding") +
                                      (steps.at(i, "finetune_lr_scale") == "0.05" ? "_1" : ""));
    CHECK(steps.num(i, "lr") < std::stod(steps.at(i, "finetune_lr_scale")) * base);  // the window's last update
  }
  CHECK(phases.size() == 6);
}

TEST_CASE("position_extrapolation leaves the fine-tune keys out of the cells that do not fine-tune",
          "[integration][position_extrapolation]") {
  seqlab::test::TempDir d("seqlab_pe_cli");
  const fs::path out = d.path / "res";
  auto cell_files = [&](const std::string& encoding) {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(out / "cells"))
      n += e.path().filename().string().find("encoding=" + encoding + "_") != std::string::npos ? 1 : 0;
    return n;
  };
  const Run r = run(tiny(out, {"--task=passkey", "--encoding=sinusoidal,rope"}), d.path);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::size_t sinusoidal = cell_files("sinusoidal"), rope = cell_files("rope");
  REQUIRE(sinusoidal > 0);
  REQUIRE(rope > 0);
  auto pilots = [&]() {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(out / "pilots")) n += e.path().extension() == ".json" ? 1 : 0;
    return n;
  };
  const std::size_t pilots_before = pilots();
  REQUIRE(pilots_before == 2);  // one per encoding
  // Longer fine-tunes at one more rate: only the rope cell (which fine-tunes) runs again.
  const Run again = run(tiny(out, {"--task=passkey", "--encoding=sinusoidal,rope", "--finetune_steps=4",
                                   "--finetune_lr_scale=0.2 0.5", "--finetune_eval_steps=2"}),
                        d.path);
  INFO(again.err);
  REQUIRE(again.code == 0);
  CHECK(cell_files("sinusoidal") == sinusoidal);
  CHECK(cell_files("rope") == 2 * rope);
  CHECK(pilots() == pilots_before);  // the rope cell reused its pilot: it never reads the fine-tune keys
  const Csv ev = read_csv(out / "position_extrapolation_eval.csv");
  std::set<double> budgets;
  for (std::size_t i = 0; i < ev.rows.size(); ++i)
    if (ev.at(i, "variant") == "finetuned") budgets.insert(ev.num(i, "finetune_step"));
  CHECK(budgets == std::set<double>{2, 4});
}

TEST_CASE("position_extrapolation pilots a task's own grid with whole-run trials", "[integration][position_extrapolation]") {
  seqlab::test::TempDir d("seqlab_pe_cli");
  const fs::path out = d.path / "res";
  // pilot_steps = 0: each trial trains steps_<task> updates (tiny.ini: 6); mqar has its own grid.
  const Run r = run(tiny(out, {"--task=copy,mqar", "--encoding=rope", "--pilot_steps=0", "--lr_grid_mqar=0.002 0.005"}),
                    d.path);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const Csv pilot = read_csv(out / "position_extrapolation_pilot.csv");
  std::map<std::string, std::set<std::string>> grid;
  for (std::size_t i = 0; i < pilot.rows.size(); ++i) {
    CHECK(pilot.num(i, "pilot_steps") == 6);
    grid[pilot.at(i, "task")].insert(pilot.at(i, "lr"));
  }
  CHECK(grid["copy"] == std::set<std::string>{"0.001", "0.003"});
  CHECK(grid["mqar"] == std::set<std::string>{"0.002", "0.005"});
  const Csv runs = read_csv(out / "position_extrapolation.csv");
  for (std::size_t i = 0; i < runs.rows.size(); ++i)
    CHECK(grid[runs.at(i, "task")].count(runs.at(i, "lr")) == 1);
  // Another task's grid or budget is not part of a cell's fingerprint: changing mqar's keys
  // recomputes the mqar cells only, and the copy cells are reused.
  auto cell_files = [&](const std::string& task) {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(out / "cells"))
      n += e.path().filename().string().rfind("task=" + task + "_", 0) == 0 ? 1 : 0;
    return n;
  };
  const std::size_t copy_before = cell_files("copy"), mqar_before = cell_files("mqar");
  REQUIRE(copy_before > 0);
  const Run again = run(tiny(out, {"--task=copy,mqar", "--encoding=rope", "--pilot_steps=0",
                                   "--lr_grid_mqar=0.002 0.006", "--steps_mqar=5"}),
                        d.path);
  INFO(again.err);
  REQUIRE(again.code == 0);
  CHECK(cell_files("copy") == copy_before);
  CHECK(cell_files("mqar") == 2 * mqar_before);
}

TEST_CASE("position_extrapolation trains on another corpus file given with --corpus",
          "[integration][position_extrapolation]") {
  seqlab::test::TempDir d("seqlab_pe_cli");
  const fs::path out = d.path / "res";
  const Run r = run(tiny(out, {"--task=text", "--corpus=" + kExcerpt, "--valid_fraction=0.1", "--test_fraction=0.1"}),
                    d.path);
  INFO(r.err);
  REQUIRE(r.code == 0);
  check_tables(out, 1, 1);
  // The baseline is the add-one unigram of the file's own train split, computed here directly.
  const double want = unigram_loss_of_file(kExcerpt, 0.1, 0.1, 64);
  const Csv ev = read_csv(out / "position_extrapolation_eval.csv");
  for (std::size_t i = 0; i < ev.rows.size(); ++i) CHECK_THAT(ev.num(i, "baseline_loss_nats"), WithinRel(want, 1e-6));
  // Bytes of the same ASCII file: the same corpus.
  const fs::path out2 = d.path / "bytes";
  const Run rb = run(tiny(out2, {"--task=text", "--encoding=alibi", "--corpus=" + kExcerpt, "--unit=byte",
                                 "--valid_fraction=0.1", "--test_fraction=0.1"}),
                     d.path);
  INFO(rb.err);
  REQUIRE(rb.code == 0);
  const Csv eb = read_csv(out2 / "position_extrapolation_eval.csv");
  REQUIRE(!eb.rows.empty());
  CHECK_THAT(eb.num(0, "baseline_loss_nats"), WithinRel(want, 1e-6));
}

TEST_CASE("position_extrapolation analysis numbers match closed forms", "[integration][position_extrapolation]") {
  seqlab::test::TempDir d("seqlab_pe_cli");
  const fs::path out = d.path / "res";
  const Run r = run(tiny(out, {"--task=analysis", "--L_train=8", "--eval_ratios=1 2 3"}), d.path);
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
  // The rope cell: scale 1; its rope_pi and rope_ntk: scale 2 (powers of two up to the longest
  // evaluation ratio, 3).
  CHECK(curves == std::set<std::string>{"rope/1", "rope_pi/2", "rope_ntk/2"});
  // Analysis cells write one main-table row each and no training rows.
  const Csv runs = read_csv(out / "position_extrapolation.csv");
  CHECK(runs.rows.size() == 6);
  for (std::size_t i = 0; i < runs.rows.size(); ++i) CHECK(runs.at(i, "variant") == "analysis");
  CHECK(read_csv(out / "position_extrapolation_eval.csv").rows.empty());

  // analysis_head_dim = 0: the trained head size, d_model / n_heads (tiny.ini: 8 / 2).
  const fs::path out0 = d.path / "res0";
  const Run r0 = run(tiny(out0, {"--task=analysis", "--encoding=rope", "--analysis_head_dim=0"}), d.path);
  INFO(r0.err);
  REQUIRE(r0.code == 0);
  const Csv rd0 = read_csv(out0 / "position_extrapolation_rope_decay.csv");
  REQUIRE(!rd0.rows.empty());
  for (std::size_t i = 0; i < rd0.rows.size(); ++i) CHECK(rd0.num(i, "head_dim") == 4);
}

TEST_CASE("position_extrapolation is deterministic for the same seed", "[integration][position_extrapolation]") {
  seqlab::test::TempDir d("seqlab_pe_cli");
  const std::vector<std::string> sub = {"--task=copy,text", "--encoding=rope,learned"};
  REQUIRE(run(tiny(d.path / "a", sub), d.path).code == 0);
  REQUIRE(run(tiny(d.path / "b", sub), d.path).code == 0);
  REQUIRE(run(tiny(d.path / "c", [&] { auto s = sub; s.push_back("--seed=7"); return s; }()), d.path).code == 0);
  for (const char* t : {"_eval.csv", "_steps.csv", "_pilot.csv"}) {
    INFO(t);
    const std::string a = slurp(d.path / "a" / (std::string("position_extrapolation") + t));
    CHECK(a == slurp(d.path / "b" / (std::string("position_extrapolation") + t)));
    CHECK(a != slurp(d.path / "c" / (std::string("position_extrapolation") + t)));
  }
}

TEST_CASE("position_extrapolation rejects bad input with exit 2 and writes nothing", "[integration][position_extrapolation]") {
  seqlab::test::TempDir d("seqlab_pe_cli");
  const fs::path out = d.path / "res";
  const fs::path empty = d.path / "empty.txt", shortf = d.path / "short.txt", binary = d.path / "binary.bin";
  std::ofstream(empty).close();
  std::ofstream(shortf) << std::string(300, 'a') << "\n";
  std::ofstream(binary, std::ios::binary) << std::string("\xff\xfe\x00\x01 not utf-8", 15);
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      // A learned table of 24 rows cannot cover the evaluation at 2 x 16 = 32 positions.
      {{"--encoding=learned", "--learned_max_len=24"}, {"learned_max_len", "'24'", "32"}},
      {{"--copy_lag=9"}, {"copy_lag", "'9'", "L_train / 2"}},
      {{"--sliding_stride=16"}, {"sliding_stride", "'16'"}},
      {{"--eval_ratios=2 4"}, {"eval_ratios", "starting with 1"}},
      // Each element is checked before the list is read as lengths (a negative one once wrapped
      // around to a huge seq_len that the message named instead).
      {{"--eval_ratios=1 -2"}, {"eval_ratios", "'-2'"}},
      {{"--eval_ratios=1 99999999999"}, {"eval_ratios", "99999999999"}},
      {{"--task=mqar", "--mqar_n_queries=3"}, {"n_queries"}},
      {{"--task=mqar", "--mqar_n_pairs=5", "--mqar_n_queries=4", "--mqar_n_keys=8"}, {"seq_len"}},
      {{"--task=text", "--corpus=/nonexistent/text.txt"}, {"corpus", "/nonexistent/text.txt"}},
      {{"--task=text", "--corpus=" + empty.string()}, {"corpus", "empty"}},
      {{"--task=text", "--corpus=" + shortf.string()}, {"valid_fraction", "fewer than one window"}},
      {{"--task=text", "--corpus=" + binary.string()}, {"corpus", "unit = byte"}},
      {{"--task=text", "--corpus=" + kExcerpt, "--test_fraction=0.7"}, {"test_fraction"}},
      {{"--encoding=rope", "--d_model=6", "--n_heads=2"}, {"n_heads"}},
      {{"--encoding=cosine"}, {"encoding", "'cosine'", "t5_bias"}},
      {{"--task=translation"}, {"task", "'translation'"}},
      {{"--steps_copy=1", "--task=copy"}, {"warmup_steps", "steps_copy"}},
      {{"--lr_grid=0.001 -1"}, {"lr_grid"}},
      {{"--task=mqar", "--lr_grid_mqar=0.001 0"}, {"lr_grid_mqar"}},
      {{"--finetune_eval_steps=1 4"}, {"finetune_eval_steps", "finetune_steps"}},
      {{"--finetune_lr_scale=0.2 0"}, {"finetune_lr_scale"}},
      {{"--finetune_schedule=linear"}, {"finetune_schedule", "'linear'"}},
      // d_model 8 over 8 heads: heads of 1 dimension, no RoPE pairs to analyse.
      {{"--task=analysis", "--n_heads=8", "--analysis_head_dim=0"}, {"analysis_head_dim", "even"}},
  };
  for (const auto& c : cases) {
    const Run r = run(tiny(out, c.args), d.path);
    INFO(c.args.back() << " -> " << r.err);
    CHECK(r.code == 2);
    for (const auto& e : c.expect) CHECK_THAT(r.err, Catch::Contains(e));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(out));
  }
  // The same learned table is fine when it covers the longest evaluation (32 rows).
  const Run ok = run(tiny(out, {"--encoding=learned", "--learned_max_len=32", "--task=copy"}), d.path);
  INFO(ok.err);
  CHECK(ok.code == 0);
}
