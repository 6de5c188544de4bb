// run_experiment end to end, in process, on a toy experiment: config files and overrides,
// resume and --force, partial runs and --merge, bad input (exit 2, nothing written), runtime
// failures (exit 1: a throwing cell, out of memory, unwritable stdout), metadata, verification of
// stored cells (checksum, declared tables, sweep-key values), declared tables always written,
// removal of stale temporary files.
#include <catch2/catch.hpp>
#include "temp_dir.hpp"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <new>
#include <fstream>
#include <iostream>
#include <sstream>

#include "seqlab/experiment/experiment.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/experiment/io.hpp"

using namespace seqlab::experiment;
namespace fs = std::filesystem;

namespace {
struct TempDir : seqlab::test::TempDir {
  TempDir() : seqlab::test::TempDir("seqlab_exp_run") {}
};

int g_calls = 0;  // run_cell invocations

ExperimentSpec toy_spec(const fs::path& experiment_dir = {}) {
  ExperimentSpec spec;
  spec.name = "toy";
  spec.description = "A toy experiment for the framework's tests.";
  spec.experiment_dir = experiment_dir.string();
  spec.options = {int_sweep("n", {1, 2, 3}, "tokens", "a size").at_least(1).at_most(1000),
                  real_option("x", 0.5, "1", "a factor").at_least(0),
                  int_option("fail_at", 0, "1", "n whose cell throws (0: none)").at_least(0).at_most(1000),
                  string_option("mode", "a", "a mode").one_of({"a", "b"}),
                  int_option("oom_at", 0, "1", "n whose cell throws std::bad_alloc (0: none)")
                      .at_least(0)
                      .at_most(1000),
                  int_option("curve_rows", 2, "rows", "rows of the curve table").at_least(0).at_most(10)};
  spec.tables = {{kMainTable, {"experiment", "n", "seed", "derived_seed", "value", "time_s"}},
                 {"curve", {"experiment", "n", "seed", "step", "loss"}}};
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
    if (n == c.get_int("oom_at")) throw std::bad_alloc();
    Row id;
    id.add("experiment", "toy").add("n", n).add("seed", c.replicate);
    out.add_row(Row(id).add("derived_seed", c.seed).add("value", c.get_real("x") * n).add("time_s", 0.0));
    for (int s = 1; s <= c.get_int32("curve_rows"); ++s)
      out.add_row(Row(id).add("step", s).add("loss", 1.0 / s), "curve");
  };
  return spec;
}

struct Result {
  int code;
  std::string out, err;
};

// A stream buffer whose every write fails, like a full disk or /dev/full.
struct FullBuf : std::streambuf {
  int overflow(int) override { return traits_type::eof(); }
};

// Runs run_experiment with `args` (argv[0] added), capturing std::cout and std::cerr; with
// `full_stdout`, writes to std::cout fail instead.
Result run(const ExperimentSpec& spec, std::vector<std::string> args, bool full_stdout = false) {
  args.insert(args.begin(), "toy");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  FullBuf full;
  auto* old_out = std::cout.rdbuf(full_stdout ? static_cast<std::streambuf*>(&full) : out.rdbuf());
  auto* old_err = std::cerr.rdbuf(err.rdbuf());
  const int code = run_experiment(static_cast<int>(argv.size()), argv.data(), spec);
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  std::cout.clear();
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

TEST_CASE("a declared cross-key bound is checked for every cell before anything runs", "[experiment][run][options]") {
  TempDir d;
  ExperimentSpec spec = toy_spec();
  spec.options.push_back(int_sweep("steps", {100, 300}, "updates", "updates").at_least(0).at_most(1000));
  spec.options.push_back(
      int_option("warmup_steps", 200, "updates", "warm-up").at_least(0).at_most(1000).at_most_key("steps"));
  const fs::path out = d.path / "res";
  const auto ini = write_ini(d.path, "c.ini", "n = 1\n").string();
  g_calls = 0;
  const auto r = run(spec, {"--config", ini, "--out", out.string(), "--quiet"});
  CHECK(r.code == 2);
  CHECK(r.err == "toy: error: warmup_steps: invalid value '200': expected an integer <= steps (100)\n");
  CHECK(g_calls == 0);
  CHECK_FALSE(fs::exists(out));
  const auto ok = run(spec, {"--config", ini, "--out", out.string(), "--quiet", "--warmup_steps=100",
                             "--list-cells"});
  CHECK(ok.code == 0);

  ExperimentSpec bad = toy_spec();
  bad.options.push_back(int_option("w", 1, "1", "w").at_least(0).at_most(9).at_most_key("nonexistent"));
  const auto b = run(bad, {"--config", ini, "--list-cells"});
  CHECK(b.code == 1);
  CHECK_THAT(b.err, Catch::Contains("must be another numeric key"));
}

TEST_CASE("a cross-key bound on a list of numbers is checked for every element", "[experiment][run][options]") {
  TempDir d;
  ExperimentSpec spec = toy_spec();
  spec.options.push_back(int_option("steps", 100, "updates", "updates").at_least(0).at_most(1000));
  spec.options.push_back(
      int_list_option("warmups", "0 50", "updates", "warm-ups").at_least(0).at_most(1000).at_most_key("steps"));
  spec.options.push_back(
      real_list_option("fractions", "0.5", "1", "fractions").at_least(0).at_most(1000).at_most_key("steps"));
  const fs::path out = d.path / "res";
  const auto ini = write_ini(d.path, "c.ini", "n = 1\n").string();
  g_calls = 0;
  const auto r = run(spec, {"--config", ini, "--out", out.string(), "--quiet", "--warmups=0 100 250"});
  CHECK(r.code == 2);
  CHECK(r.err == "toy: error: warmups: invalid value '0 100 250': '250' is out of range; expected a "
                 "space-separated list of integers <= steps (100)\n");
  const auto f = run(spec, {"--config", ini, "--out", out.string(), "--quiet", "--fractions=1 100.5"});
  CHECK(f.code == 2);
  CHECK(f.err == "toy: error: fractions: invalid value '1 100.5': '100.5' is out of range; expected a "
                 "space-separated list of reals <= steps (100)\n");
  CHECK(g_calls == 0);
  CHECK_FALSE(fs::exists(out));
  const auto ok = run(spec, {"--config", ini, "--out", out.string(), "--quiet", "--warmups=0 100",
                             "--fractions=100", "--list-cells"});
  CHECK(ok.code == 0);

  ExperimentSpec bad = toy_spec();
  bad.options.push_back(int_list_option("ws", "1", "1", "w").at_least(0).at_most(9).at_most_key("ws2"));
  bad.options.push_back(int_list_option("ws2", "1", "1", "w").at_least(0).at_most(9));
  const auto b = run(bad, {"--config", ini, "--list-cells"});
  CHECK(b.code == 1);  // bounded by a list: not a numeric key
  CHECK_THAT(b.err, Catch::Contains("must be another numeric key"));
}

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
  // Each cell names the machine that ran it: its host and CPU model, as the merging machine's.
  for (const auto& c : meta.at("cells")) {
    CHECK(c.at("host") == meta.at("machine").at("host"));
    CHECK(c.at("cpu_model") == meta.at("machine").at("cpu_model"));
  }
  CHECK_THAT(meta.at("command_line").get<std::string>(), Catch::Contains("--x=2"));

  // No temporary files anywhere.
  for (const auto& e : fs::recursive_directory_iterator(out)) {
    INFO(e.path());
    CHECK(e.path().extension() != ".tmp");
  }
}

