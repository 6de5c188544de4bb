// The command line: flags, keys, config files, the grid and the spec's checks (cli.hpp).
#include "cli.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <boost/program_options.hpp>

#include "seqlab/experiment/io.hpp"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace seqlab::experiment::detail {

namespace {

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

nlohmann::json value_json(const Value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::get<std::string>(v);
}

}  // namespace

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

std::string help_text(const ExperimentSpec& spec, const std::vector<OptionSpec>& keys) {
  std::ostringstream h;
  h << "Usage: " << spec.name
    << " [--scale tiny|quick|standard|paper | --config FILE.ini] [--KEY=VALUE ...] [run options]\n\n";
  if (!spec.description.empty()) h << spec.description << "\n\n";
  h << "Run options (command line only):\n"
       "  --help               this text\n"
       "  --scale NAME         load <experiment dir>/configs/NAME.ini (tiny: tests; quick: the main job;\n"
       "                       standard: decides the claim on one 2-core machine; paper: the anchor\n"
       "                       papers' sizes, for a cluster); default quick when --config is not given\n"
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
    << kMaxCheckpointEvery << "]\n"
       "  --save-model         write each training phase's final weights to DIR/models/<cell file\n"
       "                       stem>.<phase>.safetensors (PyTorch state_dict names; numpy or\n"
       "                       torch read them)\n"
       "  --flush-denormals    flush subnormal floats to zero (x86 FTZ and DAZ, as PyTorch's\n"
       "                       torch.set_flush_denormal) on every thread: faster where values\n"
       "                       decay into the subnormal range, and results differ from a run\n"
       "                       without it there; the cell file records it [default off]\n\n"
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

namespace {

// The run options of `run_desc` that are switches (po::bool_switch: no value token).
std::vector<std::string> switch_names(const po::options_description& run_desc) {
  std::vector<std::string> out;
  for (const auto& o : run_desc.options())
    if (o->semantic()->max_tokens() == 0) out.push_back(o->long_name());
  return out;
}

// For an unknown key that names a run option ("flush_denormals", "--threads" in a config file):
// "; '--flush-denormals' is a run option, given on the command line", else "".
std::string run_option_hint(std::string key, const std::vector<std::string>& switches) {
  if (key.rfind("--", 0) == 0) key = key.substr(2);
  std::replace(key.begin(), key.end(), '_', '-');
  if (std::find(kRunFlags.begin(), kRunFlags.end(), key) == kRunFlags.end()) return "";
  const bool sw = std::find(switches.begin(), switches.end(), key) != switches.end();
  return "; '--" + key + "' is a run option, given on the command line" + (sw ? " alone (a switch)" : "");
}

}  // namespace

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
      "checkpoint-every", po::value<std::string>())("save-model", po::bool_switch())(
      "flush-denormals", po::bool_switch());
  const std::vector<std::string> switches = switch_names(run_desc);
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
    for (const auto& sw : switches)  // po's "does not take any arguments" names neither
      if (a.rfind("--" + sw + "=", 0) == 0)
        throw ConfigError("--" + sw + ": a switch, given alone without a value (got '" + a + "')");
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
    const std::string hint = run_option_hint(given.substr(0, eq), switches);
    if (!hint.empty())
      throw ConfigError("unknown key '" + given.substr(0, eq) + "' (from the command line)" + hint);
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
    const std::string arg = vm["positional-arguments"].as<std::vector<std::string>>().front();
    // Name what came before it: `--steps --out DIR` leaves DIR over, and the key to fix is --steps.
    std::string after;
    for (int i = argc - 1; i >= 2; --i)
      if (arg == argv[i]) {
        const std::string prev = argv[i - 1], before = i >= 3 ? argv[i - 2] : "";
        after = ", after '" + prev + "'";
        if (prev.rfind("--", 0) == 0 && before.rfind("--", 0) == 0 && before.find('=') == std::string::npos)
          after += ", which '" + before + "' took as its value";
        break;
      }
    throw ConfigError("unexpected argument '" + arg + "' (from the command line" + after +
                      "): expected --key=value options, each value attached with '=' (see --help)");
  }
  inv.help = vm["help"].as<bool>();
  if (inv.help) return inv;
  inv.list_cells = vm["list-cells"].as<bool>();
  inv.merge = vm["merge"].as<bool>();
  inv.force = vm["force"].as<bool>();
  inv.quiet = vm["quiet"].as<bool>();
  inv.status = vm["status"].as<bool>();
  inv.save_model = vm["save-model"].as<bool>();
  inv.flush_denormals = vm["flush-denormals"].as<bool>();
