// The long_range_recall binary at tiny scale: bad input (exit 2, nothing written), --list-cells,
// every task x every model with valid tables (every column, the expected rows, baselines, matched
// parameter budgets), determinism, resume after SIGKILL, --force, rerun of a finished sweep,
// divergence, corrupt cells, the learning-rate pilot, early stopping, the width study and the
// forget-gate-bias arm. Runs the built executable in temporary directories.
#include <catch2/catch.hpp>

#include "seqlab/tasks/copy_memory.hpp"
#include "cli.hpp"
#include "temp_dir.hpp"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using namespace seqlab::test::cli;

namespace {
struct TempDir : seqlab::test::TempDir {
  TempDir() : seqlab::test::TempDir("seqlab_lrr_cli") {}
};

const std::string kBinary = SEQLAB_EXPERIMENTS_BIN_DIR "/long_range_recall";

// Starts the binary with `args`, stdout/stderr to files in `io_dir`; returns the pid.
pid_t spawn(const std::vector<std::string>& args, const fs::path& io_dir) {
  return seqlab::test::cli::spawn(kBinary, args, io_dir);
}

// Runs to completion; io files live in `io_dir` (must not be inside an --out directory).
Run run(const std::vector<std::string>& args, const fs::path& io_dir) {
  return seqlab::test::cli::run(kBinary, args, io_dir);
}

// The tiny config every run starts from (the quick config would be slow): every task and model,
// length 8, one seed, 3 updates of ~4-unit models. Written into `dir`; returns its path.
fs::path tiny_ini(const fs::path& dir) {
  const fs::path p = dir / "tiny.ini";
  std::ofstream(p) << "task = copy_memory,adding,mqar,distance_probe\n"
                      "model = rnn,lstm,gru,tcn,transformer_decoder\n"
                      "length = 8\nseeds = 1\nparam_budget = 0\nhidden_size = 4\nembedding_dim = 3\n"
                      "n_heads = 2\nd_ff_ratio = 2\ntransformer_layers = 2\nkernel_size = 2\n"
                      "mqar_pairs = 1 2\nmqar_keys = 4\nmqar_values = 3\nprobe_symbols = 3\n"
                      "probe_fillers = 2\ndistance_bins = 3\nbatch = 4\nsteps = 3\ntest_batch = 6\n"
                      "grad_batch = 2\nlog_every = 2\n";
  return p;
}

std::vector<std::string> tiny(const fs::path& ini, const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"--config=" + ini.string(), "--out=" + out.string()};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

/// tiny() with the keys `common`, then `extra`.
std::vector<std::string> tiny(const fs::path& ini, const fs::path& out, std::vector<std::string> common,
                              const std::vector<std::string>& extra) {
  common.insert(common.end(), extra.begin(), extra.end());
  return tiny(ini, out, std::move(common));
}

std::size_t cell_files(const fs::path& out) {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out / "cells", ec))
    n += e.path().extension() == ".json";
  return n;
}

}  // namespace

