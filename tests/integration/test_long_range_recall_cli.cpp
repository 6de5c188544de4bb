// The long_range_recall binary at tiny scale: bad input, --list-cells, determinism, resume after
// SIGKILL, --force, rerun of a finished sweep. Runs the built executable in temporary directories.
#include <catch2/catch.hpp>
#include "temp_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace fs = std::filesystem;

namespace {
struct TempDir : seqlab::test::TempDir {
  TempDir() : seqlab::test::TempDir("seqlab_lrr_cli") {}
};

const std::string kBinary = SEQLAB_EXPERIMENTS_BIN_DIR "/long_range_recall";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t count_lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Starts the binary with `args`, stdout/stderr to files in `io_dir` (stdout to `stdout_path`
// instead if given); returns the pid.
pid_t spawn(const std::vector<std::string>& args, const fs::path& io_dir,
            const std::string& stdout_path = "") {
  std::vector<std::string> all = {kBinary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  const std::string out_path =
      stdout_path.empty() ? (io_dir / "stdout.txt").string() : stdout_path;
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, (io_dir / "stderr.txt").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, kBinary.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE(rc == 0);
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct Run {
  int code;
  std::string out, err;
};

// Runs to completion; io files live in `io_dir` (must not be inside an --out directory).
Run run(const std::vector<std::string>& args, const fs::path& io_dir) {
  const int code = wait_exit(spawn(args, io_dir));
  return {code, slurp(io_dir / "stdout.txt"), slurp(io_dir / "stderr.txt")};
}

// A tiny but real grid: 2 T values x 2 seeds, a few updates of a 4-unit LSTM.
std::vector<std::string> tiny(const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"--T=3,6",         "--seeds=2",        "--steps=12",
                                "--hidden_size=4", "--embedding_dim=3", "--batch=4",
                                "--test_batch=10", "--log_every=5",    "--out=" + out.string()};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// CSV text without the column `drop` (by header name); fields never contain commas here.
std::string drop_column(const std::string& csv, const std::string& drop) {
  std::istringstream in(csv);
  std::string line, out;
  long idx = -1;
  bool header = true;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    if (header) {
      for (std::size_t i = 0; i < f.size(); ++i)
        if (f[i] == drop) idx = static_cast<long>(i);
      header = false;
    }
    std::string row;
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (static_cast<long>(i) == idx) continue;
      row += (row.empty() ? "" : ",") + f[i];
    }
    out += row + "\n";
  }
  REQUIRE(idx >= 0);
  return out;
}

std::size_t cell_files(const fs::path& out) {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out / "cells", ec))
    n += e.path().extension() == ".json";
  return n;
}

}  // namespace

