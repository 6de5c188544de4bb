// experiments/custom_example: the binary at tiny scale (configs/tiny.ini) — bad input exits 2
// naming the key and writes nothing, --help lists the encoding the example registers, the CSV has
// every column and the expected rows, and a rerun is byte-identical — and the example's new
// positional encoding "ramp" itself: registered by its one SEQLAB_REGISTER line (this test
// compiles ramp_encoding.cpp into its own process, as the experiment binary does), usable through
// the registry by the models and count_parameters, and its backward passes the finite-difference
// gradient check.
#include <catch2/catch.hpp>
#include "cli.hpp"
#include "gradcheck.hpp"
#include "temp_dir.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "seqlab/models/factory.hpp"
#include "seqlab/models/positional_registry.hpp"
#include "seqlab/models/transformer_model.hpp"

// The example's encoding and its registration line, compiled into this test (a .cpp of the
// executable, as in the experiment binary).
#include "../../experiments/custom_example/ramp_encoding.cpp"

namespace fs = std::filesystem;
using namespace seqlab;
using namespace seqlab::test::cli;

namespace {

const std::string kBinary = SEQLAB_EXPERIMENTS_BIN_DIR "/custom_example";
const std::string kTiny = SEQLAB_SOURCE_DIR "/experiments/custom_example/configs/tiny.ini";

// Runs the binary with `args` to completion; stdout/stderr go to files in `io_dir`.
Run run(const std::vector<std::string>& args, const fs::path& io_dir) {
  return seqlab::test::cli::run(kBinary, args, io_dir);
}

const std::vector<std::string> kColumns = {
    "experiment", "model", "positional_encoding", "seed", "seq_len", "steps", "n_params",
    "train_loss", "test_loss", "test_accuracy", "baseline_accuracy", "diverged", "diverged_step"};

ModelConfig ramp_model() {
  ModelConfig c;
  c.model = "transformer_decoder";
  c.vocab_size = 5;
  c.embedding_dim = c.hidden_size = 4;
  c.n_heads = 2;
  c.d_ff = 6;
  c.num_layers = 1;
  c.output_size = 5;
  c.positional_encoding = "ramp";
  c.max_len = 6;
  return c;
}

}  // namespace

TEST_CASE("custom_example rejects bad input with exit 2 and writes nothing", "[integration][custom_example]") {
  REQUIRE(fs::exists(kBinary));
  seqlab::test::TempDir d("seqlab_custom_example_cli");
  const fs::path out = d.path / "res";
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      // An unregistered encoding: the message lists the registered ones, ramp included.
      {{"--positional_encoding=xpos"}, {"positional_encoding", "'xpos'", "sinusoidal", "ramp"}},
      // The task's constructor (through the task registry) rejects lag >= seq_len.
      {{"--lag=8"}, {"lag", "8"}},
      // ModelConfig::validate: 2 heads do not divide d_model = 7.
      {{"--d_model=7"}, {"n_heads", "hidden_size"}},
      {{"--warmup_steps=21"}, {"warmup_steps", "'21'", "<= steps"}},
      {{"--steps=abc"}, {"steps", "'abc'"}},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"--config=" + kTiny, "--out=" + out.string()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    INFO(c.args[0]);
    const Run r = run(args, d.path);
    CHECK(r.code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // one line
    for (const auto& e : c.expect) CHECK_THAT(r.err, Catch::Contains(e));
    CHECK_FALSE(fs::exists(out));
  }
  const Run help = run({"--help"}, d.path);
  CHECK(help.code == 0);
  CHECK_THAT(help.out, Catch::Contains("sinusoidal|learned|rope|rope_pi|rope_ntk|alibi|none|t5_bias|ramp"));
}

