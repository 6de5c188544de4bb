// Unit tests of the experiment framework's pieces: option parsing, number formatting, value
// ranges (integer bounds, narrowing accessors, float-representable reals), the grid, its size
// limit and its seed rule, cell ranges, tables and CSV, atomic writes, file reads, the --out
// check, removal of stale temporary files.
#include <catch2/catch.hpp>
#include "temp_dir.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "seqlab/core/rng.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/experiment/grid.hpp"
#include "seqlab/experiment/io.hpp"
#include "seqlab/experiment/options.hpp"
#include "seqlab/experiment/table.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
namespace fs = std::filesystem;

namespace {
struct TempDir : seqlab::test::TempDir {
  TempDir() : seqlab::test::TempDir("seqlab_exp_unit") {}
};
// A fresh empty directory under the system temp dir, removed at scope exit.
std::string error_of(const OptionSpec& o, const std::string& text) {
  try {
    o.parse(text, "the command line");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("numbers are formatted deterministically", "[experiment][format]") {
  CHECK(format_int(0) == "0");
  CHECK(format_int(-12) == "-12");
  CHECK(format_int(std::numeric_limits<std::int64_t>::max()) == "9223372036854775807");
  CHECK(format_real(0.1) == "0.1");
  CHECK(format_real(1.0 / 3.0) == "0.333333333");
  CHECK(format_real(2.0) == "2");
  CHECK(format_real(1e-10) == "1e-10");
  CHECK(format_real(123456789012.0) == "1.23456789e+11");
  CHECK(format_real(-0.0) == "0");
  CHECK(format_real(std::nan("")) == "nan");
  CHECK(format_real(-std::nan("")) == "nan");
  CHECK(format_real(INFINITY) == "inf");
  CHECK(format_real(-INFINITY) == "-inf");
  CHECK(format_real(0.1f) == "0.100000001");  // a float widened to double keeps its bits
  CHECK(format_value(Value(std::string("adam"))) == "adam");
}

TEST_CASE("sweep keys parse comma separated lists", "[experiment][options]") {
  const auto T = int_sweep("T", {10}, "steps", "blank length").at_least(1);
  const auto v = T.parse(" 10, 25 ,50 ", "x");
  REQUIRE(v.size() == 3);
  CHECK(std::get<std::int64_t>(v[0]) == 10);
  CHECK(std::get<std::int64_t>(v[2]) == 50);
  CHECK(T.parse("+7", "x").size() == 1);
  CHECK(T.default_text() == "10");

  const std::string empty = error_of(T, "");
  CHECK_THAT(empty, Catch::StartsWith("T: invalid value ''") && Catch::Contains("empty list") &&
                        Catch::Contains("integers >= 1") && Catch::Contains("the command line"));
  CHECK_THAT(error_of(T, "10,,20"), Catch::Contains("empty element"));
  CHECK_THAT(error_of(T, "10,x"), Catch::Contains("'10,x'") && Catch::Contains("'x' is not an integer"));
  CHECK_THAT(error_of(T, "10,0"), Catch::Contains("'0' is out of range") && Catch::Contains(">= 1"));
  CHECK_THAT(error_of(T, "10,10"), Catch::Contains("duplicate value '10'"));
  CHECK_THAT(error_of(T, "5.5"), Catch::Contains("'5.5' is not an integer"));
  CHECK_THAT(error_of(T, "99999999999999999999"),
             Catch::Contains("'99999999999999999999' is out of range"));
}

TEST_CASE("scalar keys reject lists wrong types and out of range values", "[experiment][options]") {
  const auto h = int_option("hidden_size", 32, "units", "hidden").at_least(1);
  CHECK(std::get<std::int64_t>(h.parse("64", "x").at(0)) == 64);
  CHECK(error_of(h, "-3") ==
        "hidden_size: invalid value '-3' (from the command line): expected an integer >= 1");
  CHECK_THAT(error_of(h, "0"), Catch::Contains("'0'") && Catch::Contains(">= 1"));
  CHECK_THAT(error_of(h, "abc"), Catch::Contains("'abc'") && Catch::Contains("an integer"));
  CHECK_THAT(error_of(h, "8,16"), Catch::Contains("not a sweep key"));

  const auto lr = real_option("lr", 1e-3, "1", "lr").greater_than(0);
  CHECK(std::get<double>(lr.parse("1e-3", "x").at(0)) == 1e-3);
  CHECK(std::get<double>(lr.parse("2", "x").at(0)) == 2.0);
  CHECK_THAT(error_of(lr, "0"), Catch::Contains("a real in (0, 3.40282347e+38]"));
  CHECK_THAT(error_of(lr, "inf"), Catch::Contains("'inf'"));
  CHECK_THAT(error_of(lr, "nan"), Catch::Contains("'nan'"));
  CHECK_THAT(error_of(lr, "1e-3x"), Catch::Contains("'1e-3x'"));
  CHECK_THAT(error_of(lr, "1e999"), Catch::Contains("'1e999'"));

  const auto p = real_option("p", 0.5, "1", "prob").at_least(0).at_most(1);
  CHECK_THAT(error_of(p, "1.5"), Catch::Contains("a real in [0, 1]"));

  const auto opt = string_option("optimizer", "adam", "opt").one_of({"adam", "adamw", "sgd"});
  CHECK(std::get<std::string>(opt.parse("sgd", "x").at(0)) == "sgd");
  CHECK(error_of(opt, "rmsprop") ==
        "optimizer: invalid value 'rmsprop' (from the command line): expected one of adam|adamw|sgd");
  const auto model = string_sweep("model", {"lstm"}, "model").one_of({"lstm", "gru"});
  CHECK(model.parse("lstm,gru", "x").size() == 2);
  CHECK_THAT(error_of(model, "lstm,tcn"),
             Catch::Contains("'tcn' is not allowed") && Catch::Contains("lstm|gru"));
}

TEST_CASE("list keys check every element and read back typed", "[experiment][options][list]") {
  const auto b = int_list_option("batch_sizes", "1 2 4", "sequences", "batch sizes").at_least(1).at_most(4096);
  CHECK(b.allowed() == "a space-separated list of distinct integers in [1, 4096]");
  CHECK(std::get<std::string>(b.parse("  8   16 ", "x").at(0)) == "8   16");
  CHECK(error_of(b, "1 x") ==
        "batch_sizes: invalid value '1 x' (from the command line): 'x' is not an integer; expected a "
        "space-separated list of distinct integers in [1, 4096]");
  CHECK_THAT(error_of(b, "1 0"), Catch::Contains("'0' is out of range"));
  CHECK_THAT(error_of(b, "2 2"), Catch::Contains("'2' is repeated"));
  CHECK_THAT(error_of(b, ""), Catch::Contains("empty list"));
  CHECK_THAT(error_of(b, "1,2"), Catch::Contains("'1,2' is not an integer"));
  CHECK_THAT(error_of(b, "99999999999999999999"), Catch::Contains("is out of range"));

  const auto lrs = real_list_option("lrs", "0.001 0.01", "1", "lrs").greater_than(0).at_most(10);
  CHECK(lrs.allowed() == "a space-separated list of distinct reals in (0, 10]");
  CHECK_THAT(error_of(lrs, "0.1 0"), Catch::Contains("'0' is out of range"));
  CHECK_THAT(error_of(lrs, "nan"), Catch::Contains("'nan' is not a finite real number"));
  CHECK_THAT(error_of(lrs, "1e-50"), Catch::Contains("'1e-50' is nonzero but rounds to 0"));
  CHECK_THAT(error_of(lrs, "0.1 1e-1"), Catch::Contains("'1e-1' is repeated"));

  const auto norms = choice_list_option("norms", "a", {"a", "b", "none"}, "norms");
  CHECK(norms.allowed() == "a space-separated list of distinct values from a|b|none");
  CHECK(std::get<std::string>(norms.parse("none b", "x").at(0)) == "none b");
  CHECK_THAT(error_of(norms, "a c"), Catch::Contains("'c' is not allowed"));

  const auto models = choice_list_option("tta_models", "none", {"lstm", "gru"}, "models").empty_as("none");
  CHECK(models.default_text() == "none");
  CHECK(std::get<std::string>(models.defaults.at(0)).empty());
  CHECK(std::get<std::string>(models.parse("none", "x").at(0)).empty());
  CHECK(models.allowed() == "a space-separated list of distinct values from lstm|gru, or 'none' (the empty list)");
  CHECK_NOTHROW(models.check(models.defaults.at(0), "none", "x"));

  Params p;
  p.set("b", std::string("8 16 32"));
  p.set("lrs", std::string("0.001 3e-3"));
  p.set("norms", std::string("none b"));
  p.set("models", std::string());
  CHECK(p.get_int_list("b") == std::vector<std::int64_t>{8, 16, 32});
  CHECK(p.get_real_list("lrs") == std::vector<double>{0.001, 0.003});
  CHECK(p.get_string_list("norms") == std::vector<std::string>{"none", "b"});
  CHECK(p.get_string_list("models").empty());
  CHECK(p.get_int_list("models").empty());
  CHECK_THROWS_AS(p.get_int_list("norms"), std::logic_error);
}

TEST_CASE("params give typed access", "[experiment][options]") {
  Params p;
  p.set("n", std::int64_t{3});
  p.set("lr", 0.5);
  p.set("name", std::string("x"));
  p.set("n", std::int64_t{4});
  CHECK(p.entries().size() == 3);
  CHECK(p.get_int("n") == 4);
  CHECK(p.get_real("n") == 4.0);
  CHECK(p.get_real("lr") == 0.5);
  CHECK(p.get_string("name") == "x");
  CHECK(p.text("lr") == "0.5");
  CHECK_THROWS_AS(p.get_int("missing"), std::out_of_range);
  CHECK_THROWS_AS(p.get_int("lr"), std::logic_error);
  CHECK_THROWS_AS(p.get_string("n"), std::logic_error);
}

TEST_CASE("cell_schedule reads the schedule keys and rejects bad combinations with the key named", "[experiment][options]") {
  const auto cell_with = [](const std::string& kind, double lr, std::int64_t warmup, std::int64_t steps) {
    Cell c;
    c.params.set("schedule", kind);
    c.params.set("lr", lr);
    c.params.set("warmup_steps", warmup);
    c.params.set("steps", steps);
    return c;
  };
  const seqlab::LrSchedule s = cell_schedule(cell_with("cosine", 0.25, 3, 40));
  CHECK(s.kind == "cosine");
  CHECK(s.base_lr == 0.25f);
  CHECK(s.warmup_steps == 3);
  CHECK(s.total_steps == 40);
  const auto message = [&](const Cell& c) {
    try {
      cell_schedule(c);
    } catch (const ConfigError& e) {
      return std::string("ConfigError: ") + e.what();
    } catch (const std::invalid_argument& e) {
      return std::string("invalid_argument: ") + e.what();
    }
    return std::string("no error");
  };
  CHECK(message(cell_with("constant", 0.1, 50, 40)) ==
        "ConfigError: warmup_steps: invalid value '50': expected an integer <= steps (40)");
  CHECK(message(cell_with("inverse_sqrt", 0.1, 0, 40)) ==
        "ConfigError: warmup_steps: invalid value '0': schedule = inverse_sqrt needs an integer >= 1");
  CHECK_THAT(message(cell_with("linear", 0.1, 0, 40)),
             Catch::StartsWith("invalid_argument: ") && Catch::Contains("linear"));
  CHECK_THAT(message(cell_with("constant", -1.0, 0, 40)), Catch::Contains("base_lr"));
  Cell empty;
  CHECK_THROWS_AS(cell_schedule(empty), std::out_of_range);
}

namespace {
std::vector<Cell> small_grid(std::vector<std::int64_t> a, std::uint64_t base = 7) {
  const std::vector<OptionSpec> specs = {int_sweep("a", {1}, "", "a"),
                                         string_sweep("b", {"x"}, "b"),
                                         real_option("c", 0.5, "", "c")};
  std::map<std::string, std::vector<Value>> values;
  for (auto x : a) values["a"].push_back(x);
  values["b"] = {std::string("x"), std::string("y"), std::string("z")};
  values["c"] = {0.25};
  return build_grid(specs, values, 2, base);
}
}  // namespace

TEST_CASE("the grid is the product of sweep keys times replicates in a fixed order", "[experiment][grid]") {
  const auto cells = small_grid({1, 2});
  REQUIRE(cells.size() == 12);
  CHECK(cells[0].label() == "a=1 b=x seed=0");
  CHECK(cells[1].label() == "a=1 b=x seed=1");
  CHECK(cells[2].label() == "a=1 b=y seed=0");
  CHECK(cells[5].label() == "a=1 b=z seed=1");
  CHECK(cells[6].label() == "a=2 b=x seed=0");
  CHECK(cells[11].label() == "a=2 b=z seed=1");
  for (std::size_t i = 0; i < cells.size(); ++i) {
    CHECK(cells[i].index == i);
    CHECK(cells[i].count == 12);
    CHECK(cells[i].get_real("c") == 0.25);
  }
  CHECK(cells[7].get_int("a") == 2);
  CHECK(cells[7].get_string("b") == "x");
  CHECK(cells[7].replicate == 1);
  std::map<std::string, std::vector<Value>> missing = {{"a", {std::int64_t{1}}}};
  CHECK_THROWS_AS(build_grid({int_sweep("a", {1}, "", ""), int_option("d", 1, "", "")}, missing, 1, 0),
                  std::invalid_argument);
  CHECK_THROWS_AS(build_grid({int_sweep("a", {1}, "", "")}, missing, 0, 0), std::invalid_argument);
}

TEST_CASE("seeds depend only on the base seed and the replicate", "[experiment][grid][seed]") {
  const auto g1 = small_grid({1, 2});
  const auto g2 = small_grid({5, 2, 1});  // other values, other order
  for (const auto& c : g1) {
    CHECK(c.seed == derive_seed(7, c.replicate));
    CHECK(c.seed == replicate_seed(7, c.replicate));
    CHECK(c.stream_seed(2) == derive_seed(7, c.replicate, 2));
    CHECK(c.stream_seed(1) != c.stream_seed(2));
    CHECK(c.stream_seed(1) != c.seed);
    for (const auto& d : g2) {
      if (d.label() == c.label()) {
        CHECK(d.seed == c.seed);
        CHECK(d.fingerprint("e") == c.fingerprint("e"));
      }
    }
  }
  CHECK(g1[0].seed != g1[1].seed);                  // replicates differ
  CHECK(g1[0].seed == g1[2].seed);                  // paired across the grid
  CHECK(small_grid({1}, 8)[0].seed != g1[0].seed);  // base seed matters
  CHECK(g1[0].fingerprint("e") != g1[2].fingerprint("e"));
  CHECK(g1[0].fingerprint("e") != g1[1].fingerprint("e"));
  CHECK(g1[0].fingerprint("e") != small_grid({1}, 8)[0].fingerprint("e"));
}

TEST_CASE("cell ranges are parsed and checked", "[experiment][grid]") {
  CHECK(parse_cell_range("--cell", "3", 12) == std::make_pair(std::size_t{3}, std::size_t{3}));
  CHECK(parse_cell_range("--cells", "2-5", 12) == std::make_pair(std::size_t{2}, std::size_t{5}));
  CHECK(parse_cell_range("--cells", "11-11", 12) == std::make_pair(std::size_t{11}, std::size_t{11}));
  CHECK_THROWS_WITH(parse_cell_range("--cell", "12", 12),
                    Catch::StartsWith("--cell: invalid value '12'") &&
                        Catch::Contains("[0, 11]") && Catch::Contains("12 cells"));
  for (const char* bad : {"-1", "a", "", "1.5", "3-"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_cell_range("--cell", bad, 12), ConfigError);
  }
  for (const char* bad : {"5-2", "3", "0-12", "-3", "a-b", "1-2-3"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_cell_range("--cells", bad, 12),
                      Catch::Contains("--cells") && Catch::Contains("0 <= A <= B <= 11"));
  }
  CHECK(format_index_list({1, 2, 3, 5, 7, 8}) == "1-3, 5, 7-8");
  CHECK(format_index_list({0}) == "0");
}

TEST_CASE("tables have named columns and are written as CSV", "[experiment][table]") {
  CellOutput out;
  Row id;
  id.add("experiment", "demo").add("seed", std::size_t{1}).add("flag", true);
  out.add_row(Row(id).add("loss", 0.25).add("note", "a,b \"q\""));
  out.add_row(Row(id).add("loss", std::nan("")).add("note", ""));
  out.add_row(Row(id).add("step", 1).add("big", std::uint64_t{18446744073709551615ULL}), "steps");
  const auto& t = out.tables().at(kMainTable);
  CHECK(t.to_csv() ==
        "experiment,seed,flag,loss,note\n"
        "demo,1,1,0.25,\"a,b \"\"q\"\"\"\n"
        "demo,1,1,nan,\n");
  CHECK(out.tables().at("steps").to_csv() ==
        "experiment,seed,flag,step,big\ndemo,1,1,1,18446744073709551615\n");
  CHECK_THROWS_AS(out.add_row(Row(id).add("other", 1.0)), std::logic_error);
  CHECK_THROWS_AS(out.add_row(Row(id).add("loss", 1.0).add("note", "x"), "bad/name"),
                  std::logic_error);
  CHECK_THROWS_AS(Row().add("a", 1).add("a", 2), std::logic_error);
  CHECK(csv_escape("plain") == "plain");
  CHECK(csv_escape("two\nlines") == "\"two\nlines\"");
  const Table back = Table::from_json(t.to_json());
  CHECK(back.to_csv() == t.to_csv());
  CHECK_THROWS_AS(Table::from_json(nlohmann::json{{"columns", {"a"}}, {"rows", {{"1", "2"}}}}),
                  std::runtime_error);
}

TEST_CASE("files are written atomically", "[experiment][io]") {
  TempDir d;
  const std::string p = (d.path / "x.csv").string();
  write_file_atomic(p, "one\n");
  CHECK(read_text_file(p).value() == "one\n");
  write_file_atomic(p, "two\n");
  CHECK(read_text_file(p).value() == "two\n");
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(d.path)) {
    (void)e;
    ++n;
  }
  CHECK(n == 1);  // no temporary file left behind
  CHECK_THROWS_AS(write_file_atomic((d.path / "missing" / "x.csv").string(), "x"),
                  std::runtime_error);
  CHECK_FALSE(read_text_file((d.path / "nope").string()).has_value());
}

TEST_CASE("the output directory check creates nothing", "[experiment][io]") {
  TempDir d;
  CHECK(check_output_dir(d.path.string()).empty());
  const fs::path nested = d.path / "a" / "b";
  CHECK(check_output_dir(nested.string(), "cells").empty());
  CHECK_FALSE(fs::exists(d.path / "a"));
  std::ofstream(d.path / "file.txt") << "x";
  const std::string why = check_output_dir((d.path / "file.txt" / "out").string());
  CHECK_THAT(why, Catch::Contains("file.txt") && Catch::Contains("not a directory"));
  CHECK_FALSE(check_output_dir((d.path / "file.txt").string()).empty());
  fs::create_directories(d.path / "o");
  std::ofstream(d.path / "o" / "cells") << "x";
  CHECK_THAT(check_output_dir((d.path / "o").string(), "cells"), Catch::Contains("cells"));
}

TEST_CASE("integer keys use exact integer bounds", "[experiment][options][range]") {
  const auto seed = int_option("seed", 1, "1", "base seed").at_least(0).at_most(9223372036854775807.0);
  CHECK(seed.allowed() == "an integer in [0, 9223372036854775807]");
  CHECK(std::get<std::int64_t>(seed.parse("9223372036854775807", "x").at(0)) ==
        std::numeric_limits<std::int64_t>::max());
  CHECK(error_of(seed, "9223372036854775808") ==
        "seed: invalid value '9223372036854775808' (from the command line): out of range; "
        "expected an integer in [0, 9223372036854775807]");
  CHECK_THAT(error_of(seed, "-1"), Catch::Contains("[0, 9223372036854775807]"));

  // A value that an int would truncate to 0 (2^32) is rejected by the bound, not truncated.
  const auto steps = int_option("steps", 10, "updates", "updates").at_least(1).at_most(1e9);
  CHECK(error_of(steps, "4294967296") ==
        "steps: invalid value '4294967296' (from the command line): expected an integer in "
        "[1, 1000000000]");
  CHECK(std::get<std::int64_t>(steps.parse("1000000000", "x").at(0)) == 1000000000);
  const auto T = int_sweep("T", {3}, "steps", "T").at_least(1).at_most(1e6);
  CHECK_THAT(error_of(T, "3,4294967299"),
             Catch::Contains("'4294967299' is out of range") && Catch::Contains("[1, 1000000]"));

  // Real-valued bounds of an integer key are rounded inward.
  const auto r = int_option("k", 2, "", "k").greater_than(1.5).at_most(10.7);
  CHECK(r.int_lower() == 2);
  CHECK(r.int_upper() == 10);
  CHECK(r.allowed() == "an integer in [2, 10]");
  CHECK(int_option("k", 2, "", "k").greater_than(1).int_lower() == 2);
  CHECK(int_option("k", 2, "", "k").int_upper() == std::numeric_limits<std::int64_t>::max());
  CHECK_FALSE(error_of(r, "11").empty());
  CHECK(error_of(r, "10").empty());
}

TEST_CASE("narrowing accessors throw instead of truncating", "[experiment][options][range]") {
  Params p;
  p.set("log_every", std::int64_t{4294967296});
  p.set("neg", std::int64_t{-1});
  p.set("n", std::int64_t{300});
  p.set("big_real", 1e39);
  p.set("tiny_real", 1e-50);
  p.set("lr", 0.5);
  CHECK_THROWS_AS(p.get_int32("log_every"), std::out_of_range);
  CHECK_THROWS_WITH(p.get_int32("log_every"),
                    Catch::Contains("'log_every'") && Catch::Contains("4294967296") &&
                        Catch::Contains("[-2147483648, 2147483647]"));
  CHECK_THROWS_WITH(p.get_size("neg"), Catch::Contains("'neg'") && Catch::Contains("-1"));
  CHECK(p.get_size("n") == 300);
  CHECK(p.get_int32("n") == 300);
  CHECK_THROWS_AS(p.get_int_as<std::uint8_t>("n"), std::out_of_range);
  CHECK(p.get_int_as<std::int64_t>("log_every") == 4294967296);
  CHECK(p.get_float("lr") == 0.5f);
  CHECK_THROWS_WITH(p.get_float("big_real"), Catch::Contains("'big_real'") && Catch::Contains("1e+39"));
  CHECK_THROWS_AS(p.get_float("tiny_real"), std::out_of_range);
  CHECK_THROWS_AS(p.get_int32("lr"), std::logic_error);  // type mismatch, as get_int
}

TEST_CASE("real keys must be representable as finite floats", "[experiment][options][range]") {
  const auto lr = real_option("lr", 1e-3, "1", "lr").greater_than(0);
  CHECK(lr.allowed() == "a real in (0, 3.40282347e+38]");
  CHECK(error_of(lr, "1e39") ==
        "lr: invalid value '1e39' (from the command line): too large for a float; expected a real "
        "in (0, 3.40282347e+38]");
  CHECK(error_of(lr, "1e-50") ==
        "lr: invalid value '1e-50' (from the command line): nonzero but rounds to 0 as a float; "
        "expected a real in (0, 3.40282347e+38]");
  // The printed bound itself is accepted (it rounds to FLT_MAX); so is a subnormal float.
  CHECK(static_cast<float>(std::get<double>(lr.parse("3.40282347e+38", "x").at(0))) == FLT_MAX);
  CHECK(lr.parse("1e-45", "x").size() == 1);
  CHECK_THAT(error_of(lr, "3.5e38"), Catch::Contains("too large for a float"));
  const auto wd = real_option("weight_decay", 0, "1", "wd").at_least(0);
  CHECK_THAT(error_of(wd, "1e39"), Catch::Contains("weight_decay") && Catch::Contains("'1e39'") &&
                                       Catch::Contains("[0, 3.40282347e+38]"));
  CHECK(std::get<double>(wd.parse("0", "x").at(0)) == 0.0);
  const auto any = real_option("shift", 0, "1", "shift");
  CHECK(any.allowed() == "a real in [-3.40282347e+38, 3.40282347e+38]");
  CHECK_THAT(error_of(any, "-1e39"), Catch::Contains("too large for a float"));
  const auto sweep = real_sweep("lr", {0.1}, "1", "lr").greater_than(0);
  CHECK_THAT(error_of(sweep, "0.1,1e39"),
             Catch::Contains("'1e+39' is too large for a float") &&
                 Catch::Contains("a comma-separated list of reals in (0, 3.40282347e+38]"));
}

TEST_CASE("the grid size is checked with overflow checks before it is built", "[experiment][grid][range]") {
  const std::vector<OptionSpec> specs = {int_sweep("T", {1}, "", "T"), string_sweep("m", {"x"}, "m")};
  std::map<std::string, std::vector<Value>> values;
  for (std::int64_t t = 1; t <= 4; ++t) values["T"].emplace_back(std::in_place_index<0>, t);
  values["m"] = {std::string("x"), std::string("y")};
  // 2^62 replicates x 4 T values x 2 models wraps to 0 in 64 bits; 2^61+1 x 8 wraps to 8.
  CHECK_THROWS_WITH(build_grid(specs, values, std::size_t{4611686018427387904ULL}, 1),
                    Catch::Contains("more than 18446744073709551615 cells") &&
                        Catch::Contains("T (4 values) x m (2 values) x seeds (4611686018427387904)") &&
                        Catch::Contains("at most 100000 cells"));
  CHECK_THROWS_AS(build_grid(specs, values, std::size_t{2305843009213693953ULL}, 1), ConfigError);
  CHECK_THROWS_WITH(build_grid(specs, values, 3, 1, 20),
                    Catch::StartsWith("the grid has 24 cells = T (4 values) x m (2 values) x seeds (3)") &&
                        Catch::Contains("at most 20 cells"));
  CHECK(build_grid(specs, values, 3, 1, 24).size() == 24);
  CHECK(build_grid(specs, values, 12500, 1).size() == kMaxCells);
}

TEST_CASE("declared tables exist from the start and accept only their columns", "[experiment][table]") {
  CellOutput out(std::vector<TableSpec>{{kMainTable, {"a", "b"}}, {"curve", {"a", "step"}}});
  REQUIRE(out.tables().size() == 2);
  CHECK(out.tables().at("curve").rows.empty());
  CHECK(out.tables().at("curve").to_csv() == "a,step\n");
  out.add_row(Row().add("a", 1).add("b", 2.5));
  CHECK(out.tables().at(kMainTable).to_csv() == "a,b\n1,2.5\n");
  CHECK_THROWS_WITH(out.add_row(Row().add("a", 1).add("x", 2)),
                    Catch::Contains("(a,x)") && Catch::Contains("(a,b)"));
  CHECK_THROWS_WITH(out.add_row(Row().add("a", 1), "other"),
                    Catch::Contains("'other' is not declared") && Catch::Contains("curve, main"));
  using Specs = std::vector<TableSpec>;
  CHECK_THROWS_AS(CellOutput(Specs{{"t", {}}}), std::logic_error);
  CHECK_THROWS_AS(CellOutput(Specs{{"t", {"a", "a"}}}), std::logic_error);
  CHECK_THROWS_AS(CellOutput(Specs{{"t", {"a"}}, {"t", {"b"}}}), std::logic_error);
  CHECK_THROWS_AS(CellOutput(Specs{{"bad name", {"a"}}}), std::logic_error);
}

TEST_CASE("read_file reports read errors and oversized files", "[experiment][io]") {
  TempDir d;
  const fs::path p = d.path / "c.ini";
  std::ofstream(p) << "abc\n";
  CHECK(read_file(p.string()) == "abc\n");
  CHECK_THROWS_WITH(read_file(p.string(), 3), Catch::Contains("larger than 3 bytes"));
  CHECK(read_file(p.string(), 4) == "abc\n");
  CHECK_THROWS_WITH(read_file((d.path / "none").string()),
                    Catch::Contains("none") && Catch::Contains("No such file"));
  // /proc/self/mem opens but reading at offset 0 fails (EIO): not an empty file.
  if (fs::exists("/proc/self/mem")) {
    CHECK_THROWS_WITH(read_file("/proc/self/mem"),
                      Catch::Contains("cannot read '/proc/self/mem'") &&
                          Catch::Contains("Input/output error"));
    CHECK_FALSE(read_text_file("/proc/self/mem").has_value());
  }
}

TEST_CASE("the output directory check rejects dangling links and pseudo file systems", "[experiment][io]") {
  TempDir d;
  fs::create_symlink(d.path / "gone" / "x", d.path / "link");
  CHECK_THAT(check_output_dir((d.path / "link").string()),
             Catch::Contains("dangling symbolic link") && Catch::Contains("gone"));
  CHECK_THAT(check_output_dir((d.path / "link" / "sub").string()), Catch::Contains("dangling"));
  fs::create_directories(d.path / "o");
  fs::create_symlink(d.path / "gone", d.path / "o" / "cells");
  CHECK_THAT(check_output_dir((d.path / "o").string(), "cells"), Catch::Contains("dangling"));
  // A link to an existing directory is fine.
  fs::create_symlink(d.path / "o", d.path / "good");
  CHECK(check_output_dir((d.path / "good" / "new").string()).empty());
  if (fs::is_directory("/proc/self")) {
    CHECK_THAT(check_output_dir("/proc/seqlab_out"), Catch::Contains("'/proc' is on a proc file system"));
  }
  if (fs::is_directory("/sys/kernel")) CHECK_FALSE(check_output_dir("/sys/seqlab_out").empty());
  CHECK_FALSE(fs::exists(d.path / "gone"));
}

TEST_CASE("stale temporary files of dead processes on this host are removed", "[experiment][io]") {
  TempDir d;
  // A pid that is certainly dead: a child that has exited and been reaped.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(0);
  REQUIRE(waitpid(child, nullptr, 0) == child);
  const std::string mine = temp_file_name("a.json");  // ".a.json~<host>~<our pid>.tmp"
  const std::string our_pid = "~" + std::to_string(getpid()) + ".tmp";
  REQUIRE(mine.size() > our_pid.size());
  REQUIRE(mine.compare(mine.size() - our_pid.size(), our_pid.size(), our_pid) == 0);
  const std::string host_prefix = mine.substr(0, mine.size() - our_pid.size());  // ".a.json~<host>"
  const std::string dead = host_prefix + "~" + std::to_string(child) + ".tmp";
  const std::string other_host = ".a.json~other-host.example~" + std::to_string(child) + ".tmp";
  const std::string suffix_host = ".a.json~x." + host_prefix.substr(8) + "~" + std::to_string(child) + ".tmp";
  for (const auto& n : {mine, dead, other_host, suffix_host, std::string("a.json"),
                        std::string(".a.json.tmp")}) {
    std::ofstream(d.path / n) << "x";
  }
  CHECK(remove_stale_temp_files(d.path.string()) == 1);
  CHECK_FALSE(fs::exists(d.path / dead));
  for (const auto& n : {mine, other_host, suffix_host, std::string("a.json"), std::string(".a.json.tmp")}) {
    INFO(n);
    CHECK(fs::exists(d.path / n));
  }
  CHECK(remove_stale_temp_files((d.path / "missing").string()) == 0);
}
