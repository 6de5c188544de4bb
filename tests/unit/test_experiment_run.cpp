// run_experiment end to end, in process, on a toy experiment: config files and overrides,
// resume and --force, partial runs and --merge, bad input (exit 2, nothing written), runtime
// failures (exit 1), metadata.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "seqlab/experiment/experiment.hpp"
#include "seqlab/experiment/io.hpp"

using namespace seqlab::experiment;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/seqlab_exp_run_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

int g_calls = 0;  // run_cell invocations

ExperimentSpec toy_spec(const fs::path& experiment_dir = {}) {
  ExperimentSpec spec;
  spec.name = "toy";
  spec.description = "A toy experiment for the framework's tests.";
  spec.experiment_dir = experiment_dir.string();
  spec.options = {int_sweep("n", {1, 2, 3}, "tokens", "a size").at_least(1),
                  real_option("x", 0.5, "1", "a factor").at_least(0),
                  int_option("fail_at", 0, "1", "n whose cell throws (0: none)").at_least(0),
                  string_option("mode", "a", "a mode").one_of({"a", "b"})};
  spec.default_seeds = 2;
  spec.timing_columns = {"time_s"};
  spec.validate = [](const Cell& c) {
    if (c.get_string("mode") == "b" && c.get_int("n") > 2)
      throw ConfigError("mode: invalid value 'b': needs n <= 2");
  };
  spec.run_cell = [](const Cell& c, CellOutput& out) {
    ++g_calls;
    const auto n = c.get_int("n");
    if (n == c.get_int("fail_at")) throw std::runtime_error("boom");
    Row id;
    id.add("experiment", "toy").add("n", n).add("seed", c.replicate);
    out.add_row(Row(id).add("derived_seed", c.seed).add("value", c.get_real("x") * n).add("time_s", 0.0));
    for (int s = 1; s <= 2; ++s) out.add_row(Row(id).add("step", s).add("loss", 1.0 / s), "curve");
  };
  return spec;
}

struct Result {
  int code;
  std::string out, err;
};

// Runs run_experiment with `args` (argv[0] added), capturing std::cout and std::cerr.
Result run(const ExperimentSpec& spec, std::vector<std::string> args) {
  args.insert(args.begin(), "toy");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  auto* old_out = std::cout.rdbuf(out.rdbuf());
  auto* old_err = std::cerr.rdbuf(err.rdbuf());
  const int code = run_experiment(static_cast<int>(argv.size()), argv.data(), spec);
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  return {code, out.str(), err.str()};
}

std::string slurp(const fs::path& p) { return read_text_file(p.string()).value_or("<missing>"); }

std::size_t count_lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

fs::path write_ini(const fs::path& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir / name) << text;
  return dir / name;
}

}  // namespace

TEST_CASE("a full run writes every cell then merges in grid order", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "# toy\nn = 2,1\nx = 1.5\nseeds = 2\n");
  const fs::path out = d.path / "res";
  g_calls = 0;
  const auto r = run(toy_spec(), {"--config", ini.string(), "--out", out.string(), "--quiet",
                                  "--x=2", "--seed=11"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());  // --quiet
  CHECK(g_calls == 4);
  const std::string csv = slurp(out / "toy.csv");
  CHECK(csv.rfind("experiment,n,seed,derived_seed,value,time_s\n", 0) == 0);
  // n listed as 2,1 in the file: that order; x = 2 from the command line wins over 1.5.
  std::istringstream lines(csv);
  std::string header, l0, l1, l2, l3;
  std::getline(lines, header);
  std::getline(lines, l0);
  std::getline(lines, l1);
  std::getline(lines, l2);
  std::getline(lines, l3);
  CHECK(l0 == "toy,2,0," + std::to_string(seqlab::derive_seed(11, 0)) + ",4,0");
  CHECK(l1 == "toy,2,1," + std::to_string(seqlab::derive_seed(11, 1)) + ",4,0");
  CHECK(l2.rfind("toy,1,0,", 0) == 0);
  CHECK(l3.rfind("toy,1,1,", 0) == 0);
  CHECK(count_lines(csv) == 5);
  const std::string curve = slurp(out / "toy_curve.csv");
  CHECK(curve.rfind("experiment,n,seed,step,loss\ntoy,2,0,1,1\ntoy,2,0,2,0.5\n", 0) == 0);
  CHECK(count_lines(curve) == 9);

  const auto meta = nlohmann::json::parse(slurp(out / "toy.meta.json"));
  CHECK(meta.at("experiment") == "toy");
  CHECK(meta.at("cells_count") == 4);
  CHECK(meta.at("config").at("x") == 2.0);
  CHECK(meta.at("config").at("n") == nlohmann::json::array({2, 1}));
  CHECK(meta.at("config").at("seed") == 11);
  CHECK(meta.at("config").at("seeds") == 2);
  CHECK(meta.at("config").at("threads") == 1);
  CHECK(meta.at("config").at("mode") == "a");
  CHECK(meta.at("nondeterministic_columns") == nlohmann::json::array({"time_s"}));
  for (const char* k : {"seqlab_version", "git", "build", "blas", "machine", "start_utc",
                        "end_utc", "command_line", "tables", "cells"}) {
    INFO(k);
    CHECK(meta.contains(k));
  }
  CHECK(meta.at("git").contains("commit"));
  CHECK(meta.at("git").contains("dirty"));
  CHECK(meta.at("machine").at("cores").get<int>() >= 1);
  CHECK(meta.at("build").at("build_type").get<std::string>().size() > 0);
  CHECK(meta.at("tables").at("curve").at("file") == "toy_curve.csv");
  CHECK(meta.at("cells").size() == 4);
  CHECK_THAT(meta.at("command_line").get<std::string>(), Catch::Contains("--x=2"));

  // No temporary files anywhere.
  for (const auto& e : fs::recursive_directory_iterator(out)) {
    INFO(e.path());
    CHECK(e.path().extension() != ".tmp");
  }
}

