#!/usr/bin/python3
"""Figure and verdicts for experiments/custom_example (the smallest complete experiment: does the
toy "ramp" positional encoding, registered by the example itself, carry the position information
a causal Transformer needs for the previous-token task?).

usage: plot_custom_example.py [RESULTS_DIR]   (default: results/custom_example)

Reads custom_example.csv and custom_example.meta.json from RESULTS_DIR; writes into
RESULTS_DIR/figures (PNG and PDF):
  custom_example_accuracy   test accuracy and test loss per positional encoding: every seed as a
                            dot, mean and 95% CI over seeds as a bar; chance dashed
Exits 2 naming a missing or malformed file or column. verdicts(RESULTS_DIR) returns the claim
rows of the report (plots/make_report.py).
"""
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seqlab_style as st  # noqa: E402

NAME = "custom_example"
COLS = ["positional_encoding", "seed", "seq_len", "steps", "n_params", "train_loss", "test_loss",
        "test_accuracy", "baseline_accuracy", "diverged"]
ORDER = ["none", "sinusoidal", "learned", "rope", "rope_pi", "rope_ntk", "alibi", "ramp"]
NEW = "ramp"            # the encoding the example registers
REFERENCE = "sinusoidal"  # the built-in it is compared with
MARGIN = 0.05          # accuracy points: "as good as" the reference within this
SOLVED = 0.5           # accuracy: "solved at least half" (chance is 1 / vocab_size)


class Data:
    """custom_example.csv, parsed; raises st.DataError naming a missing file, column or value."""

    def __init__(self, results_dir):
        self.dir = results_dir
        self.path = os.path.join(results_dir, f"{NAME}.csv")
        rows = st.read_csv(self.path, COLS)
        self.meta = st.read_meta(os.path.join(results_dir, f"{NAME}.meta.json"))
        self.acc = defaultdict(dict)   # encoding -> seed -> accuracy (NaN if diverged)
        self.loss = defaultdict(dict)  # encoding -> seed -> test loss
        self.diverged = defaultdict(int)
        self.chance = None
        for r in rows:
            enc, seed = r["positional_encoding"], int(st.number(r, "seed", self.path))
            div = st.number(r, "diverged", self.path) != 0
            self.diverged[enc] += div
            self.acc[enc][seed] = float("nan") if div else st.number(r, "test_accuracy", self.path)
            self.loss[enc][seed] = float("nan") if div else st.number(r, "test_loss", self.path)
            self.chance = st.number(r, "baseline_accuracy", self.path)
        self.encodings = sorted(self.acc, key=lambda e: (ORDER.index(e) if e in ORDER else len(ORDER), e))
        self.n_seeds = min(len(v) for v in self.acc.values())
        self.steps = int(st.number(rows[0], "steps", self.path))


def _fmt(mu, ci):
    return f"{mu:.3f} ± {ci:.3f}"


def fig_accuracy(data, out_dir):
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.4))
    for panel, (ax, values, ylabel) in enumerate(
            [(axes[0], data.acc, "test accuracy (scored tokens)"),
             (axes[1], data.loss, "test loss (nats per scored token)")]):
        for i, enc in enumerate(data.encodings):
            vals = [values[enc][s] for s in sorted(values[enc])]
            mu, ci = st.mean_ci95(vals)
            color = st.PALETTE[i % len(st.PALETTE)]
            ax.bar(i, mu, yerr=ci, color=color, alpha=0.35, capsize=4, width=0.6)
            ax.plot([i] * len(vals), vals, "o", color=color, markersize=4, label=None)
        ax.set_xticks(range(len(data.encodings)))
        ax.set_xticklabels(data.encodings)
        ax.set_xlabel("positional encoding")
        ax.set_ylabel(ylabel)
        if panel == 0:
            ax.set_ylim(0, 1.05)
            if data.chance is not None:
                ax.axhline(data.chance, ls="--", color="grey", lw=1, label=f"chance = {data.chance:g}")
                ax.legend(loc="lower right")
        else:
            positive = [v for e in data.encodings for v in values[e].values() if v > 0]
            if positive:
                ax.set_yscale("log")
    fig.suptitle(f"previous-token task, decoder-only Transformer, {data.steps} updates "
                 f"({st.scale_note(data.meta, data.n_seeds)})", fontsize=9)
    fig.tight_layout()
    return st.save(fig, out_dir, f"{NAME}_accuracy")


