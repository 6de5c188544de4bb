#!/usr/bin/env bash
# One Slurm array task = one sweep cell. submit.sh submits it as
#   sbatch --array=CELLS --cpus-per-task=N ... cell_job.sh BIN OUT SWEEP_ARGS...
# and it runs `BIN SWEEP_ARGS... --cell $SLURM_ARRAY_TASK_ID --threads $SLURM_CPUS_PER_TASK
# --out OUT` (plus `--checkpoint-every N` when SEQLAB_CHECKPOINT_EVERY=N > 0, which submit.sh
# exports for its --checkpoint-every, and `--flush-denormals` when SEQLAB_FLUSH_DENORMALS=1, for
# its --flush-denormals). The binary skips the cell if it is already done, and writes
# it atomically, so a task that is killed or preempted leaves no partial file. submit.sh submits
# tasks with --requeue: a preempted task is requeued by Slurm (or resubmitted by submit.sh) and,
# with checkpoints, resumes the cell from its last checkpoint with byte-identical results.
# Exit status: the binary's (0 done, 1 the cell failed, 2 bad input).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: cell_job.sh BIN OUT SWEEP_ARGS... (submitted by submit.sh)" >&2; exit 2; }
: "${SLURM_ARRAY_TASK_ID:?cell_job.sh runs as a Slurm array task (submit.sh submits it)}"
bin=$1 out=$2
shift 2
threads=${SLURM_CPUS_PER_TASK:-1}
checkpoint=()
every=${SEQLAB_CHECKPOINT_EVERY:-0}
[ "$every" = 0 ] || checkpoint=(--checkpoint-every "$every")  # the binary checks the value
flush=()
[ "${SEQLAB_FLUSH_DENORMALS:-0}" = 0 ] || flush=(--flush-denormals)
echo "[cell_job] $(date -u +%Y-%m-%dT%H:%M:%SZ) host $(hostname) job ${SLURM_ARRAY_JOB_ID:-?}_$SLURM_ARRAY_TASK_ID: cell $SLURM_ARRAY_TASK_ID, $threads thread(s)${SLURM_RESTART_COUNT:+, restart $SLURM_RESTART_COUNT}${checkpoint[*]:+, checkpoint every $every updates}${flush[*]:+, flush-denormals}" >&2
set -x
exec "$bin" "$@" --cell "$SLURM_ARRAY_TASK_ID" --threads "$threads" --out "$out" "${checkpoint[@]}" "${flush[@]}"
