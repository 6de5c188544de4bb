#!/usr/bin/env bash
# seqlab's entry point.
#   ./run_all.sh            install missing Debian packages, build Release, run every experiment
#                           (quick scale), merge, plot
#   ./run_all.sh test       install, build, run the test suite (ctest)
#   ./run_all.sh test --sanitize
#                           the same with AddressSanitizer + UndefinedBehaviorSanitizer (the asan
#                           preset, build/asan, -O1): any memory error, leak or undefined behaviour
#                           fails the test that hit it. Left to the Release suite: the plots.*
#                           Python tests (no seqlab code runs in them) and cluster.slurm (Slurm's
#                           scripts around the same binaries; 95 s, mostly waiting on the daemons),
#                           so that CI (.ci/run), which runs both suites, stays within 30 min.
#                           SEQLAB_SANITIZE_ALL=1 runs those too.
#   ./run_all.sh deps       only install what is missing
#   ./run_all.sh build      install and build
# Options (main job): --scale quick|standard|paper (default quick), --jobs N (parallel cells,
#                     default: cores), --force (recompute finished cells)
#                     quick writes results/<experiment>/ and results/REPORT.md; standard and paper
#                     write results/<scale>/<experiment>/ and results/<scale>/REPORT.md, so the
#                     main job never overwrites a longer run; their report sets each verdict beside
#                     the quick run's when results/<experiment>/ holds one (make_report.py --quick).
# Environment: SEQLAB_BUILD_DIR (default build/release), PYTHON (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"

# The one list of Debian 12 packages seqlab needs (build, tests, plots, and the King James Version
# that the text task prepares as its default corpus).
PACKAGES=(
  cmake ninja-build g++ git
  libopenblas-dev libxtensor-dev libxtensor-blas-dev libxsimd-dev
  libboost-program-options-dev libbenchmark-dev catch2 nlohmann-json3-dev
  python3 python3-numpy python3-matplotlib
  bible-kjv bible-kjv-text
)
EXPERIMENTS=(parallel_speedup long_range_recall position_extrapolation norm_stability attention_ablations)
# Experiments that time themselves run one cell at a time (cells in parallel would share the cores
# they measure); they use the threads their grid asks for.
declare -A SERIAL=([parallel_speedup]=1)

BUILD_DIR=${SEQLAB_BUILD_DIR:-build/release}
PYTHON=${PYTHON:-/usr/bin/python3}

say() { printf '[run_all] %s\n' "$*" >&2; }
die() { printf '[run_all] error: %s\n' "$1" >&2; exit "${2:-1}"; }

install_deps() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    say "all ${#PACKAGES[@]} Debian packages present"
    return
  fi
  if [ "$(id -u)" -ne 0 ]; then
    die "missing Debian packages: ${missing[*]}
  run this script as root, or install them first:
    sudo apt-get update && sudo apt-get install -y ${missing[*]}"
  fi
  say "installing missing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() {
  if [ "$BUILD_DIR" = build/asan ]; then
    say "configuring and building (ASan + UBSan, -O1 -g1) in $BUILD_DIR"
    cmake --preset asan >/dev/null
    cmake --build "$BUILD_DIR" -j "$(nproc)"
    return
  fi
  say "configuring and building (Release) in $BUILD_DIR"
  if [ "$BUILD_DIR" = build/release ]; then
    cmake --preset release >/dev/null
  else
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  cmake --build "$BUILD_DIR" -j "$(nproc)"
}

run_tests() {
  local exclude=()
  if [ "$BUILD_DIR" = build/asan ] && [ "${SEQLAB_SANITIZE_ALL:-0}" != 1 ]; then
    exclude=(-E '^(plots|cluster)[.]')   # see the header: run in the Release suite
    say "running the test suite under ASan + UBSan (all but plots.* and cluster.slurm)"
  elif [ "$BUILD_DIR" = build/asan ]; then
    say "running the whole test suite under ASan + UBSan"
  else
    say "running the test suite"
  fi
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" "${exclude[@]}"
}