TEST_CASE("keep drops grid points: the kept cells are renumbered, run and merged with their own seeds", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2,3\nmode = a,b\nseeds = 2\n");
  ExperimentSpec spec = toy_spec();
  spec.options[3] = string_sweep("mode", {"a"}, "a mode").one_of({"a", "b"});
  spec.validate = nullptr;
  // A design that is not a product: mode b only at n = 2 (the validate of toy_spec would reject
  // n = 3 with mode b, so dropped points must not be validated either).
  spec.keep = [](const Cell& c) { return c.get_string("mode") == "a" || c.get_int("n") == 2; };
  spec.validate = [](const Cell& c) {
    if (c.get_string("mode") == "b" && c.get_int("n") != 2) throw ConfigError("mode: dropped point validated");
  };
  const auto list = run(spec, {"--config", ini.string(), "--list-cells"});
  INFO(list.err);
  REQUIRE(list.code == 0);
  CHECK(list.out ==
        "0 n=1 mode=a seed=0\n1 n=1 mode=a seed=1\n2 n=2 mode=a seed=0\n3 n=2 mode=a seed=1\n"
        "4 n=2 mode=b seed=0\n5 n=2 mode=b seed=1\n6 n=3 mode=a seed=0\n7 n=3 mode=a seed=1\n");
  const fs::path out = d.path / "res";
  g_calls = 0;
  const auto one = run(spec, {"--config", ini.string(), "--out", out.string(), "--quiet", "--cell", "5"});
  REQUIRE(one.code == 0);
  CHECK(g_calls == 1);
  const auto all = run(spec, {"--config", ini.string(), "--out", out.string(), "--quiet"});
  INFO(all.err);
  REQUIRE(all.code == 0);
  CHECK(g_calls == 8);  // the one done is skipped
  const std::string csv = slurp(out / "toy.csv");
  CHECK(count_lines(csv) == 9);
  // Seeds follow the replicate, as in the full grid.
  CHECK_THAT(csv, Catch::Contains("toy,2,1," + std::to_string(seqlab::derive_seed(1, 1)) + ","));
  const auto meta = nlohmann::json::parse(slurp(out / "toy.meta.json"));
  CHECK(meta.at("cells_count") == 8);
  const auto cell9 = run(spec, {"--config", ini.string(), "--cell", "8", "--out", out.string()});
  CHECK(cell9.code == 2);  // out of the kept range

  spec.keep = [](const Cell&) { return false; };
  const auto none = run(spec, {"--config", ini.string(), "--list-cells"});
  CHECK(none.code == 2);
  CHECK_THAT(none.err, Catch::Contains("the grid has no cells"));
}

TEST_CASE("a grid-only key selects cells without changing the fingerprints of finished ones", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2,3\nseeds = 1\n");
  ExperimentSpec spec = toy_spec();
  spec.options.push_back(int_list_option("n_run", "all", "tokens", "values of n run").empty_as("all")
                             .at_least(1).at_most(1000).selects_cells());
  spec.keep = [](const Cell& c) {
    const auto own = c.get_int_list("n_run");
    return own.empty() || std::find(own.begin(), own.end(), c.get_int("n")) != own.end();
  };
  const fs::path out = d.path / "res";
  const std::vector<std::string> base = {"--config", ini.string(), "--out", out.string(), "--quiet"};
  auto first = base;
  first.push_back("--n_run=1 2");
  g_calls = 0;
  REQUIRE(run(spec, first).code == 0);
  CHECK(g_calls == 2);
  // Widening the selection runs only the new cell: the finished two are reused as they are.
  g_calls = 0;
  const auto all = run(spec, base);
  INFO(all.err);
  REQUIRE(all.code == 0);
  CHECK(g_calls == 1);
  CHECK(count_lines(slurp(out / "toy.csv")) == 4);
  // A key the cells' results depend on is not grid-only: changing it recomputes them.
  g_calls = 0;
  auto changed = base;
  changed.push_back("--x=0.75");
  REQUIRE(run(spec, changed).code == 0);
  CHECK(g_calls == 3);
  CHECK_THROWS_AS(int_sweep("s", {1}, "1", "a sweep").selects_cells(), std::logic_error);
}

