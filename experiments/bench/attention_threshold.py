#!/usr/bin/python3
"""The attention kernels side by side, from bench_layers' AttnKernel_* cases (README.md beside
this file, "Choosing the attention kernel").

Reads a Google Benchmark JSON written by bench_layers (run with --attention_sweep; with
--benchmark_repetitions the medians are used) and prints, for every (pass, d_model, n_heads,
causal, nthreads), the two kernels' times per seq_len, their ratio fused / materialised, and the
shortest seq_len from which the fused kernel is at least as fast at that and every longer length
(the crossover). Then the largest crossover over the groups of each (causal, nthreads): the value
for nn/attention.hpp's kFusedAttentionMinSeqLenCausal (causal 1) or kFusedAttentionMinSeqLen
(causal 0) if `auto` should never pick the slower kernel at these shapes; and for the paper cell the fused kernel's FLOP rate as a fraction of SGEMM_square's
(same nthreads, same run).

Usage: experiments/bench/attention_threshold.py results/bench/attention_kernel/bench_layers.json
"""
import json
import sys
from collections import defaultdict


def runs(path):
    """{run_name: {"time_ms": ..., "flop_per_s": ...}}, medians when the file has aggregates."""
    with open(path) as f:
        data = json.load(f)
    out, has_median = {}, any(b.get("aggregate_name") == "median" for b in data["benchmarks"])
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            continue
        if has_median and b.get("aggregate_name") != "median":
            continue
        if not has_median and b.get("run_type") == "aggregate":
            continue
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
        out[b["run_name"]] = {"time_ms": b["real_time"] * scale, "flop_per_s": b.get("flop_per_s")}
    return out


def parse(name):
    """'AttnKernel_fused_fwdbwd/batch:32/...' -> ('fused', 'fwdbwd', {'batch': 32, ...})."""
    head, *args = name.split("/")
    _, kernel, pass_ = head.split("_")
    return kernel, pass_, {k: int(v) for k, v in (a.split(":") for a in args if ":" in a)}


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    all_runs = runs(argv[1])
    groups = defaultdict(dict)  # (pass, d_model, n_heads, causal, nthreads) -> {seq_len: {kernel: run}}
    for name, r in all_runs.items():
        if not name.startswith("AttnKernel_"):
            continue
        kernel, pass_, a = parse(name)
        key = (pass_, a["d_model"], a["n_heads"], a["causal"], a["nthreads"])
        groups[key].setdefault(a["seq_len"], {})[kernel] = dict(r, batch=a["batch"])
    if not groups:
        print("no AttnKernel_* cases in " + argv[1], file=sys.stderr)
        return 2
    worst = defaultdict(int)  # (causal, nthreads) -> largest crossover seq_len
    print("pass    d_model n_heads causal nthreads  seq_len batch  fused_ms  mat_ms  ratio")
    for key in sorted(groups):
        lens = sorted(t for t, k in groups[key].items() if {"fused", "materialised"} <= k.keys())
        crossover = None
        for T in reversed(lens):  # the shortest T with fused <= materialised here and beyond
            k = groups[key][T]
            if k["fused"]["time_ms"] > k["materialised"]["time_ms"]:
                break
            crossover = T
        for T in lens:
            k = groups[key][T]
            f, m = k["fused"]["time_ms"], k["materialised"]["time_ms"]
            print("%-7s %7d %7d %6d %8d %8d %5d %9.3f %7.3f %6.2f" % (key + (T, k["fused"]["batch"], f, m, f / m)))
        if len(lens) > 1:  # the sweep, not the single paper cell
            print("  crossover: %s" % ("none (fused slower at the longest length)" if crossover is None else crossover))
            worst[key[3:5]] = max(worst[key[3:5]], crossover if crossover is not None else 10**9)
    for (causal, n), T in sorted(worst.items()):
        print("causal %d, nthreads %d: largest crossover %s" % (causal, n, "none" if T == 10**9 else T))
    for name, r in sorted(all_runs.items()):
        if not name.startswith("AttnKernel_fused") or r.get("flop_per_s") is None:
            continue
        kernel, pass_, a = parse(name)
        ref = [v for n, v in all_runs.items()
               if n.startswith("SGEMM_square/") and n.split("/")[-2] == "nthreads:%d" % a["nthreads"]]
        if a["seq_len"] == 1020 and ref and ref[0].get("flop_per_s"):
            print("%s: %.1f GFLOP/s = %.0f %% of SGEMM_square" % (
                name, r["flop_per_s"] / 1e9, 100.0 * r["flop_per_s"] / ref[0]["flop_per_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
