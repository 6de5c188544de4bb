#!/usr/bin/python3
"""Figures and verdicts for experiments/attention_ablations (claim 5: separate W_Q/W_K matter,
several heads beat one, encoder-only / decoder-only / encoder-decoder suit different tasks).

usage: plot_attention_ablations.py [RESULTS_DIR]   (default: results/attention_ablations)
Reads attention_ablations.csv, attention_ablations_curve.csv and attention_ablations.meta.json
from RESULTS_DIR; writes into RESULTS_DIR/figures:
  attention_ablations_qk.{png,pdf}      separate vs shared W_Q = W_K: accuracy, steps to target,
                                        measured logit asymmetry
  attention_ablations_qk_curves.{png,pdf}  eval accuracy during training, separate vs shared
  attention_ablations_heads.{png,pdf}   accuracy and steps to target against n_heads
  attention_ablations_arch.{png,pdf}    encoder / decoder / encoder-decoder per task
(a figure whose sub-design has no arms in the CSV is skipped). Exits 2 naming a missing or
malformed file or column. verdicts(RESULTS_DIR) returns the report rows (plots/make_report.py).

Sub-designs are recognised from the arms present (task:arch:qk:n_heads):
  Q/K sharing:  (task, arch, n_heads) groups that have both qk = separate and qk = shared;
  n_heads:      (task, arch) groups with qk = separate and >= 2 values of n_heads;
  architecture: tasks majority, reverse, lm with qk = separate and >= 2 architectures at one n_heads.
"""
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seqlab_style as st  # noqa: E402

NAME = "attention_ablations"
MAIN_COLS = ["arm", "task", "arch", "qk", "n_heads", "seed", "d_model", "n_params", "param_budget",
             "steps", "test_loss", "test_accuracy", "test_exact_match", "chance_accuracy",
             "best_accuracy", "optimal_loss", "target_accuracy", "steps_to_target",
             "logit_asymmetry_init", "logit_asymmetry", "diverged"]
CURVE_COLS = ["arm", "task", "arch", "qk", "n_heads", "seed", "step", "eval_accuracy"]

# Tasks whose attention must be asymmetric (claim: separate W_Q, W_K needed) and the control.
ASYMMETRIC = ["prev_token", "mqar", "induction"]
TASK_ORDER = ["prev_token", "mqar", "induction", "majority", "reverse", "lm"]
TASK_LABEL = {"prev_token": "previous token", "mqar": "MQAR (assoc. recall)",
              "induction": "induction copy", "majority": "majority (bag of tokens)",
              "reverse": "reverse (transduction)", "lm": "Markov LM (generation)"}
ARCH_ORDER = ["encoder", "decoder", "encoder_decoder"]
ARCH_LABEL = {"encoder": "encoder-only", "decoder": "decoder-only", "encoder_decoder": "encoder-decoder"}
TASK_SHORT = {"prev_token": "prev. token", "mqar": "MQAR", "induction": "induction", "majority": "majority",
              "reverse": "reverse", "lm": "Markov LM"}
ARCH_SHORT = {"encoder": "enc", "decoder": "dec", "encoder_decoder": "enc-dec"}
# The architecture each task is claimed to suit (issue 9: encoder-only understanding,
# decoder-only generation, encoder-decoder transduction).
CLAIMED_ARCH = {"majority": "encoder", "lm": "decoder", "reverse": "encoder_decoder"}
ACC_MARGIN = 0.02    # accuracy points below which a difference counts as none
LOSS_MARGIN = 0.02   # nats, the same for the lm task (compared on test loss)
SYM_SHARED_MAX = 1e-5
SYM_SEPARATE_MIN = 0.05
MIN_SEEDS = 3

ANCHOR_QK = ("Kitaev et al. 2020 (Reformer, §2 and Fig. 3): shared-QK attention no worse than separate "
             "Q, K on enwik8 / imagenet64 (with attention to self masked; not masked here)")
ANCHOR_HEADS = ("Vaswani et al. 2017 Table 3 row (A): 1 head 24.9 BLEU vs 25.8 with 8 heads at equal "
                "compute (newstest2013 dev; 16 heads 25.8, 32 heads 25.4); Michel et al. 2019: a large "
                "fraction of heads can be pruned at test time with little loss")
