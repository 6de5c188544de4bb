#!/usr/bin/python3
"""Wall-clock estimate of a parallel_speedup scale on an idle machine, from its config alone.

usage: estimate_cost.py [CONFIG.ini] [--rates FILE.json]   (default: configs/standard.ini)

The experiment runs its cells one at a time (run_all.sh's SERIAL list), so the estimate is the sum
over cells. Per timed case (one pass of one stack at one point and thread count), from the Google
Benchmark settings (timing.hpp: round 0 estimates the iteration count with min_time_s, the other
rounds reuse it; one untimed warm-up call per case):
    cost = repetitions · max(1.4 · min_time_s, t) + min_time_s + t
where t is the case's time per iteration = analytic FLOPs (stack.hpp's formulas) / a rate
(GFLOP/s per family at 1 thread, RATES below, from CPU time per iteration of pilot cases on the
2-core development VM), divided by the speedup at N threads (SPEEDUP). Each point of an attention
family also runs 2 untimed forwards per kernel of memory_kernels (the heap-growth measurement), the
others 2; each scaling cell first times its SGEMM reference at SGEMM_RATE. The time-to-accuracy
cells train at most
    |tta_lrs| · tta_pilot_steps + tta_seeds · tta_max_steps
updates (fewer when runs reach the target early) at UPDATE_S_PER_TOKEN_PARAM · tta_batch ·
tta_seq_len · parameters seconds per update (a 1-thread CPU-time pilot), plus the validation
evaluations (a forward over tta_eval_tokens every tta_eval_every updates, a third of an update's
cost per tta_batch · tta_seq_len tokens).
Prints one line per part and the total in minutes. An estimate, not a measurement: compare with
the merged meta.json's cells_wall_time_s (and each cell's wall_time_s) after the run. The pilot
measurements behind the constants are not recorded in the repository; README.md beside this file,
"Cost" (under "Standard scale"), lists each constant with what is known of it.
"""
import configparser
import json
import math
import sys

# GFLOP/s at 1 thread (forward+backward GEMM work), from CPU-time pilots on the 2-core development
# VM (48-65 GFLOP/s measured at batch 8 and 32; rounded down).
RATES = {"self_attention": 55.0, "transformer_encoder": 55.0, "transformer_decoder": 55.0,
         "rnn": 50.0, "lstm": 50.0, "gru": 50.0, "tcn": 48.0}
# Batch 1 recurrent steps are GEMVs (weight-bandwidth bound): a lower rate (12.5 measured).
RATES_B1 = {"rnn": 12.0, "lstm": 12.0, "gru": 12.0}
SPEEDUP = 1.5             # assumed speedup at 2+ threads (for the estimate only)
SGEMM_RATE = 80e9         # assumed SGEMM rate at 1 thread, FLOP/s (the roofline reference cases)
DECODE_STEP_S = 2e-4      # assumed decode step at batch 1 (d_model 256): cost is min_time-bound
# Seconds per training update per (token of the batch × parameter), 1 thread, from a CPU-time pilot
# at the standard shape, plus a fixed overhead per update (tta_threads is not modelled).
UPDATE_S_PER_TOKEN_PARAM = {"transformer_decoder": 1.5e-10, "lstm": 1.0e-10, "gru": 1.0e-10, "rnn": 1.0e-10,
                            "tcn": 1.5e-10}
UPDATE_OVERHEAD_S = 1e-3
KJV_VOCAB = 64


def ints(s):
    return [int(v) for v in s.split()]


def levels(n, k):
    lv = 1
    while 1 + 2 * (k - 1) * ((1 << lv) - 1) < n:
        lv += 1
    return lv


def fwd_flops(model, B, n, D, F, k, L=1):
    if model == "self_attention":
        return L * (8 * B * n * D * D + 4 * B * n * n * D)
    if model.startswith("transformer"):
        return L * (8 * B * n * D * D + 4 * B * n * n * D + 4 * B * n * D * F)
    if model in ("rnn", "lstm", "gru"):
        g = {"rnn": 1, "gru": 3, "lstm": 4}[model]
        return L * 2 * B * n * g * D * (2 * D)
    return levels(n, k) * 2 * B * n * D * k * (2 * D)  # tcn at width D


def rate(model, B):
    return (RATES_B1.get(model, RATES[model]) if B == 1 else RATES[model]) * 1e9


def case_cost(t, reps, min_time):
    return reps * max(1.4 * min_time, t) + min_time + t


