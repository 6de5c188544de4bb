#!/usr/bin/python3
"""Figures and verdicts for experiments/position_extrapolation (claim 3: positional encodings).

usage: plot_position_extrapolation.py [RESULTS_DIR]   (default: results/position_extrapolation)

Reads from RESULTS_DIR: position_extrapolation.csv (runs), _eval.csv, _steps.csv (training curves,
for the verdicts' convergence check), _pilot.csv (the learning-rate pilot), _similarity.csv,
_resolution.csv, _aliasing.csv, _rope_decay.csv and position_extrapolation.meta.json. Writes into
RESULTS_DIR/figures:
  position_extrapolation_text.{png,pdf}     character LM perplexity vs evaluation length, one line
                                            per encoding (mean and 95% CI band over seeds), a panel
                                            per evaluation mode (rows: non-overlapping, sliding)
                                            and per bucket (columns: the whole window; the
                                            positions >= L_train only); dashed: after fine-tuning
  position_extrapolation_<task>.{png,pdf}   copy, mqar, passkey: accuracy vs length (all scored
                                            positions; predictions at positions >= L_train; for
                                            mqar and passkey evidence >= L_train back)
  position_extrapolation_similarity.{png,pdf} and position_extrapolation_similarity_table.csv
  position_extrapolation_rope_decay.{png,pdf}  RoPE long-term decay, with and without scaling
  position_extrapolation_resolution.{png,pdf}  separation of positions by frequency band
Figures whose data the run did not produce are skipped. verdicts(results_dir) returns the report
rows (plots/make_report.py). Exits 2 naming a missing file or column.
"""
import csv
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seqlab_stats as ss  # noqa: E402
import seqlab_style as st  # noqa: E402
import seqlab_verdict as sv  # noqa: E402

NAME = "position_extrapolation"
ENCODINGS = ["sinusoidal", "learned", "rope", "rope_pi", "rope_ntk", "alibi", "t5_bias", "none"]
TASKS = ["text", "copy", "mqar", "passkey"]
TASK_TITLE = {"text": "character-level language model", "copy": "copy at a fixed offset",
              "mqar": "scattered multi-query associative recall", "passkey": "passkey retrieval"}
CLAIMED = {1: 0.92, 10: 0.65, 100: 0.12, 1000: -0.06}
MODES = ("non_overlapping", "sliding")

RUN_COLS = ["task", "positional_encoding", "variant", "seed", "L_train", "max_eval_len", "n_params", "steps", "lr",
            "finetune_len", "finetune_steps", "finetune_lr", "diverged", "untrained_position_rows"]
# The eval and steps tables' fine-tune columns (finetune_lr_scale, finetune_step) are read when present
# (fill_finetune_columns supplies them for tables written before them).
EVAL_COLS = ["task", "positional_encoding", "variant", "seed", "mode", "stride", "L_train", "eval_len",
             "eval_ratio", "bucket", "n_scored", "loss_nats", "perplexity", "accuracy", "baseline_accuracy",
             "baseline_loss_nats"]
SIM_COLS = ["d_model", "distance", "position", "dot", "cosine", "dot_closed_form",
            "cosine_closed_form", "claimed_cosine"]
RES_COLS = ["d_model", "band", "distance", "cosine", "separation"]
ALIAS_COLS = ["d_model", "band", "n_frequencies", "period_min", "period_max", "separation_at_1",
              "monotone_to", "first_alias_distance", "closest_far_distance",
              "closest_far_separation", "searched_to"]
STEP_COLS = ["task", "positional_encoding", "variant", "seed", "phase", "step", "train_loss"]
PILOT_COLS = ["task", "positional_encoding", "lr", "val_loss", "chosen"]
DECAY_COLS = ["positional_encoding", "seed", "head_dim", "scale", "distance", "mean_abs_score_iid",
              "mean_abs_score_shared", "mean_score_shared", "roformer_bound"]


def path_of(res, table):
    return os.path.join(res, NAME + (".csv" if table == "main" else f"_{table}.csv"))


def read_table(res, table, required):
    """Rows (dicts) of a table; the file and its columns must exist, rows may be none (a table
    the grid did not fill is written with its header only)."""
    path = path_of(res, table)
    if not os.path.isfile(path):
        raise st.DataError(f"CSV not found: {path}")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames or []
        missing = [c for c in required if c not in cols]
        if missing:
            raise st.DataError(f"{path}: missing column(s) {', '.join(missing)} (has: {', '.join(cols)})")
        rows = list(reader)
    for r in rows:
        r["_path"] = path
    return rows


def num(r, k):
    return st.number(r, k, r.get("_path", "CSV"))


def fill_finetune_columns(d):
    """Tables written before fine-tunes were evaluated along the way (one fine-tune per variant,
    evaluated once, no finetune_lr_scale / finetune_step columns): their fine-tuned rows are the
    run's only budget (finetune_steps) at its only rate scale (finetune_lr / lr)."""
    runs = {(r["task"], r["positional_encoding"], r["seed"]): r for r in d["runs"] if r["variant"] == "finetuned"}
    for table in ("eval", "steps"):
        for r in d[table]:
            if "finetune_lr_scale" in r and (table == "steps" or "finetune_step" in r):
                continue
            run = runs.get((r["task"], r["positional_encoding"], r["seed"])) if r["variant"] == "finetuned" else None
            scale = num(run, "finetune_lr") / num(run, "lr") if run else 0.0
            r["finetune_lr_scale"] = f"{scale:.6g}"
            if table == "eval":
                r["finetune_step"] = str(int(num(run, "finetune_steps"))) if run else "0"


def load(res):
    d = {"runs": read_table(res, "main", RUN_COLS),
         "eval": read_table(res, "eval", EVAL_COLS),
         "pilot": read_table(res, "pilot", PILOT_COLS),
         "similarity": read_table(res, "similarity", SIM_COLS),
         "resolution": read_table(res, "resolution", RES_COLS),
         "aliasing": read_table(res, "aliasing", ALIAS_COLS),
         "rope_decay": read_table(res, "rope_decay", DECAY_COLS),
         "steps": read_table(res, "steps", STEP_COLS)}
    if not d["runs"]:
        raise st.DataError(f"{path_of(res, 'main')}: no data rows")
    fill_finetune_columns(d)
    d["meta"] = st.read_meta(os.path.join(res, NAME + ".meta.json"))
    return d


def is_lm(task):
    return task == "text"


def metric_of(task):
    """(column, higher is better) of a task's plotted metric."""
    return ("perplexity", False) if is_lm(task) else ("accuracy", True)


def encoding_order(rows):
    """The built-in encodings in their fixed order, then any other encoding present in rows (one a
    user registered: lib/README.md "Extending seqlab"), sorted by name."""
    return ENCODINGS + sorted({r["positional_encoding"] for r in rows} - set(ENCODINGS))


def select(evals, task, enc, variant, bucket, mode=None):
    return [r for r in evals if r["task"] == task and r["positional_encoding"] == enc and r["variant"] == variant
            and r["bucket"] == bucket and (mode is None or r["mode"] == mode)]


def series(evals, task, enc, variant, bucket, column, mode=None):
    """{eval_ratio: [value per seed]} of one line, nan values left out."""
    out = defaultdict(list)
    for r in select(evals, task, enc, variant, bucket, mode):
        v = num(r, column)
        if not math.isnan(v):
            out[int(num(r, "eval_ratio"))].append(v)
    return out


def lines_of(evals, task):
    """(encoding, variant, label) present for a task: built-ins in the fixed order, then others."""
    out = []
    for enc in encoding_order(evals):
        for variant in ("zero_shot", "finetuned"):
            if any(r["task"] == task and r["positional_encoding"] == enc and r["variant"] == variant for r in evals):
                out.append((enc, variant, enc + (" fine-tuned" if variant == "finetuned" else "")))
    return out


def fmt(m, ci, digits=3):
    return f"{m:.{digits}g} ± {ci:.2g}"


# --- figures --------------------------------------------------------------------------------------

# One colour per encoding (Okabe-Ito and neighbours), so the rope variants and the absolute encodings
# never share a hue; an encoding a user registered takes the palette in order.
COLORS = {"sinusoidal": "#0072B2", "learned": "#7F7F7F", "rope": "#009E73", "rope_pi": "#D55E00",
          "rope_ntk": "#CC79A7", "alibi": "#56B4E9", "t5_bias": "#B5A300", "none": "#000000"}


def color_of(enc, order):
    return COLORS.get(enc, st.PALETTE[order.index(enc) % len(st.PALETTE)])


def figure_view(d, task):
    """The eval rows of a task's length figure: zero-shot, and fine-tuned at the first fine-tune rate
    after the verdicts' budget; with (rate, updates) or None."""
    scales = finetune_scales(d["eval"], task)
    if not scales:
        return [r for r in d["eval"] if r["task"] == task], None
    k = verdict_budget(d["eval"], task)
    return [r for r in at_budget(d, task, scales[0], k)["eval"] if r["task"] == task], (scales[0], k)


def finetune_note(d, task, ft):
    return "" if ft is None else (f"dashed: fine-tuned at L' = {finetune_len(d, task)} for {ft[1]} updates at "
                                  f"{ft[0]:g} × the pilot's rate")


def draw_lines(ax, evals, task, bucket, column, mode, L, Lf=0):
    order = encoding_order(evals)
    for enc, variant, label in lines_of(evals, task):
        s = series(evals, task, enc, variant, bucket, column, mode)
        xs = sorted(s)
        if not xs:
            continue
        stats = [st.mean_ci95(s[x]) for x in xs]
        k = order.index(enc)
        color = color_of(enc, order)
        xl = [x * L for x in xs]
        ax.plot(xl, [m for m, _ in stats], "--" if variant == "finetuned" else "-", color=color,
                marker=st.MARKERS[k % len(st.MARKERS)], markersize=4, label=label)
        ax.fill_between(xl, [m - c for m, c in stats], [m + c for m, c in stats], color=color, alpha=0.12,
                        linewidth=0)
    ax.axvline(L, color="grey", linestyle=":", linewidth=1.2)
    ax.text(L, 0.01, " L_train", transform=ax.get_xaxis_transform(), fontsize=8, color="grey", va="bottom")
    if Lf:
        ax.axvline(Lf, color="grey", linestyle="-.", linewidth=1)
        ax.text(Lf, 0.01, " L' (fine-tune)", transform=ax.get_xaxis_transform(), fontsize=8, color="grey",
                va="bottom")
    ax.set_xscale("log", base=2)
    ticks = sorted({int(num(r, "eval_len")) for r in evals if r["task"] == task})
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks], fontsize=7)
    ax.set_xlabel("evaluation length (tokens)")


