#!/usr/bin/python3
"""Figures and verdicts for experiments/position_extrapolation (claim 3: positional encodings).

usage: plot_position_extrapolation.py [RESULTS_DIR]   (default: results/position_extrapolation)

Reads from RESULTS_DIR: position_extrapolation.csv (runs), position_extrapolation_eval.csv,
position_extrapolation_steps.csv (training curves, for the verdicts' convergence check),
position_extrapolation_similarity.csv, position_extrapolation_resolution.csv,
position_extrapolation_aliasing.csv, position_extrapolation_rope_decay.csv and
position_extrapolation.meta.json. Writes into RESULTS_DIR/figures:
  position_extrapolation_<task>.{png,pdf}   metric vs evaluation length, one line per encoding
                                            (mean and 95% CI band over seeds), line at L_train;
                                            left: all scored positions, right: positions >= L_train
  position_extrapolation_similarity.{png,pdf} and position_extrapolation_similarity_table.csv
                                            the sinusoidal similarity table beside the claim
  position_extrapolation_rope_decay.{png,pdf}  RoPE long-term decay, with and without interpolation
  position_extrapolation_resolution.{png,pdf}  separation of positions by frequency band
Figures whose data the run did not produce (e.g. no analysis cells, or no task) are skipped.
verdicts(results_dir) returns the report rows (plots/make_report.py). Exits 2 naming a missing
file or column.
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
ENCODINGS = ["sinusoidal", "learned", "rope", "rope_pi", "rope_ntk", "alibi", "none"]
TASKS = ["copy", "mqar", "char_lm"]
TASK_TITLE = {"copy": "copy (repeat the input)", "mqar": "multi-query associative recall",
              "char_lm": "character-level language model"}
CLAIMED = {1: 0.92, 10: 0.65, 100: 0.12, 1000: -0.06}

RUN_COLS = ["task", "positional_encoding", "variant", "seed", "L_train", "diverged"]
EVAL_COLS = ["task", "positional_encoding", "variant", "seed", "L_train", "eval_len", "eval_ratio",
             "bucket", "n_scored", "loss_nats", "perplexity", "accuracy", "chance_accuracy",
             "chance_loss_nats"]
SIM_COLS = ["d_model", "distance", "position", "dot", "cosine", "dot_closed_form",
            "cosine_closed_form", "claimed_cosine"]
RES_COLS = ["d_model", "band", "distance", "cosine", "separation"]
ALIAS_COLS = ["d_model", "band", "n_frequencies", "period_min", "period_max", "separation_at_1",
              "monotone_to", "first_alias_distance", "closest_far_distance",
              "closest_far_separation", "searched_to"]
STEP_COLS = ["task", "positional_encoding", "variant", "seed", "phase", "step", "train_loss"]
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


def load(res):
    d = {"runs": read_table(res, "main", RUN_COLS),
         "eval": read_table(res, "eval", EVAL_COLS),
         "similarity": read_table(res, "similarity", SIM_COLS),
         "resolution": read_table(res, "resolution", RES_COLS),
         "aliasing": read_table(res, "aliasing", ALIAS_COLS),
         "rope_decay": read_table(res, "rope_decay", DECAY_COLS),
         "steps": read_table(res, "steps", STEP_COLS)}
    if not d["runs"]:
        raise st.DataError(f"{path_of(res, 'main')}: no data rows")
    d["meta"] = st.read_meta(os.path.join(res, NAME + ".meta.json"))
    return d


def metric_of(task):
    return ("perplexity", False) if task == "char_lm" else ("accuracy", True)  # (column, higher better)


def points(evals, task, enc, variant, bucket, column):
    """(seed, eval_ratio, value) of one line's evaluation rows, nan values left out."""
    for r in evals:
        if (r["task"] == task and r["positional_encoding"] == enc and r["variant"] == variant
                and r["bucket"] == bucket):
            v = num(r, column)
            if not math.isnan(v):
                yield int(num(r, "seed")), int(num(r, "eval_ratio")), v


