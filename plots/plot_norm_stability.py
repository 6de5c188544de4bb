#!/usr/bin/python3
"""Figures and verdicts for experiments/norm_stability (claim 4: BatchNorm is unstable in
Transformers — padding, small batches, train/inference statistics — LayerNorm is not; Pre-LN
trains stably where Post-LN needs a warm-up).

usage: plot_norm_stability.py [RESULTS_DIR]   (default: results/norm_stability)
Reads norm_stability.csv, norm_stability_steps.csv, norm_stability_eval.csv and
norm_stability.meta.json from RESULTS_DIR; writes into RESULTS_DIR/figures:
  norm_stability_batch       final accuracy vs batch size per norm, train mode and eval mode
  norm_stability_failures    failure rate (diverged or stalled) over (lr, warm-up), Pre vs Post
  norm_stability_stats       batch-statistics deviation (1/d)|mu_B - mu_run| over training
  norm_stability_padding     train/eval gap, eval-mode accuracy and padding shift vs padding
  norm_stability_shift       accuracy on other padding fractions than trained on
(PNG and PDF each). A figure whose study is absent from the CSV is skipped with a note.
Exits 2 naming a missing or malformed file or column.

verdicts(results_dir) returns one row per sub-claim (the report contract of plots/make_report.py).
"""
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seqlab_stats as ss  # noqa: E402
import seqlab_style as st  # noqa: E402
import seqlab_verdict as sv  # noqa: E402

NAME = "norm_stability"
NORMS = ["layer_norm", "batch_norm", "masked_batch_norm", "rms_norm", "none"]
NORM_LABEL = {"layer_norm": "LayerNorm", "batch_norm": "BatchNorm (padding included)",
              "masked_batch_norm": "BatchNorm (padding masked)", "rms_norm": "RMSNorm",
              "none": "no norm"}
SHORT_LABEL = {"layer_norm": "LayerNorm", "batch_norm": "BatchNorm", "masked_batch_norm":
               "masked BN", "rms_norm": "RMSNorm", "none": "no norm"}
MAIN_COLS = ["study", "norm", "norm_placement", "batch", "pad_fraction", "warmup_steps", "lr",
             "seed", "initial_loss", "diverged", "diverged_step", "failed", "final_train_loss",
             "loss_volatility", "mu_dev_late", "var_dev_late", "pad_mean_shift_late",
             "acc_train_mode", "acc_eval_mode", "train_eval_gap", "chance_accuracy", "steps"]
STEP_COLS = ["study", "norm", "norm_placement", "batch", "pad_fraction", "warmup_steps", "lr", "seed",
             "step", "loss", "mu_dev", "var_dev"]
EVAL_COLS = ["study", "norm", "batch", "pad_fraction", "seed", "eval_pad_fraction", "mode",
             "accuracy"]

# Decision margins of the verdicts (README.md "Verdict rules").
ACC_EFFECT = 0.02      # accuracy difference (fraction) that counts; also the ceiling / floor margin
BATCH_SLOPE = 0.01     # change of LayerNorm's lead over BatchNorm per doubling of the batch
NOISE_RATIO = 1.5      # deviation at the smallest batch / at the largest
GAP_EFFECT = 0.02      # train-mode − eval-mode accuracy


class Data:
    """The three CSVs, parsed: numbers as floats, keys as strings."""

    NUM_MAIN = ["batch", "pad_fraction", "warmup_steps", "lr", "seed", "initial_loss", "diverged",
                "failed", "final_train_loss", "loss_volatility", "mu_dev_late", "var_dev_late",
                "pad_mean_shift_late", "acc_train_mode", "acc_eval_mode", "train_eval_gap",
                "chance_accuracy", "steps"]

    def __init__(self, res):
        self.res = res
        self.main_path = os.path.join(res, NAME + ".csv")
        self.steps_path = os.path.join(res, NAME + "_steps.csv")
        self.eval_path = os.path.join(res, NAME + "_eval.csv")
        self.main = self._parse(st.read_csv(self.main_path, MAIN_COLS), self.main_path,
                                self.NUM_MAIN)
        self.meta = st.read_meta(os.path.join(res, NAME + ".meta.json"))
        self._steps = None
        self._eval = None

    @staticmethod
    def _parse(rows, path, numeric):
        out = []
        for r in rows:
            d = dict(r)
            for k in numeric:
                d[k] = st.number(r, k, path)
            out.append(d)
        return out

    def steps(self):
        if self._steps is None:
            self._steps = self._parse(st.read_csv(self.steps_path, STEP_COLS), self.steps_path,
                                      ["batch", "pad_fraction", "warmup_steps", "lr", "seed", "step",
                                       "loss", "mu_dev", "var_dev"])
        return self._steps

    def evals(self):
        if self._eval is None:
            self._eval = self._parse(st.read_csv(self.eval_path, EVAL_COLS), self.eval_path,
                                     ["batch", "pad_fraction", "seed", "eval_pad_fraction",
                                      "accuracy"])
        return self._eval

    def study(self, name):
        return [r for r in self.main if r["study"] == name]

    def seeds(self):
        return sorted({int(r["seed"]) for r in self.main})

    def norms(self, rows):
        present = {r["norm"] for r in rows}
        return [n for n in NORMS if n in present]


