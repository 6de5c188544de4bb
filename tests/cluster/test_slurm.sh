#!/usr/bin/env bash
# experiments/slurm/ against a real single-node Slurm cluster on localhost (ctest: cluster.slurm).
#
# Usage: tests/cluster/test_slurm.sh BUILD_DIR      (BUILD_DIR/experiments/long_range_recall built)
#
# 1. Installs Debian's slurm-wlm and munge when missing (apt-get; the time it took is printed).
#    Without root it cannot install them nor run the daemons: it prints why and exits 77, which
#    ctest reports as skipped.
# 2. Starts a private munged (own key and socket) and slurmctld + slurmd on localhost (ports
#    6817/6818, slurm.conf.in beside this file) with every file under a temporary folder.
# 3. Copies the experiment's own CI-scale config (experiments/long_range_recall/configs/tiny.ini,
#    kept in step with its keys by the experiment; at least 2 cells) to the temporary folder as
#    tiny.ini, and runs its cells locally (--threads 1): the reference. submit.sh is given it as
#    the relative path --config tiny.ini, from the temporary folder.
# 4. Submits the same sweep with experiments/slurm/submit.sh (1 CPU per task) and checks: every
#    task and the merge job COMPLETED, a log per task, figures plotted, and the merged CSVs equal
#    the reference byte for byte except the columns meta.json lists as nondeterministic. (Later
#    submissions use --no-plot: plotting takes most of a merge job's time.)
# 5. A failing cell, in a fresh sweep: a directory occupies the result file of cell BAD = N/2, so
#    its task cannot write the result (the binary exits 1, a real I/O failure). Checks: that task
#    FAILED with the error in its log, the others COMPLETED, the merge job was cancelled and never
#    ran (no log, no CSV), status.sh exits 3 naming only that cell. Then removes the obstacle and
#    resubmits (held with `-- --hold` first, to check that submit.sh refuses while the sweep's
#    jobs are queued): only that cell is submitted, the other cells' files are untouched (same
#    inode, mtime, content), the merge completes with the reference's CSVs.
# 6. Submits again with every cell done: only a merge job.
# The daemons are stopped by the PIDs in their PID files on every exit (trap), failures included;
# jobs still queued are cancelled first. SEQLAB_KEEP_TMP=1 keeps the temporary folder.
set -euo pipefail

SKIP=77
say() { printf '[test_slurm] %s\n' "$*"; }
fail() { say "FAIL: $*"; exit 1; }

[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)
BUILD=$(realpath -m -- "$1")
NAME=long_range_recall
BIN=$BUILD/experiments/$NAME
SUBMIT=$REPO/experiments/slurm/submit.sh
STATUS=$REPO/experiments/slurm/status.sh
CONFIG_SOURCE=$REPO/experiments/$NAME/configs/tiny.ini
PYTHON=${PYTHON:-/usr/bin/python3}
[ -x "$BIN" ] || fail "no binary $BIN (build the $NAME target first)"
[ -f "$CONFIG_SOURCE" ] || fail "no $CONFIG_SOURCE (the experiment's CI-scale config)"

if [ "$(id -u)" -ne 0 ]; then
  say "SKIPPED: this test must run as root (it installs slurm-wlm and munge when missing and runs"
  say "munged, slurmctld and slurmd); run it as root, e.g. in CI (.ci/run)."
  exit "$SKIP"
fi

# --- 1. packages ------------------------------------------------------------------------------
PACKAGES=(slurm-wlm munge)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]} from Debian (apt-get)"
  t0=$(date +%s)
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || fail "apt-get update failed"
  apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null ||
    fail "apt-get install ${missing[*]} failed"
  say "installed ${missing[*]} in $(($(date +%s) - t0)) s"
else
  say "slurm-wlm and munge are installed"
fi
for c in munged mungekey slurmctld slurmd sbatch scontrol sinfo squeue; do
  command -v "$c" >/dev/null || [ -x "/usr/sbin/$c" ] || fail "$c not found after installing ${PACKAGES[*]}"