TEST_CASE("long_range_recall rejects bad input with exit 2 and writes nothing", "[integration][long_range_recall]") {
  REQUIRE(fs::exists(kBinary));
  TempDir d;
  const fs::path out = d.path / "res";
  std::ofstream(d.path / "file.txt") << "x";
  std::ofstream(d.path / "unknown.ini") << "T = 3\nhidden = 4\n";
  // Tiny values underneath every case, so that a case that wrongly passes validation is quick.
  const fs::path tiny_ini = d.path / "tiny.ini";
  std::ofstream(tiny_ini) << "T = 3\nseeds = 1\nsteps = 2\nhidden_size = 2\nbatch = 2\n"
                             "test_batch = 2\nlog_every = 1\n";
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {{"--hiden_size=4"}, {"unknown key '--hiden_size'", "hidden_size"}},
      {{"--steps=abc"}, {"steps", "'abc'", "integer in [1, 1000000000]"}},
      {{"--hidden_size=-3"}, {"hidden_size", "'-3'", "[1, 65536]"}},
      {{"--batch=0"}, {"batch", "'0'", "[1, 1000000]"}},
      // int64 values that an int or size_t would truncate or overflow: rejected by their bounds.
      {{"--log_every=4294967296"}, {"log_every", "'4294967296'", "[1, 1000000000]"}},
      {{"--steps=4294967296"}, {"steps", "'4294967296'", "[1, 1000000000]"}},
      {{"--T=3,4294967299"}, {"T", "'4294967299' is out of range", "[1, 1000000]"}},
      {{"--embedding_dim=2305843009213693952"}, {"embedding_dim", "[1, 65536]"}},
      {{"--batch=4611686018427387904"}, {"batch", "[1, 1000000]"}},
      {{"--hidden_size=4611686018427387904"}, {"hidden_size", "[1, 65536]"}},
      {{"--test_batch=4611686018427387904"}, {"test_batch", "[1, 1000000]"}},
      {{"--num_layers=1001"}, {"num_layers", "[1, 1000]"}},
      {{"--kernel_size=4097"}, {"kernel_size", "[1, 4096]"}},
      {{"--warmup_steps=4294967296"}, {"warmup_steps", "[0, 1000000000]"}},
      {{"--seeds=4611686018427387904"}, {"seeds", "[1, 100000]"}},
      {{"--T=3,4,5,6", "--seeds=100000"}, {"the grid has 400000 cells", "T (4 values)", "seeds (100000)", "at most 100000"}},
      {{"--seed=9223372036854775808"}, {"seed", "[0, 9223372036854775807]"}},
      {{"--threads=100000"}, {"threads: invalid value '100000' (from the command line): expected an integer in [1, 1024]"}},
      // Reals that are finite as double but not as float.
      {{"--weight_decay=1e39"}, {"weight_decay", "'1e39'", "too large for a float", "[0, 3.40282347e+38]"}},
      {{"--lr=1e39"}, {"lr: invalid value '1e39'", "(0, 3.40282347e+38]"}},
      {{"--lr=1e-50"}, {"lr: invalid value '1e-50'", "rounds to 0 as a float"}},
      {{"--config=/proc/self/mem"}, {"--config: cannot read '/proc/self/mem'", "Input/output error"}},
      {{"--T=0,5"}, {"T", "'0,5'"}},
      {{"--T="}, {"T", "empty list"}},
      {{"--lr=0"}, {"lr", "'0'", "(0, 3.40282347e+38]"}},
      {{"--lr=fast"}, {"lr", "'fast'"}},
      {{"--model=transformer"}, {"model", "'transformer'", "lstm"}},
      {{"--model=tcn", "--kernel_size=0"}, {"kernel_size", "'0'", "[1, 4096]"}},
      {{"--nonlinearity=sigmoid"}, {"nonlinearity", "sigmoid", "tanh"}},
      {{"--optimizer=rmsprop"}, {"optimizer", "'rmsprop'", "adam|adamw|sgd"}},
      {{"--schedule=inverse_sqrt"}, {"warmup_steps", "inverse_sqrt"}},
      {{"--steps=10", "--warmup_steps=100"}, {"warmup_steps", "'100'", "<= steps (10)"}},
      {{"--config=" + (d.path / "missing.ini").string()}, {"--config", "missing.ini"}},
      {{"--config=" + (d.path / "unknown.ini").string()}, {"unknown key 'hidden'", "unknown.ini"}},
      {{"--scale=huge"}, {"--scale", "'huge'", "paper|quick"}},
      {{"--T=3,6", "--seeds=2", "--cell=99"}, {"--cell", "'99'", "[0, 3]"}},
      {{"--T=3,6", "--seeds=2", "--cells=3-1"}, {"--cells", "'3-1'", "0 <= A <= B <= 3"}},
      {{"--cell=0", "--cells=0-1"}, {"--cell and --cells"}},
      {{"--threads=0"}, {"threads: invalid value '0' (from the command line): expected an integer in [1, 1024]"}},
      {{"--out=" + (d.path / "link").string()}, {"--out", "dangling symbolic link"}},
      {{"--out=/proc/seqlab_lrr"}, {"--out", "'/proc' is on a proc file system"}},
  };
  fs::create_symlink(d.path / "gone" / "res", d.path / "link");
  for (const auto& c : cases) {
    std::vector<std::string> args;
    if (c.args.front().rfind("--out", 0) != 0) args.push_back("--out=" + out.string());
    const bool own_config = c.args.front().rfind("--config", 0) == 0 ||
                            c.args.front().rfind("--scale", 0) == 0;
    if (!own_config) args.push_back("--config=" + tiny_ini.string());
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Run r = run(args, d.path);
    INFO(c.args.back() << " -> " << r.err);
    CHECK(r.code == 2);
    CHECK(count_lines(r.err) == 1);
    for (const auto& e : c.expect) CHECK_THAT(r.err, Catch::Contains(e));
    CHECK_FALSE(fs::exists(out));
    CHECK_FALSE(fs::exists(d.path / "gone"));
  }
  // Unwritable --out: a path below a regular file (fails for every user, root included).
  const fs::path bad_out = d.path / "file.txt" / "res";
  const Run r = run({"--T=3", "--steps=2", "--out=" + bad_out.string()}, d.path);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK_THAT(r.err, Catch::Contains("--out") && Catch::Contains("file.txt"));
}