def fmt_ci(mu, ci, pct=False):
    if math.isnan(mu):
        return "n/a"
    if pct:
        return f"{100 * mu:.1f} ± {100 * ci:.1f} pts"
    return f"{mu:.3g} ± {ci:.2g}"


def by_seed(rows, key):
    """{seed: value of `key`} (one run per seed expected)."""
    return {int(r["seed"]): r[key] for r in rows}


def paired(a, b):
    """Per-seed differences a − b over the seeds both have."""
    return [a[s] - b[s] for s in sorted(set(a) & set(b))]


def color_of(norm):
    return st.PALETTE[NORMS.index(norm) % len(st.PALETTE)] if norm in NORMS else "grey"


def marker_of(norm):
    return st.MARKERS[NORMS.index(norm) % len(st.MARKERS)] if norm in NORMS else "o"


# ------------------------------------------------------------------------------------------------
# Figures

def fig_batch(d, out_dir, note):
    rows = d.study("batch")
    if not rows:
        return []
    batches = sorted({int(r["batch"]) for r in rows})
    fig, axes = st.plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, (col, title) in zip(axes, [("acc_train_mode", "train mode (batch statistics)"),
                                       ("acc_eval_mode", "eval mode (running statistics)")]):
        for norm in d.norms(rows):
            xs, m, e = [], [], []
            for b in batches:
                vals = [r[col] for r in rows if r["norm"] == norm and int(r["batch"]) == b]
                mu, ci = st.mean_ci95(vals)
                if not math.isnan(mu):
                    xs.append(b)
                    m.append(mu)
                    e.append(ci)
            ax.errorbar(xs, m, yerr=e, marker=marker_of(norm), capsize=3, color=color_of(norm),
                        label=NORM_LABEL[norm])
        chance = rows[0]["chance_accuracy"]
        ax.axhline(chance, color="grey", linestyle=":", label=f"chance ({chance:g})")
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches)
        ax.set_xticklabels([str(b) for b in batches])
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("batch size (sequences per update)")
        ax.set_title(f"test accuracy, {title}", fontsize=9)
    axes[0].set_ylabel("test accuracy (fraction)")
    r0 = rows[0]
    axes[1].legend(fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 0.16))
    fig.suptitle(f"Batch study: {r0['norm_placement']}-norm, padding fraction "
                 f"{r0['pad_fraction']:g}, {int(r0['steps'])} updates ({note})", fontsize=9)
    return st.save(fig, out_dir, NAME + "_batch")


