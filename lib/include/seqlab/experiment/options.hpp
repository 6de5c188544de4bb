#pragma once
// Typed configuration keys of an experiment: declaration (OptionSpec), parsing and validation of
// their textual values (config files and --key=value), and deterministic formatting.
//
// A key is an integer, a real or a string; a *sweep* key takes a comma-separated list
// ("T = 10,25,50") and becomes an axis of the grid (see grid.hpp). Every parse error is a
// ConfigError whose message names the key, the offending value, where it came from and what is
// allowed, e.g.
//   hidden_size: invalid value '-3' (from the command line): expected an integer in [1, 65536]
//
// Ranges. Every value must be representable by the code that consumes it:
//   - integer keys are int64; an experiment's integer keys must declare an upper bound
//     (.at_most(N); run_experiment rejects a spec without one, std::logic_error), chosen so that
//     the consumer can represent the value (e.g. <= 2^31-1 for an int) and sane for the machine.
//     Read them with Params::get_int32 / get_size / get_int_as<T>, which throw instead of
//     truncating. For integer keys the bounds are used as integers (min rounded up, max rounded
//     down; a bound beyond the int64 range means the int64 limit, e.g. at_most(9.3e18) is
//     9223372036854775807);
//   - real keys are double but must be representable as a finite float (|x| <= FLT_MAX =
//     3.40282347e+38, and a nonzero value must not round to 0 in float), since the library
//     computes in float; allowed() states the effective range, e.g. "a real in (0, 3.40282347e+38]".
//
// Example (see experiment.hpp for the whole experiment):
//   int_sweep("T", {10, 25}, "steps", "blank length").at_least(1)
//   real_option("lr", 1e-3, "1", "learning rate").greater_than(0)
//   string_option("optimizer", "adam", "optimizer").one_of({"adam", "adamw", "sgd"})
//
// List keys: one value that is a whitespace-separated list, for axes an experiment runs inside a
// cell ("batch_sizes = 1 2 4 8"), declared with int_list_option / real_list_option /
// choice_list_option and read with Params::get_int_list / get_real_list / get_string_list. Every
// element is checked as a value of its type against the key's bounds or choices, the elements are
// distinct, and the list is non-empty unless a word for the empty list is declared
// (.empty_as("none")); a bad list is a ConfigError naming the key, the whole value and the
// offending element, e.g.
//   batch_sizes: invalid value '1 x' (from the command line): 'x' is not an integer; expected a
//   space-separated list of distinct integers in [1, 4096]
// The value is stored as the trimmed text, so it is part of the cell fingerprint as written (the
// empty-list word as the empty text).
//
// Cross-key bounds: .at_most_key("steps") declares value <= the same cell's value of the numeric
// key `steps` (for a list of numbers: every element); run_experiment checks it for every cell
// before anything runs (ConfigError
//   warmup_steps: invalid value '500': expected an integer <= steps (300)
//   warmups: invalid value '0 500': '500' is out of range; expected a space-separated list of
//   integers <= steps (300)).
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
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
  std::optional<double> min;    // numeric lower bound (see "Ranges" above for integer keys)
  bool min_exclusive = false;   // min is strict (value > min)
  std::optional<double> max;    // numeric upper bound (inclusive)
  std::vector<std::string> choices;  // String: allowed values (empty: any non-empty string)
  /// List keys (type String, never sweep): the element type; min/max/choices apply to each element.
  std::optional<ValueType> list_of;
  std::string empty_word;       // list keys: this text (e.g. "none") is the empty list; "" = none allowed
  std::string max_key;          // numeric keys: value <= this other numeric key of the same cell
  /// Grid-only key (.selects_cells()): read only by ExperimentSpec::keep to choose which points of
  /// the grid are cells, never by a cell's computation, so it is left out of Cell::fingerprint:
  /// changing it adds or drops cells without invalidating the finished ones. A key a cell's
  /// result depends on must not be declared so (its finished cells would be reused wrongly).
  bool grid_only = false;

  OptionSpec at_least(double v) const;      // value >= v
  OptionSpec greater_than(double v) const;  // value > v
  OptionSpec at_most(double v) const;       // value <= v
  OptionSpec one_of(std::vector<std::string> allowed) const;
  /// List keys: `word` (e.g. "none") stands for the empty list.
  OptionSpec empty_as(std::string word) const;
  /// Numeric keys and lists of numbers (every element): value <= the cell's value of the numeric
  /// key `other` (checked per cell).
  OptionSpec at_most_key(std::string other) const;
  /// Declares a grid-only key (grid_only above). Not for sweep keys (std::logic_error).
  OptionSpec selects_cells() const;
  bool is_list() const { return list_of.has_value(); }
  /// List keys: the elements of a (checked) value's text.
  static std::vector<std::string> list_items(const std::string& text);

  /// What is allowed, in words: "an integer in [1, 1000]", "an integer >= 1" (no upper bound),
  /// "a comma-separated list of reals in (0, 3.40282347e+38]", "one of adam|adamw|sgd"...
  std::string allowed() const;
  /// Integer keys: the effective inclusive bounds as integers (min rounded up, or past it when
  /// exclusive; max rounded down; clamped to the int64 range; int64 limits when unset).
  std::int64_t int_lower() const;
  std::int64_t int_upper() const;
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
/// List keys (file comment): `def` is the default list as text, e.g. "1 2 4".
OptionSpec int_list_option(std::string key, std::string def, std::string unit, std::string help);
OptionSpec real_list_option(std::string key, std::string def, std::string unit, std::string help);
/// Elements from `choices`.
OptionSpec choice_list_option(std::string key, std::string def, std::vector<std::string> choices,
                              std::string help);

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
  /// get_int converted to the integer type T the consumer uses (int, std::size_t...). Never
  /// truncates: throws std::out_of_range naming the key, the value and T's range if it does not
  /// fit (a spec whose bound exceeds what its consumer can represent is a programming error).
  template <class T>
  T get_int_as(const std::string& key) const;
  /// get_int_as<std::int32_t>: for int arguments (steps, T...).
  std::int32_t get_int32(const std::string& key) const { return get_int_as<std::int32_t>(key); }
  /// get_int_as<std::size_t>: for sizes; a negative value throws.
  std::size_t get_size(const std::string& key) const { return get_int_as<std::size_t>(key); }
  /// get_real converted to float: throws std::out_of_range naming the key and the value if it is
  /// not a finite float or is nonzero but rounds to 0 (parse() already rejects such values).
  float get_float(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  /// The elements of a list key (file comment), in the order given; empty for the empty-list word.
  /// Throws std::logic_error if an element is not of the requested type (the key is not a list
  /// of that type), std::out_of_range for a missing key.
  std::vector<std::int64_t> get_int_list(const std::string& key) const;
  std::vector<double> get_real_list(const std::string& key) const;
  std::vector<std::string> get_string_list(const std::string& key) const;
  const Value& get(const std::string& key) const;
  /// format_value of the key's value.
  std::string text(const std::string& key) const;
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  [[noreturn]] static void throw_narrowing(const std::string& key, std::int64_t v,
                                           const std::string& lo, const std::string& hi);
  std::vector<std::pair<std::string, Value>> entries_;
};

template <class T>
T Params::get_int_as(const std::string& key) const {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>, "get_int_as: integer type");
  const std::int64_t v = get_int(key);
  bool ok;
  if constexpr (std::is_unsigned_v<T>) {
    ok = v >= 0 && static_cast<std::uint64_t>(v) <= std::numeric_limits<T>::max();
  } else {
    ok = v >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
         v <= static_cast<std::int64_t>(std::numeric_limits<T>::max());
  }
  if (!ok) {
    throw_narrowing(key, v, std::to_string(std::numeric_limits<T>::min()),
                    std::to_string(std::numeric_limits<T>::max()));
  }
  return static_cast<T>(v);
}

}  // namespace seqlab::experiment