ANCHOR_ARCH = ("Raffel et al. 2020 (T5) Table 2, denoising objective: encoder-decoder 83.28 GLUE / 26.98 "
               "EnDe BLEU vs prefix LM 81.82 / 26.43 vs decoder-only LM 74.70 / 25.09 (enc-dec with 2P "
               "parameters at the decoder's cost M): encoder-decoder best on every benchmark")


def num(r, k, path):
    return st.number(r, k, path)


def load(res):
    main_path = os.path.join(res, NAME + ".csv")
    curve_path = os.path.join(res, NAME + "_curve.csv")
    rows = st.read_csv(main_path, MAIN_COLS)
    curve = st.read_csv(curve_path, CURVE_COLS)
    for r in rows:
        for k in ("n_heads", "seed", "d_model", "n_params", "param_budget", "steps", "test_loss",
                  "test_accuracy", "test_exact_match", "chance_accuracy", "best_accuracy",
                  "optimal_loss", "target_accuracy", "steps_to_target", "logit_asymmetry_init",
                  "logit_asymmetry", "diverged"):
            r[k] = num(r, k, main_path)
        r["n_heads"] = int(r["n_heads"])
        r["seed"] = int(r["seed"])
    for r in curve:
        for k in ("n_heads", "seed", "step", "eval_accuracy"):
            r[k] = num(r, k, curve_path)
        r["n_heads"] = int(r["n_heads"])
    meta = st.read_meta(os.path.join(res, NAME + ".meta.json"))
    return rows, curve, meta


def index(rows):
    """(task, arch, qk, n_heads) -> {seed: row}."""
    out = defaultdict(dict)
    for r in rows:
        out[(r["task"], r["arch"], r["qk"], r["n_heads"])][r["seed"]] = r
    return out


def qk_groups(idx):
    """(task, arch, n_heads) with both separate and shared arms."""
    g = {(t, a, h) for (t, a, q, h) in idx if q == "separate" and (t, a, "shared", h) in idx}
    return sorted(g, key=lambda x: (TASK_ORDER.index(x[0]) if x[0] in TASK_ORDER else 99,
                                    ARCH_ORDER.index(x[1]), x[2]))


def heads_groups(idx):
    """(task, arch) -> sorted n_heads with qk = separate, when there are >= 2 of them."""
    g = defaultdict(set)
    for (t, a, q, h) in idx:
        if q == "separate":
            g[(t, a)].add(h)
    return {k: sorted(v) for k, v in g.items() if len(v) >= 2}


def arch_groups(idx):
    """(task, n_heads) -> architectures with qk = separate, for tasks with >= 2 of them."""
    g = defaultdict(set)
    for (t, a, q, h) in idx:
        if q == "separate" and t in CLAIMED_ARCH:
            g[(t, h)].add(a)
    return {k: [a for a in ARCH_ORDER if a in v] for k, v in g.items() if len(v) >= 2}


def censored_steps(r):
    """Steps to the target accuracy; a run that never reached it counts as steps + 1."""
    s = r["steps_to_target"]
    return s if s >= 0 else r["steps"] + 1


def metric(task):
    """(column, higher is better, margin) used to compare arms on a task."""
    if task == "lm":
        return "test_loss", False, LOSS_MARGIN
    return "test_accuracy", True, ACC_MARGIN


def paired(a, b, key):
    """Per-seed values of `key` of arms a and b ({seed: row}) on their common seeds."""
    seeds = sorted(set(a) & set(b))
    return [key(a[s]) for s in seeds], [key(b[s]) for s in seeds]


def compare(x, y, margin):
    """x beats y by more than `margin`? From paired per-seed differences d = x - y with a 95% t-CI:
    'better' (lower bound > margin), 'worse' (upper bound < -margin), 'equivalent' (CI within
    ±margin), else 'unclear'; 'unclear' too with fewer than MIN_SEEDS pairs."""
    d = [a - b for a, b in zip(x, y)]
    if len(d) < MIN_SEEDS:
        return "unclear", float("nan"), 0.0
    m, h = st.mean_ci95(d)
    if m - h > margin:
        return "better", m, h
    if m + h < -margin:
        return "worse", m, h
    if m - h >= -margin and m + h <= margin:
        return "equivalent", m, h
    return "unclear", m, h