# results/ for the quick scale, results/<scale>/ for the others.
results_root() { if [ "$1" = quick ]; then echo results; else echo "results/$1"; fi; }

run_experiment() {
  local name=$1 scale=$2 jobs=$3 force=$4
  local bin="$BUILD_DIR/experiments/$name" out
  out="$(results_root "$scale")/$name"
  [ -n "${SERIAL[$name]:-}" ] && jobs=1
  [ -x "$bin" ] || die "experiment binary $bin not built"
  local n
  n=$("$bin" --scale "$scale" --list-cells | wc -l)
  local done_before
  done_before=$( (find "$out/cells" -maxdepth 1 -name '*.json' 2>/dev/null || true) | wc -l)
  say "$name: $n cells at scale '$scale', $jobs at a time (1 thread each); $done_before cell files already in $out/cells (finished cells are skipped${force:+, but --force recomputes them})"
  # One process per cell, as one Slurm array task would run it; finished cells are skipped.
  seq 0 $((n - 1)) | xargs -P "$jobs" -I{} \
    "$bin" --scale "$scale" --cell {} --threads 1 --out "$out" $force
  "$bin" --scale "$scale" --merge --out "$out"
  if [ -f "plots/plot_$name.py" ]; then
    "$PYTHON" "plots/plot_$name.py" "$out"
  fi
}

main_job() {
  local scale=quick jobs force=""
  jobs=$(nproc)
  while [ $# -gt 0 ]; do
    case "$1" in
      --scale) [ $# -ge 2 ] || die "--scale needs a value (quick, standard or paper)" 2; scale=$2; shift 2 ;;
      --jobs) [ $# -ge 2 ] || die "--jobs needs a value (a positive integer)" 2; jobs=$2; shift 2 ;;
      --force) force=--force; shift ;;
      *) die "unknown option '$1' (allowed: --scale quick|standard|paper, --jobs N, --force)" 2 ;;
    esac
  done
  case "$scale" in quick|standard|paper) ;; *) die "--scale '$scale' is not allowed (quick, standard or paper)" 2 ;; esac
  [[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs '$jobs' must be a positive integer" 2
  local e root
  root=$(results_root "$scale")
  for e in "${EXPERIMENTS[@]}"; do
    [ -f "experiments/$e/configs/$scale.ini" ] || die "experiments/$e/configs/$scale.ini is missing: scale '$scale' is not defined for $e" 2
  done
  install_deps
  build
  for e in "${EXPERIMENTS[@]}"; do run_experiment "$e" "$scale" "$jobs" "$force"; done
  # A standard or paper report sets its verdicts beside the quick run's, where results/ has one.
  local report quick=()
  if [ "$scale" != quick ]; then
    for e in "${EXPERIMENTS[@]}"; do
      if [ -f "results/$e/$e.csv" ]; then quick=(--quick results); fi
    done
  fi
  report=$("$PYTHON" plots/make_report.py "$root" "${quick[@]}")
  say "done: results in $(pwd)/$root"
  say "report: $report"
}

case "${1:-all}" in
  test)
    case "${2:-}" in
      "") ;;
      --sanitize)
        BUILD_DIR=build/asan
        # Stop at the first error with a stack trace; LeakSanitizer on (the default).
        export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:halt_on_error=1:detect_leaks=1}
        export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
        ;;
      *) die "unknown option '$2' of test (allowed: --sanitize)" 2 ;;
    esac
    [ $# -le 2 ] || die "test takes at most one option (--sanitize); got also '$3'" 2
    install_deps; build; run_tests ;;
  deps) [ $# -le 1 ] || die "deps takes no options; got '$2'" 2; install_deps ;;
  build) [ $# -le 1 ] || die "build takes no options; got '$2'" 2; install_deps; build ;;
  all) shift || true; main_job "$@" ;;
  -h|--help|help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' ;;
  --*) main_job "$@" ;;
  *) die "unknown command '$1' (allowed: test, deps, build, all, or options of the main job; see --help)" 2 ;;
esac