#if !defined(__x86_64__)
  if (inv.flush_denormals)
    throw ConfigError("--flush-denormals: this build's CPU has no flush-to-zero control (x86-64 only); run "
                      "without it");
#endif

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
      const std::string key = e.get_option_name();
      const auto dot = key.find('.');
      const std::string hint = run_option_hint(key, switches);
      if (!hint.empty()) throw ConfigError("unknown key '" + key + "' (from " + inv.config_path + ")" + hint);
      throw ConfigError("unknown key '" + key + "' (from " + inv.config_path + "): " +
                        (dot == std::string::npos
                             ? allowed_keys
                             : "a [" + key.substr(0, dot) +
                                   "] section header precedes it; config files have no sections, "
                                   "only `key = value` lines ('#' comments)"));
    } catch (const po::invalid_config_file_syntax& e) {
      throw ConfigError(inv.config_path + ": " + e.what() +
                        "; expected `key = value` lines ('#' starts a comment)");
    } catch (const po::multiple_occurrences& e) {
      std::string key = e.get_option_name();
      while (!key.empty() && key.front() == '-') key.erase(0, 1);
      throw ConfigError(inv.config_path + ": key '" + key +
                        "' is set on more than one line; expected each key at most once");
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
  if (spec.keep) {  // a grid that is not a full product: keep the points the experiment names
    std::vector<Cell> kept;
    for (auto& c : inv.cells)
      if (spec.keep(c)) kept.push_back(std::move(c));
    if (kept.empty())
      throw ConfigError("the grid has no cells: the experiment keeps none of its " +
                        std::to_string(inv.cells.size()) +
                        " grid points with these sweep values (see its README)");
    for (std::size_t i = 0; i < kept.size(); ++i) {
      kept[i].index = i;
      kept[i].count = kept.size();
    }
    inv.cells = std::move(kept);
  }
  if (spec.resolve) {  // cell-dependent values of non-sweep keys (ExperimentSpec::resolve)
    for (auto& c : inv.cells) {
      const std::vector<std::pair<std::string, Value>> before = c.params.entries();
      spec.resolve(c);
      // Params::set replaces a key's value in place and appends a new key: compare by position.
      const auto& after = c.params.entries();
      if (after.size() != before.size())
        throw std::logic_error(spec.name + ": resolve set '" + after[before.size()].first + "', not a declared key");
      for (std::size_t i = 0; i < after.size(); ++i) {
        const auto& [key, v] = after[i];
        if (before[i].second == v) continue;
        const OptionSpec& o = *std::find_if(spec.options.begin(), spec.options.end(),
                                            [&](const OptionSpec& x) { return x.key == key; });
        if (o.sweep || before[i].second.index() != v.index())
          throw std::logic_error(spec.name + ": resolve changed '" + key + "', " +
                                 (o.sweep ? "a sweep key" : "to a value of another type"));
        o.check(v, format_value(v), "the value " + spec.name + " derives for the cell " + c.label());
      }
    }
  }
  if (spec.unread_keys) {  // keys a cell never reads: out of its fingerprint
    for (auto& c : inv.cells)
      for (const auto& key : spec.unread_keys(c)) {
        const auto it = std::find_if(spec.options.begin(), spec.options.end(),
                                     [&](const OptionSpec& o) { return o.key == key; });
        if (it == spec.options.end() || it->sweep)
          throw std::logic_error(spec.name + ": unread_keys names '" + key + "', not a declared non-sweep key");
        c.grid_only_keys.push_back(key);
      }
  }
  for (const auto& k : spec.options) {  // declared cross-key bounds (OptionSpec::at_most_key)
    if (k.max_key.empty()) continue;
    for (const auto& c : inv.cells) {
      if (k.is_list()) {  // every element of a numeric list
        const std::vector<std::string> items = c.params.get_string_list(k.key);
        std::vector<double> v;
        if (*k.list_of == ValueType::Int) {
          for (const auto i : c.params.get_int_list(k.key)) v.push_back(static_cast<double>(i));
        } else {
          v = c.params.get_real_list(k.key);
        }
        for (std::size_t i = 0; i < v.size(); ++i) {
          if (v[i] <= c.params.get_real(k.max_key)) continue;
          throw ConfigError(k.key + ": invalid value '" + c.params.get_string(k.key) + "': '" + items[i] +
                            "' is out of range; expected a space-separated list of " +
                            (*k.list_of == ValueType::Int ? "integers" : "reals") + " <= " + k.max_key +
                            " (" + c.params.text(k.max_key) + ")");
        }
        continue;
      }
      if (c.params.get_real(k.key) <= c.params.get_real(k.max_key)) continue;
      // A bound that resolve set for this cell: say whose it is.
      const bool derived = format_value(inv.values.at(k.max_key).at(0)) != c.params.text(k.max_key);
      throw ConfigError(k.key + ": invalid value '" + c.params.text(k.key) + "': expected " +
                        (k.type == ValueType::Int ? "an integer" : "a real") + " <= " + k.max_key +
                        " (" + c.params.text(k.max_key) + ")" +
                        (derived ? " of the cell " + c.label() + ", whose " + k.max_key + " " + spec.name +
                                       " derives from its other keys (see its README)"
                                 : std::string()));
    }
  }
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
    if (why.empty() && inv.save_model) why = check_output_dir(inv.out, "models");
    if (!why.empty()) {
      throw ConfigError("--out: cannot write results to '" + inv.out + "': " + why +
                        "; expected a writable directory (or one that can be created)");
    }
  }
  inv.config_json = std::move(cfg);
  return inv;
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
    if (o.list_of && (o.sweep || o.type != ValueType::String)) {
      throw std::logic_error("ExperimentSpec " + spec.name + ": list key '" + o.key +
                             "' must be a non-sweep key (declare it with *_list_option)");
    }
    if (!o.max_key.empty()) {
      const auto other = std::find_if(spec.options.begin(), spec.options.end(),
                                      [&](const OptionSpec& x) { return x.key == o.max_key; });
      const ValueType own = o.list_of ? *o.list_of : o.type;  // a list: its elements' type
      if (own == ValueType::String || other == spec.options.end() || other->is_list() ||
          other->type == ValueType::String) {
        throw std::logic_error("ExperimentSpec " + spec.name + ": key '" + o.key +
                               "' is bounded by '" + o.max_key +
                               "', which must be another numeric key of the experiment");
      }
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
  if (spec.tables.front().merge_keep) {
    throw std::logic_error("ExperimentSpec " + spec.name +
                           ": the main table cannot have a merge_keep filter (it is merged whole)");
  }
  if (!spec.tables.front().merge_drop.empty()) {
    throw std::logic_error("ExperimentSpec " + spec.name +
                           ": the main table cannot have merge_drop columns (it is merged whole)");
  }
  for (const auto& t : spec.tables) {
    for (const auto& c : t.merge_drop) {
      if (std::find(t.columns.begin(), t.columns.end(), c) == t.columns.end())
        throw std::logic_error("ExperimentSpec " + spec.name + ": table '" + t.name + "': merge_drop column '" + c +
                               "' is not one of its columns");
    }
  }
  if (spec.tables.front().optional) {
    throw std::logic_error("ExperimentSpec " + spec.name + ": the main table cannot be optional (every cell has it)");
  }
  (void)CellOutput(spec.tables);  // throws std::logic_error for bad names or column lists
}

void log(const Invocation& inv, const ExperimentSpec& spec, const std::string& msg) {
  if (inv.quiet) return;
  // One write per line: cells running side by side share stderr, and pieces would interleave.
  const std::string line = "[" + spec.name + "] " + msg + "\n";
  std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
  std::cerr.flush();
}

}  // namespace seqlab::experiment::detail