def beats(task, a, b):
    """Does arm a ({seed: row}) beat arm b on `task`? Returns (verdict word, reason text).
    Primary: the task metric (accuracy, or test loss for lm), paired over seeds: 'holds' if a is
    better beyond the margin, 'fails' if b is, 'inconclusive' if the CI is too wide to tell. If the
    two are equivalent (CI within ±margin), the steps to the target accuracy (never reached =
    steps + 1) decide: 'holds' if a needs fewer (paired CI above 0), else 'fails' (equal accuracy
    and no measurable speed-up: no advantage)."""
    col, higher, margin = metric(task)
    xa, xb = paired(a, b, lambda r: r[col] if higher else -r[col])
    c, m, h = compare(xa, xb, margin)
    unit = "nats" if col == "test_loss" else "accuracy"
    txt = f"paired Δ{unit} {m:+.3f} ± {h:.3f}" if not math.isnan(m) else f"{len(xa)} paired seeds"
    if c == "better":
        return "holds", txt
    if c == "worse":
        return "fails", txt
    if c == "unclear":
        return "inconclusive", txt
    sa, sb = paired(a, b, censored_steps)
    cs, ms, hs = compare([-v for v in sa], [-v for v in sb], 0.0)
    txt += f"; equal within ±{margin:g}, so steps to target decide: paired Δsteps {-ms:+.0f} ± {hs:.0f}"
    return ("holds" if cs == "better" else "fails"), txt


def fmt_mean(vals, f="{:.3f}"):
    m, h = st.mean_ci95(vals)
    return (f + " ± " + f).format(m, h)


def steps_text(rows):
    reached = [r["steps_to_target"] for r in rows if r["steps_to_target"] >= 0]
    n = len(rows)
    if not reached:
        return f"not reached (0/{n})"
    m, h = st.mean_ci95(reached)
    return f"{m:.0f} ± {h:.0f} ({len(reached)}/{n} reached)"


def arm_summary(arm, task):
    rows = list(arm.values())
    col, _, _ = metric(task)
    if col == "test_loss":
        return f"loss {fmt_mean([r['test_loss'] for r in rows])} nats (optimum {rows[0]['optimal_loss']:.3f})"
    return f"accuracy {fmt_mean([r['test_accuracy'] for r in rows])}, steps to {rows[0]['target_accuracy']:.2f}: {steps_text(rows)}"


# ----------------------------------------------------------------------------------------------
# Verdicts


