#!/usr/bin/env bash
# cmake --install of a seqlab build into a temporary prefix, then a separate project
# (consumer/) configured with find_package(seqlab) against it, built and run.
# usage: test_install.sh BUILD_DIR EXPECTED_VERSION
set -euo pipefail
build=$(readlink -f "$1")
version=$2
here=$(dirname "$(readlink -f "$0")")
tmp=$(mktemp -d /tmp/seqlab_install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/seqlab/version.hpp"
test -f "$tmp/prefix/lib/cmake/seqlab/seqlabConfig.cmake" || test -f "$tmp/prefix/lib/x86_64-linux-gnu/cmake/seqlab/seqlabConfig.cmake"
cmake -S "$here/consumer" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" >/dev/null
out=$("$tmp/build/consumer")
echo "$out"
case "$out" in
  "seqlab $version params="*" ok") echo "install test: ok" ;;
  *) echo "install test: unexpected output (wanted 'seqlab $version params=N ok')" >&2; exit 1 ;;
esac
