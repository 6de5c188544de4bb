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
        check(len(rows) == 5, f"5 verdict rows (got {len(rows)})")
        check_verdict_rows(rows, VERDICTS + ("by construction",))
        claims = " ".join(r["claim"] for r in rows)
        for word in ("Padding", "Small batches", "LayerNorm uses the same statistics",
                     "BatchNorm's accuracy differs", "Pre-LN"):
            check(word in claims, f"a sub-claim about {word}")
        # The fixture's numbers: LayerNorm's train/eval gap is exactly 0 (by construction, shown);
        # BatchNorm's per-seed mean gap straddles the ±0.02 margin with 3 seeds of 20 updates.
        ln_row = [r for r in rows if "LayerNorm uses the same statistics" in r["claim"]][0]
        mismatch = [r for r in rows if "BatchNorm's accuracy differs" in r["claim"]][0]
        check(ln_row["verdict"] == "by construction", f"LayerNorm modes on the fixture: {ln_row['verdict']}")
        check(mismatch["verdict"] == "inconclusive" and "straddles" in mismatch["reason"],
              f"mismatch verdict on the fixture: {mismatch['verdict']} ({mismatch['reason']})")
        check("pts" in mismatch["measured"] and "3 seeds" in mismatch["measured"],
              f"mismatch measured text: {mismatch['measured']}")
        check("[" in mismatch["effect"] and "±0.02" in mismatch["margin"] and "t over 3 seeds" in mismatch["test"],
              f"mismatch parts: {mismatch['effect']!r}, {mismatch['margin']!r}, {mismatch['test']!r}")

        # 3. The verdicts are computed from the CSVs: a LayerNorm gap contradicts the construction
        #    (fails); BatchNorm 30 points worse in train mode in every run: the modes differ (holds);
        #    no BatchNorm gap at all: equivalence within the margin (fails); a single seed makes every
        #    rule that needs seeds inconclusive.
        res3 = fresh(FIXTURE, tmp, "edited")
        main_csv = os.path.join(res3, "norm_stability.csv")

        def set_gap(norm, value):
            def fn(header, body):
                i_norm, i_gap = header.index("norm"), header.index("train_eval_gap")
                i_tr, i_ev = header.index("acc_train_mode"), header.index("acc_eval_mode")
                for b in body:
                    if b[i_norm] == norm:
                        b[i_gap] = str(value)
                        b[i_tr] = str(float(b[i_ev]) + value)
                return header, body
            return fn

        def row_of(res, text):
            return [r for r in mod.verdicts(res) if text in r["claim"]][0]
        rewrite_csv(main_csv, set_gap("layer_norm", 0.5))
        edited = row_of(res3, "LayerNorm uses the same statistics")
        check(edited["verdict"] == "fails" and "defect" in edited["reason"],
              f"LayerNorm gap -> the construction is contradicted ({edited['verdict']})")
        rewrite_csv(main_csv, set_gap("batch_norm", -0.3))
        check(row_of(res3, "BatchNorm's accuracy differs")["verdict"] == "holds", "BatchNorm gap -0.3 -> holds")
        rewrite_csv(main_csv, set_gap("batch_norm", 0.0))
        got = row_of(res3, "BatchNorm's accuracy differs")
        check(got["verdict"] == "fails" and "within" in got["reason"],
              f"no BatchNorm gap -> equivalence, fails ({got['verdict']}: {got['reason']})")

        res4 = fresh(FIXTURE, tmp, "one_seed")

        def one_seed(header, body):
            i = header.index("seed")
            return header, [b for b in body if b[i] == "0"]
        rewrite_csv(os.path.join(res4, "norm_stability.csv"), one_seed)
        check(all(r["verdict"].startswith("inconclusive") for r in mod.verdicts(res4)
                  if r["kind"] != "by construction"),
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