TEST_CASE("finished cells are skipped and force recomputes them", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2\n");
  const std::vector<std::string> base = {"--config", ini.string(), "--out",
                                         (d.path / "res").string()};
  g_calls = 0;
  REQUIRE(run(toy_spec(), base).code == 0);
  CHECK(g_calls == 4);
  const std::string first = slurp(d.path / "res" / "toy.csv");
  g_calls = 0;
  const auto again = run(toy_spec(), base);
  REQUIRE(again.code == 0);
  CHECK(g_calls == 0);
  CHECK_THAT(again.err, Catch::Contains("already done, skipped"));
  CHECK(slurp(d.path / "res" / "toy.csv") == first);
  auto forced = base;
  forced.push_back("--force");
  g_calls = 0;
  REQUIRE(run(toy_spec(), forced).code == 0);
  CHECK(g_calls == 4);
  // A grid extended with another value and another replicate reuses the cells it has.
  auto extended = base;
  extended.push_back("--n=1,2,3");
  extended.push_back("--seeds=3");
  g_calls = 0;
  REQUIRE(run(toy_spec(), extended).code == 0);
  CHECK(g_calls == 9 - 4);
  // A changed non-sweep value is another result: recomputed.
  auto changed = base;
  changed.push_back("--x=0.75");
  g_calls = 0;
  REQUIRE(run(toy_spec(), changed).code == 0);
  CHECK(g_calls == 4);
}

TEST_CASE("partial runs merge only when every cell is done", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2,3\nseeds = 1\n");
  const std::string out = (d.path / "res").string();
  g_calls = 0;
  REQUIRE(run(toy_spec(), {"--config", ini.string(), "--out", out, "--cell", "1"}).code == 0);
  CHECK(g_calls == 1);
  CHECK_FALSE(fs::exists(fs::path(out) / "toy.csv"));
  const auto m = run(toy_spec(), {"--config", ini.string(), "--out", out, "--merge"});
  CHECK(m.code == 1);
  CHECK_THAT(m.err, Catch::Contains("2 of 3 cells are not done: 0, 2") &&
                        Catch::Contains("n=1 seed=0"));
  CHECK(count_lines(m.err) == 1);
  CHECK_FALSE(fs::exists(fs::path(out) / "toy.csv"));
  CHECK_FALSE(fs::exists(fs::path(out) / "toy.meta.json"));
  REQUIRE(run(toy_spec(), {"--config", ini.string(), "--out", out, "--cells", "0-2"}).code == 0);
  CHECK(g_calls == 3);
  CHECK_FALSE(fs::exists(fs::path(out) / "toy.csv"));  // --cells without --merge: no merge
  g_calls = 0;
  REQUIRE(run(toy_spec(), {"--config", ini.string(), "--out", out, "--merge"}).code == 0);
  CHECK(g_calls == 0);
  CHECK(count_lines(slurp(fs::path(out) / "toy.csv")) == 4);
}

