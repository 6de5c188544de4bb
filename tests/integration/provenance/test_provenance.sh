#!/usr/bin/env bash
# Build provenance (lib/provenance.cmake): the git commit and dirty flag are fixed when a binary
# is built, never read from the tree when it runs. Checks, each of which fails the test:
#   1. a probe (probe/: one file wired with seqlab_add_provenance, as seqlab::experiment is) built
#      in a throwaway repository reports its HEAD and clean, with its untracked build directory
#      inside the tree not counting as an edit;
#   2. a second build recompiles and relinks nothing;
#   3. after a new commit and an edit in that repository, the binary built before - in place and
#      a copy set aside - still reports the old commit and clean;
#   4. the next build reports the new commit and dirty, recompiling only the generated file; a
#      build after it does nothing; undoing the edit gives clean again; files under results/ do
#      not make the tree dirty nor trigger a relink;
#   5. a git worktree (.git is a file there) reports the worktree's own HEAD;
#   6. a copy of the sources outside any checkout (a tarball), one lying untracked inside an
#      unrelated checkout, and a build without git report "unknown" and -1 (null in JSON);
#   7. the project's own experiment binary (BUILD_DIR/experiments/custom_example, when built)
#      writes into its cell file the commit and dirty flag of BUILD_DIR/generated/provenance.cpp,
#      with no git on its PATH.
# With --full, also 8: a clone of SEQLAB_SOURCE is configured and custom_example built there
# (minutes on 2 cores, so not part of ctest), then 3 and 4 on that real binary.
# usage: test_provenance.sh SEQLAB_SOURCE BUILD_DIR [--full]
set -euo pipefail
seqlab=$(readlink -f "$1")
build=$(readlink -f "$2")
full=${3:-}
here=$(dirname "$(readlink -f "$0")")
tmp=$(mktemp -d /tmp/seqlab_provenance.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "provenance test: $*" >&2; exit 1; }

# Commits in the throwaway repositories, whatever the user's git configuration says.
export HOME=$tmp GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME=test GIT_AUTHOR_EMAIL=test@example.invalid
export GIT_COMMITTER_NAME=test GIT_COMMITTER_EMAIL=test@example.invalid
git_() { git -c init.defaultBranch=main "$@" >/dev/null; }

configure() {  # configure SRC BUILD [cmake args...]: the probe project in SRC, built in BUILD
  local src=$1 dir=$2
  shift 2
  cmake -S "$src" -B "$dir" -G Ninja -DSEQLAB_PROVENANCE_CMAKE="$seqlab/lib/provenance.cmake" \
    "$@" >/dev/null
}
# build DIR [target]: builds; prints the compile and link steps Ninja ran (none: empty).
build() {
  cmake --build "$1" ${2:+--target "$2"} | { grep -E 'Building|Linking' || true; }
}
expect() {  # expect WHAT ACTUAL EXPECTED
  [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
}
expect_no_work() {  # expect_no_work WHAT STEPS
  [ -z "$2" ] || fail "$1: the build recompiled or relinked:"$'\n'"$2"
}

# --- 1-4: a throwaway repository with the probe -------------------------------------------------
src=$tmp/src
mkdir -p "$src"
cp "$here/probe/CMakeLists.txt" "$here/probe/main.cpp" "$src/"
echo "one" >"$src/README"
mkdir "$src/results"
echo "a,b" >"$src/results/old.csv"
git_ -C "$src" init
git_ -C "$src" add -A
git_ -C "$src" commit -m one
c1=$(git -C "$src" rev-parse HEAD)
configure "$src" "$src/build-probe"   # an untracked, not ignored build directory in the tree
steps=$(build "$src/build-probe")
case "$steps" in *Linking*) ;; *) fail "the first build linked nothing: $steps" ;; esac
expect "1: fresh build" "$("$src/build-probe/probe")" "$c1 0"
expect_no_work "2: second build with no change" "$(build "$src/build-probe")"

cp "$src/build-probe/probe" "$tmp/frozen"
echo "two" >"$src/README"
git_ -C "$src" commit -am two
c2=$(git -C "$src" rev-parse HEAD)
echo "edit" >>"$src/README"
expect "3: built binary after HEAD moved and the tree was edited" "$("$src/build-probe/probe")" "$c1 0"
expect "3: copy set aside after HEAD moved" "$("$tmp/frozen")" "$c1 0"

steps=$(build "$src/build-probe")
case "$steps" in
  *provenance.cpp*Linking*) ;;
  *) fail "4: rebuild after a commit did not recompile provenance.cpp and relink: $steps" ;;
esac
[ "$(grep -c Building <<<"$steps")" = 1 ] || fail "4: rebuild compiled more than provenance.cpp: $steps"
expect "4: rebuilt after the commit, tree edited" "$("$src/build-probe/probe")" "$c2 1"
expect_no_work "4: build after the rebuild" "$(build "$src/build-probe")"
git_ -C "$src" checkout -- README
build "$src/build-probe" >/dev/null
expect "4: edit undone" "$("$src/build-probe/probe")" "$c2 0"
echo "c,d" >"$src/results/new.csv"
echo "e,f" >>"$src/results/old.csv"
expect_no_work "4: build after changes under results/" "$(build "$src/build-probe")"
expect "4: changes under results/" "$("$src/build-probe/probe")" "$c2 0"