def fig_failures(d, out_dir, note):
    rows = d.study("warmup")
    if not rows:
        return []
    norms = d.norms(rows)
    placements = [p for p in ("pre", "post") if any(r["norm_placement"] == p for r in rows)]
    lrs = sorted({r["lr"] for r in rows})
    warms = sorted({int(r["warmup_steps"]) for r in rows})
    fig, axes = st.plt.subplots(len(norms), len(placements),
                                figsize=(2.4 + 1.5 * len(placements) * max(2, len(lrs)),
                                         1.0 + 1.5 * len(norms)),
                                squeeze=False, sharex=True, sharey=True)
    im = None
    for i, norm in enumerate(norms):
        for j, pl in enumerate(placements):
            ax = axes[i][j]
            grid = [[float("nan")] * len(lrs) for _ in warms]
            for wi, w in enumerate(warms):
                for li, lr in enumerate(lrs):
                    sel = [r for r in rows if r["norm"] == norm and r["norm_placement"] == pl
                           and int(r["warmup_steps"]) == w and r["lr"] == lr]
                    if not sel:
                        continue
                    n_fail = sum(int(r["failed"]) for r in sel)
                    n_div = sum(int(r["diverged"]) for r in sel)
                    grid[wi][li] = n_fail / len(sel)
                    txt = f"{n_fail}/{len(sel)}" + (f"\n({n_div} div.)" if n_div else "")
                    ax.text(li, wi, txt, ha="center", va="center", fontsize=8,
                            color="white" if n_fail / len(sel) > 0.5 else "black")
            im = ax.imshow(grid, cmap="Reds", vmin=0, vmax=1, origin="lower", aspect="auto")
            ax.set_xticks(range(len(lrs)))
            ax.set_xticklabels([f"{lr:g}" for lr in lrs], fontsize=8)
            ax.set_yticks(range(len(warms)))
            ax.set_yticklabels([str(w) for w in warms], fontsize=8)
            ax.grid(False)
            if i == len(norms) - 1:
                ax.set_xlabel("peak learning rate")
            if j == 0:
                ax.set_ylabel(f"{SHORT_LABEL[norm]}\nwarm-up (updates)", fontsize=8)
            if i == 0:
                ax.set_title(f"{pl.capitalize()}-norm", fontsize=9)
    if im is not None:
        fig.colorbar(im, ax=axes, shrink=0.6, label="failure rate (diverged or stalled)")
    r0 = rows[0]
    fig.suptitle(f"Warm-up study: share of runs that failed (text: failed/runs, divergences);\n"
                 f"batch {int(r0['batch'])}, padding fraction {r0['pad_fraction']:g}, "
                 f"{int(r0['steps'])} updates, {len(d.seeds())} seeds", fontsize=9)
    return st.save(fig, out_dir, NAME + "_failures")


def fig_stats(d, out_dir, note):
    rows = [r for r in d.steps() if r["study"] == "batch"]
    if not rows:
        return []
    batches = sorted({int(r["batch"]) for r in rows})
    norms = d.norms(rows)
    fig, axes = st.plt.subplots(2, len(batches), figsize=(3.0 * len(batches), 5.6), squeeze=False,
                                sharey="row")
    for j, b in enumerate(batches):
        for i, (col, lab) in enumerate([("mu_dev", "(1/d)|μ_B − μ_run|"),
                                        ("var_dev", "(1/d)|σ²_B − σ²_run|")]):
            ax = axes[i][j]
            for norm in norms:
                by_step = defaultdict(list)
                for r in rows:
                    if r["norm"] == norm and int(r["batch"]) == b and not math.isnan(r[col]):
                        by_step[int(r["step"])].append(r[col])
                if not by_step:
                    continue
                xs = sorted(by_step)
                m = [sum(by_step[x]) / len(by_step[x]) for x in xs]
                ax.plot(xs, m, color=color_of(norm), linewidth=1,
                        linestyle="-" if "batch_norm" in norm else "--", label=NORM_LABEL[norm])
            ax.set_yscale("log")
            if i == 0:
                ax.set_title(f"batch {b}", fontsize=9)
            if i == 1:
                ax.set_xlabel("training step")
            if j == 0:
                ax.set_ylabel(lab)
    axes[0][-1].legend(fontsize=6)
    fig.suptitle("Batch study: deviation of the batch statistics of the first norm layer's input "
                 "from its running statistics (PowerNorm's measure)\nsolid: BatchNorm's own "
                 "statistics; dashed: the same statistics of the input of the other norms; mean "
                 f"over {len(d.seeds())} seeds, log scale", fontsize=9)
    return st.save(fig, out_dir, NAME + "_stats")


def fig_padding(d, out_dir, note):
    rows = d.study("padding")
    if not rows:
        return []
    pads = sorted({r["pad_fraction"] for r in rows})
    fig, axes = st.plt.subplots(1, 3, figsize=(15, 4.2))
    panels = [("train_eval_gap", "train-mode − eval-mode accuracy (fraction)", "train/eval gap"),
              ("acc_eval_mode", "test accuracy, eval mode (fraction)", "eval-mode accuracy"),
              ("pad_mean_shift_late", "(1/d)|μ_all − μ_real| (late training)",
               "padding shift of the first norm's input statistics")]
    for ax, (col, ylab, title) in zip(axes, panels):
        for k, norm in enumerate(d.norms(rows)):
            xs, m, e = [], [], []
            for p in pads:
                vals = [r[col] for r in rows if r["norm"] == norm and r["pad_fraction"] == p]
                mu, ci = st.mean_ci95(vals)
                if not math.isnan(mu):
                    xs.append(p + 0.006 * (k - 2))  # small dodge so error bars do not overlap
                    m.append(mu)
                    e.append(ci)
            ax.errorbar(xs, m, yerr=e, marker=marker_of(norm), capsize=3, color=color_of(norm),
                        label=NORM_LABEL[norm])
        ax.set_xticks(pads)
        ax.set_xlabel("padding fraction (expected share of padded positions)")
        ax.set_ylabel(ylab)
        ax.set_title(title, fontsize=9)
    axes[0].axhline(0, color="grey", linewidth=0.8)
    axes[1].legend(fontsize=7, loc="lower right")
    r0 = rows[0]
    fig.suptitle(f"Padding study: {r0['norm_placement']}-norm, batch {int(r0['batch'])} ({note})",
                 fontsize=9)
    return st.save(fig, out_dir, NAME + "_padding")


