#!/usr/bin/python3
"""Input fuzzing of the experiment binaries: generated config files and command lines.

usage: fuzz_cli.py BIN_DIR [--runs N] [--seed S] [--timeout SEC] [--only NAME]

For every experiment binary in BIN_DIR (an executable named like a folder experiments/<name>/
with configs/), N runs (default 10000) from a
seeded random generator (Python's random.Random(S), so a failure is replayed by its seed and run
index). Each run writes a config file and/or a command line built from the keys that the binary's
own --help lists, mutated into the kinds of input sweeps meet: unknown keys, wrong types, huge,
negative, NaN and empty numbers, duplicate keys, broken INI syntax, binary garbage, long lines,
bad run flags (--cell, --cells, --threads, --seed, --scale, --config pointing nowhere), and
combinations the grid cannot build (e.g. n_heads not dividing d_model; an experiment's own
validate rejects them).

Two modes:
  listing (most runs): the generated input plus --list-cells and --out DIR; the input may be valid.
      Expected: exit 0 or 2.
  running: the generated input plus one mutation that is certainly invalid (a value outside the
      key's stated range or type), run as a cell (--cell 0 --out DIR). Expected: exit 2.
In both: no crash (signal) or other exit status, finished within --timeout seconds (default 20),
on exit 2 exactly one line on stderr that names the offending key or file, and nothing written:
DIR (which does not exist beforehand) is not created.
Exit status: 0 all runs as expected; 1 otherwise (each failure printed with its seed, run index,
command line and config file).
"""
import argparse
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

GARBAGE = ["", " ", "abc", "1.5", "1e400", "-1e400", "nan", "NaN", "inf", "-inf", "-0", "0x10",
           "1e9999", "99999999999999999999999", "-99999999999999999999", "2147483648",
           "4294967297", "9223372036854775808", "-9223372036854775809", "1,", ",1", ",,", "1,,2",
           "1;2", "\u00e9", "\x01\x02", "true", "yes", "[]", "{}", "'x'", '"1"', "1 2", "--",
           "=", "==1", "1e-50", "-1", "0", "1" * 300]


class Key:
    def __init__(self, name, kind, lo=None, hi=None, choices=None, sweep=False):
        self.name, self.kind, self.lo, self.hi = name, kind, lo, hi
        self.choices, self.sweep = choices or [], sweep


def parse_help(text):
    """Keys from the 'Keys' section of --help: '--name=LIST|VALUE ... default D (sweep)' then a
    description ending in 'integers in [a, b]', 'a real in (a, b]', 'one of a|b|c'."""
    keys = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^\s+--([A-Za-z0-9_]+)=(LIST|VALUE)\b", line)
        if not m:
            continue
        desc = " ".join(lines[i:i + 3])
        name, sweep = m.group(1), m.group(2) == "LIST"
        mi = re.search(r"integers? in \[(-?\d+), (-?\d+)\]", desc)
        mr = re.search(r"reals? in [\[(]([-0-9.e+]+), ([-0-9.e+]+)[\])]", desc)
        mc = re.search(r"one of ([A-Za-z0-9_|.-]+)", desc) or re.search(r"values from ([A-Za-z0-9_|.-]+)", desc)
        if mi:
            keys.append(Key(name, "int", int(mi.group(1)), int(mi.group(2)), sweep=sweep))
        elif mr:
            keys.append(Key(name, "real", float(mr.group(1)), float(mr.group(2)), sweep=sweep))
        elif mc:
            keys.append(Key(name, "choice", choices=mc.group(1).split("|"), sweep=sweep))
        else:
            keys.append(Key(name, "string", sweep=sweep))
    return keys


def valid_value(rng, k):
    if k.kind == "int":
        hi = min(k.hi, k.lo + rng.choice([1, 2, 4, 16, 64]))
        return str(rng.randint(k.lo, hi))
    if k.kind == "real":
        lo = k.lo if k.lo > -1e30 else -1.0
        hi = k.hi if k.hi < 1e30 else lo + 1.0
        return repr(rng.uniform(lo, hi))
    if k.kind == "choice":
        return rng.choice(k.choices)
    return "x"


def invalid_value(rng, k):
    """A value that is certainly outside what k accepts."""
    if k.kind == "int":
        return rng.choice([str(k.lo - 1), str(k.hi + 1), "abc", "1.5", "", "nan", "9" * 30])
    if k.kind == "real":
        return rng.choice(["nan", "inf", "abc", "", "1e400", str(k.lo - 1.0) if k.lo > -1e30 else "-inf"])
    if k.kind == "choice":
        return rng.choice(["no_such_" + k.choices[0], "", k.choices[0].upper() + "_x", "\u00e9"])
    return None


def mutate_value(rng, k):
    r = rng.random()
    if r < 0.45:
        v = valid_value(rng, k)
        if k.sweep and rng.random() < 0.3:
            v = ",".join([v] + [valid_value(rng, k) for _ in range(rng.randint(1, 3))])
        return v
    if r < 0.75:
        return invalid_value(rng, k) or rng.choice(GARBAGE)
    return rng.choice(GARBAGE)


