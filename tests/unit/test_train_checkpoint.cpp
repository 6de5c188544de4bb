// Checkpoints inside a training run (train/checkpoint.hpp, TrainOptions::checkpoint):
//   - module buffers: every model family lists its BatchNorm statistics and dropout generators;
//   - a run killed after k updates (objects thrown away, fresh ones built, resumed from the file)
//     ends bitwise equal to an uninterrupted run: parameters, buffers, optimizer state, the loss
//     history the caller keeps, the TrainResult (Adam, a Transformer with BatchNorm and dropout);
//   - a finished run's final checkpoint skips the run; divergence stays a result;
//   - a truncated, damaged, foreign or mismatching checkpoint is ignored (the run starts at 0);
//   - the write is atomic: a failed write leaves the previous file whole and no temporary file.
#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "seqlab/core/file_io.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/nn/norm.hpp"
#include "seqlab/train/checkpoint.hpp"
#include "seqlab/train/loop.hpp"
#include "seqlab/train/optimizer.hpp"
#include "temp_dir.hpp"

using namespace seqlab;
namespace fs = std::filesystem;

namespace {

constexpr int kSteps = 12;

ModelConfig bn_dropout_config() {
  ModelConfig c;
  c.model = "transformer_encoder";
  c.input = "embedding";
  c.vocab_size = 7;
  c.embedding_dim = 8;
  c.hidden_size = 8;
  c.num_layers = 2;
  c.n_heads = 2;
  c.d_ff = 12;
  c.output_size = 7;
  c.positional_encoding = "sinusoidal";
  c.max_len = 16;
  c.norm = "batch_norm";
  c.norm_placement = "pre";
  c.dropout = 0.2f;
  return c;
}

/// Everything of one training run: fresh objects from fixed seeds, as a resumed process builds them.
struct Run {
  std::unique_ptr<SequenceModel> model;
  std::unique_ptr<Optimizer> optim;
  Rng data_rng{42};
  std::vector<double> losses;  // what the caller's on_step accumulates
  CrossEntropyLoss ce;
  int micro_batches = 1;       // > 1: gradient accumulation over one sequence per micro-batch

  Run() {
    Rng init(7);
    model = make_model(bn_dropout_config(), init);
    model->train();
    OptimizerConfig oc;
    oc.lr = 0.01f;
    optim = make_optimizer("adam", model->parameters(), oc);
  }