TEST_CASE("long_range_recall rejects bad input with exit 2 and writes nothing", "[integration][long_range_recall]") {
  REQUIRE(fs::exists(kBinary));
  TempDir d;
  const fs::path out = d.path / "res";
  const fs::path ini = tiny_ini(d.path);
  std::ofstream(d.path / "file.txt") << "x";
  std::ofstream(d.path / "unknown.ini") << "length = 3\nhidden = 4\n";
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {{"--hiden_size=4"}, {"unknown key '--hiden_size'", "hidden_size"}},
      {{"--steps=abc"}, {"steps", "'abc'", "integer in [1, 1000000000]"}},
      {{"--hidden_size=-3"}, {"hidden_size", "'-3'", "[1, 65536]"}},
      {{"--batch=0"}, {"batch", "'0'", "[1, 1000000]"}},
      {{"--log_every=4294967296"}, {"log_every", "'4294967296'", "[1, 1000000000]"}},
      {{"--length=3,4294967299"}, {"length", "'4294967299' is out of range", "[2, 100000]"}},
      {{"--length=1"}, {"length", "'1'", "[2, 100000]"}},
      {{"--length=8,8"}, {"length", "'8,8'"}},
      {{"--length="}, {"length", "empty list"}},
      {{"--task=copy_memory,sorting"}, {"task", "'sorting'", "copy_memory|adding|mqar|distance_probe"}},
      {{"--model=transformer"}, {"model", "'transformer'", "transformer_decoder"}},
      {{"--seeds=4611686018427387904"}, {"seeds", "[1, 100000]"}},
      {{"--length=3,4,5,6", "--seeds=10000"}, {"the grid has 800000 cells", "at most 100000"}},
      {{"--seed=9223372036854775808"}, {"seed", "[0, 9223372036854775807]"}},
      {{"--threads=0"}, {"threads: invalid value '0' (from the command line): expected an integer in [1, 1024]"}},
      {{"--lr=0"}, {"lr", "'0'", "(0, 3.40282347e+38]"}},
      {{"--lr=1e39"}, {"lr: invalid value '1e39'"}},
      {{"--weight_decay=1e39"}, {"weight_decay", "too large for a float"}},
      {{"--d_ff_ratio=0"}, {"d_ff_ratio", "'0'"}},
      {{"--tcn_levels=31"}, {"tcn_levels", "[0, 30]"}},
      {{"--kernel_size=0"}, {"kernel_size", "'0'", "[1, 4096]"}},
      {{"--positional_encoding=rotary"}, {"positional_encoding", "'rotary'", "rope_ntk"}},
      {{"--nonlinearity=sigmoid"}, {"nonlinearity", "sigmoid", "tanh"}},
      {{"--optimizer=rmsprop"}, {"optimizer", "'rmsprop'", "adam|adamw|sgd"}},
      {{"--schedule=inverse_sqrt"}, {"warmup_steps", "inverse_sqrt"}},
      {{"--steps=10", "--warmup_steps=100"}, {"warmup_steps", "'100'", "<= steps (10)"}},
      // Keys checked by the experiment (task, budget and model combinations).
      {{"--mqar_pairs=2,4"}, {"mqar_pairs", "'2,4'", "is not an integer"}},
      {{"--mqar_pairs=2 x"}, {"mqar_pairs", "'2 x'", "'x' is not an integer",
                              "space-separated list of distinct integers in [1, 100000]"}},
      {{"--mqar_pairs=2 2"}, {"mqar_pairs", "'2 2'", "'2' is repeated"}},
      {{"--mqar_pairs=none"}, {"mqar_pairs", "'none'"}},
      {{"--mqar_pairs=3"}, {"length", "'8'", "task = mqar", ">= 4 x the largest of mqar_pairs (12"}},
      {{"--mqar_keys=1"}, {"mqar_keys", "'1'", ">= the largest of mqar_pairs (2"}},
      {{"--model=lstm_fb2"}, {"model", "'lstm_fb2'", "lstm_fb1"}},
      {{"--width=-1"}, {"width", "'-1'", "[0, 65536]"}},
      {{"--width_models=lstm mamba"}, {"width_models", "'mamba'"}},
      {{"--lr_grid=0.001 0"}, {"lr_grid", "'0'"}},
      {{"--width_steps=-1"}, {"width_steps", "'-1'", "[0, 1000000000]"}},
      {{"--width_patience=-2"}, {"width_patience", "'-2'", "[-1, 1000000000]"}},
      {{"--task=mqar", "--width=0,4", "--width_length=8", "--pilot_steps=2", "--width_steps=1"},
       {"width_steps", "'1'", ">= pilot_steps (2)", "the width study's cells"}},
      {{"--pilot_steps=5"}, {"pilot_steps", "'5'", "<= steps (3)"}},
      {{"--min_delta=2"}, {"min_delta", "'2'"}},
      {{"--solved_loss=-0.1"}, {"solved_loss", "'-0.1'"}},
      {{"--width=4", "--task=adding"}, {"the grid has no cells"}},
      {{"--param_budget=50"}, {"param_budget = 50", "allowed >="}},
      {{"--hidden_size=5", "--model=transformer_decoder"}, {"n_heads = 2", "divisor of hidden_size"}},
      {{"--hidden_size=6", "--model=transformer_decoder"}, {"n_heads = 2", "even head size"}},
      {{"--config=" + (d.path / "missing.ini").string()}, {"--config", "missing.ini"}},
      {{"--config=" + (d.path / "unknown.ini").string()}, {"unknown key 'hidden'", "unknown.ini"}},
      {{"--scale=huge"}, {"--scale", "'huge'", "paper|quick"}},
      {{"--cell=99"}, {"--cell", "'99'", "[0, 19]"}},
      {{"--cells=3-1"}, {"--cells", "'3-1'", "0 <= A <= B <= 19"}},
      {{"--out=" + (d.path / "link").string()}, {"--out", "dangling symbolic link"}},
  };
  fs::create_symlink(d.path / "gone" / "res", d.path / "link");
  for (const auto& c : cases) {
    std::vector<std::string> args;
    if (c.args.front().rfind("--out", 0) != 0) args.push_back("--out=" + out.string());
    const bool own_config = c.args.front().rfind("--config", 0) == 0 ||
                            c.args.front().rfind("--scale", 0) == 0;
    if (!own_config) args.push_back("--config=" + ini.string());
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Run r = run(args, d.path);
    INFO(c.args.back() << " -> " << r.err);
    CHECK(r.code == 2);
    CHECK(count_lines(r.err) == 1);
    for (const auto& e : c.expect) CHECK_THAT(r.err, Catch::Contains(e));
    CHECK_FALSE(fs::exists(out));
    CHECK_FALSE(fs::exists(d.path / "gone"));
  }
  // Unwritable --out: a path below a regular file.
  const Run r = run({"--config=" + ini.string(), "--out=" + (d.path / "file.txt" / "res").string()}, d.path);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--out") && Catch::Contains("file.txt"));
  // The shipped configs are valid and list their grids: quick covers every task and model.
  const Run q = run({"--scale=quick", "--list-cells"}, d.path);
  CHECK(q.code == 0);
  CHECK(count_lines(q.out) == 4 * 5 * 3 * 3);
  for (const char* k : {"task=copy_memory", "task=adding", "task=mqar", "task=distance_probe",
                        "model=rnn", "model=lstm", "model=gru", "model=tcn", "model=transformer_decoder"})
    CHECK_THAT(q.out, Catch::Contains(k));
  CHECK(run({"--scale=paper", "--list-cells"}, d.path).code == 0);
}