TEST_CASE("bad input exits 2 with one message and writes nothing", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2\n");
  const auto bad_ini = write_ini(d.path, "bad.ini", "n = 1\nfoo = 3\n");
  std::ofstream(d.path / "file.txt") << "x";
  const std::string out = (d.path / "res").string();
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> expect;  // substrings of the message
  };
  const std::vector<Case> cases = {
      {{"--foo=1"}, {"unknown key '--foo'", "allowed keys are n, x, fail_at, mode, seeds, seed"}},
      {{"--n=abc"}, {"n: invalid value 'abc'", "integers >= 1"}},
      {{"--n=1,-2"}, {"n: invalid value '1,-2'", "'-2' is out of range"}},
      {{"--n=0"}, {"n: invalid value '0'"}},
      {{"--n="}, {"n: invalid value ''", "empty list"}},
      {{"--x=-1"}, {"x: invalid value '-1'", "a real >= 0"}},
      {{"--seeds=0"}, {"seeds: invalid value '0'", ">= 1"}},
      {{"--seed=-5"}, {"seed: invalid value '-5'"}},
      {{"--threads=0"}, {"threads: invalid value '0'"}},
      {{"--mode=c"}, {"mode: invalid value 'c'", "one of a|b"}},
      {{"--mode=b", "--n=1,3"}, {"mode: invalid value 'b'", "n <= 2"}},
      {{"--cell=4"}, {"--cell: invalid value '4'", "[0, 3]"}},
      {{"--cells=3-1"}, {"--cells: invalid value '3-1'"}},
      {{"--cell=1", "--cells=0-1"}, {"--cell and --cells"}},
      {{"--out", (d.path / "file.txt" / "res").string()}, {"--out", "file.txt", "not a directory"}},
      {{"--lr=3"}, {"unknown key '--lr'"}},
      {{"--n=1", "--n=2"}, {"'--n'"}},
      {{"stray"}, {"unexpected argument 'stray'"}},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"--config", ini.string()};
    if (c.args.front() != "--out") args.insert(args.end(), {"--out", out});
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = run(toy_spec(), args);
    INFO(c.args.front() << " -> " << r.err);
    CHECK(r.code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.rfind("toy: error: ", 0) == 0);
    for (const auto& e : c.expect) CHECK_THAT(r.err, Catch::Contains(e));
    CHECK(r.out.empty());
    CHECK_FALSE(fs::exists(out));
  }
  // Config-file problems.
  auto r = run(toy_spec(), {"--config", (d.path / "none.ini").string(), "--out", out});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--config") && Catch::Contains("none.ini"));
  r = run(toy_spec(), {"--config", bad_ini.string(), "--out", out});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown key 'foo'") && Catch::Contains("bad.ini"));
  r = run(toy_spec(), {"--config", ini.string(), "--scale", "quick", "--out", out});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--config and --scale"));
  r = run(toy_spec(), {"--out", out});  // default --scale quick, no experiment dir
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--scale: invalid value 'quick'") &&
                        Catch::Contains("--config FILE.ini"));
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("scale configs come from the experiment directory", "[experiment][run]") {
  TempDir d;
  fs::create_directories(d.path / "exp" / "configs");
  write_ini(d.path / "exp" / "configs", "quick.ini", "n = 1\nseeds = 1\n");
  write_ini(d.path / "exp" / "configs", "paper.ini", "n = 1,2,3\nseeds = 5\n");
  const auto spec = toy_spec(d.path / "exp");
  auto r = run(spec, {"--list-cells"});
  CHECK(r.code == 0);
  CHECK(r.out == "0 n=1 seed=0\n");
  r = run(spec, {"--list-cells", "--scale", "paper"});
  CHECK(r.code == 0);
  CHECK(count_lines(r.out) == 15);
  CHECK(r.out.rfind("0 n=1 seed=0\n1 n=1 seed=1\n", 0) == 0);
  r = run(spec, {"--list-cells", "--scale", "huge"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--scale: invalid value 'huge'") &&
                        Catch::Contains("expected one of paper|quick"));
  r = run(spec, {"--help"});
  CHECK(r.code == 0);
  for (const char* k : {"--n=LIST", "[tokens] default 1,2,3 (sweep)", "--x=VALUE", "--seeds",
                        "--seed", "--cells A-B", "--merge", "--force", "--threads", "--out DIR",
                        "--list-cells", "one of a|b", "A toy experiment"}) {
    INFO(k);
    CHECK_THAT(r.out, Catch::Contains(k));
  }
  // --list-cells writes nothing, whatever --out says.
  r = run(spec, {"--list-cells", "--out", (d.path / "never").string()});
  CHECK(r.code == 0);
  CHECK_FALSE(fs::exists(d.path / "never"));
}

TEST_CASE("a cell that throws is a runtime failure and the others still run", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2,3\nseeds = 1\nfail_at = 2\n");
  const fs::path out = d.path / "res";
  g_calls = 0;
  const auto r = run(toy_spec(), {"--config", ini.string(), "--out", out.string(), "--quiet"});
  CHECK(r.code == 1);
  CHECK(g_calls == 3);
  CHECK_THAT(r.err, Catch::Contains("cell 1/3 (n=2 seed=0) failed: boom"));
  CHECK_FALSE(fs::exists(out / "toy.csv"));
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(out / "cells")) files += e.path().extension() == ".json";
  CHECK(files == 2);
}