  /// Trains with checkpoints in `path` every `every` updates; `stop_after` > 0 throws after that
  /// many updates of THIS call (a simulated kill: nothing after it is saved).
  TrainResult train(const std::string& path, int every, int stop_after = 0,
                    const std::string& identity = "test run") {
    TrainOptions opt;
    opt.steps = kSteps;
    opt.clip_norm = 1.0;
    opt.quiet = true;
    if (every > 0) {
      opt.checkpoint.every = every;
      opt.checkpoint.path = path;
      opt.checkpoint.identity = identity;
      opt.checkpoint.model = model.get();
      opt.checkpoint.notes = false;
      opt.checkpoint.state.add("data_rng", data_rng);
      opt.checkpoint.state.add("losses", losses);
    }
    LrSchedule schedule;
    schedule.kind = "constant";
    schedule.base_lr = 0.01f;
    int calls = 0;
    // One batch of B sequences per update, or (micro_batches = B) one sequence per micro-batch.
    const std::size_t B = 3, T = 5;
    auto on_step = [&](const StepRecord& r) {
      losses.push_back(r.loss);
      if (stop_after > 0 && ++calls == stop_after) throw std::runtime_error("killed");
    };
    auto forward_backward = [&](std::size_t n, CrossEntropyLoss& loss_fn) {
      IndexTensor2 ids({n, T});
      for (auto& v : ids) v = static_cast<std::int32_t>(data_rng.uniform_int(7));
      const Tensor3 logits = model->forward(ids);
      Tensor2 rows = Tensor2::from_shape({n * T, 7});
      std::copy(logits.begin(), logits.end(), rows.begin());
      IndexTensor1 y = IndexTensor1::from_shape({n * T});
      for (std::size_t i = 0; i < y.size(); ++i) y(i) = ids.data()[i];
      const double loss = loss_fn.forward(rows, y);
      const Tensor2 d = loss_fn.backward();
      Tensor3 dl = Tensor3::from_shape({n, T, 7});
      std::copy(d.begin(), d.end(), dl.begin());
      model->backward(dl);
      return LossSum{loss, loss_fn.count()};
    };
    if (micro_batches > 1) {
      opt.micro_batches = static_cast<int>(B);
      CrossEntropyLoss sum_ce(-100, Reduction::sum);
      return train_loop_accumulate(
          opt, model->parameters(), *optim, schedule,
          [&](int, int) { return forward_backward(1, sum_ce); }, on_step);
    }
    return train_loop(
        opt, model->parameters(), *optim, schedule,
        [&](int) { return forward_backward(B, ce).sum; }, on_step);
  }
};

bool same_state(const Rng& a, const Rng& b) {
  const Rng::State x = a.state(), y = b.state();
  return x.s == y.s && x.has_spare == y.has_spare &&
         std::memcmp(&x.spare, &y.spare, sizeof(double)) == 0;
}

/// Bitwise equality of everything a run can leave behind.
void require_same(Run& a, Run& b) {
  const auto pa = a.model->named_parameters(), pb = b.model->named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].key);
    REQUIRE(pa[i].param->value.size() == pb[i].param->value.size());
    REQUIRE(std::memcmp(pa[i].param->value.data(), pb[i].param->value.data(),
                        pa[i].param->value.size() * sizeof(float)) == 0);
  }
  const auto ba = a.model->named_buffers(), bb = b.model->named_buffers();
  REQUIRE(ba.size() == bb.size());
  for (std::size_t i = 0; i < ba.size(); ++i) {
    INFO(ba[i].key);
    REQUIRE(ba[i].key == bb[i].key);
    if (auto* const* f = std::get_if<Tensor1*>(&ba[i].ref)) {
      const Tensor1& x = **f;
      const Tensor1& y = *std::get<Tensor1*>(bb[i].ref);
      REQUIRE(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
    } else if (auto* const* n = std::get_if<std::int64_t*>(&ba[i].ref)) {
      REQUIRE(**n == *std::get<std::int64_t*>(bb[i].ref));
    } else if (auto* const* g = std::get_if<Rng*>(&ba[i].ref)) {
      REQUIRE(same_state(**g, *std::get<Rng*>(bb[i].ref)));
    }
  }
  const OptimizerState sa = a.optim->state(), sb = b.optim->state();
  REQUIRE(sa.step == sb.step);
  REQUIRE(sa.buffers == sb.buffers);  // float vectors compared exactly
  REQUIRE(a.losses.size() == b.losses.size());
  REQUIRE(std::memcmp(a.losses.data(), b.losses.data(), a.losses.size() * sizeof(double)) == 0);
  REQUIRE(same_state(a.data_rng, b.data_rng));
}

std::string slurp(const fs::path& p) { return read_file(p.string()); }
void spit(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
}

}  // namespace

TEST_CASE("every model family lists its buffers: BatchNorm statistics and dropout generators",
          "[train][checkpoint][buffers]") {
  Rng rng(1);
  auto tm = make_model(bn_dropout_config(), rng);
  std::set<std::string> keys;
  for (const auto& b : tm->named_buffers()) REQUIRE(keys.insert(b.key).second);  // unique
  CHECK(keys.count("transformer_encoder.emb_dropout.rng"));
  CHECK(keys.count("transformer_encoder.layers.0.norm1.running_mean"));
  CHECK(keys.count("transformer_encoder.layers.1.norm2.running_var"));
  CHECK(keys.count("transformer_encoder.layers.1.norm2.num_batches_tracked"));
  CHECK(keys.count("transformer_encoder.layers.0.dropout.rng"));
  CHECK(keys.count("transformer_encoder.layers.0.dropout1.rng"));
  CHECK(keys.count("transformer_encoder.norm.running_mean"));
  // 1 embedding dropout + per layer (3 dropouts + 2 norms × 3 buffers) + final norm's 3.
  CHECK(keys.size() == 1 + 2 * (3 + 6) + 3);

  for (const std::string family : {"rnn", "lstm", "gru", "tcn"}) {
    ModelConfig c;
    c.model = family;
    c.input = "embedding";
    c.vocab_size = 5;
    c.embedding_dim = 4;
    c.hidden_size = 4;
    c.num_layers = 2;
    c.output_size = 5;
    c.dropout = 0.1f;
    Rng r(2);
    auto m = make_model(c, r);
    const auto bufs = m->named_buffers();
    INFO(family);
    // Recurrent: input and output dropout; TCN: two dropouts per block.
    CHECK(bufs.size() == (family == "tcn" ? 2 * 2 : 2));
    for (const auto& b : bufs) CHECK(std::holds_alternative<Rng*>(b.ref));
  }

  ModelConfig ed = bn_dropout_config();
  ed.model = "transformer_encoder_decoder";
  ed.norm = "layer_norm";
  Rng r3(3);
  auto m = make_model(ed, r3);
  std::set<std::string> ek;
  for (const auto& b : m->named_buffers()) ek.insert(b.key);
  CHECK(ek.count("src_dropout.rng"));
  CHECK(ek.count("tgt_dropout.rng"));
  CHECK(ek.count("transformer.decoder.layers.1.dropout3.rng"));
}