done

# --- 2. the cluster ---------------------------------------------------------------------------
for port in 6817 6818; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "port $port on localhost is in use: another Slurm cluster runs on this machine (one such test at a time; a run of this test killed by a timeout leaves its daemons behind, their PID files in /tmp/seqlab_slurm.*/)"
  fi
done

TMP=$(mktemp -d /tmp/seqlab_slurm.XXXXXX)
chmod 755 "$TMP"  # munged (user munge) must reach its socket folder below
JOBS=()           # every job ID submitted, cancelled at exit if still queued

# stop PIDFILE COMM: stops the daemon whose PID is in PIDFILE if it is still COMM, and waits for it.
stop() {
  local file=$1 comm=$2 pid i
  [ -s "$file" ] || return 0
  pid=$(cat "$file")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] || return 0  # gone, or the PID was reused
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 100); do
    # Gone, or a zombie waiting to be reaped (orphans are reaped late in some containers).
    case "$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$pid/status" 2>/dev/null)" in
      ''|Z) return 0 ;;
    esac
    sleep 0.1
  done
  say "$comm (PID $pid) did not stop within 10 s: killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  set +e
  if [ "${#JOBS[@]}" -gt 0 ] && [ -f "$TMP/slurm.conf" ]; then
    scancel "${JOBS[@]}" 2>/dev/null
    sleep 1
  fi
  stop "$TMP/slurmd.pid" slurmd
  stop "$TMP/slurmctld.pid" slurmctld
  stop "$TMP/munge/munged.pid" munged
  if [ "$rc" -ne 0 ]; then
    for f in "$TMP"/slurmctld.log "$TMP"/slurmd.log "$TMP"/*/slurm-logs/*.out; do
      [ -f "$f" ] || continue
      say "--- last lines of $f"
      tail -n 15 "$f"
    done
  fi
  if [ "${SEQLAB_KEEP_TMP:-0}" = 1 ]; then
    say "kept $TMP"
  else
    rm -rf "$TMP"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t_start=$(date +%s)
# munged of our own: its key, socket, PID and log under $TMP (the system's munged is not touched).
mkdir -p "$TMP/munge" "$TMP/munge-run" "$TMP/state" "$TMP/spool"
chown munge:munge "$TMP/munge" "$TMP/munge-run"
chmod 700 "$TMP/munge"
chmod 755 "$TMP/munge-run"
runuser -u munge -- mungekey --create --keyfile="$TMP/munge/munge.key" ||
  fail "mungekey --create failed"
runuser -u munge -- /usr/sbin/munged --socket="$TMP/munge-run/munge.socket" \
  --key-file="$TMP/munge/munge.key" --pid-file="$TMP/munge/munged.pid" \
  --log-file="$TMP/munge/munged.log" --seed-file="$TMP/munge/munged.seed" ||
  fail "munged did not start: $(tail -n 3 "$TMP/munge/munged.log" 2>/dev/null)"
munge -n --socket="$TMP/munge-run/munge.socket" | unmunge --socket="$TMP/munge-run/munge.socket" >/dev/null ||
  fail "munged does not answer on $TMP/munge-run/munge.socket"

# slurm.conf: this machine's topology (`slurmd -C`), named localhost.
node=$(slurmd -C | head -n 1 | sed 's/^NodeName=[^ ]*/NodeName=localhost NodeAddr=127.0.0.1/')
[[ "$node" == NodeName=localhost* ]] || fail "unexpected output of slurmd -C: $node"
sed -e "s|@DIR@|$TMP|g" -e "s|@NODE@|$node|" "$HERE/slurm.conf.in" >"$TMP/slurm.conf"
export SLURM_CONF=$TMP/slurm.conf
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
slurmd -f "$SLURM_CONF" -N localhost || fail "slurmd did not start"
state=""
for i in $(seq 120); do
  state=$(sinfo -h -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || fail "the node is not idle after 60 s (sinfo: '$state')"
say "cluster up in $(($(date +%s) - t_start)) s: $node"

# --- helpers ----------------------------------------------------------------------------------
# records ID: one "ArrayTaskId JobState ExitCode" line per record of job ID (an array job has one
# record per task, plus one for its pending tasks); ArrayTaskId is - for a plain job.
records() {
  scontrol show job "$1" -o | while read -r line; do
    local task=- st='?' ec='?' w
    for w in $line; do
      case "$w" in
        ArrayTaskId=*) task=${w#ArrayTaskId=} ;;
        JobState=*) st=${w#JobState=} ;;
        ExitCode=*) ec=${w#ExitCode=} ;;
      esac
    done
    echo "$task $st $ec"
  done
}

# wait_jobs ID...: until every record of these jobs is in a final state (at most 300 s).
wait_jobs() {
  local i id busy
  for i in $(seq 600); do
    busy=0
    for id in "$@"; do
      if records "$id" | awk '$2 !~ /^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE)$/ {b = 1} END {exit !b}'; then
        busy=1
      fi
    done
    [ "$busy" -eq 0 ] && return 0
    sleep 0.5
  done
  for id in "$@"; do say "job $id:"; records "$id"; done
  fail "jobs $* not finished after 300 s"
}

# submit_sweep OUT [submit.sh options]: runs submit.sh, prints its output, sets ARRAY and MERGE
# (ARRAY empty if no array job was submitted).
submit_sweep() {
  local out=$1 text
  shift
  text=$(cd "$TMP" && "$SUBMIT" "$NAME" --config tiny.ini --build-dir "$BUILD" --out "$out" "$@") ||
    fail "submit.sh exited $?: $text"
  printf '%s\n' "$text" | sed 's/^/    | /'
  ARRAY=$(sed -n 's/^array job \([0-9][0-9]*\):.*/\1/p' <<<"$text")
  MERGE=$(sed -n 's/^merge job \([0-9][0-9]*\):.*/\1/p' <<<"$text")
  [ -n "$MERGE" ] || fail "no merge job ID in submit.sh's output"
  [ -z "$ARRAY" ] || JOBS+=("$ARRAY")
  JOBS+=("$MERGE")
  SUBMIT_TEXT=$text
}

# expect_records ID EXPECTED: the job's records, sorted, are exactly EXPECTED (lines).
expect_records() {
  local got
  got=$(records "$1" | sort -n)
  [ "$got" = "$2" ] || fail "job $1: expected records
$2
got
$got"
}

# same_metrics DIR_A DIR_B: the merged CSVs of both sweeps are equal byte for byte, apart from the
# columns that DIR_A's meta.json lists as nondeterministic (both must list the same).
same_metrics() {
  "$PYTHON" - "$1" "$2" "$NAME" <<'EOF'
import json, os, sys
a, b, name = sys.argv[1:]
metas = [json.load(open(os.path.join(d, name + ".meta.json"))) for d in (a, b)]
skip = metas[0]["nondeterministic_columns"]
assert skip == metas[1]["nondeterministic_columns"], "nondeterministic_columns differ"
tables = metas[0]["tables"]
assert tables.keys() == metas[1]["tables"].keys(), "tables differ"
for t in tables.values():
    texts = [open(os.path.join(d, t["file"]), encoding="utf-8").read() for d in (a, b)]
    kept, skipped = [], []
    for text in texts:
        assert '"' not in text, t["file"] + ": quoted fields (this check splits on commas)"
        lines = text.split("\n")
        header = lines[0].split(",")
        keep = [i for i, c in enumerate(header) if c not in skip]
        skipped = [c for c in header if c in skip]
        kept.append("\n".join(",".join(f.split(",")[i] for i in keep) if f else f for f in lines))
    assert kept[0] == kept[1], t["file"] + ": metric columns differ between " + a + " and " + b
    rows = texts[0].count("\n") - 1
    assert rows > 0 or t["file"] != name + ".csv", t["file"] + ": no rows"  # other tables may be empty
    print("    %s: %d rows, equal%s" % (t["file"], rows,
                                        " apart from " + ",".join(skipped) if skipped else ""))
EOF
}

# cell_file INDEX: the file name of cell INDEX (as the local reference run wrote it).
cell_file() {
  "$PYTHON" - "$TMP/local/cells" "$1" <<'EOF'
import json, os, sys
d, index = sys.argv[1], int(sys.argv[2])
for f in sorted(os.listdir(d)):
    if f.endswith(".json") and json.load(open(os.path.join(d, f)))["index"] == index:
        print(f)
        break
else:
    sys.exit("no cell %d in %s" % (index, d))
EOF
}

# fingerprint_files DIR INDEX...: inode, mtime (ns) and checksum of those cells' files.
fingerprint_files() {
  local dir=$1 i f
  shift
  for i in "$@"; do
    f=$dir/cells/$(cell_file "$i")
    printf '%s %s %s\n' "$i" "$(stat -c '%i %y' "$f")" "$(md5sum <"$f" | cut -d' ' -f1)"
  done
}

# --- 3. the local reference -------------------------------------------------------------------
cp "$CONFIG_SOURCE" "$TMP/tiny.ini"
CONFIG=$TMP/tiny.ini
N=$("$BIN" --config "$CONFIG" --list-cells | wc -l)
[ "$N" -ge 2 ] || fail "$CONFIG_SOURCE has $N cells; this test needs at least 2"
LAST=$((N - 1))
BAD=$((N / 2))   # the cell made to fail in part 5
"$BIN" --config "$CONFIG" --threads 1 --out "$TMP/local" --quiet || fail "local run failed"
say "local reference: $N cells in $TMP/local"

# all_records STATE [INDEX STATE2]: the expected records of an array over cells 0..N-1, every one
# in STATE with exit code 0:0, except INDEX in STATE2 with exit code 1:0.
all_records() {
  local i
  for i in $(seq 0 "$LAST"); do
    if [ "$i" = "${2:-}" ]; then echo "$i $3 1:0"; else echo "$i $1 0:0"; fi
  done
}

# --- 4. the sweep on Slurm --------------------------------------------------------------------
say "submitting the sweep"
t0=$(date +%s)
submit_sweep "$TMP/sweep" --max-parallel 2
[ -n "$ARRAY" ] || fail "no array job submitted"
grep -q "$N of $N cells to run: 0-$LAST (0 already done)" <<<"$SUBMIT_TEXT" ||
  fail "submit.sh did not submit cells 0-$LAST"
wait_jobs "$ARRAY" "$MERGE"
expect_records "$ARRAY" "$(all_records COMPLETED)"
expect_records "$MERGE" "- COMPLETED 0:0"
say "sweep done in $(($(date +%s) - t0)) s"
for i in $(seq 0 "$LAST"); do
  [ -s "$TMP/sweep/slurm-logs/${NAME}_${ARRAY}_$i.out" ] || fail "no log of task $i"
done
[ -s "$TMP/sweep/slurm-logs/${NAME}_merge_$MERGE.out" ] || fail "no log of the merge job"
if [ -f "$REPO/plots/plot_$NAME.py" ]; then
  ls "$TMP/sweep/figures/"*.png >/dev/null 2>&1 || fail "the merge job plotted no figure"
fi
same_metrics "$TMP/local" "$TMP/sweep" || fail "the Slurm sweep's CSVs differ from the local run's"
"$STATUS" "$NAME" --config "$CONFIG" --build-dir "$BUILD" --out "$TMP/sweep" >/dev/null ||
  fail "status.sh says the finished sweep is not finished"

# --- 5. a cell that fails, then a resubmission --------------------------------------------------
say "a sweep whose cell $BAD cannot write its result"
bad=$(cell_file "$BAD")
mkdir -p "$TMP/fail/cells/$bad"  # a directory where the cell's result file goes
submit_sweep "$TMP/fail" --max-parallel 2 --no-plot
wait_jobs "$ARRAY" "$MERGE"
expect_records "$ARRAY" "$(all_records COMPLETED "$BAD" FAILED)"
expect_records "$MERGE" "- CANCELLED 0:0"
scontrol show job "$MERGE" -o | grep -q "Reason=DependencyNeverSatisfied" ||
  fail "the merge job was not cancelled for its dependency: $(scontrol show job "$MERGE" -o)"
[ ! -e "$TMP/fail/slurm-logs/${NAME}_merge_$MERGE.out" ] || fail "the merge job ran"
[ ! -e "$TMP/fail/$NAME.csv" ] || fail "a CSV was merged although cell $BAD failed"
log=$TMP/fail/slurm-logs/${NAME}_${ARRAY}_$BAD.out
grep 'error: ' "$log" | grep -qF "$bad" || fail "task $BAD's log does not report the failure"
say "task $BAD failed as it should: $(grep 'error: ' "$log" | head -n 1)"
rc=0
st=$("$STATUS" "$NAME" --config "$CONFIG" --build-dir "$BUILD" --out "$TMP/fail" 2>&1) || rc=$?
printf '%s\n' "$st" | sed 's/^/    | /'
[ "$rc" -eq 3 ] || fail "status.sh exited $rc, expected 3 (cells not finished)"
grep -q "$LAST of $N cells finished; corrupt: $BAD " <<<"$st" ||
  fail "status.sh does not name cell $BAD alone"

rmdir "$TMP/fail/cells/$bad"
OTHERS=$(seq 0 "$LAST" | grep -vx "$BAD" | tr '\n' ' ')
# shellcheck disable=SC2086  # OTHERS is a list of numbers
before=$(fingerprint_files "$TMP/fail" $OTHERS)
say "resubmitting (held, to check that a second submission is refused while jobs are queued)"
submit_sweep "$TMP/fail" --max-parallel 2 --no-plot -- --hold
grep -q "1 of $N cells to run: $BAD ($LAST already done)" <<<"$SUBMIT_TEXT" ||
  fail "submit.sh did not submit exactly cell $BAD"
rc=0
again=$(cd "$TMP" && "$SUBMIT" "$NAME" --config tiny.ini --build-dir "$BUILD" --out "$TMP/fail" 2>&1) || rc=$?
if ! { [ "$rc" -eq 2 ] && grep -q "still queued or running" <<<"$again" && grep -q "^$ARRAY" <<<"$again"; }; then
  fail "a second submission while jobs are queued was not refused (exit $rc): $again"
fi
scontrol release "$ARRAY" "$MERGE" || fail "scontrol release failed"
wait_jobs "$ARRAY" "$MERGE"
expect_records "$ARRAY" "$BAD COMPLETED 0:0"
expect_records "$MERGE" "- COMPLETED 0:0"
# shellcheck disable=SC2086
after=$(fingerprint_files "$TMP/fail" $OTHERS)
[ "$before" = "$after" ] || fail "finished cells were rewritten: before
$before
after
$after"
same_metrics "$TMP/local" "$TMP/fail" || fail "the resumed sweep's CSVs differ from the local run's"

# --- 6. every cell done: only the merge ---------------------------------------------------------
say "submitting the finished sweep again"
submit_sweep "$TMP/fail" --no-plot
[ -z "$ARRAY" ] || fail "an array job was submitted although every cell is done"
grep -q "all $N cells are done: submitting only the merge job" <<<"$SUBMIT_TEXT" ||
  fail "submit.sh did not say that only the merge runs"
wait_jobs "$MERGE"
expect_records "$MERGE" "- COMPLETED 0:0"
# shellcheck disable=SC2086
[ "$(fingerprint_files "$TMP/fail" $OTHERS)" = "$before" ] || fail "finished cells were rewritten"
same_metrics "$TMP/local" "$TMP/fail" || fail "the merge-only job's CSVs differ from the local run's"

say "PASS in $(($(date +%s) - t_start)) s (cluster start to end)"