def legend_below(fig, axes, ncol=6):
    """One legend for the figure, under the panels (so it covers no line or baseline)."""
    handles, labels = {}, []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    fig.legend([handles[lab] for lab in labels], labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=ncol, fontsize=8)


def plot_text(d, out_dir):
    evals, ft = figure_view(d, "text")
    if not evals:
        return []
    L = int(num(evals[0], "L_train"))
    Lf = finetune_len(d, "text") if ft else 0
    note = st.scale_note(d["meta"], len({r["seed"] for r in evals}))
    fig, axes = st.plt.subplots(2, 2, figsize=(11.5, 8.8), sharey=True, squeeze=False)
    base = math.exp(num(evals[0], "baseline_loss_nats"))
    for i, mode in enumerate(MODES):
        stride = next((int(num(r, "stride")) for r in evals if r["mode"] == mode), 0)
        for j, (bucket, what) in enumerate((("all", "every scored position"),
                                             ("beyond_train_len", f"positions >= L_train = {L}"))):
            ax = axes[i][j]
            draw_lines(ax, evals, "text", bucket, "perplexity", mode, L, Lf)
            ax.axhline(base, color="black", linestyle=":", linewidth=1, label=f"unigram ({base:.3g})")
            st.label_log_axis(ax, "y")
            if j == 0:
                ax.set_ylabel("test perplexity (per character)")
            mtxt = ("non-overlapping windows" if mode == "non_overlapping"
                    else f"sliding windows, stride {stride}")
            ax.set_title(f"{mtxt}: {what}", fontsize=9)
    fig.suptitle(f"Character-level language model on the KJV against the evaluation length ({note}"
                 + (f";\n{finetune_note(d, 'text', ft)}" if ft else "") + ")", fontsize=9)
    fig.subplots_adjust(hspace=0.35, wspace=0.12, top=0.9 if ft else 0.93)
    legend_below(fig, axes.ravel())
    return st.save(fig, out_dir, f"{NAME}_text")


def finetune_len(d, task):
    lens = {int(num(r, "finetune_len")) for r in d["runs"] if r["task"] == task and r["variant"] == "finetuned"}
    return max(lens) if lens else 0


def same_beyond(evals, a, b):
    """Whether buckets a and b score the same positions at every length beyond 1x (then a panel of
    b repeats the one of a there, e.g. passkey, whose answer is always at the end of the row)."""
    n = defaultdict(dict)
    for r in evals:
        if int(num(r, "eval_ratio")) > 1 and r["bucket"] in (a, b):
            n[(r["positional_encoding"], r["variant"], r["seed"], r["finetune_lr_scale"], r["finetune_step"],
               r["eval_ratio"])][r["bucket"]] = num(r, "n_scored")
    return bool(n) and all(len(v) == 2 and v[a] == v[b] for v in n.values())


def plot_task(d, task, out_dir):
    evals, ft = figure_view(d, task)
    if not evals:
        return []
    L = int(num(evals[0], "L_train"))
    Lf = finetune_len(d, task) if ft else 0
    note = st.scale_note(d["meta"], len({r["seed"] for r in evals}))
    buckets = [("all", "all scored positions")]
    if not same_beyond(evals, "all", "beyond_train_len"):
        buckets.append(("beyond_train_len", f"predictions at positions >= {L}"))
    if any(r["bucket"] == "distance_beyond_train_len" for r in evals):
        buckets.append(("distance_beyond_train_len", f"evidence >= {L} positions back"))
    fig, axes = st.plt.subplots(1, len(buckets), figsize=(5.0 * len(buckets) + 0.6, 4.4), sharey=True,
                                squeeze=False)
    for ax, (bucket, what) in zip(axes[0], buckets):
        draw_lines(ax, evals, task, bucket, "accuracy", None, L, Lf)
        base = defaultdict(list)
        for r in evals:
            if r["bucket"] == "all":
                base[int(num(r, "eval_len"))].append(num(r, "baseline_accuracy"))
        xs = sorted(base)
        ax.plot(xs, [sum(base[x]) / len(base[x]) for x in xs], ":", color="black", linewidth=1,
                label="baseline (ignores the dependency)")
        ax.set_ylim(0, 1.02)
        ax.set_title(what, fontsize=9)
    axes[0][0].set_ylabel("test accuracy on scored tokens (fraction)")
    fig.suptitle(f"{TASK_TITLE[task]} against the evaluation length ({note}"
                 + (f";\n{finetune_note(d, task, ft)}" if ft else "") + ")", fontsize=9)
    fig.subplots_adjust(wspace=0.1, top=0.84 if ft else 0.88)
    legend_below(fig, axes[0], ncol=5)
    return st.save(fig, out_dir, f"{NAME}_{task}")


def plot_finetune(d, out_dir):
    """Chen et al. Table 4's shape: each fine-tuned variant's metric against its fine-tune updates,
    at 1x, inside the fine-tuned window (2x..L') and beyond it, one row of panels per task, one line
    per variant and rate (solid: the first rate, dashed: the next); the zero-shot level of the
    same weights as a marker at 0 updates. Also writes the numbers as a tidy CSV."""
    tasks = [t for t in TASKS if finetune_scales(d["eval"], t)]
    if not tasks:
        return []
    out_rows = []
    fig, axes = st.plt.subplots(len(tasks), 3, figsize=(13, 3.6 * len(tasks) + 0.6), squeeze=False)
    order = encoding_order(d["eval"])
    for i, task in enumerate(tasks):
        rows = [r for r in d["eval"] if r["task"] == task]
        L = int(num(rows[0], "L_train"))
        Lf = finetune_len(d, task)
        ratios = sorted({int(num(r, "eval_ratio")) for r in rows})
        inside = [r for r in ratios if r > 1 and r * L <= Lf]
        far = [r for r in ratios if r * L > Lf]

        def span(rs):
            return f"{rs[0]}x" if len(rs) == 1 else f"{rs[0]}x..{rs[-1]}x"
        groups = [("1x (the training window)", [1]),
                  (f"{span(inside)} (inside L' = {Lf})" if inside else "", inside),
                  (f"{span(far)} (beyond L' = {Lf})" if far else "", far)]
        mode = primary_mode(task)
        col = "loss (nats/char, sliding windows)" if is_lm(task) else "accuracy"
        budgets = finetune_budgets(d["eval"], task)
        for j, (title, rs) in enumerate(groups):
            ax = axes[i][j]
            if not rs:
                ax.axis("off")
                continue
            for n_sc, sc in enumerate(finetune_scales(d["eval"], task)):
                for enc in ("rope", "rope_pi", "rope_ntk"):
                    pts = []
                    for k in budgets:
                        ev = at_budget(d, task, sc, k)["eval"]
                        per = [level(ev, task, enc, "finetuned", r, mode) for r in rs]
                        seeds = set.intersection(*[set(p) for p in per])
                        vals = [sum(p[s] for p in per) / len(per) for s in seeds]
                        if vals:
                            m, c = st.mean_ci95(vals)
                            pts.append((k, m, c))
                            out_rows.append([task, enc, f"{sc:g}", k, "+".join(str(r) for r in rs), len(vals),
                                             f"{m:.6g}", f"{c:.3g}"])
                    if not pts:
                        continue
                    color = color_of(enc, order)
                    ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], color=color,
                                linestyle="-" if n_sc == 0 else "--", marker=st.MARKERS[order.index(enc) % 8],
                                markersize=4, capsize=2, label=f"{enc} fine-tuned, rate {sc:g}×")
            for enc in ("rope", "rope_pi", "rope_ntk"):  # before fine-tuning (zero-shot, the same weights)
                z = mean_over(d["eval"], task, enc, "zero_shot", mode, rs)
                if not math.isnan(z):
                    ax.plot([budgets[0] / 2], [z], marker="x", linestyle="none", color=color_of(enc, order),
                            markersize=7, label=f"{enc} before fine-tuning")
            ax.set_xscale("log", base=2)
            ticks = [budgets[0] / 2] + budgets
            ax.set_xticks(ticks)
            ax.set_xticklabels(["0"] + [str(k) for k in budgets], fontsize=7)
            ax.set_xlabel("fine-tune updates at L'")
            ax.set_title(f"{task}: {title}", fontsize=9)
            if j == 0:
                ax.set_ylabel(col)
            if not is_lm(task):
                ax.set_ylim(0, 1.02)
    fig.suptitle(f"Fine-tuning rope three ways at L' against the updates (Chen et al. 2023 Table 4's shape; "
                 f"{st.scale_note(d['meta'], len({r['seed'] for r in d['eval'] if r['variant'] == 'finetuned'}))})",
                 fontsize=9)
    fig.subplots_adjust(hspace=0.45, wspace=0.18, top=0.9 if len(tasks) > 1 else 0.85)
    legend_below(fig, axes.ravel())
    csv_path = write_table(out_dir, "finetune_table", ["task", "positional_encoding", "finetune_lr_scale",
                                                       "finetune_step", "eval_ratios", "n_seeds", "mean", "ci95"],
                           out_rows)
    return st.save(fig, out_dir, f"{NAME}_finetune") + [csv_path]


