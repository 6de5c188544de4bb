// --checkpoint-every end to end, in process (run_experiment on a toy training experiment):
//   - a cell killed mid-training (simulated: the step callback throws once, the cell fails, the
//     process state is thrown away) resumes from its checkpoint on rerun; the merged CSVs equal an
//     uninterrupted run's byte for byte; --status says "partial" meanwhile; the finished cell's
//     checkpoints are removed;
//   - two phases per cell: a finished phase is skipped (its steps are not run again);
//   - a corrupt checkpoint is reported and ignored; --force removes checkpoints;
//   - bad values of --checkpoint-every: exit 2, one line naming the flag, nothing written;
//   - --help documents the flag.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/experiment/io.hpp"
#include "seqlab/nn/dropout.hpp"
#include "seqlab/nn/parameter.hpp"
#include "seqlab/train/loop.hpp"
#include "seqlab/train/optimizer.hpp"
#include "temp_dir.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
namespace fs = std::filesystem;

namespace {

int g_kill_at = -1;     // global step (phase·100 + step) at which the step callback throws once
int g_steps_run = 0;    // training steps run (loss_and_grad calls), all cells and phases

/// w [4] trained towards random targets, with a dropout mask on the loss terms (so the module's
/// generator is state a checkpoint must keep).
struct Toy : Module {
  Parameter w{"w", {4}};
  Dropout drop{0.5f, 11};
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override {
    out.push_back({prefix + "w", &w});
  }
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override {
    drop.collect_buffers(prefix + "drop.", out);
  }
};

void run_cell(const Cell& cell, CellOutput& out) {
  Toy model;
  Rng data(cell.stream_seed(2));
  Adam optim(model.parameters(), 0.05f);
  LrSchedule schedule;
  schedule.base_lr = 0.05f;
  Row id;
  id.add("n", cell.get_int("n")).add("seed", cell.replicate);
  for (int phase = 0; phase < 2; ++phase) {
    double window = 0;
    TrainOptions opt;
    opt.steps = static_cast<int>(cell.get_int("steps"));
    opt.quiet = true;
    opt.checkpoint = cell_checkpoint(cell, "phase" + std::to_string(phase), &model, out);
    opt.checkpoint.state.add("data", data);
    opt.checkpoint.state.add("window", window);
    const TrainResult r = train_loop(
        opt, model.parameters(), optim, schedule,
        [&](int) {
          ++g_steps_run;
          Tensor1 ones = xt::ones<float>({4});
          const Tensor1 m = model.drop.forward<1>(ones);
          double loss = 0;
          for (std::size_t i = 0; i < 4; ++i) {
            const double t = data.normal() * static_cast<double>(cell.get_int("n"));
            const double e = model.w.value(i) - t;
            loss += m(i) * e * e;
            model.w.grad(i) += static_cast<float>(2 * m(i) * e);
          }
          return loss;
        },
        [&](const StepRecord& s) {
          window += s.loss;
          if ((s.step + 1) % 3 == 0) {
            out.add_row(Row(id).add("phase", phase).add("step", s.step + 1).add("loss", window),
                        "curve");
            window = 0;
          }
          if (phase * 100 + s.step == g_kill_at) {
            g_kill_at = -1;
            throw std::runtime_error("simulated kill");
          }
        });
    out.add_row(Row(id).add("phase", phase).add("last_loss", r.last_loss).add("w0", model.w.value(0)));
  }
}

ExperimentSpec spec() {
  ExperimentSpec s;
  s.name = "ckpt_toy";
  s.description = "Checkpoint tests.";
  s.options = {int_sweep("n", {1, 2}, "1", "target scale").at_least(1).at_most(10),
               int_option("steps", 20, "updates", "updates per phase").at_least(0).at_most(1000)};
  s.tables = {{kMainTable, {"n", "seed", "phase", "last_loss", "w0"}},
              {"curve", {"n", "seed", "phase", "step", "loss"}}};
  s.run_cell = run_cell;
  return s;
}

struct Result {
  int code;
  std::string out, err;
};

Result run(std::vector<std::string> args) {
  args.insert(args.begin(), "ckpt_toy");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  auto* old_out = std::cout.rdbuf(out.rdbuf());
  auto* old_err = std::cerr.rdbuf(err.rdbuf());
  const int code = run_experiment(static_cast<int>(argv.size()), argv.data(), spec());
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  return {code, out.str(), err.str()};
}

std::string slurp(const fs::path& p) { return read_text_file(p.string()).value_or("<missing>"); }

std::vector<std::string> files_in(const fs::path& d) {
  std::vector<std::string> v;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d, ec)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("checkpoint-every flag: a killed cell resumes and the merged CSVs equal an uninterrupted run",
          "[experiment][checkpoint]") {
  test::TempDir tmp("seqlab_exp_ckpt");
  const fs::path ini = tmp.path / "c.ini";
  std::ofstream(ini) << "n = 1,2\nseeds = 1\n";
  const std::string cfg = ini.string();
  const fs::path ref = tmp.path / "ref", out = tmp.path / "out";
  g_kill_at = -1;
  REQUIRE(run({"--config", cfg, "--out", ref.string(), "--quiet"}).code == 0);
  const std::string want_main = slurp(ref / "ckpt_toy.csv"), want_curve = slurp(ref / "ckpt_toy_curve.csv");
  REQUIRE(want_curve.find("\n2,0,1,18,") != std::string::npos);

  SECTION("killed in the second phase: the first is skipped, the second resumes") {
    g_kill_at = 100 + 13;  // phase 1, step 13 of cell 0: last checkpoint at 12
    Result r = run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "4", "--cell", "0"});
    REQUIRE(r.code == 1);
    CHECK_THAT(r.err, Catch::Contains("simulated kill"));
    const auto ck = files_in(out / "checkpoints");
    REQUIRE(ck.size() == 2);  // phase0 (final) and phase1 (step 12)
    CHECK_THAT(ck[0], Catch::EndsWith(".phase0.ckpt"));
    CHECK_THAT(ck[1], Catch::EndsWith(".phase1.ckpt"));
    const Result st = run({"--config", cfg, "--out", out.string(), "--status"});
    CHECK_THAT(st.out, Catch::StartsWith("0 partial n=1 seed=0\n1 missing n=2 seed=0\n"));