TEST_CASE("long_range_recall lists its cells and documents its keys", "[integration][long_range_recall]") {
  TempDir d;
  const fs::path ini = tiny_ini(d.path);
  const Run r = run(tiny(ini, d.path / "res", {"--list-cells", "--task=adding,mqar", "--model=lstm",
                                               "--length=8,12", "--seeds=2"}),
                    d.path);
  CHECK(r.code == 0);
  CHECK(r.out ==
        "0 task=adding model=lstm length=8 width=0 seed=0\n1 task=adding model=lstm length=8 width=0 seed=1\n"
        "2 task=adding model=lstm length=12 width=0 seed=0\n3 task=adding model=lstm length=12 width=0 seed=1\n"
        "4 task=mqar model=lstm length=8 width=0 seed=0\n5 task=mqar model=lstm length=8 width=0 seed=1\n"
        "6 task=mqar model=lstm length=12 width=0 seed=0\n7 task=mqar model=lstm length=12 width=0 seed=1\n");
  CHECK_FALSE(fs::exists(d.path / "res"));
  // Lengths per task (grid-only keys): mqar only at 12, adding at every length.
  const Run per_task = run(tiny(ini, d.path / "res", {"--list-cells", "--task=adding,mqar", "--model=lstm",
                                                      "--length=8,12", "--seeds=1", "--mqar_lengths=12"}),
                           d.path);
  INFO(per_task.err);
  CHECK(per_task.code == 0);
  CHECK(per_task.out ==
        "0 task=adding model=lstm length=8 width=0 seed=0\n1 task=adding model=lstm length=12 width=0 seed=0\n"
        "2 task=mqar model=lstm length=12 width=0 seed=0\n");
  const Run bad_lengths = run(tiny(ini, d.path / "res", {"--list-cells", "--adding_lengths=8 1"}), d.path);
  CHECK(bad_lengths.code == 2);
  CHECK_THAT(bad_lengths.err, Catch::Contains("adding_lengths") && Catch::Contains("'8 1'"));
  CHECK_FALSE(fs::exists(d.path / "res"));
  const Run help = run({"--help"}, d.path);
  CHECK(help.code == 0);
  for (const char* k : {"--task=LIST", "--model=LIST", "--length=LIST", "--param_budget=VALUE",
                        "[parameters]", "--d_ff_ratio", "--mqar_pairs", "--distance_bins", "--grad_batch",
                        "--tcn_levels", "--positional_encoding", "--seeds", "--width=LIST", "--lr_grid",
                        "--pilot_steps", "--patience", "--solved_loss", "lstm_fb1", "--copy_memory_lengths",
                        "--distance_probe_lengths"}) {
    INFO(k);
    CHECK_THAT(help.out, Catch::Contains(k));
  }
}