def write_table(out_dir, stem, header, rows):
    """Writes <out_dir>/<NAME>_<stem>.csv (header, rows); returns its path."""
    path = os.path.join(out_dir, f"{NAME}_{stem}.csv")
    os.makedirs(out_dir, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return path


LEVEL_HEADER = ["task", "positional_encoding", "variant", "finetune_lr_scale", "finetune_step", "mode",
                "eval_ratio", "bucket", "metric", "n_seeds", "mean", "ci95_lo", "ci95_hi", "baseline"]


def levels_rows(d):
    """The levels behind the README's results tables: per task, encoding, variant (the fine-tunes at
    each rate after the verdicts' budget, verdict_budget), evaluation mode and ratio, the mean
    over seeds of the task's metric (perplexity for text, accuracy otherwise) with its t-interval,
    at 1x over every scored position (bucket 'all') and beyond 1x over the positions >= L_train
    ('beyond_train_len'), and the baseline's mean (the unigram perplexity for text, the
    baseline_accuracy otherwise)."""
    rows = []
    ev = d["eval"]
    for task in TASKS:
        column, _ = metric_of(task)
        budget = verdict_budget(ev, task)
        keys = sorted({(r["positional_encoding"], r["variant"], ft_scale(r), ft_step(r), r["mode"], int(num(r, "eval_ratio")))
                       for r in ev if r["task"] == task},
                      key=lambda k: (encoding_order(ev).index(k[0]) if k[0] in encoding_order(ev) else 99,
                                     k[1] != "zero_shot", k[2], k[3], k[4], k[5]))
        for enc, variant, scale, step, mode, ratio in keys:
            if variant == "finetuned" and step != budget:
                continue
            bucket = "all" if ratio == 1 else "beyond_train_len"
            sel = [r for r in ev if r["task"] == task and r["positional_encoding"] == enc and r["variant"] == variant
                   and ft_scale(r) == scale and ft_step(r) == step and r["mode"] == mode
                   and int(num(r, "eval_ratio")) == ratio and r["bucket"] == bucket]
            if not sel:
                continue
            e = ss.mean_interval([num(r, column) for r in sel])
            base = [math.exp(num(r, "baseline_loss_nats")) if is_lm(task) else num(r, "baseline_accuracy") for r in sel]
            rows.append([task, enc, variant, f"{scale:g}", step, mode, ratio, bucket, column, e.n,
                         f"{e.value:.6g}", f"{e.lo:.6g}", f"{e.hi:.6g}", f"{sum(base) / len(base):.6g}"])
    return rows


def similarity_table(d):
    """[(d_model, k, cos, cos_cf, dot, dot_min, dot_max, claimed)] from the similarity rows."""
    groups = defaultdict(list)
    for r in d["similarity"]:
        groups[(int(num(r, "d_model")), int(num(r, "distance")))].append(r)
    out = []
    for (D, k), rs in sorted(groups.items()):
        dots = [num(r, "dot") for r in rs]
        p0 = min(rs, key=lambda r: num(r, "position"))
        out.append((D, k, num(p0, "cosine"), num(p0, "cosine_closed_form"), num(p0, "dot"),
                    min(dots), max(dots), num(p0, "claimed_cosine")))
    return out


def plot_similarity(d, out_dir):
    table = similarity_table(d)
    if not table:
        return []
    csv_path = write_table(out_dir, "similarity_table", ["d_model", "distance", "cosine", "cosine_closed_form",
                                                         "dot_at_p0", "dot_min_over_p", "dot_max_over_p",
                                                         "claimed_cosine"],
                           [[row[0], row[1]] + [f"{v:.6g}" for v in row[2:]] for row in table])
    Ds = sorted({t[0] for t in table})
    ks = sorted({t[1] for t in table})
    cos = {(t[0], t[1]): t[2] for t in table}
    dot = {(t[0], t[1]): (t[5], t[6]) for t in table}
    fig, ax = st.plt.subplots(figsize=(8.5, 0.5 * (len(Ds) + 2) + 1.2))
    ax.axis("off")
    header = ["d_model"] + [f"k = {k}" for k in ks]
    cells = [[str(D)] + [f"cos {cos[(D, k)]:.3f}\ndot {dot[(D, k)][0]:.4g}" for k in ks] for D in Ds]
    cells.append(["claimed (512)"] + [f"cos {CLAIMED.get(k, float('nan')):.2f}" for k in ks])
    tab = ax.table(cellText=cells, colLabels=header, loc="center", cellLoc="center")
    tab.auto_set_font_size(False)
    tab.set_fontsize(8)
    tab.scale(1, 2.2)
    for (i, j), c in tab.get_celld().items():
        if i == len(Ds) + 1:
            c.set_facecolor("#fde0c5")
    spread = max((t[6] - t[5]) for t in table)
    ax.set_title("Sinusoidal PE(p)·PE(p+k): cosine and dot product (computed from the library's table;\n"
                 f"the same at every position p tested: largest spread of the dot over p = {spread:.2g})",
                 fontsize=9)
    return st.save(fig, out_dir, f"{NAME}_similarity") + [csv_path]


def plot_rope_decay(d, out_dir):
    rows = d["rope_decay"]
    if not rows:
        return []
    groups = defaultdict(lambda: defaultdict(list))
    for r in rows:
        key = (r["positional_encoding"], int(num(r, "scale")))
        groups[key][int(num(r, "distance"))].append(r)
    hd = int(num(rows[0], "head_dim"))
    seeds = sorted({r["seed"] for r in rows})
    fig, axes = st.plt.subplots(1, 2, figsize=(11, 4.2))
    for i, (key, by_d) in enumerate(sorted(groups.items(), key=lambda kv: (encoding_order(rows).index(kv[0][0]), kv[0][1]))):
        enc, s = key
        xs = [x for x in sorted(by_d) if x >= 1]
        color = st.PALETTE[i % len(st.PALETTE)]
        label = enc if s == 1 else f"{enc}, s = {s}"
        axes[0].plot(xs, [num(by_d[x][0], "roformer_bound") for x in xs], color=color, label=label)
        shared = [st.mean_ci95([num(r, "mean_score_shared") for r in by_d[x]])[0] for x in xs]
        iid = [st.mean_ci95([num(r, "mean_abs_score_iid") for r in by_d[x]])[0] for x in xs]
        axes[1].plot(xs, shared, color=color, label=f"{label}: E[qᵀR k], q = k")
        if s == 1:  # the same flat line for every scale: drawn once
            axes[1].plot(xs, iid, color=color, linestyle=":", label=f"{label}: E|qᵀR k|, q, k independent")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("relative distance (tokens)")
    axes[0].set_ylabel("RoFormer bound term (1/(d/2)) Σ_j |S_j|")
    axes[0].set_title(f"RoPE long-term decay, RoFormer §3.4.3 (head_dim {hd})", fontsize=9)
    axes[1].set_ylabel("attention score qᵀ R(Δ) k (raw)")
    axes[1].set_title(f"Expected score of random q, k ~ N(0, I) ({len(seeds)} seeds × "
                      f"{int(num(rows[0], 'n_samples')) if 'n_samples' in rows[0] else '?'} samples)",
                      fontsize=9)
    axes[0].legend(fontsize=7)
    axes[1].legend(fontsize=6)
    return st.save(fig, out_dir, f"{NAME}_rope_decay")


def plot_resolution(d, out_dir):
    rows = d["resolution"]
    if not rows:
        return []
    Ds = sorted({int(num(r, "d_model")) for r in rows})
    fig, axes = st.plt.subplots(1, len(Ds), figsize=(3.6 * len(Ds), 3.8), sharey=True, squeeze=False)
    alias = {(int(num(r, "d_model")), r["band"]): r for r in d["aliasing"]}
    for ax, D in zip(axes[0], Ds):
        for i, band in enumerate(("high", "low", "all")):
            pts = sorted((int(num(r, "distance")), num(r, "separation")) for r in rows
                         if int(num(r, "d_model")) == D and r["band"] == band)
            a = alias.get((D, band))
            lab = band
            if a is not None:
                lab += f" (sep(1) {num(a, 'separation_at_1'):.2g}, monotone to {int(num(a, 'monotone_to'))})"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=st.PALETTE[i], label=lab)
        ax.set_xscale("log")
        ax.set_xlabel("distance k (positions)")
        ax.set_title(f"d_model = {D}", fontsize=9)
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel("separation ‖PE_S(p+k) − PE_S(p)‖ / √|S|")
    fig.suptitle("Sinusoidal frequency resolution: high-frequency half (periods 6.3 to < 628 positions), "
                 "low-frequency half (628 to 62832), all", fontsize=9)
    return st.save(fig, out_dir, f"{NAME}_resolution")


# --- verdicts -------------------------------------------------------------------------------------

TEXT_MARGIN = 0.05  # nats per character: effects, and levels within this of the unigram (floor)
ACC_MARGIN = 0.05   # accuracy: effects of the synthetic tasks
LEVEL_ACC = 0.02    # accuracy: levels within this of 1 (ceiling) or of the baseline (floor)


def primary_mode(task):
    """The evaluation the verdicts use: text's sliding windows (every scored character sees at
    least L - stride of context, as Press et al.'s sliding evaluation and Chen et al.'s), the
    synthetic tasks' rows."""
    return "sliding" if is_lm(task) else "rows"


def per_seed(evals, task, enc, variant, bucket, mode):
    """{seed: {eval_ratio: value}} of the decision metric: loss in nats (text) or accuracy."""
    col = "loss_nats" if is_lm(task) else "accuracy"
    out = defaultdict(dict)
    for r in select(evals, task, enc, variant, bucket, mode):
        v = num(r, col)
        if not math.isnan(v):
            out[int(num(r, "seed"))][int(num(r, "eval_ratio"))] = v
    return dict(out)


def level(evals, task, enc, variant, ratio, mode):
    """{seed: metric} at one length: every scored position at 1x; beyond it, the predictions at
    positions >= L_train (what the claim is about)."""
    bucket = "all" if ratio == 1 else "beyond_train_len"
    return {s: v[ratio] for s, v in per_seed(evals, task, enc, variant, bucket, mode).items() if ratio in v}


def mean_level(evals, task, enc, variant, ratio, mode):
    vals = list(level(evals, task, enc, variant, ratio, mode).values())
    return sum(vals) / len(vals) if vals else float("nan")


def degradation(evals, task, enc, variant, mode, ratios):
    """{seed: mean over `ratios` of how much worse the metric is there than at 1x} (loss: more
    nats; accuracy: less accuracy; positive = worse)."""
    sign = 1.0 if is_lm(task) else -1.0
    one = level(evals, task, enc, variant, 1, mode)
    far = {r: level(evals, task, enc, variant, r, mode) for r in ratios}
    return {s: sum(sign * (far[r][s] - one[s]) for r in ratios) / len(ratios)
            for s in one if ratios and all(s in far[r] for r in ratios)}


