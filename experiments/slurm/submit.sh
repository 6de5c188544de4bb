#!/usr/bin/env bash
# Submits an experiment's sweep to Slurm: one job array with one task per unfinished cell, and a
# merge job that runs after every task succeeded (merge into the CSVs, then the plot script).
# See README.md beside this file.
#
# Usage: experiments/slurm/submit.sh EXPERIMENT [options] [-- extra sbatch options]
#   --scale S           configs/S.ini of the experiment (tiny, quick, standard, paper); default quick
#   --config F          this .ini file instead of --scale
#   --out DIR           results directory [default: <repo>/results/EXPERIMENT]; cells go to
#                       DIR/cells/, job logs to DIR/slurm-logs/
#   --build-dir D       where the binaries are [default: $SEQLAB_BUILD_DIR or <repo>/build/release];
#                       the binary is D/experiments/EXPERIMENT
#   --max-parallel K    at most K array tasks run at once (--array=...%K) [default: no limit]
#   --cpus-per-task N   CPUs of each cell; the cell runs with --threads N [default: 1]
#   --mem M             memory of each cell and of the merge job, sbatch syntax (e.g. 2G)
#                       [default: the partition's]
#   --time T            time limit of each cell and of the merge job, sbatch syntax (e.g. 2:00:00)
#                       [default: the partition's]
#   --python P          interpreter of the plot script in the merge job [default: $PYTHON or
#                       /usr/bin/python3]
#   --checkpoint-every N  each cell saves a training checkpoint every N updates (the binary's
#                       --checkpoint-every), so a preempted, requeued or resubmitted task resumes
#                       from it instead of from step 0 [default: $SEQLAB_CHECKPOINT_EVERY or 0 =
#                       off]. Array tasks are always submitted with --requeue: Slurm requeues a
#                       preempted task, which skips finished cells and resumes from checkpoints.
#   --flush-denormals   each cell runs with the binary's --flush-denormals (subnormal floats
#                       flushed to zero; experiments/README.md) [default: off]
#   --no-plot           the merge job only merges
#   --dry-run           print the sbatch commands instead of running them
#   -- OPTS...          passed to both sbatch calls (e.g. --partition=cpu --account=proj)
# The build directory, the results directory and this repository must be on a file system that
# the compute nodes share with this machine.
#
# Run it again after some tasks failed, timed out or were preempted: it asks the binary which
# cells are done (`--status`: the cell file exists and verifies) and submits only the others; when
# every cell is done, only the merge job. It refuses while jobs of the same sweep (same --out) are
# still queued or running.
# Exit status: 0 submitted; 2 bad input (nothing submitted); 1 sbatch or another command failed.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "$(readlink -f "$0")")/common.sh"

usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }

MAX_PARALLEL=""
CPUS=1
MEM=""
TIME=""
PYTHON=${PYTHON:-/usr/bin/python3}
PLOT=1
DRY_RUN=0
CHECKPOINT_EVERY=${SEQLAB_CHECKPOINT_EVERY:-0}
FLUSH_DENORMALS=0
EXTRA=()
while [ $# -gt 0 ]; do
  parse_sweep_option "$@"
  if [ "$SHIFT" -gt 0 ]; then shift "$SHIFT"; continue; fi
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --max-parallel) MAX_PARALLEL=${2:?--max-parallel needs a number}; shift 2 ;;
    --cpus-per-task) CPUS=${2:?--cpus-per-task needs a number}; shift 2 ;;
    --mem) MEM=${2:?--mem needs a size, e.g. 2G}; shift 2 ;;
    --time) TIME=${2:?--time needs a time limit, e.g. 2:00:00}; shift 2 ;;
    --python) PYTHON=${2:?--python needs an interpreter}; shift 2 ;;
    --checkpoint-every) CHECKPOINT_EVERY=${2:?--checkpoint-every needs a number of updates}; shift 2 ;;
    --flush-denormals) FLUSH_DENORMALS=1; shift ;;
    --no-plot) PLOT=0; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) die "unknown option '$1' (see --help)" 2 ;;
  esac
done
resolve_sweep
[ -z "$MAX_PARALLEL" ] || [[ "$MAX_PARALLEL" =~ ^[1-9][0-9]*$ ]] ||
  die "--max-parallel '$MAX_PARALLEL': expected a positive integer" 2
[[ "$CPUS" =~ ^[1-9][0-9]*$ ]] || die "--cpus-per-task '$CPUS': expected a positive integer" 2
[[ "$CHECKPOINT_EVERY" =~ ^(0|[1-9][0-9]{0,8}|1000000000)$ ]] ||
  die "--checkpoint-every '$CHECKPOINT_EVERY' (or \$SEQLAB_CHECKPOINT_EVERY): expected an integer in [0, 1000000000] (0 = off)" 2
if [ "$DRY_RUN" -eq 0 ]; then
  command -v sbatch >/dev/null 2>&1 || die "sbatch not found: run this on a Slurm login node (or see --dry-run)" 2
fi

N=$(count_cells)
read_status
find_queued_jobs
if [ -n "$QUEUED_JOBS" ]; then
  die "jobs of this sweep ($OUT) are still queued or running:
$QUEUED_JOBS
  wait for them (squeue -u $(id -un)) or cancel them (scancel JOBID), then run this again" 2
fi

PLOT_SCRIPT=""
if [ "$PLOT" -eq 1 ] && [ -f "$REPO_DIR/plots/plot_$EXPERIMENT.py" ]; then
  PLOT_SCRIPT=$REPO_DIR/plots/plot_$EXPERIMENT.py