def series(evals, task, enc, variant, bucket, column):
    """{eval_ratio: [value per seed]} of one line."""
    out = defaultdict(list)
    for _, ratio, v in points(evals, task, enc, variant, bucket, column):
        out[ratio].append(v)
    return out


def encoding_order(rows):
    """The built-in encodings in their fixed order, then any other encoding present in rows (one a
    user registered: lib/README.md "Extending seqlab"), sorted by name."""
    return ENCODINGS + sorted({r["positional_encoding"] for r in rows} - set(ENCODINGS))


def lines_of(evals, task):
    """(encoding, variant, label) present for a task: built-ins in the fixed order, then others."""
    out = []
    for enc in encoding_order(evals):
        for variant in ("zero_shot", "finetuned"):
            if any(r["task"] == task and r["positional_encoding"] == enc and r["variant"] == variant
                   for r in evals):
                out.append((enc, variant, enc + (" (fine-tuned)" if variant == "finetuned" else "")))
    return out


def fmt(m, ci, digits=3):
    return f"{m:.{digits}g} ± {ci:.2g}"


# --- figures --------------------------------------------------------------------------------------

def plot_task(d, task, out_dir):
    evals = d["eval"]
    rows = [r for r in evals if r["task"] == task]
    if not rows:
        return []
    column, higher = metric_of(task)
    L = int(num(rows[0], "L_train"))
    seeds = sorted({r["seed"] for r in rows})
    note = st.scale_note(d["meta"], len(seeds))
    fig, axes = st.plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, bucket, title in zip(axes, ("all", "beyond_train_len"),
                                 ("all scored positions", f"positions >= L_train = {L} only")):
        for i, (enc, variant, label) in enumerate(lines_of(evals, task)):
            s = series(evals, task, enc, variant, bucket, column)
            xs = sorted(s)
            if not xs:
                continue
            stats = [st.mean_ci95(s[x]) for x in xs]
            k = encoding_order(evals).index(enc)
            color = st.PALETTE[k % len(st.PALETTE)]
            ls = "--" if variant == "finetuned" else "-"
            xl = [x * L for x in xs]
            ax.plot(xl, [m for m, _ in stats], ls, color=color, marker=st.MARKERS[k % len(st.MARKERS)],
                    markersize=4, label=label)
            ax.fill_between(xl, [m - c for m, c in stats], [m + c for m, c in stats], color=color,
                            alpha=0.15, linewidth=0)
        ax.axvline(L, color="grey", linestyle=":", linewidth=1.2)
        ax.text(L, 0.01, " L_train", transform=ax.get_xaxis_transform(), fontsize=8, color="grey",
                va="bottom")
        if task == "char_lm":
            base = math.exp(num(rows[0], "chance_loss_nats"))
            ax.axhline(base, color="black", linestyle=":", linewidth=1, label=f"unigram ({base:.3g})")
            ax.set_yscale("log")
            ax.set_ylabel("test perplexity (per character)")
        else:
            chance = num(rows[0], "chance_accuracy")
            ax.axhline(chance, color="black", linestyle=":", linewidth=1, label=f"chance ({chance:.3g})")
            ax.set_ylim(0, 1.02)
            ax.set_ylabel("test accuracy on scored tokens (fraction)")
        ax.set_xscale("log", base=2)
        ticks = sorted({int(num(r, "eval_len")) for r in rows})
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks], fontsize=7)
        ax.set_xlabel("evaluation length (tokens)")
        dashed = "; dashed: rope_pi after fine-tuning" if any(
            v == "finetuned" for _, v, _ in lines_of(evals, task)) else ""
        ax.set_title(f"{TASK_TITLE[task]}: {title}\n({note}{dashed})", fontsize=9)
    axes[0].legend(fontsize=7, ncol=2, loc="best")
    return st.save(fig, out_dir, f"{NAME}_{task}")


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
    csv_path = os.path.join(out_dir, f"{NAME}_similarity_table.csv")
    os.makedirs(out_dir, exist_ok=True)
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["d_model", "distance", "cosine", "cosine_closed_form", "dot_at_p0", "dot_min_over_p",
                    "dot_max_over_p", "claimed_cosine"])
        for row in table:
            w.writerow([row[0], row[1]] + [f"{v:.6g}" for v in row[2:]])
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

