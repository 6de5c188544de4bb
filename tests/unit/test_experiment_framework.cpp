// Unit tests of the experiment framework's pieces: option parsing, number formatting, the grid
// and its seed rule, cell ranges, tables and CSV, atomic writes, the --out check.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "seqlab/core/rng.hpp"
#include "seqlab/experiment/grid.hpp"
#include "seqlab/experiment/io.hpp"
#include "seqlab/experiment/options.hpp"
#include "seqlab/experiment/table.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
namespace fs = std::filesystem;

namespace {
// A fresh empty directory under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/seqlab_exp_unit_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

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
  CHECK_THAT(error_of(T, "99999999999999999999"), Catch::Contains("not an integer"));
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
  CHECK_THAT(error_of(lr, "0"), Catch::Contains("a real > 0"));
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
