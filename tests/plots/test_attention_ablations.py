#!/usr/bin/python3
"""plots/plot_attention_ablations.py on the committed fixture (tests/plots/fixtures/
attention_ablations/: CSVs and meta.json of a real tiny run of the binary — d_model 8, 20 updates,
3 seeds — with arms of all three sub-designs: Q/K sharing on prev_token and majority, n_heads 1 vs
2 on prev_token, the three architectures on reverse and two on lm).

Checks: every figure (PNG and PDF) is written; verdicts() returns well-formed rows, one per
sub-claim the arms allow, with the verdicts the fixture's numbers imply (the measured symmetry
claim holds; the rest follow from the decision rules, recomputed here); a CSV without a column or
a missing CSV makes the script exit 2 naming it, and verdicts() raise DataError; the script runs
from any directory.
"""
import csv
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import (check, check_figures, drop_column, finish, fixture_dir,  # noqa: E402
                               fresh, import_plots_module, plot_script, read_rows, run_script,
                               write_rows)

SCRIPT = plot_script("attention_ablations")
FIXTURE = fixture_dir("attention_ablations")
plot = import_plots_module("plot_attention_ablations")
st = import_plots_module("seqlab_style")

NAME = "attention_ablations"
VERDICTS = ("holds", "fails", "inconclusive")


def fixture_rows(res):
    with open(os.path.join(res, NAME + ".csv"), newline="") as f:
        return list(csv.DictReader(f))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        res = fresh(FIXTURE, tmp, NAME)
        r = run_script(SCRIPT, res)
        check(r.returncode == 0, f"plot script exit {r.returncode}: {r.stderr}")
        check_figures(res, [f"{NAME}_{stem}" for stem in ("qk", "qk_curves", "heads", "arch")],
                      "missing figure {path}")

        rows = plot.verdicts(res)
        for v in rows:
            check(set(v) >= {"claim", "measured", "anchor", "verdict", "rule"}, f"row lacks keys: {v}")
            check(v["verdict"] in VERDICTS or v["verdict"].startswith("depends on"),
                  f"bad verdict {v['verdict']!r}")
            check(all(isinstance(v[k], str) and v[k] for k in ("claim", "measured", "anchor", "rule")),
                  f"empty field: {v}")
        claims = [v["claim"] for v in rows]
        # One symmetry row, Q/K rows for prev_token (asymmetric) and majority (control), one heads
        # row (prev_token, 2 vs 1), architecture rows for reverse and lm.
        check(len(rows) == 6, f"verdicts() returned {len(rows)} rows: {claims}")
        sym = [v for v in rows if "symmetric" in v["claim"] and "logits" in v["claim"]]
        check(len(sym) == 1 and sym[0]["verdict"] == "holds", f"symmetry row: {sym}")
        data = fixture_rows(res)
        shared = [float(x[c]) for x in data if x["qk"] == "shared"
                  for c in ("logit_asymmetry", "logit_asymmetry_init")]
        check(shared and max(shared) < 1e-5, "fixture's shared-QK logits are not symmetric")
        check(any("previous token" in c and "Separate W_Q, W_K beat" in c for c in claims), "no prev_token Q/K row")
        check(any("majority" in c and "not worse" in c for c in claims), "no majority control row")
        check(any("Several heads beat one" in c and "2 heads vs 1" in c for c in claims), "no heads row")
        check(any(c.startswith("encoder-decoder suits reverse") for c in claims), "no reverse arch row")
        check(any(c.startswith("decoder-only suits Markov LM") for c in claims), "no lm arch row")

        # The decision rule, recomputed for the prev_token Q/K row from the CSV.
        acc = {}
        for x in data:
            if x["task"] == "prev_token" and x["n_heads"] == "2":
                acc.setdefault(x["qk"], {})[x["seed"]] = float(x["test_accuracy"])
        d = [acc["separate"][s] - acc["shared"][s] for s in sorted(acc["separate"])]
        m, h = st.mean_ci95(d)
        row = next(v for v in rows if "previous token" in v["claim"] and "Separate" in v["claim"])
        if m - h > plot.ACC_MARGIN:
            check(row["verdict"] == "holds", f"prev_token row should hold: {row}")
        elif m + h < -plot.ACC_MARGIN:
            check(row["verdict"] == "fails", f"prev_token row should fail: {row}")
        elif not (m - h >= -plot.ACC_MARGIN and m + h <= plot.ACC_MARGIN):
            check(row["verdict"] == "inconclusive", f"prev_token row should be inconclusive: {row}")
        check(f"{m:+.3f} ± {h:.3f}" in row["measured"], f"paired difference not in {row['measured']!r}")

        # Unit checks of the comparison helper.
        check(plot.compare([1, 1, 1], [0, 0, 0], 0.02)[0] == "better", "compare: better")
        check(plot.compare([0, 0, 0], [1, 1, 1], 0.02)[0] == "worse", "compare: worse")
        check(plot.compare([0.5, 0.5, 0.5], [0.5, 0.5, 0.5], 0.02)[0] == "equivalent", "compare: equivalent")
        check(plot.compare([1, 0, 0.5], [0, 1, 0.5], 0.02)[0] == "unclear", "compare: unclear")
        check(plot.compare([1, 1], [0, 0], 0.02)[0] == "unclear", "compare: too few seeds")

        # A column removed: exit 2 naming it; verdicts() raises DataError.
        bad = fresh(FIXTURE, tmp, "bad")
        drop_column(os.path.join(bad, NAME + ".csv"), "logit_asymmetry")
        r = run_script(SCRIPT, bad)
        check(r.returncode == 2, f"missing column: exit {r.returncode}")
        check("logit_asymmetry" in r.stderr, f"missing column not named: {r.stderr!r}")
        try:
            plot.verdicts(bad)
            check(False, "verdicts() accepted a CSV without logit_asymmetry")
        except st.DataError as e:
            check("logit_asymmetry" in str(e), f"DataError does not name the column: {e}")
        # A missing curve CSV: exit 2 naming the file.
        bad2 = fresh(FIXTURE, tmp, "bad2")
        os.remove(os.path.join(bad2, NAME + "_curve.csv"))
        r = run_script(SCRIPT, bad2)
        check(r.returncode == 2, f"missing curve CSV: exit {r.returncode}")
        check(NAME + "_curve.csv" in r.stderr, f"missing file not named: {r.stderr!r}")
        # A non-numeric value: exit 2 naming the column.
        bad3 = fresh(FIXTURE, tmp, "bad3")
        path = os.path.join(bad3, NAME + ".csv")
        table = read_rows(path)
        table[1][table[0].index("test_accuracy")] = "oops"
        write_rows(path, table)
        r = run_script(SCRIPT, bad3)
        check(r.returncode == 2 and "test_accuracy" in r.stderr, f"non-numeric value: {r.returncode} {r.stderr!r}")
    return finish("ok")


if __name__ == "__main__":
    sys.exit(main())
