// Running cells: execution with resume, --status, and run_experiment, the entry point of every
// experiment binary (experiment.hpp).
#include "seqlab/experiment/experiment.hpp"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <new>
#include <stdexcept>

#include "cell_store.hpp"
#include "cli.hpp"
#include "merge.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/experiment/io.hpp"
#include "seqlab/experiment/metadata.hpp"

namespace fs = std::filesystem;

namespace seqlab::experiment {

namespace {

using namespace detail;

// User + system CPU seconds of this process so far (every thread: OpenBLAS's and ours). Unlike
// the wall clock, it hardly grows when other processes share the cores, so a cell's cost can be
// read off a loaded machine.
double process_cpu_seconds() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// 16 hex digits of fnv1a64 of this executable's bytes (/proc/self/exe), read once: what
// identifies the code that computes a shared pilot (Cell::build_identity), unlike the git commit,
// which moves when results are committed and says nothing about a dirty tree. "" if unreadable.
const std::string& executable_hash() {
  static const std::string hash = [] {
    const auto bytes = read_text_file("/proc/self/exe");
    if (!bytes) return std::string();
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(*bytes)));
    return std::string(hex);
  }();
  return hash;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", s);
  return buf;
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
    const auto r = load_or_adopt_cell(file, c, c.fingerprint(spec.name), spec, false);
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
  // --flush-denormals for this run only (run_experiment is also called in process, by tests):
  // restored on every way out. parse_invocation refused it where it is not supported.
  struct FlushDenormals {
    bool on, was = flush_denormals();
    explicit FlushDenormals(bool on_) : on(on_) {
      if (on) set_flush_denormals(true);
    }
    ~FlushDenormals() {
      if (on && !was) set_flush_denormals(false);
    }
  } flush{inv.flush_denormals};
  const fs::path cells_dir = fs::path(inv.out) / "cells";
  const fs::path checkpoints_dir = fs::path(inv.out) / "checkpoints";
  create_output_dirs(cells_dir);
  if (inv.checkpoint_every > 0) create_output_dirs(checkpoints_dir);
  if (inv.save_model) create_output_dirs(fs::path(inv.out) / "models");
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
        std::error_code ec;
        const bool existed = fs::exists(fs::symlink_status(file, ec));
        const auto stored = load_or_adopt_cell(file, c, fp, spec, true);
        if (stored.status == StoredCell::Status::Ok) {
          if (stored.json.value("git_commit", std::string()) != build.value("git_commit", "")) {
            ++other_commit;
          }
          remove_cell_checkpoints(checkpoints_dir, stem);  // left by a kill after the write
          log(inv, spec, prefix + (existed ? ": already done, skipped (--force recomputes)"
                                           : ": already done, stored before keys it never reads left its "
                                             "fingerprint; written as " + file.string()));
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
      run.flush_denormals = inv.flush_denormals;
      if (inv.save_model) run.model_prefix = (fs::path(inv.out) / "models" / stem).string();
      run.checkpoint_prefix = (checkpoints_dir / stem).string();
      const std::string fp_mode = inv.flush_denormals ? " flush_denormals" : "";
      run.checkpoint_identity = fp.dump() + " threads=" + std::to_string(inv.threads) + fp_mode +
                                " seqlab=" + build.value("seqlab_version", "") +
                                " commit=" + build.value("git_commit", "");
      run.pilot_dir = (fs::path(inv.out) / "pilots").string();
      if (!executable_hash().empty())
        run.build_identity = " threads=" + std::to_string(inv.threads) + fp_mode + " exe=" + executable_hash();
      const std::string cell_start = utc_now();
      const auto t0 = std::chrono::steady_clock::now();
      const double cpu0 = process_cpu_seconds();
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
      const double cpu = process_cpu_seconds() - cpu0;
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      nlohmann::json j = {{"experiment", spec.name},
                          {"index", i},
                          {"label", c.label()},
                          {"fingerprint", fp},
                          {"host", machine.at("host")},
                          {"cpu_model", machine.at("cpu_model")},
                          {"threads", inv.threads},
                          {"start_utc", cell_start},
                          {"end_utc", utc_now()},
                          {"wall_time_s", wall},
                          {"cpu_time_s", cpu},
                          {"git_commit", build.at("git_commit")},
                          {"git_dirty", build.at("git_dirty")},
                          {"seqlab_version", build.at("seqlab_version")},
                          {"command_line", inv.command_line},
                          {"checksum", cell_checksum(fp, tables)},
                          {"tables", tables}};
      if (inv.flush_denormals) j["flush_denormals"] = true;
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

// Flushes std::cout; false (after a message on stderr) if writing failed, e.g. to /dev/full.
bool flush_stdout(const ExperimentSpec& spec) {
  std::cout.flush();
  if (std::cout) return true;
  std::cerr << spec.name << ": error: cannot write to standard output" << std::endl;
  return false;
}

}  // namespace

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