def fig_shift(d, out_dir, note):
    ev = [r for r in d.evals() if r["study"] == "padding"]
    if not ev:
        return []
    trained = sorted({r["pad_fraction"] for r in ev})
    fig, axes = st.plt.subplots(1, len(trained), figsize=(4.5 * len(trained), 4), squeeze=False,
                                sharey=True)
    for ax, p in zip(axes[0], trained):
        for norm in d.norms(ev):
            for mode, ls in (("eval", "-"), ("train", "--")):
                sel = [r for r in ev if r["norm"] == norm and r["pad_fraction"] == p
                       and r["mode"] == mode]
                qs = sorted({r["eval_pad_fraction"] for r in sel})
                m, e = [], []
                for q in qs:
                    mu, ci = st.mean_ci95([r["accuracy"] for r in sel if r["eval_pad_fraction"] == q])
                    m.append(mu)
                    e.append(ci)
                if qs:
                    ax.errorbar(qs, m, yerr=e, color=color_of(norm), linestyle=ls,
                                marker=marker_of(norm), capsize=2, markersize=4,
                                label=f"{NORM_LABEL[norm]}, {mode} mode")
        ax.axvline(p, color="grey", linestyle=":")
        ax.set_xticks(sorted({r["eval_pad_fraction"] for r in ev}))
        ax.set_xlabel("padding fraction of the test set")
        ax.set_title(f"trained at padding fraction {p:g} (dotted)", fontsize=9)
    axes[0][0].set_ylabel("test accuracy (fraction)")
    axes[0][-1].legend(fontsize=6, loc="lower left")
    fig.suptitle(f"Accuracy on other length distributions than trained on (solid: eval mode, "
                 f"dashed: train mode; {note})", fontsize=9)
    return st.save(fig, out_dir, NAME + "_shift")


# ------------------------------------------------------------------------------------------------
# Verdicts

def _seed_note(d):
    n = len(d.seeds())
    return n, (f" (only {n} seed{'s' if n != 1 else ''}; the rules need {sv.MIN_SEEDS})"
               if n < sv.MIN_SEEDS else "")


def curve_state(d, study, norm, **keys):
    """Convergence state of the training loss of the runs of one arm (scale: the mean initial
    loss of those runs): 'moving', 'flat', 'unclear' or None. keys: further columns to match
    (batch, pad_fraction, norm_placement, warmup_steps, lr)."""
    cur = defaultdict(list)
    for r in d.steps():
        if r["study"] == study and r["norm"] == norm and all(r.get(k) == v for k, v in keys.items()):
            cur[int(r["seed"])].append((r["step"], r["loss"]))
    init = [r["initial_loss"] for r in d.study(study) if r["norm"] == norm
            and all(r.get(k) == v for k, v in keys.items())]
    if not cur or not init:
        return None
    return ss.convergence(dict(cur), sum(init) / len(init)).state


def compare_accuracy(d, rows_a, rows_b, col, claim, what, state_a=None, state_b=None, controls=None,
                     margin=ACC_EFFECT):
    """Paired per-seed difference of accuracy column `col`, runs rows_a − rows_b (one run per
    seed each), with the ceiling (both within the margin of 1) and floor (of chance) checks."""
    a, b = by_seed(rows_a, col), by_seed(rows_b, col)
    da = {int(r["seed"]) for r in rows_a if r["diverged"]}
    db = {int(r["seed"]) for r in rows_b if r["diverged"]}
    chance = (rows_a or rows_b)[0]["chance_accuracy"]
    eff = ss.paired_difference(a, b, diverged_a=da, diverged_b=db, worst=chance, what=what)
    means = [st.mean_ci95(list(x.values()))[0] for x in (a, b)]
    return sv.decide(eff, margin, claim, unit="accuracy", ceiling=sv.at_ceiling(means, 1.0, margin),
                     floor=sv.at_floor(means, chance, margin), moving_up=state_a, moving_down=state_b,
                     controls=controls, levels=f"means {means[0]:.3f}, {means[1]:.3f}; chance {chance:g}")


