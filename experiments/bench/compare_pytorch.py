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
the layer with the machine as it was when the layer ran; the target on the SGEMM fraction (encoder
layer >= 80 %) is judged on it (meets_target), and on the unpaired one in meets_target_unpaired.
The meta line's complete=yes marks a finished run (the CSV is rewritten after every repetition, so
a killed run keeps its samples).

Shapes: Transformer encoder layer, pre-norm LayerNorm, B 32, T 128, d_model 256,
n_heads 8, d_ff 1024, relu, dropout 0; LSTM, GRU and RNN (tanh), B 32, T 128, input = hidden = 256,
one layer; multi-head self-attention alone, B 8, T 512, d_model 256, n_heads 8. Modes: fwd (the
forward of a training step: caches kept, autograd on) and fwdbwd (forward then backward of a sum
loss; seqlab's benchmark feeds a fixed random dy, which costs the same as PyTorch's ones).

Thread budgets: 1 and all cores. seqlab has one knob (nthreads: OpenBLAS threads and, between
GEMMs, its own parallel loops).
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

--cells: the experiments' own training cells instead of the layers. seqlab's side is bench_cells
(experiments/bench/bench_cells.cpp, one case Cell_<cell> per cell and thread budget; one iteration
= one training update: zero the gradients, forward, cross-entropy, backward, clipping to norm 1,
Adam/AdamW step, with the model from the model factory at the experiment's paper size), PyTorch's
the model of the same shapes and parameter count written below (torch_cell_model: nn.RNN / LSTM /
GRU with the same embedding and head, Bai et al.'s TemporalConvNet with weight norm, a pre-norm
decoder-only Transformer with RoPE or sinusoidal positions), trained the same way. Both report the
parameter count; a count that differs from CELLS is a failed run (exit 1). Cells: long_range_recall's
paper copy-memory cells at length 1000 (seq_len 1020, batch 32, ~16K parameters) for rnn, lstm, gru,
tcn and transformer_decoder; position_extrapolation's copy / rope cell (decoder d_model 128, 4 layers,
batch 32, rows of 48-64 tokens padded to 64); attention_ablations' mqar:decoder:separate:8 cell
(decoder d_model 64, 4 layers, 8 heads, seq_len 32, batch 64). Each (cell, budget) runs as a group,
seqlab and PyTorch back to back (which goes first alternates), so every repetition gives a pair;
the targets are judged on the median of the pairs' ratios. Also peak RSS per process (wait4).
Default output results/bench/compare_pytorch_cells.csv; --modes is not used.
Usage: experiments/bench/compare_pytorch.py --cells [--build-dir build/release] [--repetitions 5]
       [--min-time 1.0] [--cases long_range_recall_tcn,...] [--threads 1,2] [--out FILE]
       [--also LABEL=BENCH_CELLS_BINARY ...]