def verdicts(results_dir):
    rows, _, _ = load(results_dir)
    idx = index(rows)
    seeds = len({r["seed"] for r in rows})
    out = []

    # 1. The measurement: a shared projection makes the logits symmetric.
    sh = [r["logit_asymmetry"] for r in rows if r["qk"] == "shared"] + \
         [r["logit_asymmetry_init"] for r in rows if r["qk"] == "shared"]
    se = [r["logit_asymmetry"] for r in rows if r["qk"] == "separate"] + \
         [r["logit_asymmetry_init"] for r in rows if r["qk"] == "separate"]
    if sh and se:
        ok = max(sh) < SYM_SHARED_MAX and min(se) > SYM_SEPARATE_MIN
        out.append(dict(
            claim="A shared W_Q = W_K makes the attention logits S = QKᵀ/√d_k symmetric; separate projections do not",
            measured=f"‖S − Sᵀ‖/‖S‖ (pre-softmax, before masks, mean over self-attentions): shared max {max(sh):.1e} "
                     f"over {len(sh) // 2} runs (init and trained); separate min {min(se):.2f}, mean {sum(se) / len(se):.2f}",
            anchor="algebra: S = Q Qᵀ is a Gram matrix (symmetric, positive semi-definite) when K = Q",
            verdict="holds" if ok else "fails",
            rule=f"holds if every shared-QK run has asymmetry < {SYM_SHARED_MAX:g} (float rounding) and every "
                 f"separate run > {SYM_SEPARATE_MIN:g}, else fails"))

    # 2. Separate vs shared per task.
    for (t, a, h) in qk_groups(idx):
        sep, shr = idx[(t, a, "separate", h)], idx[(t, a, "shared", h)]
        where = f"{TASK_LABEL.get(t, t)}, {ARCH_LABEL.get(a, a)}, {h} heads"
        if t in ASYMMETRIC:
            v, why = beats(t, sep, shr)
            claim = f"Separate W_Q, W_K beat a shared W_Q = W_K where attention must be asymmetric ({where})"
            rule = ("holds if separate beats shared: paired per-seed difference of test accuracy with 95% CI above "
                    f"+{ACC_MARGIN:g}, or, when the CI lies within ±{ACC_MARGIN:g}, fewer steps to the target accuracy "
                    f"(CI above 0); fails if shared is better, or accuracy is equal and separate is not measurably faster; "
                    f"inconclusive if the accuracy CI is too wide to tell or with < {MIN_SEEDS} seeds")
        else:
            v0, why = beats(t, sep, shr)
            v = {"holds": "fails", "fails": "holds"}.get(v0, v0)
            claim = f"A shared W_Q = W_K is not worse where attention need not be asymmetric ({where})"
            rule = ("holds unless separate beats shared (paired accuracy difference CI above "
                    f"+{ACC_MARGIN:g}, or CI within ±{ACC_MARGIN:g} and fewer steps to target, CI above 0); "
                    f"inconclusive if the accuracy CI is too wide to tell or with < {MIN_SEEDS} seeds")
        out.append(dict(
            claim=claim,
            measured=f"separate {arm_summary(sep, t)}; shared {arm_summary(shr, t)}; {why} ({seeds} seeds)",
            anchor=ANCHOR_QK, verdict=v, rule=rule))

    # 3. Heads: the reference count (the one used by the Q/K arms, else the largest <= 8) vs 1.
    ref_h = sorted({h for (_, _, h) in qk_groups(idx)}) or [None]
    for (t, a), hs in sorted(heads_groups(idx).items(),
                             key=lambda kv: (TASK_ORDER.index(kv[0][0]) if kv[0][0] in TASK_ORDER else 99,
                                             ARCH_ORDER.index(kv[0][1]))):
        if 1 not in hs:
            continue
        ref = ref_h[0] if ref_h[0] in hs else max([h for h in hs if h <= 8] or hs)
        if ref == 1:
            continue
        arms = {h: idx[(t, a, "separate", h)] for h in hs}
        v, why = beats(t, arms[ref], arms[1])
        col, _, _ = metric(t)
        per_h = "; ".join(f"{h} heads {fmt_mean([r[col] for r in arms[h].values()])}" for h in hs)
        stt = "; ".join(f"{h}: {steps_text(list(arms[h].values()))}" for h in hs)
        d_model = int(next(iter(arms[ref].values()))["d_model"])
        out.append(dict(
            claim=f"Several heads beat one at fixed d_model = {d_model} ({TASK_LABEL.get(t, t)}, {ARCH_LABEL.get(a, a)}: {ref} heads vs 1)",
            measured=f"{col.replace('_', ' ')} {per_h}; steps to target {stt}; {why} ({seeds} seeds)",
            anchor=ANCHOR_HEADS, verdict=v,
            rule=(f"{ref} heads (the reference count) vs 1: holds if the paired {col} difference has its 95% CI beyond "
                  f"the margin ({ACC_MARGIN:g} accuracy / {LOSS_MARGIN:g} nats) in favour of {ref} heads, or, when it "
                  "lies within the margin, fewer steps to target (CI above 0); fails if 1 head is better, or equal and "
                  f"the {ref} heads are not measurably faster; inconclusive if the CI is too wide to tell or with "
                  f"< {MIN_SEEDS} seeds")))

    # 4. Architectures: the claimed architecture of each task vs each other one.
    for (t, h), archs in sorted(arch_groups(idx).items(),
                                key=lambda kv: (TASK_ORDER.index(kv[0][0]), kv[0][1])):
        best = CLAIMED_ARCH[t]
        if best not in archs:
            continue
        arms = {a: idx[(t, a, "separate", h)] for a in archs}
        results = {a: beats(t, arms[best], arms[a]) for a in archs if a != best}
        words = [v for v, _ in results.values()]
        if all(w == "holds" for w in words):
            v = "holds"
        elif any(w == "fails" for w in words):
            v = "fails"
        else:
            v = "inconclusive"
        params = ", ".join(f"{ARCH_LABEL[a]} {int(next(iter(arms[a].values()))['n_params'])}" for a in archs)
        meas = "; ".join(f"{ARCH_LABEL[a]} {arm_summary(arms[a], t)}" for a in archs)
        vs = "; ".join(f"vs {ARCH_LABEL[a]}: {why}" for a, (_, why) in results.items())
        if t == "reverse":
            meas += "; exact match (= greedy decoding exact match) " + ", ".join(
                f"{ARCH_LABEL[a]} {fmt_mean([r['test_exact_match'] for r in arms[a].values()])}" for a in archs)
        out.append(dict(
            claim=f"{ARCH_LABEL[best]} suits {TASK_LABEL.get(t, t)} best among {', '.join(ARCH_LABEL[a] for a in archs)} "
                  f"at matched parameter counts ({h} heads)",
            measured=f"{meas}; {vs}; parameters {params} ({seeds} seeds)",
            anchor=ANCHOR_ARCH, verdict=v,
            rule=(f"holds if {ARCH_LABEL[best]} beats every other architecture (paired test "
                  f"{'loss' if t == 'lm' else 'accuracy'} CI beyond ±{LOSS_MARGIN if t == 'lm' else ACC_MARGIN:g}, "
                  "or equal and fewer steps to target, CI above 0); fails if any other is better, or equal and not "
                  "measurably slower; inconclusive otherwise"
                  + ("; note: the decoder-only model trains on every position (LM objective), the encoder-decoder on "
                     "the continuation only; both are scored on the continuation" if t == "lm" else ""))))
    if not out:
        raise st.DataError(os.path.join(results_dir, NAME + ".csv") + ": no sub-design found (no arms to compare)")
    return out


