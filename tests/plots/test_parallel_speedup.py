#!/usr/bin/python3
"""plots/plot_parallel_speedup.py on its committed fixture (tests/plots/fixtures/parallel_speedup:
the merged CSVs and meta.json of a real run of `parallel_speedup --scale tiny`).

Checks: the script exits 0 and writes every figure as PNG and PDF plus the crossover table;
verdicts() returns well-formed rows (plots/seqlab_verdict.py's vocabulary), shows the
sequential-steps and memory rows 'by construction' (the fixture's counts are the implementation's
L, L·T and 2·levels; its attention's bytes per token grow with n), and decides the time-to-accuracy
row by the censored rank test on edited copies (holds, fails, inconclusive); a CSV without one of
its columns makes the script exit 2 naming the column and verdicts() raise DataError; a missing
CSV likewise. Exit status 0 when every check passes.
"""
import csv
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import (check, check_figures, check_verdict_rows, drop_column,  # noqa: E402
                               finish, fixture_dir, fresh, import_plots_module, plot_script,
                               rewrite_csv, run_script, snapshot)

FIXTURE = fixture_dir("parallel_speedup")
SCRIPT = plot_script("parallel_speedup")
plot = import_plots_module("plot_parallel_speedup")
st = import_plots_module("seqlab_style")

FIGURES = ["parallel_speedup_time", "parallel_speedup_speedup", "parallel_speedup_memory",
           "parallel_speedup_roofline", "parallel_speedup_complexity",
           "parallel_speedup_time_to_accuracy"]


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
        check_verdict_rows(v)
        steps = [row for row in v if "sequential steps" in row["claim"]]
        check(len(steps) == 1 and steps[0]["verdict"] == "by construction",
              "the fixture's sequential steps (L, L·T, 2·levels) are shown 'by construction'")
        memory = [row for row in v if "memory" in row["claim"]]
        check(len(memory) == 1 and memory[0]["verdict"] == "by construction",
              f"the fixture's attention keeps bytes growing faster than n: {memory}")

        # The time-to-accuracy rule: Gehan's censored rank test needs 3 runs per model; with every
        # Transformer run earlier (3 vs 3: p = 1/20) it holds, reversed it fails; a run that never
        # reached the target is censored at its training time, not infinite.
        tta = fresh(FIXTURE, tmp, "tta")
        path = os.path.join(tta, "parallel_speedup_time_to_accuracy.csv")

        def three_each(times):
            def fn(header, body):
                i = {c: header.index(c) for c in ("model", "seed", "reached", "time_to_target_s",
                                                  "train_time_s", "steps_to_target")}
                out = []
                for model, ts in times.items():
                    proto = next(b for b in body if b[i["model"]] == model)
                    for s_, t in enumerate(ts):
                        b = list(proto)
                        b[i["seed"]] = str(s_)
                        b[i["reached"]] = "1" if t is not None else "0"
                        b[i["time_to_target_s"]] = str(t) if t is not None else "nan"
                        b[i["steps_to_target"]] = "10" if t is not None else "nan"
                        b[i["train_time_s"]] = "9.0"
                        out.append(b)
                return header, out
            return fn

        def tta_verdict():
            return [row for row in plot.verdicts(tta) if "train faster" in row["claim"]][0]
        rewrite_csv(path, three_each({"transformer_decoder": [1.0, 1.2, 1.5], "lstm": [4.0, 5.0, None]}))
        got = tta_verdict()
        check(got["verdict"] == "holds" and "0.05" in got["reason"], f"every Transformer run earlier: {got}")
        rewrite_csv(path, three_each({"transformer_decoder": [4.0, 5.0, None], "lstm": [1.0, 1.2, 1.5]}))
        check(tta_verdict()["verdict"] == "fails", f"every LSTM run earlier: {tta_verdict()['verdict']}")
        rewrite_csv(path, three_each({"transformer_decoder": [1.0, 6.0, None], "lstm": [4.0, 5.0, None]}))
        check(tta_verdict()["verdict"] == "inconclusive", f"interleaved: {tta_verdict()['verdict']}")

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