def generate(rng, keys, tmp, certainly_invalid):
    """(argv tail, config text or None)."""
    entries = []
    for _ in range(rng.randint(0, 6)):
        r = rng.random()
        if r < 0.75 and keys:
            k = rng.choice(keys)
            entries.append((k.name, mutate_value(rng, k)))
        elif r < 0.85:
            entries.append(("no_such_key_%d" % rng.randint(0, 99), rng.choice(GARBAGE)))
        else:
            entries.append((rng.choice(["", " ", "seeds", "seed", "threads", "Model", "T "]),
                            rng.choice(GARBAGE)))
    argv, config = [], None
    if certainly_invalid:
        # On the command line, which wins over the config file, so nothing can override it.
        cands = [k for k in keys if invalid_value(rng, k) is not None]
        if cands:
            k = rng.choice(cands)
            argv.append(f"--{k.name}={invalid_value(rng, k)}")
        else:
            argv.append("--no_such_key=1")
    use_file = rng.random() < 0.5
    lines = []
    for name, value in entries:
        if use_file and rng.random() < 0.7:
            form = rng.random()
            if form < 0.8:
                lines.append(f"{name} = {value}")
            elif form < 0.9:
                lines.append(f"{name} {value}")          # broken: no '='
            else:
                lines.append(f"{name}={value}\n{name}={value}")  # duplicate key
        else:
            argv.append(f"--{name}={value}")
    if use_file:
        extra = rng.random()
        if extra < 0.1:
            lines.append("[section]")
        elif extra < 0.15:
            lines.append("\x00\xff garbage")
        elif extra < 0.2:
            lines.append("k" * 5000 + " = 1")
        elif extra < 0.25:
            lines.append("# comment only")
        config = "\n".join(lines) + ("\n" if rng.random() < 0.8 else "")
    r = rng.random()
    if r < 0.05:
        argv += ["--threads", rng.choice(["0", "-1", "abc", "100000", "1.5", ""])]
    elif r < 0.1:
        argv += ["--seed", rng.choice(["-1", "abc", "9223372036854775808", "", "1e3"])]
    elif r < 0.13:
        argv += ["--scale", rng.choice(["huge", "", "../quick", "QUICK"])]
    elif r < 0.16:
        argv += ["--config", os.path.join(tmp, rng.choice(["missing.ini", ""]))]
    elif r < 0.19:
        argv += ["--cells", rng.choice(["5-2", "a-b", "-", "0-999999999", "1-"])]
    elif r < 0.21:
        argv += [rng.choice(["--no-such-flag", "-x", "positional", "--cell"])]
    return argv, config


def run_one(binary, argv, config, tmp, listing, timeout):
    out = os.path.join(tmp, "out")
    cmd = [binary] + argv
    if config is not None:
        cfg = os.path.join(tmp, "fuzz.ini")
        with open(cfg, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(config)
        cmd += ["--config", cfg]
    cmd += (["--list-cells"] if listing else ["--cell", "0"]) + ["--out", out, "--quiet"]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout, cwd=tmp)
    except subprocess.TimeoutExpired:
        shutil.rmtree(out, ignore_errors=True)
        return cmd, None, "hang: no exit within %g s" % timeout
    dt = time.monotonic() - t0
    problems = []
    rc = p.returncode
    if rc < 0:
        problems.append(f"killed by signal {signal.Signals(-rc).name}")
    elif rc not in ((0, 2) if listing else (2,)):
        problems.append(f"exit status {rc} (expected {'0 or 2' if listing else '2'})")
    err = p.stderr.decode("utf-8", "replace").strip()
    if rc == 2:
        if len(err.splitlines()) != 1:
            problems.append(f"exit 2 with {len(err.splitlines())} stderr lines, expected 1")
        if "error" not in err:
            problems.append("exit 2 without an error message")
    if os.path.exists(out):
        problems.append("wrote into --out although it only listed or was refused")
        shutil.rmtree(out, ignore_errors=True)
    return cmd, rc, ("; ".join(problems) + f" [{dt:.2f} s] stderr: {err[:300]}") if problems else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    # Experiment binaries only (experiments/<name>/configs/ exists); bench_layers and the like
    # built into the same folder have another command line.
    src = os.environ.get("SEQLAB_SOURCE_DIR") or os.path.abspath(
        os.path.join(os.path.dirname(__file__), "..", ".."))
    bins = sorted(f for f in os.listdir(a.bin_dir)
                  if os.path.isfile(os.path.join(a.bin_dir, f))
                  and os.path.isdir(os.path.join(src, "experiments", f, "configs"))
                  and os.stat(os.path.join(a.bin_dir, f)).st_mode & stat.S_IXUSR
                  and (a.only is None or f == a.only))
    if not bins:
        print(f"fuzz_cli: no experiment binaries in {a.bin_dir}", file=sys.stderr)
        return 1
    failures = 0
    for name in bins:
        binary = os.path.abspath(os.path.join(a.bin_dir, name))
        h = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=a.timeout)
        keys = parse_help(h.stdout)
        if h.returncode != 0 or not keys:
            print(f"FAIL {name}: --help exit {h.returncode}, {len(keys)} keys parsed", file=sys.stderr)
            failures += 1
            continue
        rng = random.Random(f"{a.seed}:{name}")
        counts = {}
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"fuzz_{name}_") as tmp:
            for i in range(a.runs):
                listing = rng.random() < 0.85
                argv, config = generate(rng, keys, tmp, certainly_invalid=not listing)
                cmd, rc, problem = run_one(binary, argv, config, tmp, listing, a.timeout)
                counts[rc] = counts.get(rc, 0) + 1
                if problem:
                    failures += 1
                    print(f"FAIL {name} seed={a.seed} run={i}: {problem}\n  cmd: {cmd!r}\n"
                          f"  config: {config!r}", file=sys.stderr)
        print(f"fuzz_cli: {name}: {a.runs} runs, {len(keys)} keys, exit statuses "
              f"{dict(sorted(counts.items(), key=str))}, {time.monotonic() - t0:.1f} s")
    if failures:
        print(f"fuzz_cli: {failures} failing run(s)", file=sys.stderr)
        return 1
    print(f"fuzz_cli: all {a.runs * len(bins)} runs exited as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