TEST_CASE("long_range_recall runs every task and model and writes valid tables", "[integration][long_range_recall]") {
  TempDir d;
  const fs::path ini = tiny_ini(d.path);
  const fs::path ref = d.path / "ref";
  const Run a = run(tiny(ini, ref), d.path);
  INFO(a.err);
  REQUIRE(a.code == 0);
  const std::string main_text = slurp(ref / "long_range_recall.csv");
  const Csv main_csv = parse_csv(main_text);
  REQUIRE(main_csv.rows.size() == 20);
  const std::vector<std::string> main_cols = {
      "experiment", "task", "model", "length", "width", "seq_len", "seed", "derived_seed", "n_params",
      "param_budget", "hidden_size", "embedding_dim", "num_layers", "d_ff", "n_heads", "kernel_size",
      "forget_bias", "receptive_field", "sequential_steps", "batch", "steps", "lr", "lr_source",
      "optimizer", "test_loss", "baseline_loss", "test_accuracy", "baseline_accuracy", "diverged",
      "diverged_step", "steps_done", "stop_reason", "best_step", "best_val_loss", "final_val_loss",
      "val_baseline_loss", "final_train_loss", "train_time_s", "ms_per_step"};
  CHECK(main_csv.header == main_cols);
  const std::vector<std::string> tasks = {"copy_memory", "adding", "mqar", "distance_probe"};
  const std::vector<std::string> models = {"rnn", "lstm", "gru", "tcn", "transformer_decoder"};
  for (std::size_t i = 0; i < 20; ++i) {
    INFO("row " << i);
    for (const auto& [column, f] : main_csv.rows[i]) CHECK_FALSE(f.empty());
    CHECK(main_csv.at(i, "task") == tasks[i / 5]);  // grid order: task, model, length, seed
    CHECK(main_csv.at(i, "model") == models[i % 5]);
    CHECK(main_csv.at(i, "diverged") == "0");
    CHECK(main_csv.at(i, "steps_done") == "3");
    CHECK(main_csv.at(i, "stop_reason") == "max_steps");  // no early stopping in this config
    CHECK(main_csv.at(i, "lr_source") == "config");
    CHECK(main_csv.at(i, "best_val_loss") == "nan");
    CHECK(std::stod(main_csv.at(i, "n_params")) > 0);
    CHECK(std::isfinite(std::stod(main_csv.at(i, "test_loss"))));
    const std::string task = main_csv.at(i, "task");
    const double bl = std::stod(main_csv.at(i, "baseline_loss"));
    const double ba = std::stod(main_csv.at(i, "baseline_accuracy"));
    if (task == "copy_memory") {
      // The most frequent of the 10 source symbols at every recall position, blanks exact.
      const seqlab::CopyMemoryTask copy(8);
      CHECK(main_csv.at(i, "seq_len") == "28");
      CHECK(std::abs(bl - 10 * copy.most_frequent_symbol_loss() / 28) < 1e-7);
      CHECK(std::abs(ba - copy.most_frequent_symbol_accuracy()) < 1e-7);
      CHECK(ba > 0.125);
    } else if (task == "adding") {
      CHECK(main_csv.at(i, "seq_len") == "8");
      CHECK(std::abs(bl - (1.0 / 6.0 - 1.0 / 24.0)) < 1e-7);  // best marker-free predictor
      CHECK(main_csv.at(i, "test_accuracy") == "nan");
      CHECK(main_csv.at(i, "baseline_accuracy") == "nan");
    } else if (task == "mqar") {
      // Key-agnostic (the most frequent context value) over 3 values, pooled over P = 1, 2 by
      // scored positions (1 and 2 per row): P = 1 is exact; P = 2 has equal values w.p. 1/3
      // (accuracy 1, loss 0), else accuracy 1/2 and loss ln 2. Accuracy (1 + 2·2/3)/3 = 7/9,
      // loss (2·(2/3) ln 2)/3 = (4/9) ln 2.
      CHECK(std::abs(bl - 4.0 / 9.0 * std::log(2.0)) < 1e-7);
      CHECK(std::abs(ba - 7.0 / 9.0) < 1e-7);
    } else {
      CHECK(std::abs(bl - std::log(3.0)) < 1e-7);
      CHECK(std::abs(ba - 1.0 / 3.0) < 1e-7);
    }
    if (task != "adding") {
      const double acc = std::stod(main_csv.at(i, "test_accuracy"));
      CHECK(acc >= 0.0);
      CHECK(acc <= 1.0);
    }
    const std::string model = main_csv.at(i, "model");
    CHECK(main_csv.at(i, "hidden_size") == "4");
    CHECK(main_csv.at(i, "embedding_dim") == (model == "transformer_decoder" ? "4" : "3"));
    CHECK(main_csv.at(i, "d_ff") == (model == "transformer_decoder" ? "8" : "0"));
    CHECK(main_csv.at(i, "receptive_field") == (model == "tcn" ? main_csv.at(i, "receptive_field") : "0"));
    if (model == "tcn")  // the fewest levels whose receptive field 1 + 2(k-1)(2^L - 1) covers seq_len
      CHECK(main_csv.at(i, "num_layers") == (task == "copy_memory" ? "4" : "3"));  // k = 2: 31 >= 28, 15 >= 8
  }
  // Steps: 3 updates logged every 2 -> rows at 2 and 3 per cell.
  const Csv steps = parse_csv(slurp(ref / "long_range_recall_steps.csv"));
  CHECK(steps.header == std::vector<std::string>{"experiment", "task", "model", "length", "width", "seq_len",
                                                 "seed", "step", "train_loss", "grad_norm", "lr", "val_loss"});
  CHECK(steps.rows.size() == 40);
  // Distance: copy memory one row at T + 10 = 18; the probe its 3 evaluated distances 1, 4, 7.
  const Csv dist = parse_csv(slurp(ref / "long_range_recall_distance.csv"));
  CHECK(dist.header == std::vector<std::string>{"experiment", "task", "model", "length", "width", "seq_len", "seed",
                                                "n_pairs", "distance", "distance_lo", "distance_hi",
                                                "n_scored", "accuracy", "loss", "baseline_accuracy",
                                                "baseline_loss"});
  std::map<std::string, std::vector<std::string>> dists;
  std::map<std::string, std::set<std::string>> pairs;
  for (std::size_t i = 0; i < dist.rows.size(); ++i) {
    const std::string key = dist.at(i, "task") + "/" + dist.at(i, "model");
    dists[key].push_back(dist.at(i, "distance"));
    pairs[key].insert(dist.at(i, "n_pairs"));
    CHECK(std::stoi(dist.at(i, "n_scored")) > 0);
  }
  for (const auto& m : models) {
    INFO(m);
    CHECK(dists["copy_memory/" + m] == std::vector<std::string>{"18"});
    CHECK(dists["distance_probe/" + m] == std::vector<std::string>{"1", "4", "7"});
    CHECK(pairs["mqar/" + m] == std::set<std::string>{"1", "2"});
    CHECK(pairs["adding/" + m] == std::set<std::string>{"0"});
    CHECK_FALSE(dists["adding/" + m].empty());
  }
  // Gradient norms: init and trained, at each task's longest length (here its only one). The
  // merged view keeps every position with a nonzero norm, MQAR every k-th distance (k =
  // ceil(S / 16) = 1 at S = 8), without position and input_grad_norm; the cell files keep all
  // 2·S rows per cell with every column.
  const Csv grad = parse_csv(slurp(ref / "long_range_recall_grad_norms.csv"));
  CHECK(grad.header == std::vector<std::string>{"experiment", "task", "model", "length", "width", "seq_len", "seed",
                                                "phase", "steps_before_end", "relative_grad_norm"});
  std::map<std::string, std::set<int>> grad_dists;
  for (std::size_t i = 0; i < grad.rows.size(); ++i) {
    const std::string task = grad.at(i, "task");
    if (task != "mqar") CHECK(std::stod(grad.at(i, "relative_grad_norm")) > 0);
    CHECK(grad_dists[task + "/" + grad.at(i, "model") + "/" + grad.at(i, "seed") + "/" + grad.at(i, "phase")]
              .insert(std::stoi(grad.at(i, "steps_before_end")))
              .second);  // each distance once per cell and phase
  }
  CHECK(grad_dists.size() == 4 * 5 * 2);
  for (const auto& [key, ds] : grad_dists) {
    INFO(key);
    const std::size_t S = key.rfind("copy_memory/", 0) == 0 ? 28u : 8u;
    CHECK(ds.size() <= S);
    CHECK(*ds.rbegin() < static_cast<int>(S));
    if (key.rfind("mqar/", 0) == 0) CHECK(ds.size() == S);
  }
  const auto grad_meta = nlohmann::json::parse(slurp(ref / "long_range_recall.meta.json")).at("tables").at("grad_norms");
  CHECK(grad_meta.at("rows") == grad.rows.size());
  CHECK(grad_meta.at("rows_in_cells") == 5 * 2 * (28 + 8 + 8 + 8));
  CHECK(grad_meta.at("columns_in_cells_only") == nlohmann::json::array({"position", "input_grad_norm"}));
  std::size_t cells_with_grad_columns = 0;
  for (const auto& e : fs::directory_iterator(ref / "cells")) {
    if (e.path().extension() != ".json") continue;
    const auto cols = nlohmann::json::parse(slurp(e.path())).at("tables").at("grad_norms").at("columns");
    CHECK(std::find(cols.begin(), cols.end(), "input_grad_norm") != cols.end());
    CHECK(std::find(cols.begin(), cols.end(), "position") != cols.end());
    ++cells_with_grad_columns;
  }
  CHECK(cells_with_grad_columns > 0);
  double max_rel = 0;
  for (std::size_t i = 0; i < grad.rows.size(); ++i) max_rel = std::max(max_rel, std::stod(grad.at(i, "relative_grad_norm")));
  CHECK(max_rel == 1.0);
  // Attention: the transformer only, every task (replicate 0), probabilities in (0, 1].
  const Csv att = parse_csv(slurp(ref / "long_range_recall_attention.csv"));
  std::set<std::string> att_tasks;
  for (std::size_t i = 0; i < att.rows.size(); ++i) {
    CHECK(att.at(i, "model") == "transformer_decoder");
    CHECK(att.at(i, "layer") == "1");
    att_tasks.insert(att.at(i, "task"));
    const double p = std::stod(att.at(i, "attention_prob"));
    CHECK(p >= 0.01);
    CHECK(p <= 1.0);
    CHECK(std::stoi(att.at(i, "key_pos")) <= std::stoi(att.at(i, "query_pos")));  // causal
  }
  CHECK(att_tasks == std::set<std::string>{"copy_memory", "adding", "mqar", "distance_probe"});
  CHECK(fs::exists(ref / "long_range_recall.meta.json"));

  // Matched budgets: with param_budget every model lands within the budget; the recurrent and
  // convolutional ones within a few hidden units of it (the transformer's d_model moves in steps of
  // 2·n_heads = 4, coarse at this size).
  const fs::path budget = d.path / "budget";
  REQUIRE(run(tiny(ini, budget, {"--param_budget=900", "--task=distance_probe"}), d.path).code == 0);
  const Csv b = parse_csv(slurp(budget / "long_range_recall.csv"));
  REQUIRE(b.rows.size() == 5);
  for (std::size_t i = 0; i < 5; ++i) {
    INFO(b.at(i, "model"));
    CHECK(std::stoi(b.at(i, "n_params")) <= 900);
    if (b.at(i, "model") != "transformer_decoder") {
      CHECK(std::stoi(b.at(i, "n_params")) > 750);
      CHECK(std::stoi(b.at(i, "hidden_size")) > 4);
    }
    CHECK(b.at(i, "param_budget") == "900");
  }
}

