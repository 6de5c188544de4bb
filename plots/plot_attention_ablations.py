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
import seqlab_stats as ss  # noqa: E402
import seqlab_style as st  # noqa: E402
import seqlab_verdict as sv  # noqa: E402

NAME = "attention_ablations"
MAIN_COLS = ["arm", "task", "arch", "qk", "n_heads", "seed", "d_model", "n_params", "param_budget",
             "steps", "test_loss", "test_accuracy", "test_exact_match", "chance_accuracy",
             "best_accuracy", "chance_loss", "optimal_loss", "target_accuracy", "steps_to_target",
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
# The architecture each task is claimed to suit (encoder-only understanding,
# decoder-only generation, encoder-decoder transduction).
CLAIMED_ARCH = {"majority": "encoder", "lm": "decoder", "reverse": "encoder_decoder"}
ACC_MARGIN = 0.02    # accuracy points below which a difference counts as none
LOSS_MARGIN = 0.02   # nats, the same for the lm task (compared on test loss)
SYM_SHARED_MAX = 1e-5
SYM_SEPARATE_MIN = 0.05
PARAM_TOLERANCE = 0.05  # compared arms' parameter counts within ±5 %: controls matched

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
                  "chance_loss", "optimal_loss", "target_accuracy", "steps_to_target", "logit_asymmetry_init",
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


def floor_accuracy(task, r0, meta):
    """The accuracy of the best predictor that ignores the dependency the task tests: MQAR's
    key-agnostic predictor (it answers with the most frequent value of the context, without
    binding keys: seqlab_stats.mqar_key_agnostic, the formula of
    MultiQueryAssociativeRecall::key_agnostic_accuracy, computed here from meta.json's mqar_pairs
    and vocab, as the experiment builds MQAR with n_keys = n_values = vocab), else the CSV's
    chance_accuracy."""
    cfg = (meta or {}).get("config", {}) if isinstance(meta, dict) else {}
    if task == "mqar" and "mqar_pairs" in cfg and "vocab" in cfg:
        return ss.mqar_key_agnostic(int(cfg["mqar_pairs"]), int(cfg["vocab"]))[0]
    return r0["chance_accuracy"]


def curves_of(curve, t, a, q, h):
    """{seed: [(step, eval_accuracy)]} of one arm."""
    out = defaultdict(list)
    for r in curve:
        if r["task"] == t and r["arch"] == a and r["qk"] == q and r["n_heads"] == h:
            out[int(r["seed"])].append((r["step"], r["eval_accuracy"]))
    return dict(out)


class Arms:
    """The runs, the training curves and meta.json, for comparing arms of one task."""

    def __init__(self, idx, curve, meta):
        self.idx, self.curve, self.meta = idx, curve, meta

    def first(self, key):
        return next(iter(self.idx[key].values()))

    def state(self, key):
        """Convergence state of an arm's eval-accuracy curve (scale: best − chance accuracy)."""
        r0 = self.first(key)
        cur = curves_of(self.curve, *key)
        scale = r0["best_accuracy"] - r0["chance_accuracy"]
        return ss.convergence(cur, scale, higher_is_better=True).state if cur and scale > 0 else None

    def values(self, key):
        """{seed: metric oriented so that higher is better} and {seeds that diverged}."""
        col, higher, _ = metric(key[0])
        runs = self.idx[key]
        return ({s: (r[col] if higher else -r[col]) for s, r in runs.items()},
                {s for s, r in runs.items() if r["diverged"]})

    def compare(self, a, b, claim, a_name, b_name):
        """The verdict on 'arm a beats (or is no worse than) arm b' (keys (task, arch, qk, heads)):
        the paired difference of the task's metric, a − b for accuracy, b − a for the lm's loss
        (positive: a better either way), a diverged run counted as the worst value (accuracy:
        chance; loss: the chance loss); ceiling and floor over both arms; the two arms' curves;
        controls: parameters within ±5 % and, for lm, the same supervised positions."""
        task = a[0]
        col, higher, margin = metric(task)
        r0 = self.first(a)
        worst = r0["chance_accuracy"] if higher else -r0["chance_loss"]
        va, da = self.values(a)
        vb, db = self.values(b)
        what = (f"{a_name} − {b_name}, test accuracy" if higher else
                f"loss of {b_name} − loss of {a_name} (positive: {a_name} better)")
        eff = ss.paired_difference(va, vb, diverged_a=da, diverged_b=db, worst=worst, what=what)
        means = [st.mean_ci95([abs(x) for x in v.values()])[0] for v in (va, vb)]
        if higher:
            optimum, base = r0["best_accuracy"], floor_accuracy(task, r0, self.meta)
            ceiling = sv.at_ceiling(means, optimum, margin)
            floor = sv.at_floor(means, base, margin)
        else:
            optimum, base = r0["optimal_loss"], r0["chance_loss"]
            ceiling = sv.at_ceiling(means, optimum, margin, higher_is_better=False)
            floor = sv.at_floor(means, base, margin, higher_is_better=False)
        pa, pb = self.first(a)["n_params"], self.first(b)["n_params"]
        controls = abs(pa / pb - 1) <= PARAM_TOLERANCE and not (task == "lm" and a[1] != b[1])
        levels = (f"means {means[0]:.3f}, {means[1]:.3f}; optimum {optimum:.3g}, baseline {base:.3g}")
        return sv.decide(eff, margin, claim, unit="nats" if col == "test_loss" else "accuracy",
                         ceiling=ceiling, floor=floor, moving_up=self.state(a), moving_down=self.state(b),
                         controls=controls, levels=levels)

    def speed(self, a, b):
        """Steps to the target, a against b: Gehan's censored rank test (not reached = censored at
        the run's steps), as text; shown beside a verdict, never deciding it."""
        def cens(key):
            return [ss.Censored(r["steps_to_target"] if r["steps_to_target"] >= 0 else r["steps"],
                                r["steps_to_target"] >= 0) for r in self.idx[key].values()]
        g = ss.gehan_test(cens(a), cens(b))
        return (f"steps to target, Gehan's censored rank test: first arm earlier in {g.a_earlier}, "
                f"later in {g.b_earlier} of {g.n_a * g.n_b} comparisons (one-sided p {g.p_a_earlier:.2g} "
                f"earlier, {g.p_b_earlier:.2g} later; not deciding)")


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


RULE_COMMON = ("the paired per-seed difference of test {metric} (95 % t-interval; a diverged run counts "
               "as chance) against ±{margin:g}: holds if beyond +{margin:g}, fails if beyond −{margin:g} or "
               "within ±{margin:g} (no difference of that size); inconclusive: ceiling / floor if both arms "
               "are within {margin:g} of the optimum / of the baseline (MQAR: the key-agnostic predictor, "
               "{floor}); not converged if the arm that could close the gap is still rising at the end "
               "(last 20 % of the eval curve, tolerance 5 % of best − chance); controls: parameters "
               "within ±5 %")


# ----------------------------------------------------------------------------------------------
# Verdicts


def verdicts(results_dir):
    rows, curve, meta = load(results_dir)
    idx = index(rows)
    arms = Arms(idx, curve, meta)
    seeds = len({r["seed"] for r in rows})
    out = []
    mqar_floor = ("accuracy E[max count]/P of the context's values"
                  if "mqar_pairs" in (meta.get("config", {}) if isinstance(meta, dict) else {})
                  else "here the CSV's chance accuracy: meta.json lacks mqar_pairs")

    # 1. A shared projection makes the logits symmetric: an identity of the algebra, shown.
    sh = [r["logit_asymmetry"] for r in rows if r["qk"] == "shared"] + \
         [r["logit_asymmetry_init"] for r in rows if r["qk"] == "shared"]
    se = [r["logit_asymmetry"] for r in rows if r["qk"] == "separate"] + \
         [r["logit_asymmetry_init"] for r in rows if r["qk"] == "separate"]
    if sh and se:
        v = sv.by_construction(
            "S = (XW)(XW)ᵀ/√d_k is symmetric when W_K = W_Q", f"shared max {max(sh):.1e}, separate min {min(se):.2f}",
            shown=max(sh) < SYM_SHARED_MAX and min(se) > SYM_SEPARATE_MIN,
            test="measured ‖S − Sᵀ‖/‖S‖ of every run, at initialisation and trained",
            effect=f"shared max {max(sh):.1e}; separate min {min(se):.2f}",
            margin=f"shared < {SYM_SHARED_MAX:g} (float rounding), separate > {SYM_SEPARATE_MIN:g}")
        out.append(v.row(
            claim="A shared W_Q = W_K makes the attention logits S = QKᵀ/√d_k symmetric; separate projections do not",
            measured=f"‖S − Sᵀ‖/‖S‖ (pre-softmax, before masks, mean over self-attentions): shared max {max(sh):.1e} "
                     f"over {len(sh) // 2} runs (init and trained); separate min {min(se):.2f}, mean {sum(se) / len(se):.2f}",
            anchor="algebra: S = Q Qᵀ is a Gram matrix (symmetric, positive semi-definite) when K = Q",
            rule=f"by construction if every shared-QK run has asymmetry < {SYM_SHARED_MAX:g} (float rounding) and "
                 f"every separate run > {SYM_SEPARATE_MIN:g}; fails (an implementation defect) otherwise"))

    # 2. Separate vs shared per task.
    for (t, a, h) in qk_groups(idx):
        ka, kb = (t, a, "separate", h), (t, a, "shared", h)
        sep, shr = idx[ka], idx[kb]
        col, _, margin = metric(t)
        where = f"{TASK_LABEL.get(t, t)}, {ARCH_LABEL.get(a, a)}, {h} heads"
        params = (f"parameters separate {int(arms.first(ka)['n_params'])}, shared "
                  f"{int(arms.first(kb)['n_params'])} ({arms.first(kb)['n_params'] / arms.first(ka)['n_params'] - 1:+.0%})")
        if t in ASYMMETRIC:
            v = arms.compare(ka, kb, sv.GREATER, "separate", "shared")
            claim = f"Separate W_Q, W_K beat a shared W_Q = W_K where attention must be asymmetric ({where})"
            rule = "separate vs shared: " + RULE_COMMON.format(metric=col.split("_")[1], margin=margin, floor=mqar_floor)
        else:
            v = arms.compare(kb, ka, sv.NO_WORSE, "shared", "separate")
            claim = f"A shared W_Q = W_K is not worse where attention need not be asymmetric ({where})"
            rule = (f"non-inferiority of shared: holds if the paired difference shared − separate has its "
                    f"interval above −{margin:g}, fails if below −{margin:g}; ceiling, floor, convergence and "
                    "controls as in the other rows")
        out.append(v.row(
            claim=claim,
            measured=f"separate {arm_summary(sep, t)}; shared {arm_summary(shr, t)}; {params}; "
                     f"{arms.speed(ka, kb)} ({seeds} seeds)",
            anchor=ANCHOR_QK, rule=rule))

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
        ka, kb = (t, a, "separate", ref), (t, a, "separate", 1)
        col, _, margin = metric(t)
        v = arms.compare(ka, kb, sv.GREATER, f"{ref} heads", "1 head")
        per_h = "; ".join(f"{h} heads {fmt_mean([r[col] for r in idx[(t, a, 'separate', h)].values()])}" for h in hs)
        stt = "; ".join(f"{h}: {steps_text(list(idx[(t, a, 'separate', h)].values()))}" for h in hs)
        d_model = int(arms.first(ka)["d_model"])
        out.append(v.row(
            claim=f"Several heads beat one at fixed d_model = {d_model} ({TASK_LABEL.get(t, t)}, {ARCH_LABEL.get(a, a)}: {ref} heads vs 1)",
            measured=f"{col.replace('_', ' ')} {per_h}; steps to target {stt}; {ref} heads vs 1, "
                     f"{arms.speed(ka, kb)} ({seeds} seeds; one learning rate for every head count)",
            anchor=ANCHOR_HEADS,
            rule=f"{ref} heads (the reference count) vs 1: " + RULE_COMMON.format(
                metric=col.split("_")[1], margin=margin, floor=mqar_floor)))

    # 4. Architectures: the claimed architecture of each task vs each other one (all must hold).
    for (t, h), archs in sorted(arch_groups(idx).items(),
                                key=lambda kv: (TASK_ORDER.index(kv[0][0]), kv[0][1])):
        best = CLAIMED_ARCH[t]
        if best not in archs:
            continue
        col, _, margin = metric(t)
        kbest = (t, best, "separate", h)
        parts = [(f"vs {ARCH_LABEL[o]}", arms.compare(kbest, (t, o, "separate", h), sv.GREATER,
                                                      ARCH_LABEL[best], ARCH_LABEL[o]))
                 for o in archs if o != best]
        v = sv.combine(parts)
        params = ", ".join(f"{ARCH_LABEL[a]} {int(arms.first((t, a, 'separate', h))['n_params'])}" for a in archs)
        meas = "; ".join(f"{ARCH_LABEL[a]} {arm_summary(idx[(t, a, 'separate', h)], t)}" for a in archs)
        if t == "reverse":
            meas += "; exact match (= greedy decoding exact match) " + ", ".join(
                f"{ARCH_LABEL[a]} {fmt_mean([r['test_exact_match'] for r in idx[(t, a, 'separate', h)].values()])}"
                for a in archs)
        out.append(v.row(
            claim=f"{ARCH_LABEL[best]} suits {TASK_LABEL.get(t, t)} best among {', '.join(ARCH_LABEL[a] for a in archs)} "
                  f"at matched parameter counts ({h} heads)",
            measured=f"{meas}; parameters {params} ({seeds} seeds)",
            anchor=ANCHOR_ARCH,
            rule=(f"{ARCH_LABEL[best]} against each other architecture (holds if it beats every one): "
                  + RULE_COMMON.format(metric="loss" if t == "lm" else "accuracy", margin=margin, floor=mqar_floor)
                  + ("; lm: the loss difference encoder-decoder − decoder-only (positive: decoder-only "
                     "better), the optimum its conditional entropy, the baseline the uniform loss; controls "
                     "not matched: the decoder-only model trains on every position (LM objective), the "
                     "encoder-decoder on the continuation only; both are scored on the continuation"
                     if t == "lm" else ""))))
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
