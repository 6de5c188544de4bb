#!/usr/bin/python3
"""Figures and verdicts for experiments/parallel_speedup (claim 1: self-attention uses parallel
hardware better than recurrence and trains faster, at an O(n^2) memory cost).

usage: plot_parallel_speedup.py [RESULTS_DIR [PREVIOUS_DIR]]   (default: results/parallel_speedup)
Reads parallel_speedup.csv (one row per timed case), parallel_speedup_rounds.csv (every timing
round), parallel_speedup_memory.csv (bytes kept for backward), parallel_speedup_time_to_accuracy.csv,
parallel_speedup_tta_lr.csv, parallel_speedup_tta_curve.csv and parallel_speedup.meta.json from
RESULTS_DIR; writes into RESULTS_DIR/figures:
  parallel_speedup_speedup        thread scaling at the benchmark shape: speedup over 1 thread per
                                  family against seq_len (forward+backward and forward), 95 %
                                  interval over the paired rounds, ideal = threads, and the
                                  ceiling zone of the thread-scaling verdict (within ×/÷ 1.1 of it)
  parallel_speedup_time           time per forward+backward at the benchmark shape, 1 and N threads
  parallel_speedup_roofline       achieved GFLOP/s as a fraction of the same cell's SGEMM rate (each
                                  cell's rate in the legend) and the roofline verdict's ceiling zone
  parallel_speedup_crossover      t(self-attention) / t(other) against n/d at every d, and the
                                  crossover n*(d) on log-log axes (bounds hollow triangles, unbounded
                                  interval ends arrows) with its fitted slope over the fit's own d
  parallel_speedup_memory         bytes kept for backward against seq_len per family and attention
                                  kernel, with the fitted a + b·n + c·n² (the TCN, whose levels grow
                                  with log n, joined instead)
  parallel_speedup_generation     per-token latency at batch 1 against the prefix: one decoding
                                  step (KV cache / recurrent state) and the parallel forward's time
                                  per position; the verdict's ratio decode step ÷ (forward / n) per
                                  family, and its decoder − LSTM contrast against the ×/÷ 1.25 margin
  parallel_speedup_complexity     sequential steps (families with equal counts drawn as one line) and
                                  analytic FLOPs against seq_len (Table 1)
  parallel_speedup_time_to_accuracy  validation bits per character against updates and against
                                  training time (one curve per run), and per family the medians over
                                  runs of the updates and seconds to the target and the geometric mean
                                  of the runs' ms per update (the verdict rows' statistics)
  parallel_speedup_crossover.csv  n*(d) per attention and other family (interpolated or a bound),
                                  its interval, the FLOP-count crossover and Table 1's n = d
  parallel_speedup_crossover_law.csv  the log-log slope of n* against d per family
  parallel_speedup_memory_fit.csv a, b, c of the bytes per family, kernel, d and batch
With PREVIOUS_DIR (another run of the same scaling shape) it also prints, per family, the
thread-scaling row's statistic in both runs and their ln difference with Welch's interval: the
variation between runs that one run's intervals leave out. It writes nothing for it.
Exits 2 naming a missing or malformed file or column.

Intervals. Timings come in interleaved rounds (timing.hpp): every case of a point once per round.
A speedup's interval is the Student-t interval over the rounds of ln(t_1 / t_N) of the same round
(paired); a time's interval is the t-interval of ln t over the rounds. Across cells (different
processes) intervals are combined as Welch's (unpaired).

Crossover (Vaswani et al. 2017, Table 1: self-attention O(n²·d) vs recurrent O(n·d²) per layer,
so self-attention is cheaper for n < d): for every d and pair (attention A, other R), n* is where
ln(t_A / t_R) last goes from <= 0 to > 0 along seq_len, the n beyond which A stays slower on the
grid (interpolated log-log between the two grid points; no point dropped); its interval is where
the upper / lower ends of the interval of ln t_A − ln t_R last cross;
below the grid or beyond it n* is a bound. The same on the analytic FLOPs gives the FLOP
crossover. The scaling law fits log2 n* = a + s·log2 d over the d whose n* is interpolated (OLS,
t-interval); Table 1 predicts s = 1.

verdicts(results_dir) computes the report rows from the CSVs (rules in each row).
"""
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seqlab_stats as ss  # noqa: E402
import seqlab_style as st  # noqa: E402
import seqlab_verdict as sv  # noqa: E402

NAME = "parallel_speedup"
ATTENTION = ["self_attention", "transformer_encoder", "transformer_decoder"]
RECURRENT = ["rnn", "lstm", "gru"]
OTHERS = RECURRENT + ["tcn"]
ORDER = ATTENTION + OTHERS
LABEL = {"self_attention": "Self-attention (MHA)", "transformer_encoder": "Transformer encoder",
         "transformer_decoder": "Transformer decoder", "rnn": "RNN", "lstm": "LSTM", "gru": "GRU",
         "tcn": "TCN"}
MAIN_COLS = ["part", "model", "kernel", "pass", "batch", "d_model", "hidden_size", "num_layers", "n_heads",
             "n_params", "cores", "threads", "seq_len", "repetitions", "time_ms_median", "time_ms_min",
             "time_ms_max", "tokens_per_s", "speedup", "flops", "gflop_per_s", "sgemm_gflop_per_s",
             "roofline_fraction", "sequential_steps", "seed"]
ROUND_COLS = ["part", "model", "pass", "batch", "d_model", "seq_len", "threads", "seed", "round", "time_ms"]
MEM_COLS = ["part", "model", "kernel", "batch", "d_model", "n_heads", "seq_len", "activation_bytes",
            "activation_bytes_measured"]
TTA_COLS = ["model", "seed", "n_params", "lr", "target_bpc", "unigram_bpc", "reached", "steps_to_target",
            "time_to_target_s", "train_time_s", "steps_done", "step_time_ms", "final_valid_bpc", "best_valid_bpc",
            "test_bpc", "diverged", "threads", "seq_len", "batch", "max_steps"]
LR_COLS = ["model", "lr", "valid_bpc", "chosen"]
CURVE_COLS = ["model", "seed", "step", "train_time_s", "valid_bpc"]
TEXT = ("part", "model", "kernel", "pass")

SPEEDUP_RATIO = 1.1      # speedups within ×/÷ 1.1 of each other count as no difference
ROOFLINE_RATIO = 1.1     # SGEMM fractions within ×/÷ 1.1 count as no difference
CROSSOVER_FACTOR = 4.0   # Table 1's n ≈ d, up to the constant factors it leaves out
SLOPE_MARGIN = 0.25      # the scaling law's slope within 1 ± 0.25 counts as 1
MIN_LAW_POINTS = 3       # d values with an interpolated n* needed for a slope
LATENCY_SLOPE = 0.1      # log-log slope of the decoding latency: below counts as flat
DECODE_RATIO = 1.25      # decode / parallel-forward cost per token: a smaller gap counts as none
CROSS_MARKER = {"rnn": "o", "lstm": "s", "gru": "D", "tcn": "P"}  # n*(d) panel: no triangles (the bounds)
UPDATE_RATIO = 1.1       # time per update within ×/÷ 1.1 counts as equal
PARAM_TOLERANCE = 0.05
ANCHOR_T1 = ("Vaswani et al. 2017, Table 1: self-attention O(n²·d) per layer, O(1) sequential operations; "
             "recurrent O(n·d²), O(n); convolutional O(k·n·d²), O(1) (dilated: path O(log_k n)); §4: "
             "self-attention is faster than recurrence when n < d")


# ---------------------------------------------------------------------------------------------
# Loading

def _table(res, suffix, cols, allow_empty=True):
    path = os.path.join(res, NAME + suffix + ".csv")
    if allow_empty and os.path.isfile(path):
        with open(path, newline="") as f:
            header = f.readline()
            if header and not f.readline().strip():
                have = header.strip().split(",")
                missing = [c for c in cols if c not in have]
                if missing:
                    raise st.DataError(f"{path}: missing column(s) {', '.join(missing)} (has: {', '.join(have)})")
                return []
    rows = st.read_csv(path, cols)
    for r in rows:
        for c in cols:
            if c not in TEXT:
                r[c] = st.number(r, c, path)
    return rows


class Data:
    """Every table of a run (lists of dicts, numeric columns as floats) and meta.json."""

    def __init__(self, res):
        self.main = _table(res, "", MAIN_COLS, allow_empty=False)
        self.rounds = _table(res, "_rounds", ROUND_COLS)
        self.memory = _table(res, "_memory", MEM_COLS)
        self.tta = _table(res, "_time_to_accuracy", TTA_COLS)
        self.lr = _table(res, "_tta_lr", LR_COLS)
        self.curve = _table(res, "_tta_curve", CURVE_COLS)
        self.meta = st.read_meta(os.path.join(res, NAME + ".meta.json"))
        self._rounds = defaultdict(list)
        for r in self.rounds:
            key = (r["part"], r["model"], r["pass"], r["batch"], r["d_model"], r["seq_len"], r["threads"], r["seed"])
            self._rounds[key].append((r["round"], r["time_ms"]))

    def times(self, part, model, pas, batch, d, n, threads, seed=0.0):
        """Per-round times (ms) of one case, in round order."""
        return [t for _, t in sorted(self._rounds.get((part, model, pas, batch, d, n, threads, seed), []))]

    def rows(self, **kw):
        return [r for r in self.main if all(r[k] == v for k, v in kw.items())]

    def cores(self):
        return max(r["cores"] for r in self.main)


def run_config(data):
    """meta.json's resolved config (a dict; empty without meta.json or its config)."""
    cfg = data.meta.get("config") if isinstance(data.meta, dict) else None
    return cfg if isinstance(cfg, dict) else {}


def models_in(rows):
    present = {r["model"] for r in rows}
    return [m for m in ORDER if m in present] + sorted(present - set(ORDER))


def select(rows, **kw):
    return [r for r in rows if all(r[k] == v for k, v in kw.items())]


def style(model):
    i = ORDER.index(model) if model in ORDER else len(ORDER)
    return dict(color=st.PALETTE[i % len(st.PALETTE)], marker=st.MARKERS[i % len(st.MARKERS)],
                linestyle="--" if model == "transformer_decoder" else ":" if model == "self_attention" else "-")


def seq_axis(ax, ns, base=2):
    ax.set_xscale("log", base=base)
    ax.set_xticks(ns)
    ax.set_xticklabels([f"{n:g}" for n in ns], fontsize=7)
    ax.minorticks_off()


def save(fig, out_dir, stem):
    fig.tight_layout()
    return st.save(fig, out_dir, stem)


def median(values):
    """The median of a non-empty list (the mean of the two middle values for an even count)."""
    v = sorted(values)
    k = len(v) // 2
    return v[k] if len(v) % 2 else (v[k - 1] + v[k]) / 2


def exp_yerr(es):
    """matplotlib's yerr [[below], [above]] of exp of Estimates in log units."""
    return [[math.exp(e.value) - math.exp(e.lo) for e in es], [math.exp(e.hi) - math.exp(e.value) for e in es]]


def exp_est(e):
    """(value, lo, hi) of exp of an Estimate in log units."""
    return math.exp(e.value), math.exp(e.lo), math.exp(e.hi)


def welch(a, b, what=""):
    """a − b of two independent t-Estimates with Welch's interval (Welch–Satterthwaite df)."""
    if not (a.known and b.known) or a.n < 2 or b.n < 2:
        return ss.Estimate(a.value - b.value, -math.inf, math.inf, min(a.n, b.n), what=what,
                           method="difference of two estimates (too few rounds for an interval)")
    va, vb = a.se ** 2, b.se ** 2
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va ** 2 / a.df if a.df > 0 else 0) + (vb ** 2 / b.df if b.df > 0 else 0)) \
        if va + vb > 0 else a.df + b.df
    h = ss.t_quantile(ss.LEVEL, df) * se if se > 0 else 0.0
    v = a.value - b.value
    return ss.Estimate(v, v - h, v + h, min(a.n, b.n), se=se, df=df, what=what,
                       method=f"Welch t ({a.n} and {b.n} rounds)")


def log_time(data, part, model, pas, batch, d, n, threads):
    """t-interval of ln(time in ms) over the rounds of one case."""
    return ss.mean_interval([math.log(t) for t in data.times(part, model, pas, batch, d, n, threads)])


# ---------------------------------------------------------------------------------------------
# Thread scaling

def scaling_shape(data):
    rows = data.rows(part="scaling")
    if not rows:
        return None
    return dict(batch=rows[0]["batch"], d=rows[0]["d_model"], ns=sorted({r["seq_len"] for r in rows}),
                tmax=max(r["threads"] for r in rows))