ACC_SLOPE = 0.05    # accuracy per doubling of the evaluation length: smaller trends count as none
LOSS_SLOPE = 0.1    # nats per doubling (char_lm, on the log perplexity)
ACC_MARGIN = 0.02   # accuracy: levels within this of the optimum / the floor; mean differences
LOSS_MARGIN = 0.05  # nats: the same for char_lm


def _stat(evals, task, enc, variant, ratio, column, bucket="all"):
    vals = series(evals, task, enc, variant, bucket, column).get(ratio, [])
    m, ci = st.mean_ci95(vals)
    return m, ci, len(vals)


def per_seed(evals, task, enc, variant, bucket="all"):
    """{seed: {eval_ratio: value}} of the task's metric: accuracy, or loss in nats for char_lm
    (the log of the perplexity)."""
    out = defaultdict(dict)
    for seed, ratio, v in points(evals, task, enc, variant, bucket,
                                 "loss_nats" if task == "char_lm" else "accuracy"):
        out[seed][ratio] = v
    return dict(out)


def floor_at(d, task, ratio):
    """The best predictor that ignores the dependency, at an evaluation length ratio·L_train (all
    scored positions): copy: the most frequent source symbol of the n = ⌊(L − 1)/2⌋ symbols
    (seqlab_stats.most_frequent_symbol, the formula of CopyMemoryTask::most_frequent_symbol_
    accuracy applied to the repeat-copy rows, alphabet copy_alphabet); mqar: the key-agnostic
    predictor of its pairs (mqar_n_pairs, mqar_n_values; MultiQueryAssociativeRecall::
    key_agnostic_accuracy); both from meta.json's config, else the CSV's chance_accuracy;
    char_lm: the unigram loss (chance_loss_nats)."""
    cfg = d["meta"].get("config", {}) if isinstance(d["meta"], dict) else {}
    rows = [r for r in d["eval"] if r["task"] == task]
    r0 = rows[0]
    if task == "char_lm":
        return num(r0, "chance_loss_nats")
    L = int(num(r0, "L_train")) * ratio
    if task == "copy" and "copy_alphabet" in cfg:
        n = (L - 1) // 2
        return ss.most_frequent_symbol(n, int(cfg["copy_alphabet"]))[0]
    if task == "mqar" and "mqar_n_pairs" in cfg and "mqar_n_values" in cfg:
        return ss.mqar_key_agnostic(int(cfg["mqar_n_pairs"]), int(cfg["mqar_n_values"]))[0]
    return num(r0, "chance_accuracy")


def levels(d, task, enc, variant, ratios):
    """Mean of the metric over seeds at each ratio."""
    ps = per_seed(d["eval"], task, enc, variant)
    return [st.mean_ci95([ps[s][x] for s in ps if x in ps[s]])[0] for x in ratios]


def at_floor(d, task, enc, variant, ratios):
    """Every ratio's mean within the margin of that length's floor (or worse)."""
    lv = levels(d, task, enc, variant, ratios)
    if not lv:
        return None
    if task == "char_lm":
        return all(sv.at_floor([v], floor_at(d, task, x), LOSS_MARGIN, higher_is_better=False)
                   for v, x in zip(lv, ratios))
    return all(sv.at_floor([v], floor_at(d, task, x), ACC_MARGIN) for v, x in zip(lv, ratios))


def at_ceiling(d, task, enc, variant, ratios):
    """Every ratio's mean within the margin of the optimum (accuracy 1; char_lm: n.a.)."""
    if task == "char_lm":
        return None
    return sv.at_ceiling(levels(d, task, enc, variant, ratios), 1.0, ACC_MARGIN)


