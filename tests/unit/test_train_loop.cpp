// Training loop (train_loop), its gradient accumulation over micro-batches (train_loop_accumulate)
// and its progress line (Progress).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/train/clip.hpp"
#include "seqlab/train/loop.hpp"
#include "seqlab/train/progress.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

// L(w) = ½‖w − target‖², dL/dw = w − target (added into grad, as a layer's backward does).
struct Quadratic {
  Parameter w{"w", {3}};
  std::vector<float> target{1.0f, -2.0f, 0.5f};
  double operator()(int) {
    double loss = 0;
    for (std::size_t i = 0; i < 3; ++i) {
      const float d = w.value(i) - target[i];
      loss += 0.5 * d * d;
      w.grad(i) += d;
    }
    return loss;
  }
};

/// Runs `f` with file descriptor 2 pointing at a fresh temporary file; returns what was written.
template <class F>
std::string capture_stderr(F&& f) {
  std::fflush(stderr);
  FILE* tmp = std::tmpfile();
  REQUIRE(tmp != nullptr);
  const int saved = ::dup(STDERR_FILENO);
  REQUIRE(saved >= 0);
  ::dup2(::fileno(tmp), STDERR_FILENO);
  try {
    f();
  } catch (...) {
    std::fflush(stderr);
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    std::fclose(tmp);
    throw;
  }
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string out;
  std::rewind(tmp);
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, tmp)) > 0) out.append(buf, n);
  std::fclose(tmp);
  return out;
}

}  // namespace

TEST_CASE("train_loop converges on a quadratic and reports every step", "[train][loop]") {
  Quadratic q;
  SGD sgd({&q.w}, 0.0f, 0.5f);
  LrSchedule sched{"cosine", 0.2f, 5, 100, 0.01f};
  std::vector<StepRecord> records;
  TrainOptions opt;
  opt.steps = 100;
  opt.quiet = true;
  const TrainResult r = train_loop(opt, {&q.w}, sgd, sched, std::ref(q),
                                   [&](const StepRecord& s) { records.push_back(s); });
  CHECK_FALSE(r.diverged);
  CHECK(r.diverged_step == -1);
  CHECK(r.steps_done == 100);
  CHECK(r.diverged_what.empty());
  REQUIRE(records.size() == 100);
  for (int k = 0; k < 100; ++k) {
    INFO("step " << k);
    REQUIRE(records[k].step == k);
    REQUIRE(records[k].lr == static_cast<double>(sched.lr_at(k)));
    // No clipping: the norm reported is ‖w − target‖ = sqrt(2·loss).
    REQUIRE_THAT(records[k].grad_norm, WithinRel(std::sqrt(2 * records[k].loss), 1e-5));
  }
  CHECK(records.front().loss > 1.0);  // 0.5·(1 + 4 + 0.25) at w = 0
  CHECK(r.last_loss == records.back().loss);
  CHECK(r.last_loss < 1e-6);
  for (std::size_t i = 0; i < 3; ++i) CHECK_THAT(q.w.value(i), WithinAbs(q.target[i], 1e-3));
  CHECK(sgd.lr() == sched.lr_at(99));
}

TEST_CASE("train_loop zeroes gradients before every step", "[train][loop]") {
  Quadratic q;
  Adam adam({&q.w}, 0.01f);
  TrainOptions opt;
  opt.steps = 5;
  opt.quiet = true;
  int calls = 0;
  train_loop(opt, {&q.w}, adam, LrSchedule{"constant", 0.01f}, [&](int step) {
    REQUIRE(step == calls);
    ++calls;
    for (float g : q.w.grad) REQUIRE(g == 0.0f);
    q.w.grad(0) += 123.0f;  // stale gradient that must not survive to the next step
    return q(step);
  });
  CHECK(calls == 5);
}

