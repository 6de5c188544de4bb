#!/usr/bin/python3
"""compare_pytorch: seqlab's layers against PyTorch's on the same shapes and machine, in one run.

Runs seqlab's Google Benchmark binary (experiments/bench_layers, one case per process, filtered
with --benchmark_filter) and the same layers in PyTorch (this script in --worker mode, one case and
thread setting per process), interleaved: every repetition runs every (case, mode, thread budget,
implementation/setting) once, in a rotating order, so that load changes on a shared machine hit all
of them alike. Each process is one repetition sample (its mean time per iteration over at least
--min-time seconds after one untimed warm-up call); the table reports the median, minimum and
maximum over --repetitions samples, the analytic GEMM FLOP rate (same formulas as bench_layers.cpp),
that rate as a fraction of seqlab's SGEMM 1024x1024x1024 rate measured in the same run at the same
thread count, and the peak resident set size of the process (wait4's ru_maxrss; the increase over a
process of the same kind that only loaded its libraries is the step's own memory).

The fraction of SGEMM is given two ways. fraction_of_sgemm: the layer's median rate over the median
rate of the SGEMM setting, whose samples run at their own places in the rotation (in a full run, a
minute or more away from the layer's). fraction_of_sgemm_paired: next to every seqlab layer sample,
an SGEMM process of its own (the seqlab binary's, for --also labels too; timed for
min(--min-time, 0.5) s) at the same thread count runs right before it (1st, 3rd, ... repetition)
or right after it (2nd, 4th, ...); the sample's rate over that SGEMM's rate, then the median over
samples (min and max in the CSV). On a shared VM that switches for seconds at a time between speed
regimes (SGEMM 1024^3 at 2 threads: 12 ms in one, 24 ms in another), the paired fraction compares
the layer with the machine as it was when the layer ran; the issue-13 target on the SGEMM fraction
is judged on it (meets_target), and on the unpaired one in meets_target_unpaired. The meta line's
complete=yes marks a finished run (the CSV is rewritten after every repetition, so a killed run
keeps its samples).

Shapes (issue 13): Transformer encoder layer, pre-norm LayerNorm, B 32, T 128, d_model 256,
n_heads 8, d_ff 1024, relu, dropout 0; LSTM, GRU and RNN (tanh), B 32, T 128, input = hidden = 256,
one layer; multi-head self-attention alone, B 8, T 512, d_model 256, n_heads 8. Modes: fwd (the
forward of a training step: caches kept, autograd on) and fwdbwd (forward then backward of a sum
loss; seqlab's benchmark feeds a fixed random dy, which costs the same as PyTorch's ones).

Thread budgets: 1 and all cores. seqlab has one knob (OpenBLAS threads, its own loops serial).
PyTorch gets every combination of intra-op threads (torch.set_num_threads, OMP_NUM_THREADS) and
OpenBLAS threads (OPENBLAS_NUM_THREADS) within the budget; its fastest setting per (case, mode,
budget) is the denominator of ratio_seqlab_over_pytorch. All settings are in the CSV.

Output: OUT (default results/bench/compare_pytorch.csv, written through a temporary file): a first
line "# meta: key=value; ..." (time, host, CPU, load average, BLAS, torch version or "absent"),
then one row per (case, mode, threads, impl, setting). Columns: README.md beside this file.
Without torch (not importable by --torch-python, or --no-torch) the seqlab half is written and the
meta line says torch_version=absent.

Usage: experiments/bench/compare_pytorch.py [--build-dir build/release] [--repetitions 5]
       [--min-time 1.0] [--cases encoder_layer,lstm,gru,rnn,mha] [--modes fwd,fwdbwd]
       [--threads 1,2] [--out results/bench/compare_pytorch.csv] [--also LABEL=BINARY ...]
--also adds another bench_layers binary (e.g. an older build) as implementation LABEL, interleaved
with the others: before/after comparisons in one run. Exit status: 0 done, 2 bad arguments or
missing binary, 1 a failed run.
"""
import argparse
import json
import math
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# case -> shape and the bench_layers name stem. flops: analytic GEMM FLOPs of one forward
# (bench_layers.cpp's formulas; a multiply-add is 2 FLOP; fwdbwd = 3 x forward).
CASES = {
    "encoder_layer": dict(kind="encoder", B=32, T=128, D=256, h=8, F=1024, bench="EncoderLayer",
                          args="batch:32/seq_len:128/d_model:256/n_heads:8"),
    "lstm": dict(kind="lstm", B=32, T=128, D=256, H=256, G=4, bench="LSTM",
                 args="batch:32/seq_len:128/hidden:256"),
    "gru": dict(kind="gru", B=32, T=128, D=256, H=256, G=3, bench="GRU",
                args="batch:32/seq_len:128/hidden:256"),
    "rnn": dict(kind="rnn", B=32, T=128, D=256, H=256, G=1, bench="RNN",
                args="batch:32/seq_len:128/hidden:256"),
    "mha": dict(kind="mha", B=8, T=512, D=256, h=8, bench="MHA",
                args="batch:8/seq_len:512/d_model:256/n_heads:8"),
}
MODES = ("fwd", "fwdbwd")
SGEMM_N = 1024

