#!/usr/bin/env bash
# The merge job of a sweep. submit.sh submits it with --dependency=afterok:ARRAY_ID (so it runs
# only after every cell's task succeeded) as
#   sbatch ... merge_job.sh BIN OUT PLOT_SCRIPT PYTHON SWEEP_ARGS...
# It runs `BIN SWEEP_ARGS... --merge --out OUT` (the cells into OUT/<name>.csv and meta.json),
# then `PYTHON PLOT_SCRIPT OUT` (figures into OUT/figures) unless PLOT_SCRIPT is empty.
# Exit status: non-zero if the merge failed (a cell missing or corrupt) or the plot script failed
# (the CSVs are written then; plot them elsewhere with the same command).
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: merge_job.sh BIN OUT PLOT_SCRIPT PYTHON SWEEP_ARGS... (submitted by submit.sh)" >&2; exit 2; }
bin=$1 out=$2 plot=$3 python=$4
shift 4
echo "[merge_job] $(date -u +%Y-%m-%dT%H:%M:%SZ) host $(hostname) job ${SLURM_JOB_ID:-?}" >&2
set -x
"$bin" "$@" --merge --out "$out"
if [ -n "$plot" ]; then
  "$python" "$plot" "$out"
fi