def state(d, task, enc, variant):
    """Convergence of the run's last training phase (pretraining; fine-tuning for a fine-tuned
    variant), scale the chance loss."""
    phase = "finetune" if variant == "finetuned" else "pretrain"
    cur = defaultdict(list)
    for r in d["steps"]:
        if (r["task"] == task and r["positional_encoding"] == enc and r["variant"] == variant
                and r["phase"] == phase):
            cur[int(num(r, "seed"))].append((num(r, "step"), num(r, "train_loss")))
    rows = [r for r in d["eval"] if r["task"] == task]
    scale = num(rows[0], "chance_loss_nats") if rows else float("nan")
    if not cur or not scale > 0:
        return None
    return ss.convergence(dict(cur), scale).state


def verdicts(results_dir):
    d = load(results_dir)
    evals = d["eval"]
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

    # 3-5. Trained models, per task: trends over every evaluation length.
    for task in TASKS:
        rows = [r for r in evals if r["task"] == task]
        if not rows:
            continue
        column, higher = metric_of(task)
        unit = "perplexity" if task == "char_lm" else "accuracy"
        ratios = sorted({int(num(r, "eval_ratio")) for r in rows})
        R = ratios[-1]
        beyond = [x for x in ratios if x >= 2]
        n_seeds = len({r["seed"] for r in rows})
        lm = task == "char_lm"
        slope_m, lvl_m = (LOSS_SLOPE, LOSS_MARGIN) if lm else (ACC_SLOPE, ACC_MARGIN)
        s_unit = "nats per doubling" if lm else "accuracy per doubling"
        metric_txt = "log perplexity (nats)" if lm else "accuracy"
        has = {e for e in ("sinusoidal", "rope", "rope_pi") if any(r["positional_encoding"] == e for r in rows)}

        def pts(enc, variant="zero_shot"):
            return {s: [(math.log2(x), v) for x, v in sorted(byr.items())]
                    for s, byr in per_seed(evals, task, enc, variant).items()}

        def lv_txt(enc, variant="zero_shot"):
            return f"{enc}{' (fine-tuned)' if variant == 'finetuned' else ''} " + ", ".join(
                f"{v:.3g}" for v in levels(d, task, enc, variant, ratios))

        trend_test = (f"per-seed OLS slope of the {metric_txt} against log2 of the evaluation length "
                      f"({len(ratios)} lengths, 1x to {R}x L_train), t over seeds")
        floor_txt = ("the unigram loss" if lm else "the best predictor that ignores the dependency at that "
                     "length (copy: the most frequent source symbol; mqar: the key-agnostic predictor)")

        # sinusoidal beyond L_train: its trend over lengths.
        if "sinusoidal" in has and R >= 2:
            eff = ss.trend(pts("sinusoidal"), what=f"sinusoidal slope, {s_unit}")
            v = sv.decide(eff, slope_m, sv.GREATER if lm else sv.LESS, unit=s_unit,
                          ceiling=at_ceiling(d, task, "sinusoidal", "zero_shot", ratios),
                          floor=at_floor(d, task, "sinusoidal", "zero_shot", [1]),
                          moving_up=state(d, task, "sinusoidal", "zero_shot"), level_margin=lvl_m,
                          levels=f"{metric_txt} at 1x..{R}x: {lv_txt('sinusoidal')}", test=trend_test)
            a1, a2 = _stat(evals, task, "sinusoidal", "zero_shot", 1, column), _stat(evals, task, "sinusoidal", "zero_shot", 2, column)
            extra = f" (ratio {a2[0] / a1[0]:.2f})" if lm else ""
            out.append(v.row(
                claim=f"Sinusoidal encodings fail beyond the training length ({task})",
                measured=f"sinusoidal {unit} at 1x L_train {fmt(a1[0], a1[1])}, at 2x {fmt(a2[0], a2[1])}{extra}, "
                         f"at {R}x {fmt(*_stat(evals, task, 'sinusoidal', 'zero_shot', R, column)[:2])}; "
                         f"{metric_txt} at 1x..{R}x: {lv_txt('sinusoidal')} ({n_seeds} seeds)",
                anchor="Press et al. 2021 (ALiBi) Fig. 1/Table: sinusoidal perplexity more than doubles at 2x the training length",
                rule=f"the slope of the {metric_txt} against log2 of the evaluation length, per seed over 1x..{R}x: holds "
                     f"if its interval lies {'above +' if lm else 'below −'}{slope_m:g} {s_unit} (it degrades), fails "
                     f"if beyond the margin the other way or within ±{slope_m:g}; inconclusive: floor if the model "
                     f"is within {lvl_m:g} of {floor_txt} already at 1x (it did not learn the task), ceiling if "
                     f"within {ACC_MARGIN:g} of accuracy 1 at every length"))

        # rope vs sinusoidal: the paired difference of their trends.
        if {"rope", "sinusoidal"} <= has and R >= 2:
            a_pts, b_pts = (pts("sinusoidal"), pts("rope")) if lm else (pts("rope"), pts("sinusoidal"))
            eff = ss.trend_difference(a_pts, b_pts, what=(f"slope(sinusoidal) − slope(rope), {s_unit}" if lm else
                                                          f"slope(rope) − slope(sinusoidal), {s_unit}"))
            learned_floor = at_floor(d, task, "rope", "zero_shot", [1]) or at_floor(d, task, "sinusoidal", "zero_shot", [1])
            both_floor = bool(at_floor(d, task, "rope", "zero_shot", beyond) and
                              at_floor(d, task, "sinusoidal", "zero_shot", beyond))
            both_ceiling = bool(at_ceiling(d, task, "rope", "zero_shot", ratios) and
                                at_ceiling(d, task, "sinusoidal", "zero_shot", ratios)) if not lm else None
            ms, mr = state(d, task, "sinusoidal", "zero_shot"), state(d, task, "rope", "zero_shot")
            v = sv.decide(eff, slope_m, sv.GREATER, unit=s_unit, ceiling=both_ceiling,
                          floor=bool(learned_floor or both_floor), moving_up=mr, moving_down=ms,
                          level_margin=lvl_m, test="paired " + trend_test,
                          levels=f"{metric_txt} at 1x..{R}x: {lv_txt('rope')}; {lv_txt('sinusoidal')}")
            ro, si = _stat(evals, task, "rope", "zero_shot", 2, column), _stat(evals, task, "sinusoidal", "zero_shot", 2, column)
            out.append(v.row(
                claim=f"Rotary (RoPE) degrades less than sinusoidal beyond the training length ({task})",
                measured=f"{unit} at 2x L_train: rope {fmt(ro[0], ro[1])}, sinusoidal {fmt(si[0], si[1])}; at {R}x: rope "
                         f"{fmt(*_stat(evals, task, 'rope', 'zero_shot', R, column)[:2])}, sinusoidal "
                         f"{fmt(*_stat(evals, task, 'sinusoidal', 'zero_shot', R, column)[:2])}; {metric_txt} at "
                         f"1x..{R}x: {lv_txt('rope')}; {lv_txt('sinusoidal')}",
                anchor="Press et al. 2021: rotary extrapolates somewhat better than sinusoidal, far worse than ALiBi",
                rule=f"the paired per-seed difference of the two slopes (rope degrading less is positive) against "
                     f"±{slope_m:g} {s_unit}: holds if beyond +{slope_m:g}, fails if below −{slope_m:g} or within; "
                     f"inconclusive: floor if either is within {lvl_m:g} of {floor_txt} at 1x or both are at every "
                     f"length beyond L_train (both collapsed), ceiling if both are within {ACC_MARGIN:g} of 1 "
                     "everywhere; not converged if the arm that could close the gap was still improving"))

        # rope_pi (fine-tuned) vs rope: the paired difference averaged over the lengths beyond L_train.
        if {"rope_pi", "rope"} <= has:
            ft = per_seed(evals, task, "rope_pi", "finetuned")
            ro = per_seed(evals, task, "rope", "zero_shot")
            sign = -1.0 if lm else 1.0

            def beyond_mean(ps):
                return {s: sum(byr[x] for x in beyond) / len(beyond) for s, byr in ps.items()
                        if all(x in byr for x in beyond)}
            if not ft or not beyond:
                eff = ss.mean_interval([], what="no fine-tuned rows")
            else:
                bf, br = beyond_mean(ft), beyond_mean(ro)
                eff = ss.paired_difference({s: sign * v for s, v in bf.items()}, {s: sign * v for s, v in br.items()},
                                           what=(f"rope − rope_pi (fine-tuned), loss in nats, mean over 2x..{R}x" if lm else
                                                 f"rope_pi (fine-tuned) − rope, accuracy, mean over 2x..{R}x"))
            both_floor = bool(at_floor(d, task, "rope_pi", "finetuned", beyond) and
                              at_floor(d, task, "rope", "zero_shot", beyond)) if ft else None
            both_ceiling = bool(at_ceiling(d, task, "rope_pi", "finetuned", beyond) and
                                at_ceiling(d, task, "rope", "zero_shot", beyond)) if (ft and not lm) else None
            v = sv.decide(eff, lvl_m, sv.GREATER, unit="nats" if lm else "accuracy", ceiling=both_ceiling,
                          floor=both_floor, moving_up=state(d, task, "rope_pi", "finetuned"),
                          moving_down=state(d, task, "rope", "zero_shot"), controls=False, level_margin=lvl_m,
                          test=f"paired t over seeds of the mean over the {len(beyond)} lengths beyond L_train",
                          levels=(f"{metric_txt} at 1x..{R}x: {lv_txt('rope_pi', 'finetuned')}; {lv_txt('rope')}"
                                  if ft else ""))
            f8 = _stat(evals, task, "rope_pi", "finetuned", R, column)
            zs = _stat(evals, task, "rope_pi", "zero_shot", R, column)
            r8 = _stat(evals, task, "rope", "zero_shot", R, column)
            out.append(v.row(
                claim=f"RoPE with position interpolation extends further than plain RoPE ({task})",
                measured=f"{unit} at {R}x L_train: rope_pi fine-tuned {fmt(f8[0], f8[1]) if f8[2] else 'n/a'}, "
                         f"rope_pi zero-shot {fmt(zs[0], zs[1])}, rope {fmt(r8[0], r8[1])}"
                         + (f"; {metric_txt} at 1x..{R}x: {lv_txt('rope_pi', 'finetuned')}; {lv_txt('rope_pi')}; "
                            f"{lv_txt('rope')}" if ft else ""),
                anchor="Chen et al. 2023: PI + ~1000 fine-tuning steps extends LLaMA 2k -> 32k with low perplexity; "
                       "PI without fine-tuning is worse than with",
                rule=f"per seed, the {metric_txt} averaged over the lengths beyond L_train (2x..{R}x), rope_pi after "
                     f"fine-tuning against rope, paired t against ±{lvl_m:g}: holds if beyond in rope_pi's favour, "
                     f"fails if beyond the other way or within; inconclusive: floor / ceiling if both are within "
                     f"{lvl_m:g} of {floor_txt} / of 1 at every length beyond; controls not matched: only rope_pi is "
                     "fine-tuned (no fine-tuned RoPE control)"))
    if not out:
        raise st.NoClaimRows(f"{results_dir}: no rows to decide any claim (each claim compares built-in "
                             "encodings: sinusoidal alone, rope against sinusoidal, rope_pi against rope)")
    return out


def main(argv):
    res = argv[1] if len(argv) > 1 else os.path.join("results", NAME)
    try:
        d = load(res)
        st.setup()
        out_dir = os.path.join(res, "figures")
        paths = []
        for task in TASKS:
            paths += plot_task(d, task, out_dir)
        paths += plot_similarity(d, out_dir)
        paths += plot_rope_decay(d, out_dir)
        paths += plot_resolution(d, out_dir)
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