TEST_CASE("custom_example at tiny scale writes every column and reruns byte-identically", "[integration][custom_example]") {
  REQUIRE(fs::exists(kBinary));
  seqlab::test::TempDir d("seqlab_custom_example_cli");
  const fs::path a = d.path / "a", b = d.path / "b";
  const Run ra = run({"--config=" + kTiny, "--out=" + a.string(), "--quiet"}, d.path);
  REQUIRE(ra.code == 0);
  const std::string csv = slurp(a / "custom_example.csv");
  const auto rows = split_csv(csv);
  REQUIRE(rows.size() == 1 + 4);  // header + (none, ramp) x 2 seeds
  CHECK(rows[0] == kColumns);
  CHECK(fs::exists(a / "custom_example.meta.json"));
  std::vector<std::string> encodings;
  long n_none = -1, n_ramp = -1;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& r = rows[i];
    REQUIRE(r.size() == kColumns.size());
    CHECK(r[0] == "custom_example");
    CHECK(r[1] == "transformer_decoder");
    encodings.push_back(r[2]);
    CHECK(r[4] == "8");   // seq_len
    CHECK(r[5] == "20");  // steps
    (r[2] == "none" ? n_none : n_ramp) = std::stol(r[6]);
    const double acc = std::stod(r[9]);
    CHECK(acc >= 0.0);
    CHECK(acc <= 1.0);
    CHECK(std::isfinite(std::stod(r[8])));
    CHECK(r[10] == "0.25");  // chance = 1 / vocab_size
    CHECK(r[11] == "0");
    CHECK(r[12] == "-1");
  }
  CHECK(encodings == std::vector<std::string>{"none", "none", "ramp", "ramp"});
  CHECK(n_ramp - n_none == 8);  // ramp adds its direction, d_model = 8 parameters

  // Same seed and threads: the same bytes (a fresh directory, and --force over the old one).
  REQUIRE(run({"--config=" + kTiny, "--out=" + b.string(), "--quiet"}, d.path).code == 0);
  CHECK(slurp(b / "custom_example.csv") == csv);
  REQUIRE(run({"--config=" + kTiny, "--out=" + a.string(), "--quiet", "--force"}, d.path).code == 0);
  CHECK(slurp(a / "custom_example.csv") == csv);
}

TEST_CASE("an experiment binary runs OpenBLAS's AVX2 or AVX-512 kernels on a CPU that has them",
          "[integration][custom_example][blas]") {
  // OpenBLAS 0.3.21 falls back to its Prescott (SSE3) kernels on CPU models it does not know;
  // the binary then runs again with OPENBLAS_CORETYPE set (ensure_blas_kernels), and meta.json's
  // blas config names the kernels that ran.
  seqlab::test::TempDir d("seqlab_custom_example_blas");
  ::unsetenv("OPENBLAS_CORETYPE");
  const Run r = run({"--config=" + kTiny, "--out=" + (d.path / "a").string(), "--quiet", "--seeds=1"}, d.path);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string meta = slurp(d.path / "a" / "custom_example.meta.json");
  const auto at = meta.find("\"config\": \"OpenBLAS");
  REQUIRE(at != std::string::npos);
  const std::string config = meta.substr(at, meta.find('\n', at) - at);
  INFO(config);
  CHECK(config.find("DYNAMIC_ARCH") != std::string::npos);
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    CHECK(config.find(" Prescott ") == std::string::npos);
    CHECK(config.find(" Core2 ") == std::string::npos);
  }
}