TEST_CASE("a key only some cells read is left out of the others' fingerprints", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2\nseeds = 1\n");
  ExperimentSpec spec = toy_spec();
  const fs::path out = d.path / "res";
  const std::vector<std::string> base = {"--config", ini.string(), "--out", out.string(), "--quiet"};
  g_calls = 0;
  REQUIRE(run(spec, base).code == 0);
  CHECK(g_calls == 2);
  // A key added later, read by the cells with n = 2 only: the cell n = 1 keeps its fingerprint and
  // is reused; the cell n = 2 now has the key in its fingerprint, so it runs again.
  spec.options.push_back(real_option("y", 2, "1", "a factor of n = 2").at_least(0));
  spec.unread_keys = [](const Cell& c) {
    return c.get_int("n") == 2 ? std::vector<std::string>{} : std::vector<std::string>{"y"};
  };
  g_calls = 0;
  REQUIRE(run(spec, base).code == 0);
  CHECK(g_calls == 1);
  // Changing it reruns only the cell that reads it.
  g_calls = 0;
  auto changed = base;
  changed.push_back("--y=3");
  REQUIRE(run(spec, changed).code == 0);
  CHECK(g_calls == 1);
  spec.unread_keys = [](const Cell&) { return std::vector<std::string>{"n"}; };
  const auto bad = run(spec, base);
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Contains("unread_keys names 'n', not a declared non-sweep key"));
}

TEST_CASE("resolve sets a cell's keys: it is the cell of a run with those values", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2\nseeds = 1\n");
  ExperimentSpec spec = toy_spec();
  // n2_x: the factor of the cells with n = 2 (0: x), written into their x.
  spec.options.push_back(real_option("n2_x", 0, "1", "x of the cells with n = 2; 0 = x").at_least(0));
  spec.resolve = [](Cell& c) {
    if (c.get_int("n") == 2 && c.get_real("n2_x") > 0) c.params.set("x", c.params.get("n2_x"));
  };
  spec.unread_keys = [](const Cell&) { return std::vector<std::string>{"n2_x"}; };
  const fs::path out = d.path / "res";
  const std::vector<std::string> base = {"--config", ini.string(), "--out", out.string(), "--quiet"};
  // A run of n = 2 alone with x = 0.75 ...
  auto alone = base;
  alone.insert(alone.end(), {"--n=2", "--x=0.75"});
  g_calls = 0;
  REQUIRE(run(spec, alone).code == 0);
  CHECK(g_calls == 1);
  // ... is the cell n = 2 of the run with n2_x = 0.75: reused; n = 1 runs at x = 0.5.
  auto resolved = base;
  resolved.push_back("--n2_x=0.75");
  g_calls = 0;
  const auto r = run(spec, resolved);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(g_calls == 1);
  const std::string csv = slurp(out / "toy.csv");
  CHECK_THAT(csv, Catch::Contains("toy,1,0," + std::to_string(seqlab::derive_seed(1, 0)) + ",0.5,"));
  CHECK_THAT(csv, Catch::Contains("toy,2,0," + std::to_string(seqlab::derive_seed(1, 0)) + ",1.5,"));
  // Without n2_x the cell n = 2 is the one of x = 0.5: a new cell.
  g_calls = 0;
  REQUIRE(run(spec, base).code == 0);
  CHECK(g_calls == 1);

  // What resolve may not do.
  auto listing = std::vector<std::string>{"--config", ini.string(), "--list-cells"};
  spec.resolve = [](Cell& c) { c.params.set("n", std::int64_t{5}); };
  auto bad = run(spec, listing);
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Contains("resolve changed 'n', a sweep key"));
  spec.resolve = [](Cell& c) { c.params.set("x", std::string("big")); };
  bad = run(spec, listing);
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Contains("resolve changed 'x', to a value of another type"));
  spec.resolve = [](Cell& c) { c.params.set("z", 1.0); };
  bad = run(spec, listing);
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Contains("resolve set 'z', not a declared key"));
  // A value outside its key's bounds is bad input, named as the key's.
  spec.resolve = [](Cell& c) { c.params.set("x", -1.0); };
  bad = run(spec, listing);
  CHECK(bad.code == 2);
  CHECK_THAT(bad.err, Catch::Contains("x: invalid value '-1'") && Catch::Contains("derives for the cell n=1 seed=0"));
  CHECK(bad.out.empty());
  // A cross-key bound that resolve lowered for one cell names that cell.
  spec.options.push_back(int_option("cap", 10, "1", "a bound").at_least(0).at_most(100));
  spec.options.push_back(int_option("m", 1, "1", "at most cap").at_least(0).at_most(100).at_most_key("cap"));
  spec.resolve = [](Cell& c) {
    if (c.get_int("n") == 2) c.params.set("cap", std::int64_t{0});
  };
  bad = run(spec, listing);
  CHECK(bad.code == 2);
  CHECK_THAT(bad.err, Catch::Contains("m: invalid value '1': expected an integer <= cap (0) of the cell n=2 seed=0"));
}