def speedup_est(data, model, pas, n, tmax, shape):
    """ln speedup at tmax threads, t-interval over paired rounds, for one seq_len."""
    t1 = data.times("scaling", model, pas, shape["batch"], shape["d"], n, 1.0)
    tn = data.times("scaling", model, pas, shape["batch"], shape["d"], n, tmax)
    return ss.mean_interval([math.log(a / b) for a, b in zip(t1, tn)], what=f"ln speedup {model} n={n:g}",
                            method=f"paired t over {min(len(t1), len(tn))} rounds")


def speedup_over_grid(data, model, pas, shape):
    """ln speedup at tmax averaged over the seq_len grid per round, t-interval over rounds."""
    per_round = None
    for n in shape["ns"]:
        t1 = data.times("scaling", model, pas, shape["batch"], shape["d"], n, 1.0)
        tn = data.times("scaling", model, pas, shape["batch"], shape["d"], n, shape["tmax"])
        logs = [math.log(a / b) for a, b in zip(t1, tn)]
        per_round = logs if per_round is None else [x + y for x, y in zip(per_round, logs)]
    k = len(shape["ns"])
    return ss.mean_interval([x / k for x in per_round or []], method="per-round mean over seq_len, t over rounds")


def fig_speedup(data, out_dir, note):
    shape = scaling_shape(data)
    fig, axes = st.plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, pas in zip(axes, ["forward_backward", "forward"]):
        for m in models_in(data.rows(part="scaling")):
            pts = [(n, exp_est(speedup_est(data, m, pas, n, shape["tmax"], shape))) for n in shape["ns"]]
            pts = [(n, e) for n, e in pts if not math.isnan(e[0])]
            if not pts:
                continue
            s = style(m)
            xs = [n for n, _ in pts]
            ax.errorbar(xs, [e[0] for _, e in pts], yerr=[[max(0, e[0] - e[1]) for _, e in pts],
                                                          [max(0, e[2] - e[0]) if math.isfinite(e[2]) else 0
                                                           for _, e in pts]],
                        label=LABEL.get(m, m) + (" (shown, not counted)" if m in ("self_attention", "rnn", "tcn")
                                                 else ""),
                        capsize=3, **s)
        ax.axhline(shape["tmax"], color="grey", linestyle=":", label=f"ideal ({shape['tmax']:g} threads)")
        if shape["tmax"] > 1:
            ax.axhspan(shape["tmax"] / SPEEDUP_RATIO, shape["tmax"], color="grey", alpha=0.12, linewidth=0,
                       label=f"within ×/÷ {SPEEDUP_RATIO:g} of ideal (ceiling: both compared arms in it)")
        ax.axhline(1, color="grey", linewidth=0.8)
        seq_axis(ax, shape["ns"])
        ax.set_xlabel("seq_len n (tokens)")
        ax.set_ylabel(f"speedup at {shape['tmax']:g} threads over 1 thread")
        ax.set_title(f"{pas.replace('_', '+')}: batch {shape['batch']:g}, d_model {shape['d']:g}, "
                     f"{data.cores():g}-core machine\n(95 % interval over paired rounds; {note})", fontsize=9)
    # One legend for both panels, below them, clear of every line.
    handles, labels = axes[0].get_legend_handles_labels()
    fig.tight_layout()
    fig.legend(handles, labels, fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, 0.0), frameon=False)
    return st.save(fig, out_dir, NAME + "_speedup")


def fig_time(data, out_dir, note):
    shape = scaling_shape(data)
    fig, axes = st.plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, threads in zip(axes, [1.0, shape["tmax"]]):
        for m in models_in(data.rows(part="scaling")):
            rows = sorted(data.rows(part="scaling", model=m, threads=threads, **{"pass": "forward_backward"}),
                          key=lambda r: r["seq_len"])
            if not rows:
                continue
            s = style(m)
            xs = [r["seq_len"] for r in rows]
            ax.plot(xs, [r["time_ms_median"] for r in rows], label=LABEL.get(m, m), **s)
            ax.fill_between(xs, [r["time_ms_min"] for r in rows], [r["time_ms_max"] for r in rows],
                            color=s["color"], alpha=0.2, linewidth=0)
        seq_axis(ax, shape["ns"])
        st.label_log_axis(ax, "y")
        ax.set_xlabel("seq_len n (tokens)")
        ax.set_ylabel("forward+backward time per batch (ms)")
        ax.set_title(f"{threads:g} thread(s), batch {shape['batch']:g}, d_model {shape['d']:g}\n"
                     f"(median, band: min-max over rounds; {note})", fontsize=9)
        ax.legend(fontsize=7)
    return save(fig, out_dir, NAME + "_time")


def fig_roofline(data, out_dir, note):
    shape = scaling_shape(data)
    fig, axes = st.plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, threads in zip(axes, [1.0, shape["tmax"]]):
        for m in models_in(data.rows(part="scaling")):
            rows = sorted(data.rows(part="scaling", model=m, threads=threads, **{"pass": "forward_backward"}),
                          key=lambda r: r["seq_len"])
            if rows:
                # Each cell times its own SGEMM reference (the same value in all its rows at this
                # thread count): the legend gives it, so a cell whose reference ran slow shows.
                ax.plot([r["seq_len"] for r in rows], [r["roofline_fraction"] for r in rows],
                        label=f"{LABEL.get(m, m)} (its cell's SGEMM {rows[0]['sgemm_gflop_per_s']:.0f} GFLOP/s)",
                        **style(m))
        ax.axhspan(1 / ROOFLINE_RATIO, 1, color="grey", alpha=0.12, linewidth=0,
                   label=f"within ×/÷ {ROOFLINE_RATIO:g} of SGEMM (ceiling: both compared arms in it)")
        seq_axis(ax, shape["ns"])
        ax.set_ylim(bottom=0)
        ax.set_xlabel("seq_len n (tokens)")
        ax.set_ylabel("achieved GFLOP/s / SGEMM GFLOP/s of the same cell")
        ax.set_title(f"{threads:g} thread(s): analytic GEMM FLOPs / median time, against the SGEMM "
                     f"{run_config(data).get('sgemm_size', '')}³ rate\nof each family's own cell (legend); "
                     f"forward+backward, batch {shape['batch']:g}; {note}", fontsize=8)
        ax.legend(fontsize=7)
    return save(fig, out_dir, NAME + "_roofline")


# ---------------------------------------------------------------------------------------------
# Crossover

def crossing(xs, diff):
    """Where diff last goes from <= 0 to > 0 along xs (sorted), log-log interpolated between those
    two points: the x beyond which diff stays > 0 on the whole grid. ('<', x0) if diff > 0 at every
    point; ('>', x_last) if diff <= 0 at the last point (including a diff that rises above 0 and
    falls back); (None, x) for an interpolated value. Every point counts: an earlier upward crossing
    followed by a fall back to <= 0 (e.g. per-call overheads deciding at the smallest n) is not
    the crossover, and no point is dropped."""
    if not xs:
        return (">", float("nan"))
    if diff[-1] <= 0:
        return (">", xs[-1])
    i = max((k for k in range(1, len(xs)) if diff[k - 1] <= 0), default=None)
    if i is None:
        return ("<", xs[0])
    lx0, lx1 = math.log(xs[i - 1]), math.log(xs[i])
    f = diff[i - 1] / (diff[i - 1] - diff[i])
    return (None, math.exp(lx0 + f * (lx1 - lx0)))


def _bound(kind, n):
    """(lo, hi) of n* for a crossing result."""
    if kind == "<":
        return 0.0, n
    if kind == ">":
        return n, math.inf
    return n, n


def crossover_table(data):
    """One row per (attention A, other R, d): n* of the times (value, interval, kind), of the FLOPs."""
    rows = data.rows(part="crossover")
    out = []
    if not rows:
        return out
    batch = rows[0]["batch"]
    for d in sorted({r["d_model"] for r in rows}):
        sub = [r for r in rows if r["d_model"] == d]
        for a in [m for m in ATTENTION if select(sub, model=m)]:
            for o in [m for m in OTHERS if select(sub, model=m)]:
                ta = {r["seq_len"]: r for r in select(sub, model=a)}
                to = {r["seq_len"]: r for r in select(sub, model=o)}
                ns = sorted(set(ta) & set(to))
                if len(ns) < 1:
                    continue
                ea = [log_time(data, "crossover", a, "forward_backward", batch, d, n, 1.0) for n in ns]
                eo = [log_time(data, "crossover", o, "forward_backward", batch, d, n, 1.0) for n in ns]
                kind, n_star = crossing(ns, [x.value - y.value for x, y in zip(ea, eo)])
                # Early crossing: the attention slowest, the other fastest (upper end of the difference).
                k_lo, n_lo = crossing(ns, [x.hi - y.lo for x, y in zip(ea, eo)])
                k_hi, n_hi = crossing(ns, [x.lo - y.hi for x, y in zip(ea, eo)])
                lo = min(_bound(k_lo, n_lo)[0], _bound(kind, n_star)[0])
                hi = max(_bound(k_hi, n_hi)[1], _bound(kind, n_star)[1])
                kf, nf = crossing(ns, [math.log(ta[n]["flops"] / to[n]["flops"]) for n in ns])
                out.append(dict(attention=a, other=o, d=d, batch=batch, kind=kind, n_star=n_star, lo=lo, hi=hi,
                                flop_kind=kf, n_flop=nf, n_min=ns[0], n_max=ns[-1], ns=ns,
                                ratio=[math.exp(x.value - y.value) for x, y in zip(ea, eo)]))
    return out


def fmt_n(kind, n):
    return f"< {n:g}" if kind == "<" else f"> {n:g}" if kind == ">" else f"{n:.0f}"


def crossover_law(table, attention, other):
    """OLS of log2 n* on log2 d over the d with an interpolated n*: dict(fit, n, total), fit None
    with fewer than MIN_LAW_POINTS distinct d (the rule of the scaling-law verdict, so the CSV and
    the figure show no slope the verdict would not use)."""
    pts = [(math.log2(c["d"]), math.log2(c["n_star"])) for c in table
           if c["attention"] == attention and c["other"] == other and c["kind"] is None]
    allc = [c for c in table if c["attention"] == attention and c["other"] == other]
    if len({x for x, _ in pts}) < MIN_LAW_POINTS:
        return dict(fit=None, n=len(pts), total=len(allc))
    return dict(fit=ss.ols([x for x, _ in pts], [y for _, y in pts]), n=len(pts), total=len(allc))


