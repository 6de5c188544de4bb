// --merge: cells into CSVs and meta.json (merge.hpp).
#include "merge.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>
#include <utility>
#include <vector>

#include "cell_store.hpp"
#include "seqlab/experiment/io.hpp"
#include "seqlab/experiment/metadata.hpp"

namespace fs = std::filesystem;

namespace seqlab::experiment::detail {

int merge(const Invocation& inv, const ExperimentSpec& spec, const std::string& start_utc) {
  const fs::path out(inv.out);
  const fs::path cells_dir = out / "cells";
  std::vector<nlohmann::json> stored;
  std::vector<const Cell*> stored_cells;
  std::vector<std::size_t> missing, corrupt;
  std::string first_corrupt;
  for (const auto& c : inv.cells) {
    const fs::path file = cells_dir / cell_file_name(c, spec.name);
    auto r = load_or_adopt_cell(file, c, c.fingerprint(spec.name), spec, true);
    if (r.status == StoredCell::Status::Missing) {
      missing.push_back(c.index);
    } else if (r.status == StoredCell::Status::Corrupt) {
      if (corrupt.empty()) first_corrupt = c.label() + ": " + file.string() + ": " + r.why;
      corrupt.push_back(c.index);
    } else {
      stored.push_back(std::move(r.json));
      stored_cells.push_back(&c);
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
    std::vector<std::size_t> kept;  // indices into decl.columns of the merged columns
    for (std::size_t c = 0; c < decl.columns.size(); ++c) {
      if (std::find(decl.merge_drop.begin(), decl.merge_drop.end(), decl.columns[c]) != decl.merge_drop.end())
        continue;
      kept.push_back(c);
      merged.columns.push_back(decl.columns[c]);
    }
    std::size_t in_cells = 0;
    for (std::size_t i = 0; i < stored.size(); ++i) {
      if (decl.optional && !stored[i].at("tables").contains(decl.name)) continue;  // an older cell
      const Table t = Table::from_json(stored[i].at("tables").at(decl.name));
      in_cells += t.rows.size();
      for (const auto& row : t.rows) {
        if (decl.merge_keep && !decl.merge_keep(*stored_cells[i], row)) continue;
        if (kept.size() == row.size()) {
          merged.rows.push_back(row);
          continue;
        }
        std::vector<std::string> fields;
        fields.reserve(kept.size());
        for (const std::size_t c : kept) fields.push_back(row.at(c));
        merged.rows.push_back(std::move(fields));
      }
    }
    const std::string file =
        decl.name == kMainTable ? spec.name + ".csv" : spec.name + "_" + decl.name + ".csv";
    files[decl.name] = {{"file", file}, {"rows", merged.rows.size()}, {"columns", merged.columns}};
    if (decl.merge_keep) files[decl.name]["rows_in_cells"] = in_cells;
    if (!decl.merge_drop.empty()) files[decl.name]["columns_in_cells_only"] = decl.merge_drop;
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
                         {"cpu_model", j.value("cpu_model", "")},
                         {"threads", j.value("threads", 0)},
                         {"start_utc", s},
                         {"end_utc", e},
                         {"wall_time_s", j.value("wall_time_s", 0.0)},
                         {"cpu_time_s", j.value("cpu_time_s", 0.0)},
                         {"git_commit", j.value("git_commit", "unknown")},
                         {"git_dirty", j.contains("git_dirty") ? j["git_dirty"] : nullptr},
                         {"checksum", j.at("checksum")}});
    if (j.value("flush_denormals", false)) cell_meta.back()["flush_denormals"] = true;
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
  double wall_total = 0, cpu_total = 0;
  for (const auto& c : cell_meta) {
    wall_total += c.at("wall_time_s").get<double>();
    cpu_total += c.at("cpu_time_s").get<double>();
  }
  meta["cells_wall_time_s"] = wall_total;  // Σ over cells (inflated when cells share the cores)
  meta["cells_cpu_time_s"] = cpu_total;    // Σ user + system CPU of the cells' processes
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

}  // namespace seqlab::experiment::detail