"""
import argparse
import ctypes
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

# Targets (forward+backward, against PyTorch's fastest setting at the same budget; README.md).
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


# --- the experiments' training cells (--cells) ----------------------------------------------------
# cell -> the model and batch of bench_cells's case Cell_<cell> (experiments/bench/bench_cells.cpp,
# from each experiment's configs/paper.ini and main.cpp) and its parameter count, which both sides
# must reproduce. V vocabulary (= classes), E embedding_dim, H hidden_size, C TCN channels, L
# layers or TCN levels, k kernel_size, D d_model, h n_heads, F d_ff, B batch, T seq_len.
CELLS = {
    "long_range_recall_rnn": dict(kind="rnn", V=10, E=8, H=116, B=32, T=1020, params=15866),
    "long_range_recall_lstm": dict(kind="lstm", V=10, E=8, H=57, B=32, T=1020, params=15936),
    "long_range_recall_gru": dict(kind="gru", V=10, E=8, H=66, B=32, T=1020, params=15798),
    "long_range_recall_tcn": dict(kind="tcn", V=10, E=8, C=11, L=7, k=8, B=32, T=1020, params=13895),
    "long_range_recall_transformer_decoder": dict(kind="decoder", V=10, D=28, L=2, h=2, F=56, pe="rope",
                                                  B=32, T=1020, params=13786),
    "position_extrapolation_copy_rope": dict(kind="decoder", V=18, D=128, L=4, h=4, F=512, pe="rope",
                                             B=32, T=64, min_len=48, optimizer="adamw",
                                             weight_decay=0.01, params=797970),
    "attention_ablations_mqar_decoder_separate_8": dict(kind="decoder", V=65, D=64, L=4, h=8, F=256,
                                                        pe="sinusoidal", B=64, T=32, params=208449),
}
CELL_LR, CELL_CLIP_NORM = 1e-3, 1.0  # every cell (paper.ini: lr 0.001, clip_norm 1)

# Targets (per-update time, median of the paired ratios seqlab / PyTorch's fastest
# setting at the same budget; the Transformer cell also on peak RSS, seqlab / PyTorch).
TARGET_CELL_RATIO = {"long_range_recall_rnn": 0.35, "long_range_recall_lstm": 0.35,
                     "long_range_recall_gru": 0.35, "long_range_recall_tcn": 0.6,
                     "long_range_recall_transformer_decoder": 0.15,
                     "position_extrapolation_copy_rope": 0.5,
                     "attention_ablations_mqar_decoder_separate_8": 0.5}
TARGET_CELL_RSS_RATIO = {"long_range_recall_transformer_decoder": 0.2}

CELL_COLUMNS = ["cell", "threads", "impl", "setting", "batch", "seq_len", "n_params", "repetitions",
                "median_ms", "min_ms", "max_ms", "cpu_ms_median", "pytorch_best_setting",
                "ratio_seqlab_over_pytorch", "ratio_paired_median", "ratio_paired_min",
                "ratio_paired_max", "pairs", "cpu_ratio_seqlab_over_pytorch", "peak_rss_bytes",
                "baseline_rss_bytes", "step_rss_bytes", "peak_rss_ratio_seqlab_over_pytorch",
                "target_ratio_max", "target_peak_rss_ratio_max", "meets_target"]


def cell_bench_name(cell, threads):
    return f"Cell_{cell}/nthreads:{threads}/real_time"


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

    print(json.dumps(dict(time_steps(step, args.min_time), baseline_rss_bytes=baseline)))
    return 0


def torch_cell_model(c):
    """The PyTorch model of a cell: embedding -> body -> linear head, logits [B, T, V].
    rnn/lstm/gru: nn.RNN (tanh) / nn.LSTM / nn.GRU, one layer, batch_first.
    tcn: Bai, Kolter & Koltun's TemporalConvNet (locuslab/TCN, TCN/tcn.py: weight-normalised
    conv1/conv2 padded by (k-1)d and chomped, ReLU, dropout 0, 1x1 downsample when the widths
    differ, ReLU of the residual sum), on [B, E, T].
    decoder: a GPT block stack as seqlab's transformer_decoder (pre-norm LayerNorm, in-projection
    Linear(D, 3D) and out-projection with biases, causal softmax attention with a key-padding
    mask, ReLU feed-forward, final LayerNorm): RoPE on q and k (interleaved pairs, base 10000)
    or sinusoidal positions added to the embedding."""
    import math
    import torch
    nn = torch.nn
    V, kind = c["V"], c["kind"]

    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, c["E"])
            cls = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}[kind]
            self.body = cls(c["E"], c["H"], num_layers=1, batch_first=True)
            self.head = nn.Linear(c["H"], V)

        def forward(self, x, padding=None):
            return self.head(self.body(self.embedding(x))[0])

    class Chomp1d(nn.Module):
        def __init__(self, chomp):
            super().__init__()
            self.chomp = chomp

        def forward(self, x):
            return x[:, :, :-self.chomp].contiguous()

    class TemporalBlock(nn.Module):
        def __init__(self, n_in, n_out, k, d):
            super().__init__()
            wn, pad = nn.utils.weight_norm, (k - 1) * d
            self.net = nn.Sequential(
                wn(nn.Conv1d(n_in, n_out, k, padding=pad, dilation=d)), Chomp1d(pad), nn.ReLU(),
                nn.Dropout(0.0),
                wn(nn.Conv1d(n_out, n_out, k, padding=pad, dilation=d)), Chomp1d(pad), nn.ReLU(),
                nn.Dropout(0.0))
            self.downsample = nn.Conv1d(n_in, n_out, 1) if n_in != n_out else None
            self.relu = nn.ReLU()

        def forward(self, x):
            res = x if self.downsample is None else self.downsample(x)
            return self.relu(self.net(x) + res)

    class TCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, c["E"])
            widths = [c["E"]] + [c["C"]] * c["L"]
            self.network = nn.Sequential(*[TemporalBlock(widths[i], widths[i + 1], c["k"], 2 ** i)
                                           for i in range(c["L"])])
            self.head = nn.Linear(c["C"], V)

        def forward(self, x, padding=None):
            h = self.network(self.embedding(x).transpose(1, 2))
            return self.head(h.transpose(1, 2))

    D, h, T = c.get("D", 0), c.get("h", 1), c["T"]
    hd = D // h

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.in_proj = nn.Linear(D, 3 * D)
            self.out_proj = nn.Linear(D, D)
            self.linear1, self.linear2 = nn.Linear(D, c["F"]), nn.Linear(c["F"], D)

        def forward(self, x, mask, rope):
            B = x.shape[0]
            q, k, v = self.in_proj(self.norm1(x)).view(B, T, 3, h, hd).permute(2, 0, 3, 1, 4)
            if rope is not None:
                q, k = rope(q), rope(k)
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
            p = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
            x = x + self.out_proj((p @ v).transpose(1, 2).reshape(B, T, D))
            return x + self.linear2(torch.relu(self.linear1(self.norm2(x))))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, D)
            self.layers = nn.ModuleList([Block() for _ in range(c["L"])])
            self.norm = nn.LayerNorm(D)
            self.head = nn.Linear(D, V)
            pos = torch.arange(T, dtype=torch.float32)[:, None]
            if c["pe"] == "rope":  # angle of pair i at position t: t / 10000^(2i / hd)
                ang = pos / 10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd)
                self.register_buffer("cos", torch.cos(ang), persistent=False)
                self.register_buffer("sin", torch.sin(ang), persistent=False)
            else:  # sinusoidal: PE[t, 2i] = sin(t / 10000^(2i/D)), PE[t, 2i+1] = cos(...)
                ang = pos / 10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32) / D)
                pe = torch.stack((torch.sin(ang), torch.cos(ang)), dim=-1).reshape(T, D)
                self.register_buffer("pe", pe, persistent=False)
            self.register_buffer("causal", torch.ones(T, T, dtype=torch.bool).triu(1), persistent=False)

        def rope(self, x):  # x [B, h, T, hd]: pairs (x_2i, x_2i+1) rotated by the angle of i
            x0, x1 = x[..., 0::2], x[..., 1::2]
            return torch.stack((x0 * self.cos - x1 * self.sin, x0 * self.sin + x1 * self.cos),
                               dim=-1).flatten(-2)

        def forward(self, x, padding=None):
            z = self.embedding(x)
            if c["pe"] != "rope":
                z = z + self.pe
            mask = self.causal if padding is None else self.causal | padding[:, None, None, :]
            rope = self.rope if c["pe"] == "rope" else None
            for layer in self.layers:
                z = layer(z, mask, rope)
            return self.head(self.norm(z))

    return {"rnn": Recurrent, "lstm": Recurrent, "gru": Recurrent, "tcn": TCN,
            "decoder": Decoder}[kind]()


def torch_cell_worker(args):
    """One training update per step as bench_cells: zero_grad, forward, cross-entropy over every
    scored position (padded positions ignored), backward, clip_grad_norm_ to 1, Adam/AdamW step."""
    import resource
    import torch
    torch.set_num_threads(args.intra)
    torch.manual_seed(0)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if args.case == "baseline":
        print(json.dumps({"baseline_rss_bytes": baseline}))
        return 0
    c = CELLS[args.case]
    model = torch_cell_model(c)
    model.train()
    params = list(model.parameters())
    B, T, V = c["B"], c["T"], c["V"]
    x = torch.randint(V, (B, T))
    y = torch.randint(V, (B, T))
    padding = None
    if "min_len" in c:  # rows of lengths in [min_len, T], right-padded (key-padding mask)
        lengths = torch.randint(c["min_len"], T + 1, (B,))
        padding = torch.arange(T)[None, :] >= lengths[:, None]
        y = y.masked_fill(padding, -100)
    opt_cls = torch.optim.AdamW if c.get("optimizer") == "adamw" else torch.optim.Adam
    opt = opt_cls(params, lr=CELL_LR, weight_decay=c.get("weight_decay", 0.0))
    ce = torch.nn.CrossEntropyLoss(ignore_index=-100)

    def step():
        opt.zero_grad()
        loss = ce(model(x, padding).reshape(B * T, V), y.reshape(B * T))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CELL_CLIP_NORM)
        opt.step()

    out = dict(time_steps(step, args.min_time), baseline_rss_bytes=baseline,
               n_params=sum(p.numel() for p in params))
    print(json.dumps(out))
    return 0


def time_steps(step, min_time):
    """One untimed warm-up call of step (allocations, OpenBLAS buffers), then calls until at least
    2 calls and min_time seconds: wall and CPU ms per call (CPU: all threads of the process)."""
    step()
    iters, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while True:
        step()
        iters += 1
        elapsed = time.perf_counter() - start
        if iters >= 2 and elapsed >= min_time:
            break
    cpu = time.process_time() - cpu_start
    return {"ms": 1000.0 * elapsed / iters, "cpu_ms": 1000.0 * cpu / iters, "iterations": iters}


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


def run_benchmark(binary, name, min_time):
    """Runs the one Google Benchmark case `name` of binary in a process of its own; returns its
    JSON run (with the counters) and the process's peak RSS in bytes."""
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
    return r, rss


