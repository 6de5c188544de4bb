#!/usr/bin/env bash
# Runs bench_layers with 5 repetitions per case and writes the aggregates (mean, median, stddev,
# cv) as JSON to results/bench/bench_layers.json; the console table goes to stdout.
# Usage: experiments/bench/run_bench.sh [extra Google Benchmark flags, e.g. --benchmark_filter=LSTM]
# Environment: BUILD_DIR (default build/release) is the CMake build directory holding
# experiments/bench_layers (configure with -DSEQLAB_BUILD_BENCH=ON, the default); OUT_DIR
# (default results/bench) receives bench_layers.json. Relative paths are from the repository root.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="${BUILD_DIR:-build/release}"
case "$build_dir" in /*) ;; *) build_dir="$root/$build_dir" ;; esac
bin="$build_dir/experiments/bench_layers"
if [[ ! -x "$bin" ]]; then
  echo "run_bench.sh: $bin not found; build it with:" >&2
  echo "  cmake --preset release && cmake --build --preset release --target bench_layers" >&2
  exit 2
fi

out_dir="${OUT_DIR:-results/bench}"
case "$out_dir" in /*) ;; *) out_dir="$root/$out_dir" ;; esac
mkdir -p "$out_dir"
# Written to a temporary file and renamed on success, so an interrupted run never leaves a
# half-written bench_layers.json.
tmp="$out_dir/bench_layers.json.tmp"
"$bin" \
  --benchmark_out="$tmp" --benchmark_out_format=json \
  --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  "$@"
mv -f "$tmp" "$out_dir/bench_layers.json"
echo "run_bench.sh: wrote $out_dir/bench_layers.json" >&2