def verdict_padding(d):
    claim = ("Padding pollutes BatchNorm's batch statistics and degrades it "
             "(batch_norm, padding included, vs masked_batch_norm)")
    anchor = ("Shen et al. 2020 (PowerNorm) exclude padding from their BatchNorm baseline "
              "(mask_batchnorm.py) and still find it 1.1 BLEU below LayerNorm on IWSLT14 "
              "(34.4 vs 35.5, Table 1): fluctuation, not padding, is their explanation")
    rule = (f"at the largest padding fraction of the padding study, per mode (train: batch statistics; "
            f"eval: running statistics) the paired per-seed difference acc(masked_batch_norm) − "
            f"acc(batch_norm) against ±{ACC_EFFECT:g}: holds if beyond +{ACC_EFFECT:g}, fails if below "
            f"−{ACC_EFFECT:g} or within; inconclusive: ceiling / floor if both are within {ACC_EFFECT:g} of "
            f"accuracy 1 / of chance; combined over the two modes ('depends on the BatchNorm mode' when "
            f"one holds and the other fails); fewer than {sv.MIN_SEEDS} seeds: inconclusive")
    rows = d.study("padding")
    n, seed_note = _seed_note(d)
    norms = {r["norm"] for r in rows}
    if not rows or not {"batch_norm", "masked_batch_norm"} <= norms:
        return sv.Verdict(sv.INCONCLUSIVE, "no padding-study runs of batch_norm and masked_batch_norm").row(
            claim, "no padding-study runs of batch_norm and masked_batch_norm", anchor, rule)
    pmax = max(r["pad_fraction"] for r in rows)
    sel = lambda norm: [r for r in rows if r["norm"] == norm and r["pad_fraction"] == pmax]  # noqa: E731
    parts, txt = [], []
    for mode, col in (("eval", "acc_eval_mode"), ("train", "acc_train_mode")):
        v = compare_accuracy(d, sel("masked_batch_norm"), sel("batch_norm"), col, sv.GREATER,
                             f"masked − naive BatchNorm, {mode}-mode accuracy",
                             curve_state(d, "padding", "masked_batch_norm", pad_fraction=pmax),
                             curve_state(d, "padding", "batch_norm", pad_fraction=pmax), controls=True)
        parts.append((f"{mode} mode", v))
        diff = paired(by_seed(sel("masked_batch_norm"), col), by_seed(sel("batch_norm"), col))
        txt.append(f"{mode} mode: masked − naive = {fmt_ci(*st.mean_ci95(diff), True)}")
    shift, _ = st.mean_ci95([r["pad_mean_shift_late"] for r in sel("batch_norm")])
    dev, _ = st.mean_ci95([r["mu_dev_late"] for r in sel("batch_norm")])
    ln_acc, ln_ci = st.mean_ci95([r["acc_eval_mode"] for r in sel("layer_norm")])
    bn_acc, bn_ci = st.mean_ci95([r["acc_eval_mode"] for r in sel("batch_norm")])
    measured = (f"padding fraction {pmax:g}: " + "; ".join(txt) +
                f"; pollution (1/d)|μ_all − μ_real| = {shift:.3g} vs batch-to-running deviation "
                f"{dev:.3g}; eval accuracy batch_norm {fmt_ci(bn_acc, bn_ci)}, layer_norm "
                f"{fmt_ci(ln_acc, ln_ci)}; {n} seeds")
    return sv.combine(parts, condition="the BatchNorm mode").row(claim, measured + seed_note, anchor, rule)