def run_seqlab(binary, name, min_time):
    r, rss = run_benchmark(binary, name, min_time)
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


def openblas_coretype():
    """The OPENBLAS_CORETYPE every process of the run gets, as seqlab's ensure_blas_kernels
    (core/threads.hpp) chooses it: the variable as given when set; else "SkylakeX" (AVX-512 F, BW,
    DQ and VL) or "Haswell" (AVX2 and FMA) when OpenBLAS's own detection falls back to Prescott or
    Core2 on this CPU (0.3.21 does not know newer models; PyTorch's OpenBLAS would run those
    kernels too); else None (OpenBLAS's choice)."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return os.environ["OPENBLAS_CORETYPE"]
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        core = (lib.openblas_get_corename() or b"").decode().lower()
    except (OSError, AttributeError):
        return None
    if core not in ("prescott", "core2"):
        return None
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return None
    if all(x in flags for x in ("avx512f", "avx512bw", "avx512dq", "avx512vl")):
        return "SkylakeX"
    if "avx2" in flags and "fma" in flags:
        return "Haswell"
    return None


def seqlab_baseline(binary):
    _, _, _, rss = run_process([binary, "--benchmark_filter=^no case matches this$",
                                "--benchmark_format=json"])
    return rss


def run_torch(python, case, mode, intra, blas, min_time, cells=False):
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = str(blas)
    env["OMP_NUM_THREADS"] = str(intra)
    cmd = [python, os.path.abspath(__file__), "--worker", "--case", case, "--mode", mode,
           "--intra", str(intra), "--min-time", str(min_time)] + (["--cells"] if cells else [])
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


def write_csv(out_path, meta, columns, rows):
    """The meta line, the header and the rows, through a temporary file renamed when complete;
    exit status 1 when it cannot be written."""
    tmp = out_path + ".tmp"
    try:
        os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
        with open(tmp, "w") as f:
            f.write("# meta: " + "; ".join(f"{k}={str(v).replace(',', ' ')}" for k, v in meta.items()) + "\n")
            f.write(",".join(columns) + "\n")
            for r in rows:
                f.write(",".join(fmt(r[c]) if isinstance(r[c], float) else ("" if r[c] is None else str(r[c]))
                                 for c in columns) + "\n")
        os.replace(tmp, out_path)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        print(f"compare_pytorch: cannot write {out_path}: {e}", file=sys.stderr)
        raise SystemExit(1)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.environ.get("BUILD_DIR", "build/release"),
                   help="CMake build dir holding experiments/bench_layers (relative to the repo root)")
    p.add_argument("--repetitions", type=int, default=5, help="processes per setting (>= 1)")
    p.add_argument("--min-time", type=float, default=1.0, help="seconds timed per process (> 0)")
    p.add_argument("--cells", action="store_true",
                   help="the experiments' training cells (bench_cells, one update per iteration) "
                        "instead of the layers")
    p.add_argument("--cases", default=None,
                   help="comma list of " + ", ".join(CASES) + "; with --cells of " + ", ".join(CELLS)
                        + " (default: all)")
    p.add_argument("--modes", default=None, help="comma list of fwd, fwdbwd (default both; not with --cells)")
    p.add_argument("--threads", default=None, help="comma list of thread budgets (default 1,cores)")
    p.add_argument("--out", default=None, help="default results/bench/compare_pytorch.csv; with "
                                               "--cells results/bench/compare_pytorch_cells.csv")
    p.add_argument("--torch-python", default=sys.executable,
                   help="interpreter that runs the PyTorch workers (Debian's /usr/bin/python3)")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch (seqlab half only)")
    p.add_argument("--also", action="append", default=[], metavar="LABEL=BINARY",
                   help="another bench_layers (with --cells: bench_cells) binary to run as "
                        "implementation LABEL")
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
        return torch_cell_worker(args) if args.cells else torch_worker(args)

    table = CELLS if args.cells else CASES
    cases = [c for c in (args.cases if args.cases is not None else ",".join(table)).split(",") if c]
    for c in cases:
        if c not in table:
            fail_arg("--cases", c, ", ".join(table))
    if args.cells and args.modes is not None:
        fail_arg("--modes", args.modes, "no --modes with --cells (one iteration is one training update)")
    modes = [] if args.cells else [m for m in (args.modes if args.modes is not None else ",".join(MODES)).split(",") if m]
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

    # One OpenBLAS kernel family for seqlab and PyTorch alike (both link Debian's OpenBLAS).
    coretype = openblas_coretype()
    if coretype:
        os.environ["OPENBLAS_CORETYPE"] = coretype
    bench = "bench_cells" if args.cells else "bench_layers"
    build_dir = args.build_dir if os.path.isabs(args.build_dir) else os.path.join(ROOT, args.build_dir)
    binaries = [("seqlab", os.path.join(build_dir, "experiments", bench))]
    for a in args.also:
        label, sep, path = a.partition("=")
        if not sep or not path:
            fail_arg("--also", a, f"LABEL=PATH_TO_{bench}")
        if (not re.fullmatch(r"[A-Za-z0-9_.-]+", label) or label in ("seqlab", "pytorch")
                or label in (b[0] for b in binaries)):
            fail_arg("--also", a, "a LABEL of letters, digits, _ . - other than seqlab, pytorch "
                                  "and the other --also labels")
        binaries.append((label, os.path.abspath(path)))
    for label, path in binaries:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            if label == "seqlab":
                print(f"compare_pytorch: --build-dir = {args.build_dir!r}: {path} not found; build it with\n"
                      f"  cmake --build {build_dir} --target {bench}", file=sys.stderr)
                return 2
            fail_arg("--also", f"{label}={path}", f"the path of an executable {bench} file")
    # Every case this run needs, in every binary, before anything runs: a binary that is not
    # bench_layers (bench_cells), or a thread budget it has no cases for, is a bad argument.
    for label, path in binaries:
        listed = listed_benchmarks(path)
        key, value = ("--build-dir", args.build_dir) if label == "seqlab" else ("--also", f"{label}={path}")
        if listed is None:
            fail_arg(key, value, f"a {bench} binary (this one lists no Google Benchmark cases)")
        for t in budgets:
            if args.cells:
                needed = [cell_bench_name(c, t) for c in cases]
            else:
                needed = [sgemm_name(t)] + [bench_name(c, m, t) for c in cases for m in modes]
            if any(n not in listed for n in needed):
                have = sorted({int(m.group(1)) for m in (re.search(r"/nthreads:(\d+)/", n) for n in listed) if m})
                if t not in have and have:
                    fail_arg("--threads", t, f"a budget {label}'s {bench} has cases for: "
                                             + ", ".join(map(str, have)))
                missing = next(n for n in needed if n not in listed)
                fail_arg(key, value, f"a {bench} binary with the case {missing}")
    out = args.out or ("results/bench/compare_pytorch_cells.csv" if args.cells
                       else "results/bench/compare_pytorch.csv")
    out_path = out if os.path.isabs(out) else os.path.join(ROOT, out)
    # The output path, before anything runs: a directory we can create and write into, a file name.
    try:
        if os.path.isdir(out_path) or out_path.endswith(os.sep) or not os.path.basename(out_path):
            raise OSError("it names a directory")
        os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
        with open(out_path + ".tmp", "w"):
            pass
        os.remove(out_path + ".tmp")
    except (NotADirectoryError, FileExistsError):
        fail_arg("--out", out, "a writable file path (a parent of it is a file, not a directory)")
    except OSError as e:
        fail_arg("--out", out, f"a writable file path ({getattr(e, 'strerror', None) or e})")

    tv = None if args.no_torch else torch_version(args.torch_python)
    have_torch = tv is not None
    log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    if not have_torch:
        log("compare_pytorch: torch is absent (or --no-torch): writing the seqlab half only")
    if args.cells:
        return run_cells(args, cases, budgets, binaries, out_path, tv, log, cores)

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
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "auto"),
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
        write_csv(out_path, meta, COLUMNS, rows)
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




def run_cell_seqlab(binary, cell, threads, min_time):
    """One process of bench_cells on Cell_<cell>; checks that it built the cell's sizes."""
    name = cell_bench_name(cell, threads)
    r, rss = run_benchmark(binary, name, min_time)
    c = CELLS[cell]
    for counter, want in (("n_params", c["params"]), ("batch", c["B"]), ("seq_len", c["T"])):
        if round(r.get(counter, -1)) != want:
            raise RuntimeError(f"{binary}: {name} reports {counter} = {r.get(counter)}, this script's "
                               f"PyTorch model has {want}: the two do not build the same cell")
    return {"ms": r["real_time"] * UNIT_MS[r["time_unit"]], "cpu_ms": r["cpu_time"] * UNIT_MS[r["time_unit"]],
            "rss": rss, "baseline": None}


