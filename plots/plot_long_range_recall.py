#!/usr/bin/python3
"""Figures for experiments/long_range_recall (claim 2: recurrent state decays over long distances).

usage: plot_long_range_recall.py [RESULTS_DIR]   (default: results/long_range_recall)
Reads long_range_recall.csv, long_range_recall_steps.csv and long_range_recall.meta.json from
RESULTS_DIR; writes long_range_recall_curves.{png,pdf} and long_range_recall_accuracy.{png,pdf}
into RESULTS_DIR/figures. Exits 2 naming a missing or malformed file or column.
"""
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seqlab_style as st  # noqa: E402

NAME = "long_range_recall"
FINAL_COLS = ["model", "T", "seed", "test_recall_accuracy", "test_loss", "memoryless_loss",
              "chance_recall_accuracy", "diverged"]
STEP_COLS = ["model", "T", "seed", "step", "train_loss"]


def main(argv):
    res = argv[1] if len(argv) > 1 else os.path.join("results", NAME)
    final_path = os.path.join(res, NAME + ".csv")
    steps_path = os.path.join(res, NAME + "_steps.csv")
    try:
        final = st.read_csv(final_path, FINAL_COLS)
        steps = st.read_csv(steps_path, STEP_COLS)
        num = lambda r, k, p: st.number(r, k, p)  # noqa: E731
        meta = st.read_meta(os.path.join(res, NAME + ".meta.json"))
        st.setup()
        seeds = sorted({r["seed"] for r in final})
        note = st.scale_note(meta, len(seeds))
        out_dir = os.path.join(res, "figures")
        models = sorted({r["model"] for r in final})
        Ts = sorted({int(num(r, "T", final_path)) for r in final})

        # 1. Training loss curves: one panel per model, one line per T, memoryless baseline dashed.
        fig, axes = st.plt.subplots(1, len(models), figsize=(5.5 * len(models), 4), squeeze=False)
        for ax, model in zip(axes[0], models):
            for i, T in enumerate(Ts):
                color = st.PALETTE[i % len(st.PALETTE)]
                by_step = defaultdict(list)
                for r in steps:
                    if r["model"] == model and int(num(r, "T", steps_path)) == T:
                        by_step[int(num(r, "step", steps_path))].append(num(r, "train_loss", steps_path))
                if not by_step:
                    continue
                xs = sorted(by_step)
                stats = [st.mean_ci95(by_step[x]) for x in xs]
                m = [s[0] for s in stats]
                lo = [s[0] - s[1] for s in stats]
                hi = [s[0] + s[1] for s in stats]
                ax.plot(xs, m, color=color, label=f"T = {T}")
                ax.fill_between(xs, lo, hi, color=color, alpha=0.2, linewidth=0)
                base = [num(r, "memoryless_loss", final_path) for r in final
                        if r["model"] == model and int(num(r, "T", final_path)) == T]
                if base:
                    ax.axhline(base[0], color=color, linestyle="--", linewidth=1)
            st.label_log_axis(ax, "y")
            ax.set_xlabel("training step")
            ax.set_ylabel("training cross-entropy (nats per position)")
            ax.set_title(f"{model.upper()} on copy memory, log scale\n(dashed: best memoryless predictor; {note})",
                         fontsize=9)
            ax.legend(fontsize=8)
        p1 = st.save(fig, out_dir, NAME + "_curves")

        # 2. Recall accuracy on the 10 copied symbols against the delay T.
        fig, ax = st.plt.subplots(figsize=(5.5, 4))
        for i, model in enumerate(models):
            xs, m, err, n_div = [], [], [], 0
            for T in Ts:
                rows = [r for r in final if r["model"] == model and int(num(r, "T", final_path)) == T]
                acc = [num(r, "test_recall_accuracy", final_path) for r in rows]
                n_div += sum(int(num(r, "diverged", final_path)) for r in rows)
                mu, ci = st.mean_ci95(acc)
                if not math.isnan(mu):
                    xs.append(T)
                    m.append(mu)
                    err.append(ci)
            label = model.upper() + (f" ({n_div} diverged runs)" if n_div else "")
            ax.errorbar(xs, m, yerr=err, marker=st.MARKERS[i % len(st.MARKERS)], capsize=3,
                        color=st.PALETTE[i % len(st.PALETTE)], label=label)
        chance = st.number(final[0], "chance_recall_accuracy", final_path)
        ax.axhline(chance, color="grey", linestyle=":", label=f"chance ({chance:g})")
        ax.set_xscale("log")
        ax.set_xticks(Ts)
        ax.set_xticklabels([str(T) for T in Ts])
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("blank length T (recall distance T + 10 steps)")
        ax.set_ylabel("recall accuracy on the 10 symbols (fraction)")
        ax.set_title(f"Copy memory: recall vs blank length ({note})", fontsize=9)
        ax.legend(fontsize=8)
        p2 = st.save(fig, out_dir, NAME + "_accuracy")
    except st.DataError as e:
        st.fail(str(e))
    for p in p1 + p2:
        print("wrote", p)


if __name__ == "__main__":
    main(sys.argv)