def is_attention(m):
    return m in ("self_attention", "transformer_encoder", "transformer_decoder")


def crossover_points(c, model):
    """(d, n) points of a crossover cell (main.cpp's rule)."""
    ds, ns = ints(c["crossover_d_models"]), ints(c["crossover_seq_lens"])
    lo, hi, hi_tcn = (float(c["crossover_ratio_min"]), float(c["crossover_ratio_max"]),
                      float(c["crossover_tcn_ratio_max"]))
    cap = float(c["crossover_max_gflop"]) * 1e9
    k = int(c["kernel_size"])
    pts = []
    for d in ds:
        top = max(hi, hi_tcn) if is_attention(model) or model == "tcn" else hi
        for n in ns:
            if d * lo <= n <= d * top and 3 * fwd_flops(model, int(c["crossover_batch"]), n, d, 4 * d, k) <= cap:
                pts.append((d, n))
    return pts


def main(argv):
    path = next((a for a in argv[1:] if not a.startswith("--")), "experiments/parallel_speedup/configs/standard.ini")
    cp = configparser.ConfigParser(inline_comment_prefixes=("#",))
    with open(path) as f:
        cp.read_string("[c]\n" + f.read())
    c = cp["c"]
    reps, mt = int(c["repetitions"]), float(c["min_time_s"])
    D, F, k, L = int(c["d_model"]), int(c["d_ff"]), int(c["kernel_size"]), int(c["num_layers"])
    kernels = len(c["memory_kernels"].split())
    units = [u.strip().split(":") for u in c["unit"].split(",")]
    parts = {}
    for part, model in units:
        cost = 0.0
        if part == "scaling":
            B, threads = int(c["scaling_batch"]), ints(c["thread_counts"])
            sg = 2 * int(c["sgemm_size"]) ** 3 / SGEMM_RATE
            cost += sum(case_cost(sg / (1 if th == 1 else SPEEDUP), reps, mt) for th in threads)
            for n in ints(c["scaling_seq_lens"]):
                f = fwd_flops(model, B, n, D, F, k, L)
                for mult in (1, 3):
                    for th in threads:
                        cost += case_cost(mult * f / rate(model, B) / (1 if th == 1 else SPEEDUP), reps, mt)
                cost += 2 * (kernels if is_attention(model) else 1) * f / rate(model, B)
        elif part == "crossover":
            B = int(c["crossover_batch"])
            for d, n in crossover_points(c, model):
                f = fwd_flops(model, B, n, d, 4 * d, k)
                cost += case_cost(3 * f / rate(model, B), reps, mt)
                cost += 2 * (kernels if is_attention(model) else 1) * f / rate(model, B)
        elif part == "generation":
            for n in ints(c["generation_prefixes"]):
                f = fwd_flops(model, 1, n, D, F, k, L)
                cost += case_cost(DECODE_STEP_S, reps, mt) + n * DECODE_STEP_S  # decode step, cache build
                cost += case_cost(f / rate(model, 1), reps, mt)                   # prefix forward
        elif part == "tta":
            lrs, seeds = len(c["tta_lrs"].split()), int(c["tta_seeds"])
            Dt, Lt, Ft, V = int(c["tta_d_model"]), int(c["tta_num_layers"]), int(c["tta_d_ff"]), KJV_VOCAB
            params = Lt * (4 * Dt * Dt + 2 * Dt * Ft) + 2 * V * Dt  # the Transformer's; the others match it
            update_s = UPDATE_S_PER_TOKEN_PARAM[model] * int(c["tta_batch"]) * int(c["tta_seq_len"]) * params \
                + UPDATE_OVERHEAD_S
            updates = lrs * int(c["tta_pilot_steps"]) + seeds * int(c["tta_max_steps"])
            evals = seeds * int(c["tta_max_steps"]) / int(c["tta_eval_every"]) + lrs
            eval_frac = int(c["tta_eval_tokens"]) / (int(c["tta_batch"]) * int(c["tta_seq_len"])) / 3
            cost += (updates + evals * eval_frac) * update_s
        parts.setdefault(part, []).append((model, cost))
    total = 0.0
    for part, cells in parts.items():
        s = sum(x for _, x in cells)
        total += s
        print(f"{part:10s} {s / 60:6.1f} min  (" + ", ".join(f"{m} {x / 60:.1f}" for m, x in cells) + ")")
    print(f"{'total':10s} {total / 60:6.1f} min over {len(units)} cells, run one at a time")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