def mean_beyond(evals, task, enc, variant, mode, ratios, goodness=True):
    """{seed: mean over `ratios` of the metric beyond L_train}, as goodness (accuracy, or minus the
    loss) when goodness is set."""
    sign = -1.0 if (goodness and is_lm(task)) else 1.0
    far = {r: level(evals, task, enc, variant, r, mode) for r in ratios}
    seeds = set.intersection(*[set(f) for f in far.values()]) if far else set()
    return {s: sign * sum(far[r][s] for r in ratios) / len(ratios) for s in seeds}


def baseline_loss(d, task):
    """The loss of the predictor that ignores the dependency (text: the unigram; the others: the
    baseline_loss_nats of their test sets), mean over the zero-shot rows at 1x in the task's mode:
    the scale on which pilot_edge judges a learning-rate grid."""
    base = [num(r, "baseline_loss_nats") for r in d["eval"] if r["task"] == task and r["variant"] == "zero_shot"
            and int(num(r, "eval_ratio")) == 1 and r["bucket"] == "all" and r["mode"] == primary_mode(task)]
    return sum(base) / len(base) if base else float("nan")


def baseline_at(evals, task, ratio, mode):
    """Mean over seeds of the baseline at a length (text: the unigram loss; else the test sets'
    baseline accuracy)."""
    col = "baseline_loss_nats" if is_lm(task) else "baseline_accuracy"
    vals = [num(r, col) for r in evals if r["task"] == task and int(num(r, "eval_ratio")) == ratio
            and r["bucket"] == "all" and r["mode"] == mode]
    return sum(vals) / len(vals) if vals else float("nan")


def at_floor(d, task, enc, variant, ratios, mode):
    """Every length's mean within the level margin of its baseline, or worse."""
    lm = is_lm(task)
    pairs = [(mean_level(d["eval"], task, enc, variant, r, mode), baseline_at(d["eval"], task, r, mode))
             for r in ratios]
    if not pairs or any(math.isnan(v) for v, _ in pairs):
        return None
    return all(sv.at_floor([v], b, TEXT_MARGIN if lm else LEVEL_ACC, higher_is_better=not lm) for v, b in pairs)


LEARNED_SHARE = 0.5  # accuracy tasks: a model has learned the task at 1x when it covers this share of
                     # the distance from the baseline to accuracy 1


def not_learned(d, task, enc, variant, mode):
    """Accuracy tasks: (True, text) when the arm's mean 1x accuracy covers less than LEARNED_SHARE of
    the distance from the baseline to 1 — a flat curve beyond L_train then says nothing about
    extrapolation; (False, text) otherwise; (None, '') for text or missing data."""
    if is_lm(task):
        return None, ""
    v, b = mean_level(d["eval"], task, enc, variant, 1, mode), baseline_at(d["eval"], task, 1, mode)
    if math.isnan(v) or math.isnan(b):
        return None, ""
    need = b + LEARNED_SHARE * (1 - b)
    return v < need, (f"{enc} at 1x: accuracy {v:.3f}, below {need:.3f} (the baseline {b:.3f} plus "
                      f"{LEARNED_SHARE:g} of the distance to 1): the task was not learned, so a flat curve "
                      "beyond L_train says nothing about extrapolation")


def at_ceiling(d, task, enc, variant, ratios, mode):
    """Every length's mean within LEVEL_ACC of accuracy 1 (text: n.a.)."""
    if is_lm(task):
        return None
    return sv.at_ceiling([mean_level(d["eval"], task, enc, variant, r, mode) for r in ratios], 1.0, LEVEL_ACC)


def state(d, task, enc, variant="zero_shot"):
    """Convergence of a zero-shot run's pretraining (rope_pi and rope_ntk are rope's weights); scale
    the task's baseline loss. Fine-tuned arms are compared at a fixed budget of updates (the claim
    is about the same cost), so their curves are not asked to be flat: None."""
    if variant == "finetuned":
        return None
    penc = "rope" if enc in ("rope_pi", "rope_ntk") else enc
    cur = defaultdict(list)
    for r in d["steps"]:
        if r["task"] == task and r["positional_encoding"] == penc and r["phase"] == "pretrain":
            cur[int(num(r, "seed"))].append((num(r, "step"), num(r, "train_loss")))
    scale = baseline_at(d["eval"], task, 1, primary_mode(task)) if is_lm(task) else next(
        (num(r, "baseline_loss_nats") for r in d["eval"] if r["task"] == task), float("nan"))
    if not cur or not scale > 0:
        return None
    return ss.convergence(dict(cur), scale).state


def controls(d, task, arms):
    """Parameters within ±5 % and the same updates for the (encoding, variant) arms compared."""
    runs = [r for r in d["runs"] if r["task"] == task and (r["positional_encoding"], r["variant"]) in arms]
    if not runs:
        return None
    params = [num(r, "n_params") for r in runs]
    same = {(r["steps"], r["finetune_steps"], r["finetune_len"]) for r in runs}
    return max(params) <= 1.05 * min(params) and len(same) == 1


def levels_text(d, task, enc, variant, ratios, mode):
    return f"{enc}{' fine-tuned' if variant == 'finetuned' else ''} " + ", ".join(
        f"{mean_level(d['eval'], task, enc, variant, r, mode):.3g}" for r in ratios)


def has_arm(evals, task, enc, variant="zero_shot"):
    return any(r["task"] == task and r["positional_encoding"] == enc and r["variant"] == variant for r in evals)


FT_BUDGET = 500  # the fewest fine-tune updates after which the verdicts compare the fine-tuned arms (README "Verdicts")


def ft_scale(r):
    return float(r["finetune_lr_scale"])


def ft_step(r):
    return int(float(r["finetune_step"]))


def finetune_scales(evals, task):
    """The task's fine-tune rate scales (× the pilot's rate) in the order of the rows (the config's)."""
    return list(dict.fromkeys(ft_scale(r) for r in evals if r["task"] == task and r["variant"] == "finetuned"))


def finetune_budgets(evals, task):
    """The fine-tune updates after which the task's fine-tunes were evaluated, increasing."""
    return sorted({ft_step(r) for r in evals if r["task"] == task and r["variant"] == "finetuned"})


def verdict_budget(evals, task):
    """The fine-tune updates the verdicts read: the smallest evaluated budget >= FT_BUDGET, else the
    largest (a run that fine-tuned for fewer updates); None without fine-tunes."""
    steps = finetune_budgets(evals, task)
    if not steps:
        return None
    long = [x for x in steps if x >= FT_BUDGET]
    return long[0] if long else steps[-1]


def reference_budget(evals, task, budget):
    """The budget the verdicts' `budget` is checked against for convergence: the last evaluated
    one after it if any, else the largest evaluated budget <= budget / 2 (the fine-tune's last
    doubling); None if there is neither."""
    steps = finetune_budgets(evals, task)
    after = [x for x in steps if x > budget]
    if after:
        return after[-1]
    half = [x for x in steps if 2 * x <= budget]
    return half[-1] if half else None


def at_budget(d, task, scale, step):
    """d whose eval rows are the zero-shot ones and the task's fine-tuned ones at rate scale `scale`
    (one for every variant, or {variant: scale}, the variants not in it dropped) after `step`
    updates (what the verdicts and the length figures read as 'fine-tuned')."""
    def at_rate(r):
        want = scale.get(r["positional_encoding"]) if isinstance(scale, dict) else scale
        return want is not None and ft_scale(r) == want
    ev = [r for r in d["eval"] if r["variant"] != "finetuned" or
          (r["task"] == task and at_rate(r) and ft_step(r) == step)]
    return dict(d, eval=ev)


FT_CHOICE_FRACTION = 0.125  # the fine-tune's last eighth of updates (700-800 of 800) choose its rate


def chosen_rates(d, task, budget):
    """{variant: (chosen scale, {scale: score})}: each fine-tuned variant's rate scale, chosen as a
    pilot is, without the test sets: the lowest mean over seeds of its training loss on the
    fine-tune's fresh batches over the last FT_CHOICE_FRACTION of its first `budget` updates
    (`_steps.csv`)."""
    lo = budget * (1 - FT_CHOICE_FRACTION)
    acc = {}
    for r in d["steps"]:
        if r["task"] != task or r["variant"] != "finetuned":
            continue
        x = num(r, "step")
        if lo < x <= budget and not math.isnan(num(r, "train_loss")):
            acc.setdefault(r["positional_encoding"], {}).setdefault(ft_scale(r), {}).setdefault(
                r["seed"], []).append(num(r, "train_loss"))
    out = {}
    for var, by_sc in acc.items():
        score = {sc: sum(sum(v) / len(v) for v in seeds.values()) / len(seeds) for sc, seeds in by_sc.items()}
        out[var] = (min(score, key=score.get), score)
    return out


def mean_over(evals, task, enc, variant, mode, ratios):
    """Mean over seeds of the per-seed mean metric over `ratios` (1x: every position; beyond: the
    positions >= L_train); nan without data."""
    per = [level(evals, task, enc, variant, r, mode) for r in ratios]
    seeds = set.intersection(*[set(p) for p in per]) if per else set()
    vals = [sum(p[s] for p in per) / len(per) for s in seeds]
    return sum(vals) / len(vals) if vals else float("nan")


def finetune_curve_text(d, task, mode, ratios):
    """'rate 0.2×: rope_pi 25: 1.52, 50: 1.49, …; rope …' — the mean metric over `ratios` against
    the fine-tune updates, per rate and variant (Chen et al. Table 4's shape)."""
    parts = []
    for sc in finetune_scales(d["eval"], task):
        per_var = []
        for enc in ("rope_pi", "rope", "rope_ntk"):
            pts = [(k, mean_over(at_budget(d, task, sc, k)["eval"], task, enc, "finetuned", mode, ratios))
                   for k in finetune_budgets(d["eval"], task)]
            pts = [(k, v) for k, v in pts if not math.isnan(v)]
            if pts:
                per_var.append(f"{enc} " + ", ".join(f"{k}: {v:.3g}" for k, v in pts))
        parts.append(f"rate {sc:g}×: " + "; ".join(per_var))
    where = "1x" if ratios == [1] else f"mean over {', '.join(f'{x}x' for x in ratios)}"
    return f"({where}, after k updates) " + " | ".join(parts)


PILOT_ARM = {"rope_pi": "rope", "rope_ntk": "rope"}  # zero-shot scalings use the rope weights (its pilot)