TEST_CASE("a cell stored before a key was declared unread is reused under its new fingerprint", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2\nseeds = 1\n");
  ExperimentSpec spec = toy_spec();
  const fs::path out = d.path / "res";
  const std::vector<std::string> base = {"--config", ini.string(), "--out", out.string(), "--quiet"};
  auto files = [&] {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(out / "cells")) n += e.path().extension() == ".json" ? 1 : 0;
    return n;
  };
  g_calls = 0;
  REQUIRE(run(spec, base).code == 0);
  CHECK(g_calls == 2);
  const std::string first_csv = slurp(out / "toy.csv");
  // The cells never read mode; declared unread now, it leaves their fingerprints, so both cell
  // files' names change. --status reports them done without writing; a run writes them again
  // under the new names and computes nothing.
  spec.unread_keys = [](const Cell&) { return std::vector<std::string>{"mode"}; };
  auto status = base;
  status.push_back("--status");
  const auto st = run(spec, status);
  CHECK(st.code == 0);
  CHECK_THAT(st.out, Catch::Contains("0 done") && Catch::Contains("1 done"));
  CHECK(files() == 2);
  g_calls = 0;
  REQUIRE(run(spec, base).code == 0);
  CHECK(g_calls == 0);
  CHECK(files() == 4);
  CHECK(slurp(out / "toy.csv") == first_csv);
  // mode no longer identifies them: changing it reruns nothing.
  auto mode_b = base;
  mode_b.push_back("--mode=b");
  REQUIRE(run(spec, mode_b).code == 0);
  CHECK(g_calls == 0);
  // A key the cells read still does: the stored results of another x are not adopted.
  auto other_x = base;
  other_x.push_back("--x=0.75");
  g_calls = 0;
  REQUIRE(run(spec, other_x).code == 0);
  CHECK(g_calls == 2);
  // A stored file under another name whose tables were edited (its checksum no longer verifies)
  // is not adopted: the cell runs again.
  const fs::path out2 = d.path / "res2";
  const std::vector<std::string> base2 = {"--config", ini.string(), "--out", out2.string(), "--quiet"};
  spec.unread_keys = nullptr;
  REQUIRE(run(spec, base2).code == 0);
  for (const auto& e : fs::directory_iterator(out2 / "cells")) {
    std::string text = slurp(e.path());
    const auto at = text.find("\"time_s\"");
    REQUIRE(at != std::string::npos);
    std::ofstream(e.path()) << text.replace(at, 8, "\"time_t\"");
  }
  spec.unread_keys = [](const Cell&) { return std::vector<std::string>{"mode"}; };
  g_calls = 0;
  REQUIRE(run(spec, base2).code == 0);
  CHECK(g_calls == 2);
}