# Targets of issue 13 (forward+backward, against PyTorch's fastest setting at the same budget).
TARGET_RATIO = {"encoder_layer": 0.9, "lstm": 0.8, "gru": 0.8, "rnn": 0.8, "mha": 0.5}
TARGET_SGEMM_FRACTION = {"encoder_layer": 0.8}

COLUMNS = ["case", "mode", "threads", "impl", "setting", "batch", "seq_len", "d_model",
           "repetitions", "median_ms", "min_ms", "max_ms", "gflop_per_s",
           "sgemm_gflop_per_s", "fraction_of_sgemm", "fraction_of_sgemm_paired",
           "fraction_of_sgemm_paired_min", "fraction_of_sgemm_paired_max", "pytorch_best_setting",
           "ratio_seqlab_over_pytorch", "cpu_ms_median", "cpu_ratio_seqlab_over_pytorch",
           "peak_rss_bytes", "baseline_rss_bytes", "step_rss_bytes",
           "target_ratio_max", "target_sgemm_fraction_min", "meets_target", "meets_target_unpaired"]


def forward_flops(c):
    B, T = c["B"], c["T"]
    if c["kind"] in ("lstm", "gru", "rnn"):
        return 2.0 * B * T * c["G"] * c["H"] * (c["D"] + c["H"])
    D = c["D"]
    mha = 2.0 * B * T * D * 3 * D + 2.0 * B * T * D * D + 2.0 * 2.0 * B * T * T * D
    if c["kind"] == "mha":
        return mha
    return mha + 2.0 * 2.0 * B * T * D * c["F"]


def case_flops(name, mode):
    f = forward_flops(CASES[name])
    return f if mode == "fwd" else 3.0 * f


# --- PyTorch worker (runs in its own process) -----------------------------------------------------

def torch_worker(args):
    import resource
    import torch
    torch.set_num_threads(args.intra)
    torch.manual_seed(0)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if args.case == "baseline":
        print(json.dumps({"baseline_rss_bytes": baseline}))
        return 0
    c = CASES[args.case]
    nn = torch.nn
    B, T = c["B"], c["T"]
    if c["kind"] == "encoder":
        layer = nn.TransformerEncoderLayer(c["D"], c["h"], c["F"], dropout=0.0, activation="relu",
                                           batch_first=True, norm_first=True)
        fwd = lambda x: layer(x)
        width = c["D"]
    elif c["kind"] == "mha":
        layer = nn.MultiheadAttention(c["D"], c["h"], batch_first=True)
        fwd = lambda x: layer(x, x, x, need_weights=False)[0]
        width = c["D"]
    else:
        cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[c["kind"]]
        layer = cls(c["D"], c["H"], num_layers=1, batch_first=True)
        fwd = lambda x: layer(x)[0]
        width = c["D"]
    layer.train()
    x = torch.rand(B, T, width) * 2 - 1
    x.requires_grad_(True)

    def step():
        y = fwd(x)
        if args.mode == "fwdbwd":
            y.sum().backward()  # sum loss: dL/dy = 1; parameter and input grads accumulate
        return y

    step()  # warm-up (allocations, OpenBLAS buffers)
    iters, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while True:
        step()
        iters += 1
        elapsed = time.perf_counter() - start
        if iters >= 2 and elapsed >= args.min_time:
            break
    cpu = time.process_time() - cpu_start  # all threads of the process
    print(json.dumps({"ms": 1000.0 * elapsed / iters, "cpu_ms": 1000.0 * cpu / iters,
                      "iterations": iters, "baseline_rss_bytes": baseline}))
    return 0