def lr_censored(d, task, encodings):
    """[(encoding, chosen lr, 'top' | 'bottom', detail, blocks)] of the trained arms behind
    `encodings` whose pilot chose an end of lr_grid (seqlab_verdict.lr_censor's entries):
    classified by seqlab_verdict.pilot_edge against the task's baseline loss (text: the unigram;
    the others: the predictor that ignores the dependency), blocking when the pilot is still
    improving toward the edge (a better rate may lie outside the grid); fine-tunes inherit the rope
    arm's rate."""
    out = []
    baseline = baseline_loss(d, task)
    for enc in dict.fromkeys(PILOT_ARM.get(e, e) for e in encodings):
        rows = [r for r in d["pilot"] if r["task"] == task and r["positional_encoding"] == enc]
        scores = {num(r, "lr"): num(r, "val_loss") for r in rows}
        chosen = [num(r, "lr") for r in rows if int(num(r, "chosen")) == 1]
        e = sv.pilot_edge(scores, chosen[0], baseline) if chosen else None
        if e:
            out.append((enc, chosen[0], e[0], e[2], e[1] == "improving"))
    return out


def plateau_seeds(d, task, encodings):
    """[(encoding, seeds on the plateau, seeds)] of the trained arms behind `encodings` (the rope
    variants use rope's weights) with a seed whose 1x accuracy covered less than
    seqlab_verdict.PLATEAU_FRACTION of the way from the baseline to 1 (on_plateau): that model never
    learned the task, so its degradation beyond L_train says nothing. Accuracy tasks only."""
    if is_lm(task):
        return []
    out = []
    base = baseline_at(d["eval"], task, 1, primary_mode(task))
    for enc in dict.fromkeys(PILOT_ARM.get(e, e) for e in encodings):
        one = level(d["eval"], task, enc, "zero_shot", 1, primary_mode(task))
        flat = [s for s, a in one.items() if sv.on_plateau(a, base, 1.0)]
        if flat:
            out.append((enc, len(flat), len(one)))
    return out


def censor(v, d, task, encodings):
    """The artifact checks on the arms behind `encodings`: seqlab_verdict.censor ('lr censored')
    with those whose pilot chose an end of the grid (lr_censored); then, where a compared arm has
    seeds that never left the baseline plateau at 1x (plateau_seeds), a decided verdict becomes
    plain inconclusive named 'comparator on its plateau' (the decision it would have had kept in
    the reason) and an undecided one gets the note."""
    v = sv.lr_censor(v, lr_censored(d, task, encodings))
    flat = plateau_seeds(d, task, encodings)
    if not flat:
        return v
    note = ("the comparator never left its baseline plateau at 1x (" +
            ", ".join(f"{e} in {k}/{n} seeds" for e, k, n in flat) + ")")
    if v.kind in (sv.HOLDS, sv.FAILS, sv.DEPENDS):
        return sv.Verdict(sv.INCONCLUSIVE, f"{note}; the interval alone would say {v.text}: {v.reason}",
                          test=v.test, effect=v.effect, margin=v.margin, checks=v.checks)
    v.reason = f"{v.reason}; {note}"
    return v


def still_moving(full, task, scale, budget, eff, margin, what, effect_of):
    """(moving_up, moving_down, moving_text) for seqlab_verdict.decide on a fine-tune row: the
    effect `effect_of(eval rows)` (at rate `scale`) at the verdicts' `budget` (`eff`) against the
    same effect at reference_budget (the last evaluated update after the budget, else the budget
    of the fine-tune's last doubling); 'moving' in the direction it shifts from the earlier to the
    later budget when the shift exceeds half the `margin` (the fine-tune has not settled: another
    doubling could carry the interval across the margin), else Nones. `scale` may be a
    {variant: scale} (at_budget)."""
    ref = reference_budget(full["eval"], task, budget)
    if ref is None:
        return None, None, None
    e_ref = effect_of(at_budget(full, task, scale, ref)["eval"])
    (k0, e0), (k1, e1) = sorted([(ref, e_ref.value), (budget, eff.value)])
    shift = e1 - e0
    if not abs(shift) > margin / 2:
        return None, None, None
    return (("moving", None) if shift > 0 else (None, "moving")) + (
        f"the {what} moves from {e0:+.3g} after {k0} to {e1:+.3g} after {k1} fine-tune "
        f"updates (by more than half the margin): the fine-tune is still moving",)


def rate_censor(v, scores, baseline, reversing=None):
    """The artifact check 'lr censored' on a fine-tune row over the fine-tune rate grid
    (finetune_lr_scale × the pilot's rate): scores = {variant: {scale: score, lower is better}};
    where a variant's best scale is an end of the grid, seqlab_verdict.pilot_edge classifies it
    against `baseline` (the score of the predictor that ignores the dependency), and it blocks
    (makes a decided verdict inconclusive, seqlab_verdict.lr_censor) when still improving toward
    the edge and the variant is one whose improvement could reverse the verdict:
    reversing[v.kind] (e.g. for 'PI beats direct': PI when it fails, direct when it holds), every
    variant for a kind not listed. Returns (verdict, the best scale per variant as text)."""
    reversing = reversing or {}
    censored, best_txt = [], []
    for var, means in scores.items():
        if len(means) < 2:
            continue
        best = min(means, key=means.get)
        best_txt.append(f"{var} {best:g}×")
        e = sv.pilot_edge(means, best, baseline)
        if e:
            blocks = e[1] == "improving" and var in reversing.get(v.kind, tuple(scores))
            censored.append((f"{var}'s fine-tune", best, e[0],
                             f" ({', '.join(f'{x:g}' for x in sorted(means))} × the pilot's rate){e[2]}",
                             blocks, "finetune_lr_scale"))
    return sv.lr_censor(v, censored), ", ".join(best_txt)


def rate_choice_censor(v, d, task, rates, variants, reversing):
    """rate_censor on the fine-tunes' training-loss scores of chosen_rates against the task's
    baseline loss (text: the unigram; the others: the predictor that ignores the dependency)."""
    return rate_censor(v, {e: rates[e][1] for e in variants if e in rates}, baseline_loss(d, task), reversing)[0]

def per_ratio_text(d, task, a_enc, b_enc, mode, ratios, unit):
    """Per ratio beyond 1x, the paired difference of the degradations (a minus b, positive = b
    degrades less) with its interval; 'floor' where both arms are at or worse than the baseline
    there (text: the unigram loss), so the difference there compares two useless models."""
    lm = is_lm(task)
    out = []
    for r in ratios:
        eff = ss.paired_difference(degradation(d["eval"], task, a_enc, "zero_shot", mode, [r]),
                                   degradation(d["eval"], task, b_enc, "zero_shot", mode, [r]),
                                   what=f"{r}x")
        fl = bool(at_floor(d, task, a_enc, "zero_shot", [r], mode) and at_floor(d, task, b_enc, "zero_shot", [r], mode))
        txt = eff.text(3, unit)  # "<r>x: +0.5 [0.4, 0.6] nats"
        if fl:
            txt += (f" (floor: both at or worse than the unigram loss {baseline_at(d['eval'], task, r, mode):.3g})"
                    if lm else " (floor: both at the baseline)")
        out.append(txt)
    return "; ".join(out)