TEST_CASE("a table's merge filter reduces the merged CSV and the cells keep every row", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2\nseeds = 2\ncurve_rows = 4\n");
  ExperimentSpec spec = toy_spec();
  spec.tables[1].merge_keep = [](const Cell& c, const std::vector<std::string>& f) {
    return c.replicate == 0 && f[3] != "2";  // replicate 0, steps other than 2
  };
  const fs::path out = d.path / "res";
  const auto r = run(spec, {"--config", ini.string(), "--out", out.string(), "--quiet"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string curve = slurp(out / "toy_curve.csv");
  CHECK(count_lines(curve) == 1 + 2 * 3);  // header + (n = 1, 2) x steps 1, 3, 4 of replicate 0
  CHECK_THAT(curve, !Catch::Contains(",2,0.5\n"));
  CHECK_THAT(curve, Catch::Contains("toy,2,0,3,"));
  CHECK_THAT(curve, !Catch::Contains("toy,2,1,"));
  CHECK(count_lines(slurp(out / "toy.csv")) == 5);  // the main table is complete
  const auto meta = nlohmann::json::parse(slurp(out / "toy.meta.json"));
  const auto& curve_meta = meta.at("tables").at("curve");
  INFO(curve_meta.dump());
  CHECK(curve_meta.at("rows") == 6);
  CHECK(curve_meta.at("rows_in_cells") == 16);
  CHECK_FALSE(meta.at("tables").at(kMainTable).contains("rows_in_cells"));
  CHECK_FALSE(curve_meta.contains("columns_in_cells_only"));
  spec.tables[0].merge_keep = [](const Cell&, const std::vector<std::string>&) { return true; };
  const auto main_filtered = run(spec, {"--config", ini.string(), "--out", out.string(), "--merge"});
  CHECK(main_filtered.code == 1);
  CHECK_THAT(main_filtered.err, Catch::Contains("main table cannot have a merge_keep filter"));
}

TEST_CASE("a table's merge_drop columns are left out of the merged CSV and the cells keep them", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2\nseeds = 2\ncurve_rows = 3\n");
  ExperimentSpec spec = toy_spec();
  spec.tables[1].merge_drop = {"step"};
  spec.tables[1].merge_keep = [](const Cell&, const std::vector<std::string>& f) {
    return f.size() == 5 && f[3] != "2";  // the filter still sees every field: steps other than 2
  };
  const fs::path out = d.path / "res";
  const auto r = run(spec, {"--config", ini.string(), "--out", out.string(), "--quiet"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string curve = slurp(out / "toy_curve.csv");
  CHECK(curve.rfind("experiment,n,seed,loss\n", 0) == 0);
  CHECK(count_lines(curve) == 1 + 2 * 2 * 2);  // header + (n = 1, 2) x seeds 0, 1 x steps 1, 3
  CHECK_THAT(curve, Catch::Contains("toy,1,0,1\n"));          // step 1: loss 1
  CHECK_THAT(curve, Catch::Contains("toy,2,1,0.333333"));      // step 3: loss 1/3
  CHECK_THAT(curve, !Catch::Contains(",0.5\n"));               // step 2 filtered out
  const auto meta = nlohmann::json::parse(slurp(out / "toy.meta.json"));
  const auto& curve_meta = meta.at("tables").at("curve");
  INFO(curve_meta.dump());
  CHECK(curve_meta.at("columns") == nlohmann::json::array({"experiment", "n", "seed", "loss"}));
  CHECK(curve_meta.at("columns_in_cells_only") == nlohmann::json::array({"step"}));
  std::size_t cells = 0;
  for (const auto& e : fs::directory_iterator(out / "cells")) {
    if (e.path().extension() != ".json") continue;
    const auto t = nlohmann::json::parse(slurp(e.path())).at("tables").at("curve");
    CHECK(t.at("columns") == nlohmann::json::array({"experiment", "n", "seed", "step", "loss"}));
    CHECK(t.at("rows").size() == 3);
    ++cells;
  }
  CHECK(cells == 4);

  spec.tables[1].merge_drop = {"no_such_column"};
  const auto unknown = run(spec, {"--config", ini.string(), "--out", out.string(), "--merge"});
  CHECK(unknown.code == 1);
  CHECK_THAT(unknown.err, Catch::Contains("merge_drop column 'no_such_column' is not one of its columns"));
  spec.tables[1].merge_drop = {};
  spec.tables[0].merge_drop = {"time_s"};
  const auto main_dropped = run(spec, {"--config", ini.string(), "--out", out.string(), "--merge"});
  CHECK(main_dropped.code == 1);
  CHECK_THAT(main_dropped.err, Catch::Contains("main table cannot have merge_drop columns"));
}

TEST_CASE("a table declared optional keeps the cells stored before it valid", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2\nseeds = 1\n");
  const fs::path out = d.path / "res";
  const std::vector<std::string> args = {"--config", ini.string(), "--out", out.string(), "--quiet"};
  REQUIRE(run(toy_spec(), args).code == 0);  // cells without the new table
  // The experiment now declares a third table: without `optional` its old cells are corrupt.
  ExperimentSpec later = toy_spec();
  later.tables.push_back({"extra", {"experiment", "n", "seed", "value"}});
  const auto strict = run(later, {"--config", ini.string(), "--out", out.string(), "--merge"});
  CHECK(strict.code == 1);
  CHECK_THAT(strict.err, Catch::Contains("table 'extra' is missing"));
  later.tables.back().optional = true;
  g_calls = 0;
  REQUIRE(run(later, args).code == 0);
  CHECK(g_calls == 0);  // both old cells are done
  CHECK(count_lines(slurp(out / "toy_extra.csv")) == 1);  // header only
  // A recomputed cell writes the table; the merge holds its rows and none of the old cell's.
  later.run_cell = [inner = later.run_cell](const Cell& c, CellOutput& o) {
    inner(c, o);
    o.add_row(Row().add("experiment", "toy").add("n", c.get_int("n")).add("seed", c.replicate).add("value", 7), "extra");
  };
  auto force_one = args;
  force_one.insert(force_one.end(), {"--cell", "1", "--force"});
  REQUIRE(run(later, force_one).code == 0);
  REQUIRE(run(later, {"--config", ini.string(), "--out", out.string(), "--merge", "--quiet"}).code == 0);
  const std::string extra = slurp(out / "toy_extra.csv");
  CHECK(count_lines(extra) == 2);
  CHECK_THAT(extra, Catch::Contains("toy,2,0,7"));
  // The main table cannot be optional.
  later.tables[0].optional = true;
  const auto main_optional = run(later, {"--config", ini.string(), "--out", out.string(), "--merge"});
  CHECK(main_optional.code == 1);
  CHECK_THAT(main_optional.err, Catch::Contains("main table cannot be optional"));
}

TEST_CASE("the run option flush-denormals runs the cells with flush-to-zero, records it in the cell file and ends the run with it off",
          "[experiment][run][denormals]") {
  TempDir d;
  std::vector<int> seen;  // per cell: whether its thread flushed subnormals
  ExperimentSpec spec = toy_spec();
  const auto inner = spec.run_cell;
  spec.run_cell = [&](const Cell& c, CellOutput& out) {
    seen.push_back(seqlab::flush_denormals() ? 1 : 0);
    inner(c, out);
  };
  const auto cell_json = [](const fs::path& res) {
    std::vector<nlohmann::json> out;
    for (const auto& e : fs::directory_iterator(res / "cells"))
      out.push_back(nlohmann::json::parse(read_text_file(e.path().string()).value()));
    return out;
  };
  REQUIRE_FALSE(seqlab::flush_denormals());
  const std::string ini = write_ini(d.path, "c.ini", "n = 1\nseeds = 2\n").string();
  const auto on = run(spec, {"--config", ini, "--out", (d.path / "on").string(), "--flush-denormals", "--quiet"});
  INFO(on.err);
  REQUIRE(on.code == 0);
  CHECK(seen == std::vector<int>{1, 1});
  CHECK_FALSE(seqlab::flush_denormals());
  for (const auto& j : cell_json(d.path / "on")) CHECK(j.value("flush_denormals", false));
  const auto meta_on = nlohmann::json::parse(slurp(d.path / "on" / "toy.meta.json"));
  for (const auto& c : meta_on.at("cells")) CHECK(c.value("flush_denormals", false));
  seen.clear();
  REQUIRE(run(spec, {"--config", ini, "--out", (d.path / "off").string(), "--quiet"}).code == 0);
  CHECK(seen == std::vector<int>{0, 0});
  for (const auto& j : cell_json(d.path / "off")) CHECK_FALSE(j.contains("flush_denormals"));
  const auto meta_off = nlohmann::json::parse(slurp(d.path / "off" / "toy.meta.json"));
  for (const auto& c : meta_off.at("cells")) CHECK_FALSE(c.contains("flush_denormals"));
  // A switch, not a key: a value is bad input.
  const auto bad = run(spec, {"--config", ini, "--out", (d.path / "bad").string(), "--flush-denormals=1"});
  CHECK(bad.code == 2);
  CHECK_FALSE(fs::exists(d.path / "bad"));
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
  fs::create_symlink(d.path / "gone" / "res", d.path / "link");
  const std::string out = (d.path / "res").string();
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> expect;  // substrings of the message
  };
  const std::vector<Case> cases = {
      {{"--foo=1"}, {"unknown key '--foo'", "allowed keys are n, x, fail_at, mode, oom_at, curve_rows, seeds, seed"}},
      {{"--n=abc"}, {"n: invalid value 'abc'", "integers in [1, 1000]"}},
      {{"--n=4294967297"}, {"n: invalid value '4294967297'", "'4294967297' is out of range"}},
      {{"--n=1,-2"}, {"n: invalid value '1,-2'", "'-2' is out of range"}},
      {{"--n=0"}, {"n: invalid value '0'"}},
      {{"--n="}, {"n: invalid value ''", "empty list"}},
      {{"--x=-1"}, {"x: invalid value '-1'", "a real in [0, 3.40282347e+38]"}},
      {{"--x=1e39"}, {"x: invalid value '1e39'", "too large for a float", "[0, 3.40282347e+38]"}},
      {{"--x=1e-60"}, {"x: invalid value '1e-60'", "rounds to 0 as a float"}},
      {{"--seeds=0"}, {"seeds: invalid value '0'", "[1, 100000]"}},
      {{"--seeds=100001"}, {"seeds: invalid value '100001'", "[1, 100000]"}},
      {{"--seeds=4611686018427387904"}, {"seeds: invalid value '4611686018427387904'", "[1, 100000]"}},
      {{"--seeds=60000"}, {"the grid has 120000 cells = n (2 values) x seeds (60000)", "at most 100000"}},
      {{"--seed=-5"}, {"seed: invalid value '-5'", "[0, 9223372036854775807]"}},
      {{"--seed=9223372036854775808"}, {"seed: invalid value '9223372036854775808'", "[0, 9223372036854775807]"}},
      {{"--threads=0"}, {"threads: invalid value '0' (from the command line): expected an integer in [1, 1024]"}},
      {{"--threads=100000"}, {"threads: invalid value '100000' (from the command line): expected an integer in [1, 1024]"}},
      {{"--out", (d.path / "link").string()}, {"--out", "dangling symbolic link"}},
      {{"--config", "/proc/self/mem"}, {"--config: cannot read '/proc/self/mem'", "Input/output error"}},
      {{"--mode=c"}, {"mode: invalid value 'c'", "one of a|b"}},
      {{"--mode=b", "--n=1,3"}, {"mode: invalid value 'b'", "n <= 2"}},
      {{"--cell=4"}, {"--cell: invalid value '4'", "[0, 3]"}},
      {{"--cells=3-1"}, {"--cells: invalid value '3-1'"}},
      {{"--cell=1", "--cells=0-1"}, {"--cell and --cells"}},
      {{"--out", (d.path / "file.txt" / "res").string()}, {"--out", "file.txt", "not a directory"}},
      {{"--lr=3"}, {"unknown key '--lr'"}},
      {{"--n=1", "--n=2"}, {"'--n'"}},
      {{"stray"}, {"unexpected argument 'stray'"}},
      // A key without its value leaves the next value over; the message names what it followed.
      {{"--n", "--out", out}, {"unexpected argument '" + out + "'", "after '--out', which '--n' took as its value", "attached with '='"}},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args;
    if (c.args.front() != "--config") args.insert(args.end(), {"--config", ini.string()});
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
  // A line without '=', a key set twice, a section header: each named with what is allowed.
  const auto no_eq = write_ini(d.path, "noeq.ini", "n 1\n");
  r = run(toy_spec(), {"--config", no_eq.string(), "--out", out});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("noeq.ini") && Catch::Contains("'n 1'") &&
                        Catch::Contains("expected `key = value` lines"));
  const auto twice = write_ini(d.path, "twice.ini", "n = 1\nn = 2\n");
  r = run(toy_spec(), {"--config", twice.string(), "--out", out});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("twice.ini: key 'n' is set on more than one line") &&
                        Catch::Contains("at most once"));
  const auto section = write_ini(d.path, "section.ini", "[run]\nn = 1\n");
  r = run(toy_spec(), {"--config", section.string(), "--out", out});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown key 'run.n'") && Catch::Contains("[run] section header") &&
                        Catch::Contains("no sections"));
  CHECK(count_lines(r.err) == 1);
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

namespace {
// The cell file in <out>/cells whose label is `label`.
fs::path cell_file(const fs::path& out, const std::string& label) {
  for (const auto& e : fs::directory_iterator(out / "cells")) {
    if (e.path().extension() != ".json") continue;
    const auto j = nlohmann::json::parse(slurp(e.path()));
    if (j.at("label") == label) return e.path();
  }
  FAIL("no cell file with label " << label);
  return {};
}
}  // namespace

TEST_CASE("stored cells are verified and corrupt ones are named at merge and recomputed", "[experiment][run][corrupt]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2\nseeds = 1\n");
  const fs::path out = d.path / "res";
  const std::vector<std::string> base = {"--config", ini.string(), "--out", out.string(), "--quiet"};
  auto with = [&](const std::string& flag) {
    auto a = base;
    a.push_back(flag);
    return a;
  };
  g_calls = 0;
  REQUIRE(run(toy_spec(), base).code == 0);
  REQUIRE(g_calls == 2);
  const std::string good_csv = slurp(out / "toy.csv");
  const fs::path file = cell_file(out, "n=2 seed=0");
  const std::string good = slurp(file);

  struct Edit {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    bool fix_checksum;  // recompute the checksum after the edit (a deliberate, consistent edit)
    const char* expect;
  };
  const std::vector<Edit> edits = {
      {"garbage value", [](nlohmann::json& j) { j["tables"]["main"]["rows"][0][4] = "GARBAGE"; },
       false, "checksum mismatch"},
      {"tripled rows",
       [](nlohmann::json& j) {
         auto& rows = j["tables"]["main"]["rows"];
         rows.push_back(rows[0]);
         rows.push_back(rows[0]);
       },
       false, "checksum mismatch"},
      {"main table deleted", [](nlohmann::json& j) { j["tables"].erase("main"); }, true,
       "table 'main' is missing"},
      {"main table emptied", [](nlohmann::json& j) { j["tables"]["main"]["rows"] = nlohmann::json::array(); },
       true, "table 'main' has no rows"},
      {"sweep key changed", [](nlohmann::json& j) { j["tables"]["curve"]["rows"][1][1] = "999"; }, true,
       "table 'curve' row 1: column 'n' is '999' but this cell has n=2"},
      {"column renamed", [](nlohmann::json& j) { j["tables"]["main"]["columns"][4] = "val"; }, true,
       "table 'main' has the columns (experiment,n,seed,derived_seed,val,time_s) instead of the declared"},
      {"extra table", [](nlohmann::json& j) { j["tables"]["extra"] = j["tables"]["curve"]; }, true,
       "table 'extra' is not declared"},
      {"no checksum", [](nlohmann::json& j) { j.erase("checksum"); }, false, "no checksum"},
      {"other fingerprint", [](nlohmann::json& j) { j["fingerprint"]["params"]["x"] = "7"; }, true,
       "fingerprint is not this cell's"},
  };
  for (const auto& e : edits) {
    INFO(e.what);
    auto j = nlohmann::json::parse(good);
    e.edit(j);
    if (e.fix_checksum) j["checksum"] = cell_checksum(j["fingerprint"], j["tables"]);
    std::ofstream(file, std::ios::trunc) << j.dump(1);
    const auto m = run(toy_spec(), with("--merge"));
    INFO(m.err);
    CHECK(m.code == 1);
    CHECK(count_lines(m.err) == 1);
    CHECK_THAT(m.err, Catch::Contains("merge: 1 of 2 cells are corrupt: 1 (first: n=2 seed=0: ") &&
                          Catch::Contains(e.expect) && Catch::Contains(file.filename().string()));
    CHECK(slurp(out / "toy.csv") == good_csv);  // nothing merged
    // A run (no --force) recomputes exactly the corrupt cell, then merges as before.
    g_calls = 0;
    const auto r = run(toy_spec(), {"--config", ini.string(), "--out", out.string()});
    CHECK(r.code == 0);
    CHECK(g_calls == 1);
    CHECK_THAT(r.err, Catch::Contains("(n=2 seed=0): stored result") && Catch::Contains("is corrupt ("));
    CHECK(slurp(out / "toy.csv") == good_csv);
  }
  // A truncated file (killed writer without the atomic rename, disk full...) is corrupt too.
  std::ofstream(file, std::ios::trunc) << good.substr(0, good.size() / 2);
  const auto m = run(toy_spec(), with("--merge"));
  CHECK(m.code == 1);
  CHECK_THAT(m.err, Catch::Contains("not valid JSON"));
  // Missing and corrupt cells are both named, in one line.
  fs::remove(cell_file(out, "n=1 seed=0"));
  const auto both = run(toy_spec(), with("--merge"));
  CHECK(both.code == 1);
  CHECK(count_lines(both.err) == 1);
  CHECK_THAT(both.err, Catch::Contains("1 of 2 cells are not done: 0 (first: n=1 seed=0); 1 of 2 "
                                       "cells are corrupt: 1"));
}

TEST_CASE("status reports done missing and corrupt cells and writes nothing", "[experiment][run][status]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2,3\nseeds = 1\n");
  const fs::path out = d.path / "res";
  const std::vector<std::string> base = {"--config", ini.string(), "--out", out.string()};
  auto with = [&](std::vector<std::string> extra) {
    auto a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  // No output directory yet: every cell is missing, and nothing is created.
  auto s = run(toy_spec(), with({"--status"}));
  CHECK(s.code == 0);
  CHECK(s.out == "0 missing n=1 seed=0\n1 missing n=2 seed=0\n2 missing n=3 seed=0\n");
  CHECK_FALSE(fs::exists(out));
  g_calls = 0;
  REQUIRE(run(toy_spec(), with({"--cells", "0-1", "--quiet"})).code == 0);
  REQUIRE(g_calls == 2);
  // A damaged cell is corrupt (the reason on stderr), as a run and --merge would judge it.
  const fs::path file = cell_file(out, "n=2 seed=0");
  std::ofstream(file, std::ios::app) << "x";
  const auto before = fs::last_write_time(file);
  g_calls = 0;
  s = run(toy_spec(), with({"--status"}));
  CHECK(s.code == 0);
  CHECK(g_calls == 0);
  CHECK(s.out == "0 done n=1 seed=0\n1 corrupt n=2 seed=0\n2 missing n=3 seed=0\n");
  CHECK_THAT(s.err, Catch::Contains("cell 1: ") && Catch::Contains(file.filename().string()) &&
                        Catch::Contains("not valid JSON"));
  CHECK(fs::last_write_time(file) == before);
  CHECK_FALSE(fs::exists(out / "toy.csv"));
  // --cell/--cells restrict it; --quiet drops the reasons; it wins over --merge and --force.
  s = run(toy_spec(), with({"--status", "--cells", "1-2", "--quiet", "--merge", "--force"}));
  CHECK(s.code == 0);
  CHECK(s.out == "1 corrupt n=2 seed=0\n2 missing n=3 seed=0\n");
  CHECK(s.err.empty());
  CHECK(g_calls == 0);
  CHECK_FALSE(fs::exists(out / "toy.csv"));
  // Bad input is still exit 2; unwritable stdout is exit 1.
  s = run(toy_spec(), with({"--status", "--cell", "7"}));
  CHECK(s.code == 2);
  CHECK(run(toy_spec(), with({"--status"}), /*full_stdout=*/true).code == 1);
}

TEST_CASE("every declared table is written even when no cell has rows for it", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1\nseeds = 1\n");
  const fs::path out = d.path / "res";
  REQUIRE(run(toy_spec(), {"--config", ini.string(), "--out", out.string(), "--quiet"}).code == 0);
  CHECK(count_lines(slurp(out / "toy_curve.csv")) == 3);
  // The same output directory, a run whose cells write no curve rows (e.g. diverged at once):
  // the curve CSV from the first merge must not survive.
  REQUIRE(run(toy_spec(), {"--config", ini.string(), "--out", out.string(), "--quiet",
                           "--curve_rows=0"})
              .code == 0);
  CHECK(slurp(out / "toy_curve.csv") == "experiment,n,seed,step,loss\n");
  const auto meta = nlohmann::json::parse(slurp(out / "toy.meta.json"));
  CHECK(meta.at("tables").at("curve").at("rows") == 0);
  CHECK(meta.at("tables").at("curve").at("columns") ==
        nlohmann::json::array({"experiment", "n", "seed", "step", "loss"}));
  CHECK(meta.at("cells").at(0).at("checksum").get<std::string>().rfind("fnv1a64:", 0) == 0);
}

TEST_CASE("a spec without integer bounds or table declarations is a programming error", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1\n");
  const std::vector<std::string> args = {"--config", ini.string(), "--out", (d.path / "res").string()};
  auto spec = toy_spec();
  spec.options.push_back(int_option("unbounded", 1, "1", "no upper bound").at_least(0));
  auto r = run(spec, args);
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("integer key 'unbounded' has no upper bound") &&
                        Catch::Contains("at_most"));
  spec = toy_spec();
  spec.tables.clear();
  r = run(spec, args);
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("tables must declare the main table"));
  spec = toy_spec();
  spec.default_seeds = 100001;
  r = run(spec, args);
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("bad default") && Catch::Contains("seeds"));
  // run_cell writing an undeclared table: a failure of that cell, named.
  spec = toy_spec();
  spec.run_cell = [](const Cell&, CellOutput& out) { out.add_row(Row().add("a", 1), "undeclared"); };
  r = run(spec, args);
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("cell 0/2 (n=1 seed=0) failed") &&
                        Catch::Contains("'undeclared' is not declared"));
  // run_cell writing a row whose sweep-key column disagrees with the cell: caught before writing.
  spec = toy_spec();
  spec.run_cell = [](const Cell& c, CellOutput& out) {
    out.add_row(Row().add("experiment", "toy").add("n", 999).add("seed", c.replicate)
                    .add("derived_seed", c.seed).add("value", 1.0).add("time_s", 0.0));
  };
  r = run(spec, args);
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("column 'n' is '999' but this cell has n=1"));
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(d.path / "res" / "cells")) files += e.path().extension() == ".json";
  CHECK(files == 0);
}