TEST_CASE("long_range_recall is deterministic resumable and skips finished cells", "[integration][long_range_recall]") {
  TempDir d;
  const fs::path ini = tiny_ini(d.path);
  const std::vector<std::string> small = {"--task=distance_probe,adding", "--model=lstm,transformer_decoder",
                                          "--seeds=2"};
  const fs::path ref = d.path / "ref";
  const Run a = run(tiny(ini, ref, small), d.path);
  INFO(a.err);
  REQUIRE(a.code == 0);
  const std::vector<std::string> tables = {"", "_steps", "_distance", "_grad_norms", "_attention"};
  auto table = [](const fs::path& dir, const std::string& t) {
    const std::string text = slurp(dir / ("long_range_recall" + t + ".csv"));
    return t.empty() ? drop_column(drop_column(text, "train_time_s"), "ms_per_step") : text;
  };
  REQUIRE(count_lines(slurp(ref / "long_range_recall.csv")) == 9);
  // Same seed and threads: identical tables (the main one without its two timing columns).
  const fs::path again = d.path / "again";
  REQUIRE(run(tiny(ini, again, small), d.path).code == 0);
  for (const auto& t : tables) {
    INFO("table " << t);
    CHECK(table(again, t) == table(ref, t));
  }
  // Another base seed changes the numbers.
  const fs::path other = d.path / "other";
  REQUIRE(run(tiny(ini, other, {"--task=distance_probe,adding", "--model=lstm,transformer_decoder",
                                "--seeds=2", "--seed=2"}),
              d.path)
              .code == 0);
  CHECK(table(other, "") != table(ref, ""));

  // Kill mid-sweep: more work per cell so that the kill lands between cells.
  const fs::path killed = d.path / "killed";
  const std::vector<std::string> slow = {"--config=" + ini.string(), "--task=distance_probe",
                                         "--model=lstm", "--length=4,5,6,7", "--seeds=2",
                                         "--steps=1500", "--hidden_size=8"};
  auto slow_args = [&](const fs::path& out) {
    auto a2 = slow;
    a2.push_back("--out=" + out.string());
    return a2;
  };
  const pid_t pid = spawn(slow_args(killed), d.path);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (cell_files(killed) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  kill(pid, SIGKILL);
  CHECK(wait_exit(pid) == 128 + SIGKILL);
  const std::size_t done_before = cell_files(killed);
  REQUIRE(done_before >= 1);
  CHECK(done_before < 8);  // the kill landed mid-sweep
  CHECK_FALSE(fs::exists(killed / "long_range_recall.csv"));
  // Resume: the finished cells are skipped, the merged tables equal an uninterrupted run's.
  const Run resumed = run(slow_args(killed), d.path);
  INFO(resumed.err);
  REQUIRE(resumed.code == 0);
  std::size_t skipped = 0;
  for (std::size_t p = resumed.err.find("skipped"); p != std::string::npos; p = resumed.err.find("skipped", p + 1))
    ++skipped;
  CHECK(skipped == done_before);
  const fs::path full = d.path / "full";
  REQUIRE(run(slow_args(full), d.path).code == 0);
  for (const auto& t : tables) {
    INFO("table " << t);
    CHECK(table(killed, t) == table(full, t));
  }

  // A second run on the finished sweep computes nothing; --force recomputes every cell.
  const Run rerun = run(tiny(ini, ref, small), d.path);
  REQUIRE(rerun.code == 0);
  CHECK_THAT(rerun.err, !Catch::Contains("done in"));
  const Run forced = run(tiny(ini, ref, {"--task=distance_probe,adding", "--model=lstm,transformer_decoder",
                                         "--seeds=2", "--force"}),
                         d.path);
  REQUIRE(forced.code == 0);
  CHECK_THAT(forced.err, !Catch::Contains("skipped"));
  CHECK_THAT(forced.err, Catch::Contains("cell 7/8 (task=adding model=transformer_decoder length=8 width=0 seed=1): done in"));
  for (const auto& t : tables) CHECK(table(ref, t) == table(again, t));

  // Partial runs (one Slurm task per cell) then --merge give the same tables.
  const fs::path parts = d.path / "parts";
  for (int c = 0; c < 8; ++c)
    REQUIRE(run(tiny(ini, parts, {"--task=distance_probe,adding", "--model=lstm,transformer_decoder",
                                  "--seeds=2", "--cell=" + std::to_string(c)}),
                d.path)
                .code == 0);
  CHECK_FALSE(fs::exists(parts / "long_range_recall.csv"));
  REQUIRE(run(tiny(ini, parts, {"--task=distance_probe,adding", "--model=lstm,transformer_decoder",
                                "--seeds=2", "--merge"}),
              d.path)
              .code == 0);
  for (const auto& t : tables) CHECK(table(parts, t) == table(ref, t));
}

TEST_CASE("long_range_recall records divergence as a result", "[integration][long_range_recall]") {
  TempDir d;
  const fs::path ini = tiny_ini(d.path);
  const fs::path out = d.path / "res";
  // One Adam update at lr 3e38 (near FLT_MAX, the largest lr accepted) moves every parameter with
  // a gradient by about ±3e38: finite, but the output layer's sums of such terms overflow, so the
  // evaluation's logits hold ±inf and its loss is NaN. (At lr 1e30 whether the evaluation produced
  // NaN depended on the machine: it did on earlier CI runs' machines, not on this AVX-512 one.)
  const Run r = run(tiny(ini, out, {"--task=copy_memory", "--model=lstm", "--steps=1", "--lr=3e38",
                                    "--length=3", "--hidden_size=32", "--embedding_dim=8"}),
                    d.path);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const Csv c = parse_csv(slurp(out / "long_range_recall.csv"));
  REQUIRE(c.rows.size() == 1);
  CHECK(c.at(0, "test_loss") == "nan");
  CHECK(c.at(0, "diverged") == "1");
  CHECK(c.at(0, "diverged_step") == "1");
  CHECK(c.at(0, "steps_done") == "1");
  // The other tables are always written, so no stale table from another run can sit beside them.
  CHECK(slurp(out / "long_range_recall_steps.csv").rfind("experiment,task,model,length,width,seq_len,seed,step,", 0) == 0);
  CHECK(slurp(out / "long_range_recall_attention.csv").rfind("experiment,task,model,", 0) == 0);
}

TEST_CASE("long_range_recall merges only intact cells", "[integration][long_range_recall]") {
  TempDir d;
  const fs::path ini = tiny_ini(d.path);
  const fs::path out = d.path / "res";
  const std::vector<std::string> args = tiny(ini, out, {"--task=copy_memory", "--model=gru", "--steps=2"});
  REQUIRE(run(args, d.path).code == 0);
  const std::string good_csv = slurp(out / "long_range_recall.csv");
  fs::path cell;
  for (const auto& e : fs::directory_iterator(out / "cells"))
    if (e.path().extension() == ".json") cell = e.path();
  REQUIRE_FALSE(cell.empty());
  // Edit one value of the stored result (fingerprint intact), as a hand edit or bit rot would.
  std::string text = slurp(cell);
  const auto pos = text.find("\"copy_memory\"");
  REQUIRE(pos != std::string::npos);
  text.replace(pos, 13, "\"GARBAGE\"");
  std::ofstream(cell, std::ios::trunc) << text;
  auto merge_args = args;
  merge_args.push_back("--merge");
  const Run m = run(merge_args, d.path);
  INFO(m.err);
  CHECK(m.code == 1);
  CHECK_THAT(m.err, Catch::Contains("1 of 1 cells are corrupt: 0") &&
                        Catch::Contains("task=copy_memory model=gru length=8 width=0 seed=0"));
  // A rerun recomputes it; the merged CSV is the same as before.
  const Run again = run(args, d.path);
  CHECK(again.code == 0);
  CHECK_THAT(again.err, Catch::Contains("is corrupt"));
  CHECK(drop_column(drop_column(slurp(out / "long_range_recall.csv"), "train_time_s"), "ms_per_step") ==
        drop_column(drop_column(good_csv, "train_time_s"), "ms_per_step"));
}

TEST_CASE("long_range_recall tunes the learning rate, stops early, runs the width study and the forget-bias arm", "[integration][long_range_recall]") {
  TempDir d;
  const fs::path ini = tiny_ini(d.path);
  const fs::path out = d.path / "res";
  const std::vector<std::string> args = tiny(
      ini, out, {"--task=mqar,distance_probe", "--model=lstm,lstm_fb1,transformer_decoder", "--width=0,4",
                 "--width_length=8", "--width_models=lstm transformer_decoder", "--seeds=2", "--steps=8",
                 "--pilot_steps=2", "--lr_grid=0.001 0.01", "--patience=1", "--min_delta=0.5"});
  // The width study exists for mqar at width_length and the models of width_models only.
  const Run list = run(args, d.path);
  INFO(list.err);
  REQUIRE(list.code == 0);
  const Csv c = parse_csv(slurp(out / "long_range_recall.csv"));
  REQUIRE(c.rows.size() == 2 * 3 * 2 + 2 * 2);
  std::map<std::string, std::set<std::string>> lr_of;   // arm -> chosen lr over replicates
  std::map<std::string, std::string> params_of;         // task/model/width -> n_params
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    const std::string arm = c.at(i, "task") + "/" + c.at(i, "model") + "/" + c.at(i, "width");
    INFO(arm << " seed " << c.at(i, "seed"));
    CHECK(c.at(i, "lr_source") == "pilot");
    CHECK((c.at(i, "lr") == "0.001" || c.at(i, "lr") == "0.01"));
    lr_of[arm].insert(c.at(i, "lr"));
    params_of[arm] = c.at(i, "n_params");
    const std::string why = c.at(i, "stop_reason");
    CHECK((why == "max_steps" || why == "no_improvement" || why == "solved"));
    const int done = std::stoi(c.at(i, "steps_done"));
    CHECK(done <= 8);
    if (why == "no_improvement") CHECK(done < 8);
    CHECK(std::stoi(c.at(i, "best_step")) >= 2);
    CHECK(std::isfinite(std::stod(c.at(i, "best_val_loss"))));
    CHECK(std::stod(c.at(i, "val_baseline_loss")) > 0);
    if (c.at(i, "width") == "4") {
      CHECK(c.at(i, "task") == "mqar");
      CHECK(c.at(i, "model") != "lstm_fb1");
      CHECK(c.at(i, "hidden_size") == "4");
    }
    CHECK(c.at(i, "forget_bias") == (c.at(i, "model") == "lstm_fb1" ? "1" : "0"));
  }
  // One learning rate per arm: the pilot runs on replicate 0's streams, so every replicate agrees.
  for (const auto& [arm, lrs] : lr_of) {
    INFO(arm);
    CHECK(lrs.size() == 1);
  }
  // Computed once per arm and shared through <out>/pilots (the build is identified by the
  // executable's bytes): one file per arm, none per replicate.
  std::size_t pilot_files = 0;
  for (const auto& e : fs::directory_iterator(out / "pilots")) pilot_files += e.path().extension() == ".json";
  CHECK(pilot_files == lr_of.size());
  // lstm_fb1 is the lstm with a shifted bias: the same size.
  CHECK(params_of["mqar/lstm_fb1/0"] == params_of["mqar/lstm/0"]);
  // The pilot table: every grid value per cell, one chosen, the same losses for both replicates.
  const Csv pilot = parse_csv(slurp(out / "long_range_recall_lr_pilot.csv"));
  CHECK(pilot.header == std::vector<std::string>{"experiment", "task", "model", "length", "width", "seq_len",
                                                 "seed", "lr", "pilot_steps", "val_loss", "chosen", "all_diverged"});
  REQUIRE(pilot.rows.size() == 2 * c.rows.size());
  std::map<std::string, std::set<std::string>> losses;
  for (std::size_t i = 0; i < pilot.rows.size(); ++i)
    losses[pilot.at(i, "task") + pilot.at(i, "model") + pilot.at(i, "width") + pilot.at(i, "lr")].insert(
        pilot.at(i, "val_loss"));
  for (const auto& [k, v] : losses) CHECK(v.size() == 1);
  // The validation curve: one val_loss per logged window, finite.
  const Csv steps = parse_csv(slurp(out / "long_range_recall_steps.csv"));
  for (std::size_t i = 0; i < steps.rows.size(); ++i) CHECK(std::isfinite(std::stod(steps.at(i, "val_loss"))));
  // Deterministic: a second run from scratch gives the same tables (timing columns aside).
  const fs::path again = d.path / "again";
  auto args2 = args;
  args2[1] = "--out=" + again.string();
  REQUIRE(run(args2, d.path).code == 0);
  for (const std::string t : {"", "_steps", "_lr_pilot", "_distance"}) {
    INFO("table " << t);
    auto text = [&](const fs::path& dir) {
      const std::string x = slurp(dir / ("long_range_recall" + t + ".csv"));
      return t.empty() ? drop_column(drop_column(x, "train_time_s"), "ms_per_step") : x;
    };
    CHECK(text(again) == text(out));
  }
}