def trained_rows(d, task):
    """The verdict rows of one trained task (README "Verdicts"). The fine-tuned arms are read after
    verdict_budget updates: at every fine-tune rate for the fine-tune verdicts, at the first rate
    elsewhere (levels texts)."""
    full = d
    scales = finetune_scales(d["eval"], task)
    budget = verdict_budget(d["eval"], task)
    if scales:
        d = at_budget(full, task, scales[0], budget)
    evals = d["eval"]
    rows = [r for r in evals if r["task"] == task]
    if not rows:
        return []
    lm = is_lm(task)
    mode = primary_mode(task)
    L = int(num(rows[0], "L_train"))
    ratios = sorted({int(num(r, "eval_ratio")) for r in rows})
    beyond = [x for x in ratios if x >= 2]
    if not beyond:
        return []
    R = ratios[-1]
    n_seeds = len({r["seed"] for r in rows})
    m = TEXT_MARGIN if lm else ACC_MARGIN
    unit = "nats" if lm else "accuracy"
    lvl = "loss (nats/char)" if lm else "accuracy"
    where = (f"{mode} windows; 1x: every scored position, {beyond[0]}x..{R}x: positions >= L_train = {L}"
             if lm else f"1x: every scored position, {beyond[0]}x..{R}x: predictions at positions >= {L}")
    floor_txt = "the unigram loss" if lm else "the baseline that ignores the dependency"
    out = []

    def lv(enc, variant="zero_shot"):
        return levels_text(d, task, enc, variant, ratios, mode)

    # 1. Sinusoidal fails beyond L_train.
    if has_arm(evals, task, "sinusoidal"):
        deg = degradation(evals, task, "sinusoidal", "zero_shot", mode, beyond)
        eff = ss.mean_interval(list(deg.values()), what=f"sinusoidal: beyond L_train minus 1x, {unit} (worse > 0)",
                               method=f"t over {len(deg)} seeds")
        v = sv.decide(eff, m, sv.GREATER, unit=unit, ceiling=at_ceiling(d, task, "sinusoidal", "zero_shot", ratios, mode),
                      floor=at_floor(d, task, "sinusoidal", "zero_shot", [1], mode),
                      moving_up=state(d, task, "sinusoidal", "zero_shot"),
                      level_margin=TEXT_MARGIN if lm else LEVEL_ACC,
                      levels=f"{lvl} at {', '.join(f'{x}x' for x in ratios)}: {lv('sinusoidal')}",
                      test=f"per seed, the {lvl} beyond L_train (mean over {', '.join(f'{x}x' for x in beyond)}) minus "
                           f"at 1x; t over seeds")
        extra = (f"; non-overlapping windows: {levels_text(d, task, 'sinusoidal', 'zero_shot', ratios, 'non_overlapping')}"
                 if lm else "")
        out.append(censor(v, d, task, ("sinusoidal",)).row(
            claim=f"Sinusoidal encodings fail beyond the training length ({task})",
            measured=f"{lvl} at {', '.join(f'{x}x' for x in ratios)} ({where}): {lv('sinusoidal')}{extra} "
                     f"({n_seeds} seeds)",
            anchor="Press et al. 2021 Fig. 1 / Tables 2-3 (WikiText-103, L = 512, 1024): sinusoidal perplexity rises "
                   "sharply within a few dozen tokens past L",
            rule=f"holds if the interval of the degradation (mean over {beyond[0]}x..{R}x beyond L_train, minus 1x) lies "
                 f"above +{m:g} {unit}; fails if below −{m:g} or within ±{m:g}; floor if sinusoidal is within "
                 f"{TEXT_MARGIN if lm else LEVEL_ACC:g} of {floor_txt} at 1x; ceiling if within {LEVEL_ACC:g} of 1 "
                 "at every length"))

    # 2. RoPE degrades less than sinusoidal.
    if has_arm(evals, task, "sinusoidal") and has_arm(evals, task, "rope"):
        def rope_part(md):
            ds = degradation(evals, task, "sinusoidal", "zero_shot", md, beyond)
            dr = degradation(evals, task, "rope", "zero_shot", md, beyond)
            eff = ss.paired_difference(ds, dr, what=f"degradation(sinusoidal) − degradation(rope), {unit}"
                                       + (f" ({md})" if lm else ""))
            fl = (at_floor(d, task, "rope", "zero_shot", [1], md) or at_floor(d, task, "sinusoidal", "zero_shot", [1], md)
                  or (at_floor(d, task, "rope", "zero_shot", beyond, md)
                      and at_floor(d, task, "sinusoidal", "zero_shot", beyond, md)))
            ce = (None if lm else bool(at_ceiling(d, task, "rope", "zero_shot", ratios, md)
                                       and at_ceiling(d, task, "sinusoidal", "zero_shot", ratios, md)))
            return sv.decide(eff, m, sv.GREATER, unit=unit, ceiling=ce, floor=bool(fl),
                             moving_up=state(d, task, "rope", "zero_shot"),
                             moving_down=state(d, task, "sinusoidal", "zero_shot"),
                             controls=controls(d, task, {("sinusoidal", "zero_shot"), ("rope", "zero_shot")}),
                             level_margin=TEXT_MARGIN if lm else LEVEL_ACC, levels=f"{lv('rope')}; {lv('sinusoidal')}",
                             test="paired t over seeds of the two degradations (beyond L_train minus 1x)")
        # Text in both of Press et al.'s evaluation modes (as the ALiBi row), combined; a task of rows in its one.
        modes = [x for x in ("non_overlapping", "sliding") if select(evals, task, "rope", "zero_shot", "all", x)] \
            if lm else [mode]
        if len(modes) > 1:
            v = sv.combine([(x.replace("_", "-"), rope_part(x)) for x in modes], condition="the evaluation mode")
        else:
            v = rope_part(modes[0] if modes else mode)
        out.append(censor(v, d, task, ("sinusoidal", "rope")).row(
            claim=f"Rotary (RoPE) degrades less than sinusoidal beyond the training length ({task})",
            measured=f"{lvl} at {', '.join(f'{x}x' for x in ratios)}: {lv('rope')}; {lv('sinusoidal')}"
                     + (f"; {lv('t5_bias')}" if has_arm(evals, task, "t5_bias") else "")
                     + ". Per ratio, degradation(sinusoidal) − degradation(rope): "
                     + per_ratio_text(d, task, "sinusoidal", "rope", mode, beyond, unit),
            anchor="Press et al. 2021 §2, Fig. 1: rotary extrapolates somewhat further than sinusoidal (a few hundred "
                   "tokens at L = 512), far less than ALiBi; T5's bias further still",
            rule=f"paired per-seed difference of the degradations (sinusoidal minus rope) against ±{m:g} {unit}: holds "
                 f"if above +{m:g}, fails if below −{m:g} or within; floor if either is at {floor_txt} at 1x or both "
                 "are beyond L_train; ceiling if both are within 0.02 of 1 everywhere"))

    # 3. PI after fine-tuning beats direct fine-tuning (same updates and batches), at the verdicts'
    # fine-tune budget, each variant at the rate its own training loss chose (chosen_rates); the
    # comparison at each single rate (Chen et al.'s same-rate control) beside it.
    rates = chosen_rates(d, task, budget) if budget is not None else {}
    if has_arm(evals, task, "rope_pi", "finetuned") and has_arm(evals, task, "rope", "finetuned"):
        Lf = finetune_len(d, task)
        inside = [x for x in beyond if x * L <= Lf] or beyond

        def pi_vs_direct(sc):
            dv = at_budget(full, task, sc, budget)
            ev = dv["eval"]
            a = mean_beyond(ev, task, "rope_pi", "finetuned", mode, inside)
            b = mean_beyond(ev, task, "rope", "finetuned", mode, inside)
            eff = ss.paired_difference(a, b, what=("loss(rope fine-tuned) − loss(rope_pi fine-tuned), nats" if lm else
                                                    "accuracy(rope_pi fine-tuned) − accuracy(rope fine-tuned)") +
                                       f", mean over {', '.join(f'{x}x' for x in inside)}")
            fl = bool(at_floor(dv, task, "rope_pi", "finetuned", inside, mode)
                      and at_floor(dv, task, "rope", "finetuned", inside, mode))
            ce = (None if lm else bool(at_ceiling(dv, task, "rope_pi", "finetuned", inside, mode)
                                       and at_ceiling(dv, task, "rope", "finetuned", inside, mode)))
            arms = {("rope_pi", "finetuned"), ("rope", "finetuned")}
            move_up, move_down, move_txt = still_moving(
                full, task, sc, budget, eff, m, "difference",
                lambda ev: ss.paired_difference(mean_beyond(ev, task, "rope_pi", "finetuned", mode, inside),
                                                mean_beyond(ev, task, "rope", "finetuned", mode, inside)))
            return sv.decide(
                eff, m, sv.GREATER, unit=unit, ceiling=ce, floor=fl, controls=controls(d, task, arms),
                moving_up=move_up, moving_down=move_down, moving_text=move_txt,
                level_margin=TEXT_MARGIN if lm else LEVEL_ACC,
                levels=f"{levels_text(dv, task, 'rope_pi', 'finetuned', inside, mode)}; "
                       f"{levels_text(dv, task, 'rope', 'finetuned', inside, mode)}",
                test=f"paired t over seeds of the mean {lvl} beyond L_train up to the fine-tuned length L' = {Lf}, "
                     f"after {budget} fine-tune updates")

        parts = [(f"rate {sc:g} × the pilot's", pi_vs_direct(sc)) for sc in scales]
        if "rope_pi" in rates and "rope" in rates:
            pick = {"rope_pi": rates["rope_pi"][0], "rope": rates["rope"][0]}
            v = pi_vs_direct(pick)
            v.reason = (f"at the rates the fine-tunes' training loss chose (rope_pi {pick['rope_pi']:g}×, rope "
                        f"{pick['rope']:g}×): {v.reason}; at each single rate: "
                        + "; ".join(f"{lab}: {pv.text} ({pv.reason})" for lab, pv in parts))
            v = rate_choice_censor(v, d, task, rates, ("rope_pi", "rope"), {sv.FAILS: ("rope_pi",), sv.HOLDS: ("rope",)})
        else:
            v = parts[0][1] if len(parts) == 1 else sv.combine(parts, condition="the fine-tune learning rate")
        best_rates = ", ".join(f"{e} {rates[e][0]:g}×" for e in ("rope_pi", "rope", "rope_ntk") if e in rates)
        out.append(censor(v, d, task, ("rope",)).row(
            claim=f"Position interpolation with fine-tuning beats direct fine-tuning at the same cost "
                  f"({budget} fine-tune updates at L' = {Lf}) ({task})",
            measured=f"{lvl} at {', '.join(f'{x}x' for x in ratios)} after {budget} updates: " + "; ".join(
                f"rate {sc:g}×: " + "; ".join(levels_text(at_budget(full, task, sc, budget), task, e, "finetuned", ratios,
                                                          mode) for e in ("rope_pi", "rope", "rope_ntk"))
                for sc in scales) + f"; before fine-tuning: {lv('rope')}; L' = {Lf}"
                     + (f"; fine-tune rate chosen by the training loss: {best_rates}" if best_rates else "")
                     + ". Against fine-tune updates: " + finetune_curve_text(full, task, mode, inside),
            anchor="Chen et al. 2023 §3.2-3.3 (LLaMA 7B-65B, 2048 -> 8192-32768): PI reaches the target window within "
                   "~200-1000 steps (passkey at every depth; PG19 / Proof-pile perplexity falling with the window), "
                   "direct fine-tuning extends the effective window only slowly",
            rule=f"per seed, the {lvl} beyond L_train up to L' (mean over {', '.join(f'{x}x' for x in inside)}) after "
                 f"{budget} fine-tune updates, rope_pi fine-tuned against rope fine-tuned (the same updates and "
                 "batches), each at the rate its fine-tune's training loss over the last eighth of the updates chose, "
                 f"paired t against ±{m:g} {unit}: holds if beyond in PI's favour, fails if beyond the other way or "
                 "within; floor / ceiling if both sit there; not converged if the difference moved by more than half "
                 "the margin over the last doubling; the same at each single rate beside it"))

    # 4. NTK zero-shot beats PI zero-shot (bloc97).
    if has_arm(evals, task, "rope_pi") and has_arm(evals, task, "rope_ntk"):
        a = mean_beyond(evals, task, "rope_ntk", "zero_shot", mode, beyond)
        b = mean_beyond(evals, task, "rope_pi", "zero_shot", mode, beyond)
        eff = ss.paired_difference(a, b, what=("loss(rope_pi) − loss(rope_ntk), zero-shot, nats" if lm else
                                                "accuracy(rope_ntk) − accuracy(rope_pi), zero-shot") +
                                   f", mean over {beyond[0]}x..{R}x")
        fl = bool(at_floor(d, task, "rope_ntk", "zero_shot", beyond, mode) and at_floor(d, task, "rope_pi", "zero_shot", beyond, mode))
        ce = (None if lm else bool(at_ceiling(d, task, "rope_ntk", "zero_shot", beyond, mode)
                                   and at_ceiling(d, task, "rope_pi", "zero_shot", beyond, mode)))
        v = sv.decide(eff, m, sv.GREATER, unit=unit, ceiling=ce, floor=fl, moving_up=state(d, task, "rope", "zero_shot"),
                      controls=True, level_margin=TEXT_MARGIN if lm else LEVEL_ACC,
                      levels=f"{lv('rope_ntk')}; {lv('rope_pi')}",
                      test="paired t over seeds (the same trained weights, two scalings)")
        out.append(censor(v, d, task, ("rope",)).row(
            claim=f"NTK-aware scaling beats position interpolation without fine-tuning ({task})",
            measured=f"{lvl} at {', '.join(f'{x}x' for x in ratios)}: {lv('rope_ntk')}; {lv('rope_pi')}; {lv('rope')}",
            anchor="bloc97 2023 (the NTK-aware scaled RoPE post; Peng et al. 2023, YaRN §3.1): without fine-tuning NTK "
                   "scaling keeps the perplexity far lower than PI past the window",
            rule=f"per seed, the mean {lvl} beyond L_train over {beyond[0]}x..{R}x, rope_ntk against rope_pi zero-shot "
                 f"(the same weights), paired t against ±{m:g} {unit}: holds if beyond in NTK's favour, fails if "
                 "beyond the other way or within; floor / ceiling if both sit there"))

    # 5. ALiBi stays flat or improves beyond L_train (Press et al.'s headline), per evaluation mode.
    if has_arm(evals, task, "alibi"):
        parts = []
        for md in (MODES if lm else (mode,)):
            deg = degradation(evals, task, "alibi", "zero_shot", md, beyond)
            eff = ss.mean_interval([-x for x in deg.values()], what=f"alibi: 1x minus beyond L_train ({md}), "
                                   f"{'nats' if lm else 'accuracy change'} (better > 0)",
                                   method=f"t over {len(deg)} seeds")
            if not lm:
                eff = ss.mean_interval([-x for x in deg.values()], what="alibi: accuracy beyond L_train minus 1x",
                                       method=f"t over {len(deg)} seeds")
            test = "t over seeds of the per-seed change from 1x to beyond L_train (mean over the longer lengths)"
            unlearned, why = not_learned(d, task, "alibi", "zero_shot", md)
            if unlearned:
                parts.append((task, sv.measured(sv.FLOOR, why, test=test, effect=eff.text(3, unit),
                                                margin=f"±{m:g} {unit}",
                                                checks=dict(ceiling="no", floor="yes", converged="n.a.",
                                                            controls="n.a."))))
                continue
            parts.append((md.replace("_", "-") if lm else task, sv.decide(
                eff, m, sv.NO_WORSE, unit=unit, floor=at_floor(d, task, "alibi", "zero_shot", [1], md),
                ceiling=None, moving_up=state(d, task, "alibi", "zero_shot"),
                level_margin=TEXT_MARGIN if lm else LEVEL_ACC, levels=levels_text(d, task, "alibi", "zero_shot", ratios, md),
                test=test)))
        v = parts[0][1] if len(parts) == 1 else sv.combine(parts, condition="the evaluation mode")
        out.append(censor(v, d, task, ("alibi",)).row(
            claim=f"ALiBi's {'perplexity' if lm else 'accuracy'} stays flat or improves beyond the training length ({task})",
            measured=f"{lvl} at {', '.join(f'{x}x' for x in ratios)}: " + "; ".join(
                f"{md}: {levels_text(d, task, 'alibi', 'zero_shot', ratios, md)}" for md in (MODES if lm else (mode,))),
            anchor="Press et al. 2021 Fig. 1, Tables 2-3: ALiBi's perplexity keeps falling up to several times L "
                   "(non-overlapping evaluation); Appendix B: with sliding windows it stays about flat (the gain is "
                   "the early-token curse)",
            rule=f"NO_WORSE: per seed, 1x minus the mean beyond L_train over {beyond[0]}x..{R}x (positive = better), t "
                 f"over seeds: holds if the interval lies above −{m:g} {unit}, fails if below, inconclusive if it "
                 "straddles; text per evaluation mode, combined ('depends on the evaluation mode' if they differ); "
                 f"accuracy tasks: floor (not learned) when ALiBi's 1x accuracy covers less than {LEARNED_SHARE:g} "
                 "of the distance from the baseline to 1"))

    # 6. PI keeps its in-window quality after fine-tuning (Chen et al.), at the verdicts' budget, at
    # the rate its fine-tune's training loss chose (chosen_rates); each single rate beside it.
    if has_arm(evals, task, "rope_pi", "finetuned"):
        sign = -1.0 if lm else 1.0
        b = {s: sign * v for s, v in level(evals, task, "rope", "zero_shot", 1, mode).items()}

        def keeps(sc):
            dv = at_budget(full, task, sc, budget)
            a = {s: sign * v for s, v in level(dv["eval"], task, "rope_pi", "finetuned", 1, mode).items()}
            eff = ss.paired_difference(a, b, what=("loss(rope before) − loss(rope_pi fine-tuned) at 1x, nats" if lm else
                                                    "accuracy(rope_pi fine-tuned) − accuracy(rope before) at 1x"))
            move_up, move_down, move_txt = still_moving(
                full, task, sc, budget, eff, m, "change",
                lambda ev: ss.paired_difference(
                    {s: sign * v for s, v in level(ev, task, "rope_pi", "finetuned", 1, mode).items()}, b))
            return sv.decide(
                eff, m, sv.NO_WORSE, unit=unit, floor=at_floor(dv, task, "rope", "zero_shot", [1], mode),
                moving_up=move_up, moving_down=move_down, moving_text=move_txt,
                ceiling=(None if lm else bool(at_ceiling(dv, task, "rope", "zero_shot", [1], mode)
                                              and at_ceiling(dv, task, "rope_pi", "finetuned", [1], mode))),
                controls=True, level_margin=TEXT_MARGIN if lm else LEVEL_ACC,
                test=f"paired t over seeds (the fine-tuned model after {budget} updates against its own weights before)")

        parts = [(f"rate {sc:g} × the pilot's", keeps(sc)) for sc in scales]
        if "rope_pi" in rates:
            pick = rates["rope_pi"][0]
            v = keeps({"rope_pi": pick, "rope": pick, "rope_ntk": pick})
            v.reason = (f"at the rate the fine-tune's training loss chose (rope_pi {pick:g}×): {v.reason}; at each "
                        "single rate: " + "; ".join(f"{lab}: {pv.text} ({pv.reason})" for lab, pv in parts))
            v = rate_choice_censor(v, d, task, rates, ("rope_pi",), {sv.FAILS: ("rope_pi",), sv.HOLDS: ()})
        else:
            v = parts[0][1] if len(parts) == 1 else sv.combine(parts, condition="the fine-tune learning rate")
        best_rates6 = f"rope_pi {rates['rope_pi'][0]:g}×" if "rope_pi" in rates else ""

        def one_x(sc):
            dv = at_budget(full, task, sc, budget)
            one = {k: mean_level(dv["eval"], task, e, var, 1, mode) for k, (e, var) in
                   {"rope_pi fine-tuned": ("rope_pi", "finetuned"), "rope fine-tuned": ("rope", "finetuned"),
                    "rope_ntk fine-tuned": ("rope_ntk", "finetuned")}.items()}
            return f"rate {sc:g}×: " + ", ".join(f"{k} {x:.4g}" for k, x in one.items() if not math.isnan(x))
        out.append(censor(v, d, task, ("rope",)).row(
            claim=f"Position interpolation keeps the in-window (1x) quality after fine-tuning ({budget} updates) ({task})",
            measured=f"{lvl} at 1x: rope before {mean_level(evals, task, 'rope', 'zero_shot', 1, mode):.4g}; after "
                     f"{budget} updates: " + "; ".join(one_x(sc) for sc in scales) +
                     (f"; fine-tune rate chosen by the training loss: {best_rates6}" if best_rates6 else "") +
                     ". Against fine-tune updates: " + finetune_curve_text(full, task, mode, [1]),
            anchor="Chen et al. 2023 §3.4, Table 5: the PI-extended models lose little on the original 2048 window "
                   "(small benchmark drops)",
            rule=f"NO_WORSE: the paired per-seed change of the 1x {lvl} from before to after {budget} updates of PI's "
                 f"fine-tune at the rate its training loss chose: holds if the interval lies above −{m:g} {unit} (at "
                 "most that much worse), fails if below; not converged if the change moved by more than half the margin "
                 "over the last doubling; the same at each single rate beside it"))
    return out