# ----------------------------------------------------------------------------------------------
# Figures


def bar_group(ax, labels, series, colors, ylabel, hline=None, log=False, annotate=None):
    """Grouped bars: series = [(name, [values per label as lists over seeds])]."""
    n = len(series)
    width = 0.8 / max(n, 1)
    for i, (name, vals) in enumerate(series):
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(labels))]
        stats = [st.mean_ci95(v) if v else (float("nan"), 0.0) for v in vals]
        ax.bar(xs, [s[0] for s in stats], width, yerr=[s[1] for s in stats], capsize=3,
               color=colors[i], label=name, log=log)
        if annotate:
            for x, v, s in zip(xs, vals, stats):
                txt = annotate(v)
                if txt:
                    ax.annotate(txt, (x, s[0] if not math.isnan(s[0]) else 0), ha="center", va="bottom",
                                fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel(ylabel)
    if hline is not None:
        for j, y in enumerate(hline):
            ax.plot([j - 0.45, j + 0.45], [y, y], color="grey", linestyle=":", linewidth=1)


def fig_qk(idx, out_dir, note):
    groups = qk_groups(idx)
    if not groups:
        return []
    labels = [f"{TASK_SHORT.get(t, t)}\n{ARCH_SHORT.get(a, a)}, h={h}" for t, a, h in groups]
    fig, axes = st.plt.subplots(1, 3, figsize=(max(15, 3.2 * len(groups)), 4.8))
    colors = [st.PALETTE[0], st.PALETTE[3]]
    acc = [(q, [[r["test_accuracy"] for r in idx[(t, a, q, h)].values()] for t, a, h in groups])
           for q in ("separate", "shared")]
    chance = [next(iter(idx[(t, a, "separate", h)].values()))["chance_accuracy"] for t, a, h in groups]
    bar_group(axes[0], labels, acc, colors, "test accuracy (fraction of scored tokens)", hline=chance)
    axes[0].set_ylim(0, 1.05)
    axes[0].set_title(f"Accuracy (dotted: chance)\n{note}", fontsize=9)
    axes[0].legend(fontsize=8, title="W_Q, W_K", title_fontsize=8, loc="upper center",
                   bbox_to_anchor=(0.5, -0.16), ncol=2)

    def nr(v):
        return "n.r." if v and all(s < 0 for s in v) else ""
    steps = [(q, [[censored_steps(r) for r in idx[(t, a, q, h)].values()] for t, a, h in groups])
             for q in ("separate", "shared")]
    raw = [(q, [[r["steps_to_target"] for r in idx[(t, a, q, h)].values()] for t, a, h in groups])
           for q in ("separate", "shared")]
    bar_group(axes[1], labels, steps, colors, "updates to reach the target accuracy")
    n = len(steps)
    for i, (q, vals) in enumerate(raw):
        for j, v in enumerate(vals):
            if v and any(s < 0 for s in v):
                x = j + (i - (n - 1) / 2) * 0.4
                axes[1].annotate(f"{sum(s < 0 for s in v)}/{len(v)} n.r.", (x, 0), ha="center", va="bottom",
                                 fontsize=7, rotation=90, xytext=(0, 3), textcoords="offset points")
    axes[1].set_title("Steps to target = chance + 0.9·(best − chance)\n(not reached (n.r.) counted as steps + 1)",
                      fontsize=9)
    asym = []
    for q in ("separate", "shared"):
        for when, col in (("init", "logit_asymmetry_init"), ("trained", "logit_asymmetry")):
            asym.append((f"{q}, {when}",
                         [[max(r[col], 1e-12) for r in idx[(t, a, q, h)].values()] for t, a, h in groups]))
    bar_group(axes[2], labels, asym, [st.PALETTE[5], st.PALETTE[0], st.PALETTE[1], st.PALETTE[3]],
              "‖S − Sᵀ‖_F / ‖S‖_F of the pre-softmax logits", log=True)
    axes[2].set_title("Measured logit asymmetry (mean over self-attentions;\nshared: float rounding, ~1e-8)",
                      fontsize=9)
    axes[2].legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4)
    for ax in axes:
        ax.tick_params(axis="x", labelsize=8)
    return st.save(fig, out_dir, NAME + "_qk")


