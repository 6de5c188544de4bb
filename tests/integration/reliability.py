#!/usr/bin/python3
"""Reliability of every experiment binary at tiny scale: determinism, kills, full and read-only disks.

usage: reliability.py BIN_DIR [--only NAME] [--kills K] [--seed S]

For every experiment that ships experiments/<name>/configs/tiny.ini (a grid that runs in seconds):
  1. determinism: two uninterrupted runs with the same seed and threads give byte-identical
     tables (every CSV the merge writes), except the columns meta.json lists as
     "nondeterministic_columns" (wall-clock times);
  2. kills: a run is SIGKILLed at K random moments (default 4, from random.Random(S)), restarted
     each time, then run to the end; after every kill each visible file in cells/ is a complete,
     parseable JSON cell (never a partial file); the
     merged tables equal the uninterrupted run's (same rule as 1);
  3. full disk: the finished results are copied onto a small tmpfs, the rest of it is filled, and a
     --force rerun must exit 1 with a message naming the output path and the system error, with
     every earlier file byte-identical afterwards;
  4. read-only disk: the same tmpfs remounted read-only, a --force rerun must exit 1 or 2 naming the
     directory, earlier files intact.
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("--only")
    ap.add_argument("--kills", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
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
            check(run(binary, again).returncode == 0, f"{name}: second run exits 0")
            for f, text in ref_tables.items():
                check(tables(again, name).get(f) == text, f"{name}: {f} byte-identical across runs (timing columns aside)")

            killed = os.path.join(tmp, "killed")
            kills = 0
            for _ in range(a.kills):
                p = subprocess.Popen([binary, "--scale", "tiny", "--out", killed, "--quiet"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(rng.uniform(0.02, max(0.05, 0.9 * t_ref)))
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                    kills += 1
                p.wait()
                whole, info = cells_are_whole(killed)
                check(whole, f"{name}: after a kill every visible cell file is whole ({info})")
            r = run(binary, killed)
            check(r.returncode == 0, f"{name}: run after {kills} kills exits 0 (stderr {r.stderr[-400:]})")
            for f, text in ref_tables.items():
                check(tables(killed, name).get(f) == text, f"{name}: {f} after {kills} kills equals the uninterrupted run")
            leftovers = [f for f in os.listdir(os.path.join(killed, "cells")) if f.startswith(".")]
            check(not leftovers, f"{name}: no temporary file left after the final run ({leftovers})")
            disk_checks(binary, name, ref, tmp)
            print(f"reliability: {name}: tiny run {t_ref:.1f} s, {kills} kills landed, checks done")
    if failures:
        print(f"reliability: {len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print(f"reliability: all checks passed for {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