def verdict_small_batch(d):
    claim = ("Small batches make BatchNorm's statistics noisy and hurt it relative to LayerNorm")
    anchor = ("Wu & He 2018 (GroupNorm, Fig. 1): ResNet-50 ImageNet top-1 error with BatchNorm "
              "23.6% at 32 images/GPU rising to 34.7% at 2; GroupNorm ~24.1% at every size (10.6 "
              "points better at 2)")
    rule = (f"batch study, two parts. Noise: the paired per-seed log ratio of batch_norm's "
            f"(1/d)|μ_B − μ_run| (second half of training) at the smallest batch to that at the largest, "
            f"against log {NOISE_RATIO:g} (holds if beyond). Harm, per mode: the per-seed OLS slope of the "
            f"deficit acc(layer_norm) − acc(batch_norm) against log2 batch, t over seeds, against "
            f"±{BATCH_SLOPE:g} per doubling (holds if below −{BATCH_SLOPE:g}: the deficit shrinks as the "
            f"batch grows; fails if within or above); ceiling if both norms are within {ACC_EFFECT:g} of 1 at "
            f"every batch; not converged if the smallest batch's curves still fall at the end; controls not "
            f"matched: the updates are fixed, so batch 1 sees 1/32 of the examples of batch 32. Holds if the "
            f"noise part and the harm hold; 'depends on the BatchNorm mode' when one mode holds and the other "
            f"fails; fewer than {sv.MIN_SEEDS} seeds: inconclusive")
    rows = d.study("batch")
    n, seed_note = _seed_note(d)
    norms = {r["norm"] for r in rows}
    if not rows or not {"batch_norm", "layer_norm"} <= norms:
        return sv.Verdict(sv.INCONCLUSIVE, "no batch-study runs of batch_norm and layer_norm").row(
            claim, "no batch-study runs of batch_norm and layer_norm", anchor, rule)
    batches = sorted({int(r["batch"]) for r in rows})
    bmin, bmax = batches[0], batches[-1]
    sel = lambda norm, b: [r for r in rows if r["norm"] == norm and int(r["batch"]) == b]  # noqa: E731
    dev_min = by_seed(sel("batch_norm", bmin), "mu_dev_late")
    dev_max = by_seed(sel("batch_norm", bmax), "mu_dev_late")
    lr = {s: math.log(dev_min[s] / dev_max[s]) for s in set(dev_min) & set(dev_max)
          if dev_min[s] > 0 and dev_max[s] > 0}
    noise = sv.decide(ss.mean_interval(list(lr.values()), what=f"ln(deviation at batch {bmin} / at {bmax})"),
                      math.log(NOISE_RATIO), sv.GREATER, margin_text=f"ln {NOISE_RATIO:g}", controls=None)
    parts, txt = [("noisier statistics", noise)], []
    for mode, col in (("eval", "acc_eval_mode"), ("train", "acc_train_mode")):
        pts = defaultdict(list)
        means_ln, means_bn = [], []
        for b in batches:
            ln, bn = by_seed(sel("layer_norm", b), col), by_seed(sel("batch_norm", b), col)
            for s in set(ln) & set(bn):
                pts[s].append((math.log2(b), ln[s] - bn[s]))
            means_ln.append(st.mean_ci95(list(ln.values()))[0])
            means_bn.append(st.mean_ci95(list(bn.values()))[0])
        eff = ss.trend(dict(pts), what=f"slope of LN − BN {mode}-mode accuracy per doubling of the batch")
        chance = rows[0]["chance_accuracy"]
        v = sv.decide(eff, BATCH_SLOPE, sv.LESS, unit="accuracy per doubling",
                      ceiling=sv.at_ceiling(means_ln + means_bn, 1.0, ACC_EFFECT),
                      floor=sv.at_floor(means_ln + means_bn, chance, ACC_EFFECT),
                      moving_up=curve_state(d, "batch", "batch_norm", batch=float(bmin)),
                      moving_down=curve_state(d, "batch", "layer_norm", batch=float(bmin)),
                      controls=False, level_margin=ACC_EFFECT,
                      levels=f"LN {', '.join(f'{v:.2f}' for v in means_ln)}; BN {', '.join(f'{v:.2f}' for v in means_bn)}")
        parts.append((f"{mode} mode", v))
        d_min = st.mean_ci95(paired(by_seed(sel("layer_norm", bmin), col), by_seed(sel("batch_norm", bmin), col)))[0]
        d_max = st.mean_ci95(paired(by_seed(sel("layer_norm", bmax), col), by_seed(sel("batch_norm", bmax), col)))[0]
        txt.append(f"{mode} mode: LN − BN = {100 * d_min:.1f} pts at batch {bmin}, {100 * d_max:.1f} at {bmax}, "
                   f"slope {eff.fmt(3)} per doubling")
    m_min, _ = st.mean_ci95(list(dev_min.values()))
    m_max, _ = st.mean_ci95(list(dev_max.values()))
    measured = (f"batch_norm deviation {m_min:.3g} at batch {bmin} vs {m_max:.3g} at {bmax} "
                f"(x{m_min / m_max:.2f}); " + "; ".join(txt) + f"; batches {', '.join(map(str, batches))}, "
                f"{int(rows[0]['steps'])} updates each; {n} seeds")
    harm = sv.combine(parts[1:], condition="the BatchNorm mode")
    return sv.combine([parts[0], ("accuracy", harm)]).row(claim, measured + seed_note, anchor, rule)


