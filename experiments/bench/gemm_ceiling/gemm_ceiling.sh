#!/usr/bin/env bash
# The GEMM-only ceiling of the encoder layer at 2 threads (README.md beside this file).
# usage: experiments/bench/gemm_ceiling/gemm_ceiling.sh [BUILD_DIR]   (default build/release)
# Builds three small programs into a temporary folder against BUILD_DIR's libseqlab_nn.a, records the
# GEMMs of one forward + backward of the encoder layer at a budget of 2 threads, and replays them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$(cd "${1:-$root/build/release}" && pwd)
[ -f "$build/libseqlab_nn.a" ] || { echo "gemm_ceiling: no libseqlab_nn.a in $build (build it first)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -shared -fPIC "$here/gemm_log_shim.c" -o "$tmp/gemm_log_shim.so" -ldl -lpthread
g++ -std=c++17 -O2 -march=native -DXTENSOR_USE_XSIMD -I"$root/lib/include" -I"$build/generated" \
  "$here/encoder_step.cpp" "$build/libseqlab_nn.a" -lopenblas -lpthread \
  -o "$tmp/encoder_step"
g++ -O2 "$here/replay.cpp" -o "$tmp/replay" -lopenblas -lpthread
GEMM_LOG="$tmp/gemms.txt" LD_PRELOAD="$tmp/gemm_log_shim.so" "$tmp/encoder_step" 2 >/dev/null
"$tmp/replay" "$tmp/gemms.txt"
