#!/usr/bin/env bash
# cmake --install of a seqlab build into a temporary prefix, then a separate project
# (consumer/) configured with find_package(seqlab COMPONENTS nn) against it, built and run.
# Checks, each of which fails the test:
#   - the consumer links seqlab::nn alone (consumer/CMakeLists.txt fails if the nn component
#     defines the experiment side's targets or those of Boost or nlohmann-json);
#   - it is compiled without -march=native (none in its compile command), so linking it against
#     a library built with SEQLAB_NATIVE=ON (the default) shows the ABI does not depend on the
#     CPU flags;
#   - neither the consumer's source nor any installed header of seqlab::nn's folders (core, nn,
#     models, train, tasks) reaches a Boost or nlohmann-json header: the preprocessor's list of
#     included files (g++ -M, with the consumer's own flags) names none. On Debian those headers
#     sit in /usr/include, so looking at the include path alone would prove nothing. The same
#     check on an experiment header must find Boost, or the check itself is broken.
# usage: test_install.sh BUILD_DIR EXPECTED_VERSION
set -euo pipefail
build=$(readlink -f "$1")
version=$2
here=$(dirname "$(readlink -f "$0")")
tmp=$(mktemp -d /tmp/seqlab_install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/seqlab/version.hpp" || fail "version.hpp not installed"
test -f "$tmp/prefix/lib/cmake/seqlab/seqlabConfig.cmake" ||
  test -f "$tmp/prefix/lib/x86_64-linux-gnu/cmake/seqlab/seqlabConfig.cmake" || fail "no seqlabConfig.cmake"
cmake -S "$here/consumer" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" >/dev/null

# The consumer's compile command: its flags, without -march.
command=$(python3 - "$tmp/build/compile_commands.json" <<'PY'
import json, sys
entries = [e for e in json.load(open(sys.argv[1])) if e["file"].endswith("main.cpp")]
assert len(entries) == 1, entries
print(entries[0]["command"])
PY
)
case "$command" in
  *-march=*) fail "the consumer is compiled with -march (inherited from the package?): $command" ;;
esac

# Included files of the consumer and of every installed nn header, with the consumer's flags.
deps_of() {  # deps_of FILE...: the files the preprocessor opens for a TU including them all
  local tu="$tmp/includes.cpp"
  : >"$tu"
  for f in "$@"; do echo "#include \"$f\"" >>"$tu"; done
  python3 - "$command" "$tu" <<'PY'
import shlex, subprocess, sys
args = shlex.split(sys.argv[1])
out, skip = [], False
for a in args:  # drop "-o X" and "-c SRC"; keep the compiler, defines, include dirs, flags
    if skip:
        skip = False
        continue
    if a in ("-o", "-c"):
        skip = True
        continue
    out.append(a)
sys.stdout.write(subprocess.run(out + ["-M", sys.argv[2]], check=True, capture_output=True, text=True).stdout)
PY
}
mapfile -t nn_headers < <(cd "$tmp/prefix/include" &&
  find seqlab/core seqlab/nn seqlab/models seqlab/train seqlab/tasks -name '*.hpp' | sort)
test "${#nn_headers[@]}" -gt 20 || fail "only ${#nn_headers[@]} nn headers installed"
headers=()
for h in "${nn_headers[@]}"; do headers+=("$tmp/prefix/include/$h"); done
deps=$(deps_of "$here/consumer/main.cpp" "${headers[@]}")
if grep -Eo '[^ ]*/(boost|nlohmann)/[^ ]*' <<<"$deps" | head -3 | grep -q .; then
  fail "seqlab::nn's headers or the consumer include Boost or nlohmann-json: $(grep -Eo '[^ ]*/(boost|nlohmann)/[^ ]*' <<<"$deps" | head -3 | tr '\n' ' ')"
fi
grep -q "seqlab/nn/safetensors.hpp" <<<"$deps" || fail "the dependency list misses the nn headers"
# The check can fail: the experiment headers do reach nlohmann-json (or Boost).
exp_deps=$(deps_of "$tmp/prefix/include/seqlab/experiment/"*.hpp)
grep -Eq '/(boost|nlohmann)/' <<<"$exp_deps" ||
  fail "the include check saw neither Boost nor nlohmann-json in the experiment headers"

out=$("$tmp/build/consumer" "$tmp/weights.safetensors")
echo "$out"
test -s "$tmp/weights.safetensors" || fail "no weights file written"
case "$out" in
  "seqlab $version params="*" ok")
    echo "install test: ok (seqlab::nn alone, ${#nn_headers[@]} headers without Boost or nlohmann-json, no -march)" ;;
  *) fail "unexpected output (wanted 'seqlab $version params=N ok')" ;;
esac