# --- running processes ----------------------------------------------------------------------------

def run_process(cmd, env=None):
    """Runs cmd with stdout captured; returns (returncode, stdout, stderr, ru_maxrss in bytes)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, stdin=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (p.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                ru.ru_maxrss * 1024)


def bench_name(case, mode, threads):
    c = CASES[case]
    return f"{c['bench']}_{mode}/{c['args']}/nthreads:{threads}/real_time"


def sgemm_name(threads):
    return f"SGEMM_square/M:{SGEMM_N}/N:{SGEMM_N}/K:{SGEMM_N}/nthreads:{threads}/real_time"


UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def run_seqlab(binary, name, min_time):
    cmd = [binary, "--benchmark_filter=^" + re.escape(name) + "$", "--benchmark_format=json",
           f"--benchmark_min_time={min_time}"]
    rc, out, err, rss = run_process(cmd)
    if rc != 0:
        raise RuntimeError(f"{binary} exited {rc} on {name}: {err.strip()[-500:]}")
    try:
        runs = [b for b in json.loads(out)["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
    except (ValueError, KeyError, TypeError):
        raise RuntimeError(f"{binary}: no Google Benchmark JSON for {name}; its stderr: "
                           f"{err.strip()[-500:] or '(empty)'}")
    if len(runs) != 1:
        raise RuntimeError(f"{binary}: expected one run of {name}, got {len(runs)}")
    r = runs[0]
    if r.get("error_occurred"):
        raise RuntimeError(f"{binary}: {name}: {r.get('error_message')}")
    # cpu_time: the main thread's CPU time (all of the work when OpenBLAS has one thread).
    return r["real_time"] * UNIT_MS[r["time_unit"]], rss, None, r["cpu_time"] * UNIT_MS[r["time_unit"]]


def run_seqlab_paired(binary, name, threads, min_time, sgemm_first, sgemm_binary):
    """run_seqlab on name, with SGEMM 1024^3 at the same thread count timed by a process of its own
    (sgemm_binary: the run's reference binary, for every --also label too) right before
    (sgemm_first) or right after it: the layer and its reference at the same moment. A process of
    its own, so that the layer's peak RSS is not mixed with the SGEMM's buffers; timed for
    min(min_time, 0.5) s. Returns run_seqlab's tuple plus the SGEMM's ms per call."""
    sgemm_min_time = min(min_time, 0.5)  # 1024^3 takes 10-30 ms here: >= 15 calls
    if sgemm_first:
        sg = run_seqlab(sgemm_binary, sgemm_name(threads), sgemm_min_time)[0]
        res = run_seqlab(binary, name, min_time)
    else:
        res = run_seqlab(binary, name, min_time)
        sg = run_seqlab(sgemm_binary, sgemm_name(threads), sgemm_min_time)[0]
    return res + (sg,)


def listed_benchmarks(binary):
    """The case names binary registers (--benchmark_list_tests), or None when it is not a Google
    Benchmark binary (non-zero exit or nothing listed)."""
    try:
        rc, out, _, _ = run_process([binary, "--benchmark_list_tests"])
    except OSError:
        return None
    names = set(out.split())
    return names if rc == 0 and names else None


def seqlab_baseline(binary):
    _, _, _, rss = run_process([binary, "--benchmark_filter=^no case matches this$",
                                "--benchmark_format=json"])
    return rss


def run_torch(python, case, mode, intra, blas, min_time):
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = str(blas)
    env["OMP_NUM_THREADS"] = str(intra)
    cmd = [python, os.path.abspath(__file__), "--worker", "--case", case, "--mode", mode,
           "--intra", str(intra), "--min-time", str(min_time)]
    rc, out, err, rss = run_process(cmd, env)
    if rc != 0:
        raise RuntimeError(f"PyTorch worker exited {rc} on {case} {mode}: {err.strip()[-800:]}")
    return json.loads(out.strip().splitlines()[-1]), rss


def torch_version(python):
    try:
        r = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def torch_settings(threads):
    """(intra-op threads, OpenBLAS threads) pairs with both <= threads and at least one == threads."""
    if threads == 1:
        return [(1, 1)]
    return [(1, threads), (threads, 1), (threads, threads)]


# --- helpers for the report -----------------------------------------------------------------------

def pruned(setting, samples, factor):
    """True for a PyTorch setting whose first sample is > factor x its group's fastest PyTorch one."""
    case, mode, t, impl, label = setting[:5]
    if impl != "pytorch":
        return False
    first = {k[4]: v[0] for k, v in samples.items() if k[:4] == (case, mode, t, "pytorch")}
    return len(first) > 1 and first[label] > factor * min(first.values())


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def fmt(v, digits=4):
    if v is None or v == "":
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return f"{v:.{digits}g}"
    return str(v)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.environ.get("BUILD_DIR", "build/release"),
                   help="CMake build dir holding experiments/bench_layers (relative to the repo root)")
    p.add_argument("--repetitions", type=int, default=5, help="processes per setting (>= 1)")
    p.add_argument("--min-time", type=float, default=1.0, help="seconds timed per process (> 0)")
    p.add_argument("--cases", default=",".join(CASES), help="comma list of " + ", ".join(CASES))
    p.add_argument("--modes", default=",".join(MODES), help="comma list of fwd, fwdbwd")
    p.add_argument("--threads", default=None, help="comma list of thread budgets (default 1,cores)")
    p.add_argument("--out", default="results/bench/compare_pytorch.csv")
    p.add_argument("--torch-python", default=sys.executable,
                   help="interpreter that runs the PyTorch workers (Debian's /usr/bin/python3)")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch (seqlab half only)")
    p.add_argument("--also", action="append", default=[], metavar="LABEL=BINARY",
                   help="another bench_layers binary to run as implementation LABEL")
    p.add_argument("--prune", type=float, default=3.0,
                   help="after the first repetition, drop PyTorch settings slower than FACTOR x the "
                        "fastest PyTorch setting of the same case, mode and budget (0: keep all)")
    p.add_argument("--quiet", action="store_true")
    # worker mode (internal)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--case", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    p.add_argument("--intra", type=int, default=1, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def fail_arg(key, value, allowed):
    print(f"compare_pytorch: {key} = {value!r} is not allowed; allowed: {allowed}", file=sys.stderr)
    sys.exit(2)