TEST_CASE("a cell that runs out of memory is reported as such", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2\nseeds = 1\noom_at = 2\n");
  g_calls = 0;
  const auto r = run(toy_spec(), {"--config", ini.string(), "--out", (d.path / "res").string(), "--quiet"});
  CHECK(r.code == 1);
  CHECK(g_calls == 2);
  CHECK_THAT(r.err, Catch::Contains("cell 1/2 (n=2 seed=0): out of memory (std::bad_alloc)") &&
                        Catch::Contains("too large for this machine"));
  CHECK_FALSE(fs::exists(d.path / "res" / "toy.csv"));
}

TEST_CASE("help and list-cells fail when standard output cannot be written", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1,2\n");
  for (const char* flag : {"--help", "--list-cells"}) {
    INFO(flag);
    const auto r = run(toy_spec(), {"--config", ini.string(), flag}, /*full_stdout=*/true);
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Catch::Contains("cannot write to standard output"));
    CHECK(run(toy_spec(), {"--config", ini.string(), flag}).code == 0);
  }
}

TEST_CASE("temporary files of killed writers on this host are removed at start", "[experiment][run]") {
  TempDir d;
  const auto ini = write_ini(d.path, "c.ini", "n = 1\nseeds = 1\n");
  const fs::path out = d.path / "res";
  fs::create_directories(out / "cells");
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(0);
  REQUIRE(waitpid(child, nullptr, 0) == child);
  std::string stale = temp_file_name("n=1_seed=0_0123456789abcdef.json");
  stale = stale.substr(0, stale.rfind('~') + 1) + std::to_string(child) + ".tmp";
  const std::string foreign = ".n=1_seed=0_0123456789abcdef.json~elsewhere~" + std::to_string(child) + ".tmp";
  std::ofstream(out / "cells" / stale) << "{";
  std::ofstream(out / "cells" / foreign) << "{";
  const auto r = run(toy_spec(), {"--config", ini.string(), "--out", out.string()});
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("removed 1 temporary file(s)"));
  CHECK_FALSE(fs::exists(out / "cells" / stale));
  CHECK(fs::exists(out / "cells" / foreign));  // another host's writer may still be running
}