TEST_CASE("train_loop reports a NaN loss at step 3 as divergence", "[train][loop][divergence]") {
  Quadratic q;
  SGD sgd({&q.w}, 0.1f);
  TrainOptions opt;
  opt.steps = 10;
  opt.quiet = true;
  std::vector<int> seen;
  std::vector<float> w_after_step2;
  TrainResult r;
  REQUIRE_NOTHROW(r = train_loop(
                      opt, {&q.w}, sgd, LrSchedule{"constant", 0.1f},
                      [&](int step) {
                        if (step == 3) {
                          w_after_step2.assign(q.w.value.begin(), q.w.value.end());
                          q(step);
                          return std::numeric_limits<double>::quiet_NaN();
                        }
                        if (step > 3) FAIL("loss_and_grad called after divergence");
                        return q(step);
                      },
                      [&](const StepRecord& s) { seen.push_back(s.step); }));
  CHECK(r.diverged);
  CHECK(r.diverged_step == 3);
  CHECK(r.steps_done == 3);  // steps 0, 1, 2 applied; step 3 not
  CHECK(std::isfinite(r.last_loss));
  CHECK(r.diverged_what == "loss = nan");
  CHECK(seen == std::vector<int>{0, 1, 2});
  // The diverged step made no update.
  REQUIRE(w_after_step2.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(q.w.value(i) == w_after_step2[i]);
}

TEST_CASE("train_loop reports an Inf loss or a NaN gradient as divergence", "[train][loop][divergence]") {
  TrainOptions opt;
  opt.steps = 4;
  opt.quiet = true;
  {
    Quadratic q;
    SGD sgd({&q.w}, 0.1f);
    const TrainResult r = train_loop(opt, {&q.w}, sgd, LrSchedule{}, [&](int step) {
      q(step);
      return step == 0 ? std::numeric_limits<double>::infinity() : 1.0;
    });
    CHECK(r.diverged);
    CHECK(r.diverged_step == 0);
    CHECK(r.steps_done == 0);
    CHECK(std::isnan(r.last_loss));
    CHECK(r.diverged_what == "loss = inf");
  }
  for (double clip : {0.0, 1.0}) {
    INFO("clip_norm " << clip);
    Quadratic q;
    SGD sgd({&q.w}, 0.1f);
    opt.clip_norm = clip;
    int on_step_calls = 0;
    const TrainResult r = train_loop(
        opt, {&q.w}, sgd, LrSchedule{},
        [&](int step) {
          const double loss = q(step);
          if (step == 1) q.w.grad(2) = std::numeric_limits<float>::quiet_NaN();
          return loss;  // finite loss, NaN gradient
        },
        [&](const StepRecord&) { ++on_step_calls; });
    CHECK(r.diverged);
    CHECK(r.diverged_step == 1);
    CHECK(r.steps_done == 1);
    CHECK(on_step_calls == 1);
    CHECK(r.diverged_what == "grad_norm = nan");
    for (std::size_t i = 0; i < 3; ++i) CHECK(std::isfinite(q.w.value(i)));
  }
}

TEST_CASE("train_loop reports parameters made non-finite by the last update as divergence", "[train][loop][divergence]") {
  // SGD with lr 3e38 and a gradient of 1e10 moves w by 3e48: inf in float. The loss of every
  // step is finite, so only the final parameter check can see it.
  for (int steps : {1, 3}) {
    INFO("steps " << steps);
    Quadratic q;
    SGD sgd({&q.w}, 3e38f);
    TrainOptions opt;
    opt.steps = steps;
    opt.quiet = true;
    int on_step_calls = 0;
    const TrainResult r = train_loop(
        opt, {&q.w}, sgd, LrSchedule{"constant", 3e38f},
        [&](int step) {
          const double loss = q(step);
          for (auto& g : q.w.grad) g = step == steps - 1 ? 1e10f : 0.0f;  // only the last update blows up
          return loss;
        },
        [&](const StepRecord&) { ++on_step_calls; });
    CHECK(r.diverged);
    CHECK(r.diverged_step == steps);  // the step that would come next; update steps-1 was applied
    CHECK(r.steps_done == steps);
    CHECK(on_step_calls == steps);
    CHECK(std::isfinite(r.last_loss));
    CHECK_THAT(r.diverged_what, Catch::StartsWith("parameters non-finite (first: w = -inf)"));
    CHECK(std::isinf(q.w.value(0)));
  }
  // Finite parameters after the last update: not diverged (no false alarm).
  Quadratic q;
  SGD sgd({&q.w}, 0.1f);
  TrainOptions opt;
  opt.steps = 2;
  opt.quiet = true;
  const TrainResult ok = train_loop(opt, {&q.w}, sgd, LrSchedule{"constant", 0.1f}, std::ref(q));
  CHECK_FALSE(ok.diverged);
  CHECK(ok.diverged_step == -1);
  CHECK(ok.diverged_what.empty());
}

TEST_CASE("train_loop clips by the global norm and reports the norm before clipping", "[train][loop]") {
  // Two parameters with gradients (3, 0) and (0, 4): norm 5, clipped to 1, SGD lr 1 → each moves
  // by 1/(5 + 1e-6) times its gradient.
  Parameter a("a", {2}), b("b", {2});
  SGD sgd({&a, &b}, 1.0f);
  TrainOptions opt;
  opt.steps = 1;
  opt.clip_norm = 1.0;
  opt.quiet = true;
  StepRecord rec{};
  train_loop(
      opt, {&a, &b}, sgd, LrSchedule{"constant", 1.0f},
      [&](int) {
        a.grad(0) += 3.0f;
        b.grad(1) += 4.0f;
        return 7.0;
      },
      [&](const StepRecord& s) { rec = s; });
  CHECK_THAT(rec.grad_norm, WithinAbs(5.0, 1e-12));
  CHECK(rec.loss == 7.0);
  CHECK_THAT(a.value(0), WithinAbs(-0.6, 1e-6));
  CHECK_THAT(b.value(1), WithinAbs(-0.8, 1e-6));
  CHECK(a.value(1) == 0.0f);
  CHECK(b.value(0) == 0.0f);
}

TEST_CASE("train_loop rejects bad options before the first step", "[train][loop][errors]") {
  Quadratic q;
  SGD sgd({&q.w}, 0.1f);
  int calls = 0;
  auto f = [&](int s) {
    ++calls;
    return q(s);
  };
  TrainOptions opt;
  opt.quiet = true;
  opt.steps = -1;
  CHECK_THROWS_WITH(train_loop(opt, {&q.w}, sgd, LrSchedule{}, f), Catch::Contains("steps = -1"));
  opt.steps = 3;
  opt.clip_norm = -2;
  CHECK_THROWS_WITH(train_loop(opt, {&q.w}, sgd, LrSchedule{}, f), Catch::Contains("clip_norm = -2"));
  opt.clip_norm = 0;
  CHECK_THROWS_WITH(train_loop(opt, {&q.w}, sgd, LrSchedule{"cosine", 0.1f, 10, 5}, f),
                    Catch::Contains("total_steps = 5"));
  CHECK_THROWS_WITH(train_loop(opt, {&q.w, nullptr}, sgd, LrSchedule{}, f), Catch::Contains("params[1]"));
  CHECK_THROWS_WITH(train_loop(opt, {&q.w}, sgd, LrSchedule{}, {}), Catch::Contains("loss_and_grad"));
  CHECK(calls == 0);
  opt.steps = 0;
  const TrainResult r = train_loop(opt, {&q.w}, sgd, LrSchedule{}, f);
  CHECK(r.steps_done == 0);
  CHECK_FALSE(r.diverged);
  CHECK(calls == 0);
}

TEST_CASE("train_loop writes nothing to stderr when it is not a terminal", "[train][loop][progress]") {
  Quadratic q;
  SGD sgd({&q.w}, 0.1f);
  TrainOptions opt;
  opt.steps = 20;
  opt.quiet = false;  // not quiet: only the missing terminal keeps it silent
  opt.label = "quadratic";
  bool was_tty = true;
  const std::string err = capture_stderr([&] {
    was_tty = Progress::stderr_is_terminal();
    train_loop(opt, {&q.w}, sgd, LrSchedule{}, std::ref(q));
  });
  CHECK_FALSE(was_tty);
  CHECK(err.empty());
}

namespace {

/// A pseudo-terminal pair; `ok` is false where none can be opened.
struct Pty {
  int master = -1, slave = -1;
  bool ok = false;
  Pty() {
    master = ::posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) return;
    slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
    ok = slave >= 0;
  }
  ~Pty() {
    if (slave >= 0) ::close(slave);
    if (master >= 0) ::close(master);
  }
  /// Reads from the master until `marker` has arrived (pty output is delivered asynchronously),
  /// giving up after 5 s without new data; returns everything read.
  std::string read_until(const std::string& marker) const {
    std::string out;
    char buf[4096];
    while (out.find(marker) == std::string::npos) {
      pollfd pfd{master, POLLIN, 0};
      if (::poll(&pfd, 1, 5000) <= 0) break;
      const ssize_t n = ::read(master, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }
};

/// Runs `f` with file descriptor 2 on the pty's slave side, then writes `marker` there.
template <class F>
void with_stderr_on(const Pty& pty, const char* marker, F&& f) {
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  REQUIRE(saved >= 0);
  ::dup2(pty.slave, STDERR_FILENO);
  try {
    f();
  } catch (...) {
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    throw;
  }
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  REQUIRE(::write(pty.slave, marker, std::strlen(marker)) == static_cast<ssize_t>(std::strlen(marker)));
}

}  // namespace

TEST_CASE("train_loop draws a progress line when stderr is a terminal", "[train][loop][progress]") {
  Pty pty;
  if (!pty.ok) {
    WARN("no pseudo-terminal available; terminal case not exercised");
    return;
  }
  Quadratic q;
  SGD sgd({&q.w}, 0.1f);
  TrainOptions opt;
  opt.steps = 7;
  opt.label = "quad";
  bool tty = false;
  TrainResult r;
  with_stderr_on(pty, "<END>", [&] {
    tty = Progress::stderr_is_terminal();
    r = train_loop(opt, {&q.w}, sgd, LrSchedule{}, std::ref(q));
  });
  const std::string out = pty.read_until("<END>");
  INFO("terminal output: " << out);
  CHECK(tty);
  CHECK(r.steps_done == 7);
  const auto line = out.find("\rquad: step 7/7  loss ");
  CHECK(line != std::string::npos);
  CHECK(out.find("steps/s  ETA 0s") != std::string::npos);
  const auto newline = out.find('\n');  // the pty turns it into "\r\n"
  CHECK(newline != std::string::npos);
  CHECK(line < newline);
  CHECK(out.find("<END>") > newline);

  // quiet = true: silent even on a terminal.
  Pty pty2;
  REQUIRE(pty2.ok);
  opt.quiet = true;
  with_stderr_on(pty2, "<END>", [&] { train_loop(opt, {&q.w}, sgd, LrSchedule{}, std::ref(q)); });
  CHECK(pty2.read_until("<END>") == "<END>");
}

TEST_CASE("Progress redraws at most once per interval and always at the end", "[train][progress]") {
  double now = 100.0;
  std::ostringstream out;
  {
    Progress p(10, "run", &out, [&] { return now; }, 0.5);
    now = 100.1;
    p.update(1, 2.0);  // 0.1 s after start: not drawn
    CHECK(out.str().empty());
    now = 100.6;
    p.update(2, 1.5);  // 0.6 s: drawn; 2 steps in 0.6 s = 3.3 steps/s, 8 left → ETA 2s
    CHECK(out.str() == "\rrun: step 2/10  loss 1.5  3.3 steps/s  ETA 2s\x1b[K");
    now = 100.9;
    p.update(3, 1.0);  // 0.3 s after the last draw: not drawn
    CHECK(out.str().find("step 3/10") == std::string::npos);
    now = 101.0;
    p.update(10, 0.25);  // last step: always drawn
    CHECK(out.str().find("\rrun: step 10/10  loss 0.25  10.0 steps/s  ETA 0s\x1b[K") != std::string::npos);
    CHECK(out.str().find('\n') == std::string::npos);
  }  // destructor: newline
  const std::string text = out.str();
  CHECK(text.back() == '\n');
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);

  // Stopped early (divergence): finish() shows the latest state, then one newline; idempotent.
  std::ostringstream out2;
  now = 0;
  Progress p2(100, "", &out2, [&] { return now; });
  now = 0.1;
  p2.update(4, std::nan(""));
  p2.finish();
  p2.finish();
  CHECK(out2.str() == "\rstep 4/100  loss nan  40.0 steps/s  ETA 2s\x1b[K\n");

  // Disabled: nothing, ever.
  Progress off(10, "x", nullptr);
  off.update(10, 1.0);
  off.finish();
  CHECK_FALSE(off.enabled());
}

TEST_CASE("Progress formats durations and lines", "[train][progress]") {
  CHECK(Progress::format_duration(0.4) == "0s");
  CHECK(Progress::format_duration(45) == "45s");
  CHECK(Progress::format_duration(187) == "3m07s");
  CHECK(Progress::format_duration(7509) == "2h05m09s");
  CHECK(Progress::format_duration(-1) == "--");
  CHECK(Progress::format_duration(INFINITY) == "--");
  CHECK(Progress::format_line("lstm", 10, 100, 0.5, 30.0) == "lstm: step 10/100  loss 0.5  30.0 steps/s  ETA 3s");
  CHECK(Progress::format_line("", 3, 0, 1.23456, 0.0) == "step 3  loss 1.235  -- steps/s");
}

namespace {

// Per-position losses l_i = c_i · w of micro-batch m (coefficients c), summed: the sum reduction.
// Its gradient Σ c_i is added into w.grad as a backward does.
LossSum linear_sum(Parameter& w, const std::vector<float>& c) {
  LossSum out;
  for (float ci : c) {
    out.sum += static_cast<double>(ci) * w.value(0);
    w.grad(0) += ci;
  }
  out.count = c.size();
  return out;
}

}  // namespace

TEST_CASE("micro-batches with losses [1] and [2 2 2] train as one batch with mean 1.75",
          "[train][loop][accumulate]") {
  const std::vector<std::vector<float>> micro = {{1.0f}, {2.0f, 2.0f, 2.0f}};
  TrainOptions opt;
  opt.steps = 1;
  opt.quiet = true;
  opt.micro_batches = 2;
  const LrSchedule lr1{"constant", 1.0f};

  Parameter w("w", {1});
  w.value(0) = 1.0f;
  SGD sgd({&w}, 1.0f);
  std::vector<StepRecord> records;
  std::vector<int> calls;
  const TrainResult r = train_loop_accumulate(
      opt, {&w}, sgd, lr1,
      [&](int step, int m) {
        REQUIRE(step == 0);
        calls.push_back(m);
        return linear_sum(w, micro[static_cast<std::size_t>(m)]);
      },
      [&](const StepRecord& rec) { records.push_back(rec); });
  CHECK(calls == std::vector<int>{0, 1});
  REQUIRE(records.size() == 1);
  CHECK(records[0].loss == 1.75);  // (1 + 2 + 2 + 2) / 4, not (1 + 2) / 2 = 1.5
  CHECK(r.last_loss == 1.75);
  CHECK(w.grad(0) == 1.75f);       // the gradient of the mean over the 4 positions
  CHECK(w.value(0) == -0.75f);     // 1 − lr · 1.75

  // The same batch in one piece, through the plain loop with the mean as its loss.
  Parameter v("w", {1});
  v.value(0) = 1.0f;
  SGD sgd2({&v}, 1.0f);
  TrainOptions one = opt;
  one.micro_batches = 1;
  const TrainResult whole = train_loop(one, {&v}, sgd2, lr1, [&](int) {
    const LossSum s = linear_sum(v, {1.0f, 2.0f, 2.0f, 2.0f});
    for (float& g : v.grad) g /= static_cast<float>(s.count);
    return s.sum / static_cast<double>(s.count);
  });
  CHECK(whole.last_loss == r.last_loss);
  CHECK(v.value(0) == w.value(0));
}

TEST_CASE("train_loop_accumulate with one micro-batch is train_loop", "[train][loop][accumulate]") {
  TrainOptions opt;
  opt.steps = 20;
  opt.quiet = true;
  opt.clip_norm = 0.5;
  const LrSchedule sched{"cosine", 0.3f, 3, 20, 0.0f};
  Quadratic a, b;
  Adam adam_a({&a.w}, 0.1f), adam_b({&b.w}, 0.1f);
  std::vector<double> la, lb;
  train_loop(opt, {&a.w}, adam_a, sched, std::ref(a), [&](const StepRecord& r) { la.push_back(r.loss); });
  train_loop_accumulate(
      opt, {&b.w}, adam_b, sched, [&](int step, int) { return LossSum{b(step), 1}; },
      [&](const StepRecord& r) { lb.push_back(r.loss); });
  CHECK(la == lb);
  for (std::size_t i = 0; i < 3; ++i) CHECK(a.w.value(i) == b.w.value(i));
}

TEST_CASE("train_loop_accumulate: nothing scored, divergence in a micro-batch, bad options",
          "[train][loop][accumulate][errors]") {
  Parameter w("w", {1});
  SGD sgd({&w}, 0.1f);
  TrainOptions opt;
  opt.steps = 2;
  opt.quiet = true;
  opt.micro_batches = 3;
  // Nothing scored: loss 0, grads untouched (zero), the update is a no-op.
  w.value(0) = 2.0f;
  TrainResult r = train_loop_accumulate(opt, {&w}, sgd, LrSchedule{"constant", 0.1f},
                                        [&](int, int) { return LossSum{0.0, 0}; });
  CHECK_FALSE(r.diverged);
  CHECK(r.last_loss == 0.0);
  CHECK(w.value(0) == 2.0f);
  // A NaN in micro-batch 1 of step 1: the update diverges there and micro-batch 2 is not run.
  std::vector<std::pair<int, int>> calls;
  r = train_loop_accumulate(opt, {&w}, sgd, LrSchedule{"constant", 0.1f}, [&](int step, int m) {
    calls.emplace_back(step, m);
    if (step == 1 && m == 1) return LossSum{std::nan(""), 1};
    return linear_sum(w, {1.0f});
  });
  CHECK(r.diverged);
  CHECK(r.diverged_step == 1);
  CHECK(r.diverged_what == "loss = nan");
  CHECK(r.steps_done == 1);
  CHECK(calls == std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}});
  // Options.
  opt.micro_batches = 0;
  auto f = [&](int, int) { return LossSum{0.0, 0}; };
  CHECK_THROWS_WITH(train_loop_accumulate(opt, {&w}, sgd, LrSchedule{}, f),
                    Catch::Contains("micro_batches = 0") && Catch::Contains(">= 1"));
  opt.micro_batches = 2;
  CHECK_THROWS_WITH(train_loop(opt, {&w}, sgd, LrSchedule{}, [](int) { return 0.0; }),
                    Catch::Contains("micro_batches = 2") && Catch::Contains("train_loop_accumulate"));
  CHECK_THROWS_WITH(train_loop_accumulate(opt, {&w}, sgd, LrSchedule{}, {}),
                    Catch::Contains("loss_and_grad"));
}