def learned_row(d):
    """Learned positions past L_train are never trained: shown by the table rows that received no
    gradient in any update (by construction)."""
    runs = [r for r in d["runs"] if r["positional_encoding"] == "learned" and r["variant"] == "zero_shot"]
    if not runs:
        return []
    want = [int(num(r, "max_eval_len")) - int(num(r, "L_train")) for r in runs]
    got = [int(num(r, "untrained_position_rows")) for r in runs]
    shown = got == want
    v = sv.by_construction("a learned table's rows past the training length receive no gradient, and a table "
                           "shorter than the input is refused (learned_max_len, exit 2)",
                           f"{sum(g == w for g, w in zip(got, want))} of {len(runs)} learned runs gave exactly their "
                           f"{want[0]} rows past L_train no gradient", shown=shown,
                           test="rows of the table whose gradient was exactly 0 at every update",
                           effect=f"untrained rows {sorted(set(got))}, expected {sorted(set(want))}")
    beyond = []
    for task in TASKS:
        if has_arm(d["eval"], task, "learned"):
            beyond.append(f"{task}: " + levels_text(d, task, "learned", "zero_shot",
                                                     sorted({int(num(r, 'eval_ratio')) for r in d['eval']
                                                             if r['task'] == task}), primary_mode(task)))
    return [v.row(claim="Learned positions cannot go past the table's length (max_len)",
                  measured=f"untrained rows per run: {sorted(set(got))} (= max_eval_len − L_train); levels at 1x..: "
                           + "; ".join(beyond),
                  anchor="by construction (GPT-2/BERT position tables; Press et al. 2021 §2 use none beyond L)",
                  rule="by construction if every learned run's rows past L_train got no gradient (weight decay alone "
                       "moves them); "
                       "fails (a defect) otherwise")]