TEST_CASE("ramp registers with one line and works through the registry", "[integration][custom_example][registry]") {
  const auto& names = positional_encoding_names();
  REQUIRE(std::find(names.begin(), names.end(), "ramp") != names.end());
  CHECK(names.back() == "ramp");  // after the built-ins
  const ModelConfig c = ramp_model();
  c.validate();
  ModelConfig no_len = c;
  no_len.max_len = 0;
  CHECK_THROWS_AS(no_len.validate(), ConfigError);  // the entry's validate: max_len >= 1

  Rng rng(3);
  const auto model = make_model(c, rng);
  auto* tm = dynamic_cast<TransformerModel*>(model.get());
  REQUIRE(tm != nullptr);
  REQUIRE(dynamic_cast<custom_example::RampEncoding*>(tm->positional.get()) != nullptr);
  const auto keys = model->named_parameters();
  CHECK(keys[1].key == "transformer_decoder.pos_embedding.weight");
  CHECK(model->num_parameters() == count_parameters(c));
  ModelConfig none = c;
  none.positional_encoding = "none";
  CHECK(count_parameters(c) == count_parameters(none) + c.hidden_size);
  // Budget matching steps d_model by n_heads (ramp has no width constraint).
  const ModelConfig sized = hidden_size_for_budget(c, 2000, 2.0);
  CHECK(sized.hidden_size % 2 == 0);
  CHECK(count_parameters(sized) <= 2000);

  // Positions beyond max_len extrapolate (no length limit): a forward of T = 9 > max_len = 6.
  IndexTensor2 ids = xt::zeros<std::int32_t>({2, 9});
  CHECK(model->forward(ids).shape()[1] == 9);
}

TEST_CASE("RampEncoding adds position times the direction", "[integration][custom_example][ramp]") {
  Rng rng(5);
  custom_example::RampEncoding enc(3, 4, rng);
  enc.weight.value = xt::xarray<float>({1.0f, -2.0f, 0.5f});
  const Tensor3 x = xt::zeros<float>({1, 3, 3});
  const Tensor3 y = enc.forward(x, 2);  // positions 2, 3, 4 over L = 4
  CHECK(y(0, 0, 0) == Approx(0.5f));
  CHECK(y(0, 1, 1) == Approx(-1.5f));
  CHECK(y(0, 2, 2) == Approx(0.5f));
  CHECK_THROWS_AS(enc.forward(Tensor3(xt::zeros<float>({1, 3, 2}))), ShapeError);
  custom_example::RampEncoding fresh(3, 4, rng);
  CHECK_THROWS_AS(fresh.backward(x), std::logic_error);
  CHECK_THROWS_AS(custom_example::RampEncoding(0, 4, rng), std::invalid_argument);
  CHECK_THROWS_AS(custom_example::RampEncoding(3, 0, rng), std::invalid_argument);
  std::vector<NamedParameter> ps;
  enc.collect_parameters("pos.", ps);
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].key == "pos.weight");
}

TEST_CASE("RampEncoding gradients match finite differences", "[integration][custom_example][ramp][gradcheck]") {
  Rng rng(11);
  custom_example::RampEncoding enc(5, 7, rng);
  Tensor3 x = xt::zeros<float>({2, 4, 5});
  rng.fill_normal(x, 0.0f, 1.0f);
  Tensor3 dx = xt::zeros<float>({2, 4, 5});
  const std::size_t offset = 3;
  auto forward = [&]() {
    const Tensor3 y = enc.forward(x, offset);
    return std::vector<float>(y.begin(), y.end());
  };
  auto backward = [&](const std::vector<float>& dy) {
    enc.zero_grad();
    enc.forward(x, offset);
    Tensor3 g = xt::zeros<float>({2, 4, 5});
    std::copy(dy.begin(), dy.end(), g.begin());
    const Tensor3 d = enc.backward(g);
    std::copy(d.begin(), d.end(), dx.begin());  // dx's buffer stays where the probe looks
  };
  const auto res = seqlab::test::check_gradients(
      forward, backward,
      {{"x", x.data(), dx.data(), x.size()},
       {"weight", enc.weight.value.data(), enc.weight.grad.data(), enc.weight.value.size()}});
  INFO(res.worst << "\n" << res.report);
  REQUIRE(res.ok);
  CHECK(res.checked == x.size() + 5);

  // backward adds into weight.grad: Σ_{b,t} 1 · (offset + t) / L = 2 · (3 + 4 + 5 + 6) / 7.
  const xt::xarray<float> g1 = enc.weight.grad;
  enc.forward(x, offset);
  enc.backward(Tensor3(xt::ones<float>({2, 4, 5})));
  CHECK(enc.weight.grad(2) == Approx(g1(2) + 2.0f * 18.0f / 7.0f).margin(1e-5));
}