TEST_CASE("a killed and resumed run equals an uninterrupted one bit for bit (Adam, BatchNorm, "
          "dropout)",
          "[train][checkpoint][resume]") {
  test::TempDir dir("seqlab_ckpt");
  const std::string path = (dir.path / "run.ckpt").string();

  Run ref;
  const TrainResult ref_result = ref.train("", 0);
  REQUIRE_FALSE(ref_result.diverged);
  REQUIRE(ref.losses.size() == static_cast<std::size_t>(kSteps));

  for (const int every : {1, 4, 5}) {
    for (const int kill_after : {3, 7, 11}) {
      INFO("every " << every << ", killed after " << kill_after << " updates");
      fs::remove(path);
      {
        Run first;
        REQUIRE_THROWS_WITH(first.train(path, every, kill_after), "killed");
      }  // the process is gone: only the checkpoint file remains
      REQUIRE(fs::exists(path) == (kill_after >= every));
      Run resumed;  // fresh objects, initial values
      const TrainResult r = resumed.train(path, every);
      CHECK(r.diverged == ref_result.diverged);
      CHECK(r.steps_done == ref_result.steps_done);
      CHECK(std::memcmp(&r.last_loss, &ref_result.last_loss, sizeof(double)) == 0);
      require_same(resumed, ref);
      // Two kills in a row.
      fs::remove(path);
      {
        Run a;
        REQUIRE_THROWS(a.train(path, every, kill_after));
      }
      {
        Run b;
        REQUIRE_THROWS(b.train(path, every, 2));
      }
      Run c;
      c.train(path, every);
      require_same(c, ref);
    }
  }
}

TEST_CASE("a killed and resumed run with gradient accumulation equals an uninterrupted one",
          "[train][checkpoint][resume][accumulate]") {
  test::TempDir dir("seqlab_ckpt");
  const std::string path = (dir.path / "run.ckpt").string();
  Run ref;
  ref.micro_batches = 3;
  const TrainResult ref_result = ref.train("", 0);
  REQUIRE_FALSE(ref_result.diverged);
  Run plain;  // the same data in one batch per update: another run (BatchNorm sees other batches)
  plain.train("", 0);
  REQUIRE(plain.losses != ref.losses);
  for (const int kill_after : {2, 7}) {
    INFO("killed after " << kill_after << " updates");
    fs::remove(path);
    {
      Run first;
      first.micro_batches = 3;
      REQUIRE_THROWS_WITH(first.train(path, 3, kill_after), "killed");
    }
    Run resumed;
    resumed.micro_batches = 3;
    const TrainResult r = resumed.train(path, 3);
    CHECK(r.steps_done == ref_result.steps_done);
    CHECK(std::memcmp(&r.last_loss, &ref_result.last_loss, sizeof(double)) == 0);
    require_same(resumed, ref);
  }
}

