#!/usr/bin/python3
"""plots/plot_norm_stability.py on its committed fixture (tests/plots/fixtures/norm_stability/:
the CSVs and meta.json of a real tiny run of the norm_stability binary, command line in the
meta.json).

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
FIGURES = ["norm_stability_batch", "norm_stability_failures", "norm_stability_stats",
           "norm_stability_padding", "norm_stability_shift"]
VERDICTS = ("holds", "fails", "depends on", "inconclusive")


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
        check(len(rows) == 4, f"4 verdict rows (got {len(rows)})")
        check_verdict_rows(rows, VERDICTS)
        claims = " ".join(r["claim"] for r in rows)
        for word in ("Padding", "Small batches", "inference", "Pre-LN"):
            check(word in claims, f"a sub-claim about {word}")
        # The fixture's numbers: LayerNorm's train/eval gap is exactly 0 and BatchNorm's is not,
        # so the mismatch row holds; the measured text carries the numbers.
        mismatch = [r for r in rows if "inference" in r["claim"]][0]
        check(mismatch["verdict"] == "holds", f"mismatch verdict on the fixture: {mismatch['verdict']}")
        check("pts" in mismatch["measured"] and "3 seeds" in mismatch["measured"],
              f"mismatch measured text: {mismatch['measured']}")

        # 3. The verdicts are computed from the CSVs: a LayerNorm gap makes the mismatch row fail;
        #    a single seed makes every rule inconclusive.
        res3 = fresh(FIXTURE, tmp, "edited")
        main_csv = os.path.join(res3, "norm_stability.csv")

        def ln_gap(header, body):
            i_norm, i_gap = header.index("norm"), header.index("train_eval_gap")
            for b in body:
                if b[i_norm] == "layer_norm":
                    b[i_gap] = "0.5"
            return header, body
        rewrite_csv(main_csv, ln_gap)
        edited = [r for r in mod.verdicts(res3) if "inference" in r["claim"]][0]
        check(edited["verdict"] == "fails", f"LayerNorm gap -> mismatch fails ({edited['verdict']})")

        res4 = fresh(FIXTURE, tmp, "one_seed")

        def one_seed(header, body):
            i = header.index("seed")
            return header, [b for b in body if b[i] == "0"]
        rewrite_csv(os.path.join(res4, "norm_stability.csv"), one_seed)
        check(all(r["verdict"] == "inconclusive" for r in mod.verdicts(res4)),
              "one seed -> every verdict inconclusive")

        # 4. A missing column: exit 2 naming it; verdicts() raises DataError naming it.
        for table, col in (("norm_stability.csv", "acc_eval_mode"),
                           ("norm_stability_steps.csv", "mu_dev"),
                           ("norm_stability_eval.csv", "eval_pad_fraction")):
            res5 = fresh(FIXTURE, tmp, f"drop_{col}")
            drop_column(os.path.join(res5, table), col)
            r = run_script(SCRIPT, res5)
            check(r.returncode == 2, f"missing {col}: exit 2 (got {r.returncode})")
            check(col in r.stderr, f"missing {col}: named on stderr ({r.stderr.strip()!r})")
            check(r.stderr.count("\n") == 1, f"missing {col}: one line on stderr")
            if table == "norm_stability.csv":
                try:
                    mod.verdicts(res5)
                    check(False, f"verdicts() raises DataError for missing {col}")
                except mod.st.DataError as e:
                    check(col in str(e), f"DataError names {col}: {e}")

        # 5. A missing file.
        res6 = fresh(FIXTURE, tmp, "no_eval")
        os.remove(os.path.join(res6, "norm_stability_eval.csv"))
        r = run_script(SCRIPT, res6)
        check(r.returncode == 2 and "norm_stability_eval.csv" in r.stderr,
              f"missing eval CSV: exit 2 naming it ({r.returncode}, {r.stderr.strip()!r})")

    return finish("test_norm_stability: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