def _paired(data, a, b):
    """Per-seed accuracy differences a - b over the seeds both ran without diverging."""
    seeds = sorted(set(data.acc[a]) & set(data.acc[b]))
    return [data.acc[a][s] - data.acc[b][s] for s in seeds
            if not (math.isnan(data.acc[a][s]) or math.isnan(data.acc[b][s]))]


def _need(data, enc):
    if enc not in data.acc:
        raise st.DataError(f"{data.path}: no rows for positional_encoding {enc} (the verdicts compare "
                           f"{NEW}, {REFERENCE} and none)")


def verdict_new_encoding(data):
    _need(data, NEW)
    _need(data, REFERENCE)
    diffs = _paired(data, NEW, REFERENCE)
    mu, ci = st.mean_ci95(diffs)
    m_new = st.mean_ci95(list(data.acc[NEW].values()))
    m_ref = st.mean_ci95(list(data.acc[REFERENCE].values()))
    if len(diffs) < 3:
        verdict = "inconclusive"
    elif mu - ci > -MARGIN:
        verdict = "holds"
    elif mu + ci < -MARGIN:
        verdict = "fails"
    else:
        verdict = "inconclusive"
    return dict(
        claim=f"the new '{NEW}' encoding (one learned direction × position, registered by the example) "
              f"carries the position information of the previous-token task as well as {REFERENCE}",
        measured=f"test accuracy {NEW} {_fmt(*m_new)}, {REFERENCE} {_fmt(*m_ref)}; paired difference "
                 f"{_fmt(mu, ci)} ({len(diffs)} seeds, {data.steps} updates; "
                 f"{data.diverged[NEW]} diverged runs of {NEW})",
        anchor="no paper number (a toy encoding); the reference is the sinusoidal encoding of Vaswani "
               "et al. 2017 §3.5 on the same task and seeds",
        verdict=verdict,
        rule=f"95% CI of the per-seed accuracy difference {NEW} − {REFERENCE}: holds if its lower bound "
             f"is above −{MARGIN} (at most {MARGIN * 100:.0f} points worse), fails if its upper bound is "
             f"below −{MARGIN}; inconclusive otherwise or with fewer than 3 seeds")


def verdict_needs_position(data):
    _need(data, "none")
    vals = [v for v in data.acc["none"].values() if not math.isnan(v)]
    mu, ci = st.mean_ci95(vals)
    if len(vals) < 3:
        verdict = "inconclusive"
    elif mu + ci < SOLVED:
        verdict = "holds"
    elif mu - ci > SOLVED:
        verdict = "fails"
    else:
        verdict = "inconclusive"
    chance = f"{data.chance:g}" if data.chance is not None else "?"
    return dict(
        claim="without any positional encoding a causal Transformer cannot copy the previous token "
              "(it has no position information)",
        measured=f"test accuracy with positional_encoding = none {_fmt(mu, ci)} ({len(vals)} seeds, "
                 f"chance {chance})",
        anchor="Haviv et al. 2022 (arXiv 2203.16634): causal language models without positional "
               "encodings still learn positional information (perplexity close to models with them)",
        verdict=verdict,
        rule=f"mean ± 95% CI of the accuracy without an encoding: holds if the upper bound is below "
             f"{SOLVED}, fails if the lower bound is above {SOLVED} (the causal mask alone gave position "
             f"information); inconclusive otherwise or with fewer than 3 seeds")


def verdicts(results_dir):
    data = Data(results_dir)
    return [verdict_new_encoding(data), verdict_needs_position(data)]


def main(argv):
    res = argv[1] if len(argv) > 1 else os.path.join("results", NAME)
    try:
        data = Data(res)
        st.setup()
        paths = fig_accuracy(data, os.path.join(res, "figures"))
    except st.DataError as e:
        st.fail(str(e))
    for p in paths:
        print("wrote", p)


if __name__ == "__main__":
    main(sys.argv)