TEST_CASE("a finished run's final checkpoint skips the whole run with the same result",
          "[train][checkpoint][resume]") {
  test::TempDir dir("seqlab_ckpt");
  const std::string path = (dir.path / "run.ckpt").string();
  Run ref;
  const TrainResult want = ref.train(path, 5);  // 12 steps: saves at 5, 10 and 12
  Checkpoint c = *read_checkpoint(path);
  CHECK(c.step == kSteps);
  CHECK(c.total_steps == kSteps);
  Run again;
  int calls = 0;
  TrainOptions opt;
  opt.steps = kSteps;
  opt.quiet = true;
  opt.checkpoint.every = 5;
  opt.checkpoint.path = path;
  opt.checkpoint.identity = "test run";
  opt.checkpoint.model = again.model.get();
  opt.checkpoint.notes = false;
  opt.checkpoint.state.add("data_rng", again.data_rng);
  opt.checkpoint.state.add("losses", again.losses);
  LrSchedule s;
  const TrainResult got = train_loop(opt, again.model->parameters(), *again.optim, s, [&](int) {
    ++calls;
    return 0.0;
  });
  CHECK(calls == 0);
  CHECK(got.steps_done == want.steps_done);
  CHECK(got.last_loss == want.last_loss);
  require_same(again, ref);
}

TEST_CASE("a truncated, damaged, foreign or mismatching checkpoint is ignored: the run starts at 0",
          "[train][checkpoint][corrupt]") {
  test::TempDir dir("seqlab_ckpt");
  const fs::path path = dir.path / "run.ckpt";
  Run ref;
  ref.train("", 0);
  std::string good;
  {
    Run first;
    REQUIRE_THROWS(first.train(path.string(), 4, 6));
    good = slurp(path);
  }
  REQUIRE(decode_checkpoint(good).step == 4);

  auto resumed_equals_ref = [&](const std::string& content, const std::string& identity,
                                const std::string& why) {
    INFO(why);
    spit(path, content);
    Run r;
    r.train(path.string(), 4, 0, identity);
    require_same(r, ref);  // from step 0: the same result (ignored, never harmful)
  };
  SECTION("truncated") {
    for (std::size_t n : {std::size_t(0), std::size_t(5), std::size_t(20), good.size() / 2,
                          good.size() - 1}) {
      CHECK_THROWS_AS(decode_checkpoint(good.substr(0, n)), CheckpointError);
      resumed_equals_ref(good.substr(0, n), "test run", "truncated to " + std::to_string(n));
    }
  }
  SECTION("a flipped byte fails the checksum") {
    std::string bad = good;
    bad[bad.size() / 2] ^= 0x40;
    CHECK_THROWS_WITH(decode_checkpoint(bad), Catch::Contains("checksum"));
    resumed_equals_ref(bad, "test run", "flipped byte");
  }
  SECTION("not a checkpoint, another version") {
    CHECK_THROWS_WITH(decode_checkpoint("hello world, not a checkpoint"),
                      Catch::Contains("not a seqlab checkpoint"));
    std::string v2 = good;
    v2[8] = 2;
    CHECK_THROWS_WITH(decode_checkpoint(v2), Catch::Contains("version 2"));
    resumed_equals_ref(v2, "test run", "version 2");
  }
  SECTION("another identity is ignored") { resumed_equals_ref(good, "another run", "identity"); }
  SECTION("another architecture is ignored") {
    Checkpoint c = decode_checkpoint(good);
    c.parameters.front().shape.push_back(1);
    resumed_equals_ref(encode_checkpoint(c), "test run", "shape");
    c = decode_checkpoint(good);
    c.buffers.pop_back();
    resumed_equals_ref(encode_checkpoint(c), "test run", "buffers");
    c = decode_checkpoint(good);
    c.total_steps = kSteps + 1;
    resumed_equals_ref(encode_checkpoint(c), "test run", "total steps");
    c = decode_checkpoint(good);
    c.optimizer.kind = "sgd";
    resumed_equals_ref(encode_checkpoint(c), "test run", "optimizer kind");
  }
  SECTION("a caller state that does not match is ignored") {
    Checkpoint c = decode_checkpoint(good);
    CheckpointState other;
    double x = 1;
    other.add("something_else", x);
    c.extra = other.save();
    resumed_equals_ref(encode_checkpoint(c), "test run", "caller state");
  }
}

