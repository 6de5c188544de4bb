#!/usr/bin/python3
"""plots/plot_custom_example.py on its committed fixture (tests/plots/fixtures/custom_example/: the
CSV and meta.json of a real tiny run of the custom_example binary,
`custom_example --config experiments/custom_example/configs/tiny.ini
 --positional_encoding=none,sinusoidal,ramp --seeds=3`, command line in the meta.json).

Checks: the script exits 0 and writes its figure as PNG and PDF; verdicts() returns one well-formed
row per sub-claim, computed from the CSV (an edited CSV changes the verdicts), and writes nothing;
a CSV without a column makes the script exit 2 naming the column (and verdicts() raise DataError);
a missing CSV likewise names the file; a CSV without the reference encoding names it.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import (check, check_figures, check_verdict_rows, drop_column,  # noqa: E402
                               finish, fixture_dir, fresh, import_plots_module, plot_script,
                               rewrite_csv, run_script)

SCRIPT = plot_script("custom_example")
FIXTURE = fixture_dir("custom_example")
FIGURES = ["custom_example_accuracy"]
VERDICTS = ("holds", "fails", "depends on", "inconclusive")


def set_accuracy(encoding, value):
    def fn(header, body):
        i_enc, i_acc = header.index("positional_encoding"), header.index("test_accuracy")
        for b in body:
            if b[i_enc] == encoding:
                b[i_acc] = value(b) if callable(value) else value
        return header, body
    return fn


def main():
    mod = import_plots_module("plot_custom_example")
    with tempfile.TemporaryDirectory() as tmp:
        # 1. Figures.
        res = fresh(FIXTURE, tmp, "ok")
        r = run_script(SCRIPT, res)
        check(r.returncode == 0, f"plot script exits 0 (stderr: {r.stderr[-800:]})")
        check_figures(res, FIGURES)

        # 2. Verdicts: one row per sub-claim, well formed, nothing written.
        res2 = fresh(FIXTURE, tmp, "verdicts")
        before = sorted(os.listdir(res2))
        rows = mod.verdicts(res2)
        check(sorted(os.listdir(res2)) == before, "verdicts() writes nothing")
        check(len(rows) == 2, f"2 verdict rows (got {len(rows)})")
        check_verdict_rows(rows, VERDICTS)
        new, none = rows
        check("ramp" in new["claim"] and "sinusoidal" in new["claim"], f"claim 1: {new['claim']}")
        # The fixture (20 updates): ramp − sinusoidal = 0.063 ± 0.22 spans the −0.05 margin:
        # inconclusive; none 0.31 ± 0.15 stays below 0.5: holds.
        check(new["verdict"] == "inconclusive", f"ramp verdict on the fixture: {new['verdict']}")
        check(none["verdict"] == "holds", f"none verdict on the fixture: {none['verdict']}")
        check("3 seeds" in new["measured"], f"ramp measured text: {new['measured']}")
        check("± " in none["measured"] and "3 seeds" in none["measured"],
              f"none measured text: {none['measured']}")

        # 3. Computed from the CSV: ramp equal to sinusoidal seed by seed -> holds; ramp far below
        #    -> fails; none near 1 -> fails; one seed -> inconclusive.
        res3 = fresh(FIXTURE, tmp, "edited")
        path = os.path.join(res3, "custom_example.csv")
        rewrite_csv(path, set_accuracy("sinusoidal", "0.9"))
        rewrite_csv(path, set_accuracy("ramp", "0.9"))
        rewrite_csv(path, set_accuracy("none", lambda b: {"0": "0.95", "1": "0.97", "2": "0.96"}[b[3]]))
        edited = mod.verdicts(res3)
        check(edited[0]["verdict"] == "holds", f"equal ramp -> holds ({edited[0]['verdict']})")
        check(edited[1]["verdict"] == "fails", f"none near 1 -> fails ({edited[1]['verdict']})")
        rewrite_csv(path, set_accuracy("ramp", lambda b: {"0": "0.2", "1": "0.25", "2": "0.3"}[b[3]]))
        check(mod.verdicts(res3)[0]["verdict"] == "fails", "ramp far below sinusoidal -> fails")

        # Both at accuracy 1: the ceiling, not evidence of equality; both at chance: the floor.
        rewrite_csv(path, set_accuracy("sinusoidal", "1"))
        rewrite_csv(path, set_accuracy("ramp", "0.995"))
        check(mod.verdicts(res3)[0]["verdict"] == "inconclusive: ceiling", "both at 1 -> ceiling")
        chance = mod.Data(res3).chance
        rewrite_csv(path, set_accuracy("sinusoidal", str(chance)))
        rewrite_csv(path, set_accuracy("ramp", str(chance)))
        check(mod.verdicts(res3)[0]["verdict"] == "inconclusive: floor", "both at chance -> floor")
        rewrite_csv(path, set_accuracy("none", str(chance)))
        check(mod.verdicts(res3)[1]["verdict"] == "inconclusive: floor",
              "none and the reference at chance -> floor (the budget taught nothing)")

        res4 = fresh(FIXTURE, tmp, "one_seed")

        def one_seed(header, body):
            i = header.index("seed")
            return header, [b for b in body if b[i] == "0"]
        rewrite_csv(os.path.join(res4, "custom_example.csv"), one_seed)
        for row in mod.verdicts(res4):
            check(row["verdict"] == "inconclusive", f"one seed -> inconclusive ({row['verdict']})")

        # 4. A missing column: exit 2 naming it; verdicts() raises DataError.
        res5 = fresh(FIXTURE, tmp, "no_column")
        path5 = os.path.join(res5, "custom_example.csv")
        drop_column(path5, "test_accuracy")
        r = run_script(SCRIPT, res5)
        check(r.returncode == 2, f"missing column -> exit 2 (got {r.returncode})")
        check("test_accuracy" in r.stderr, f"stderr names the column: {r.stderr!r}")
        try:
            mod.verdicts(res5)
            check(False, "verdicts() raises on a missing column")
        except mod.st.DataError as e:
            check("test_accuracy" in str(e), f"DataError names the column: {e}")

        # 5. A missing CSV names the file; a CSV without the reference encoding names it.
        res6 = fresh(FIXTURE, tmp, "no_csv")
        os.remove(os.path.join(res6, "custom_example.csv"))
        r = run_script(SCRIPT, res6)
        check(r.returncode == 2 and "custom_example.csv" in r.stderr,
              f"missing CSV -> exit 2 naming it ({r.returncode}, {r.stderr!r})")
        res7 = fresh(FIXTURE, tmp, "no_reference")

        def no_sin(header, body):
            i = header.index("positional_encoding")
            return header, [b for b in body if b[i] != "sinusoidal"]
        rewrite_csv(os.path.join(res7, "custom_example.csv"), no_sin)
        try:
            mod.verdicts(res7)
            check(False, "verdicts() raises without the reference encoding")
        except mod.st.DataError as e:
            check("sinusoidal" in str(e), f"DataError names the missing encoding: {e}")

    return finish("ok")


if __name__ == "__main__":
    sys.exit(main())
