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
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("SEQLAB_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
PLOTS = os.path.join(SRC, "plots")
FIXTURE = os.path.join(SRC, "tests", "plots", "fixtures", "parallel_speedup")
SCRIPT = os.path.join(PLOTS, "plot_parallel_speedup.py")
sys.path.insert(0, PLOTS)
import plot_parallel_speedup as plot  # noqa: E402
import seqlab_style as st  # noqa: E402

FIGURES = ["parallel_speedup_time", "parallel_speedup_speedup", "parallel_speedup_memory",
           "parallel_speedup_roofline", "parallel_speedup_complexity",
           "parallel_speedup_time_to_accuracy"]
VERDICTS = ("holds", "fails", "inconclusive")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def run(res):
    return subprocess.run([sys.executable, SCRIPT, res], capture_output=True, text=True,
                          cwd=tempfile.gettempdir())


def drop_column(path, column):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    i = rows[0].index(column)
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([r[:i] + r[i + 1:] for r in rows])


def main():
    with tempfile.TemporaryDirectory() as tmp:
        res = os.path.join(tmp, "parallel_speedup")
        shutil.copytree(FIXTURE, res)
        r = run(res)
        check(r.returncode == 0, f"plot script exits 0 on the fixture (stderr: {r.stderr[-600:]})")
        for stem in FIGURES:
            for ext in ("png", "pdf"):
                p = os.path.join(res, "figures", f"{stem}.{ext}")
                check(os.path.isfile(p) and os.path.getsize(p) > 1000, f"{stem}.{ext} written")
        cross = os.path.join(res, "figures", "parallel_speedup_crossover.csv")
        if check(os.path.isfile(cross), "crossover table written"):
            rows = list(csv.DictReader(open(cross)))
            check(len(rows) > 0, "crossover table has rows")
            check({"crossover_seq_len_time", "crossover_seq_len_flops", "table1_n_equals_d"}
                  <= set(rows[0]), "crossover table columns")

        def snapshot():
            return sorted((os.path.join(d, f), os.path.getmtime(os.path.join(d, f)))
                          for d, _, fs in os.walk(tmp) for f in fs)
        before = snapshot()
        v = plot.verdicts(res)
        check(snapshot() == before, "verdicts() writes no file")
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
            bad = os.path.join(tmp, "bad_" + column)
            shutil.copytree(FIXTURE, bad)
            drop_column(os.path.join(bad, table), column)
            r = run(bad)
            check(r.returncode == 2, f"{table} without {column}: exit 2 (got {r.returncode})")
            check(column in r.stderr, f"{table} without {column}: stderr names it ({r.stderr!r})")
            try:
                plot.verdicts(bad)
                check(False, f"verdicts() raises DataError without {column}")
            except st.DataError as e:
                check(column in str(e), f"DataError names {column}")

        # A missing CSV.
        gone = os.path.join(tmp, "gone")
        shutil.copytree(FIXTURE, gone)
        os.remove(os.path.join(gone, "parallel_speedup.csv"))
        r = run(gone)
        check(r.returncode == 2 and "parallel_speedup.csv" in r.stderr,
              f"missing main CSV: exit 2 naming it ({r.stderr!r})")
    if failures:
        print(f"test_parallel_speedup: {len(failures)} failure(s)", file=sys.stderr)
        return 1
    print("test_parallel_speedup: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