TEST_CASE("a checkpoint write that fails leaves the previous file whole and no temporary file",
          "[train][checkpoint][atomic]") {
  test::TempDir dir("seqlab_ckpt");
  const fs::path path = dir.path / "run.ckpt";
  Run run;
  Checkpoint c = capture_checkpoint(
      [&] {
        CheckpointOptions o;
        o.model = run.model.get();
        o.identity = "x";
        return o;
      }(),
      run.model->parameters(), *run.optim, 0, kSteps, 0.0);
  write_checkpoint(path.string(), c);
  const std::string before = slurp(path);
  REQUIRE(decode_checkpoint(before).identity == "x");

  SECTION("the file system refuses the data (RLIMIT_FSIZE: EFBIG, even for root)") {
    struct rlimit old {};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old;
    small.rlim_cur = 64;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    c.identity = "y";
    std::string error;
    try {
      write_checkpoint(path.string(), c);
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
    CHECK_THAT(error, Catch::Contains("File too large") && Catch::Contains("run.ckpt"));
    CHECK(slurp(path) == before);
  }
  SECTION("the directory does not exist") {
    CHECK_THROWS_WITH(write_checkpoint((dir.path / "gone" / "run.ckpt").string(), c),
                      Catch::Contains("gone"));
    CHECK_FALSE(fs::exists(dir.path / "gone"));
  }
  SECTION("a run whose checkpoint cannot be written fails, naming the path") {
    Run r;
    CHECK_THROWS_WITH(r.train((dir.path / "gone" / "run.ckpt").string(), 2),
                      Catch::Contains("gone"));
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path)) names.push_back(e.path().filename().string());
  CHECK(names == std::vector<std::string>{"run.ckpt"});  // no temporary file left
}

TEST_CASE("a diverged run stays a result after a resume", "[train][checkpoint][divergence]") {
  test::TempDir dir("seqlab_ckpt");
  const std::string path = (dir.path / "p.ckpt").string();
  auto run = [&](int stop_after, std::vector<double>& history) {
    Parameter p("w", {2});
    p.value = xt::xarray<float>({1.0f, -1.0f});
    SGD sgd({&p}, 0.1f);
    TrainOptions opt;
    opt.steps = 10;
    opt.quiet = true;
    opt.checkpoint.every = 2;
    opt.checkpoint.path = path;
    opt.checkpoint.identity = "div";
    opt.checkpoint.notes = false;
    opt.checkpoint.state.add("history", history);
    LrSchedule s;
    int calls = 0;
    return train_loop(
        opt, {&p}, sgd, s,
        [&](int step) {
          p.grad(0) = 1.0f;
          return step == 6 ? NAN : 1.0 + step;
        },
        [&](const StepRecord& r) {
          history.push_back(r.loss);
          if (stop_after > 0 && ++calls == stop_after) throw std::runtime_error("killed");
        });
  };
  std::vector<double> h_ref, h1, h2;
  const TrainResult ref = [&] {
    const std::string keep = path;
    TrainResult r = run(0, h_ref);
    fs::remove(keep);
    return r;
  }();
  REQUIRE(ref.diverged);
  REQUIRE(ref.diverged_step == 6);
  REQUIRE_THROWS(run(5, h1));
  const TrainResult got = run(0, h2);
  CHECK(got.diverged);
  CHECK(got.diverged_step == 6);
  CHECK(got.steps_done == ref.steps_done);
  CHECK(got.diverged_what == ref.diverged_what);
  CHECK(h2 == h_ref);
}

TEST_CASE("CheckpointState loads all or nothing", "[train][checkpoint][state]") {
  double a = 1.5;
  int n = 3;
  std::vector<double> v{1, 2};
  Rng g(9);
  CheckpointState s;
  s.add("a", a);
  s.add("n", n);
  s.add("v", v);
  s.add("g", g);
  CHECK_THROWS_AS(s.add("a", a), std::invalid_argument);
  const std::string blob = s.save();
  const std::uint64_t next = Rng(g).next_u64();
  a = 0;
  n = 0;
  v.clear();
  g.next_u64();
  s.load(blob);
  CHECK(a == 1.5);
  CHECK(n == 3);
  CHECK(v == std::vector<double>{1, 2});
  CHECK(g.next_u64() == next);

  CheckpointState fewer;
  fewer.add("a", a);
  a = 7;
  CHECK_THROWS_AS(fewer.load(blob), CheckpointError);  // unknown entries
  CHECK(a == 7);                                       // unchanged
  CHECK_THROWS_AS(s.load(blob.substr(0, blob.size() - 3)), CheckpointError);
}