    g_steps_run = 0;
    r = run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "4"});
    REQUIRE(r.code == 0);
    CHECK(g_steps_run == (20 - 12) + 2 * 20);  // cell 0: phase 1 from step 12; cell 1: all
    CHECK_THAT(r.err, Catch::Contains("resumed from checkpoint") && Catch::Contains("at step 12 of 20"));
    CHECK(slurp(out / "ckpt_toy.csv") == want_main);
    CHECK(slurp(out / "ckpt_toy_curve.csv") == want_curve);
    CHECK(files_in(out / "checkpoints").empty());
  }
  SECTION("killed twice in the first phase, with another N the second time") {
    g_kill_at = 6;
    REQUIRE(run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "5", "--quiet"}).code == 1);
    g_kill_at = 17;  // resumed at 5: dies after 12 more updates, last checkpoint 15
    REQUIRE(run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "3", "--quiet"}).code == 1);
    REQUIRE(run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "5", "--quiet"}).code == 0);
    CHECK(slurp(out / "ckpt_toy.csv") == want_main);
    CHECK(slurp(out / "ckpt_toy_curve.csv") == want_curve);
    CHECK(files_in(out / "checkpoints").empty());
  }
  SECTION("a corrupt checkpoint is reported and ignored") {
    g_kill_at = 9;
    REQUIRE(run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "4", "--quiet", "--cell", "0"}).code == 1);
    const auto ck = files_in(out / "checkpoints");
    REQUIRE(ck.size() == 1);
    const fs::path f = out / "checkpoints" / ck[0];
    std::string bytes = slurp(f);
    bytes.resize(bytes.size() - 10);
    std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes;
    g_steps_run = 0;
    const Result r = run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "4", "--quiet"});
    REQUIRE(r.code == 0);
    CHECK(g_steps_run == 4 * 20);  // from step 0
    CHECK_THAT(r.err, Catch::Contains("ignored: truncated") && Catch::Contains("starts at step 0"));
    CHECK(slurp(out / "ckpt_toy.csv") == want_main);
    CHECK(slurp(out / "ckpt_toy_curve.csv") == want_curve);
  }
  SECTION("--force removes old checkpoints and recomputes from step 0") {
    g_kill_at = 9;
    REQUIRE(run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "4", "--quiet", "--cell", "0"}).code == 1);
    REQUIRE(files_in(out / "checkpoints").size() == 1);
    g_steps_run = 0;
    const Result r = run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "4", "--force"});
    REQUIRE(r.code == 0);
    CHECK(g_steps_run == 4 * 20);
    CHECK_THAT(r.err, Catch::Contains("removed 1 old checkpoint"));
    CHECK(slurp(out / "ckpt_toy_curve.csv") == want_curve);
    CHECK(files_in(out / "checkpoints").empty());
  }
  SECTION("without the flag, old checkpoints are not used and are removed when the cell finishes") {
    g_kill_at = 9;
    REQUIRE(run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "4", "--quiet", "--cell", "0"}).code == 1);
    g_steps_run = 0;
    REQUIRE(run({"--config", cfg, "--out", out.string(), "--quiet"}).code == 0);
    CHECK(g_steps_run == 4 * 20);
    CHECK(files_in(out / "checkpoints").empty());
    CHECK(slurp(out / "ckpt_toy_curve.csv") == want_curve);
  }
  SECTION("another --threads does not use the checkpoint") {
    g_kill_at = 9;
    REQUIRE(run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "4", "--quiet", "--cell", "0"}).code == 1);
    g_steps_run = 0;
    const Result r = run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "4", "--threads", "2", "--quiet"});
    REQUIRE(r.code == 0);
    CHECK(g_steps_run == 4 * 20);
    CHECK_THAT(r.err, Catch::Contains("it was written at --threads 1, this run has --threads 2"));
  }
  SECTION("another --flush-denormals does not use the checkpoint, and says why") {
    g_kill_at = 9;
    REQUIRE(run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "4", "--quiet", "--cell", "0",
                 "--flush-denormals"}).code == 1);
    g_steps_run = 0;
    const Result r = run({"--config", cfg, "--out", out.string(), "--checkpoint-every", "4", "--cell", "0"});
    REQUIRE(r.code == 0);
    CHECK(g_steps_run == 2 * 20);  // cell 0, both phases from step 0
    CHECK_THAT(r.err, Catch::Contains("it was written with --flush-denormals on, this run has it off"));
  }
  g_kill_at = -1;
}