namespace {

// An LSTM language model on a batch whose sequences score different numbers of positions
// (targets -100 are ignored): the case where a mean of micro-batch means is wrong.
struct LmBatch {
  static constexpr std::size_t B = 4, T = 6, V = 7;
  IndexTensor2 ids = IndexTensor2::from_shape({B, T});
  IndexTensor2 targets = IndexTensor2::from_shape({B, T});
  LmBatch() {
    Rng rng(5);
    for (auto& v : ids) v = static_cast<std::int32_t>(rng.uniform_int(V));
    for (auto& v : targets) v = static_cast<std::int32_t>(rng.uniform_int(V));
    const std::size_t scored[B] = {1, 6, 3, 2};  // positions scored per sequence
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = scored[b]; t < T; ++t) targets(b, t) = -100;
  }
};

std::unique_ptr<SequenceModel> lm_model() {
  ModelConfig c;
  c.model = "lstm";
  c.vocab_size = LmBatch::V;
  c.embedding_dim = 5;
  c.hidden_size = 6;
  c.num_layers = 2;
  c.output_size = LmBatch::V;
  Rng init(3);
  return make_model(c, init);
}

// Forward and backward of sequences [b0, b1) of the batch with `ce`; returns {loss, count}.
LossSum lm_forward_backward(SequenceModel& model, const LmBatch& batch, std::size_t b0,
                            std::size_t b1, CrossEntropyLoss& ce) {
  const std::size_t n = b1 - b0, T = LmBatch::T, V = LmBatch::V;
  IndexTensor2 ids = IndexTensor2::from_shape({n, T});
  IndexTensor1 y = IndexTensor1::from_shape({n * T});
  for (std::size_t i = 0; i < n * T; ++i) {
    ids.data()[i] = batch.ids.data()[b0 * T + i];
    y(i) = batch.targets.data()[b0 * T + i];
  }
  const Tensor3 logits = model.forward(ids);
  Tensor2 rows = Tensor2::from_shape({n * T, V});
  std::copy(logits.begin(), logits.end(), rows.begin());
  const double loss = ce.forward(rows, y);
  const Tensor2 d = ce.backward();
  Tensor3 dl = Tensor3::from_shape({n, T, V});
  std::copy(d.begin(), d.end(), dl.begin());
  model.backward(dl);
  return LossSum{loss, ce.count()};
}

}  // namespace