def verdict_layer_norm_modes(d):
    claim = "LayerNorm uses the same statistics in training and inference (no train/eval mismatch)"
    rows = [r for r in d.study("batch") + d.study("padding") if r["norm"] == "layer_norm"]
    gap = max((abs(r["train_eval_gap"]) for r in rows), default=float("nan"))
    v = sv.by_construction("LayerNorm normalises each position over its own features in both modes",
                           f"max |train − eval accuracy| {100 * gap:.1f} pts over {len(rows)} runs",
                           shown=bool(rows) and gap < 1e-12, test="train and eval mode of every layer_norm run",
                           effect=f"max |gap| {100 * gap:.1f} pts", margin="exactly 0")
    return v.row(claim, f"layer_norm |train − eval accuracy| at most {100 * gap:.1f} pts over {len(rows)} runs of "
                 "the batch and padding studies",
                 "Ba et al. 2016 (LayerNorm) §3: the same computation at training and test time",
                 "by construction if every layer_norm run has a zero train/eval gap; fails (an implementation "
                 "defect) otherwise")


def verdict_mismatch(d):
    claim = ("Training and inference use different statistics (batch vs running): BatchNorm's "
             "accuracy differs between the two modes")
    anchor = ("Shen et al. 2020 (PowerNorm, Fig. 2): (1/d)|μ_B − μ| up to ~0.07 and "
              "(1/d)|σ²_B − σ²| up to ~6 for Transformer-BN on IWSLT14, near 0 for ResNet20 on "
              "CIFAR-10")
    rule = (f"per seed, the mean over every batch_norm run of the batch and padding studies of the signed "
            f"acc_train_mode − acc_eval_mode, t over seeds, against ±{GAP_EFFECT:g}: holds if beyond either "
            f"way (the modes differ), fails if within ±{GAP_EFFECT:g}; ceiling if both modes are within "
            f"{GAP_EFFECT:g} of 1 on average; the sign says which mode is better (a difference, not harm)")
    rows = d.study("batch") + d.study("padding")
    n, seed_note = _seed_note(d)
    bn = [r for r in rows if r["norm"] == "batch_norm"]
    if not bn:
        return sv.Verdict(sv.INCONCLUSIVE, "no batch_norm runs").row(
            claim, "no batch_norm runs in the batch or padding study", anchor, rule)
    per = defaultdict(list)
    for r in bn:
        per[int(r["seed"])].append(r["train_eval_gap"])
    eff = ss.mean_interval([sum(v) / len(v) for v in per.values()],
                           what="train − eval accuracy of batch_norm, mean over its runs")
    eff.method = f"t over {eff.n} seeds of the per-seed mean over {len(bn) // max(len(per), 1)} runs"
    m_train = st.mean_ci95([r["acc_train_mode"] for r in bn])[0]
    m_eval = st.mean_ci95([r["acc_eval_mode"] for r in bn])[0]
    v = sv.decide(eff, GAP_EFFECT, sv.DIFFER, unit="accuracy",
                  ceiling=sv.at_ceiling([m_train, m_eval], 1.0, GAP_EFFECT), controls=None,
                  levels=f"train mode {m_train:.3f}, eval mode {m_eval:.3f}")
    mu, ci = st.mean_ci95([abs(r["train_eval_gap"]) for r in bn])
    mk, mkci = st.mean_ci95([abs(r["train_eval_gap"]) for r in rows if r["norm"] == "masked_batch_norm"])
    bmin = min(int(r["batch"]) for r in bn)
    small, smci = st.mean_ci95([r["train_eval_gap"] for r in bn if int(r["batch"]) == bmin])
    measured = (f"batch_norm train − eval accuracy {eff.fmt(3)} (mean over {len(bn)} runs per seed; |gap| "
                f"{fmt_ci(mu, ci, True)}; at batch {bmin}: {fmt_ci(small, smci, True)}); masked_batch_norm "
                f"|gap| {fmt_ci(mk, mkci, True)}; mean accuracy train mode {m_train:.3f}, eval mode "
                f"{m_eval:.3f}; {n} seeds")
    return v.row(claim, measured + seed_note, anchor, rule)