def verdicts(results_dir):
    d = load(results_dir)
    out = []
    seeds = len({r["seed"] for r in d["runs"]})
    # 1. The similarity table claim: an exact computation against claimed numbers.
    table = similarity_table(d)
    t512 = {t[1]: t for t in table if t[0] == 512}
    if all(k in t512 for k in CLAIMED):
        diffs = [abs(t512[k][2] - CLAIMED[k]) for k in CLAIMED]
        v = sv.measured(sv.FAILS if max(diffs) > 0.05 else sv.HOLDS,
                        f"the largest difference from the claimed cosines is {max(diffs):.2f}",
                        test="exact computation (the library's float32 table and the closed form agree)",
                        effect="cos − claimed = " + " / ".join(f"{t512[k][2] - CLAIMED[k]:+.2f}" for k in sorted(CLAIMED)),
                        margin="±0.05")
        out.append(v.row(
            claim="Sinusoidal PE cosine similarity at d_model 512 is 0.92 / 0.65 / 0.12 / -0.06 at distance 1 / 10 / 100 / 1000",
            measured="cos = " + " / ".join(f"{t512[k][2]:.3f}" for k in sorted(CLAIMED)) +
                     " (closed form 2/D·Σcos(kω_i): " + " / ".join(f"{t512[k][3]:.3f}" for k in sorted(CLAIMED)) + ")",
            anchor="widely repeated table: 0.92 / 0.65 / 0.12 / -0.06 (no primary source; Vaswani et al. 2017 give no such numbers)",
            rule="holds if every measured cosine is within 0.05 of the claimed value, else fails (an exact "
                 "computation: no interval)"))
        spread = max(t[6] - t[5] for t in table)
        rel = max((t[6] - t[5]) / (t[0] / 2) for t in table)
        v = sv.by_construction("sin a sin b + cos a cos b = cos(a − b), so PE(p)·PE(p+k) = Σ cos(kω_i)",
                               f"largest spread over p {rel:.2g} of |PE|²", shown=rel < 1e-3,
                               test="computed from the library's float32 table",
                               effect=f"spread {spread:.2g} ({rel:.2g} of |PE|²)", margin="1e-3 of |PE|²")
        out.append(v.row(
            claim="PE(p)·PE(p+k) depends only on the distance k, not on the position p (the 'relative position' argument for sinusoids)",
            measured=f"largest spread of the dot product over p in {{0, 1, 10, 100, 1000}}: {spread:.2g} "
                     f"({rel:.2g} of |PE|² = D/2), float32 table",
            anchor="identity sin a sin b + cos a cos b = cos(a − b) (Vaswani et al. 2017 §3.5 motivation)",
            rule="by construction if the dot product varies over p by less than 1e-3 of |PE|² for every d_model "
                 "and k; fails (an implementation defect) otherwise"))
    alias = {(int(num(r, "d_model")), r["band"]): r for r in d["aliasing"]}
    if table and alias:
        Ds = sorted({t[0] for t in table})
        mono = {D: int(num(alias[(D, "all")], "monotone_to")) for D in Ds if (D, "all") in alias}
        falls = all(t512[k][2] > t512[k2][2] for k, k2 in zip(sorted(CLAIMED), sorted(CLAIMED)[1:])) if t512 else False
        far = {D: num(alias[(D, "all")], "closest_far_separation") for D in mono}
        if falls and min(mono.values()) >= 1000:
            kind, why = sv.HOLDS, "the separation grows monotonically to k >= 1000 for every d_model"
        elif not falls:
            kind, why = sv.FAILS, "the cosine does not fall over k = 1, 10, 100, 1000"
        else:
            kind, why = sv.DEPENDS, "it falls at the tabulated distances but is monotone only to k = " + \
                        ", ".join(str(mono[D]) for D in sorted(mono))
        v = sv.measured(kind, why, test="exact computation of the separation for every k up to the search "
                                        "limit", effect="monotone to k = " + ", ".join(
                                            f"{mono[D]} (d_model {D})" for D in sorted(mono)), margin="exact")
        v.condition = "the distance range (monotone only up to the distance measured)"
        out.append(v.row(
            claim="Sinusoidal PE similarity falls with distance",
            measured="at k = 1, 10, 100, 1000 the cosine falls for d_model 512; the separation of all dimensions grows "
                     "with every step only up to k = " + ", ".join(f"{mono[D]} (d_model {D})" for D in sorted(mono)) +
                     "; beyond, it oscillates without aliasing (closest far separation " +
                     ", ".join(f"{far[D]:.2f}" for D in sorted(far)) + " vs √2 for orthogonal)",
            anchor="claim: similarity decreases with distance",
            rule="holds if the cosine falls over k = 1, 10, 100, 1000 and the separation grows monotonically up to "
                 "k >= 1000 for every d_model; fails if the cosine does not fall; otherwise depends on the range"))

    # 2. RoPE long-term decay (Monte Carlo over random q, k).
    rd = [r for r in d["rope_decay"] if r["positional_encoding"] == "rope" and int(num(r, "scale")) == 1]
    if rd:
        def at(col, dist):
            return st.mean_ci95([num(r, col) for r in rd if int(num(r, "distance")) == dist])[0]
        max_d = max(int(num(r, "distance")) for r in rd)
        far_from = min(100, max_d // 2)
        far_d = sorted({int(num(r, "distance")) for r in rd if int(num(r, "distance")) >= far_from})
        iid0 = at("mean_abs_score_iid", 0)
        iid_far = [at("mean_abs_score_iid", x) / iid0 for x in far_d]
        sh0 = at("mean_score_shared", 0)
        sh_far = [abs(at("mean_score_shared", x)) / sh0 for x in far_d]
        b0 = at("roformer_bound", 0)
        b_far = [at("roformer_bound", x) / b0 for x in far_d]
        iid_flat = max(abs(x - 1) for x in iid_far) < 0.1
        shared_decays = max(sh_far) < 0.5
        if iid_flat and shared_decays:
            kind, why = sv.DEPENDS, "q = k decays below 0.5 while independent q, k stay within 10 %"
        elif shared_decays:
            kind, why = sv.HOLDS, "both decay"
        else:
            kind, why = sv.FAILS, "q = k does not fall below 0.5"
        v = sv.measured(kind, why, test=f"Monte Carlo, {seeds} seeds of random q, k ~ N(0, I)",
                        effect=f"at distance >= {far_from}: q = k at most {max(sh_far):.2f}, independent "
                               f"{min(iid_far):.3f}–{max(iid_far):.3f} of distance 0",
                        margin="decay: below 0.5; flat: within 10 %")
        v.condition = "how q and k correlate"
        out.append(v.row(
            claim="RoPE scores decay with relative distance (RoFormer §3.4.3 long-term decay)",
            measured=f"at distances >= {far_from} (head_dim {int(num(rd[0], 'head_dim'))}): RoFormer bound term at most "
                     f"{max(b_far):.2f} of its distance-0 value; E[qᵀRk] with q = k at most {max(sh_far):.2f}; "
                     f"E|qᵀRk| with independent q, k between {min(iid_far):.3f} and {max(iid_far):.3f} of its "
                     f"distance-0 value ({seeds} seeds)",
            anchor="RoFormer Figure 2: the bound term decays with distance",
            rule="at distances >= 100 (or half the longest distance computed): 'depends on how q and k correlate' "
                 "if independent Gaussian q, k stay within 10% of the distance-0 |score| (no decay) while q = k "
                 "falls below 50%; 'holds' if both decay; 'fails' if q = k does not fall below 50%"))

    # 3-8. Trained models, per task; the learned table by construction.
    for task in TASKS:
        out += trained_rows(d, task)
    out += learned_row(d)
    if not out:
        raise st.NoClaimRows(f"{results_dir}: no rows to decide any claim (each claim compares built-in "
                             "encodings: sinusoidal alone, rope against sinusoidal, the rope variants, alibi)")
    return out


def beyond_this_machine():
    """What this experiment cannot decide on the 2-core development machine (plots/make_report.py,
    "What this suite cannot decide here"; keys seqlab_verdict.BEYOND_KEYS)."""
    return [sv.beyond(
        "Extrapolation at Press et al.'s scale (ALiBi, Figure 1 and Tables 2–3: 247M parameters on WikiText-103, L_train 512 or 1024); the "
        "suite's closest is paper.ini: a decoder of d_model 256, 4 layers, L_train 128 on the KJV, evaluated to "
        "8×, 5 seeds, Chen et al.'s 1000 fine-tune updates",
        "Press et al.'s models need GPUs and WikiText-103 (not a Debian package), beyond any scale of this "
        "suite; paper.ini compares the shapes of the degradation past L_train (not perplexities), at 150 cells "
        "of hours each",
        sv.paper_sweep("position_extrapolation", mem="2G", time="36:00:00", checkpoint_every=500),
        "text cell (sinusoidal, seed 1): 6.0 CPU-hours at one thread on an idle 2-core AMD EPYC VM (2.15 CPU-s per "
        "update × 10,000 updates, plus 3.4 min of evaluation on 65,536 characters at 1×–8×), and the first cell of "
        "each arm also its whole-run pilot, 3 × 10,000 updates ≈ 18 CPU-hours more: ~290 CPU-hours for the 30 text "
        "cells (CPU time of truncated cells, 20 and 80 updates, extrapolated linearly to paper.ini's updates). The "
        "rope text cells add 2 rates × 3 × 1000 fine-tune updates at length 512 with 6 evaluations each; copy, MQAR "
        "and passkey cells train 1000–3000 updates (not measured). A cell that runs out of --time resumes from its "
        "checkpoints when the same command is run again")]


def main(argv):
    res = argv[1] if len(argv) > 1 else os.path.join("results", NAME)
    try:
        d = load(res)
        st.setup()
        out_dir = os.path.join(res, "figures")
        paths = plot_text(d, out_dir)
        for task in TASKS[1:]:
            paths += plot_task(d, task, out_dir)
        paths += plot_finetune(d, out_dir)
        paths += plot_similarity(d, out_dir)
        paths += plot_rope_decay(d, out_dir)
        paths += plot_resolution(d, out_dir)
        paths.append(write_table(out_dir, "levels", LEVEL_HEADER, levels_rows(d)))
        try:
            verdicts(res)  # the same checks as the report, so a bad table fails here too
        except st.NoClaimRows as e:
            print(f"note: {e}; figures only", file=sys.stderr)
    except st.DataError as e:
        st.fail(str(e))
    for p in paths:
        print("wrote", p)


if __name__ == "__main__":
    main(sys.argv)