def fig_qk_curves(idx, curve, out_dir, note):
    groups = qk_groups(idx)
    if not groups:
        return []
    fig, axes = st.plt.subplots(1, len(groups), figsize=(3.6 * len(groups), 3.4), squeeze=False)
    for ax, (t, a, h) in zip(axes[0], groups):
        for i, q in enumerate(("separate", "shared")):
            by_step = defaultdict(list)
            for r in curve:
                if r["task"] == t and r["arch"] == a and r["qk"] == q and r["n_heads"] == h:
                    by_step[r["step"]].append(r["eval_accuracy"])
            if not by_step:
                continue
            xs = sorted(by_step)
            stats = [st.mean_ci95(by_step[x]) for x in xs]
            color = st.PALETTE[0] if q == "separate" else st.PALETTE[3]
            ax.plot(xs, [s[0] for s in stats], color=color, label=q)
            ax.fill_between(xs, [max(0.0, s[0] - s[1]) for s in stats], [min(1.0, s[0] + s[1]) for s in stats],
                            color=color, alpha=0.2, linewidth=0)
        first = next(iter(idx[(t, a, "separate", h)].values()))
        ax.axhline(first["target_accuracy"], color="grey", linestyle="--", linewidth=1)
        ax.axhline(first["chance_accuracy"], color="grey", linestyle=":", linewidth=1)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("training step")
        ax.set_ylabel("eval accuracy (fraction)")
        ax.set_title(f"{TASK_LABEL.get(t, t)}\n{ARCH_LABEL.get(a, a)}, {h} heads", fontsize=9)
        ax.legend(fontsize=8)
    fig.suptitle(f"Separate vs shared W_Q = W_K during training (dashed: target, dotted: chance; {note})",
                 fontsize=9, y=1.06)
    return st.save(fig, out_dir, NAME + "_qk_curves")


