#include "seqlab/experiment/experiment.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <new>
#include <set>
#include <sstream>
#include <stdexcept>

#include <boost/program_options.hpp>

#include "seqlab/core/threads.hpp"
#include "seqlab/experiment/io.hpp"
#include "seqlab/experiment/metadata.hpp"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace seqlab::experiment {

std::uint64_t fnv1a64(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string cell_file_name(const Cell& cell, const std::string& experiment) {
  std::string label;
  for (const auto& k : cell.sweep_keys) label += k + "=" + cell.params.text(k) + "_";
  label += "seed=" + std::to_string(cell.replicate);
  for (char& ch : label) {
    const bool ok = std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' ||
                    ch == '=' || ch == '_';
    if (!ok) ch = '_';
  }
  if (label.size() > 120) label.resize(120);
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(fnv1a64(cell.fingerprint(experiment).dump())));
  return label + "_" + hash + ".json";
}

namespace {

// Run options: command line only (seed and seeds are experiment-level keys, see key_specs()).
const std::vector<std::string> kRunFlags = {"help",  "config", "scale", "list-cells", "cell",
                                            "cells", "out",    "merge", "force",      "threads",
                                            "quiet", "status", "checkpoint-every"};

struct Invocation {
  bool help = false, list_cells = false, merge = false, force = false, quiet = false;
  bool status = false;
  bool has_range = false;
  std::size_t first = 0, last = 0;
  std::string out;
  int threads = 1;
  int checkpoint_every = 0;
  std::uint64_t base_seed = 1;
  std::size_t replicates = 1;
  std::string config_path;
  std::string scale;
  std::vector<OptionSpec> keys;  // the experiment's keys, then seeds and seed
  std::map<std::string, std::vector<Value>> values;
  std::vector<Cell> cells;
  nlohmann::json config_json;
  std::string command_line;
};

std::vector<OptionSpec> key_specs(const ExperimentSpec& spec) {
  std::vector<OptionSpec> keys = spec.options;
  keys.push_back(int_option("seeds", spec.default_seeds, "runs",
                            "replicates per grid point (seed indices 0..seeds-1)")
                     .at_least(1)
                     .at_most(static_cast<double>(kMaxSeeds)));
  // 9223372036854775807 as a double is 2^63, which an integer key reads as the int64 maximum.
  keys.push_back(int_option("seed", 1, "1",
                            "base seed; replicate r uses derive_seed(seed, r) (see README)")
                     .at_least(0)
                     .at_most(9223372036854775807.0));
  return keys;
}

OptionSpec threads_spec() {
  return int_option("threads", 1, "threads", "thread budget (OpenBLAS)")
      .at_least(1)
      .at_most(static_cast<double>(kMaxThreads));
}

OptionSpec checkpoint_every_spec() {
  return int_option("checkpoint-every", 0, "updates",
                    "save a training checkpoint every N updates (0 = off)")
      .at_least(0)
      .at_most(static_cast<double>(kMaxCheckpointEvery));
}

std::string quote_arg(const std::string& a) {
  if (!a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos) return a;
  std::string out = "'";
  for (char c : a) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string key_list(const std::vector<OptionSpec>& keys) {
  std::string out;
  for (std::size_t i = 0; i < keys.size(); ++i) out += (i ? ", " : "") + keys[i].key;
  return out;
}

std::string help_text(const ExperimentSpec& spec, const std::vector<OptionSpec>& keys) {
  std::ostringstream h;
  h << "Usage: " << spec.name
    << " [--scale tiny|quick|paper | --config FILE.ini] [--KEY=VALUE ...] [run options]\n\n";
  if (!spec.description.empty()) h << spec.description << "\n\n";
  h << "Run options (command line only):\n"
       "  --help               this text\n"
       "  --scale NAME         load <experiment dir>/configs/NAME.ini (tiny, quick or paper); default quick\n"
       "                       when --config is not given\n"
       "  --config FILE.ini    load FILE.ini instead (lines `key = value`, '#' comments)\n"
       "  --list-cells         print the grid, one `index key=value ... seed=r` line per cell, and exit\n"
       "  --status             print one `index done|missing|partial|corrupt key=value ... seed=r`\n"
       "                       line per cell of DIR/cells/ (of --cell/--cells if given), checked as a\n"
       "                       run checks them (partial: not finished, but checkpoints exist), and\n"
       "                       exit; writes nothing\n"
       "  --cell N             run cell N only (0-based; see --list-cells)\n"
       "  --cells A-B          run cells A..B (inclusive)\n"
       "  --out DIR            output directory [default: results/"
    << spec.name
    << "]; finished cells go to DIR/cells/\n"
       "  --merge              join the finished cells into DIR/"
    << spec.name << ".csv (+ DIR/" << spec.name << "_<table>.csv) and DIR/" << spec.name
    << ".meta.json;\n"
       "                       without --cell/--cells all cells run and are merged anyway\n"
       "  --force              recompute cells that are already done (default: skip them)\n"
       "  --threads N          thread budget for OpenBLAS [threads, default 1]; an integer in [1, "
    << kMaxThreads << "]\n"
       "  --quiet              no progress output\n"
       "  --checkpoint-every N save a training checkpoint every N updates (and at the end of each\n"
       "                       training phase) in DIR/checkpoints/; a killed cell, rerun, resumes\n"
       "                       from it with byte-identical results (wall-clock columns aside); a\n"
       "                       finished cell removes its checkpoints [updates, default 0 = off];\n"
       "                       an integer in [0, "
    << kMaxCheckpointEvery << "]\n\n"
       "Keys (config file `key = value`, or --key=VALUE on the command line, which wins; a key\n"
       "set in neither has the built-in default shown). Sweep keys take comma-separated lists;\n"
       "the grid is their Cartesian product x seeds:\n";
  for (const auto& k : keys) {
    std::string head = "  --" + k.key + "=" + (k.sweep ? "LIST" : "VALUE");
    if (head.size() < 22) head.resize(22, ' ');
    h << head << " [" << (k.unit.empty() ? "-" : k.unit)
      << "] default " << k.default_text() << (k.sweep ? " (sweep)" : "") << "\n";
    h << "                         " << k.help << "; " << k.allowed() << "\n";
  }
  h << "\nThe grid has at most " << kMaxCells
    << " cells. Reals must be finite floats (|x| <= 3.40282347e+38, nonzero not rounding to 0).\n"
       "Exit status: 0 done; 2 bad input (nothing written); 1 runtime failure (including out of\n"
       "memory) or missing or corrupt cells at --merge.\n";
  return h.str();
}

nlohmann::json value_json(const Value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::get<std::string>(v);
}

// Parses and validates everything; throws ConfigError for bad input. Creates nothing.
Invocation parse_invocation(int argc, const char* const* argv, const ExperimentSpec& spec) {
  Invocation inv;
  for (int i = 0; i < argc; ++i) inv.command_line += (i ? " " : "") + quote_arg(argv[i]);
  inv.keys = key_specs(spec);

  po::options_description run_desc, key_desc;
  run_desc.add_options()("help", po::bool_switch())("config", po::value<std::string>())(
      "scale", po::value<std::string>())("list-cells", po::bool_switch())(
      "cell", po::value<std::string>())("cells", po::value<std::string>())(
      "out", po::value<std::string>())("merge", po::bool_switch())("force", po::bool_switch())(
      "threads", po::value<std::string>())("quiet", po::bool_switch())("status", po::bool_switch())(
      "checkpoint-every", po::value<std::string>());
  for (const auto& k : inv.keys) key_desc.add_options()(k.key.c_str(), po::value<std::string>());
  // Positional arguments are collected under a hidden name only to name them in the error.
  po::options_description hidden;
  hidden.add_options()("positional-arguments", po::value<std::vector<std::string>>());
  po::positional_options_description positional;
  positional.add("positional-arguments", -1);
  po::options_description cli_desc;
  cli_desc.add(run_desc).add(key_desc).add(hidden);

  const std::string allowed_keys =
      "allowed keys are " + key_list(inv.keys) + " (see --help for them and the run options)";

  // `--key=` (empty value): po rejects it with a message that does not say what is allowed.
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.size() > 3 && a.rfind("--", 0) == 0 && a.back() == '=') {
      const std::string key = a.substr(2, a.size() - 3);
      for (const auto& k : inv.keys) {
        if (k.key == key) k.parse("", "the command line");  // throws ConfigError
      }
      if (key == "threads") threads_spec().parse("", "the command line");
      if (key == "checkpoint-every") checkpoint_every_spec().parse("", "the command line");
    }
  }

