#include "seqlab/experiment/options.hpp"

#include <cerrno>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>

namespace seqlab::experiment {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto pos = s.find(',', start);
    out.push_back(trim(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start)));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

// An integer, or nullopt with *out_of_range set when it is a well-formed integer beyond int64.
std::optional<std::int64_t> parse_int(const std::string& s, bool* out_of_range) {
  *out_of_range = false;
  if (s.empty()) return std::nullopt;
  std::int64_t v = 0;
  const char* first = s.data();
  if (*first == '+') ++first;  // from_chars does not accept a leading '+'
  const auto r = std::from_chars(first, s.data() + s.size(), v);
  if (r.ptr != s.data() + s.size()) return std::nullopt;
  if (r.ec == std::errc::result_out_of_range) *out_of_range = true;
  if (r.ec != std::errc()) return std::nullopt;
  return v;
}

constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
// 2^63 as a double: every double >= this is beyond int64 (and -2^63 is exactly kInt64Min).
constexpr double kTwo63 = 9223372036854775808.0;

// floor(x) / ceil(x) clamped to the int64 range (x finite or infinite, not NaN).
std::int64_t clamp_floor(double x) {
  const double f = std::floor(x);
  if (f >= kTwo63) return kInt64Max;
  if (f <= -kTwo63) return kInt64Min;
  return static_cast<std::int64_t>(f);
}
std::int64_t clamp_ceil(double x) {
  const double c = std::ceil(x);
  if (c >= kTwo63) return kInt64Max;
  if (c <= -kTwo63) return kInt64Min;
  return static_cast<std::int64_t>(c);
}

// "" if `x` is representable as a finite float that is nonzero when x is, else the reason.
std::string float_problem(double x) {
  // Values below 2^128 - 2^103 round to at most FLT_MAX; at or above it they round to inf.
  const double overflow = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);
  if (!std::isfinite(x)) return "not finite";
  if (std::fabs(x) >= overflow) return "too large for a float";
  const float f = static_cast<float>(x);
  if (x != 0.0 && f == 0.0f) return "nonzero but rounds to 0 as a float";
  return "";
}

std::optional<double> parse_real(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string bound_text(double v) { return format_real(v); }

}  // namespace

std::string format_int(std::int64_t v) { return std::to_string(v); }

std::string format_real(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0.0) return "0";  // also -0
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string format_value(const Value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return format_int(*i);
  if (const auto* d = std::get_if<double>(&v)) return format_real(*d);
  return std::get<std::string>(v);
}

OptionSpec OptionSpec::at_least(double v) const {
  OptionSpec o = *this;
  o.min = v;
  o.min_exclusive = false;
  return o;
}

OptionSpec OptionSpec::greater_than(double v) const {
  OptionSpec o = *this;
  o.min = v;
  o.min_exclusive = true;
  return o;
}

OptionSpec OptionSpec::at_most(double v) const {
  OptionSpec o = *this;
  o.max = v;
  return o;
}

OptionSpec OptionSpec::one_of(std::vector<std::string> allowed) const {
  OptionSpec o = *this;
  o.choices = std::move(allowed);
  return o;
}

OptionSpec OptionSpec::empty_as(std::string word) const {
  OptionSpec o = *this;
  o.empty_word = std::move(word);
  for (auto& d : o.defaults) {  // stored as parse() stores it: the empty text
    if (const auto* t = std::get_if<std::string>(&d); t && trim(*t) == o.empty_word) d = std::string();
  }
  return o;
}

OptionSpec OptionSpec::at_most_key(std::string other) const {
  OptionSpec o = *this;
  o.max_key = std::move(other);
  return o;
}

OptionSpec OptionSpec::selects_cells() const {
  if (sweep) throw std::logic_error("OptionSpec::selects_cells: sweep key '" + key + "' is a grid axis");
  OptionSpec o = *this;
  o.grid_only = true;
  return o;
}