fi
LOGS=$OUT/slurm-logs
if [ "$DRY_RUN" -eq 0 ]; then
  mkdir -p "$LOGS" || die "cannot create the log directory $LOGS" 2
fi

# Both jobs: absolute --chdir and --output (a relative --output would be resolved against --chdir
# on the compute node), the sweep's comment, then the user's extra options (which win).
COMMON=(--parsable --chdir="$REPO_DIR" --comment="$(sweep_comment)")
[ -z "$MEM" ] || COMMON+=(--mem="$MEM")
[ -z "$TIME" ] || COMMON+=(--time="$TIME")

# submit VAR ARGS...: runs `sbatch ARGS...` and sets VAR to the job ID; with --dry-run prints the
# command instead and sets VAR to a placeholder.
submit() {
  local var=$1 out
  shift
  if [ "$DRY_RUN" -eq 1 ]; then
    printf '  sbatch'
    printf ' %q' "$@"
    printf '\n'
    printf -v "$var" '%s' "<$var>"
    return
  fi
  out=$(sbatch "$@") ||
    die "sbatch failed${ARRAY_ID:+ for the merge job (array job $ARRAY_ID is submitted: when it has finished, run this again to merge)} (command: sbatch $*)"
  printf -v "$var" '%s' "${out%%;*}"  # --parsable prints "jobid[;cluster]"
}

say "$EXPERIMENT: $N cells (${SWEEP_ARGS[*]}), results in $OUT"
ARRAY_ID=""
if [ "${#UNFINISHED[@]}" -gt 0 ]; then
  # Slurm refuses array indices >= MaxArraySize (1001 by default).
  max_array=$(scontrol show config 2>/dev/null | awk '$1 == "MaxArraySize" {print $3}' || true)
  last=${UNFINISHED[${#UNFINISHED[@]}-1]}
  if [[ "$max_array" =~ ^[0-9]+$ ]] && [ "$last" -ge "$max_array" ]; then
    die "cell index $last is beyond this cluster's MaxArraySize ($max_array): ask the administrators to raise it, or split the sweep into config files with fewer cells" 2
  fi
  SPEC=$(compress_indices "${UNFINISHED[@]}")
  say "  ${#UNFINISHED[@]} of $N cells to run: $SPEC ($((N - ${#UNFINISHED[@]})) already done)"
  submit ARRAY_ID "${COMMON[@]}" \
    --job-name="seqlab_$EXPERIMENT" \
    --array="$SPEC${MAX_PARALLEL:+%$MAX_PARALLEL}" \
    --ntasks=1 --cpus-per-task="$CPUS" \
    --requeue --open-mode=append \
    --export="ALL,SEQLAB_CHECKPOINT_EVERY=$CHECKPOINT_EVERY,SEQLAB_FLUSH_DENORMALS=$FLUSH_DENORMALS" \
    --output="$LOGS/${EXPERIMENT}_%A_%a.out" \
    "${EXTRA[@]}" \
    "$SLURM_DIR/cell_job.sh" "$BIN" "$OUT" "${SWEEP_ARGS[@]}"
else
  say "  all $N cells are done: submitting only the merge job"
fi

DEPENDENCY=()
[ -z "$ARRAY_ID" ] || DEPENDENCY=(--dependency="afterok:$ARRAY_ID" --kill-on-invalid-dep=yes)
submit MERGE_ID "${COMMON[@]}" \
  --job-name="seqlab_${EXPERIMENT}_merge" \
  "${DEPENDENCY[@]}" \
  --ntasks=1 --cpus-per-task=1 \
  --output="$LOGS/${EXPERIMENT}_merge_%j.out" \
  "${EXTRA[@]}" \
  "$SLURM_DIR/merge_job.sh" "$BIN" "$OUT" "$PLOT_SCRIPT" "$PYTHON" "${SWEEP_ARGS[@]}"

if [ "$DRY_RUN" -eq 1 ]; then
  say "(dry run: nothing submitted)"
  exit 0
fi
status_cmd="$SLURM_DIR/status.sh $EXPERIMENT ${SWEEP_ARGS[*]} --build-dir $BUILD_DIR --out $OUT"
if [ -n "$ARRAY_ID" ]; then
  say "array job $ARRAY_ID: cells $SPEC${MAX_PARALLEL:+, at most $MAX_PARALLEL at once}, $CPUS CPU(s) each, requeueable$([ "$CHECKPOINT_EVERY" -eq 0 ] || printf ', checkpoint every %s updates' "$CHECKPOINT_EVERY")"
fi
say "merge job $MERGE_ID: ${ARRAY_ID:+runs after every cell succeeded (afterok:$ARRAY_ID), }merges${PLOT_SCRIPT:+ and plots}"
say "logs:    ${ARRAY_ID:+$LOGS/${EXPERIMENT}_${ARRAY_ID}_<cell>.out, }$LOGS/${EXPERIMENT}_merge_$MERGE_ID.out"
say "results: $OUT/$EXPERIMENT.csv${PLOT_SCRIPT:+, $OUT/figures/} (cells in $OUT/cells/)"
say "status:  $status_cmd"
{
  printf '%s array=%s merge=%s cells=%s args=%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    "${ARRAY_ID:-none}" "$MERGE_ID" "${SPEC:-none}" "${SWEEP_ARGS[*]}"
} >>"$LOGS/submissions.log"