  po::variables_map vm;
  std::set<std::string> cli_keys;
  try {
    const auto style = po::command_line_style::default_style &
                       ~po::command_line_style::allow_guessing;
    po::parsed_options parsed =
        po::command_line_parser(argc, argv).options(cli_desc).positional(positional).style(style).run();
    for (const auto& o : parsed.options) cli_keys.insert(o.string_key);
    po::store(parsed, vm);  // the command line first: store() never overwrites, so it wins
  } catch (const po::unknown_option& e) {
    const std::string given = e.get_option_name();  // "--foo" or "--foo=1"
    const auto eq = given.find('=');
    const bool negative_number =
        given.size() > 1 && given[0] == '-' && std::isdigit(static_cast<unsigned char>(given[1]));
    throw ConfigError("unknown key '" + given.substr(0, eq) + "'" +
                      (eq == std::string::npos ? std::string()
                                               : " with value '" + given.substr(eq + 1) + "'") +
                      " (from the command line): " +
                      (negative_number ? "a negative value must be attached: --key=" + given + "; "
                                       : std::string()) +
                      allowed_keys);
  } catch (const po::error& e) {
    throw ConfigError(std::string(e.what()) + " (from the command line; see --help)");
  }
  if (vm.count("positional-arguments")) {
    throw ConfigError("unexpected argument '" +
                      vm["positional-arguments"].as<std::vector<std::string>>().front() +
                      "' (from the command line): expected --key=value options (see --help)");
  }
  inv.help = vm["help"].as<bool>();
  if (inv.help) return inv;
  inv.list_cells = vm["list-cells"].as<bool>();
  inv.merge = vm["merge"].as<bool>();
  inv.force = vm["force"].as<bool>();
  inv.quiet = vm["quiet"].as<bool>();
  inv.status = vm["status"].as<bool>();