def main(argv):
    args = parse_args(argv)
    if args.worker:
        return torch_worker(args)

    cases = [c for c in args.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            fail_arg("--cases", c, ", ".join(CASES))
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            fail_arg("--modes", m, "fwd, fwdbwd")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if args.threads is None:
        budgets = [1] if cores <= 1 else [1, cores]
    else:
        try:
            budgets = [int(t) for t in args.threads.split(",") if t]
        except ValueError:
            fail_arg("--threads", args.threads, "comma list of integers >= 1")
        if not budgets or min(budgets) < 1 or len(set(budgets)) != len(budgets):
            fail_arg("--threads", args.threads, "comma list of distinct integers >= 1")
    if args.repetitions < 1:
        fail_arg("--repetitions", args.repetitions, "integer >= 1")
    if not (args.min_time > 0 and math.isfinite(args.min_time)):
        fail_arg("--min-time", args.min_time, "finite seconds > 0")
    if not args.prune >= 0:
        fail_arg("--prune", args.prune, "factor >= 0 (0 keeps every setting)")

    build_dir = args.build_dir if os.path.isabs(args.build_dir) else os.path.join(ROOT, args.build_dir)
    binaries = [("seqlab", os.path.join(build_dir, "experiments", "bench_layers"))]
    for a in args.also:
        label, sep, path = a.partition("=")
        if not sep or not path:
            fail_arg("--also", a, "LABEL=PATH_TO_bench_layers")
        if (not re.fullmatch(r"[A-Za-z0-9_.-]+", label) or label in ("seqlab", "pytorch")
                or label in (b[0] for b in binaries)):
            fail_arg("--also", a, "a LABEL of letters, digits, _ . - other than seqlab, pytorch "
                                  "and the other --also labels")
        binaries.append((label, os.path.abspath(path)))
    for label, path in binaries:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            if label == "seqlab":
                print(f"compare_pytorch: --build-dir = {args.build_dir!r}: {path} not found; build it with\n"
                      f"  cmake --build {build_dir} --target bench_layers", file=sys.stderr)
                return 2
            fail_arg("--also", f"{label}={path}", "the path of an executable bench_layers file")
    # Every case this run needs, in every binary, before anything runs: a binary that is not
    # bench_layers, or a thread budget bench_layers has no cases for, is a bad argument.
    for label, path in binaries:
        listed = listed_benchmarks(path)
        key, value = ("--build-dir", args.build_dir) if label == "seqlab" else ("--also", f"{label}={path}")
        if listed is None:
            fail_arg(key, value, "a bench_layers binary (this one lists no Google Benchmark cases)")
        for t in budgets:
            needed = [sgemm_name(t)] + [bench_name(c, m, t) for c in cases for m in modes]
            if any(n not in listed for n in needed):
                have = sorted({int(m.group(1)) for m in (re.search(r"/nthreads:(\d+)/", n) for n in listed) if m})
                if sgemm_name(t) not in listed and have:
                    fail_arg("--threads", t, f"a budget {label}'s bench_layers has cases for: "
                                             + ", ".join(map(str, have)))
                missing = next(n for n in needed if n not in listed)
                fail_arg(key, value, f"a bench_layers binary with the case {missing}")
    out_path = args.out if os.path.isabs(args.out) else os.path.join(ROOT, args.out)
    # The output path, before anything runs: a directory we can create and write into, a file name.
    try:
        if os.path.isdir(out_path) or out_path.endswith(os.sep) or not os.path.basename(out_path):
            raise OSError("it names a directory")
        os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
        with open(out_path + ".tmp", "w"):
            pass
        os.remove(out_path + ".tmp")
    except (NotADirectoryError, FileExistsError):
        fail_arg("--out", args.out, "a writable file path (a parent of it is a file, not a directory)")
    except OSError as e:
        fail_arg("--out", args.out, f"a writable file path ({getattr(e, 'strerror', None) or e})")

    tv = None if args.no_torch else torch_version(args.torch_python)
    have_torch = tv is not None
    log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    if not have_torch:
        log("compare_pytorch: torch is absent (or --no-torch): writing the seqlab half only")

    # Every setting: (case, mode, threads, impl, setting label, runner).
    settings = []
    for case in cases:
        for mode in modes:
            for t in budgets:
                for label, path in binaries:
                    name = bench_name(case, mode, t)
                    settings.append((case, mode, t, label, f"blas={t}",
                                     lambda rep, path=path, name=name, t=t:
                                     run_seqlab_paired(path, name, t, args.min_time, rep % 2 == 0,
                                                       binaries[0][1])))
                if have_torch:
                    for intra, blas in torch_settings(t):
                        def run(rep, case=case, mode=mode, intra=intra, blas=blas):
                            r, rss = run_torch(args.torch_python, case, mode, intra, blas, args.min_time)
                            return r["ms"], rss, r["baseline_rss_bytes"], r["cpu_ms"]
                        settings.append((case, mode, t, "pytorch", f"intra={intra} blas={blas}", run))
    for t in budgets:
        for label, path in binaries:
            name = sgemm_name(t)
            settings.append(("sgemm_1024", "fwd", t, label, f"blas={t}",
                             lambda rep, path=path, name=name: run_seqlab(path, name, args.min_time)))

    samples = {}   # key -> list of ms
    paired_sgemm = {}  # key -> the adjacent SGEMM's ms per call, one per sample (seqlab layer rows)
    cpu_samples = {}  # key -> list of CPU ms per iteration
    rss = {}       # key -> max peak rss
    base = {}      # key -> baseline rss (torch: reported by the worker)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_start = os.getloadavg()
    t0 = time.time()
    # Baselines of the seqlab binaries: a process that registers the cases and runs none.
    seqlab_base = {label: statistics.median(seqlab_baseline(path) for _ in range(3))
                   for label, path in binaries}

    def write_out(final):
        """Writes the CSV from the samples so far (after every repetition: a killed run keeps them)."""
        for key in samples:  # seqlab baselines (PyTorch's come from its workers)
            if key[3] in seqlab_base:
                base[key] = seqlab_base[key[3]]
        load_end = os.getloadavg()
        reps_done = max((len(v) for v in samples.values()), default=0)
        med = {k: statistics.median(v) for k, v in samples.items()}
        sgemm = {}
        for (case, mode, t, impl, setting), m in med.items():
            if case == "sgemm_1024" and impl == "seqlab":
                sgemm[t] = 2.0 * SGEMM_N ** 3 / (m * 1e-3) / 1e9
        cpu_med = {k: statistics.median(v) for k, v in cpu_samples.items()}
        best_torch = {}
        for (case, mode, t, impl, setting), m in med.items():
            if impl == "pytorch":
                kk = (case, mode, t)
                if kk not in best_torch or m < best_torch[kk][0]:
                    best_torch[kk] = (m, setting)

        rows = []
        for key in samples:
            case, mode, t, impl, setting = key
            v = samples[key]
            m = med[key]
            if case == "sgemm_1024":
                flops, shape = 2.0 * SGEMM_N ** 3, dict(B="", T="", D="")
            else:
                flops, shape = case_flops(case, mode), CASES[case]
            gf = flops / (m * 1e-3) / 1e9
            bt = best_torch.get((case, mode, t))
            is_seqlab = impl != "pytorch" and case != "sgemm_1024"
            ratio = m / bt[0] if (bt and is_seqlab) else None
            bt_key = (case, mode, t, "pytorch", bt[1]) if bt else None
            cpu_ratio = (cpu_med[key] / cpu_med[bt_key]) if (bt and is_seqlab and t == 1) else None
            tr = TARGET_RATIO.get(case) if (mode == "fwdbwd" and is_seqlab) else None
            tf = TARGET_SGEMM_FRACTION.get(case) if (mode == "fwdbwd" and is_seqlab) else None
            frac = gf / sgemm[t] if t in sgemm else None
            # Paired: each sample's rate over the rate of the SGEMM process run next to it, then
            # the median over samples (the machine's regime at that moment cancels).
            pf = [(flops / (ms * 1e-3)) / (2.0 * SGEMM_N ** 3 / (sg * 1e-3))
                  for ms, sg in zip(v, paired_sgemm.get(key, []))]
            pfrac = statistics.median(pf) if pf else None
            judged = pfrac if pfrac is not None else frac
            meets, meets_unpaired = "", ""
            if tr is not None and ratio is not None:
                verdict = lambda f: "yes" if ratio <= tr and (tf is None or (f is not None and f >= tf)) else "no"
                meets, meets_unpaired = verdict(judged), verdict(frac)
            b = base.get(key)
            rows.append({
                "case": case, "mode": mode, "threads": t, "impl": impl, "setting": setting,
                "batch": shape["B"], "seq_len": shape["T"], "d_model": shape["D"],
                "repetitions": len(v), "median_ms": m, "min_ms": min(v), "max_ms": max(v),
                "gflop_per_s": gf, "sgemm_gflop_per_s": sgemm.get(t), "fraction_of_sgemm": frac,
                "fraction_of_sgemm_paired": pfrac, "fraction_of_sgemm_paired_min": min(pf) if pf else None,
                "fraction_of_sgemm_paired_max": max(pf) if pf else None,
                "pytorch_best_setting": bt[1] if (bt and is_seqlab) else "",
                "ratio_seqlab_over_pytorch": ratio,
                "cpu_ms_median": cpu_med[key] if t == 1 else None, "cpu_ratio_seqlab_over_pytorch": cpu_ratio,
                "peak_rss_bytes": rss[key],
                "baseline_rss_bytes": b, "step_rss_bytes": (rss[key] - b) if b is not None else None,
                "target_ratio_max": tr, "target_sgemm_fraction_min": tf, "meets_target": meets,
                "meets_target_unpaired": meets_unpaired,
            })

        meta = {
            "experiment": "compare_pytorch", "utc_start": started,
            "utc_end": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": socket.gethostname(), "cpu": cpu_model(), "cores": cores,
            "loadavg_start": "/".join(f"{x:.1f}" for x in load_start),
            "loadavg_end": "/".join(f"{x:.1f}" for x in load_end),
            "torch_version": tv if have_torch else "absent",
            "torch_python": args.torch_python if have_torch else "",
            "repetitions": args.repetitions, "repetitions_done": reps_done,
            "complete": "yes" if final else "no (the run stopped or is still running after repetitions_done)",
            "min_time_s": args.min_time, "prune_factor": args.prune,
            "binaries": " ".join(f"{l}={p}" for l, p in binaries),
            "sgemm_reference": f"seqlab SGEMM_square {SGEMM_N}^3 at the same threads in the same run",
            "sgemm_fraction_target": "judged on fraction_of_sgemm_paired (median over samples of the "
                                     "layer's rate over the rate of the SGEMM process next to it)",
            "flops": "analytic GEMM FLOPs as bench_layers (fwdbwd = 3 x fwd)",
        }
        tmp = out_path + ".tmp"
        try:
            os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
            with open(tmp, "w") as f:
                f.write("# meta: " + "; ".join(f"{k}={str(v).replace(',', ' ')}" for k, v in meta.items()) + "\n")
                f.write(",".join(COLUMNS) + "\n")
                for r in rows:
                    f.write(",".join(fmt(r[c]) if isinstance(r[c], float) else ("" if r[c] is None else str(r[c]))
                                     for c in COLUMNS) + "\n")
            os.replace(tmp, out_path)
        except OSError as e:
            if os.path.exists(tmp):
                os.remove(tmp)
            print(f"compare_pytorch: cannot write {out_path}: {e}", file=sys.stderr)
            raise SystemExit(1)
        log(f"compare_pytorch: wrote {out_path}")
        if final:
            print(summary_table(rows, have_torch))

    for rep in range(args.repetitions):
        if rep == 1 and args.prune > 0:
            settings = [s for s in settings if not pruned(s, samples, args.prune)]
        k = len(settings)
        order = settings[rep % k:] + settings[:rep % k] if rep else settings  # rotate: no fixed position
        for (case, mode, t, impl, setting, runner) in order:
            key = (case, mode, t, impl, setting)
            try:
                res = runner(rep)
            except (RuntimeError, ValueError, KeyError, json.JSONDecodeError) as e:
                print(f"compare_pytorch: {case} {mode} threads={t} {impl} {setting}: {e}", file=sys.stderr)
                return 1
            ms, peak = res[0], res[1]
            samples.setdefault(key, []).append(ms)
            cpu_samples.setdefault(key, []).append(res[3])
            if len(res) > 4:
                paired_sgemm.setdefault(key, []).append(res[4])
            rss[key] = max(rss.get(key, 0), peak)
            if res[2] is not None:
                base[key] = res[2]
            log(f"[rep {rep + 1}/{args.repetitions} {time.time() - t0:6.0f} s] {case} {mode} "
                f"threads={t} {impl} {setting}: {ms:.2f} ms, peak RSS {peak / 2**20:.0f} MiB")
        if rep + 1 < args.repetitions:
            write_out(False)
    write_out(True)
    return 0




def summary_table(rows, have_torch):
    """Markdown table: every seqlab-like impl row of a layer case, beside PyTorch's best."""
    torch_rows = {}
    for r in rows:
        if r["impl"] == "pytorch":
            k = (r["case"], r["mode"], r["threads"])
            if k not in torch_rows or r["median_ms"] < torch_rows[k]["median_ms"]:
                torch_rows[k] = r
    lines = ["| case | mode | threads | impl | median ms (min-max) | PyTorch best ms (setting) | "
             "ratio | CPU-time ratio | GFLOP/s | of SGEMM | of SGEMM, paired (min-max) | PyTorch of SGEMM | "
             "step RSS MiB (PyTorch) | target |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["impl"] == "pytorch" or r["case"] == "sgemm_1024":
            continue
        tb = torch_rows.get((r["case"], r["mode"], r["threads"]))
        tgt = ""
        if r["target_ratio_max"] is not None:
            tgt = f"<= {r['target_ratio_max']}"
            if r["target_sgemm_fraction_min"] is not None:
                tgt += f", >= {r['target_sgemm_fraction_min']:.0%} SGEMM"
            tgt += f": {r['meets_target'] or 'n/a'}"
            if r["meets_target_unpaired"] and r["meets_target_unpaired"] != r["meets_target"]:
                tgt += f" (unpaired: {r['meets_target_unpaired']})"
        mib = lambda v: "" if v is None else f"{v / 2**20:.0f}"
        lines.append(
            f"| {r['case']} | {r['mode']} | {r['threads']} | {r['impl']} | "
            f"{r['median_ms']:.1f} ({r['min_ms']:.1f}-{r['max_ms']:.1f}) | "
            + (f"{tb['median_ms']:.1f} ({tb['setting']}) | {r['ratio_seqlab_over_pytorch']:.2f} | "
               if tb else "n/a | n/a | ")
            + (f"{r['cpu_ratio_seqlab_over_pytorch']:.2f}" if r["cpu_ratio_seqlab_over_pytorch"] is not None
               else "") + " | "
            + f"{r['gflop_per_s']:.1f} | "
            + (f"{r['fraction_of_sgemm']:.0%}" if r["fraction_of_sgemm"] is not None else "") + " | "
            + (f"{r['fraction_of_sgemm_paired']:.0%} ({r['fraction_of_sgemm_paired_min']:.0%}-"
               f"{r['fraction_of_sgemm_paired_max']:.0%})" if r["fraction_of_sgemm_paired"] is not None
               else "") + " | "
            + (f"{tb['fraction_of_sgemm']:.0%}" if tb and tb["fraction_of_sgemm"] is not None else "")
            + f" | {mib(r['step_rss_bytes'])} ({mib(tb['step_rss_bytes']) if tb else 'n/a'}) | {tgt} |")
    sg = [r for r in rows if r["case"] == "sgemm_1024" and r["impl"] == "seqlab"]
    for r in sg:
        lines.append(f"\nSGEMM 1024^3 at {r['threads']} thread(s): {r['gflop_per_s']:.1f} GFLOP/s "
                     f"(median of {r['repetitions']}).")
    if not have_torch:
        lines.append("\nPyTorch: absent (seqlab half only).")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
