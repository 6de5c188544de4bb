#!/usr/bin/env bash
# Which cells of a sweep are finished, and which are missing or corrupt. See README.md beside
# this file.
#
# Usage: experiments/slurm/status.sh EXPERIMENT [--scale S | --config F] [--out DIR]
#                                    [--build-dir D] [--all]
# The options mean what they mean for submit.sh (same defaults): they name the sweep. A cell is
# finished when DIR/cells/ holds its file and the file verifies (fingerprint and checksum, as the
# binary checks it before skipping or merging a cell); the binary's `--status` says so. Prints
# the cells that are not finished (--all: every cell), a summary line, whether the merged CSV is
# there, and the sweep's queued or running Slurm jobs (when squeue is available).
# A cell shown "partial" is not finished but has training checkpoints (--checkpoint-every): its
# next run resumes from them; it counts as missing.
# Exit status: 0 every cell finished; 3 some cells missing or corrupt; 2 bad input; 1 failure.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "$(readlink -f "$0")")/common.sh"

usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }

ALL=0
while [ $# -gt 0 ]; do
  parse_sweep_option "$@"
  if [ "$SHIFT" -gt 0 ]; then shift "$SHIFT"; continue; fi
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --all) ALL=1; shift ;;
    *) die "unknown option '$1' (see --help)" 2 ;;
  esac
done
resolve_sweep

N=$(count_cells)
read_status
DONE=() MISSING=() CORRUPT=()
while read -r index state rest; do
  [ -n "$index" ] || continue
  case "$state" in
    done) DONE+=("$index") ;;
    missing | partial) MISSING+=("$index") ;;  # partial: checkpoints exist, a rerun resumes
    *) CORRUPT+=("$index") ;;
  esac
  if [ "$ALL" -eq 1 ] || [ "$state" != "done" ]; then
    printf '  %-8s cell %s: %s\n' "$state" "$index" "$rest"
  fi
done <<<"$STATUS_LINES"

summary="$EXPERIMENT in $OUT: ${#DONE[@]} of $N cells finished"
[ "${#MISSING[@]}" -eq 0 ] || summary+="; missing: $(compress_indices "${MISSING[@]}")"
[ "${#CORRUPT[@]}" -eq 0 ] || summary+="; corrupt: $(compress_indices "${CORRUPT[@]}") (recomputed when run again)"
say "$summary"
if [ -f "$OUT/$EXPERIMENT.csv" ]; then
  say "merged: $OUT/$EXPERIMENT.csv ($(date -u -r "$OUT/$EXPERIMENT.csv" +%Y-%m-%dT%H:%M:%SZ))"
else
  say "merged: not yet ($OUT/$EXPERIMENT.csv does not exist)"
fi
find_queued_jobs
if [ -n "$QUEUED_JOBS" ]; then
  say "queued or running Slurm jobs of this sweep:"
  printf '%s\n' "$QUEUED_JOBS" | sed 's/^/  /'
fi
if [ "${#UNFINISHED[@]}" -gt 0 ]; then
  [ -n "$QUEUED_JOBS" ] ||
    say "to run the unfinished cells and merge: $SLURM_DIR/submit.sh $EXPERIMENT ${SWEEP_ARGS[*]} --build-dir $BUILD_DIR --out $OUT"
  exit 3
fi