def run_cell_torch(python, cell, intra, blas, min_time):
    r, rss = run_torch(python, cell, "update", intra, blas, min_time, cells=True)
    if r.get("n_params") != CELLS[cell]["params"]:
        raise RuntimeError(f"the PyTorch model of {cell} has {r.get('n_params')} parameters, the cell "
                           f"{CELLS[cell]['params']}")
    return {"ms": r["ms"], "cpu_ms": r["cpu_ms"], "rss": rss, "baseline": r["baseline_rss_bytes"]}


def run_cells(args, cells, budgets, binaries, out_path, tv, log, cores):
    """--cells: per-update time and peak RSS of every (cell, budget), seqlab's bench_cells (and
    --also binaries) against the PyTorch model of the same shapes (torch_cell_model) at every
    torch_settings of the budget. Each (cell, budget) is a group run back to back in every
    repetition (seqlab first in even repetitions, PyTorch first in odd ones; the groups' order
    rotates), so that a seqlab sample and the PyTorch samples of its repetition form a pair taken
    at the same moment; the paired ratio (median and range over the pairs) is the one the targets
    are judged on. Writes the CSV after every repetition (CELL_COLUMNS, README.md)."""
    have_torch = tv is not None
    groups = {}  # (cell, t) -> [(impl, setting, runner)]
    for cell in cells:
        for t in budgets:
            g = [(label, f"blas={t}", lambda path=path, cell=cell, t=t: run_cell_seqlab(path, cell, t, args.min_time))
                 for label, path in binaries]
            if have_torch:
                g += [("pytorch", f"intra={intra} blas={blas}",
                       lambda cell=cell, intra=intra, blas=blas:
                       run_cell_torch(args.torch_python, cell, intra, blas, args.min_time))
                      for intra, blas in torch_settings(t)]
            groups[(cell, t)] = g
    samples, cpu, rss, base = {}, {}, {}, {}  # key -> {rep: ms}, {rep: cpu ms}, max peak, baseline
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_start = os.getloadavg()
    t0 = time.time()
    seqlab_base = {label: statistics.median(seqlab_baseline(path) for _ in range(3))
                   for label, path in binaries}

    def write_out(final):
        med = {k: statistics.median(v.values()) for k, v in samples.items()}
        best = {}  # (cell, t) -> PyTorch's fastest setting's key
        for k, m in med.items():
            if k[2] == "pytorch" and (k[:2] not in best or m < med[best[k[:2]]]):
                best[k[:2]] = k
        rows = []
        for key, v in samples.items():
            cell, t, impl, setting = key
            c = CELLS[cell]
            bk = best.get((cell, t))
            seq = impl != "pytorch"
            ratio = med[key] / med[bk] if (seq and bk) else None
            paired = sorted(v[r] / samples[bk][r] for r in v if r in samples[bk]) if (seq and bk) else []
            pr = statistics.median(paired) if paired else None
            cpu_med = statistics.median(cpu[key].values())
            b = base.get(key, seqlab_base.get(impl))
            rss_ratio = rss[key] / rss[bk] if (seq and bk) else None
            tr = TARGET_CELL_RATIO.get(cell) if seq else None
            tm = TARGET_CELL_RSS_RATIO.get(cell) if seq else None
            meets = ""
            if tr is not None and pr is not None:
                meets = "yes" if pr <= tr and (tm is None or rss_ratio <= tm) else "no"
            rows.append({
                "cell": cell, "threads": t, "impl": impl, "setting": setting, "batch": c["B"],
                "seq_len": c["T"], "n_params": c["params"], "repetitions": len(v),
                "median_ms": med[key], "min_ms": min(v.values()), "max_ms": max(v.values()),
                "cpu_ms_median": cpu_med if t == 1 else None,
                "pytorch_best_setting": bk[3] if (seq and bk) else "",
                "ratio_seqlab_over_pytorch": ratio, "ratio_paired_median": pr,
                "ratio_paired_min": min(paired) if paired else None,
                "ratio_paired_max": max(paired) if paired else None, "pairs": len(paired) if seq else None,
                "cpu_ratio_seqlab_over_pytorch": (cpu_med / statistics.median(cpu[bk].values()))
                if (seq and bk and t == 1) else None,
                "peak_rss_bytes": rss[key], "baseline_rss_bytes": b,
                "step_rss_bytes": rss[key] - b if b is not None else None,
                "peak_rss_ratio_seqlab_over_pytorch": rss_ratio,
                "target_ratio_max": tr, "target_peak_rss_ratio_max": tm, "meets_target": meets,
            })
        meta = {
            "experiment": "compare_pytorch --cells", "utc_start": started,
            "utc_end": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": socket.gethostname(), "cpu": cpu_model(), "cores": cores,
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "auto"),
            "loadavg_start": "/".join(f"{x:.1f}" for x in load_start),
            "loadavg_end": "/".join(f"{x:.1f}" for x in os.getloadavg()),
            "torch_version": tv if have_torch else "absent",
            "torch_python": args.torch_python if have_torch else "",
            "repetitions": args.repetitions,
            "repetitions_done": max((len(v) for v in samples.values()), default=0),
            "complete": "yes" if final else "no (the run stopped or is still running after repetitions_done)",
            "min_time_s": args.min_time, "prune_factor": args.prune,
            "binaries": " ".join(f"{l}={p}" for l, p in binaries),
            "update": "zero_grad + forward + cross-entropy + backward + clip_grad_norm 1 + Adam/AdamW step",
            "target": "judged on ratio_paired_median (and peak_rss_ratio where a target is set)",
        }
        write_csv(out_path, meta, CELL_COLUMNS, rows)
        log(f"compare_pytorch: wrote {out_path}")
        if final:
            print(cells_summary_table(rows, have_torch))

    order = list(groups)
    for rep in range(args.repetitions):
        if rep == 1 and args.prune > 0:  # PyTorch settings far slower than their group's fastest
            for g, sets in groups.items():
                first = {st: samples[(*g, impl, st)][0] for impl, st, _ in sets if impl == "pytorch"}
                if len(first) > 1:
                    fastest = min(first.values())
                    groups[g] = [x for x in sets if x[0] != "pytorch" or first[x[1]] <= args.prune * fastest]
        k = rep % len(order)
        for g in order[k:] + order[:k]:
            sets = groups[g] if rep % 2 == 0 else groups[g][::-1]
            for impl, setting, runner in sets:
                key = (*g, impl, setting)
                try:
                    res = runner()
                except (RuntimeError, ValueError, KeyError, json.JSONDecodeError) as e:
                    print(f"compare_pytorch: {g[0]} threads={g[1]} {impl} {setting}: {e}", file=sys.stderr)
                    return 1
                samples.setdefault(key, {})[rep] = res["ms"]
                cpu.setdefault(key, {})[rep] = res["cpu_ms"]
                rss[key] = max(rss.get(key, 0), res["rss"])
                if res["baseline"] is not None:
                    base[key] = res["baseline"]
                log(f"[rep {rep + 1}/{args.repetitions} {time.time() - t0:6.0f} s] {g[0]} threads={g[1]} "
                    f"{impl} {setting}: {res['ms']:.1f} ms, peak RSS {res['rss'] / 2**20:.0f} MiB")
        if rep + 1 < args.repetitions:
            write_out(False)
    write_out(True)
    return 0