def verdict_warmup(d):
    claim = ("Pre-LN trains stably without learning-rate warm-up where Post-LN needs it "
             "(LayerNorm)")
    anchor = ("Xiong et al. 2020 (Fig. 2, IWSLT14 De-En, Adam, lr_max 5e-4 / 1e-3): Post-LN "
              "without warm-up (or with a short one) ends far worse than with a 4000-step warm-up; "
              "Pre-LN without warm-up matches Post-LN with it (§3.1, §4)")
    rule = (f"warmup study, layer_norm, at the highest learning rate (the stress setting): two paired per-seed "
            f"accuracy differences against ±{ACC_EFFECT:g}, Pre-LN − Post-LN without warm-up and Post-LN with − "
            f"without warm-up; holds if both are beyond +{ACC_EFFECT:g}, fails if either is below "
            f"−{ACC_EFFECT:g} or within; ceiling / floor if both arms are within {ACC_EFFECT:g} of 1 / of chance; "
            f"not converged if the arm behind still improves at the end. The failure counts (diverged, or "
            f"final loss above stall_fraction × initial) and Fisher's exact test are shown beside it")
    rows = [r for r in d.study("warmup") if r["norm"] == "layer_norm"]
    n, seed_note = _seed_note(d)
    pls = {r["norm_placement"] for r in rows}
    warms = sorted({int(r["warmup_steps"]) for r in rows})
    if not rows or pls != {"pre", "post"} or len(warms) < 2:
        return sv.Verdict(sv.INCONCLUSIVE, "no warmup-study runs of both placements").row(
            claim, "no warmup-study runs of layer_norm with pre and post and two warm-up lengths", anchor, rule)
    lrs = sorted({r["lr"] for r in rows})
    hi, w0, w1 = lrs[-1], warms[0], warms[-1]

    def sel(pl, w, lr):
        return [r for r in rows if r["norm_placement"] == pl and int(r["warmup_steps"]) == w
                and r["lr"] == lr]

    def rate(pl, w, lr):
        s = sel(pl, w, lr)
        return sum(int(r["failed"]) for r in s), len(s)

    def acc(pl, w, lr):
        return st.mean_ci95([r["acc_eval_mode"] for r in sel(pl, w, lr)])

    def state(pl, w):
        return curve_state(d, "warmup", "layer_norm", norm_placement=pl, warmup_steps=float(w), lr=hi)

    parts = [
        ("Pre-LN vs Post-LN without warm-up", compare_accuracy(
            d, sel("pre", w0, hi), sel("post", w0, hi), "acc_eval_mode", sv.GREATER,
            f"Pre-LN − Post-LN accuracy, warm-up {w0}, lr {hi:g}", state("pre", w0), state("post", w0), True)),
        ("Post-LN with vs without warm-up", compare_accuracy(
            d, sel("post", w1, hi), sel("post", w0, hi), "acc_eval_mode", sv.GREATER,
            f"Post-LN accuracy, warm-up {w1} − {w0}, lr {hi:g}", state("post", w1), state("post", w0), True)),
    ]
    txt = []
    for lr in lrs:
        cells = []
        for pl in ("post", "pre"):
            for w in (w0, w1):
                k, m = rate(pl, w, lr)
                cells.append(f"{pl}/warm-up {w}: {k}/{m} failed, acc {100 * acc(pl, w, lr)[0]:.0f}%")
        txt.append(f"lr {lr:g}: " + ", ".join(cells))
    kp, mp = rate("post", w0, hi)
    kq, mq = rate("pre", w0, hi)
    fisher = ss.fisher_exact_greater(kp, mp, kq, mq) if mp and mq else float("nan")
    measured = ("; ".join(txt) + f"; at lr {hi:g} Post-LN fails more often than Pre-LN without warm-up: "
                f"Fisher's exact one-sided p = {fisher:.2g}; {n} seeds")
    return sv.combine(parts).row(claim, measured + seed_note, anchor, rule)


def verdicts(results_dir):
    """One row per sub-claim (plots/seqlab_verdict.py's Verdict.row), computed from the CSVs.
    Raises st.DataError if a CSV or column is missing. Writes nothing."""
    d = Data(results_dir)
    return [verdict_padding(d), verdict_small_batch(d), verdict_layer_norm_modes(d), verdict_mismatch(d),
            verdict_warmup(d)]


def main(argv):
    res = argv[1] if len(argv) > 1 else os.path.join("results", NAME)
    try:
        d = Data(res)
        d.steps()
        d.evals()
        st.setup()
        note = st.scale_note(d.meta, len(d.seeds()))
        out_dir = os.path.join(res, "figures")
        paths = []
        for f in (fig_batch, fig_failures, fig_stats, fig_padding, fig_shift):
            p = f(d, out_dir, note)
            if not p:
                print(f"note: {f.__name__[4:]} figure skipped (its study has no runs)")
            paths += p
        rows = verdicts(res)
    except st.DataError as e:
        st.fail(str(e))
    for p in paths:
        print("wrote", p)
    for r in rows:
        print(f"[{r['verdict']}] {r['claim']}: {r['measured']}")


if __name__ == "__main__":
    main(sys.argv)