TEST_CASE("long_range_recall scores a pilot trial by its best validation loss", "[integration][long_range_recall]") {
  // Replicate 0 trains at the chosen rate from the pilot's streams, so its validation curve over
  // the first pilot_steps updates is the chosen trial's: the trial's score is that curve's minimum.
  TempDir d;
  const fs::path out = d.path / "res";
  const Run r = run(tiny(tiny_ini(d.path), out,
                         {"--task=adding", "--model=lstm", "--length=8", "--seeds=1", "--steps=12",
                          "--pilot_steps=12", "--log_every=1", "--lr_grid=0.003 0.03", "--patience=100",
                          "--solved_loss=0"}),
                    d.path);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const Csv pilot = parse_csv(slurp(out / "long_range_recall_lr_pilot.csv"));
  const Csv steps = parse_csv(slurp(out / "long_range_recall_steps.csv"));
  REQUIRE(pilot.rows.size() == 2);
  REQUIRE(steps.rows.size() == 12);
  double curve_min = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < steps.rows.size(); ++i) curve_min = std::min(curve_min, std::stod(steps.at(i, "val_loss")));
  std::size_t chosen = 0;
  for (std::size_t i = 0; i < pilot.rows.size(); ++i) {
    if (pilot.at(i, "chosen") != "1") continue;
    ++chosen;
    CHECK(std::stod(pilot.at(i, "val_loss")) == Approx(curve_min).epsilon(1e-6));
  }
  CHECK(chosen == 1);
}