def cells_summary_table(rows, have_torch):
    """Markdown table: every seqlab-like row beside PyTorch's fastest setting of its group."""
    mib = lambda v: "" if v is None else f"{v / 2**20:.0f}"
    torch_rows = {}
    for r in rows:
        if r["impl"] == "pytorch":
            k = (r["cell"], r["threads"])
            if k not in torch_rows or r["median_ms"] < torch_rows[k]["median_ms"]:
                torch_rows[k] = r
    lines = ["| cell | threads | impl | params | median ms (min-max) | PyTorch best ms (setting) | "
             "ratio, paired median (min-max) | CPU-time ratio | peak RSS MiB (PyTorch) | target |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["impl"] == "pytorch":
            continue
        tb = torch_rows.get((r["cell"], r["threads"]))
        tgt = ""
        if r["target_ratio_max"] is not None:
            tgt = f"<= {r['target_ratio_max']}"
            if r["target_peak_rss_ratio_max"] is not None:
                tgt += f", RSS <= {r['target_peak_rss_ratio_max']}x"
            tgt += f": {r['meets_target'] or 'n/a'}"
        ratio = (f"{r['ratio_paired_median']:.2f} ({r['ratio_paired_min']:.2f}-{r['ratio_paired_max']:.2f}, "
                 f"{r['pairs']} pairs)" if r["ratio_paired_median"] is not None else "n/a")
        lines.append(
            f"| {r['cell']} | {r['threads']} | {r['impl']} | {r['n_params']:,} | "
            f"{r['median_ms']:.1f} ({r['min_ms']:.1f}-{r['max_ms']:.1f}) | "
            + (f"{tb['median_ms']:.1f} ({tb['setting']})" if tb else "n/a") + f" | {ratio} | "
            + (f"{r['cpu_ratio_seqlab_over_pytorch']:.2f}" if r["cpu_ratio_seqlab_over_pytorch"] is not None else "")
            + f" | {mib(r['peak_rss_bytes'])} ({mib(tb['peak_rss_bytes']) if tb else 'n/a'}) | {tgt} |")
    if not have_torch:
        lines.append("\nPyTorch: absent (seqlab half only).")
    return "\n".join(lines)


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
