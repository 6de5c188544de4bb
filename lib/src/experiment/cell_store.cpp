// The cell store: cell files, their verification, checksums and checkpoint files (cell_store.hpp).
#include "cell_store.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "seqlab/core/hash.hpp"
#include "seqlab/experiment/io.hpp"

namespace fs = std::filesystem;

namespace seqlab::experiment {

std::uint64_t fnv1a64(const std::string& s) { return seqlab::fnv1a64(std::string_view(s)); }

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

std::string cell_checksum(const nlohmann::json& fingerprint, const nlohmann::json& tables) {
  const nlohmann::json content = {{"fingerprint", fingerprint}, {"tables", tables}};
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(fnv1a64(content.dump())));
  return std::string("fnv1a64:") + hash;
}

namespace detail {

namespace {

std::string join_names(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + v[i];
  return out;
}

}  // namespace

std::string check_tables(const nlohmann::json& tables, const Cell& cell, const ExperimentSpec& spec) {
  if (!tables.is_object()) return "\"tables\" is not an object";
  for (const auto& decl : spec.tables) {
    if (!tables.contains(decl.name)) {
      if (decl.optional) continue;  // stored before the table was declared
      return "table '" + decl.name + "' is missing";
    }
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

StoredCell adopt_cell(const fs::path& file, const Cell& cell, const nlohmann::json& fingerprint,
                      const ExperimentSpec& spec, bool write) {
  StoredCell none;
  const std::string name = file.filename().string();
  constexpr std::size_t kHashAndExt = 16 + 5;  // "<16 hex digits>.json"
  if (cell.grid_only_keys.empty() || name.size() <= kHashAndExt) return none;
  const std::string prefix = name.substr(0, name.size() - kHashAndExt);  // "<label>_"
  std::error_code ec;
  std::vector<fs::path> candidates;
  for (fs::directory_iterator it(file.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string other = it->path().filename().string();
    std::error_code type_ec;  // regular files only: a FIFO or device named like a cell is not read
    if (other != name && other.size() == name.size() && other.compare(0, prefix.size(), prefix) == 0 &&
        other.compare(other.size() - 5, 5, ".json") == 0 && it->is_regular_file(type_ec) &&
        !it->is_symlink(type_ec))
      candidates.push_back(it->path());
  }
  std::sort(candidates.begin(), candidates.end());
  for (const auto& path : candidates) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_file(path.string()));
    } catch (const std::exception&) {
      continue;
    }
    if (!j.is_object() || !j.contains("fingerprint") || !j.contains("tables") || !j.contains("checksum") ||
        !j.at("checksum").is_string())
      continue;
    const nlohmann::json& stored = j.at("fingerprint");
    if (j.at("checksum").get<std::string>() != cell_checksum(stored, j.at("tables"))) continue;
    if (!stored.is_object() || !stored.contains("params") || !stored.at("params").is_object()) continue;
    nlohmann::json reduced = stored;
    for (const auto& k : cell.grid_only_keys) reduced["params"].erase(k);
    if (reduced != fingerprint || !check_tables(j.at("tables"), cell, spec).empty()) continue;
    j["fingerprint"] = fingerprint;
    j["checksum"] = cell_checksum(fingerprint, j.at("tables"));
    if (write) write_file_atomic(file.string(), j.dump(1) + "\n");
    StoredCell out;
    out.status = StoredCell::Status::Ok;
    out.json = std::move(j);
    return out;
  }
  return none;
}

StoredCell load_or_adopt_cell(const fs::path& file, const Cell& cell, const nlohmann::json& fingerprint,
                              const ExperimentSpec& spec, bool write) {
  StoredCell r = load_cell(file, cell, fingerprint, spec);
  if (r.status != StoredCell::Status::Missing) return r;
  return adopt_cell(file, cell, fingerprint, spec, write);
}

std::string cell_stem(const Cell& c, const std::string& experiment) {
  std::string f = cell_file_name(c, experiment);
  return f.substr(0, f.size() - 5);
}

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

std::size_t remove_cell_checkpoints(const fs::path& dir, const std::string& stem) {
  std::size_t n = 0;
  for (const auto& p : cell_checkpoints(dir, stem)) {
    std::error_code ec;
    if (fs::remove(p, ec)) ++n;
  }
  return n;
}

}  // namespace detail

}  // namespace seqlab::experiment