def write_crossover_csvs(table, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    p1 = os.path.join(out_dir, NAME + "_crossover.csv")
    with open(p1, "w") as f:
        f.write("attention_model,other_model,batch,d_model,crossover_seq_len_time,crossover_bound,"
                "crossover_lo,crossover_hi,crossover_seq_len_flops,flops_bound,table1_n_equals_d,seq_len_min,"
                "seq_len_max\n")
        for c in table:
            b = {"<": "below_grid", ">": "above_grid", None: "interpolated"}
            f.write(f"{c['attention']},{c['other']},{c['batch']:g},{c['d']:g},{c['n_star']:.6g},{b[c['kind']]},"
                    f"{c['lo']:.6g},{c['hi']:.6g},{c['n_flop']:.6g},{b[c['flop_kind']]},{c['d']:g},"
                    f"{c['n_min']:g},{c['n_max']:g}\n")
    p2 = os.path.join(out_dir, NAME + "_crossover_law.csv")
    with open(p2, "w") as f:
        f.write("attention_model,other_model,d_with_interpolated_crossover,d_total,slope,slope_lo,slope_hi,"
                "intercept\n")
        for a in ATTENTION:
            for o in OTHERS:
                law = crossover_law(table, a, o)
                if not law["total"]:
                    continue
                fit = law["fit"]
                vals = (f"{fit['slope']:.6g},{fit['lo']:.6g},{fit['hi']:.6g},{fit['intercept']:.6g}" if fit
                        else "nan,nan,nan,nan")
                f.write(f"{a},{o},{law['n']},{law['total']},{vals}\n")
    return [p1, p2]


def fig_crossover(data, table, out_dir, note):
    att = next((a for a in ATTENTION if any(c["attention"] == a for c in table)), None)
    others = [o for o in OTHERS if any(c["other"] == o and c["attention"] == att for c in table)]
    # Three panels a row (readable at page width): the ratio panels, then n*(d), then its legend.
    ncols = min(3, len(others) + 2)
    nrows = -(-(len(others) + 2) // ncols)
    fig, grid = st.plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 4.0 * nrows), squeeze=False)
    panels = list(grid.flat)
    ds = sorted({c["d"] for c in table})
    for ax, o in zip(panels, others):
        for i, d in enumerate(ds):
            c = next((c for c in table if c["attention"] == att and c["other"] == o and c["d"] == d), None)
            if c:
                ax.plot([n / d for n in c["ns"]], c["ratio"], marker="o", markersize=3,
                        color=st.PALETTE[i % len(st.PALETTE)], label=f"d = {d:g}")
        ax.axhline(1, color="grey", linewidth=0.8)
        ax.axvline(1, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("n / d")
        ax.set_ylabel(f"t({LABEL[att]}) / t({LABEL[o]})")
        ax.set_title(f"vs {LABEL[o]}: forward+backward, 1 thread\n(> 1: attention slower; {note})", fontsize=8)
        ax.legend(fontsize=7)
    ax = panels[len(others)]
    for j, o in enumerate(others):
        cs = [c for c in table if c["attention"] == att and c["other"] == o]
        color = style(o)["color"]
        # A small horizontal offset per family, so that equal values (bounds at a d's first seq_len)
        # stay visible side by side; the family markers are not triangles, which mark the bounds.
        off = 2 ** (0.07 * (j - (len(others) - 1) / 2))
        marker = CROSS_MARKER.get(o, "o")
        ip = [c for c in cs if c["kind"] is None]
        ax.errorbar([c["d"] * off for c in ip], [c["n_star"] for c in ip],
                    yerr=[[c["n_star"] - c["lo"] if c["lo"] > 0 else 0 for c in ip],
                          [c["hi"] - c["n_star"] if math.isfinite(c["hi"]) else 0 for c in ip]],
                    label=LABEL[o], capsize=3, color=color, marker=marker, linestyle="none")
        for c in ip:  # an interval end with no crossing on the grid: an arrow, not a bar
            for unbounded, factor in ((c["lo"] <= 0, 0.4), (not math.isfinite(c["hi"]), 2.5)):
                if unbounded:
                    ax.annotate("", xy=(c["d"] * off, c["n_star"] * factor), xytext=(c["d"] * off, c["n_star"]),
                                arrowprops=dict(arrowstyle="->", color=color, linewidth=1))
        for c in cs:
            if c["kind"] is not None:
                ax.plot(c["d"] * off, c["n_star"], marker="^" if c["kind"] == ">" else "v", color=color,
                        fillstyle="none", markersize=8, linestyle="none")
        law = crossover_law(table, att, o)
        if law["fit"]:
            f = law["fit"]
            xs = [c["d"] for c in ip]  # the fit's own d only
            ax.plot(xs, [2 ** (f["intercept"] + f["slope"] * math.log2(d)) for d in xs], color=color,
                    linestyle="--", linewidth=1,
                    label=f"{LABEL[o]}: slope {f['slope']:.2f} [{f['lo']:.2f}, {f['hi']:.2f}] over {law['n']} d")
    ax.plot(ds, ds, color="grey", linestyle=":", label="n = d (Table 1)")
    ax.plot([], [], marker="^", fillstyle="none", color="grey", linestyle="none", label="beyond the grid (its last n)")
    ax.plot([], [], marker="v", fillstyle="none", color="grey", linestyle="none", label="below the grid (its first n)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("d_model d")
    ax.set_ylabel("crossover seq_len n*")
    ax.set_title("n*(d): last upward crossing, 95 % interval (arrow: no crossing\nof that end on the grid); "
                 "hollow ▲/▽: bounds; families offset in d", fontsize=8)
    handles, labels = ax.get_legend_handles_labels()
    for spare in panels[len(others) + 1:]:
        spare.axis("off")
    panels[len(others) + 1].legend(handles, labels, fontsize=8, loc="center left", frameon=False,
                                   title="n*(d) panel (slopes: 95 % interval)", title_fontsize=8)
    return save(fig, out_dir, NAME + "_crossover")


def fig_complexity(data, out_dir, note):
    rows = data.rows(part="crossover", **{"pass": "forward_backward"})
    d = max(r["d_model"] for r in rows)
    fig, axes = st.plt.subplots(1, 2, figsize=(11, 4.2))
    # Families whose step counts agree wherever both were timed (the recurrent layers: n) are drawn
    # as one line over the union of their seq_lens, labelled with every family of the group.
    groups = []  # [(families, {n: steps})]
    for m in models_in(rows):
        sub = sorted(select(rows, model=m, d_model=d), key=lambda r: r["seq_len"])
        if not sub:
            continue
        xs = [r["seq_len"] for r in sub]
        axes[1].plot(xs, [r["flops"] / 1e9 for r in sub], label=LABEL.get(m, m), **style(m))
        steps = {r["seq_len"]: r["sequential_steps"] for r in sub}
        g = next((g for g in groups if len(set(g[1]) & set(steps)) >= 2
                  and all(g[1][n] == steps[n] for n in set(g[1]) & set(steps))), None)
        if g:
            g[0].append(m)
            g[1].update(steps)
        else:
            groups.append(([m], steps))
    for group, steps in groups:
        xs = sorted(steps)
        axes[0].plot(xs, [steps[n] for n in xs], label=" = ".join(LABEL.get(m, m) for m in group), **style(group[0]))
    axes[0].set_ylabel("sequential steps on the critical path\n(counted by the implementation)")
    axes[1].set_ylabel("analytic forward+backward GFLOP (GEMM work)")
    axes[0].set_title("Table 1 'sequential operations': O(1) attention, O(n) recurrent, O(log n) TCN", fontsize=9)
    axes[1].set_title(f"Table 1 'complexity per layer', d_model {d:g} ({note})", fontsize=9)
    for ax in axes:
        ax.set_xscale("log", base=2)
        st.label_log_axis(ax, "y")
        ax.set_xlabel("seq_len n (tokens)")
        ax.legend(fontsize=7)
    return save(fig, out_dir, NAME + "_complexity")


# ---------------------------------------------------------------------------------------------
# Memory

def memory_fits(data):
    """a + b·n + c·n² (bytes) per (part, model, kernel, d, batch) with >= 3 seq_lens, least squares on
    the measured bytes; c_rel = c / (4·B·h) for attention (1: the n × n probabilities of every head)."""
    import numpy as np
    groups = defaultdict(list)
    for r in data.memory:
        groups[(r["part"], r["model"], r["kernel"], r["d_model"], r["batch"], r["n_heads"])].append(r)
    out = []
    for (part, model, kernel, d, batch, h), rows in sorted(groups.items()):
        rows.sort(key=lambda r: r["seq_len"])
        ns = np.array([r["seq_len"] for r in rows])
        if len(set(ns)) < 3:
            continue
        y = np.array([r["activation_bytes_measured"] for r in rows])
        a, b, c = np.linalg.lstsq(np.vstack([np.ones_like(ns), ns, ns * ns]).T, y, rcond=None)[0]
        match = all(abs(r["activation_bytes_measured"] - r["activation_bytes"]) <= max(0.05 * r["activation_bytes"],
                                                                                       4096) for r in rows)
        nmax = float(ns[-1])
        out.append(dict(part=part, model=model, kernel=kernel, d=d, batch=batch, h=h, a=float(a), b=float(b),
                        c=float(c), c_rel=float(c) / (4.0 * batch * h) if h > 0 else float("nan"),
                        share_n2=float(c) * nmax * nmax / float(y[-1]) if y[-1] > 0 else float("nan"),
                        n_max=nmax, points=len(ns), matches=match))
    return out


def write_memory_csv(fits, out_dir):
    p = os.path.join(out_dir, NAME + "_memory_fit.csv")
    with open(p, "w") as f:
        f.write("part,model,kernel,d_model,batch,n_heads,a_bytes,b_bytes_per_token,c_bytes_per_token2,"
                "c_over_4Bh,n2_share_at_max_seq_len,seq_lens,measured_matches_analytic\n")
        for x in fits:
            f.write(f"{x['part']},{x['model']},{x['kernel']},{x['d']:g},{x['batch']:g},{x['h']:g},{x['a']:.6g},"
                    f"{x['b']:.6g},{x['c']:.6g},{x['c_rel']:.6g},{x['share_n2']:.6g},{x['points']},"
                    f"{int(x['matches'])}\n")
    return p


def fig_memory(data, fits, out_dir, note):
    # The widest crossover d (most seq_lens) for every family and kernel.
    cand = [x for x in fits if x["part"] == "crossover"] or fits
    best = max(cand, key=lambda x: (x["points"], x["d"]))
    d, part = best["d"], best["part"]
    fig, ax = st.plt.subplots(1, 1, figsize=(6.5, 4.5))
    for x in [f for f in fits if f["d"] == d and f["part"] == part]:
        rows = sorted([r for r in data.memory if r["part"] == part and r["model"] == x["model"] and
                       r["kernel"] == x["kernel"] and r["d_model"] == d], key=lambda r: r["seq_len"])
        s = style(x["model"])
        ls = "--" if x["kernel"] == "fused" else "-"
        ns = [r["seq_len"] for r in rows]
        ax.plot(ns, [r["activation_bytes_measured"] / x["batch"] / 2 ** 20 for r in rows], marker=s["marker"],
                color=s["color"], linestyle="none", fillstyle="none" if x["kernel"] == "fused" else "full")
        name = LABEL.get(x["model"], x["model"])
        if x["model"] == "tcn":
            # Its level count grows with log n (the levels cover n), so its bytes are not a + b·n + c·n²:
            # the measured points are joined, no fit drawn.
            ax.plot(ns, [r["activation_bytes_measured"] / x["batch"] / 2 ** 20 for r in rows], color=s["color"],
                    linewidth=0.8, label=f"{name}: measured, joined (levels grow with log n: no quadratic fit)")
            continue
        label = (f"{name}{' (' + x['kernel'] + ')' if x['kernel'] != 'none' else ''}: c/(4Bh) = "
                 f"{round(x['c_rel'], 2) + 0.0:.2f}" if x["h"] else
                 f"{name}: n² share at n = {x['n_max']:g} {round(x['share_n2'], 2) + 0.0:.2f}")
        ax.plot(ns, [(x["a"] + x["b"] * n + x["c"] * n * n) / x["batch"] / 2 ** 20 for n in ns], color=s["color"],
                linestyle=ls, label=label)
    ax.set_xscale("log", base=2)
    st.label_log_axis(ax, "y")
    ax.set_xlabel("seq_len n (tokens)")
    ax.set_ylabel("bytes kept for backward per sequence (MiB)")
    ax.set_title(f"d_model {d:g}: markers measured (heap growth), lines a + b·n + c·n² fits (TCN: joined)\n"
                 f"solid: materialised P [B,h,n,n]; dashed: fused (log-sum-exp only); {note}", fontsize=8)
    ax.legend(fontsize=6)
    return save(fig, out_dir, NAME + "_memory")


# ---------------------------------------------------------------------------------------------
# Generation

def generation_series(data, model, pas):
    rows = sorted(data.rows(part="generation", model=model, **{"pass": pas}), key=lambda r: r["seq_len"])
    return rows


def latency_window(data, model):
    """The prefixes of the latency rule: the upper half of the prefix grid (all of it below 4)."""
    ns = [r["seq_len"] for r in generation_series(data, model, "decode_step")]
    return ns[len(ns) // 2:] if len(ns) >= 4 else ns


def latency_trend(data, model, ns=None):
    """Log-log slope of the decode-step latency over the prefixes `ns` (default: latency_window),
    per round, t over rounds; None with fewer than 2 prefixes."""
    rows = generation_series(data, model, "decode_step")
    ns = latency_window(data, model) if ns is None else ns
    if len(ns) < 2:
        return None
    d = rows[0]["d_model"]
    per = defaultdict(list)
    for n in ns:
        for i, t in enumerate(data.times("generation", model, "decode_step", 1.0, d, n, 1.0)):
            per[i].append((math.log2(n), math.log2(t)))
    return ss.trend(dict(per), what=f"log-log slope of {model}'s decode latency")


def latency_regimes(data, model):
    """The latency slope over the two halves of latency_window, which share its middle prefix:
    [(first prefix, last prefix, Estimate)]; empty with fewer than 3 prefixes in the window."""
    w = latency_window(data, model)
    if len(w) < 3:
        return []
    k = len(w) // 2
    return [(h[0], h[-1], latency_trend(data, model, h)) for h in (w[:k + 1], w[k:])]


def decode_gap(data, model, n):
    """ln(decode-step time / (forward time / n)) at prefix n, paired by round, t over rounds."""
    rows = generation_series(data, model, "decode_step")
    d = rows[0]["d_model"]
    dec = data.times("generation", model, "decode_step", 1.0, d, n, 1.0)
    fwd = data.times("generation", model, "forward", 1.0, d, n, 1.0)
    return ss.mean_interval([math.log(a / (b / n)) for a, b in zip(dec, fwd)], method="paired t over rounds")


def fig_generation(data, out_dir, note):
    """Left: per-token latency (decoding step, solid, with its min–max band over rounds; parallel
    forward / n, dotted). Middle: the verdict's ratio decode step ÷ (forward / n) per family with
    its 95 % interval over paired rounds. Right: its decoder − LSTM contrast (Welch interval) against
    the ×/÷ DECODE_RATIO margin."""
    fig, axes = st.plt.subplots(1, 3, figsize=(16, 4.6))
    ax = axes[0]
    ms = models_in(data.rows(part="generation"))
    ns = []
    gaps = {}
    for m in ms:
        s = dict(style(m), linestyle="-")
        dec = generation_series(data, m, "decode_step")
        fwd = generation_series(data, m, "forward")
        ns = [r["seq_len"] for r in dec]
        ax.plot(ns, [r["time_ms_median"] * 1e3 for r in dec], label=f"{LABEL.get(m, m)}: one decoding step", **s)
        ax.fill_between(ns, [r["time_ms_min"] * 1e3 for r in dec], [r["time_ms_max"] * 1e3 for r in dec],
                        color=s["color"], alpha=0.2, linewidth=0)
        ax.plot([r["seq_len"] for r in fwd], [r["time_ms_median"] * 1e3 / r["seq_len"] for r in fwd],
                color=s["color"], linestyle=":", marker=s["marker"], fillstyle="none",
                label=f"{LABEL.get(m, m)}: parallel forward / n")
        gaps[m] = {n: decode_gap(data, m, n) for n in ns}
    if ns:
        seq_axis(ax, ns)
    st.label_log_axis(ax, "y")
    ax.set_xlabel("prefix length n (tokens)")
    ax.set_ylabel("time per token (µs), batch 1, 1 thread")
    ax.set_title(f"a decoding step after n tokens (KV cache / recurrent state; band: min–max over rounds)\n"
                 f"against the parallel forward over the n tokens per position, medians ({note})", fontsize=8)
    ax.legend(fontsize=7)

    ax = axes[1]
    for m in ms:
        s = style(m)
        es = [gaps[m][n] for n in ns]
        ax.errorbar(ns, [math.exp(e.value) for e in es], yerr=exp_yerr(es),
                    color=s["color"], marker=s["marker"], capsize=3, label=LABEL.get(m, m))
    ax.axhline(1, color="grey", linewidth=0.8)
    ax.axhline(DECODE_RATIO, color="grey", linestyle=":", label=f"×{DECODE_RATIO:g} (the LSTM half's margin)")
    if ns:
        seq_axis(ax, ns)
    st.label_log_axis(ax, "y")
    ax.set_xlabel("prefix length n (tokens)")
    ax.set_ylabel("decode step ÷ (forward over the prefix / n)")
    ax.set_title("the verdict's ratio per family: geometric mean over rounds,\n95 % interval over the paired rounds",
                 fontsize=8)
    ax.legend(fontsize=7)

    ax = axes[2]
    att = next((m for m in ATTENTION if m in gaps), None)
    rec = next((m for m in RECURRENT if m in gaps), None)
    if att and rec:
        es = [welch(gaps[att][n], gaps[rec][n]) for n in ns]
        ax.errorbar(ns, [math.exp(e.value) for e in es], yerr=exp_yerr(es),
                    color="black", marker="o", capsize=3, label=f"{LABEL[att]} ÷ {LABEL[rec]}")
        ax.axhspan(1 / DECODE_RATIO, DECODE_RATIO, color="grey", alpha=0.15, linewidth=0,
                   label=f"margin ×/÷ {DECODE_RATIO:g}")
        ax.axhline(1, color="grey", linewidth=0.8)
        seq_axis(ax, ns)
        st.label_log_axis(ax, "y")
        ax.set_ylabel(f"ratio of the two ratios, {LABEL[att]} ÷ {LABEL[rec]}")
        ax.legend(fontsize=7)
    ax.set_xlabel("prefix length n (tokens)")
    ax.set_title("the contrast the verdict tests at every prefix (95 % Welch interval):\n"
                 "above the band the decoder gains more from its parallel forward", fontsize=8)
    return save(fig, out_dir, NAME + "_generation")


# ---------------------------------------------------------------------------------------------
# Time to accuracy

def fig_tta(data, out_dir):
    tta, curve = data.tta, data.curve
    fig, axes = st.plt.subplots(1, 3, figsize=(15, 4.2))
    ms = models_in(tta)
    target = tta[0]["target_bpc"]
    seeds = len({r["seed"] for r in tta})
    note = f"{run_config(data).get('scale') or '?'} scale, one curve per run ({seeds} runs)"
    for m in ms:
        s = style(m)
        first = True
        for seed in sorted({r["seed"] for r in select(curve, model=m)}):
            pts = sorted((r["step"], r["train_time_s"], r["valid_bpc"]) for r in select(curve, model=m, seed=seed))
            kw = dict(color=s["color"], linestyle=s["linestyle"], alpha=0.8, label=LABEL.get(m, m) if first else None)
            axes[0].plot([p[0] for p in pts], [p[2] for p in pts], **kw)
            axes[1].plot([p[1] for p in pts], [p[2] for p in pts], **kw)
            first = False
    for ax, xl in zip(axes[:2], ["updates", "training wall-clock (s, evaluations excluded)"]):
        ax.axhline(target, color="grey", linestyle=":", label=f"target {target:g} bpc")
        ax.axhline(tta[0]["unigram_bpc"], color="grey", linewidth=0.8, label="unigram baseline")
        ax.set_xlabel(xl)
        ax.set_ylabel("validation bits per character")
        ax.legend(fontsize=7)
    axes[0].set_title(f"sample efficiency: bpc against updates ({note})", fontsize=8)
    axes[1].set_title("the claim: bpc against training time", fontsize=8)
    ax = axes[2]
    w = 0.8 / len(ms)

    def levels(m):  # the statistics the rows quote: medians over the runs, geometric mean of ms per update
        runs = select(tta, model=m)
        per_update = [r["time_ms_median"] for r in data.rows(part="tta", model=m)]
        return [median([r["steps_to_target"] if r["reached"] == 1 else r["steps_done"] for r in runs]),
                median([r["time_to_target_s"] if r["reached"] == 1 else r["train_time_s"] for r in runs]),
                math.exp(sum(math.log(t) for t in per_update) / len(per_update)) if per_update else float("nan")]
    ref = levels(ms[0])
    for i, m in enumerate(ms):
        for j, mu in enumerate(levels(m)):
            ax.bar(j + (i - (len(ms) - 1) / 2) * w, mu / ref[j] if ref[j] else float("nan"), width=w,
                   color=style(m)["color"], alpha=0.6, label=LABEL.get(m, m) if j == 0 else None)
    ax.set_xticks(range(3))
    ax.set_xticklabels(["updates to target\n(median)", "seconds to target\n(median)",
                        "ms per update\n(geometric mean)"], fontsize=8)
    ax.set_ylabel(f"relative to {LABEL.get(ms[0], ms[0])}")
    ax.set_title("time = updates × time per update, over the runs as the verdict rows quote them\n(unreached "
                 "runs at their budget; ms per update: each run's median over its evaluation windows)", fontsize=8)
    ax.axhline(1, color="grey", linewidth=0.8)
    ax.legend(fontsize=7)
    return save(fig, out_dir, NAME + "_time_to_accuracy")


# ---------------------------------------------------------------------------------------------

def speedups_between(previous, current):
    """The thread-scaling statistic of the verdict row (speedup_over_grid, forward+backward, at the
    largest thread count) per family in both runs (Data), and ln(current / previous) with Welch's
    interval between the runs: [(family, previous Estimate, current Estimate, difference)] for the
    families both runs timed at the same shape; [] when the shapes differ."""
    a, b = scaling_shape(previous), scaling_shape(current)
    if not a or not b or (a["batch"], a["d"], a["ns"], a["tmax"]) != (b["batch"], b["d"], b["ns"], b["tmax"]):
        return []
    both = [m for m in ORDER if previous.rows(part="scaling", model=m) and current.rows(part="scaling", model=m)]
    out = []
    for m in both:
        ep, ec = (speedup_over_grid(x, m, "forward_backward", a) for x in (previous, current))
        out.append((m, ep, ec, welch(ec, ep, what=f"ln speedup {m}, current − previous")))
    return out


def main(argv):
    res = argv[1] if len(argv) > 1 else os.path.join("results", NAME)
    try:
        data = Data(res)
        previous = Data(argv[2]) if len(argv) > 2 else None
        st.setup()
        note = f"{run_config(data).get('scale') or '?'} scale"
        out_dir = os.path.join(res, "figures")
        paths = []
        if data.rows(part="scaling"):
            paths += fig_speedup(data, out_dir, note) + fig_time(data, out_dir, note) + fig_roofline(data, out_dir, note)
        table = crossover_table(data)
        if table:
            paths += fig_crossover(data, table, out_dir, note) + fig_complexity(data, out_dir, note)
            paths += write_crossover_csvs(table, out_dir)
        fits = memory_fits(data)
        if fits:
            paths += fig_memory(data, fits, out_dir, note)
            paths.append(write_memory_csv(fits, out_dir))
        if data.rows(part="generation"):
            paths += fig_generation(data, out_dir, note)
        if data.tta:
            paths += fig_tta(data, out_dir)
    except st.DataError as e:
        st.fail(str(e))
    for p in paths:
        print("wrote", p)
    for c in table:
        print(f"crossover {c['attention']} vs {c['other']} at d = {c['d']:g}: time {fmt_n(c['kind'], c['n_star'])}, "
              f"FLOPs {fmt_n(c['flop_kind'], c['n_flop'])}")
    if previous is not None:
        rows = speedups_between(previous, data)
        if not rows:
            print(f"thread scaling between the runs: {argv[2]} and {res} differ in their scaling shape or lack it")
        for m, ep, ec, e in rows:
            print(f"thread scaling {m}: {math.exp(ep.value):.2f} [{math.exp(ep.lo):.2f}, {math.exp(ep.hi):.2f}] "
                  f"({argv[2]}) → {math.exp(ec.value):.2f} [{math.exp(ec.lo):.2f}, {math.exp(ec.hi):.2f}] ({res}): ln "
                  f"{e.value:+.3f} [{e.lo:.3f}, {e.hi:.3f}] (Welch)")


# ---------------------------------------------------------------------------------------------
# Verdicts for plots/make_report.py (plots/seqlab_verdict.py's vocabulary and rules).

def _v_steps(data):
    rows = [r for r in data.main if r["part"] in ("scaling", "crossover")]
    if not rows:
        return None
    ns = sorted({r["seq_len"] for r in rows})
    parts, ok = [], True
    for m in models_in(rows):
        sub = sorted(select(rows, model=m), key=lambda r: r["seq_len"])
        lo, hi = sub[0], sub[-1]
        parts.append(f"{LABEL.get(m, m)} {lo['sequential_steps']:g} → {hi['sequential_steps']:g} "
                     f"(n = {lo['seq_len']:g} → {hi['seq_len']:g})")
        for r in sub:
            if m in ATTENTION:
                ok = ok and r["sequential_steps"] == r["num_layers"]
            elif m in RECURRENT:
                ok = ok and r["sequential_steps"] == r["num_layers"] * r["seq_len"]
            elif m == "tcn":
                ok = ok and r["sequential_steps"] == 2 * r["num_layers"]
    txt = "; ".join(parts)
    v = sv.by_construction("each layer's forward is one batched step for attention, one step per position for a "
                           "recurrence and two convolutions per TCN level, as the code counts them", txt,
                           shown=ok and len(ns) >= 2, test="sequential_steps column (counted, not timed)",
                           effect=txt, margin="exact")
    return v.row(claim="Recurrent layers need O(n) sequential steps, self-attention O(1)",
                 measured="sequential steps of one forward: " + txt, anchor=ANCHOR_T1,
                 rule="by construction if every attention layer's count is L at every seq_len, every recurrent "
                      "layer's L·n and the TCN's 2·levels; fails (an implementation defect) otherwise")


def ceiling_levels(levels, optimum, unit):
    """The ceiling check's levels as decide() quotes them: each arm's level and its headroom to
    the optimum, in ln units (levels: [(label, ln level)])."""
    return "; ".join(f"{lab} {math.exp(x):.2f}{unit}, headroom ln {optimum - x:.3f}" for lab, x in levels) + \
        f"; optimum {math.exp(optimum):g}{unit}"


def _contrast_part(ea, er, label_a, label_r, margin, margin_text, optimum, unit, what):
    """The verdict of one contrast of the thread-scaling or roofline rule: ln level of `label_a`
    (Estimate ea) − ln level of `label_r` (er), Welch, claim GREATER against ±margin, with the
    shared ceiling (seqlab_verdict.at_ceiling: both arms within the margin of the optimum, the ln
    of the ideal level). Returns (effect, Verdict)."""
    eff = welch(ea, er, what=what)
    levels = [(label_a, ea.value), (label_r, er.value)]
    v = sv.decide(eff, margin, sv.GREATER, min_n=2, margin_text=margin_text,
                  ceiling=sv.at_ceiling([ea.value, er.value], optimum, margin),
                  levels=ceiling_levels(levels, optimum, unit), level_margin=margin)
    return eff, v


def _fmt_contrast(eff):
    return f"{eff.value:+.3f} [{eff.lo:.3f}, {eff.hi:.3f}]"


def _attention_alone(shown, counted_parts, mha_vs_layer=None, margin=None):
    """The sentence on self-attention alone beside the Transformer layer, from the shown MHA
    contrasts and the counted layer contrasts ({recurrent label: (effect, Verdict)} each) and the
    contrast MHA − layer (an effect, or None): where the layer leads a recurrent layer (interval
    above 0), its lead is called not attention's only when MHA is equivalent to that recurrent layer
    (interval within ±margin) and below the layer (MHA − layer interval below 0); otherwise the
    sentence says the attribution is not decided. '' when the layer leads none."""
    leads = [lab for lab, (e, _) in counted_parts.items() if e.lo > 0 and lab in shown]
    if not leads:
        return ""
    vs_layer = f"; {LABEL['self_attention']} − the layer {_fmt_contrast(mha_vs_layer)}" if mha_vs_layer else ""
    equivalent = margin is not None and all(-margin <= shown[lab][0].lo and shown[lab][0].hi <= margin
                                            for lab in leads)
    if equivalent and mha_vs_layer is not None and mha_vs_layer.hi < 0:
        return (f"; the Transformer encoder layer's lead over {', '.join(leads)} is not self-attention's: "
                f"{LABEL['self_attention']} alone scales like {'them' if len(leads) > 1 else 'it'} (equivalent "
                f"within ±{margin:.3g}) and below the layer{vs_layer}; what the layer adds to the same attention "
                f"is its feed-forward GEMMs (4·B·n·D·F FLOPs per forward) and two LayerNorms")
    return (f"; whether the Transformer encoder layer's lead over {', '.join(leads)} is self-attention's or its "
            f"feed-forward GEMMs' is not decided here: {LABEL['self_attention']} alone against "
            f"{'them' if len(leads) > 1 else 'it'} is not shown equivalent within ±{margin:.3g}"
            f"{' nor below the layer' if mha_vs_layer is None or mha_vs_layer.hi >= 0 else ''}{vs_layer}")


def _v_scaling(data):
    shape = scaling_shape(data)
    if not shape:
        return None
    att = next((m for m in ["transformer_encoder", "transformer_decoder", "self_attention"]
                if data.rows(part="scaling", model=m)), None)
    mha = "self_attention" if att != "self_attention" and data.rows(part="scaling", model="self_attention") else None
    recs = [m for m in RECURRENT if data.rows(part="scaling", model=m)]
    counted = [m for m in recs if m != "rnn"]
    claim = "Self-attention uses parallel hardware better: more speedup from threads than recurrence"
    anchor = ("ideal: speedup = threads; Vaswani et al. 2017 §1/§4: recurrence 'precludes parallelization within "
              "training examples', self-attention 'can be parallelized'")
    margin = math.log(SPEEDUP_RATIO)
    rule = (f"per gated recurrent layer (LSTM, GRU), ln speedup of the Transformer layer − ln speedup of the "
            f"recurrent layer at {shape['tmax']:g} threads, forward+backward, each the per-round mean over seq_len "
            f"{', '.join(f'{n:g}' for n in shape['ns'])} of ln(t₁/t_N) of the same round, averaged over the rounds "
            f"(t-interval over the paired rounds, Welch across cells), against ±ln {SPEEDUP_RATIO:g}: holds if above, "
            f"fails if below or within; 'inconclusive: ceiling' (seqlab_verdict's rule) when both compared arms are "
            f"within ln {SPEEDUP_RATIO:g} of ideal scaling (headroom ln(threads) − ln speedup, the same statistic); "
            f"combined over LSTM and GRU ('depends on the recurrent layer' when one holds and the other fails); "
            f"inconclusive with more threads than cores; self-attention alone (MHA) against each gated layer by the "
            f"same rule, the RNN's and the TCN's speedups are shown, not counted: the counted arm is the whole "
            f"Transformer layer; the RNN's recurrent step (forward and backward) runs on the calling thread by the "
            f"kernel's design (lib/src/nn/step_gemm.hpp, the transposed per-step products at batches of at least "
            f"half a tile), so its speedup comes from the batched input projection and the weight gradients alone "
            f"and measures that split, not recurrence; the TCN is parallel over positions, not a recurrence; the "
            f"intervals are over the rounds of one run and leave out the variation between runs")
    if not att or not counted or shape["tmax"] <= 1:
        return sv.Verdict(sv.INCONCLUSIVE, "one thread count, the Transformer layer or a gated recurrent layer "
                          "missing").row(claim, "n/a", anchor, rule)
    optimum = math.log(shape["tmax"])
    mt = f"ratio ×/÷ {SPEEDUP_RATIO:g}"
    est = {m: speedup_over_grid(data, m, "forward_backward", shape)
           for m in [att] + ([mha] if mha else []) + recs + (["tcn"] if data.rows(part="scaling", model="tcn") else [])}
    parts, meas, medians, counted_eff, shown_eff = [], [], [], {}, {}
    for m, e in est.items():
        rows = data.rows(part="scaling", model=m, threads=shape["tmax"], **{"pass": "forward_backward"})
        if rows:
            medians.append(f"{LABEL[m]} {math.exp(sum(math.log(x['speedup']) for x in rows) / len(rows)):.2f}")
        shown = "" if m == att or m in counted else " (shown, not counted)"
        meas.append(f"{LABEL[m]}{shown} {math.exp(e.value):.2f} [{math.exp(e.lo):.2f}, {math.exp(e.hi):.2f}]")
    for r in counted:
        eff, v = _contrast_part(est[att], est[r], LABEL[att], LABEL[r], margin, mt, optimum, "×",
                                f"ln speedup {LABEL[att]} − {LABEL[r]}")
        if shape["tmax"] > data.cores() and v.kind in (sv.HOLDS, sv.FAILS):
            v = sv.Verdict(sv.INCONCLUSIVE, f"{shape['tmax']:g} threads on {data.cores():g} cores", test=v.test,
                           effect=v.effect, margin=v.margin, checks=v.checks)
        parts.append((LABEL[r], v))
        counted_eff[LABEL[r]] = (eff, v)
        if mha:
            shown_eff[LABEL[r]] = _contrast_part(est[mha], est[r], LABEL[mha], LABEL[r], margin, mt, optimum, "×",
                                                 f"ln speedup {LABEL[mha]} − {LABEL[r]}")
    mha_vs_layer = None
    if mha:
        mha_vs_layer, _ = _contrast_part(est[mha], est[att], LABEL[mha], LABEL[att], margin, mt, optimum, "×",
                                         f"ln speedup {LABEL[mha]} − {LABEL[att]}")
    v = sv.combine(parts, condition="the recurrent layer")
    contrasts = "; ".join(f"{LABEL[att]} − {lab} {_fmt_contrast(e)}" for lab, (e, _) in counted_eff.items())
    alone = ("; shown, not counted, by the same rule: "
             + "; ".join(f"{LABEL[mha]} − {lab} {_fmt_contrast(e)} (its part would be {vv.text})"
                         for lab, (e, vv) in shown_eff.items())
             if shown_eff else "")
    measured = (f"speedup at {shape['tmax']:g} threads ({data.cores():g} cores; ideal {shape['tmax']:g}), "
                f"forward+backward, batch {shape['batch']:g}, d_model {shape['d']:g}, the rule's statistic (per round "
                f"the geometric mean over seq_len of t₁/t_N, geometric mean over the rounds; 95 % interval over "
                f"rounds): " + "; ".join(meas) + f"; ln speedup contrasts (Welch): {contrasts}" + alone
                + _attention_alone(shown_eff, counted_eff, mha_vs_layer, margin)
                + "; for comparison, the ratio of per-case medians (the main table's speedup column), geometric mean "
                  "over seq_len, which low rounds move less: " + ", ".join(medians))
    return v.row(claim, measured, anchor, rule)


def _v_roofline(data):
    shape = scaling_shape(data)
    att = next((m for m in ["transformer_encoder", "self_attention"] if data.rows(part="scaling", model=m)), None)
    rec = next((m for m in ["lstm", "gru", "rnn"] if data.rows(part="scaling", model=m)), None)
    if not shape or not att or not rec:
        return None

    def frac(m):  # per round: mean over n of ln(roofline fraction), fraction ∝ 1 / time
        per = None
        for n in shape["ns"]:
            r = data.rows(part="scaling", model=m, seq_len=n, threads=1.0, **{"pass": "forward_backward"})[0]
            ts = data.times("scaling", m, "forward_backward", shape["batch"], shape["d"], n, 1.0)
            logs = [math.log(r["roofline_fraction"] * r["time_ms_median"] / t) for t in ts]
            per = logs if per is None else [x + y for x, y in zip(per, logs)]
        return ss.mean_interval([x / len(shape["ns"]) for x in per])
    margin = math.log(ROOFLINE_RATIO)
    mt = f"ratio ×/÷ {ROOFLINE_RATIO:g} (±{margin:.3f} in ln)"
    fam = [m for m in ORDER if m in ("transformer_encoder", "self_attention", "lstm", "gru", "rnn")
           and data.rows(part="scaling", model=m)]
    fr = {m: frac(m) for m in fam}
    eff, v = _contrast_part(fr[att], fr[rec], LABEL[att], LABEL[rec], margin, mt, 0.0, "",
                            f"ln(SGEMM fraction {LABEL[att]} / {LABEL[rec]})")
    # Shown, not counted: the other (attention, gated layer) pairs by the same rule.
    shown = []
    for a in [m for m in ("transformer_encoder", "self_attention") if m in fr]:
        for g in [m for m in ("lstm", "gru") if m in fr]:
            if (a, g) == (att, rec):
                continue
            e, vv = _contrast_part(fr[a], fr[g], LABEL[a], LABEL[g], margin, mt, 0.0, "",
                                   f"ln(SGEMM fraction {LABEL[a]} / {LABEL[g]})")
            shown.append(f"{LABEL[a]} − {LABEL[g]} {_fmt_contrast(e)} (would be {vv.text})")
    levels = ", ".join(f"{LABEL[m]}{'' if m in (att, rec) else ' (shown)'} {math.exp(fr[m].value):.2f}" for m in fam)
    return v.row(
        claim="Attention's work runs as large GEMMs, closer to the machine's peak than recurrent steps",
        measured=f"fraction of the cell's SGEMM rate, 1 thread, forward+backward, geometric mean over seq_len and "
                 f"rounds: {levels}; batch {shape['batch']:g}, d_model {shape['d']:g}; ln ratio {LABEL[att]} − "
                 f"{LABEL[rec]} {_fmt_contrast(eff)}"
                 + (f"; shown, not counted, by the same rule: {'; '.join(shown)}" if shown else ""),
        anchor="SGEMM of the same cell = 1 (roofline reference)",
        rule=f"ln of the ratio of the two fractions ({LABEL[att]} against {LABEL[rec]}), each per round the mean "
             f"over seq_len of ln(fraction), t over rounds, Welch, against ±ln {ROOFLINE_RATIO:g}: holds if the "
             f"attention's is more than {ROOFLINE_RATIO:g}× the recurrent layer's, fails if less than "
             f"1/{ROOFLINE_RATIO:g} of it or within; 'inconclusive: ceiling' (seqlab_verdict's rule) when both "
             f"fractions are within ×/÷ {ROOFLINE_RATIO:g} of the SGEMM rate (headroom ln(1 / fraction), the same "
             f"statistic, below ln {ROOFLINE_RATIO:g}); the other attention and gated-layer pairs are shown by the "
             f"same rule, not counted")


def _n_over_d(n, d):
    """n as a multiple of d: '32d', 'd', 'd/16'."""
    r = n / d
    return "d" if r == 1 else f"{r:g}d" if r > 1 else f"d/{1 / r:g}"


def _config_list(cfg, key):
    """A space-separated list key of meta.json's config as floats ([] when missing)."""
    v = cfg.get(key)
    if v is None:
        return []
    return [float(x) for x in (v if isinstance(v, list) else str(v).split())]


def grid_edges(data, cs, other):
    """Why each crossover of `cs` (crossover_table rows of one pair, each a bound) is not
    interpolated, from the run's config (parts.cpp crossover_points): below the grid, the attention
    slower from the window's first n on; beyond it, the grid ended by the seq_len window (n ≤
    r_max·d: crossover_ratio_max for a recurrent layer, the larger of it and crossover_tcn_ratio_max
    otherwise), by the end of crossover_seq_lens, or else by the FLOP cap crossover_max_gflop (the
    next seq_len lies inside the window, so only the cap leaves it out). '; '-joined, one clause per d."""
    cfg = run_config(data)
    seqs = sorted(_config_list(cfg, "crossover_seq_lens"))
    rmax = float(cfg.get("crossover_ratio_max", math.nan))
    if other not in RECURRENT:
        rmax = max(rmax, float(cfg.get("crossover_tcn_ratio_max", math.nan)))
    cap = cfg.get("crossover_max_gflop")
    groups = {}  # clause -> [d], clauses phrased in multiples of d so that widths share them
    for c in cs:
        d = c["d"]
        if c["kind"] == "<":
            groups.setdefault(f"below the grid (the attention slower from the first n, {_n_over_d(c['n_min'], d)}, "
                              f"on)", []).append(d)
            continue
        nxt = next((n for n in seqs if n > c["n_max"]), None)
        if not seqs or math.isnan(rmax):
            why = "the run's config not recorded in meta.json"
        elif nxt is None:
            why = f"crossover_seq_lens ends at n = {_n_over_d(c['n_max'], d)}"
        elif nxt > rmax * d:
            why = f"the seq_len window ends at n = {_n_over_d(rmax * d, d)}"
        else:
            why = f"the {cap:g}-GFLOP cap, crossover_max_gflop, ends the shared grid at n = {_n_over_d(c['n_max'], d)}"
        groups.setdefault(f"beyond the grid ({why})", []).append(d)
    return "; ".join(f"d {', '.join(f'{d:g}' for d in ds)} {clause}" for clause, ds in groups.items())


def _crossover_level(cs, label):
    """The verdict on log2(n*/d) of one layer's crossovers `cs` (crossover_table rows, one per d)
    against ±log2 CROSSOVER_FACTOR: interpolated crossovers give the mean over their d and the
    interval from the crossings of the timing intervals' ends (the d below or beyond the grid are
    noted, not counted); below (beyond) the grid at every d, the effect is a bound at the grid's
    loosest edge, which fails only if that edge itself lies outside the margin."""
    lg = math.log2(CROSSOVER_FACTOR)
    interp = [c for c in cs if c["kind"] is None]
    below = [c for c in cs if c["kind"] == "<"]
    above = [c for c in cs if c["kind"] == ">"]
    if interp:
        vals = [math.log2(c["n_star"] / c["d"]) for c in interp]
        lo = min(math.log2(c["lo"] / c["d"]) if c["lo"] > 0 else -math.inf for c in interp)
        hi = max(math.log2(c["hi"] / c["d"]) if math.isfinite(c["hi"]) else math.inf for c in interp)
        eff = ss.from_range(sum(vals) / len(vals), lo, hi, what=f"log2(n*/d), {label}",
                            method="interpolated crossings over d; interval: the crossings of the interval ends")
        if below or above:
            eff.notes.append(f"{len(below)} d below and {len(above)} beyond the grid")
    elif below and not above:
        eff = ss.from_range(-math.inf, -math.inf, max(math.log2(c["n_star"] / c["d"]) for c in below),
                            what=f"log2(n*/d), {label}", method="below the grid at every d (a bound)")
    elif above and not below:
        eff = ss.from_range(math.inf, min(math.log2(c["n_star"] / c["d"]) for c in above), math.inf,
                            what=f"log2(n*/d), {label}", method="beyond the grid at every d (a bound)")
    else:
        eff = ss.from_range(float("nan"), float("nan"), float("nan"), what=label)
    if eff.known and math.isinf(eff.value):
        region = sv.region(eff.lo, eff.hi, lg)
        kind = {sv.ABOVE: sv.FAILS, sv.BELOW: sv.FAILS}.get(region, sv.INCONCLUSIVE)
        where = "below" if eff.value < 0 else "beyond"
        edge = eff.hi if eff.value < 0 else eff.lo
        why = (f"the grid's edge, log2(n/d) = {edge:.3g}, lies outside ±{lg:g}" if kind == sv.FAILS else
               f"the grid's edge, log2(n/d) = {edge:.3g}, is not outside ±{lg:g}, so the bound cannot decide")
        return sv.Verdict(kind, f"the crossover lies {where} the seq_len grid at every d: log2(n*/d) in "
                          f"[{eff.lo:.3g}, {eff.hi:.3g}]; {why}", test=eff.method,
                          effect=eff.text(3), margin=f"×/÷ {CROSSOVER_FACTOR:g} on n*/d")
    return sv.decide(eff, lg, sv.EQUAL, min_n=1, margin_text=f"×/÷ {CROSSOVER_FACTOR:g} on n*/d (±{lg:g} in log2)")


def _flop_level(cs, label):
    """_crossover_level on the analytic FLOP crossovers of `cs` (exact: an interpolated FLOP n* is
    its own interval, a bound is the grid's edge): what the FLOP count alone predicts for the part."""
    flop = []
    for c in cs:
        lo, hi = _bound(c["flop_kind"], c["n_flop"])
        flop.append(dict(c, kind=c["flop_kind"], n_star=c["n_flop"], lo=lo, hi=hi))
    return _crossover_level(flop, f"{label}, FLOPs")


def _v_crossover(data, table):
    att = next((a for a in ATTENTION if any(c["attention"] == a for c in table)), None)
    if not att:
        return []
    out = []
    parts_level, parts_slope, meas_level, meas_slope, shown = [], [], [], [], []
    flop_verdicts, flop_differ = [], []
    for o in OTHERS:
        cs = [c for c in table if c["attention"] == att and c["other"] == o]
        if not cs:
            continue
        counted = o in RECURRENT  # Vaswani et al. §4's n < d is about recurrent layers; the TCN is shown
        meas_level.append(f"{LABEL[o]}{'' if counted else ' (shown, not counted)'}: "
                          + ", ".join(f"d {c['d']:g} → {fmt_n(c['kind'], c['n_star'])} "
                                      f"(FLOPs {fmt_n(c['flop_kind'], c['n_flop'])})" for c in cs))
        v = _crossover_level(cs, LABEL[o])
        vf = _flop_level(cs, LABEL[o])
        if counted:
            flop_verdicts.append(f"{LABEL[o]} {vf.text}")
            if v.kind in (sv.HOLDS, sv.FAILS) and v.kind != vf.kind:
                flop_differ.append(LABEL[o])
            same = (f"the same rule on the analytic FLOP crossovers gives {vf.text} too: the FLOP count predicts "
                    f"this part" if vf.kind == v.kind else
                    f"the same rule on the analytic FLOP crossovers would give {vf.text}")
            v = sv.Verdict(v.kind, f"{v.reason}; {same}", test=v.test, effect=v.effect, margin=v.margin,
                           checks=v.checks)
        if counted:
            parts_level.append((LABEL[o], v))
        else:
            shown.append(f"{LABEL[o]}'s own part would be {v.text} ({v.reason})")
        law = crossover_law(table, att, o)
        if law["fit"] and law["n"] >= MIN_LAW_POINTS:
            f = law["fit"]
            e = ss.Estimate(f["slope"] - 1.0, f["lo"] - 1.0, f["hi"] - 1.0, law["n"], se=f["se"], df=f["df"],
                            what=f"slope − 1, {LABEL[o]}", method=f"OLS over {law['n']} of {law['total']} d")
            vs = sv.decide(e, SLOPE_MARGIN, sv.EQUAL, min_n=MIN_LAW_POINTS,
                           margin_text=f"slope 1 ± {SLOPE_MARGIN:g}")
            meas_slope.append(f"{LABEL[o]}{'' if counted else ' (shown, not counted)'} {f['slope']:.2f} "
                              f"[{f['lo']:.2f}, {f['hi']:.2f}] over {law['n']} d")
        else:
            gaps = grid_edges(data, [c for c in cs if c["kind"] is not None], o)
            vs = sv.Verdict(sv.INCONCLUSIVE, f"{law['n']} of {law['total']} d have an interpolated crossover; the fit "
                            f"needs {MIN_LAW_POINTS}: {gaps}", test="OLS of log2 n* on log2 d")
            vrow = vs.row("", "", "", "")
            meas_slope.append(f"{LABEL[o]}{'' if counted else ' (shown, not counted)'}: no slope, "
                              f"{sv.verdict_label(vrow)}: {vs.reason}")
        if counted:
            parts_slope.append((LABEL[o], vs))
    b = table[0]["batch"]
    ds = sorted({c["d"] for c in table})
    not_counted = ("; the TCN is shown, not counted (Vaswani et al. §4's n < d is about recurrent layers; a TCN of "
                   "several convolution levels is not one layer of Table 1's row)")
    if not parts_level:
        return [sv.Verdict(sv.INCONCLUSIVE, "no recurrent layer in the crossover cells").row(
            "A self-attention layer is faster than a recurrent layer for n < d and slower beyond (crossover n ≈ d)",
            "; ".join(meas_level), ANCHOR_T1, "needs a recurrent layer" + not_counted)]
    v = sv.combine(parts_level, condition="the layer")
    flops_note = (f"; the same rule applied to the analytic FLOP crossovers (GEMM work: {LABEL[att]} 8·B·n·d² for "
                  f"its four projections + 4·B·n²·d per forward, against 4·B·n·d² for the RNN, 12 for the GRU and 16 "
                  f"for the LSTM) gives {', '.join(flop_verdicts)}; "
                  + (f"the timings decide differently from it for {', '.join(flop_differ)}" if flop_differ else
                     "wherever the timings decide, they give the FLOP count's verdict: a part's verdict follows from "
                     "which costs are counted, not from a timing effect (Table 1's n²·d against n·d² leaves the "
                     "projections out, and they alone cost the attention more than an RNN step at every n)"))
    out.append(v.row(
        claim="A self-attention layer is faster than a recurrent layer for n < d and slower beyond (crossover n ≈ d)",
        measured=f"{LABEL[att]} against each layer, forward+backward, 1 thread, batch {b:g}, d {', '.join(f'{d:g}' for d in ds)}: "
                 "time crossover n* (FLOP crossover) — " + "; ".join(meas_level) + flops_note
                 + ("; " + "; ".join(shown) if shown else ""),
        anchor=ANCHOR_T1,
        rule=f"per recurrent layer (RNN, LSTM, GRU), log2(n*/d) of the measured time crossovers (mean over the d "
             f"where it is interpolated; interval from the crossings of the timing intervals' ends; below or beyond "
             f"the grid at every d: a bound at the grid's loosest edge, which fails only if that edge lies outside "
             f"the margin) against ±log2 {CROSSOVER_FACTOR:g}: holds if within [d/{CROSSOVER_FACTOR:g}, "
             f"{CROSSOVER_FACTOR:g}d], fails if outside; n* at each d is where ln t_attention − ln t_layer last goes "
             f"from <= 0 to > 0 along the seq_lens (the n beyond which the attention stays slower on the grid; "
             f"no point dropped, so per-call overheads at the smallest n do not set it), below the grid if > 0 at "
             f"every n, beyond it if <= 0 at the last; combined over the recurrent layers ('depends on the layer' "
             f"when some hold and some fail); the same rule on the analytic FLOPs is shown beside it" + not_counted))
    v = sv.combine(parts_slope, condition="the layer")
    out.append(v.row(
        claim="The crossover scales with the width: n*(d) ∝ d (log-log slope 1)",
        measured=f"log-log slope of n* against d ({', '.join(f'{d:g}' for d in ds)}), {LABEL[att]} vs: "
                 + "; ".join(meas_slope),
        anchor=ANCHOR_T1 + "; the per-layer costs n²·d and n·d² are equal at n ∝ d, so n* ∝ d",
        rule=f"per recurrent layer, the OLS slope of log2 n* on log2 d over the d with an interpolated crossover (at "
             f"least {MIN_LAW_POINTS}; t-interval) against 1 ± {SLOPE_MARGIN:g}: holds if the interval lies within, "
             f"fails if outside, inconclusive if it straddles; with fewer interpolated widths inconclusive (too few "
             f"points to fit), naming what bounds each other width (below the grid; beyond it where the seq_len "
             f"window, the end of crossover_seq_lens or the FLOP cap crossover_max_gflop ends the grid); combined "
             f"over the recurrent layers; the TCN's part is shown with its own verdict" + not_counted))
    return out


def _memory_kernels(data):
    """The run's memory_kernels key as meta.json records it (a string or a list), or 'not recorded'."""
    k = run_config(data).get("memory_kernels")
    if k is None:
        return "not recorded in meta.json"
    return " ".join(k) if isinstance(k, list) else str(k)


def bytes_per_token(data):
    """(part, d, n, [(label, bytes per token)]) at the crossover point with the longest seq_len, then
    the widest d, where self-attention was probed with every kernel of the run and every recurrent
    layer too (measured heap growth / (batch·n)); None without such a point."""
    mem = [r for r in data.memory if r["part"] == "crossover"]
    att = sorted({r["kernel"] for r in mem if r["model"] == "self_attention"})
    recs = [m for m in RECURRENT if any(r["model"] == m for r in mem)]
    if not att or not recs:
        return None
    keys = [("self_attention", k) for k in att] + [(m, "none") for m in recs]
    at = {key: {(r["d_model"], r["seq_len"]): r for r in mem if (r["model"], r["kernel"]) == key} for key in keys}
    shared = set.intersection(*(set(v) for v in at.values()))
    if not shared:
        return None
    d, n = max(shared, key=lambda dn: (dn[1], dn[0]))
    vals = []
    for m, k in keys:
        r = at[(m, k)][(d, n)]
        vals.append((f"{LABEL[m]}{' (' + k + ')' if k != 'none' else ''}",
                     r["activation_bytes_measured"] / (r["batch"] * r["seq_len"])))
    return d, n, vals


def largest_memory_gap(data):
    """'; the largest relative difference: …' — the memory point whose measured bytes differ most
    from the analytic count relative to it, with the range of that cell's differences over its
    seq_lens (a constant when they agree within 1 KiB); '' without memory rows."""
    rows = [r for r in data.memory if r["activation_bytes"] > 0]
    if not rows:
        return ""

    def gap(r):
        return r["activation_bytes_measured"] - r["activation_bytes"]
    w = max(rows, key=lambda r: abs(gap(r)) / r["activation_bytes"])
    same = [gap(r) for r in rows if all(r[k] == w[k] for k in ("part", "model", "kernel", "d_model", "batch"))]
    kern = f" {w['kernel']}" if w["kernel"] != "none" else ""
    const = (f", {min(same) / 1024:+.1f} KiB at every seq_len of that cell" if max(same) - min(same) <= 1024 else
             f", {min(same) / 1024:+.1f} to {max(same) / 1024:+.1f} KiB over that cell's seq_lens")
    return (f"; the largest relative difference, measured − analytic: {LABEL.get(w['model'], w['model'])}{kern} "
            f"({w['part']}, d {w['d_model']:g}, batch {w['batch']:g}) {gap(w) / 1024:+.1f} KiB = "
            f"{100 * gap(w) / w['activation_bytes']:+.1f} % at n = {w['seq_len']:g}{const}")


def _v_memory(data):
    fits = memory_fits(data)
    att = [f for f in fits if f["model"] in ATTENTION]
    rec = [f for f in fits if f["model"] in RECURRENT]
    if not att:
        return None
    kernels = sorted({f["kernel"] for f in att})
    meas, effects, as_documented = [], [], True
    matches = all(f["matches"] for f in fits)
    for k in kernels:
        fk = [f for f in att if f["kernel"] == k]
        lo, hi = min(f["c_rel"] for f in fk), max(f["c_rel"] for f in fk)
        share = max(f["share_n2"] for f in fk)
        pts = sorted({f["points"] for f in fk})
        meas.append(f"{k}: c/(4·B·h) = {lo:.3f}–{hi:.3f} over {len(fk)} fits of {pts[0]}"
                    f"{'–' + str(pts[-1]) if pts[-1] != pts[0] else ''} seq_lens each (3 seq_lens fit the 3 "
                    f"parameters exactly; n² share at the longest seq_len up to {share:.2f})")
        effects.append(f"{k}: c/(4·B·h) {lo:.3g}–{hi:.3g}")
        # What the kernel documents: the materialised one keeps P [B, h, n, n] (c = 4·B·h bytes), the
        # fused one the log-sum-exp [B, h, n] (c = 0).
        as_documented = as_documented and (lo > 0.5 if k == "materialised" else hi < 0.05)
    if rec:
        meas.append("recurrent layers: n² share at the longest seq_len at most "
                    f"{max(abs(f['share_n2']) for f in rec):.3f}")
    bpt = bytes_per_token(data)
    if bpt:
        d, n, vals = bpt
        meas.append(f"bytes kept per token at d {d:g}, n {n:g} (crossover cells, measured): "
                    + ", ".join(f"{lab} {x:.0f}" for lab, x in vals))
    meas.append(f"measured heap growth = analytic cache count within 5 % (or 4 KiB) at every point: "
                f"{'yes' if matches else 'no'}{largest_memory_gap(data)} (what the backward itself allocates is "
                f"not measured)")
    claim = "Attention costs more memory: its activation memory grows as n² against n"
    anchor = ("Vaswani et al. 2017 Table 1 (O(n²·d) attention); Dao et al. 2022 (FlashAttention) §3: exact "
              "attention with O(n) extra memory — the n² is a property of the kernel, not of attention")
    rule = ("by construction: the bytes kept for backward are the caches each kernel documents (materialised: the "
            "probabilities P [B, h, n, n], c = 4·B·h bytes per n²; fused: the log-sum-exp [B, h, n], c = 0), shown "
            "per kernel by the least-squares fit a + b·n + c·n² of the measured bytes over the seq_lens of each "
            "timed d (materialised c/(4·B·h) > 0.5 and fused < 0.05 in every fit) with the measured heap growth "
            "equal to the analytic cache count within max(5 %, 4 KiB) at every point; fails (an implementation "
            "defect) when either is contradicted; not counted as evidence")
    if not matches:
        v = sv.measured(sv.FAILS, "the measured bytes differ from the analytic cache count (an implementation defect)",
                        test="heap growth against the documented caches")
    else:
        only = ("" if len(kernels) > 1 else f" (the run measured only the {kernels[0]} kernel: memory_kernels = "
                f"{_memory_kernels(data)}; the {'fused' if kernels[0] == 'materialised' else 'materialised'} "
                f"kernel was not measured)")
        v = sv.by_construction("each kernel keeps what it documents: the materialised kernel P [B, h, n, n] for "
                               "backward, the fused kernel (FlashAttention's tiling) no n × n matrix" + only,
                               "; ".join(meas), shown=as_documented,
                               test="least-squares a + b·n + c·n² on the measured bytes (deterministic)",
                               effect="; ".join(effects), margin="materialised > 0.5, fused < 0.05")
    return v.row(claim, "bytes kept for backward by one forward — " + "; ".join(meas), anchor, rule)


def _v_generation(data):
    gen = data.rows(part="generation")
    if not gen:
        return []
    out = []
    att = next((m for m in ATTENTION if select(gen, model=m)), None)
    rec = next((m for m in RECURRENT if select(gen, model=m)), None)
    if not att or not rec:
        return []
    ns = sorted({r["seq_len"] for r in gen})
    n_hi = ns[-1]

    def steps(m, pas, n):
        return select(gen, model=m, seq_len=n, **{"pass": pas})[0]["sequential_steps"]
    ok = all(steps(m, "decode_step", n) == (n + 1) * select(gen, model=m)[0]["num_layers"] for m in (att, rec)
             for n in ns)
    txt = (f"generating n+1 tokens: {LABEL[att]} {steps(att, 'decode_step', n_hi):g}, {LABEL[rec]} "
           f"{steps(rec, 'decode_step', n_hi):g} steps at n = {n_hi:g}; a forward over the n known tokens: "
           f"{LABEL[att]} {steps(att, 'forward', n_hi):g}, {LABEL[rec]} {steps(rec, 'forward', n_hi):g}")
    out.append(sv.by_construction("each generated token needs the one before it, for every family; only a forward "
                                  "over known tokens (training, a prompt) runs the positions of a Transformer at once",
                                  txt, shown=ok, test="sequential_steps of the generation rows (counted)",
                                  effect=txt).row(
        claim="Autoregressive decoding is sequential for every family: training parallelises over positions, "
              "generation does not",
        measured=txt, anchor="Vaswani et al. 2017 §3.1/§3.2.3: the decoder is auto-regressive, consuming the "
                             "previously generated symbols; the masking keeps training parallel",
        rule="by construction if every decode row's count is (n+1)·L; fails (a defect) otherwise"))

    ta, tr = latency_trend(data, att), latency_trend(data, rec)
    claim = ("With a key/value cache, a Transformer decoder's time per generated token grows with the prefix "
             "(O(n·d) attention over the cache), an LSTM's stays constant (O(d²))")
    anchor = "Vaswani et al. 2017 Table 1 (self-attention O(n·d) per position vs recurrent O(d²))"
    rule = (f"log-log slope of the per-token decoding latency over the upper half of the prefix grid (per round, t over "
            f"rounds), the decoder's − the LSTM's (Welch), against ±{LATENCY_SLOPE:g}: holds if above, fails if "
            f"below or within; the slopes over the two halves of that window (sharing its middle prefix) are "
            f"shown, not decided")
    if ta is None or tr is None:
        out.append(sv.Verdict(sv.INCONCLUSIVE, "too few prefix lengths").row(claim, "n/a", anchor, rule))
    else:
        eff = welch(ta, tr, what="log-log slope, decoder − LSTM")
        v = sv.decide(eff, LATENCY_SLOPE, sv.GREATER, min_n=2)
        dec = {m: {r["seq_len"]: r["time_ms_median"] * 1e3 for r in generation_series(data, m, "decode_step")}
               for m in (att, rec)}
        cross = crossing(ns, [math.log(dec[att][n] / dec[rec][n]) for n in ns])
        regimes = ""
        if latency_regimes(data, att) and latency_regimes(data, rec):
            gf = {r["seq_len"]: r["gflop_per_s"] for r in generation_series(data, att, "decode_step")}
            edges = sorted({x for a, b, _ in latency_regimes(data, att) for x in (a, b)})
            regimes = ("; the slope over each half of that window (shown, not decided): "
                       + "; ".join(f"{LABEL[m]} " + ", ".join(f"{a:g}–{b:g} {e.value:.2f} [{e.lo:.2f}, {e.hi:.2f}]"
                                                             for a, b, e in latency_regimes(data, m))
                                   for m in (att, rec))
                       + f"; the {LABEL[att]}'s decode step runs at " + ", ".join(f"{gf[n]:.1f}" for n in edges)
                       + " GFLOP/s (analytic FLOPs / median time) at prefix " + ", ".join(f"{n:g}" for n in edges))
        out.append(v.row(claim,
                         f"batch 1, 1 thread, d_model {gen[0]['d_model']:g}: per-token latency at prefix "
                         f"{ns[0]:g} → {n_hi:g}: {LABEL[att]} {dec[att][ns[0]]:.0f} → {dec[att][n_hi]:.0f} µs (slope "
                         f"{ta.value:.2f} [{ta.lo:.2f}, {ta.hi:.2f}]), {LABEL[rec]} {dec[rec][ns[0]]:.0f} → "
                         f"{dec[rec][n_hi]:.0f} µs (slope {tr.value:.2f} [{tr.lo:.2f}, {tr.hi:.2f}]), slopes over the "
                         f"prefixes {grid_runs(ns, latency_window(data, rec))}; the decoder's step passes the LSTM's "
                         f"at prefix "
                         f"{fmt_n(*cross)}" + regimes, anchor, rule))

    out.append(_v_decode_gap(data, att, rec, ns))
    return out


def grid_runs(ns, labels):
    """The points `labels` (a subset of the sorted grid `ns`) as runs of grid neighbours joined by
    ', ': '16–512' for three or more, '1024, 2048' for two, '4096' for one."""
    idx = sorted(ns.index(n) for n in labels)
    runs, start = [], None
    for k, i in enumerate(idx):
        if start is None:
            start = i
        if k + 1 == len(idx) or idx[k + 1] != i + 1:
            runs.append(f"{ns[start]:g}" if start == i else f"{ns[start]:g}, {ns[i]:g}" if start + 1 == i
                        else f"{ns[start]:g}–{ns[i]:g}")
            start = None
    return ", ".join(runs)


def by_grid(ns, verdicts):
    """'holds at n = 4096; fails at n = 16–512' for one verdict per grid point (in the order of
    ns), grouped by the verdict's text in order of first appearance."""
    groups = {}
    for n, v in zip(ns, verdicts):
        groups.setdefault(v.text, []).append(n)
    return "; ".join(f"{t} at {'every n' if len(g) == len(ns) else 'n = ' + grid_runs(ns, g)}"
                     for t, g in groups.items())


def _v_decode_gap(data, att, rec, ns):
    """The row 'parallelism over known positions', decided at every prefix of the grid (its rule
    text): per prefix the decoder − LSTM contrast and the LSTM's own ratio, both needed."""
    m = math.log(DECODE_RATIO)
    mt = f"ratio ×/÷ {DECODE_RATIO:g} (±{m:.3f} in ln)"
    contrast, lstm, per_prefix, txt_c, txt_a, txt_r, eff_c, eff_l = [], [], [], [], [], [], [], []
    for n in ns:
        ga, gr = decode_gap(data, att, n), decode_gap(data, rec, n)
        eff = welch(ga, gr)
        vc = sv.decide(eff, m, sv.GREATER, min_n=2, margin_text=mt)
        # The second half, "the LSTM's forward is no faster per token than its decoding":
        # ln(forward per token / decode step) >= −ln DECODE_RATIO (non-inferiority).
        inv = ss.Estimate(-gr.value, -gr.hi, -gr.lo, gr.n, se=gr.se, df=gr.df, method=gr.method)
        vl = sv.decide(inv, m, sv.NO_WORSE, min_n=2, margin_text=mt)
        contrast.append(vc)
        lstm.append(vl)
        per_prefix.append((f"n = {n:g}", sv.combine([("contrast", vc), (LABEL[rec], vl)])))
        txt_c.append(f"{eff.value:+.2f} [{eff.lo:.2f}, {eff.hi:.2f}]")
        eff_c.append(f"n = {n:g} {eff.fmt(3)}")
        eff_l.append(f"n = {n:g} {inv.fmt(3)}")
        txt_a.append(f"{math.exp(ga.value):.2f}")
        txt_r.append(f"{math.exp(gr.value):.2f}")
    vp = sv.combine(per_prefix, condition="the prefix")
    halves = (f"the {LABEL[att]} − {LABEL[rec]} contrast {by_grid(ns, contrast)}; the {LABEL[rec]}'s half "
              f"{by_grid(ns, lstm)}")
    cond = f"the prefix: {by_grid(ns, [v for _, v in per_prefix])}" if vp.kind == sv.DEPENDS else ""
    v = sv.Verdict(vp.kind, f"per prefix both halves must hold: {halves}", condition=cond,
                   test=f"per prefix: Welch t of the two families' ln ratios (contrast), t over the {LABEL[rec]}'s "
                        f"rounds (its half); {contrast[0].test}",
                   effect=f"ln ratio, {LABEL[att]} − {LABEL[rec]}: " + ", ".join(eff_c) + f"; ln(forward per "
                          f"token / decode step), {LABEL[rec]}: " + ", ".join(eff_l), margin=mt, checks=vp.checks)
    grid = ", ".join(f"{n:g}" for n in ns)
    return v.row(
        claim="The Transformer's advantage is parallelism over known positions: it processes a prefix token far "
              "faster in one forward than it generates one, while the LSTM's forward is no faster per token than "
              "its decoding",
        measured=f"batch 1, 1 thread: decode step ÷ (forward over the prefix / n), geometric mean over the rounds, at "
                 f"n = {grid}: {LABEL[att]} {', '.join(txt_a)}×; {LABEL[rec]} {', '.join(txt_r)}×; ln of the "
                 f"{LABEL[att]}'s ratio − the {LABEL[rec]}'s (95 % interval): {', '.join(txt_c)}",
        anchor="Vaswani et al. 2017 §1: recurrence 'precludes parallelization within training examples'",
        rule=f"at every prefix n of the grid ({grid}), two halves, each with ln(decode step / (forward over the "
             f"prefix / n)) per round (paired), t over rounds: (1) the {LABEL[att]}'s − the {LABEL[rec]}'s (Welch) "
             f"against ±ln {DECODE_RATIO:g}: holds if above, fails if below or within; (2) the {LABEL[rec]}'s "
             f"forward no faster per token than its decoding: ln(forward per token / decode step), the negative of "
             f"its ln ratio, holds if its interval lies above −ln {DECODE_RATIO:g} (within ±ln {DECODE_RATIO:g} or "
             f"above), fails if below; "
             f"the prefix's part holds if both hold, fails if either fails; over the prefixes: holds if every "
             f"prefix holds, 'depends on the prefix' when some hold and some fail, fails if some fail and none "
             f"holds, inconclusive otherwise")


def _v_tta(data):
    tta = data.tta
    if not tta:
        return []
    ta_model = next((m for m in ATTENTION if select(tta, model=m)), None)
    tr_model = next((m for m in ["lstm", "gru", "rnn", "tcn"] if select(tta, model=m)), None)
    if not ta_model or not tr_model:
        return []
    A, R = select(tta, model=ta_model), select(tta, model=tr_model)
    target = A[0]["target_bpc"]
    unigram = A[0]["unigram_bpc"]
    controls = abs(A[0]["n_params"] / R[0]["n_params"] - 1) <= PARAM_TOLERANCE
    floor = target >= unigram  # a target the context-free baseline already reaches decides nothing
    lr = {m: next((r["lr"] for r in data.lr if r["model"] == m and r["chosen"] == 1), float("nan"))
          for m in (ta_model, tr_model)}
    setup = (f"text (character LM) at seq_len {A[0]['seq_len']:g}, batch {A[0]['batch']:g}, {A[0]['threads']:g} "
             f"thread(s), target {target:g} bits per character on the validation subset (unigram baseline "
             f"{unigram:.2f}); {int(A[0]['n_params'])} vs {int(R[0]['n_params'])} parameters; learning rate from the "
             f"grid {LABEL[ta_model]} {lr[ta_model]:g}, {LABEL[tr_model]} {lr[tr_model]:g}")
    anchor = ("Vaswani et al. 2017 §6.1 and Table 2: the base Transformer trained in 12 hours on 8 P100 GPUs, a "
              "fraction of the training cost of the recurrent and convolutional models")
    out = []

    def cens(runs, col, budget):
        return [ss.Censored(r[col] if r["reached"] == 1 else r[budget], r["reached"] == 1 and not r["diverged"])
                for r in runs]

    def summary(runs, col):
        got = [r[col] for r in runs if r["reached"] == 1]
        return (f"{len(got)}/{len(runs)} reached" + (f", median {median(got):.4g}" if got else ""))

    for col, budget, claim, unit in (
            ("time_to_target_s", "train_time_s", "Transformers train faster: less wall-clock time to a target "
             "bits per character at equal parameter count", "s"),
            ("steps_to_target", "steps_done", "Sample efficiency: fewer updates to the target (not parallelism)",
             "updates")):
        g = ss.gehan_test(cens(A, col, budget), cens(R, col, budget))
        if len(A) < sv.MIN_SEEDS or len(R) < sv.MIN_SEEDS:
            v = sv.Verdict(sv.INCONCLUSIVE, f"{len(A)} and {len(R)} runs; the rule needs {sv.MIN_SEEDS} each",
                           test=g.method)
        else:
            v = sv.decide_rank(g, sv.GREATER, controls=controls, floor=floor,
                               effect=f"{LABEL[ta_model]} earlier in {g.a_earlier}, later in {g.b_earlier} of "
                                      f"{g.n_a * g.n_b} run pairs")
        out.append(v.row(claim, f"{setup}: {unit} to target {LABEL[ta_model]} {summary(A, col)}, {LABEL[tr_model]} "
                                f"{summary(R, col)}", anchor,
                         f"Gehan's censored rank test of the {unit} to the target (a run that never reached it is "
                         f"censored at its budget), exact permutation p: holds if the one-sided p that the "
                         f"Transformer is earlier is <= 0.05, fails if p <= 0.05 the other way; inconclusive "
                         f"otherwise or with fewer than {sv.MIN_SEEDS} runs each; floor when the target is not below "
                         f"the unigram baseline; controls: parameters within ±5 %"))
    ms = {m: {r["seed"]: math.log(r["time_ms_median"]) for r in data.rows(part="tta", model=m)}
          for m in (ta_model, tr_model)}
    eff = ss.paired_difference(ms[ta_model], ms[tr_model], what=f"ln(ms per update {LABEL[ta_model]} / "
                                                                    f"{LABEL[tr_model]})")
    v = sv.decide(eff, math.log(UPDATE_RATIO), sv.LESS, controls=controls,
                  margin_text=f"ratio ×/÷ {UPDATE_RATIO:g}")
    per = {m: math.exp(sum(ms[m].values()) / len(ms[m])) for m in ms if ms[m]}
    out.append(v.row(
        "Speed per update: a Transformer update takes less time than an LSTM update at equal parameter count",
        f"{setup}: median ms per update over the evaluation windows, geometric mean over seeds: "
        + ", ".join(f"{LABEL[m]} {per[m]:.1f}" for m in per), anchor,
        f"ln of the per-update time ratio, paired by seed (the same training windows), t-interval, against ±ln "
        f"{UPDATE_RATIO:g}: holds if below (the Transformer faster), fails if above or within"))
    return out


def verdicts(results_dir):
    data = Data(results_dir)
    table = crossover_table(data)
    out = [_v_steps(data), _v_scaling(data), _v_roofline(data)]
    out += _v_crossover(data, table) if table else []
    out.append(_v_memory(data))
    out += _v_generation(data)
    out += _v_tta(data)
    return [r for r in out if r is not None]


# The paper-scale submission, the one command that README "Paper scale" shows and
# beyond_this_machine() prints: a whole node per cell (32 cores: paper.ini's largest thread count
# and its tta_threads; --exclusive), --mem = paper.ini's max_activation_gib (32 GiB: the largest
# analytic activation, 8.3 GiB at the self-attention crossover point d 256, n 8192, with room for
# the backward's buffers), --time about twice the largest cell's estimate (estimate_cost.py
# configs/paper.ini: a Transformer decoder or TCN tta cell, 1722.8 min = 28.7 h at its 1-thread
# rates), and checkpoints every 200 updates (two tta_eval_every windows) so that a tta cell that
# runs out of --time resumes when the same command is run again.
PAPER_SLURM = dict(cpus=32, mem="32G", time="60:00:00", checkpoint_every=200,
                   sbatch="--exclusive --partition=PARTITION")
PAPER_COST = ("estimate_cost.py configs/paper.ini, at its 1-thread rates (it ignores tta_threads; not measured on "
              "a cluster): a scaling cell 5.1–107.4 min (Transformer encoder 28.7), a crossover cell 9.0–36.7, a "
              "generation cell 1.2–1.9, a tta cell 1149.1–1722.8 (every run to tta_max_steps); 7213.0 min over the "
              "21 cells. A tta cell that runs out of --time resumes from its checkpoints when the same command is "
              "run again")


def paper_command():
    """The Slurm command of the paper-scale sweep (PAPER_SLURM; README "Paper scale")."""
    return sv.paper_sweep(NAME, **PAPER_SLURM)


def beyond_this_machine():
    """What this experiment cannot decide on the 2-core development machine (plots/make_report.py,
    "What this suite cannot decide here"; keys seqlab_verdict.BEYOND_KEYS)."""
    return [sv.beyond(
        "Thread scaling past 2 cores: self-attention gains more speedup from threads than recurrence "
        "(paper.ini: d_model 512, batch 32, n 128–1024, 1–32 threads)",
        "this machine has 2 cores shared with other jobs, so a speedup can reach at most 2× and load distorts "
        "it; the paper cells need an idle many-core node each (paper.ini: thread_counts up to the node's cores)",
        paper_command(), PAPER_COST)]


if __name__ == "__main__":
    main(sys.argv)
