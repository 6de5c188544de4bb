#pragma once
// Typed configuration keys of an experiment: declaration (OptionSpec), parsing and validation of
// their textual values (config files and --key=value), and deterministic formatting.
//
// A key is an integer, a real or a string; a *sweep* key takes a comma-separated list
// ("T = 10,25,50") and becomes an axis of the grid (see grid.hpp). Every parse error is a
// ConfigError whose message names the key, the offending value, where it came from and what is
// allowed, e.g.
//   hidden_size: invalid value '-3' (from the command line): expected an integer >= 1
//
// Example (see experiment.hpp for the whole experiment):
//   int_sweep("T", {10, 25}, "steps", "blank length").at_least(1)
//   real_option("lr", 1e-3, "1", "learning rate").greater_than(0)
//   string_option("optimizer", "adam", "optimizer").one_of({"adam", "adamw", "sgd"})
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace seqlab::experiment {

/// Bad input (exit status 2). what() is one line naming the key, the value and what is allowed.
class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

enum class ValueType { Int, Real, String };

/// One value of a key: int64 for ValueType::Int, double for Real, string for String.
using Value = std::variant<std::int64_t, double, std::string>;

/// Deterministic text of numbers, used for CSV cells, --list-cells and fingerprints:
/// integers in plain decimal ("-12"); reals as printf "%.9g" (float round-trip precision,
/// e.g. 0.001 -> "0.001", 1/3 -> "0.333333333"), with "nan", "inf", "-inf", and -0 written as "0".
std::string format_int(std::int64_t v);
std::string format_real(double v);
std::string format_value(const Value& v);

/// Declaration of one configuration key. Build it with int_option / real_option / string_option
/// (or the *_sweep forms) and refine it with the constraint helpers, which return a modified copy.
struct OptionSpec {
  std::string key;          // name in config files ("T") and on the command line ("--T=...")
  ValueType type = ValueType::Int;
  bool sweep = false;       // takes a comma-separated list; one grid axis
  std::vector<Value> defaults;  // built-in default (one value unless sweep)
  std::string unit;         // shown in --help: "steps", "tokens", "1" (dimensionless), "" (category)
  std::string help;         // one line for --help
  std::optional<double> min;    // numeric lower bound
  bool min_exclusive = false;   // min is strict (value > min)
  std::optional<double> max;    // numeric upper bound (inclusive)
  std::vector<std::string> choices;  // String: allowed values (empty: any non-empty string)

  OptionSpec at_least(double v) const;      // value >= v
  OptionSpec greater_than(double v) const;  // value > v
  OptionSpec at_most(double v) const;       // value <= v
  OptionSpec one_of(std::vector<std::string> allowed) const;

  /// What is allowed, in words: "an integer >= 1", "a comma-separated list of reals > 0",
  /// "one of adam|adamw|sgd"...
  std::string allowed() const;
  /// The default as text ("10,25" for a sweep).
  std::string default_text() const;
  /// Parses a value as found in a config file or on the command line: one value, or for a sweep
  /// key a non-empty comma-separated list without duplicates (elements are trimmed). `source`
  /// ("the command line", "configs/quick.ini") goes into the message. Throws ConfigError.
  std::vector<Value> parse(const std::string& text, const std::string& source) const;
  /// Checks one parsed value against the constraints (throws ConfigError naming `source`).
  void check(const Value& v, const std::string& text, const std::string& source) const;
};

OptionSpec int_option(std::string key, std::int64_t def, std::string unit, std::string help);
OptionSpec real_option(std::string key, double def, std::string unit, std::string help);
OptionSpec string_option(std::string key, std::string def, std::string help);
OptionSpec int_sweep(std::string key, std::vector<std::int64_t> defs, std::string unit,
                     std::string help);
OptionSpec real_sweep(std::string key, std::vector<double> defs, std::string unit,
                      std::string help);
OptionSpec string_sweep(std::string key, std::vector<std::string> defs, std::string help);

/// Resolved values of the keys of one cell: one value per key, in declaration order.
class Params {
 public:
  /// Sets `key` (replacing an earlier value of the same key).
  void set(const std::string& key, Value v);
  bool has(const std::string& key) const;
  /// Typed access; throws std::out_of_range naming a key that is not set and std::logic_error for
  /// a type mismatch (get_real also accepts an Int value).
  std::int64_t get_int(const std::string& key) const;
  double get_real(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  const Value& get(const std::string& key) const;
  /// format_value of the key's value.
  std::string text(const std::string& key) const;
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

}  // namespace seqlab::experiment
