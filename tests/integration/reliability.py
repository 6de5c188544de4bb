#!/usr/bin/python3
"""Reliability of every experiment binary at tiny scale: determinism, kills, full and read-only disks.

usage: reliability.py BIN_DIR [--only NAME] [--kills K] [--seed S] [--no-checkpoints]

For every experiment that ships experiments/<name>/configs/tiny.ini (a grid that runs in seconds):
  1. determinism: two uninterrupted runs with the same seed and threads give byte-identical
     tables (every CSV the merge writes), except the columns meta.json lists as
     "nondeterministic_columns" (wall-clock times);
  2. kills: a run is SIGKILLed at K random moments (default 4, from random.Random(S): kill j
     once the restarted run has K_j whole cells, K_j sorted random draws from 0..N-1, plus a
     random part of one cell's time), restarted each time, then run to the end; after every kill
     each visible file in cells/ is a complete, parseable JSON cell (never a partial file); the
     merged tables equal the uninterrupted run's (same rule as 1);
  3. full disk: the finished results are copied onto a small tmpfs, the rest of it is filled, and a
     --force rerun must exit 1 with a message naming the output path and the system error, with
     every earlier file byte-identical afterwards;
  4. read-only disk: the same tmpfs remounted read-only, a --force rerun must exit 1 or 2 naming the
     directory, earlier files intact;
  5. checkpoints inside a cell (--checkpoint-every): one training cell of the tiny grid (CKPT
     below: the sweep keys fixed to one value, seeds=1, more steps so that training lasts long
     enough to be interrupted) is run uninterrupted, then with --checkpoint-every N: SIGKILLed as
     soon as its first checkpoint file appears (polled), --status must call it "partial", rerun
     and SIGKILLed again as soon as it has saved a newer checkpoint, then rerun to the end, which
     must report that it resumed. After every kill no cell file exists yet and every visible
     checkpoint file is whole (header and length); at the end the merged tables equal the
     uninterrupted run's (all but the nondeterministic_columns of meta.json, byte for byte) and
     no checkpoint or temporary file is left.
Parts 3 and 4 need to mount a tmpfs (root with CAP_SYS_ADMIN); elsewhere they are skipped with a
message saying so. Exit status 0 all checks pass; 1 otherwise.
"""
import argparse
import csv
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SRC = os.environ.get("SEQLAB_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def run(binary, out, extra=(), timeout=600):
    cmd = [binary, "--scale", "tiny", "--out", out, "--quiet", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def tables(out, name):
    """{csv file name: text without the nondeterministic columns} of a merged run."""
    meta = json.load(open(os.path.join(out, name + ".meta.json")))
    drop = set(meta.get("nondeterministic_columns", []))
    result = {}
    for f in sorted(os.listdir(out)):
        if not f.endswith(".csv"):
            continue
        rows = list(csv.reader(open(os.path.join(out, f), newline="")))
        keep = [i for i, c in enumerate(rows[0]) if c not in drop] if rows else []
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        for r in rows:
            w.writerow([r[i] for i in keep if i < len(r)])
        result[f] = buf.getvalue()
    return result


def snapshot(root):
    """{relative path: bytes} of every file under root."""
    snap = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            snap[os.path.relpath(p, root)] = open(p, "rb").read()
    return snap


def cells_are_whole(out):
    cells = os.path.join(out, "cells")
    if not os.path.isdir(cells):
        return True, 0
    n = 0
    for f in os.listdir(cells):
        if f.startswith("."):
            continue  # a writer's temporary file (hidden); removed by the next run
        try:
            json.load(open(os.path.join(cells, f)))
            n += 1
        except ValueError as e:
            return False, f"{f}: {e}"
    return True, n


def count_whole(out):
    """Visible (non-temporary) files in out/cells, 0 if there is none yet; read while a run writes."""
    cells = os.path.join(out, "cells")
    try:
        return sum(1 for f in os.listdir(cells) if not f.startswith("."))
    except FileNotFoundError:
        return 0


def mount_tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
                       capture_output=True, text=True)
    return r.returncode == 0, r.stderr.strip()


def umount(path):
    subprocess.run(["umount", path], capture_output=True)


def disk_checks(binary, name, ref, tmp):
    mnt = os.path.join(tmp, "mnt")
    used = sum(len(v) for v in snapshot(ref).values())
    ok, why = mount_tmpfs(mnt, f"{used + 256 * 1024}")
    if not ok:
        print(f"reliability: {name}: SKIP full/read-only disk checks: cannot mount a tmpfs ({why})")
        return
    try:
        out = os.path.join(mnt, name)
        shutil.copytree(ref, out)
        before = snapshot(out)
        # Fill the file system: write until ENOSPC.
        try:
            with open(os.path.join(mnt, "filler"), "wb") as f:
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
        except OSError:
            pass
        r = run(binary, out, ["--force"])
        check(r.returncode == 1, f"{name}: full disk: exit 1 (got {r.returncode}; stderr {r.stderr[-400:]})")
        check("No space left on device" in r.stderr, f"{name}: full disk: the system error is named (stderr {r.stderr[-400:]})")
        check(out in r.stderr, f"{name}: full disk: the output path is named")
        after = {k: v for k, v in snapshot(out).items() if not os.path.basename(k).startswith(".")}
        check(after == before, f"{name}: full disk: earlier results intact")
        os.remove(os.path.join(mnt, "filler"))
        subprocess.run(["mount", "-o", "remount,ro", mnt], check=True)
        r = run(binary, out, ["--force"])
        check(r.returncode in (1, 2), f"{name}: read-only disk: exit 1 or 2 (got {r.returncode}; stderr {r.stderr[-400:]})")
        check(mnt in r.stderr, f"{name}: read-only disk: the directory is named (stderr {r.stderr[-400:]})")
        check(snapshot(out) == before, f"{name}: read-only disk: earlier results intact")
    finally:
        umount(mnt)


# Part 5, per experiment: the cell (sweep key -> value), overrides that make its training last a
# second or so (tiny cells train in milliseconds), and --checkpoint-every. Each cell is one that
# trains: position_extrapolation's rope cell trains several phases (pilot, pretrain, three fine-tunes),
# norm_stability's batch study trains a pilot trial per learning rate and one run per batch size
# for LayerNorm and BatchNorm (running statistics are buffers), attention_ablations' majority arm
# is the encoder-decoder family, parallel_speedup's tta:lstm cell runs the learning-rate pilot and
# a time-to-accuracy run.
CKPT = {
    "long_range_recall": ({"task": "copy_memory", "model": "transformer_decoder"},
                          {"steps": 600, "log_every": 50}, 50),
    "position_extrapolation": ({"task": "copy", "encoding": "rope"},
                               {"steps_copy": 400, "finetune_steps": 300, "finetune_tasks": "copy",
                                "log_every": 50}, 40),
    "norm_stability": ({"study": "batch"},
                       {"examples": 4000, "log_points": 50, "divergence_factor": 1000}, 100),
    "attention_ablations": ({"arm": "majority:encoder_decoder:separate:2"},
                            {"steps": 300, "eval_every": 100}, 30),
    "custom_example": ({"positional_encoding": "ramp"}, {"steps": 600}, 50),
    "parallel_speedup": ({"unit": "tta:lstm"},
                         {"tta_max_steps": 600, "tta_eval_every": 100, "tta_seeds": 1, "tta_pilot_steps": 50,
                          "tta_target_bpc": 0.5}, 50),
}


def checkpoint_file_whole(path):
    """True if `path` is a complete seqlab checkpoint: "SEQLABCK", version, byte-order marker,
    payload length, payload, 8-byte checksum (train/checkpoint.hpp)."""
    try:
        data = open(path, "rb").read()
    except OSError:
        return False
    if len(data) < 24 or data[:8] != b"SEQLABCK":
        return False
    size = int.from_bytes(data[16:24], "little")
    return len(data) == 24 + size + 8


def checkpoint_state(ckdir):
    """{file name: (inode, size, mtime_ns)} of the visible checkpoint files in ckdir."""
    state = {}
    try:
        for f in os.listdir(ckdir):
            if f.endswith(".ckpt") and not f.startswith("."):
                try:
                    st = os.stat(os.path.join(ckdir, f))
                    state[f] = (st.st_ino, st.st_size, st.st_mtime_ns)
                except OSError:
                    pass
    except OSError:
        pass
    return state


def run_until(cmd, cond, timeout=120):
    """Starts cmd and SIGKILLs it as soon as cond() holds (polled every millisecond). Returns
    (landed, stderr text): landed = the process was killed while still running."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        t0 = time.monotonic()
        landed = False
        while p.poll() is None and time.monotonic() - t0 < timeout:
            if cond():
                p.send_signal(signal.SIGKILL)
                landed = True
                break
            time.sleep(0.001)
        if p.poll() is None and not landed:
            p.send_signal(signal.SIGKILL)
        p.wait()
        err.seek(0)
        return landed and p.returncode == -signal.SIGKILL, err.read().decode(errors="replace")


def checkpoint_checks(binary, name, tmp):
    if name not in CKPT:
        check(False, f"{name}: no checkpoint test configured (add the experiment to CKPT in {__file__})")
        return
    cell, overrides, every = CKPT[name]
    args = ["--seeds=1"] + [f"--{k}={v}" for k, v in {**cell, **overrides}.items()]
    listing = subprocess.run([binary, "--scale", "tiny", *args, "--list-cells"],
                             capture_output=True, text=True)
    if not check(listing.returncode == 0 and len(listing.stdout.splitlines()) == 1,
                 f"{name}: checkpoint test: the overrides select one cell ({listing.stdout.strip()!r} {listing.stderr.strip()!r})"):
        return
    ref = os.path.join(tmp, "ckpt_ref")
    t0 = time.monotonic()
    r = run(binary, ref, args)
    t_ref = time.monotonic() - t0
    if not check(r.returncode == 0, f"{name}: checkpoint test: uninterrupted run exits 0 (stderr {r.stderr[-400:]})"):
        return
    want = tables(ref, name)
    out = os.path.join(tmp, "ckpt_killed")
    ckdir = os.path.join(out, "checkpoints")
    cells = os.path.join(out, "cells")
    cmd = [binary, "--scale", "tiny", "--out", out, *args, "--checkpoint-every", str(every)]

    def visible_cells():
        return [f for f in os.listdir(cells) if not f.startswith(".")] if os.path.isdir(cells) else []

    def after_kill(what):
        check(not visible_cells(), f"{name}: checkpoint test: no cell file after the {what} kill (the cell must still be running)")
        files = checkpoint_state(ckdir)
        check(files, f"{name}: checkpoint test: a checkpoint file exists after the {what} kill")
        for f in files:
            check(checkpoint_file_whole(os.path.join(ckdir, f)),
                  f"{name}: checkpoint test: {f} is a whole checkpoint after the {what} kill")
        return files

    def pilot_newest(files):
        # A saved learning-rate pilot (<out>/pilots, position_extrapolation) newer than every
        # checkpoint means the kill landed after the pilot's result was written and before the next
        # phase's first checkpoint: the next run reads the pilot and starts that phase at step 0.
        # Taken right after the kill, before the next run writes anything.
        pilots = os.path.join(out, "pilots")
        times = [os.stat(os.path.join(pilots, f)).st_mtime_ns for f in os.listdir(pilots)
                 if f.endswith(".json")] if os.path.isdir(pilots) else []
        return bool(times) and max(times) >= max((v[2] for v in files.values()), default=0)

    def check_resumed(err, from_pilot, what):
        if from_pilot:
            check("pilot read from" in err, f"{name}: checkpoint test: the {what} run read the saved pilot (stderr {err[-400:]})")
        else:
            check("resumed from checkpoint" in err, f"{name}: checkpoint test: the {what} run resumed (stderr {err[-400:]})")

    landed, _ = run_until(cmd + ["--quiet"], lambda: bool(checkpoint_state(ckdir)))
    check(landed, f"{name}: checkpoint test: killed after the first checkpoint appeared, before the cell ended (uninterrupted run: {t_ref:.2f} s)")
    first = after_kill("first")
    first_pilot = pilot_newest(first)
    st = subprocess.run([binary, "--scale", "tiny", *args, "--out", out, "--status"],
                        capture_output=True, text=True)
    check(st.returncode == 0 and " partial " in st.stdout,
          f"{name}: checkpoint test: --status says partial after the kill (got {st.stdout.strip()!r})")
    landed, err = run_until(cmd, lambda: any(v != first.get(k) for k, v in checkpoint_state(ckdir).items()))
    check(landed, f"{name}: checkpoint test: second run killed after a newer checkpoint was saved")
    check_resumed(err, first_pilot, "second")
    second = after_kill("second")
    second_pilot = pilot_newest(second)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, f"{name}: checkpoint test: final run exits 0 (stderr {r.stderr[-400:]})")
    check_resumed(r.stderr, second_pilot, "final")
    if r.returncode == 0:
        got = tables(out, name)
        for f, text in want.items():
            check(got.get(f) == text, f"{name}: checkpoint test: {f} after two kills and resumes equals the uninterrupted run")
    left = os.listdir(ckdir) if os.path.isdir(ckdir) else []
    check(not left, f"{name}: checkpoint test: no checkpoint or temporary file left ({left})")
    hidden = [f for f in os.listdir(cells) if f.startswith(".")] if os.path.isdir(cells) else []
    check(not hidden, f"{name}: checkpoint test: no temporary cell file left ({hidden})")
    print(f"reliability: {name}: checkpoint test ({t_ref:.2f} s uninterrupted) done")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("--only")
    ap.add_argument("--kills", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-checkpoints", action="store_true", help="skip part 5")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    names = sorted(n for n in os.listdir(os.path.join(SRC, "experiments"))
                   if os.path.isfile(os.path.join(SRC, "experiments", n, "configs", "tiny.ini"))
                   and (a.only is None or n == a.only))
    check(names, "at least one experiment ships configs/tiny.ini")
    for name in names:
        binary = os.path.abspath(os.path.join(a.bin_dir, name))
        if not check(os.access(binary, os.X_OK), f"{name}: binary {binary} built"):
            continue
        with tempfile.TemporaryDirectory(prefix=f"seqlab_rel_{name}_") as tmp:
            ref = os.path.join(tmp, "ref")
            t0 = time.monotonic()
            r = run(binary, ref)
            t_ref = time.monotonic() - t0
            if not check(r.returncode == 0, f"{name}: tiny run exits 0 (stderr {r.stderr[-400:]})"):
                continue
            ref_tables = tables(ref, name)
            check(ref_tables, f"{name}: the merge wrote CSVs")
            again = os.path.join(tmp, "again")
            t0 = time.monotonic()
            check(run(binary, again).returncode == 0, f"{name}: second run exits 0")
            # The kill moments are scaled by the warm run time: a first run (cold page cache,
            # sanitizer start-up) can take several times as long, and kills scaled by it would
            # fall after a short run has ended.
            t_ref = min(t_ref, time.monotonic() - t0)
            for f, text in ref_tables.items():
                check(tables(again, name).get(f) == text, f"{name}: {f} byte-identical across runs (timing columns aside)")

            killed = os.path.join(tmp, "killed")
            kills = 0
            # Kill j comes once the restarted run has brought the whole cells up to target j (K
            # sorted draws from 0..N-1), plus a random part of one cell's time: the K kills fall at
            # random moments spread over the run, inside cells and between them. (Kills at random
            # times from each restart's start came after a short tiny run had finished, or all
            # before its first cell.)
            n_cells = count_whole(ref)
            targets = sorted(rng.choice(range(max(1, n_cells))) for _ in range(a.kills))
            per_cell = t_ref / max(1, n_cells)
            progress = []  # whole cell files after each kill
            for target in targets:
                extra = rng.uniform(0.0, per_cell)
                reached = []

                def due():
                    if not reached and count_whole(killed) >= target:
                        reached.append(time.monotonic())
                    return bool(reached) and time.monotonic() - reached[0] >= extra

                landed, _ = run_until([binary, "--scale", "tiny", "--out", killed, "--quiet"], due)
                kills += landed
                whole, info = cells_are_whole(killed)
                check(whole, f"{name}: after a kill every visible cell file is whole ({info})")
                progress.append(str(info))
            if a.kills > 0 and t_ref >= 0.5:  # a run this long is still going at the first kill
                check(kills >= 1, f"{name}: at least one of {a.kills} kills landed (tiny run {t_ref:.2f} s)")
            r = run(binary, killed)
            check(r.returncode == 0, f"{name}: run after {kills} kills exits 0 (stderr {r.stderr[-400:]})")
            for f, text in ref_tables.items():
                check(tables(killed, name).get(f) == text, f"{name}: {f} after {kills} kills equals the uninterrupted run")
            leftovers = [f for f in os.listdir(os.path.join(killed, "cells")) if f.startswith(".")]
            check(not leftovers, f"{name}: no temporary file left after the final run ({leftovers})")
            disk_checks(binary, name, ref, tmp)
            if not a.no_checkpoints:
                checkpoint_checks(binary, name, tmp)
            print(f"reliability: {name}: tiny run {t_ref:.1f} s, {kills} kills landed (whole cells after each: {', '.join(progress)} of {n_cells}), checks done")
    if failures:
        print(f"reliability: {len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print(f"reliability: all checks passed for {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
