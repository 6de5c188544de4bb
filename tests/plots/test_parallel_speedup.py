#!/usr/bin/python3
"""plots/plot_parallel_speedup.py on its committed fixture (tests/plots/fixtures/parallel_speedup:
the merged CSVs and meta.json of a real run of `parallel_speedup --scale tiny`).

Checks: the script exits 0 and writes every figure as PNG and PDF plus the crossover table;
verdicts() returns well-formed rows with allowed verdicts, and decides the sequential-steps row
("holds": the fixture's counts are the implementation's L, L·T and 2·levels); a CSV without one of
its columns makes the script exit 2 naming the column and verdicts() raise DataError; a missing
CSV likewise. Exit status 0 when every check passes.
"""
import csv
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import (check, check_figures, drop_column, finish, fixture_dir,  # noqa: E402
                               fresh, import_plots_module, plot_script, run_script, snapshot)

FIXTURE = fixture_dir("parallel_speedup")
SCRIPT = plot_script("parallel_speedup")
plot = import_plots_module("plot_parallel_speedup")
st = import_plots_module("seqlab_style")

FIGURES = ["parallel_speedup_time", "parallel_speedup_speedup", "parallel_speedup_memory",
           "parallel_speedup_roofline", "parallel_speedup_complexity",
           "parallel_speedup_time_to_accuracy"]
VERDICTS = ("holds", "fails", "inconclusive")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        res = fresh(FIXTURE, tmp, "parallel_speedup")
        r = run_script(SCRIPT, res)
        check(r.returncode == 0, f"plot script exits 0 on the fixture (stderr: {r.stderr[-600:]})")
        check_figures(res, FIGURES)
        cross = os.path.join(res, "figures", "parallel_speedup_crossover.csv")
        if check(os.path.isfile(cross), "crossover table written"):
            rows = list(csv.DictReader(open(cross)))
            check(len(rows) > 0, "crossover table has rows")
            check({"crossover_seq_len_time", "crossover_seq_len_flops", "table1_n_equals_d"}
                  <= set(rows[0]), "crossover table columns")

        before = snapshot(tmp)
        v = plot.verdicts(res)
        check(snapshot(tmp) == before, "verdicts() writes no file")
        check(isinstance(v, list) and len(v) >= 5, f"at least 5 verdict rows (got {len(v)})")
        for row in v:
            check(set(row) == {"claim", "measured", "anchor", "verdict", "rule"},
                  f"verdict row keys: {sorted(row)}")
            check(all(isinstance(row[k], str) and row[k] for k in row), "verdict fields are text")
            check(row["verdict"] in VERDICTS or row["verdict"].startswith("depends on "),
                  f"allowed verdict: {row['verdict']!r}")
        steps = [row for row in v if "sequential steps" in row["claim"]]
        check(len(steps) == 1 and steps[0]["verdict"] == "holds",
              "the fixture's sequential steps (L, L·T, 2·levels) give 'holds'")

        # A missing column: exit 2 naming it, verdicts() raises DataError.
        for table, column in [("parallel_speedup.csv", "sequential_steps"),
                              ("parallel_speedup_time_to_accuracy.csv", "time_to_target_s"),
                              ("parallel_speedup_tta_curve.csv", "recall_accuracy")]:
            bad = fresh(FIXTURE, tmp, "bad_" + column)
            drop_column(os.path.join(bad, table), column)
            r = run_script(SCRIPT, bad)
            check(r.returncode == 2, f"{table} without {column}: exit 2 (got {r.returncode})")
            check(column in r.stderr, f"{table} without {column}: stderr names it ({r.stderr!r})")
            try:
                plot.verdicts(bad)
                check(False, f"verdicts() raises DataError without {column}")
            except st.DataError as e:
                check(column in str(e), f"DataError names {column}")

        # A missing CSV.
        gone = fresh(FIXTURE, tmp, "gone")
        os.remove(os.path.join(gone, "parallel_speedup.csv"))
        r = run_script(SCRIPT, gone)
        check(r.returncode == 2 and "parallel_speedup.csv" in r.stderr,
              f"missing main CSV: exit 2 naming it ({r.stderr!r})")
    return finish("test_parallel_speedup: all checks passed", "test_parallel_speedup: {n} failure(s)")


if __name__ == "__main__":
    sys.exit(main())