TEST_CASE("long_range_recall lists its cells", "[integration][long_range_recall]") {
  TempDir d;
  const Run r = run(tiny(d.path / "res", {"--list-cells"}), d.path);
  CHECK(r.code == 0);
  CHECK(r.out == "0 model=lstm T=3 seed=0\n1 model=lstm T=3 seed=1\n"
                 "2 model=lstm T=6 seed=0\n3 model=lstm T=6 seed=1\n");
  CHECK_FALSE(fs::exists(d.path / "res"));
  const Run help = run({"--help"}, d.path);
  CHECK(help.code == 0);
  // Output that cannot be written (a full disk) is a failure, not a silent success.
  if (fs::exists("/dev/full")) {
    for (const char* flag : {"--help", "--list-cells"}) {
      INFO(flag);
      CHECK(wait_exit(spawn({flag, "--T=3"}, d.path, "/dev/full")) == 1);
      CHECK_THAT(slurp(d.path / "stderr.txt"), Catch::Contains("cannot write to standard output"));
    }
  }
  for (const char* k : {"--T=LIST", "[steps]", "--hidden_size=VALUE", "[units]", "--lr=VALUE",
                        "--log_every", "--test_batch", "--clip_norm", "--schedule", "--seeds"}) {
    INFO(k);
    CHECK_THAT(help.out, Catch::Contains(k));
  }
}