# --- 5: a worktree --------------------------------------------------------------------------------
git_ -C "$src" worktree add -q -b side "$tmp/wt"
[ -f "$tmp/wt/.git" ] || fail "5: the worktree's .git is not a file"
echo "three" >"$tmp/wt/README"
git_ -C "$tmp/wt" commit -am three
c3=$(git -C "$tmp/wt" rev-parse HEAD)
configure "$tmp/wt" "$tmp/wt-build"
build "$tmp/wt-build" >/dev/null
expect "5: worktree" "$("$tmp/wt-build/probe")" "$c3 0"

# --- 6: no checkout, or no git --------------------------------------------------------------------
mkdir "$tmp/tarball"
cp "$here/probe/CMakeLists.txt" "$here/probe/main.cpp" "$tmp/tarball/"
if ! git -C "$tmp/tarball" rev-parse --git-dir >/dev/null 2>&1; then
  configure "$tmp/tarball" "$tmp/tarball-build"
  build "$tmp/tarball-build" >/dev/null
  expect "6: sources outside any checkout" "$("$tmp/tarball-build/probe")" "unknown -1"
fi
cp -r "$tmp/tarball" "$src/vendored"   # untracked in an unrelated checkout
configure "$src/vendored" "$tmp/vendored-build"
build "$tmp/vendored-build" >/dev/null
expect "6: sources untracked inside another checkout" "$("$tmp/vendored-build/probe")" "unknown -1"
configure "$src" "$tmp/nogit-build" -DGIT_EXECUTABLE="$tmp/no-such-git"
build "$tmp/nogit-build" >/dev/null
expect "6: no git" "$("$tmp/nogit-build/probe")" "unknown -1"

# --- 7: the project's experiment binary -------------------------------------------------------------
cell_provenance() {  # cell_provenance OUT_DIR: "<git_commit> <git_dirty>" of its one cell file
  python3 - "$1" <<'PY'
import glob, json, sys
(f,) = glob.glob(sys.argv[1] + "/cells/*.json")
j = json.load(open(f))
print(j["git_commit"], {True: "1", False: "0", None: "-1"}[j["git_dirty"]])
PY
}
generated_provenance() {  # generated_provenance BUILD_DIR: "<commit> <dirty>" it compiled in
  sed -n -e 's/.*build_git_commit() { return "\(.*\)"; }/\1/p' \
    -e 's/.*build_git_dirty() { return \(.*\); }/\1/p' "$1/generated/provenance.cpp" | paste -sd' '
}
run_cell() {  # run_cell BINARY OUT_DIR: cell 0 at the tiny scale, no git on PATH
  rm -rf "$2"
  env PATH=/nonexistent "$1" --scale tiny --cell 0 --threads 1 --quiet --out "$2"
}
exe=$build/experiments/custom_example
if [ -x "$exe" ]; then
  run_cell "$exe" "$tmp/cell"
  expect "7: custom_example's cell" "$(cell_provenance "$tmp/cell")" "$(generated_provenance "$build")"
else
  echo "provenance test: $exe not built; check 7 skipped"
fi

# --- 8 (--full): a clone of the project, its real binary ----------------------------------------------
if [ "$full" = --full ]; then
  git_ clone "$seqlab" "$tmp/clone"
  k1=$(git -C "$tmp/clone" rev-parse HEAD)
  cmake -S "$tmp/clone" -B "$tmp/clone/build/release" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSEQLAB_BUILD_TESTS=OFF -DSEQLAB_BUILD_BENCH=OFF >/dev/null
  build "$tmp/clone/build/release" custom_example >/dev/null
  bin=$tmp/clone/build/release/experiments/custom_example
  run_cell "$bin" "$tmp/k1"
  expect "8: clone's custom_example" "$(cell_provenance "$tmp/k1")" "$k1 0"
  expect_no_work "8: clone, second build" "$(build "$tmp/clone/build/release" custom_example)"
  cp "$bin" "$tmp/frozen_custom_example"
  git_ -C "$tmp/clone" commit --allow-empty -m "moved on"
  k2=$(git -C "$tmp/clone" rev-parse HEAD)
  echo "edit" >>"$tmp/clone/README.md"
  run_cell "$tmp/frozen_custom_example" "$tmp/k1b"
  expect "8: frozen custom_example after HEAD moved" "$(cell_provenance "$tmp/k1b")" "$k1 0"
  steps=$(build "$tmp/clone/build/release" custom_example)
  [ "$(grep -c Building <<<"$steps")" = 1 ] || fail "8: rebuild compiled more than provenance.cpp: $steps"
  run_cell "$bin" "$tmp/k2"
  expect "8: clone's custom_example rebuilt" "$(cell_provenance "$tmp/k2")" "$k2 1"
  expect_no_work "8: clone, build after the rebuild" "$(build "$tmp/clone/build/release" custom_example)"
fi
echo "provenance test: all checks passed"