TEST_CASE("accumulated micro-batches give the whole batch's gradients and update", "[train][loop][accumulate]") {
  const LmBatch batch;
  TrainOptions opt;
  opt.steps = 1;
  opt.quiet = true;
  const LrSchedule sched{"constant", 0.5f};

  // The whole batch at once, mean over its 12 scored positions.
  auto whole = lm_model();
  SGD sgd_whole(whole->parameters(), 0.5f);
  CrossEntropyLoss mean_ce;  // reduction mean
  const TrainResult rw = train_loop(opt, whole->parameters(), sgd_whole, sched, [&](int) {
    return lm_forward_backward(*whole, batch, 0, LmBatch::B, mean_ce).sum;
  });

  // Micro-batches of 1 and 3 sequences (1 and 11 scored positions), then of 2, 1 and 1 (7, 3, 2),
  // each summed.
  for (const std::vector<std::size_t>& cuts :
       {std::vector<std::size_t>{0, 1, 4}, std::vector<std::size_t>{0, 2, 3, 4}}) {
    INFO(cuts.size() - 1 << " micro-batches");
    auto acc = lm_model();
    SGD sgd_acc(acc->parameters(), 0.5f);
    CrossEntropyLoss sum_ce(-100, Reduction::sum);
    TrainOptions mopt = opt;
    mopt.micro_batches = static_cast<int>(cuts.size() - 1);
    const TrainResult ra = train_loop_accumulate(
        mopt, acc->parameters(), sgd_acc, sched, [&](int, int m) {
          const auto k = static_cast<std::size_t>(m);
          return lm_forward_backward(*acc, batch, cuts[k], cuts[k + 1], sum_ce);
        });
    CHECK_THAT(ra.last_loss, WithinRel(rw.last_loss, 1e-6));
    const auto pw = whole->named_parameters(), pa = acc->named_parameters();
    REQUIRE(pw.size() == pa.size());
    for (std::size_t i = 0; i < pw.size(); ++i) {
      INFO(pw[i].key);
      double scale = 0;
      for (float g : pw[i].param->grad) scale = std::max(scale, static_cast<double>(std::abs(g)));
      REQUIRE(scale > 0);  // every parameter gets a gradient: the comparison is not vacuous
      for (std::size_t j = 0; j < pw[i].param->size(); ++j) {
        REQUIRE_THAT(pa[i].param->grad.data()[j], WithinAbs(pw[i].param->grad.data()[j], 1e-6 * scale + 1e-9));
        REQUIRE_THAT(pa[i].param->value.data()[j], WithinAbs(pw[i].param->value.data()[j], 1e-6));
      }
    }
  }

  // The mean of micro-batch means (what a loop without the counts would do) differs: the test
  // above can tell the two apart.
  auto naive = lm_model();
  CrossEntropyLoss ce;
  const double m0 = lm_forward_backward(*naive, batch, 0, 1, ce).sum;
  const double m1 = lm_forward_backward(*naive, batch, 1, 4, ce).sum;
  CHECK(std::abs(0.5 * (m0 + m1) - rw.last_loss) > 1e-3);
}