TEST_CASE("checkpoint-every flag: bad values are exit 2 naming the flag, and nothing is written",
          "[experiment][checkpoint][errors]") {
  test::TempDir tmp("seqlab_exp_ckpt");
  const fs::path ini = tmp.path / "c.ini";
  std::ofstream(ini) << "n = 1\n";
  const fs::path out = tmp.path / "out";
  for (const std::string v : {"-1", "abc", "1.5", "2000000000", "1e99", ""}) {
    INFO("value '" << v << "'");
    const Result r = run({"--config", ini.string(), "--out", out.string(), "--checkpoint-every=" + v});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("checkpoint-every"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(out));
  }
  const Result h = run({"--help"});
  CHECK(h.code == 0);
  CHECK_THAT(h.out, Catch::Contains("--checkpoint-every N"));
}

TEST_CASE("cell_checkpoint names phases and is off without the flag", "[experiment][checkpoint]") {
  Cell c;
  CellOutput out;
  CHECK_FALSE(cell_checkpoint(c, "train", nullptr, out).enabled());
  c.checkpoint_every = 7;
  c.checkpoint_prefix = "/x/cells_stem";
  c.checkpoint_identity = "id";
  const auto o = cell_checkpoint(c, "pre-train_2", nullptr, out);
  CHECK(o.every == 7);
  CHECK(o.path == "/x/cells_stem.pre-train_2.ckpt");
  CHECK(o.identity == "id phase=pre-train_2");
  for (const std::string& bad : {std::string(), std::string("a b"), std::string("a/b"),
                                std::string("a.b"), std::string(65, 'x')})
    CHECK_THROWS_AS(cell_checkpoint(c, bad, nullptr, out), std::invalid_argument);
}