TEST_CASE("long_range_recall is deterministic resumable and skips finished cells", "[integration][long_range_recall]") {
  TempDir d;
  // Reference: an uninterrupted run.
  const fs::path ref = d.path / "ref";
  const Run a = run(tiny(ref), d.path);
  INFO(a.err);
  REQUIRE(a.code == 0);
  const std::string ref_csv = slurp(ref / "long_range_recall.csv");
  const std::string ref_steps = slurp(ref / "long_range_recall_steps.csv");
  REQUIRE(count_lines(ref_csv) == 5);
  CHECK(ref_csv.rfind("experiment,model,task,T,seq_len,seed,derived_seed,n_params,", 0) == 0);
  CHECK_THAT(ref_csv, Catch::Contains(",final_train_loss,train_time_s\n"));
  // 12 steps logged every 5: rows at 5, 10, 12 per cell.
  CHECK(count_lines(ref_steps) == 1 + 4 * 3);
  CHECK(ref_steps.rfind("experiment,model,task,T,seq_len,seed,step,train_loss,grad_norm,lr\n", 0) == 0);
  CHECK(fs::exists(ref / "long_range_recall.meta.json"));

  // Same seed and threads: identical metric columns, byte for byte.
  const fs::path again = d.path / "again";
  REQUIRE(run(tiny(again), d.path).code == 0);
  CHECK(drop_column(slurp(again / "long_range_recall.csv"), "train_time_s") ==
        drop_column(ref_csv, "train_time_s"));
  CHECK(slurp(again / "long_range_recall_steps.csv") == ref_steps);
  // Another base seed changes the numbers.
  const fs::path other = d.path / "other";
  REQUIRE(run(tiny(other, {"--seed=2"}), d.path).code == 0);
  CHECK(drop_column(slurp(other / "long_range_recall.csv"), "train_time_s") !=
        drop_column(ref_csv, "train_time_s"));

  // Kill mid-sweep: more work per cell so that the kill lands between cells.
  const fs::path killed = d.path / "killed";
  const std::vector<std::string> slow = {"--T=3,4,5,6", "--seeds=2", "--steps=1000",
                                         "--hidden_size=8", "--embedding_dim=3", "--batch=8",
                                         "--test_batch=10", "--log_every=100"};
  auto slow_args = [&](const fs::path& out) {
    auto a2 = slow;
    a2.push_back("--out=" + out.string());
    return a2;
  };
  const pid_t pid = spawn(slow_args(killed), d.path);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (cell_files(killed) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  kill(pid, SIGKILL);
  CHECK(wait_exit(pid) == 128 + SIGKILL);
  const std::size_t done_before = cell_files(killed);
  REQUIRE(done_before >= 1);
  CHECK(done_before < 8);  // the kill landed mid-sweep
  CHECK_FALSE(fs::exists(killed / "long_range_recall.csv"));
  // A temporary file as the killed process would leave it mid-write (its pid, this host), and one
  // of a writer on another host sharing the directory: the resume removes only the first.
  std::string host(256, '\0');
  REQUIRE(gethostname(host.data(), host.size() - 1) == 0);
  host.resize(std::strlen(host.c_str()));
  for (char& ch : host)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_')) ch = '_';
  const std::string stale_tmp = ".model=lstm_T=3_seed=0_0.json~" + host + "~" + std::to_string(pid) + ".tmp";
  const std::string foreign_tmp = ".model=lstm_T=3_seed=0_0.json~elsewhere~" + std::to_string(pid) + ".tmp";
  std::ofstream(killed / "cells" / stale_tmp) << "{\"half";
  std::ofstream(killed / "cells" / foreign_tmp) << "{\"half";
  // Resume: the finished cells are skipped, the merged CSV equals an uninterrupted run's.
  const Run resumed = run(slow_args(killed), d.path);
  INFO(resumed.err);
  REQUIRE(resumed.code == 0);
  std::size_t skipped = 0;
  for (std::size_t p = resumed.err.find("skipped"); p != std::string::npos;
       p = resumed.err.find("skipped", p + 1))
    ++skipped;
  CHECK(skipped == done_before);
  CHECK_FALSE(fs::exists(killed / "cells" / stale_tmp));
  CHECK(fs::exists(killed / "cells" / foreign_tmp));
  fs::remove(killed / "cells" / foreign_tmp);
  const fs::path full = d.path / "full";
  REQUIRE(run(slow_args(full), d.path).code == 0);
  CHECK(drop_column(slurp(killed / "long_range_recall.csv"), "train_time_s") ==
        drop_column(slurp(full / "long_range_recall.csv"), "train_time_s"));
  CHECK(slurp(killed / "long_range_recall_steps.csv") == slurp(full / "long_range_recall_steps.csv"));
  for (const auto& e : fs::directory_iterator(killed / "cells")) {
    // Only finished cells (and possibly the killed cell's temporary file, hidden, never a .json).
    if (e.path().extension() == ".json") CHECK(e.path().filename().string()[0] != '.');
  }

  // A second run on the finished sweep computes nothing; --force recomputes every cell.
  const Run rerun = run(tiny(ref), d.path);
  REQUIRE(rerun.code == 0);
  CHECK(count_lines(rerun.err) >= 4);
  CHECK_THAT(rerun.err, !Catch::Contains("done in"));
  CHECK(slurp(ref / "long_range_recall.csv") == ref_csv);
  const Run forced = run(tiny(ref, {"--force"}), d.path);
  REQUIRE(forced.code == 0);
  CHECK_THAT(forced.err, !Catch::Contains("skipped"));
  CHECK_THAT(forced.err, Catch::Contains("cell 3/4 (model=lstm T=6 seed=1): done in"));
  CHECK(drop_column(slurp(ref / "long_range_recall.csv"), "train_time_s") ==
        drop_column(ref_csv, "train_time_s"));

  // Partial runs (one Slurm task per cell) then --merge give the same CSV.
  const fs::path parts = d.path / "parts";
  for (int c = 0; c < 4; ++c) REQUIRE(run(tiny(parts, {"--cell=" + std::to_string(c)}), d.path).code == 0);
  CHECK_FALSE(fs::exists(parts / "long_range_recall.csv"));
  REQUIRE(run(tiny(parts, {"--merge"}), d.path).code == 0);
  CHECK(drop_column(slurp(parts / "long_range_recall.csv"), "train_time_s") ==
        drop_column(ref_csv, "train_time_s"));
}

TEST_CASE("long_range_recall records divergence in the last update and an empty curve", "[integration][long_range_recall]") {
  TempDir d;
  const fs::path out = d.path / "res";
  // One update at lr 1e30 leaves finite but huge parameters whose evaluation overflows (NaN).
  const Run r = run({"--T=3", "--seeds=1", "--steps=1", "--lr=1e30", "--test_batch=10",
                     "--out=" + out.string()},
                    d.path);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string csv = slurp(out / "long_range_recall.csv");
  std::istringstream lines(csv);
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  auto field = [&](const std::string& name) {
    std::vector<std::string> h, v;
    std::stringstream hs(header), vs(row);
    for (std::string x; std::getline(hs, x, ',');) h.push_back(x);
    for (std::string x; std::getline(vs, x, ',');) v.push_back(x);
    for (std::size_t i = 0; i < h.size() && i < v.size(); ++i)
      if (h[i] == name) return v[i];
    return std::string("<missing>");
  };
  INFO(csv);
  CHECK(field("test_loss") == "nan");
  CHECK(field("diverged") == "1");
  CHECK(field("diverged_step") == "1");
  CHECK(field("steps_done") == "1");
  // The curve table is always written, so no stale curve from another run can sit beside it.
  CHECK(slurp(out / "long_range_recall_steps.csv")
            .rfind("experiment,model,task,T,seq_len,seed,step,train_loss,grad_norm,lr\n", 0) == 0);
}

TEST_CASE("long_range_recall merges only intact cells", "[integration][long_range_recall]") {
  TempDir d;
  const fs::path out = d.path / "res";
  const std::vector<std::string> args = {"--T=3",           "--seeds=1",         "--steps=2",
                                         "--hidden_size=2", "--embedding_dim=2", "--batch=2",
                                         "--test_batch=2",  "--log_every=1",     "--out=" + out.string()};
  REQUIRE(run(args, d.path).code == 0);
  const std::string good_csv = slurp(out / "long_range_recall.csv");
  fs::path cell;
  for (const auto& e : fs::directory_iterator(out / "cells"))
    if (e.path().extension() == ".json") cell = e.path();
  REQUIRE_FALSE(cell.empty());
  // Edit one number of the stored result (fingerprint intact), as a hand edit or bit rot would.
  std::string text = slurp(cell);
  const auto pos = text.find("\"copy_memory\"");
  REQUIRE(pos != std::string::npos);
  text.replace(pos, 13, "\"GARBAGE\"");
  std::ofstream(cell, std::ios::trunc) << text;
  auto merge_args = args;
  merge_args.push_back("--merge");
  const Run m = run(merge_args, d.path);
  INFO(m.err);
  CHECK(m.code == 1);
  CHECK_THAT(m.err, Catch::Contains("1 of 1 cells are corrupt: 0") &&
                        Catch::Contains("model=lstm T=3 seed=0") && Catch::Contains("checksum mismatch"));
  // A rerun recomputes it; the merged CSV is the same as before.
  const Run again = run(args, d.path);
  CHECK(again.code == 0);
  CHECK_THAT(again.err, Catch::Contains("is corrupt"));
  CHECK(drop_column(slurp(out / "long_range_recall.csv"), "train_time_s") ==
        drop_column(good_csv, "train_time_s"));
}