def fig_heads(idx, out_dir, note):
    groups = heads_groups(idx)
    if not groups:
        return []
    fig, axes = st.plt.subplots(1, 2, figsize=(11, 4))
    keys = sorted(groups, key=lambda k: (TASK_ORDER.index(k[0]) if k[0] in TASK_ORDER else 99,
                                         ARCH_ORDER.index(k[1])))
    all_h = sorted({h for k in keys for h in groups[k]})
    for i, (t, a) in enumerate(keys):
        hs = groups[(t, a)]
        color = st.PALETTE[i % len(st.PALETTE)]
        marker = st.MARKERS[i % len(st.MARKERS)]
        label = f"{TASK_LABEL.get(t, t)} ({ARCH_LABEL.get(a, a)})"
        for ax, key in ((axes[0], lambda r: r["test_accuracy"]), (axes[1], censored_steps)):
            stats = [st.mean_ci95([key(r) for r in idx[(t, a, "separate", h)].values()]) for h in hs]
            ax.errorbar(hs, [s[0] for s in stats], yerr=[s[1] for s in stats], color=color, marker=marker,
                        capsize=3, label=label)
    d_model = sorted({int(r["d_model"]) for (t, a) in keys for h in groups[(t, a)]
                      for r in idx[(t, a, "separate", h)].values()})
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks(all_h)
        ax.set_xticklabels([str(h) for h in all_h])
        ax.set_xlabel(f"n_heads at fixed d_model ({', '.join(map(str, d_model))}); head size d_model / n_heads")
    axes[0].set_ylabel("test accuracy (fraction)")
    axes[0].set_ylim(0, 1.05)
    axes[0].set_title(f"Accuracy vs number of heads ({note})", fontsize=9)
    axes[1].set_ylabel("updates to target (not reached = steps + 1)")
    axes[1].set_title("Steps to target vs number of heads", fontsize=9)
    axes[0].legend(fontsize=7)
    return st.save(fig, out_dir, NAME + "_heads")


def fig_arch(idx, out_dir, note):
    groups = arch_groups(idx)
    if not groups:
        return []
    keys = sorted(groups, key=lambda k: (TASK_ORDER.index(k[0]), k[1]))
    fig, axes = st.plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 4), squeeze=False)
    for ax, (t, h) in zip(axes[0], keys):
        archs = groups[(t, h)]
        arms = [idx[(t, a, "separate", h)] for a in archs]
        col, _, _ = metric(t)
        vals = [[r[col] for r in arm.values()] for arm in arms]
        stats = [st.mean_ci95(v) for v in vals]
        colors = [st.PALETTE[ARCH_ORDER.index(a)] for a in archs]
        ax.bar(range(len(archs)), [s[0] for s in stats], yerr=[s[1] for s in stats], capsize=3, color=colors)
        for j, arm in enumerate(arms):
            r0 = next(iter(arm.values()))
            ax.annotate(f"{int(r0['n_params'])} params\nd_model {int(r0['d_model'])}", (j, 0), ha="center",
                        va="bottom", fontsize=7, xytext=(0, 3), textcoords="offset points", color="white")
        ax.set_xticks(range(len(archs)))
        ax.set_xticklabels([ARCH_LABEL[a] for a in archs], fontsize=8)
        r0 = next(iter(arms[0].values()))
        if col == "test_loss":
            ax.axhline(r0["optimal_loss"], color="grey", linestyle="--", linewidth=1, label="optimum H(p)")
            ax.set_ylabel("test cross-entropy on the continuation (nats/token)")
            ax.legend(fontsize=8)
        else:
            ax.axhline(r0["chance_accuracy"], color="grey", linestyle=":", linewidth=1)
            ax.set_ylabel("test accuracy (fraction; dotted: chance)")
            ax.set_ylim(0, 1.05)
        ax.set_title(f"{TASK_LABEL.get(t, t)}, {h} heads\n(claimed best: {ARCH_LABEL[CLAIMED_ARCH[t]]})", fontsize=9)
    fig.suptitle(f"Architectures at matched parameter counts ({note})", fontsize=9, y=1.06)
    return st.save(fig, out_dir, NAME + "_arch")


def main(argv):
    res = argv[1] if len(argv) > 1 else os.path.join("results", NAME)
    try:
        rows, curve, meta = load(res)
        st.setup()
        idx = index(rows)
        note = st.scale_note(meta, len({r["seed"] for r in rows}))
        out_dir = os.path.join(res, "figures")
        paths = []
        paths += fig_qk(idx, out_dir, note)
        paths += fig_qk_curves(idx, curve, out_dir, note)
        paths += fig_heads(idx, out_dir, note)
        paths += fig_arch(idx, out_dir, note)
        verdicts(res)  # fails (exit 2) on data the report could not use
    except st.DataError as e:
        st.fail(str(e))
    for p in paths:
        print("wrote", p)


if __name__ == "__main__":
    main(sys.argv)