  // The config file.
  if (vm.count("config") && vm.count("scale")) {
    throw ConfigError("--config and --scale: give only one of them (got --config=" +
                      vm["config"].as<std::string>() + " and --scale=" +
                      vm["scale"].as<std::string>() + ")");
  }
  if (vm.count("config")) {
    inv.config_path = vm["config"].as<std::string>();
    std::error_code ec;
    if (!fs::is_regular_file(inv.config_path, ec)) {
      throw ConfigError("--config: cannot read config file '" + inv.config_path +
                        "': " + (fs::exists(inv.config_path, ec) ? "not a regular file"
                                                                 : "no such file") +
                        "; expected an existing .ini file");
    }
  } else {
    inv.scale = vm.count("scale") ? vm["scale"].as<std::string>() : "quick";
    if (spec.experiment_dir.empty()) {
      throw ConfigError("--scale: invalid value '" + inv.scale +
                        "': this binary has no configs directory; expected --config FILE.ini");
    }
    const fs::path dir = fs::path(spec.experiment_dir) / "configs";
    std::vector<std::string> scales;
    std::error_code ec;
    if (!spec.experiment_dir.empty() && fs::is_directory(dir, ec)) {
      for (const auto& e : fs::directory_iterator(dir, ec)) {
        if (e.path().extension() == ".ini") scales.push_back(e.path().stem().string());
      }
    }
    std::sort(scales.begin(), scales.end());
    if (std::find(scales.begin(), scales.end(), inv.scale) == scales.end()) {
      std::string list;
      for (std::size_t i = 0; i < scales.size(); ++i) list += (i ? "|" : "") + scales[i];
      throw ConfigError("--scale: invalid value '" + inv.scale + "': expected one of " +
                        (list.empty() ? std::string("(none)") : list) + " (the .ini files in " +
                        dir.string() + "), or --config FILE.ini");
    }
    inv.config_path = (dir / (inv.scale + ".ini")).string();
  }
  {
    // Read it whole first, checking for read errors (an unreadable file such as /proc/self/mem
    // must not pass for an empty one) and bounding its size.
    std::string text;
    try {
      text = read_file(inv.config_path, kMaxConfigBytes);
    } catch (const std::runtime_error& e) {
      throw ConfigError(std::string(vm.count("config") ? "--config" : "--scale") + ": " +
                        e.what() + "; expected a readable .ini file of at most " +
                        std::to_string(kMaxConfigBytes) + " bytes");
    }
    std::istringstream in(text);
    try {
      po::store(po::parse_config_file(in, key_desc, false), vm);
    } catch (const po::unknown_option& e) {
      throw ConfigError("unknown key '" + e.get_option_name() + "' (from " + inv.config_path +
                        "): " + allowed_keys);
    } catch (const po::error& e) {
      throw ConfigError(inv.config_path + ": " + e.what());
    }
  }
  po::notify(vm);

  // Values of every key: command line, else config file, else built-in default.
  nlohmann::json cfg = nlohmann::json::object();
  for (const auto& k : inv.keys) {
    std::vector<Value> vals = k.defaults;
    if (vm.count(k.key)) {
      const std::string source = cli_keys.count(k.key) ? "the command line" : inv.config_path;
      vals = k.parse(vm[k.key].as<std::string>(), source);
    }
    if (k.sweep) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& v : vals) arr.push_back(value_json(v));
      cfg[k.key] = arr;
    } else {
      cfg[k.key] = value_json(vals.at(0));
    }
    inv.values[k.key] = std::move(vals);
  }
  inv.replicates = static_cast<std::size_t>(std::get<std::int64_t>(inv.values.at("seeds")[0]));
  inv.base_seed = static_cast<std::uint64_t>(std::get<std::int64_t>(inv.values.at("seed")[0]));
  if (vm.count("threads")) {
    inv.threads = static_cast<int>(std::get<std::int64_t>(
        threads_spec().parse(vm["threads"].as<std::string>(), "the command line").at(0)));
  }
  if (vm.count("checkpoint-every")) {
    inv.checkpoint_every = static_cast<int>(std::get<std::int64_t>(
        checkpoint_every_spec()
            .parse(vm["checkpoint-every"].as<std::string>(), "the command line")
            .at(0)));
  }
  cfg["threads"] = inv.threads;
  cfg["config_file"] = inv.config_path;
  cfg["scale"] = inv.scale.empty() ? nlohmann::json(nullptr) : nlohmann::json(inv.scale);

  // The grid and the experiment's own checks.
  std::map<std::string, std::vector<Value>> grid_values;
  for (const auto& k : spec.options) grid_values[k.key] = inv.values.at(k.key);
  inv.cells = build_grid(spec.options, grid_values, inv.replicates, inv.base_seed);
  if (spec.validate) {
    for (const auto& c : inv.cells) {
      try {
        spec.validate(c);
      } catch (const ConfigError&) {
        throw;
      } catch (const std::invalid_argument& e) {
        throw ConfigError(e.what());
      }
    }
  }

  // Which cells.
  if (vm.count("cell") && vm.count("cells")) {
    throw ConfigError("--cell and --cells: give only one of them (got --cell=" +
                      vm["cell"].as<std::string>() + " and --cells=" +
                      vm["cells"].as<std::string>() + ")");
  }
  for (const char* flag : {"cell", "cells"}) {
    if (vm.count(flag)) {
      const auto r = parse_cell_range(std::string("--") + flag, vm[flag].as<std::string>(),
                                      inv.cells.size());
      inv.has_range = true;
      inv.first = r.first;
      inv.last = r.second;
    }
  }

  // Where results go: checked now, created only after every check has passed.
  inv.out = vm.count("out") ? vm["out"].as<std::string>() : "results/" + spec.name;
  cfg["out"] = inv.out;
  if (!inv.list_cells && !inv.status) {  // queries read --out (status) or ignore it
    std::string why = check_output_dir(inv.out, "cells");
    if (why.empty() && inv.checkpoint_every > 0) why = check_output_dir(inv.out, "checkpoints");
    if (!why.empty()) {
      throw ConfigError("--out: cannot write results to '" + inv.out + "': " + why +
                        "; expected a writable directory (or one that can be created)");
    }
  }
  inv.config_json = std::move(cfg);
  return inv;
}

