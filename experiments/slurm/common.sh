# shellcheck shell=bash
# Shared by submit.sh and status.sh (sourced, not run): the options that name a sweep and the
# questions asked of the experiment binary. A sweep is (experiment, --scale or --config, --out);
# the binary alone knows its cells and whether each stored cell is done (it verifies the file's
# fingerprint and checksum), so both scripts ask it: `--list-cells` and `--status`.

PROG=$(basename "$0")
SLURM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_DIR=$(cd "$SLURM_DIR/../.." && pwd -P)

say() { printf '%s\n' "$*"; }
die() { printf '%s: error: %s\n' "$PROG" "$1" >&2; exit "${2:-1}"; }

# Absolute form of a path (relative ones against the current directory); the path may not exist.
abspath() { realpath -m -- "$1"; }

# Sweep options, filled by parse_sweep_option.
EXPERIMENT=""
SCALE=""
CONFIG=""
BUILD_DIR=${SEQLAB_BUILD_DIR:-$REPO_DIR/build/release}
OUT=""

# parse_sweep_option "$@": consumes one sweep option (or the EXPERIMENT argument) from the front
# of the arguments; sets SHIFT to how many words it took, 0 if the first word is not one of them.
# shellcheck disable=SC2034  # SHIFT is read by the caller
parse_sweep_option() {
  SHIFT=0
  case "$1" in
    --scale) SCALE=${2:?--scale needs a name, e.g. quick or paper}; SHIFT=2 ;;
    --config) CONFIG=${2:?--config needs a file}; SHIFT=2 ;;
    --build-dir) BUILD_DIR=${2:?--build-dir needs a directory}; SHIFT=2 ;;
    --out) OUT=${2:?--out needs a directory}; SHIFT=2 ;;
    -*) ;;
    *)
      [ -z "$EXPERIMENT" ] || die "unexpected argument '$1' (the experiment is already '$EXPERIMENT'; see --help)" 2
      EXPERIMENT=$1; SHIFT=1 ;;
  esac
}

# After parsing: checks the sweep options and sets BIN, OUT (absolute) and SWEEP_ARGS (what
# selects the grid: --scale S or --config ABSOLUTE_FILE).
resolve_sweep() {
  [ -n "$EXPERIMENT" ] || die "no experiment given (e.g. long_range_recall; see --help)" 2
  [[ "$EXPERIMENT" =~ ^[A-Za-z0-9_]+$ ]] ||
    die "experiment '$EXPERIMENT': expected a name of letters, digits and '_'" 2
  [ -z "$SCALE" ] || [ -z "$CONFIG" ] || die "--scale and --config: give only one of them" 2
  BUILD_DIR=$(abspath "$BUILD_DIR")
  BIN=$BUILD_DIR/experiments/$EXPERIMENT
  [ -x "$BIN" ] || die "no experiment binary $BIN (build it: cmake --build $BUILD_DIR --target $EXPERIMENT; or give --build-dir)" 2
  if [ -n "$CONFIG" ]; then
    [ -f "$CONFIG" ] || die "--config: no such file '$CONFIG'" 2
    SWEEP_ARGS=(--config "$(abspath "$CONFIG")")
  else
    SWEEP_ARGS=(--scale "${SCALE:-quick}")
  fi
  OUT=$(abspath "${OUT:-$REPO_DIR/results/$EXPERIMENT}")
}

# Number of cells of the sweep (exits with the binary's status and message on bad input).
count_cells() {
  local listing rc=0
  listing=$("$BIN" "${SWEEP_ARGS[@]}" --list-cells) || rc=$?
  [ "$rc" -eq 0 ] || exit "$rc"
  printf '%s\n' "$listing" | wc -l
}

# STATUS_LINES: the binary's `--status` lines ("index done|missing|partial|corrupt label") for OUT;
# UNFINISHED: indices of the cells not done, ascending.
read_status() {
  local rc=0
  STATUS_LINES=$("$BIN" "${SWEEP_ARGS[@]}" --out "$OUT" --status) || rc=$?
  [ "$rc" -eq 0 ] || exit "$rc"
  UNFINISHED=()
  local index state rest
  while read -r index state rest; do
    [ -n "$index" ] || continue
    [ "$state" = "done" ] || UNFINISHED+=("$index")
  done <<<"$STATUS_LINES"
}

# compress_indices 0 1 2 5 7 8 -> "0-2,5,7-8" (Slurm's --array syntax, and easier to read).
compress_indices() {
  local out=() start=-1 prev=-2 i
  for i in "$@"; do
    if [ "$i" -ne $((prev + 1)) ]; then
      [ "$start" -lt 0 ] || out+=("$start$([ "$prev" -eq "$start" ] || printf -- '-%s' "$prev")")
      start=$i
    fi
    prev=$i
  done
  [ "$start" -lt 0 ] || out+=("$start$([ "$prev" -eq "$start" ] || printf -- '-%s' "$prev")")
  local IFS=,
  printf '%s\n' "${out[*]}"
}

# The comment every job of a sweep carries, so that its queued and running jobs can be found.
sweep_comment() { printf 'seqlab:%s\n' "$OUT"; }

# QUEUED_JOBS: "jobid state" lines of this user's queued or running jobs of this sweep (empty when
# Slurm's squeue is not available).
find_queued_jobs() {
  QUEUED_JOBS=""
  command -v squeue >/dev/null 2>&1 || return 0
  local comment id state k
  comment=$(sweep_comment)
  local listing
  listing=$(squeue -h -u "$(id -un)" -o '%i|%T|%k' 2>/dev/null) || return 0
  while IFS='|' read -r id state k; do
    [ "$k" = "$comment" ] && QUEUED_JOBS+="$id $state"$'\n'
  done <<<"$listing"
  QUEUED_JOBS=${QUEUED_JOBS%$'\n'}
}
