// experiment/training.hpp: the training phase's curve windows, timer, divergence rules, early stop,
// model modes and checkpoint resume.
#include <catch2/catch.hpp>
#include "temp_dir.hpp"

#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include "seqlab/experiment/training.hpp"
#include "seqlab/nn/parameter.hpp"
#include "seqlab/nn/safetensors.hpp"
#include "seqlab/train/optimizer.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
namespace fs = std::filesystem;

namespace {

// A module with one parameter w [2]; L(w) = ½‖w − (1, −1)‖²; records the mode of every call.
struct Toy : Module {
  Parameter w{"w", {2}};
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override {
    out.push_back({prefix + "w", &w});
  }
  double loss_and_grad() {
    const double d0 = w.value(0) - 1.0, d1 = w.value(1) + 1.0;
    w.grad(0) += static_cast<float>(d0);
    w.grad(1) += static_cast<float>(d1);
    return 0.5 * (d0 * d0 + d1 * d1);
  }
};

Cell toy_cell() {
  Cell c;
  c.quiet = true;
  c.params.set("x", std::int64_t{1});
  c.sweep_keys = {"x"};
  return c;
}

const std::vector<TableSpec> kTables = {{kMainTable, {"a"}},
                                        {"steps", {"experiment", "step", "train_loss", "grad_norm", "lr"}}};

}  // namespace

TEST_CASE("a training phase writes one curve row per window and the last shorter one", "[experiment][training]") {
  Toy m;
  SGD sgd({&m.w}, 0.1f);
  const Cell cell = toy_cell();
  CellOutput out(kTables);
  TrainingPhase phase(cell, out, &m, "train");
  std::vector<double> losses;
  std::vector<bool> modes;
  phase.steps(7).curve(3, "steps", Row().add("experiment", "toy"));
  phase.on_step([&](const StepRecord& r) { losses.push_back(r.loss); });
  const PhaseResult r = phase.run({&m.w}, sgd, LrSchedule{"constant", 0.1f}, [&](int) {
    modes.push_back(m.training());
    return m.loss_and_grad();
  });
  CHECK_FALSE(r.diverged);
  CHECK(r.diverged_reason == "none");
  CHECK(r.steps_done == 7);
  CHECK_FALSE(r.stopped_early);
  CHECK(r.train_time_s >= 0);
  CHECK_FALSE(m.training());  // eval mode after run
  for (bool t : modes) CHECK(t);  // train mode during the updates
  const Table& t = out.tables().at("steps");
  REQUIRE(t.rows.size() == 3);
  CHECK(t.rows[0][1] == "3");
  CHECK(t.rows[1][1] == "6");
  CHECK(t.rows[2][1] == "7");
  CHECK(t.rows[0][2] == format_real((losses[0] + losses[1] + losses[2]) / 3));
  CHECK(t.rows[2][2] == format_real(losses[6]));
  CHECK(r.final_window_loss == losses[6]);
  CHECK(t.rows[0][4] == "0.100000001");  // the float learning rate
}

TEST_CASE("a window hook runs in eval mode, excludes its time and can stop training", "[experiment][training]") {
  Toy m;
  Adam adam({&m.w}, 0.05f);
  const Cell cell = toy_cell();
  CellOutput out(kTables);
  TrainingPhase phase(cell, out, &m, "train");
  std::vector<int> windows;
  phase.steps(100).every(10, [&](const TrainingWindow& w) {
    CHECK_FALSE(m.training());
    CHECK(w.updates == 10);
    CHECK(w.lr == Approx(0.05));
    windows.push_back(w.step);
    return w.step == 30;  // "target reached"
  });
  int calls = 0;
  const PhaseResult r = phase.run({&m.w}, adam, LrSchedule{"constant", 0.05f}, [&](int) {
    ++calls;
    return m.loss_and_grad();
  });
  CHECK(r.stopped_early);
  CHECK_FALSE(r.diverged);
  CHECK(r.steps_done == 30);
  CHECK(calls == 30);
  CHECK(windows == std::vector<int>{10, 20, 30});
}

