#!/usr/bin/python3
"""plots/plot_norm_stability.py on its committed fixture (tests/plots/fixtures/norm_stability/:
the CSVs and meta.json of a real tiny run of the norm_stability binary, command line in the
meta.json: configs/tiny.ini with 3 seeds, two padding conditions and PowerNorm in the batch study).

Checks: the script exits 0 and writes every figure as PNG and PDF and the learning-rate
sensitivity table; lr_sensitivity() and the warm-up verdict against values computed by hand on
synthetic sweeps (Post-LN stalling while Pre-LN degrades: holds; equal placements: never holds;
reversed: fails); verdicts() returns one
well-formed row per sub-claim, computed from the CSVs (a changed CSV changes a verdict), writes
nothing; a CSV without a column makes the script exit 2 naming the column (and verdicts() raise
DataError); a missing CSV likewise names the file.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import (check, check_figures, check_verdict_rows, drop_column,  # noqa: E402
                               finish, fixture_dir, fresh, import_plots_module, plot_script,
                               rewrite_csv, run_script)

SCRIPT = plot_script("norm_stability")
FIXTURE = fixture_dir("norm_stability")
FIGURES = ["norm_stability_lr_stability", "norm_stability_init_grads", "norm_stability_padding",
           "norm_stability_shift", "norm_stability_batch", "norm_stability_fluctuation"]
VERDICTS = ("holds", "fails", "depends on", "inconclusive")


def _column(path, col, **where):
    """The values of `col` in the CSV's rows that match `where`."""
    import csv
    with open(path, newline="") as f:
        return [r[col] for r in csv.DictReader(f) if all(r[k] == v for k, v in where.items())]