std::vector<std::string> OptionSpec::list_items(const std::string& text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  const std::string ws = " \t\r\n";
  while (true) {
    const auto b = text.find_first_not_of(ws, i);
    if (b == std::string::npos) break;
    const auto e = text.find_first_of(ws, b);
    out.push_back(text.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    i = e;
  }
  return out;
}

std::int64_t OptionSpec::int_lower() const {
  if (!min) return kInt64Min;
  if (!min_exclusive) return clamp_ceil(*min);
  const std::int64_t f = clamp_floor(*min);  // smallest integer > min
  return f == kInt64Max ? kInt64Max : f + 1;
}

std::int64_t OptionSpec::int_upper() const { return max ? clamp_floor(*max) : kInt64Max; }

std::string OptionSpec::allowed() const {
  if (list_of) {
    // The elements' own description, as for a sweep ("a comma-separated list of integers in
    // [1, 9]"), reworded for a space-separated list of distinct elements.
    OptionSpec elem = *this;
    elem.list_of.reset();
    elem.type = *list_of;
    elem.sweep = true;
    std::string a = elem.allowed();
    const std::string comma = "a comma-separated list of ";
    if (a.rfind(comma, 0) == 0) a = a.substr(comma.size());
    return "a space-separated list of distinct " + a +
           (empty_word.empty() ? std::string() : ", or '" + empty_word + "' (the empty list)");
  }
  std::string noun;
  if (type == ValueType::String) {
    if (!choices.empty()) {
      std::string list;
      for (std::size_t i = 0; i < choices.size(); ++i) list += (i ? "|" : "") + choices[i];
      return sweep ? "a comma-separated list of values from " + list : "one of " + list;
    }
    return sweep ? "a comma-separated list of non-empty strings" : "a non-empty string";
  }
  noun = type == ValueType::Int ? (sweep ? "integers" : "an integer") : (sweep ? "reals" : "a real");
  std::string out = sweep ? "a comma-separated list of " + noun : noun;
  if (type == ValueType::Int) {
    if (min && max) {
      out += " in [" + format_int(int_lower()) + ", " + format_int(int_upper()) + "]";
    } else if (min) {
      out += " >= " + format_int(int_lower());
    } else if (max) {
      out += " <= " + format_int(int_upper());
    }
    return out;
  }
  // Reals: the declared bounds intersected with the finite float range.
  if (min || max) {
    const bool lo_flt = !min || *min < -FLT_MAX;
    const bool hi_flt = !max || *max > FLT_MAX;
    out += std::string(" in ") + (min_exclusive && !lo_flt ? "(" : "[") +
           bound_text(lo_flt ? -FLT_MAX : *min) + ", " + bound_text(hi_flt ? FLT_MAX : *max) + "]";
  } else {
    out += " in [" + bound_text(-FLT_MAX) + ", " + bound_text(FLT_MAX) + "]";
  }
  return out;
}

std::string OptionSpec::default_text() const {
  if (list_of && !empty_word.empty() && defaults.size() == 1 && format_value(defaults[0]).empty())
    return empty_word;
  std::string out;
  for (std::size_t i = 0; i < defaults.size(); ++i) out += (i ? "," : "") + format_value(defaults[i]);
  return out;
}

void OptionSpec::check(const Value& v, const std::string& text, const std::string& source) const {
  auto fail = [&](const std::string& why) {
    throw ConfigError(key + ": invalid value '" + text + "' (from " + source + "): " + why +
                      "expected " + allowed());
  };
  if (list_of) {
    const auto* s = std::get_if<std::string>(&v);
    if (s == nullptr) fail("");
    if (!empty_word.empty() && (s->empty() || trim(*s) == empty_word)) return;
    const std::vector<std::string> items = list_items(*s);
    if (items.empty()) fail("empty list; ");
    std::vector<std::string> seen;
    for (const auto& item : items) {
      Value e;
      if (*list_of == ValueType::Int) {
        bool out_of_range = false;
        const auto i = parse_int(item, &out_of_range);
        if (!i) fail("'" + item + (out_of_range ? "' is out of range; " : "' is not an integer; "));
        e = *i;
      } else if (*list_of == ValueType::Real) {
        const auto d = parse_real(item);
        if (!d) fail("'" + item + "' is not a finite real number; ");
        e = *d;
      } else {
        e = item;
      }
      OptionSpec elem = *this;
      elem.list_of.reset();
      elem.type = *list_of;
      elem.sweep = true;
      try {
        elem.check(e, text, source);
      } catch (const ConfigError&) {
        // The element's reason, with the list's wording of what is allowed.
        if (*list_of == ValueType::Real) {
          const std::string fp = float_problem(std::get<double>(e));
          if (!fp.empty()) fail("'" + item + "' is " + fp + "; ");
        }
        fail("'" + item + (*list_of == ValueType::String ? "' is not allowed; " : "' is out of range; "));
      }
      const std::string canon = format_value(e);
      if (std::find(seen.begin(), seen.end(), canon) != seen.end()) fail("'" + item + "' is repeated; ");
      seen.push_back(canon);
    }
    return;
  }
  if (type == ValueType::String) {
    const auto& s = std::get<std::string>(v);
    if (s.empty()) fail("");
    if (!choices.empty()) {
      bool ok = false;
      for (const auto& c : choices) ok = ok || c == s;
      if (!ok) fail(sweep ? "'" + s + "' is not allowed; " : "");
    }
    return;
  }
  const std::string item = sweep ? "'" + format_value(v) + "' " : "";
  if (type == ValueType::Int) {
    const std::int64_t i = std::get<std::int64_t>(v);
    if (i < int_lower() || i > int_upper()) fail(sweep ? item + "is out of range; " : "");
    return;
  }
  const double x = std::get<double>(v);
  const std::string fp = float_problem(x);
  if (!fp.empty()) fail(sweep ? item + "is " + fp + "; " : fp + "; ");
  const bool low = min && (min_exclusive ? !(x > *min) : !(x >= *min));
  const bool high = max && !(x <= *max);
  if (low || high) fail(sweep ? item + "is out of range; " : "");
}

std::vector<Value> OptionSpec::parse(const std::string& raw, const std::string& source) const {
  const std::string text = trim(raw);
  auto fail = [&](const std::string& why) {
    throw ConfigError(key + ": invalid value '" + text + "' (from " + source + "): " + why +
                      "expected " + allowed());
  };
  if (list_of) {
    check(Value(text), text, source);
    // The empty-list word is stored as the empty text (what get_*_list read as no elements).
    return {Value(!empty_word.empty() && text == empty_word ? std::string() : text)};
  }
  std::vector<std::string> parts;
  if (sweep) {
    parts = split_commas(text);
    if (text.empty()) fail("empty list; ");
  } else {
    if (text.find(',') != std::string::npos) fail("not a sweep key, so one value only; ");
    parts = {text};
  }
  std::vector<Value> out;
  for (const auto& p : parts) {
    if (p.empty()) fail(sweep ? "empty element in the list; " : "empty value; ");
    Value v;
    if (type == ValueType::Int) {
      bool out_of_range = false;
      const auto i = parse_int(p, &out_of_range);
      if (!i) {
        if (sweep) fail("'" + p + (out_of_range ? "' is out of range; " : "' is not an integer; "));
        fail(out_of_range ? "out of range; " : "");
      }
      v = *i;
    } else if (type == ValueType::Real) {
      const auto d = parse_real(p);
      if (!d) fail(sweep ? "'" + p + "' is not a finite real number; " : "");
      v = *d;
    } else {
      v = p;
    }
    check(v, text, source);
    for (const auto& prev : out) {
      if (format_value(prev) == format_value(v)) fail("duplicate value '" + p + "'; ");
    }
    out.push_back(std::move(v));
  }
  return out;
}

namespace {
OptionSpec make(std::string key, ValueType type, bool sweep, std::vector<Value> defs,
                std::string unit, std::string help) {
  OptionSpec o;
  o.key = std::move(key);
  o.type = type;
  o.sweep = sweep;
  o.defaults = std::move(defs);
  o.unit = std::move(unit);
  o.help = std::move(help);
  return o;
}
}  // namespace

OptionSpec int_option(std::string key, std::int64_t def, std::string unit, std::string help) {
  return make(std::move(key), ValueType::Int, false, {Value(def)}, std::move(unit), std::move(help));
}

OptionSpec real_option(std::string key, double def, std::string unit, std::string help) {
  return make(std::move(key), ValueType::Real, false, {Value(def)}, std::move(unit),
              std::move(help));
}

OptionSpec string_option(std::string key, std::string def, std::string help) {
  return make(std::move(key), ValueType::String, false, {Value(std::move(def))}, "",
              std::move(help));
}

OptionSpec int_sweep(std::string key, std::vector<std::int64_t> defs, std::string unit,
                     std::string help) {
  std::vector<Value> v(defs.begin(), defs.end());
  return make(std::move(key), ValueType::Int, true, std::move(v), std::move(unit), std::move(help));
}

OptionSpec real_sweep(std::string key, std::vector<double> defs, std::string unit,
                      std::string help) {
  std::vector<Value> v(defs.begin(), defs.end());
  return make(std::move(key), ValueType::Real, true, std::move(v), std::move(unit),
              std::move(help));
}

OptionSpec string_sweep(std::string key, std::vector<std::string> defs, std::string help) {
  std::vector<Value> v;
  for (auto& d : defs) v.emplace_back(std::move(d));
  return make(std::move(key), ValueType::String, true, std::move(v), "", std::move(help));
}

OptionSpec int_list_option(std::string key, std::string def, std::string unit, std::string help) {
  OptionSpec o = make(std::move(key), ValueType::String, false, {Value(std::move(def))},
                      std::move(unit), std::move(help));
  o.list_of = ValueType::Int;
  return o;
}

OptionSpec real_list_option(std::string key, std::string def, std::string unit, std::string help) {
  OptionSpec o = make(std::move(key), ValueType::String, false, {Value(std::move(def))},
                      std::move(unit), std::move(help));
  o.list_of = ValueType::Real;
  return o;
}

OptionSpec choice_list_option(std::string key, std::string def, std::vector<std::string> choices,
                              std::string help) {
  OptionSpec o = make(std::move(key), ValueType::String, false, {Value(std::move(def))}, "",
                      std::move(help));
  o.list_of = ValueType::String;
  o.choices = std::move(choices);
  return o;
}

void Params::set(const std::string& key, Value v) {
  for (auto& e : entries_) {
    if (e.first == key) {
      e.second = std::move(v);
      return;
    }
  }
  entries_.emplace_back(key, std::move(v));
}

bool Params::has(const std::string& key) const {
  for (const auto& e : entries_)
    if (e.first == key) return true;
  return false;
}

const Value& Params::get(const std::string& key) const {
  for (const auto& e : entries_)
    if (e.first == key) return e.second;
  throw std::out_of_range("Params: no key '" + key + "'");
}

std::int64_t Params::get_int(const std::string& key) const {
  const auto& v = get(key);
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  throw std::logic_error("Params: key '" + key + "' is not an integer");
}

double Params::get_real(const std::string& key) const {
  const auto& v = get(key);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  throw std::logic_error("Params: key '" + key + "' is not a real number");
}

const std::string& Params::get_string(const std::string& key) const {
  const auto& v = get(key);
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  throw std::logic_error("Params: key '" + key + "' is not a string");
}

std::vector<std::string> Params::get_string_list(const std::string& key) const {
  return OptionSpec::list_items(get_string(key));
}

std::vector<std::int64_t> Params::get_int_list(const std::string& key) const {
  std::vector<std::int64_t> out;
  for (const auto& item : get_string_list(key)) {
    bool out_of_range = false;
    const auto i = parse_int(item, &out_of_range);
    if (!i) throw std::logic_error("Params: key '" + key + "' is not a list of integers");
    out.push_back(*i);
  }
  return out;
}

std::vector<double> Params::get_real_list(const std::string& key) const {
  std::vector<double> out;
  for (const auto& item : get_string_list(key)) {
    const auto d = parse_real(item);
    if (!d) throw std::logic_error("Params: key '" + key + "' is not a list of reals");
    out.push_back(*d);
  }
  return out;
}

float Params::get_float(const std::string& key) const {
  const double v = get_real(key);
  const std::string why = float_problem(v);
  if (!why.empty()) {
    throw std::out_of_range("Params: key '" + key + "' = " + format_real(v) + " is " + why +
                            "; allowed: a finite float");
  }
  return static_cast<float>(v);
}

void Params::throw_narrowing(const std::string& key, std::int64_t v, const std::string& lo,
                             const std::string& hi) {
  throw std::out_of_range("Params: key '" + key + "' = " + format_int(v) +
                          " does not fit the consumer's integer type [" + lo + ", " + hi +
                          "]; declare a tighter bound (OptionSpec::at_most / at_least)");
}

std::string Params::text(const std::string& key) const { return format_value(get(key)); }

}  // namespace seqlab::experiment