bool quiet_log(const Invocation& inv) { return inv.quiet; }

void log(const Invocation& inv, const ExperimentSpec& spec, const std::string& msg) {
  if (quiet_log(inv)) return;
  std::cerr << "[" << spec.name << "] " << msg << std::endl;
}

std::string join_names(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + v[i];
  return out;
}

// "" if `tables` (the "tables" object of a cell file, or a fresh CellOutput's) holds exactly the
// declared tables with their declared columns, a non-empty main table, and, in every column named
// like a sweep key, this cell's value of that key; else what is wrong.
std::string check_tables(const nlohmann::json& tables, const Cell& cell, const ExperimentSpec& spec) {
  if (!tables.is_object()) return "\"tables\" is not an object";
  for (const auto& decl : spec.tables) {
    if (!tables.contains(decl.name)) return "table '" + decl.name + "' is missing";
    Table t;
    try {
      t = Table::from_json(tables.at(decl.name));
    } catch (const std::runtime_error& e) {
      return "table '" + decl.name + "': " + e.what();
    }
    if (t.columns != decl.columns) {
      return "table '" + decl.name + "' has the columns (" + join_names(t.columns) +
             ") instead of the declared (" + join_names(decl.columns) + ")";
    }
    if (decl.name == kMainTable && t.rows.empty()) return "table '" + decl.name + "' has no rows";
    for (const auto& key : cell.sweep_keys) {
      const auto col = std::find(t.columns.begin(), t.columns.end(), key);
      if (col == t.columns.end()) continue;
      const auto c = static_cast<std::size_t>(col - t.columns.begin());
      const std::string expected = cell.params.text(key);
      for (std::size_t r = 0; r < t.rows.size(); ++r) {
        if (t.rows[r][c] != expected) {
          return "table '" + decl.name + "' row " + std::to_string(r) + ": column '" + key +
                 "' is '" + t.rows[r][c] + "' but this cell has " + key + "=" + expected;
        }
      }
    }
  }
  for (const auto& [name, t] : tables.items()) {
    (void)t;
    const bool declared = std::any_of(spec.tables.begin(), spec.tables.end(),
                                      [&](const TableSpec& d) { return d.name == name; });
    if (!declared) return "table '" + name + "' is not declared by the experiment";
  }
  return "";
}

// What load_cell found.
struct StoredCell {
  enum class Status { Missing, Corrupt, Ok } status = Status::Missing;
  std::string why;        // Corrupt: what is wrong
  nlohmann::json json;    // Ok: the cell file
};

// Reads and verifies <cells>/<file of cell>: fingerprint, checksum, declared tables and columns,
// sweep-key values (check_tables). A file that does not exist is Missing; any other problem
// (unreadable, not JSON, another cell's fingerprint, checksum mismatch...) is Corrupt.
StoredCell load_cell(const fs::path& file, const Cell& cell, const nlohmann::json& fingerprint,
                     const ExperimentSpec& spec) {
  StoredCell out;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(file, ec))) return out;
  out.status = StoredCell::Status::Corrupt;
  std::string text;
  try {
    text = read_file(file.string());
  } catch (const std::runtime_error& e) {
    out.why = e.what();
    return out;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    out.why = "not valid JSON (truncated or edited)";
    return out;
  }
  if (!j.is_object() || !j.contains("fingerprint") || j.at("fingerprint") != fingerprint) {
    out.why = "its fingerprint is not this cell's";
    return out;
  }
  if (!j.contains("tables") || !j.contains("checksum") || !j.at("checksum").is_string()) {
    out.why = "no tables or no checksum (incomplete, or written by an older version)";
    return out;
  }
  if (j.at("checksum").get<std::string>() != cell_checksum(fingerprint, j.at("tables"))) {
    out.why = "checksum mismatch (the file was edited or damaged)";
    return out;
  }
  if (auto why = check_tables(j.at("tables"), cell, spec); !why.empty()) {
    out.why = why;
    return out;
  }
  out.status = StoredCell::Status::Ok;
  out.json = std::move(j);
  return out;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", s);
  return buf;
}