TEST_CASE("divergence: non-finite loss, loss blow-up and a non-finite test loss", "[experiment][training]") {
  const Cell cell = toy_cell();
  SECTION("a NaN loss is train_loop's divergence") {
    Toy m;
    SGD sgd({&m.w}, 0.1f);
    CellOutput out(kTables);
    TrainingPhase phase(cell, out, &m, "train");
    phase.steps(10).curve(4, "steps", Row().add("experiment", "toy"));
    const PhaseResult r = phase.run({&m.w}, sgd, LrSchedule{"constant", 0.1f}, [&](int s) {
      const double l = m.loss_and_grad();
      return s == 5 ? std::numeric_limits<double>::quiet_NaN() : l;
    });
    CHECK(r.diverged);
    CHECK(r.diverged_reason == "non_finite");
    CHECK(r.diverged_step == 5);
    CHECK(r.steps_done == 5);
    CHECK(out.tables().at("steps").rows.size() == 1);  // the window at 4; step 5 was not applied
  }
  SECTION("the mean loss of the last updates above the threshold") {
    Toy m;
    SGD sgd({&m.w}, 0.1f);
    CellOutput out(kTables);
    TrainingPhase phase(cell, out, &m, "train");
    phase.steps(50).blowup(10.0, 3);
    const PhaseResult r = phase.run({&m.w}, sgd, LrSchedule{"constant", 0.1f}, [&](int s) {
      m.loss_and_grad();
      return s >= 7 ? 100.0 : 1.0;
    });
    // Windows of 3: steps 5-7 mean 34 > 10 at step 7.
    CHECK(r.diverged);
    CHECK(r.diverged_reason == "loss_blowup");
    CHECK(r.diverged_step == 7);
    CHECK(r.steps_done == 8);
    CHECK(r.last_loss == 100.0);
  }
  SECTION("a non-finite test loss after a finite run") {
    PhaseResult r;
    r.steps_done = 12;
    r.check_test_loss(1.5);
    CHECK_FALSE(r.diverged);
    r.check_test_loss(std::numeric_limits<double>::infinity());
    CHECK(r.diverged);
    CHECK(r.diverged_step == 12);
    CHECK(r.diverged_reason == "non_finite_test_loss");
    PhaseResult already;
    already.diverged = true;
    already.diverged_step = 3;
    already.diverged_reason = "non_finite";
    already.check_test_loss(std::nan(""));
    CHECK(already.diverged_step == 3);
    CHECK(already.diverged_reason == "non_finite");
  }
}

TEST_CASE("a killed phase resumes from its checkpoint with the same windows and result", "[experiment][training][checkpoint]") {
  seqlab::test::TempDir dir("seqlab_training_phase");
  auto run = [&](int steps_before_kill, std::vector<std::vector<std::string>>* rows) {
    Toy m;
    Adam adam({&m.w}, 0.05f);
    Cell cell = toy_cell();
    cell.checkpoint_every = 4;
    cell.checkpoint_prefix = (dir.path / "cell").string();
    cell.checkpoint_identity = "toy";
    CellOutput out(kTables);
    TrainingPhase phase(cell, out, &m, "train");
    double extra = 0;
    phase.steps(20).curve(5, "steps", Row().add("experiment", "toy"));  // the checkpoint at 12 is mid-window
    phase.state().add("extra", extra);
    struct Kill {};
    PhaseResult r;
    try {
      r = phase.run({&m.w}, adam, LrSchedule{"constant", 0.05f}, [&](int s) {
        if (s == steps_before_kill) throw Kill{};
        extra += s;
        return m.loss_and_grad();
      });
    } catch (const Kill&) {
      return PhaseResult{};
    }
    *rows = out.tables().at("steps").rows;
    CHECK(extra == 190.0);  // Σ 0..19, restored across the kill
    return r;
  };
  std::vector<std::vector<std::string>> whole, resumed;
  const PhaseResult a = run(-1, &whole);
  fs::remove_all(dir.path);
  fs::create_directories(dir.path);
  run(14, nullptr);  // killed after the checkpoint at 12
  const PhaseResult b = run(-1, &resumed);
  CHECK(whole == resumed);
  CHECK(a.final_window_loss == b.final_window_loss);
  CHECK(a.last_loss == b.last_loss);
  CHECK(a.steps_done == b.steps_done);
}

TEST_CASE("with --save-model a phase ends by writing its model's state_dict as safetensors", "[experiment][training][save_model]") {
  seqlab::test::TempDir dir("seqlab_training_save");
  Toy m;
  SGD sgd({&m.w}, 0.1f);
  Cell cell = toy_cell();
  cell.model_prefix = (dir.path / "cell").string();
  CellOutput out(kTables);
  TrainingPhase phase(cell, out, &m, "finetune");
  phase.steps(3);
  phase.run({&m.w}, sgd, LrSchedule{"constant", 0.1f}, [&](int) { return m.loss_and_grad(); });
  const fs::path file = dir.path / "cell.finetune.safetensors";
  REQUIRE(fs::exists(file));
  const SafetensorsFile f = load_safetensors(file.string());
  REQUIRE(f.tensors.count("w") == 1);
  const auto& w = std::get<Array>(f.tensors.at("w"));
  CHECK(w(0) == m.w.value(0));
  CHECK(w(1) == m.w.value(1));
  CHECK(f.metadata.at("phase") == "finetune");
  CHECK(f.metadata.at("steps_done") == "3");
  CHECK(f.metadata.at("diverged") == "0");
  CHECK(f.metadata.at("cell") == cell.label());

  Cell off = toy_cell();  // no prefix: nothing written
  TrainingPhase quiet(off, out, &m, "other");
  quiet.steps(1).run({&m.w}, sgd, LrSchedule{"constant", 0.1f}, [&](int) { return m.loss_and_grad(); });
  CHECK_FALSE(fs::exists(dir.path / "cell.other.safetensors"));
}