def main():
    mod = import_plots_module("plot_norm_stability")
    with tempfile.TemporaryDirectory() as tmp:
        # 1. Figures.
        res = fresh(FIXTURE, tmp, "ok")
        r = run_script(SCRIPT, res)
        check(r.returncode == 0, f"plot script exits 0 (stderr: {r.stderr[-800:]})")
        check_figures(res, FIGURES)
        table = os.path.join(res, "figures", "norm_stability_lr_sensitivity.csv")
        check(os.path.isfile(table), "the learning-rate sensitivity table is written")
        if os.path.isfile(table):
            lrs_vals = _column(table, "lr_sensitivity")
            check(len(lrs_vals) == 24 and all(float(x) >= 0 for x in lrs_vals),
                  f"one row per depth, placement, warm-up and seed, LRS >= 0 ({len(lrs_vals)} rows)")

        # 2. Verdicts: one row per sub-claim, well formed, and nothing written.
        res2 = fresh(FIXTURE, tmp, "verdicts")
        before = sorted(os.listdir(res2))
        rows = mod.verdicts(res2)
        check(sorted(os.listdir(res2)) == before, "verdicts() writes nothing")
        check(len(rows) == 7, f"7 verdict rows (got {len(rows)})")
        check_verdict_rows(rows, VERDICTS + ("by construction",))
        claims = " ".join(r["claim"] for r in rows)
        for word in ("Padding", "Small batches", "LayerNorm uses the same statistics", "different statistics",
                     "PowerNorm", "Pre-LN", "At initialisation"):
            check(word in claims, f"a sub-claim about {word}")

        def row_of(res, text):
            return [r for r in mod.verdicts(res) if text in r["claim"]][0]
        # The fixture's numbers: LayerNorm's modes agree exactly (by construction, shown); the tiny
        # model stays near the unigram baseline, so the padding rule says floor.
        check(row_of(res2, "LayerNorm uses")["verdict"] == "by construction", "LayerNorm modes: by construction")
        pad = row_of(res2, "Padding pollutes")
        check(pad["verdict"] == "inconclusive: floor", f"padding on the fixture: {pad['verdict']} ({pad['reason']})")
        check("±0.02 nats" in pad["margin"] and "paired t over 3 seeds" in pad["test"],
              f"padding row parts: {pad['margin']!r}, {pad['test']!r}")

        # 3. The verdicts are computed from the CSVs.
        res3 = fresh(FIXTURE, tmp, "edited")
        eval_csv = os.path.join(res3, "norm_stability_eval.csv")

        def set_loss(fn_loss):
            def fn(header, body):
                i = {k: header.index(k) for k in ("study", "norm", "mode", "loss", "seed", "train_pad_max")}
                for b in body:
                    v = fn_loss(b[i["study"]], b[i["norm"]], b[i["mode"]], int(b[i["seed"]]), float(b[i["train_pad_max"]]))
                    if v is not None:
                        b[i["loss"]] = str(v)
                return header, body
            return fn
        # LayerNorm's train mode differs from its eval mode: the construction is contradicted.
        rewrite_csv(eval_csv, set_loss(lambda s, n, m, seed, p: 2.0 if n == "layer_norm" and m == "train" else None))
        got = row_of(res3, "LayerNorm uses")
        check(got["verdict"] == "fails" and "defect" in got["reason"], f"LayerNorm gap -> fails ({got['verdict']})")
        # Naive BatchNorm 0.3 nats worse than the masked one, both well below the baseline: holds.
        res3 = fresh(FIXTURE, tmp, "edited2")
        eval_csv = os.path.join(res3, "norm_stability_eval.csv")

        def padding_losses(gap):
            def f(s, n, m, seed, p):
                if s != "padding":
                    return None
                return {"batch_norm": 2.0 + gap, "masked_batch_norm": 2.0}.get(n, 2.1) + 0.001 * seed
            return f
        rewrite_csv(eval_csv, set_loss(padding_losses(0.3)))
        got = row_of(res3, "Padding pollutes")
        check(got["verdict"] in ("holds", "inconclusive: not converged"), f"naive BN 0.3 worse -> holds ({got['verdict']}: {got['reason']})")
        rewrite_csv(eval_csv, set_loss(padding_losses(0.0)))
        got = row_of(res3, "Padding pollutes")
        check(got["verdict"] in ("fails", "inconclusive: not converged") and "within" in got["reason"],
              f"no gap -> within the margin ({got['verdict']}: {got['reason']})")

        # Train/inference: BatchNorm's eval mode equal to precise BN, every loss off the floor. With both
        # training padding ranges the shift part decides too (no difference: fails); with one range
        # the rule cannot tell fails from 'depends on the shift': inconclusive.
        res7 = fresh(FIXTURE, tmp, "mismatch")
        flat = set_loss(lambda s, n, m, seed, p: 2.0 + 0.001 * seed if s == "padding" else None)
        rewrite_csv(os.path.join(res7, "norm_stability_eval.csv"), flat)
        got = row_of(res7, "different statistics")
        check(got["verdict"] in ("fails", "inconclusive: not converged"), f"no harm in both parts -> fails ({got['verdict']}: {got['reason']})")
        # No harm in distribution (fails) but a shift part whose interval straddles the margin: the
        # shift part holding would give 'depends on the shift', so the rule must not say 'fails'.
        res9 = fresh(FIXTURE, tmp, "mismatch_undecided")
        lo9 = min(float(r) for r in _column(os.path.join(res9, "norm_stability.csv"), "train_pad_max", study="padding"))
        q9 = max(float(r) for r in _column(os.path.join(res9, "norm_stability_eval.csv"), "test_pad", study="padding"))
        noise = {0: 0.2, 1: -0.15, 2: 0.05}  # BN's shift cost − LN's: mean +0.033, interval about ±0.44

        def noisy_shift(header, body):
            i = {k: header.index(k) for k in ("study", "norm", "loss", "seed", "train_pad_max", "test_pad")}
            for b in body:
                if b[i["study"]] == "padding":
                    v = 2.0 + 0.001 * int(b[i["seed"]])
                    if (b[i["norm"]] == "batch_norm" and float(b[i["train_pad_max"]]) == lo9
                            and float(b[i["test_pad"]]) == q9):
                        v += noise[int(b[i["seed"]])]
                    b[i["loss"]] = str(v)
            return header, body
        rewrite_csv(os.path.join(res9, "norm_stability_eval.csv"), noisy_shift)
        got = row_of(res9, "different statistics")
        check(got["verdict"].startswith("inconclusive") and "cannot tell" in got["reason"],
              f"in-distribution fails, shift undecided -> inconclusive ({got['verdict']}: {got['reason']})")
        lo = min(float(r) for r in _column(os.path.join(res7, "norm_stability.csv"), "train_pad_max", study="padding"))

        def one_range(header, body):
            i, j = header.index("train_pad_max"), header.index("study")
            return header, [b for b in body if b[j] != "padding" or float(b[i]) != lo]
        for t in ("", "_steps", "_eval", "_pilot"):
            rewrite_csv(os.path.join(res7, f"norm_stability{t}.csv"), one_range)
        got = row_of(res7, "different statistics")
        check(got["verdict"] == "inconclusive" and "shift part" in got["reason"],
              f"one training padding range -> inconclusive ({got['verdict']}: {got['reason']})")

        # Pre vs Post-LN: the learning-rate sensitivity (Wortsman et al. 2023 §2.2) of each sweep.
        # By hand first: the mean of the capped losses minus the best, a diverged run (nan) and a
        # run above the initial loss both counting as the initial loss.
        got = mod.lr_sensitivity({0.001: 2.0, 0.01: 2.1, 0.1: 3.1, 1.0: float("nan")}, 4.0)
        check(all(abs(a - b) < 1e-12 for a, b in zip(got, (0.8, 2.0, 2.8))),
              f"LRS of 2.0, 2.1, 3.1, diverged with l0 4: (0.8, 2.0, 2.8) (got {got})")
        got = mod.lr_sensitivity({0.01: 2.0, 0.1: 5.0}, 4.0)
        check(abs(got[0] - 1.0) < 1e-12, f"a loss above l0 is capped at l0: LRS 1.0 (got {got[0]})")
        check(mod.lr_sensitivity({0.01: 4.5, 0.1: 4.6}, 4.0)[0] == 0.0, "no run below l0: LRS 0 (the floor)")

        # A synthetic warm-up table replacing the fixture's (depth 2 only; 4 rates, l0 = 4 nats; seed
        # s adds e = 0.01·s to every finite loss). Pre-LN degrades gracefully: 2.0, 2.1, 2.4, 2.8 (+e)
        # at every warm-up: mean 2.325 + e, best 2.0 + e, LRS 0.325. Post-LN without warm-up stalls
        # above 0.01 and diverges at the top: 2.0, 2.1, 3.1 (+e), diverged (4): mean 2.8 + 0.75e,
        # best 2.0 + e, LRS 0.8 − 0.25e = 0.8, 0.7975, 0.795. Post-LN with warm-up 100 stalls only at
        # the top: 2.0, 2.1, 2.3, 3.1 (+e): mean 2.375 + e, LRS 0.375. So Pre − Post without warm-up
        # = −0.475 + 0.25e, mean −0.4725, and Post with − without = −0.425 + 0.25e, mean −0.4225, both
        # far below −0.05: holds.
        LRS_GRID = (0.001, 0.01, 0.1, 1.0)
        NAN = float("nan")
        PRE = (2.0, 2.1, 2.4, 2.8)
        POST = {0: (2.0, 2.1, 3.1, NAN), 100: (2.0, 2.1, 2.3, 3.1)}

        def synthetic_warmup(post_curves):
            def fn(header, body):
                i = {k: header.index(k) for k in ("study", "num_layers", "norm_placement", "warmup_steps", "lr",
                                                  "seed", "initial_loss", "baseline_loss", "valid_loss",
                                                  "diverged", "failed")}
                template = next(b for b in body if b[i["study"]] == "warmup")
                out = [b for b in body if b[i["study"]] != "warmup"]
                base = float(template[i["baseline_loss"]])
                for seed in range(3):
                    for pl in ("pre", "post"):
                        for w in (0, 100):
                            for lr, v in zip(LRS_GRID, PRE if pl == "pre" else post_curves[w]):
                                b = list(template)
                                v = v + 0.01 * seed
                                b[i["num_layers"]], b[i["norm_placement"]], b[i["warmup_steps"]] = "2", pl, str(w)
                                b[i["lr"]], b[i["seed"]], b[i["initial_loss"]] = f"{lr:g}", str(seed), "4"
                                b[i["valid_loss"]] = "nan" if v != v else f"{v:.6f}"
                                b[i["diverged"]] = "1" if v != v else "0"
                                b[i["failed"]] = "1" if v != v or v >= base - 0.1 else "0"
                                out.append(b)
                return header, out
            return fn
        res8 = fresh(FIXTURE, tmp, "warmup_lrs")
        rewrite_csv(os.path.join(res8, "norm_stability.csv"), synthetic_warmup(POST))
        sweeps = mod.warmup_sweeps(mod.Data(res8))
        for (pl, w), want in ((("pre", 0), [0.325] * 3), (("post", 0), [0.8, 0.7975, 0.795]),
                              (("post", 100), [0.375] * 3)):
            got = [sweeps[(2, pl, w, s)]["lrs"] for s in range(3)]
            check(all(abs(a - b) < 1e-6 for a, b in zip(got, want)), f"LRS {pl}/w{w}: {want} (got {got})")
        got = row_of(res8, "Pre-LN trains")
        check(got["verdict"] == "holds", f"Post-LN stalls, Pre-LN degrades: holds ({got['verdict']}: {got['reason']})")
        check("-0.472" in got["effect"] and "-0.422" in got["effect"],
              f"the paired LRS differences by hand, -0.4725 and -0.4225 ({got['effect']})")
        check("±0.05 nats" in got["margin"], f"LRS margin stated ({got['margin']})")
        check("threshold criterion" in got["measured"] and "half-gap criterion" in got["measured"],
              "the largest stable rate under both stall criteria is shown beside the verdict")
        # The placements equal (Post-LN's curves = Pre-LN's at every warm-up): no difference, so the
        # claim of a lower sensitivity cannot hold (equivalence within ±0.05: fails).
        res8 = fresh(FIXTURE, tmp, "warmup_equal")
        rewrite_csv(os.path.join(res8, "norm_stability.csv"), synthetic_warmup({0: PRE, 100: PRE}))
        got = row_of(res8, "Pre-LN trains")
        check(got["verdict"] != "holds" and got["verdict"] == "fails" and "within" in got["reason"],
              f"equal placements -> fails, never holds ({got['verdict']}: {got['reason']})")
        # Post-LN graceful, Pre-LN stalling: the opposite direction fails too.
        res8 = fresh(FIXTURE, tmp, "warmup_reversed")

        def swap(header, body):
            j = header.index("norm_placement")
            for b in body:
                if b[j] in ("pre", "post"):
                    b[j] = "post" if b[j] == "pre" else "pre"
            return header, body
        rewrite_csv(os.path.join(res8, "norm_stability.csv"), synthetic_warmup({0: POST[0], 100: POST[0]}))
        rewrite_csv(os.path.join(res8, "norm_stability.csv"), swap)
        got = row_of(res8, "Pre-LN trains")
        check(got["verdict"] == "fails" and "above" in got["reason"],
              f"Pre-LN the sensitive one -> fails ({got['verdict']}: {got['reason']})")

        # One seed makes every rule that needs seeds inconclusive.
        res4 = fresh(FIXTURE, tmp, "one_seed")

        def one_seed(header, body):
            i = header.index("seed")
            return header, [b for b in body if b[i] == "0"]
        for t in ("", "_steps", "_eval", "_pilot", "_init_grads"):
            rewrite_csv(os.path.join(res4, f"norm_stability{t}.csv"), one_seed)
        check(all(r["verdict"].startswith("inconclusive") for r in mod.verdicts(res4) if r["kind"] != "by construction"),
              "one seed -> every verdict inconclusive")

        # 4. A missing column: exit 2 naming it; verdicts() raises DataError naming it.
        for table, col in (("norm_stability.csv", "valid_loss"), ("norm_stability_steps.csv", "mu_dev"),
                           ("norm_stability_eval.csv", "test_pad"), ("norm_stability_init_grads.csv", "grad_norm")):
            res5 = fresh(FIXTURE, tmp, f"drop_{col}")
            drop_column(os.path.join(res5, table), col)
            r = run_script(SCRIPT, res5)
            check(r.returncode == 2, f"missing {col}: exit 2 (got {r.returncode})")
            check(col in r.stderr, f"missing {col}: named on stderr ({r.stderr.strip()!r})")
            check(r.stderr.count("\n") == 1, f"missing {col}: one line on stderr")
            try:
                mod.verdicts(res5)
                check(False, f"verdicts() raises DataError for missing {col}")
            except mod.st.DataError as e:
                check(col in str(e), f"DataError names {col}: {e}")

        # 5. A missing file.
        res6 = fresh(FIXTURE, tmp, "no_pilot")
        os.remove(os.path.join(res6, "norm_stability_pilot.csv"))
        r = run_script(SCRIPT, res6)
        check(r.returncode == 2 and "norm_stability_pilot.csv" in r.stderr,
              f"missing pilot CSV: exit 2 naming it ({r.returncode}, {r.stderr.strip()!r})")

    return finish("test_norm_stability: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
