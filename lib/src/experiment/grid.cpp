#include "seqlab/experiment/grid.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <stdexcept>

namespace seqlab::experiment {

std::uint64_t replicate_seed(std::uint64_t base_seed, std::size_t replicate) {
  return derive_seed(base_seed, static_cast<std::uint64_t>(replicate));
}

std::uint64_t stream_seed(std::uint64_t base_seed, std::size_t replicate, std::uint64_t purpose) {
  return derive_seed(base_seed, static_cast<std::uint64_t>(replicate), purpose);
}

std::string Cell::label() const {
  std::string out;
  for (const auto& k : sweep_keys) out += k + "=" + params.text(k) + " ";
  return out + "seed=" + std::to_string(replicate);
}

nlohmann::json Cell::fingerprint(const std::string& experiment) const {
  nlohmann::json p = nlohmann::json::object();
  for (const auto& [k, v] : params.entries())
    if (std::find(grid_only_keys.begin(), grid_only_keys.end(), k) == grid_only_keys.end())
      p[k] = format_value(v);
  return {{"experiment", experiment}, {"params", p}, {"base_seed", base_seed},
          {"replicate", replicate}};
}

std::vector<Cell> build_grid(const std::vector<OptionSpec>& specs,
                             const std::map<std::string, std::vector<Value>>& values,
                             std::size_t replicates, std::uint64_t base_seed,
                             std::size_t max_cells) {
  if (replicates == 0) throw std::invalid_argument("build_grid: replicates must be >= 1, got 0");
  std::vector<const OptionSpec*> axes;
  std::size_t n = replicates;
  bool overflow = false;
  std::string factors;  // "model (2 values) x T (4 values) x seeds (3)"
  for (const auto& s : specs) {
    const auto it = values.find(s.key);
    if (it == values.end() || it->second.empty())
      throw std::invalid_argument("build_grid: no value for key '" + s.key + "'");
    if (!s.sweep && it->second.size() != 1)
      throw std::invalid_argument("build_grid: key '" + s.key + "' is not a sweep key but has " +
                                  std::to_string(it->second.size()) + " values");
    if (s.sweep) {
      axes.push_back(&s);
      const std::size_t m = it->second.size();
      overflow = overflow || __builtin_mul_overflow(n, m, &n);
      factors += s.key + " (" + std::to_string(m) + (m == 1 ? " value) x " : " values) x ");
    }
  }
  if (overflow || n > max_cells) {
    throw ConfigError(
        "the grid has " +
        (overflow ? "more than " + std::to_string(std::numeric_limits<std::size_t>::max())
                  : std::to_string(n)) +
        " cells = " + factors + "seeds (" + std::to_string(replicates) + "): expected at most " +
        std::to_string(max_cells) + " cells; shorten the sweep lists or lower seeds");
  }
  std::vector<Cell> cells;
  cells.reserve(n);
  std::vector<std::string> sweep_keys;
  for (const auto* a : axes) sweep_keys.push_back(a->key);
  std::vector<std::string> grid_only_keys;
  for (const auto& s : specs)
    if (s.grid_only) grid_only_keys.push_back(s.key);
  for (std::size_t idx = 0; idx < n; ++idx) {
    // Mixed-radix decomposition: replicate innermost, then the last sweep key, ..., first outermost.
    std::size_t rest = idx;
    Cell c;
    c.index = idx;
    c.count = n;
    c.replicate = rest % replicates;
    rest /= replicates;
    std::vector<std::size_t> pos(axes.size());
    for (std::size_t k = axes.size(); k-- > 0;) {
      const std::size_t m = values.at(axes[k]->key).size();
      pos[k] = rest % m;
      rest /= m;
    }
    std::size_t ai = 0;
    for (const auto& s : specs) {
      const auto& vs = values.at(s.key);
      if (s.sweep) {
        c.params.set(s.key, vs[pos[ai++]]);
      } else {
        c.params.set(s.key, vs[0]);
      }
    }
    c.base_seed = base_seed;
    c.seed = replicate_seed(base_seed, c.replicate);
    c.sweep_keys = sweep_keys;
    c.grid_only_keys = grid_only_keys;
    cells.push_back(std::move(c));
  }
  return cells;
}

namespace {
std::optional<std::size_t> parse_index(const std::string& s) {
  if (s.empty()) return std::nullopt;
  std::size_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}
}  // namespace

std::pair<std::size_t, std::size_t> parse_cell_range(const std::string& flag,
                                                     const std::string& text,
                                                     std::size_t n_cells) {
  const bool range = flag == "--cells";
  const std::string last = std::to_string(n_cells == 0 ? 0 : n_cells - 1);
  const std::string allowed =
      range ? "expected A-B with 0 <= A <= B <= " + last
            : "expected an integer in [0, " + last + "]";
  auto fail = [&]() -> std::pair<std::size_t, std::size_t> {
    throw ConfigError(flag + ": invalid value '" + text + "': " + allowed + " (the grid has " +
                      std::to_string(n_cells) + " cells; see --list-cells)");
  };
  if (n_cells == 0) return fail();
  std::optional<std::size_t> a, b;
  if (range) {
    const auto dash = text.find('-');
    if (dash == std::string::npos) return fail();
    a = parse_index(text.substr(0, dash));
    b = parse_index(text.substr(dash + 1));
  } else {
    a = b = parse_index(text);
  }
  if (!a || !b || *a > *b || *b >= n_cells) return fail();
  return {*a, *b};
}

std::string format_index_list(const std::vector<std::size_t>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(v[i]);
    if (j > i) out += "-" + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace seqlab::experiment