// Merges every cell into the CSVs and meta.json. Returns the exit status.
int merge(const Invocation& inv, const ExperimentSpec& spec, const std::string& start_utc) {
  const fs::path out(inv.out);
  const fs::path cells_dir = out / "cells";
  std::vector<nlohmann::json> stored;
  std::vector<std::size_t> missing, corrupt;
  std::string first_corrupt;
  for (const auto& c : inv.cells) {
    const fs::path file = cells_dir / cell_file_name(c, spec.name);
    auto r = load_cell(file, c, c.fingerprint(spec.name), spec);
    if (r.status == StoredCell::Status::Missing) {
      missing.push_back(c.index);
    } else if (r.status == StoredCell::Status::Corrupt) {
      if (corrupt.empty()) first_corrupt = c.label() + ": " + file.string() + ": " + r.why;
      corrupt.push_back(c.index);
    } else {
      stored.push_back(std::move(r.json));
    }
  }
  if (!missing.empty() || !corrupt.empty()) {
    const std::string n = std::to_string(inv.cells.size());
    std::string msg = "merge: ";
    if (!missing.empty()) {
      msg += std::to_string(missing.size()) + " of " + n + " cells are not done: " +
             format_index_list(missing) + " (first: " + inv.cells[missing.front()].label() + ")";
    }
    if (!corrupt.empty()) {
      msg += std::string(missing.empty() ? "" : "; ") + std::to_string(corrupt.size()) + " of " +
             n + " cells are corrupt: " + format_index_list(corrupt) + " (first: " +
             first_corrupt + ")";
    }
    std::cerr << spec.name << ": error: " << msg
              << "; run them (--cell N / --cells A-B; a corrupt cell is recomputed), then --merge"
              << std::endl;
    return 1;
  }
  // Every declared table is written, header only when no cell has rows for it, so the set of
  // CSV files never depends on the results (no stale table from an earlier merge survives).
  nlohmann::json files = nlohmann::json::object();
  std::vector<std::pair<fs::path, std::string>> outputs;
  std::vector<std::string> order;
  for (const auto& decl : spec.tables) {
    Table merged;
    merged.columns = decl.columns;
    for (const auto& j : stored) {
      const Table t = Table::from_json(j.at("tables").at(decl.name));
      merged.rows.insert(merged.rows.end(), t.rows.begin(), t.rows.end());
    }
    const std::string file =
        decl.name == kMainTable ? spec.name + ".csv" : spec.name + "_" + decl.name + ".csv";
    files[decl.name] = {{"file", file}, {"rows", merged.rows.size()}, {"columns", merged.columns}};
    outputs.emplace_back(out / file, merged.to_csv());
    order.push_back(decl.name);
  }

  nlohmann::json meta;
  meta["experiment"] = spec.name;
  meta["description"] = spec.description;
  const auto build = build_info();
  meta["seqlab_version"] = build.at("seqlab_version");
  meta["git"] = {{"commit", build.at("git_commit")}, {"dirty", build.at("git_dirty")}};
  meta["build"] = {{"compiler", build.at("compiler")},
                   {"cxx_flags", build.at("cxx_flags")},
                   {"build_type", build.at("build_type")}};
  const auto machine = machine_info();
  meta["blas"] = {{"config", machine.at("blas_config")}, {"threads", machine.at("threads")}};
  meta["machine"] = {{"host", machine.at("host")},
                     {"cpu_model", machine.at("cpu_model")},
                     {"cores", machine.at("cores")}};
  std::string first_start, last_end;
  nlohmann::json cell_meta = nlohmann::json::array();
  std::set<std::string> commits;
  for (std::size_t i = 0; i < stored.size(); ++i) {
    const auto& j = stored[i];
    const std::string s = j.value("start_utc", ""), e = j.value("end_utc", "");
    if (!s.empty() && (first_start.empty() || s < first_start)) first_start = s;
    if (e > last_end) last_end = e;
    commits.insert(j.value("git_commit", "unknown"));
    cell_meta.push_back({{"index", i},
                         {"label", inv.cells[i].label()},
                         {"file", (fs::path("cells") / cell_file_name(inv.cells[i], spec.name)).string()},
                         {"seed", j.at("fingerprint").at("replicate")},
                         {"derived_seed", inv.cells[i].seed},
                         {"host", j.value("host", "")},
                         {"threads", j.value("threads", 0)},
                         {"start_utc", s},
                         {"end_utc", e},
                         {"wall_time_s", j.value("wall_time_s", 0.0)},
                         {"git_commit", j.value("git_commit", "unknown")},
                         {"git_dirty", j.contains("git_dirty") ? j["git_dirty"] : nullptr},
                         {"checksum", j.at("checksum")}});
  }
  meta["start_utc"] = first_start;  // earliest cell start
  meta["end_utc"] = last_end;       // latest cell end
  meta["merge_start_utc"] = start_utc;
  meta["merge_end_utc"] = utc_now();
  meta["config"] = inv.config_json;
  meta["command_line"] = inv.command_line;
  meta["cells_count"] = inv.cells.size();
  meta["sweep_keys"] = inv.cells.empty() ? nlohmann::json::array()
                                         : nlohmann::json(inv.cells.front().sweep_keys);
  meta["seed_rule"] =
      "cell seed = derive_seed(seed, replicate); streams = derive_seed(seed, replicate, purpose) "
      "(seqlab/core/rng.hpp); independent of the other grid values";
  meta["tables"] = files;
  meta["nondeterministic_columns"] = spec.timing_columns;
  meta["cells_git_commits"] = commits;
  meta["cells"] = cell_meta;
  for (const auto& [path, text] : outputs) write_file_atomic(path.string(), text);
  const fs::path meta_path = out / (spec.name + ".meta.json");
  write_file_atomic(meta_path.string(), meta.dump(2) + "\n");
  for (const auto& name : order) {
    log(inv, spec,
        "wrote " + (out / files[name]["file"].get<std::string>()).string() + " (" +
            std::to_string(files[name]["rows"].get<std::size_t>()) + " rows)");
  }
  log(inv, spec, "wrote " + meta_path.string());
  return 0;
}

