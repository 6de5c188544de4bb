#!/usr/bin/python3
"""plots/plot_norm_stability.py on its committed fixture (tests/plots/fixtures/norm_stability/:
the CSVs and meta.json of a real tiny run of the norm_stability binary, command line in the
meta.json: configs/tiny.ini with 3 seeds, two padding conditions and PowerNorm in the batch study).

Checks: the script exits 0 and writes every figure as PNG and PDF; verdicts() returns one
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
        lo = min(float(r) for r in _column(os.path.join(res7, "norm_stability.csv"), "train_pad_max", study="padding"))

        def one_range(header, body):
            i, j = header.index("train_pad_max"), header.index("study")
            return header, [b for b in body if b[j] != "padding" or float(b[i]) != lo]
        for t in ("", "_steps", "_eval", "_pilot"):
            rewrite_csv(os.path.join(res7, f"norm_stability{t}.csv"), one_range)
        got = row_of(res7, "different statistics")
        check(got["verdict"] == "inconclusive" and "shift part" in got["reason"],
              f"one training padding range -> inconclusive ({got['verdict']}: {got['reason']})")

        # Pre vs Post-LN on the largest stable learning rate (2 layers; 1 layer stays at the floor).
        def stability(pre_ok, post_ok):
            def fn(header, body):
                i = {k: header.index(k) for k in ("study", "num_layers", "norm_placement", "lr", "failed")}
                for b in body:
                    if b[i["study"]] == "warmup" and b[i["num_layers"]] == "2":
                        ok = (pre_ok if b[i["norm_placement"]] == "pre" else post_ok)(float(b[i["lr"]]))
                        b[i["failed"]] = "0" if ok else "1"
                return header, body
            return fn
        # Both stable at the smaller rate only: equal grid steps in every seed; the grid resolves one
        # step, so equivalence within half a step is not shown.
        res8 = fresh(FIXTURE, tmp, "warmup_equal")
        rewrite_csv(os.path.join(res8, "norm_stability.csv"), stability(lambda lr: lr < 0.05, lambda lr: lr < 0.05))
        got = row_of(res8, "Pre-LN trains")
        check(got["verdict"] == "inconclusive" and "one grid step" in got["reason"],
              f"equal largest stable rates -> inconclusive at the grid's resolution ({got['verdict']}: {got['reason']})")
        # Post-LN stable where Pre-LN is not, in every seed: the opposite direction, fails.
        res8 = fresh(FIXTURE, tmp, "warmup_post_better")
        rewrite_csv(os.path.join(res8, "norm_stability.csv"), stability(lambda lr: False, lambda lr: lr < 0.05))
        got = row_of(res8, "Pre-LN trains")
        check(got["verdict"] == "fails" and "below" in got["reason"],
              f"Post-LN more stable -> fails ({got['verdict']}: {got['reason']})")

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