TEST_CASE("long_range_recall trains the _long arms without early stopping and keeps the other cells", "[integration][long_range_recall]") {
  TempDir d;
  const fs::path ini = tiny_ini(d.path);
  const fs::path out = d.path / "res";
  const std::vector<std::string> common = {"--task=adding", "--length=8,16", "--seeds=1", "--steps=4",
                                           "--pilot_steps=2", "--lr_grid=0.001 0.01", "--patience=1",
                                           "--min_delta=0.5", "--solved_loss=0", "--log_every=1"};
  auto with = [&](const std::vector<std::string>& extra) { return tiny(ini, out, common, extra); };
  const Run first = run(with({"--model=lstm"}), d.path);
  INFO(first.err);
  REQUIRE(first.code == 0);
  REQUIRE(cell_files(out) == 2);
  // Adding the _long arm (at length 16 only) and its keys leaves the lstm cells' fingerprints as
  // they were: they are reused, one cell is new.
  const std::vector<std::string> long_args = {"--model=lstm,lstm_long", "--adding_long_lengths=16",
                                              "--long_steps=9", "--long_lr=0.02"};
  const Run second = run(with(long_args), d.path);
  INFO(second.err);
  REQUIRE(second.code == 0);
  CHECK(cell_files(out) == 3);
  const Csv c = parse_csv(slurp(out / "long_range_recall.csv"));
  REQUIRE(c.rows.size() == 3);
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    INFO(c.at(i, "model") << " " << c.at(i, "length"));
    if (c.at(i, "model") == "lstm_long") {
      CHECK(c.at(i, "length") == "16");
      CHECK(c.at(i, "steps") == "9");
      CHECK(c.at(i, "steps_done") == "9");  // no early stopping (patience 1 would have stopped it)
      CHECK(c.at(i, "stop_reason") == "max_steps");
      CHECK(c.at(i, "lr") == "0.02");
      CHECK(c.at(i, "lr_source") == "config");
      CHECK(c.at(i, "forget_bias") == "0");
    } else {
      CHECK(c.at(i, "model") == "lstm");
      CHECK(c.at(i, "steps") == "4");
      CHECK(c.at(i, "lr_source") == "pilot");
    }
  }
  // Same model as its base arm; no pilot rows for the _long arm.
  CHECK(c.at(1, "n_params") == c.at(2, "n_params"));
  const Csv pilot = parse_csv(slurp(out / "long_range_recall_lr_pilot.csv"));
  for (std::size_t i = 0; i < pilot.rows.size(); ++i) CHECK(pilot.at(i, "model") == "lstm");
  // A _long key changes only the _long cell's fingerprint: one cell recomputed.
  auto other_lr = long_args;
  other_lr.back() = "--long_lr=0.03";
  REQUIRE(run(with(other_lr), d.path).code == 0);
  CHECK(cell_files(out) == 4);
  // Outside <task>_long_lengths (none by default) there are no _long cells.
  const Run none = run(with({"--model=lstm_long", "--list-cells"}), d.path);
  CHECK(none.code == 2);
  CHECK_THAT(none.err, Catch::Contains("the grid has no cells"));
}

