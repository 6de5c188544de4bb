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
import seqlab_stats as ss  # noqa: E402
import seqlab_style as st  # noqa: E402
import seqlab_verdict as sv  # noqa: E402

NAME = "custom_example"
COLS = ["positional_encoding", "seed", "seq_len", "steps", "n_params", "train_loss", "test_loss",
        "test_accuracy", "baseline_accuracy", "diverged"]
ORDER = ["none", "sinusoidal", "learned", "rope", "rope_pi", "rope_ntk", "alibi", "ramp"]
NEW = "ramp"            # the encoding the example registers
REFERENCE = "sinusoidal"  # the built-in it is compared with
MARGIN = 0.05          # accuracy points: "as good as" the reference within this
SOLVED = 0.5           # accuracy: "solved at least half" (chance is 1 / vocab_size)
CEILING_MARGIN = 0.02  # accuracy: both arms within this of 1 (ceiling) or of chance (floor)


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


def _need(data, enc):
    if enc not in data.acc:
        raise st.DataError(f"{data.path}: no rows for positional_encoding {enc} (the verdicts compare "
                           f"{NEW}, {REFERENCE} and none)")


def _by_seed(data, enc):
    """{seed: accuracy} and the seeds whose run diverged (their accuracy is nan in data.acc)."""
    acc = {s: v for s, v in data.acc[enc].items() if not math.isnan(v)}
    div = {s for s, v in data.acc[enc].items() if math.isnan(v)}
    return acc, div


def verdict_new_encoding(data):
    _need(data, NEW)
    _need(data, REFERENCE)
    a, da = _by_seed(data, NEW)
    b, db = _by_seed(data, REFERENCE)
    chance = data.chance if data.chance is not None else float("nan")
    eff = ss.paired_difference(a, b, diverged_a=da, diverged_b=db,
                               worst=None if math.isnan(chance) else chance,
                               what=f"{NEW} − {REFERENCE}, test accuracy")
    m_new = st.mean_ci95(list(a.values()))
    m_ref = st.mean_ci95(list(b.values()))
    v = sv.decide(eff, MARGIN, sv.NO_WORSE, unit="accuracy",
                  ceiling=sv.at_ceiling([m_new[0], m_ref[0]], 1.0, CEILING_MARGIN),
                  floor=sv.at_floor([m_new[0], m_ref[0]], chance, CEILING_MARGIN), controls=True,
                  level_margin=CEILING_MARGIN,
                  levels=f"means {m_new[0]:.3f}, {m_ref[0]:.3f}; chance {chance:g}")
    return v.row(
        claim=f"the new '{NEW}' encoding (one learned direction × position, registered by the example) "
              f"carries the position information of the previous-token task as well as {REFERENCE}",
        measured=f"test accuracy {NEW} {_fmt(*m_new)}, {REFERENCE} {_fmt(*m_ref)}; paired difference "
                 f"{_fmt(eff.value, eff.value - eff.lo) if eff.known else 'n/a'} ({eff.n} seeds, {data.steps} "
                 f"updates; {data.diverged[NEW]} diverged runs of {NEW})",
        anchor="no paper number (a toy encoding); the reference is the sinusoidal encoding of Vaswani "
               "et al. 2017 §3.5 on the same task and seeds",
        rule=f"non-inferiority: the paired per-seed accuracy difference {NEW} − {REFERENCE} (95 % t-interval; a "
             f"diverged run counts as chance): holds if its lower bound is above −{MARGIN:g} (at most "
             f"{MARGIN * 100:.0f} points worse), fails if its upper bound is below −{MARGIN:g}; inconclusive: "
             f"ceiling / floor if both are within {CEILING_MARGIN:g} of accuracy 1 / of chance; fewer than "
             f"{sv.MIN_SEEDS} seeds: inconclusive")


def verdict_needs_position(data):
    _need(data, "none")
    _need(data, REFERENCE)
    vals, _ = _by_seed(data, "none")
    eff = ss.mean_interval([v - SOLVED for v in vals.values()],
                           what=f"accuracy without an encoding − {SOLVED:g}")
    mu, ci = st.mean_ci95(list(vals.values()))
    ref = st.mean_ci95(list(_by_seed(data, REFERENCE)[0].values()))[0]
    chance = data.chance if data.chance is not None else float("nan")
    # Floor: the reference arm too at chance means the budget taught nothing (not that position
    # information is missing); 'none' at chance alone is the claim's own evidence.
    v = sv.decide(eff, 0.0, sv.LESS, unit="accuracy", margin_text=f"the threshold {SOLVED:g}",
                  floor=sv.at_floor([mu, ref], chance, CEILING_MARGIN), level_margin=CEILING_MARGIN,
                  levels=f"none {mu:.3f}, {REFERENCE} {ref:.3f}; chance {chance:g}")
    chance_txt = f"{data.chance:g}" if data.chance is not None else "?"
    return v.row(
        claim="without any positional encoding a causal Transformer cannot copy the previous token "
              "(it has no position information)",
        measured=f"test accuracy with positional_encoding = none {_fmt(mu, ci)} ({len(vals)} seeds, "
                 f"chance {chance_txt}; {REFERENCE} {ref:.3f})",
        anchor="Haviv et al. 2022 (arXiv 2203.16634): causal language models without positional "
               "encodings still learn positional information (perplexity close to models with them)",
        rule=f"mean accuracy without an encoding against {SOLVED} (t-interval over seeds): holds if the "
             f"interval lies below {SOLVED}, fails if above it (the causal mask alone gave position "
             f"information); inconclusive: floor if {REFERENCE} too stays within {CEILING_MARGIN:g} of chance "
             f"(the budget taught nothing); fewer than {sv.MIN_SEEDS} seeds: inconclusive")


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