// "<cell file stem>": the cell's file name without ".json" (prefix of its checkpoint files).
std::string cell_stem(const Cell& c, const std::string& experiment) {
  std::string f = cell_file_name(c, experiment);
  return f.substr(0, f.size() - 5);
}

// The checkpoint files "<stem>.<phase>.ckpt" of one cell in `dir` (none if it does not exist).
std::vector<fs::path> cell_checkpoints(const fs::path& dir, const std::string& stem) {
  std::vector<fs::path> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return out;
  const std::string head = stem + ".", tail = ".ckpt";
  for (const auto& e : it) {
    const std::string name = e.path().filename().string();
    if (name.size() > head.size() + tail.size() && name.compare(0, head.size(), head) == 0 &&
        name.compare(name.size() - tail.size(), tail.size(), tail) == 0) {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Removes a cell's checkpoint files; returns how many. Errors are ignored (a leftover checkpoint
// is never used by another cell: its name and identity belong to this one).
std::size_t remove_cell_checkpoints(const fs::path& dir, const std::string& stem) {
  std::size_t n = 0;
  for (const auto& p : cell_checkpoints(dir, stem)) {
    std::error_code ec;
    if (fs::remove(p, ec)) ++n;
  }
  return n;
}

// --status: one "<index> done|missing|partial|corrupt <label>" line per cell of the range (all cells
// without --cell/--cells) on stdout, each stored cell verified by load_cell as a run does; why a
// cell is corrupt goes to stderr (unless --quiet). Reads only; creates and removes nothing.
void print_status(const Invocation& inv, const ExperimentSpec& spec) {
  const fs::path cells_dir = fs::path(inv.out) / "cells";
  const fs::path checkpoints_dir = fs::path(inv.out) / "checkpoints";
  const std::size_t first = inv.has_range ? inv.first : 0;
  const std::size_t last = inv.has_range ? inv.last : inv.cells.size() - 1;
  for (std::size_t i = first; i <= last; ++i) {
    const Cell& c = inv.cells[i];
    const fs::path file = cells_dir / cell_file_name(c, spec.name);
    const auto r = load_cell(file, c, c.fingerprint(spec.name), spec);
    const char* state = r.status == StoredCell::Status::Ok ? "done"
                        : r.status == StoredCell::Status::Missing
                            ? (cell_checkpoints(checkpoints_dir, cell_stem(c, spec.name)).empty()
                                   ? "missing"
                                   : "partial")
                            : "corrupt";
    std::cout << c.index << " " << state << " " << c.label() << "\n";
    if (r.status == StoredCell::Status::Corrupt) {
      log(inv, spec, "cell " + std::to_string(c.index) + ": " + file.string() + ": " + r.why);
    }
  }
}

// Creates `dir` and its missing ancestors. On failure removes the directories it created (empty
// ones only), so a failed start leaves nothing behind, and throws std::runtime_error.
void create_output_dirs(const fs::path& dir) {
  std::vector<fs::path> created;  // deepest first
  std::error_code ec;
  for (fs::path q = fs::absolute(dir, ec).lexically_normal(); !q.empty(); q = q.parent_path()) {
    if (fs::exists(fs::symlink_status(q, ec)) || q == q.root_path()) break;
    created.push_back(q);
    if (!q.has_parent_path() || q.parent_path() == q) break;
  }
  fs::create_directories(dir, ec);  // concurrent array tasks may race here: check the result
  if (!fs::is_directory(dir)) {
    for (const auto& q : created) {
      std::error_code rm;
      if (fs::is_directory(fs::symlink_status(q, rm)) && fs::is_empty(q, rm)) fs::remove(q, rm);
    }
    throw std::runtime_error("cannot create directory '" + dir.string() +
                             "': " + (ec ? ec.message() : std::string("not a directory")));
  }
}

int execute(const Invocation& inv, const ExperimentSpec& spec) {
  const std::string start_utc = utc_now();
  set_num_threads(inv.threads);
  const fs::path cells_dir = fs::path(inv.out) / "cells";
  const fs::path checkpoints_dir = fs::path(inv.out) / "checkpoints";
  create_output_dirs(cells_dir);
  if (inv.checkpoint_every > 0) create_output_dirs(checkpoints_dir);
  // Temporary files of processes on this host that were killed mid-write.
  const std::size_t stale = remove_stale_temp_files(cells_dir.string()) +
                            remove_stale_temp_files(inv.out) +
                            remove_stale_temp_files(checkpoints_dir.string());
  if (stale > 0) {
    log(inv, spec, "removed " + std::to_string(stale) +
                       " temporary file(s) left by killed processes on this host");
  }

  const bool run_any = inv.has_range || !inv.merge;
  const std::size_t first = inv.has_range ? inv.first : 0;
  const std::size_t last = inv.has_range ? inv.last : inv.cells.size() - 1;
  std::vector<std::size_t> failed;
  std::size_t other_commit = 0;  // reused cells computed at another git commit
  if (run_any) {
    const auto build = build_info();
    const auto machine = machine_info();
    for (std::size_t i = first; i <= last; ++i) {
      const Cell& c = inv.cells[i];
      const std::string prefix = "cell " + std::to_string(i) + "/" +
                                 std::to_string(inv.cells.size()) + " (" + c.label() + ")";
      const fs::path file = cells_dir / cell_file_name(c, spec.name);
      const auto fp = c.fingerprint(spec.name);
      const std::string stem = cell_stem(c, spec.name);
      if (inv.force) {
        if (const std::size_t n = remove_cell_checkpoints(checkpoints_dir, stem)) {
          log(inv, spec, prefix + ": --force: removed " + std::to_string(n) + " old checkpoint(s)");
        }
      } else {
        const auto stored = load_cell(file, c, fp, spec);
        if (stored.status == StoredCell::Status::Ok) {
          if (stored.json.value("git_commit", std::string()) != build.value("git_commit", "")) {
            ++other_commit;
          }
          remove_cell_checkpoints(checkpoints_dir, stem);  // left by a kill after the write
          log(inv, spec, prefix + ": already done, skipped (--force recomputes)");
          continue;
        }
        if (stored.status == StoredCell::Status::Corrupt) {
          log(inv, spec, prefix + ": stored result " + file.string() + " is corrupt (" +
                             stored.why + "); recomputing");
        }
      }
      Cell run = c;
      run.quiet = inv.quiet;
      run.checkpoint_every = inv.checkpoint_every;
      run.checkpoint_prefix = (checkpoints_dir / stem).string();
      run.checkpoint_identity = fp.dump() + " threads=" + std::to_string(inv.threads) +
                                " seqlab=" + build.value("seqlab_version", "") +
                                " commit=" + build.value("git_commit", "");
      const std::string cell_start = utc_now();
      const auto t0 = std::chrono::steady_clock::now();
      nlohmann::json tables = nlohmann::json::object();
      try {
        CellOutput output(spec.tables);
        spec.run_cell(run, output);
        for (const auto& [name, t] : output.tables()) tables[name] = t.to_json();
        if (auto why = check_tables(tables, c, spec); !why.empty()) {
          throw std::logic_error("its output does not match the experiment's declared tables: " +
                                 why);
        }
      } catch (const std::bad_alloc& e) {
        std::cerr << spec.name << ": error: " << prefix << ": out of memory (" << e.what()
                  << "): the sizes of this cell are too large for this machine's memory; "
                     "reduce them"
                  << std::endl;
        failed.push_back(i);
        continue;
      } catch (const std::exception& e) {
        std::cerr << spec.name << ": error: " << prefix << " failed: " << e.what() << std::endl;
        failed.push_back(i);
        continue;
      }
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      nlohmann::json j = {{"experiment", spec.name},
                          {"index", i},
                          {"label", c.label()},
                          {"fingerprint", fp},
                          {"host", machine.at("host")},
                          {"threads", inv.threads},
                          {"start_utc", cell_start},
                          {"end_utc", utc_now()},
                          {"wall_time_s", wall},
                          {"git_commit", build.at("git_commit")},
                          {"git_dirty", build.at("git_dirty")},
                          {"seqlab_version", build.at("seqlab_version")},
                          {"command_line", inv.command_line},
                          {"checksum", cell_checksum(fp, tables)},
                          {"tables", tables}};
      write_file_atomic(file.string(), j.dump(1) + "\n");
      remove_cell_checkpoints(checkpoints_dir, stem);
      log(inv, spec, prefix + ": done in " + seconds_text(wall) + " s");
    }
  }
  if (other_commit > 0) {
    log(inv, spec,
        "note: " + std::to_string(other_commit) +
            " reused cell(s) were computed at another git commit than this build's (see "
            "meta.json \"cells\"); --force recomputes them");
  }
  if (!failed.empty()) {
    std::cerr << spec.name << ": error: " << failed.size() << " cell(s) failed: "
              << format_index_list(failed) << "; not merged" << std::endl;
    return 1;
  }
  if (inv.merge || !inv.has_range) return merge(inv, spec, start_utc);
  return 0;
}

void check_spec(const ExperimentSpec& spec) {
  if (spec.name.empty()) throw std::logic_error("ExperimentSpec: empty name");
  for (char ch : spec.name) {
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'))
      throw std::logic_error("ExperimentSpec: name '" + spec.name +
                             "' must be letters, digits and '_'");
  }
  if (!spec.run_cell) throw std::logic_error("ExperimentSpec " + spec.name + ": no run_cell");
  std::set<std::string> seen;
  for (const auto& o : spec.options) {
    const bool reserved = o.key == "seeds" || o.key == "seed" ||
                          std::find(kRunFlags.begin(), kRunFlags.end(), o.key) != kRunFlags.end();
    if (reserved || o.key.empty() || !seen.insert(o.key).second) {
      throw std::logic_error("ExperimentSpec " + spec.name + ": key '" + o.key +
                             "' is empty, reserved or declared twice");
    }
    if (o.type == ValueType::Int && !o.max) {
      throw std::logic_error("ExperimentSpec " + spec.name + ": integer key '" + o.key +
                             "' has no upper bound; declare .at_most(N) with N what its consumer "
                             "can represent (e.g. <= 2147483647 for an int) and this machine can "
                             "hold");
    }
    if (o.defaults.empty() || (!o.sweep && o.defaults.size() != 1)) {
      throw std::logic_error("ExperimentSpec " + spec.name + ": key '" + o.key +
                             "' needs exactly one default (or a non-empty list for a sweep key)");
    }
  }
  for (const auto& o : key_specs(spec)) {
    for (const auto& d : o.defaults) {
      try {
        o.check(d, format_value(d), "the built-in defaults");
      } catch (const ConfigError& e) {
        throw std::logic_error("ExperimentSpec " + spec.name + ": bad default: " + e.what());
      }
    }
  }
  if (spec.tables.empty() || spec.tables.front().name != kMainTable) {
    throw std::logic_error("ExperimentSpec " + spec.name +
                           ": tables must declare the main table '" + kMainTable +
                           "' first, with its columns");
  }
  (void)CellOutput(spec.tables);  // throws std::logic_error for bad names or column lists
}

// Flushes std::cout; false (after a message on stderr) if writing failed, e.g. to /dev/full.
bool flush_stdout(const ExperimentSpec& spec) {
  std::cout.flush();
  if (std::cout) return true;
  std::cerr << spec.name << ": error: cannot write to standard output" << std::endl;
  return false;
}

}  // namespace

seqlab::LrSchedule cell_schedule(const Cell& cell) {
  const auto steps = cell.get_int("steps");
  const auto warmup = cell.get_int("warmup_steps");
  if (warmup > steps)
    throw ConfigError("warmup_steps: invalid value '" + std::to_string(warmup) +
                      "': expected an integer <= steps (" + std::to_string(steps) + ")");
  seqlab::LrSchedule s;
  s.kind = cell.get_string("schedule");
  if (s.kind == "inverse_sqrt" && warmup < 1)
    throw ConfigError("warmup_steps: invalid value '" + std::to_string(warmup) +
                      "': schedule = inverse_sqrt needs an integer >= 1");
  s.base_lr = cell.get_float("lr");
  s.warmup_steps = cell.get_int32("warmup_steps");
  s.total_steps = cell.get_int32("steps");
  s.validate();  // anything else it rejects (the message names the field)
  return s;
}

seqlab::CheckpointOptions cell_checkpoint(const Cell& cell, const std::string& phase,
                                          seqlab::Module* model, CellOutput& out) {
  const bool ok = !phase.empty() && phase.size() <= 64 &&
                  std::all_of(phase.begin(), phase.end(), [](char ch) {
                    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
                  });
  if (!ok)
    throw std::invalid_argument("cell_checkpoint: phase '" + phase +
                                "': expected 1 to 64 letters, digits, '_' or '-'");
  seqlab::CheckpointOptions o;
  if (cell.checkpoint_every <= 0 || cell.checkpoint_prefix.empty()) return o;  // off
  o.every = cell.checkpoint_every;
  o.path = cell.checkpoint_prefix + "." + phase + ".ckpt";
  o.identity = cell.checkpoint_identity + " phase=" + phase;
  o.model = model;
  o.notes = !cell.quiet;
  CellOutput* output = &out;
  o.state.add_custom(
      "cell_output",
      [output] {
        nlohmann::json j = nlohmann::json::object();
        for (const auto& [name, t] : output->tables()) j[name] = t.to_json();
        return j.dump();
      },
      [output](const std::string& bytes) -> std::function<void()> {
        std::map<std::string, Table> tables;
        const nlohmann::json j = nlohmann::json::parse(bytes);  // throws on malformed text
        if (!j.is_object()) throw CheckpointError("cell_output is not a JSON object");
        for (const auto& [name, t] : j.items()) tables[name] = Table::from_json(t);
        // Check against the declaration now, assign later (restore_tables checks again).
        if (tables.size() != output->tables().size())
          throw CheckpointError("cell_output has " + std::to_string(tables.size()) +
                                " tables, this cell " + std::to_string(output->tables().size()));
        for (const auto& [name, t] : tables) {
          const auto it = output->tables().find(name);
          if (it == output->tables().end() || it->second.columns != t.columns)
            throw CheckpointError("cell_output table '" + name + "' is not this cell's");
        }
        return [output, tables = std::move(tables)]() mutable {
          output->restore_tables(std::move(tables));
        };
      });
  return o;
}

std::string cell_checksum(const nlohmann::json& fingerprint, const nlohmann::json& tables) {
  const nlohmann::json content = {{"fingerprint", fingerprint}, {"tables", tables}};
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(fnv1a64(content.dump())));
  return std::string("fnv1a64:") + hash;
}

int run_experiment(int argc, const char* const* argv, const ExperimentSpec& spec) {
  Invocation inv;
  try {
    check_spec(spec);
    inv = parse_invocation(argc, argv, spec);
  } catch (const ConfigError& e) {
    std::cerr << spec.name << ": error: " << e.what() << std::endl;
    return 2;
  } catch (const std::bad_alloc& e) {
    std::cerr << spec.name << ": error: out of memory (" << e.what() << ")" << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << spec.name << ": error: " << e.what() << std::endl;
    return 1;
  }
  if (inv.help) {
    std::cout << help_text(spec, key_specs(spec));
    return flush_stdout(spec) ? 0 : 1;
  }
  if (inv.list_cells) {
    for (const auto& c : inv.cells) std::cout << c.index << " " << c.label() << "\n";
    return flush_stdout(spec) ? 0 : 1;
  }
  if (inv.status) {
    try {
      print_status(inv, spec);
    } catch (const std::exception& e) {
      std::cerr << spec.name << ": error: " << e.what() << std::endl;
      return 1;
    }
    return flush_stdout(spec) ? 0 : 1;
  }
  try {
    return execute(inv, spec);
  } catch (const std::bad_alloc& e) {
    std::cerr << spec.name << ": error: out of memory (" << e.what() << ")" << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << spec.name << ": error: " << e.what() << std::endl;
    return 1;
  }
}

}  // namespace seqlab::experiment