TEST_CASE("long_range_recall trains the width study for width_steps with width_patience", "[integration][long_range_recall]") {
  TempDir d;
  const fs::path ini = tiny_ini(d.path);
  const fs::path out = d.path / "res";
  // The keys of every run below but the budget (steps, patience) and the widths.
  const std::vector<std::string> common = {"--task=mqar", "--model=lstm", "--length=8", "--width_length=8", "--seeds=1",
                                     "--min_delta=0.5", "--solved_loss=0", "--log_every=1"};
  auto with = [&](const std::vector<std::string>& extra) { return tiny(ini, out, common, extra); };
  const Run first = run(with({"--steps=4", "--patience=1", "--width=0,4", "--width_steps=6", "--width_patience=0"}),
                        d.path);
  INFO(first.err);
  REQUIRE(first.code == 0);
  REQUIRE(cell_files(out) == 2);
  const Csv c = parse_csv(slurp(out / "long_range_recall.csv"));
  REQUIRE(c.rows.size() == 2);
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    INFO("width " << c.at(i, "width"));
    if (c.at(i, "width") == "4") {
      CHECK(c.at(i, "steps") == "6");
      CHECK(c.at(i, "steps_done") == "6");  // no early stopping (patience 1 would have stopped it)
      CHECK(c.at(i, "stop_reason") == "max_steps");
    } else {
      CHECK(c.at(i, "steps") == "4");
    }
  }
  // The width cell is the cell of a run with --steps=6 --patience=0: reused, nothing recomputed;
  // the width-0 cell does not read the keys: other values keep it.
  const Run same = run(with({"--steps=6", "--patience=0", "--width=4", "--status"}), d.path);
  INFO(same.err);
  CHECK(same.code == 0);
  CHECK_THAT(same.out, Catch::Contains("0 done"));
  const Run other = run(with({"--steps=4", "--patience=1", "--width=0,4", "--width_steps=5", "--status"}), d.path);
  CHECK(other.code == 0);
  CHECK_THAT(other.out, Catch::Contains("0 done") && Catch::Contains("1 missing"));
}
