#!/usr/bin/python3
"""plots/plot_position_extrapolation.py on the committed fixture (tests/plots/fixtures/
position_extrapolation/: CSVs and meta.json of a real tiny run of the binary, every task and
encoding, 3 seeds, with the analysis cells).

Checks: every figure (PNG and PDF) and the similarity-table CSV are written; verdicts() returns
well-formed rows with the verdicts the fixture's numbers imply (the 0.92/0.65/0.12/-0.06 claim
fails, the dot product's independence of p is shown by construction, the tiny models sit at the
floor); the trend rules on edited copies (a falling trend holds, flat at 1 is the ceiling, flat
below 1 fails, a flatter rope holds); the copy and MQAR floors against the C++ constants; a CSV without a
column or a missing CSV makes the script exit 2 naming it, and verdicts() raise DataError; a run
whose encodings decide no claim still gets its figures (exit 0, a note), while verdicts() raise.
"""
import csv
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import (check, check_figures, check_verdict_rows, drop_column,  # noqa: E402
                               finish, fixture_dir, fresh, import_plots_module, plot_script,
                               rewrite_csv, run_script)

SCRIPT = plot_script("position_extrapolation")
FIXTURE = fixture_dir("position_extrapolation")
plot = import_plots_module("plot_position_extrapolation")
st = import_plots_module("seqlab_style")

NAME = "position_extrapolation"


def main():
    with tempfile.TemporaryDirectory() as tmp:
        res = fresh(FIXTURE, tmp, NAME)
        r = run_script(SCRIPT, res)
        check(r.returncode == 0, f"plot script exit {r.returncode}: {r.stderr}")
        figs = os.path.join(res, "figures")
        check_figures(res, [f"{NAME}_{stem}" for stem in
                            ("copy", "mqar", "char_lm", "similarity", "rope_decay", "resolution")],
                      "missing figure {path}")
        table = os.path.join(figs, f"{NAME}_similarity_table.csv")
        check(os.path.isfile(table), "missing similarity table CSV")
        if os.path.isfile(table):
            with open(table, newline="") as f:
                rows = list(csv.DictReader(f))
            check(len(rows) == 16, f"similarity table has {len(rows)} rows, expected 4 d_model x 4 k")
            r512 = {int(x["distance"]): x for x in rows if x["d_model"] == "512"}
            check(abs(float(r512[1]["cosine"]) - 0.9731) < 1e-3, "cosine at d 512, k 1 is not 0.973")
            check(float(r512[1000]["claimed_cosine"]) == -0.06, "claimed cosine at k 1000 is not -0.06")

        rows = plot.verdicts(res)
        check(len(rows) >= 4 + 3 * 3, f"verdicts() returned {len(rows)} rows")
        check_verdict_rows(rows)
        by_claim = {v["claim"]: v for v in rows}
        sim = [v for c, v in by_claim.items() if "0.92 / 0.65 / 0.12 / -0.06" in c]
        check(len(sim) == 1 and sim[0]["verdict"] == "fails", "similarity claim not decided 'fails'")
        check(len(sim) == 1 and "0.973 / 0.679 / 0.437 / 0.176" in sim[0]["measured"],
              "similarity verdict does not show the measured cosines")
        dot = [v for c, v in by_claim.items() if "not on the position p" in c]
        check(len(dot) == 1 and dot[0]["verdict"] == "by construction", "dot-product-vs-p claim not 'by construction'")
        decay = [v for c, v in by_claim.items() if "RoPE scores decay" in c]
        check(len(decay) == 1 and decay[0]["verdict"] == "depends on how q and k correlate",
              f"RoPE decay verdict: {decay[0]['verdict'] if decay else None}")
        for task in ("copy", "mqar", "char_lm"):
            trained = [v for c, v in by_claim.items() if c.endswith(f"({task})")]
            check(len(trained) == 3, f"{task}: {len(trained)} trained-model verdicts, expected 3")
            # 6 updates of a width-8 model learn nothing: the rule must refuse to decide (floor).
            check(all(v["verdict"] == "inconclusive: floor" for v in trained),
                  f"{task}: tiny models decided ({[v['verdict'] for v in trained]})")

        # The trend rule on edited copies of the copy task's sinusoidal and rope rows (all scored
        # positions): the fixture's floor (most frequent of n = 3, 7, 11 symbols over 4) is 0.56 at 1x.
        ed = fresh(FIXTURE, tmp, "edited")
        eval_csv = plot.path_of(ed, "eval")

        def set_acc(enc, by_ratio):
            def fn(header, body):
                i = {c: header.index(c) for c in ("task", "positional_encoding", "variant", "bucket",
                                                  "eval_ratio", "seed", "accuracy")}
                for b in body:
                    if (b[i["task"]] == "copy" and b[i["positional_encoding"]] == enc
                            and b[i["variant"]] == "zero_shot" and b[i["bucket"]] == "all"):
                        b[i["accuracy"]] = str(by_ratio[int(b[i["eval_ratio"]])] - 0.01 * int(b[i["seed"]]))
                return header, body
            return fn

        def verdict(prefix):
            return next(v for v in plot.verdicts(ed) if v["claim"].startswith(prefix) and
                        v["claim"].endswith("(copy)"))
        rewrite_csv(eval_csv, set_acc("sinusoidal", {1: 1.0, 2: 0.75, 3: 0.65}))
        got = verdict("Sinusoidal encodings fail")
        check(got["verdict"] == "holds" and "slope" in got["effect"], f"a falling trend holds: {got['verdict']}")
        rewrite_csv(eval_csv, set_acc("sinusoidal", {1: 1.0, 2: 1.0, 3: 0.995}))
        check(verdict("Sinusoidal encodings fail")["verdict"] == "inconclusive: ceiling", "flat at 1: ceiling")
        rewrite_csv(eval_csv, set_acc("sinusoidal", {1: 0.9, 2: 0.9, 3: 0.9}))
        check(verdict("Sinusoidal encodings fail")["verdict"] == "fails", "flat below 1: fails (no degradation)")
        # rope keeps 0.9 where sinusoidal falls: rope degrades less.
        rewrite_csv(eval_csv, set_acc("sinusoidal", {1: 1.0, 2: 0.75, 3: 0.65}))
        rewrite_csv(eval_csv, set_acc("rope", {1: 1.0, 2: 0.95, 3: 0.9}))
        check(verdict("Rotary (RoPE) degrades less")["verdict"] == "holds", "rope flatter: holds")

        # The floors, against the constants of tests/unit/test_tasks_mqar.cpp: copy at an evaluation
        # length with n = 10 symbols over 8; MQAR's key-agnostic predictor at 4 pairs over 16 values.
        fake = {"meta": {"config": {"copy_alphabet": 8, "mqar_n_pairs": 4, "mqar_n_values": 16}},
                "eval": [{"task": "copy", "L_train": "21", "chance_accuracy": "0.125", "_path": "x"},
                         {"task": "mqar", "L_train": "16", "chance_accuracy": "0.0625", "_path": "x"}]}
        check(abs(plot.floor_at(fake, "copy", 1) - 202656935 / 67108864 / 10) < 1e-12, "copy floor, n = 10")
        check(abs(plot.floor_at(fake, "mqar", 3) - 1381 / 4096) < 1e-14, "MQAR key-agnostic floor")

        # A missing column: exit 2 naming it, verdicts() raises DataError.
        for table_name, column in (("eval", "accuracy"), ("similarity", "cosine"), ("main", "variant"),
                                   ("rope_decay", "roformer_bound")):
            bad = fresh(FIXTURE, tmp, f"bad_{table_name}")
            drop_column(plot.path_of(bad, table_name), column)
            r = run_script(SCRIPT, bad)
            check(r.returncode == 2, f"{table_name} without {column}: exit {r.returncode}")
            check(column in r.stderr, f"{table_name} without {column}: stderr {r.stderr!r}")
            try:
                plot.verdicts(bad)
                check(False, f"verdicts() accepted {table_name} without {column}")
            except st.DataError as e:
                check(column in str(e), f"DataError does not name {column}: {e}")
        # A run that decides no claim (copy only, rope and learned, no sinusoidal, no analysis
        # cells: like a user's own encoding run against rope, lib/README.md "Add a positional encoding"): the
        # figures are written and the script exits 0 with a note; verdicts() still raises (a
        # DataError, so the report refuses such a directory).
        sub = fresh(FIXTURE, tmp, "no_claims")
        for f in os.listdir(sub):
            if not f.endswith(".csv"):
                continue
            path = os.path.join(sub, f)
            with open(path, newline="") as fh:
                rows = list(csv.reader(fh))
            head = rows[0]
            analysis = not {"variant", "seed"} <= set(head)
            keep = [head] + ([] if analysis else
                             [r for r in rows[1:] if r[head.index("task")] == "copy"
                              and r[head.index("positional_encoding")] in ("rope", "learned")])
            with open(path, "w", newline="") as fh:
                csv.writer(fh, lineterminator="\n").writerows(keep)
        r = run_script(SCRIPT, sub)
        check(r.returncode == 0, f"no-claim run: exit {r.returncode}, {r.stderr!r}")
        check("no rows to decide any claim" in r.stderr, f"no-claim run: no note on stderr: {r.stderr!r}")
        check(os.path.isfile(os.path.join(sub, "figures", f"{NAME}_copy.png")), "no-claim run: no copy figure")
        check(f"{NAME}_copy.png" in r.stdout, f"no-claim run: the figure is not listed: {r.stdout!r}")
        try:
            plot.verdicts(sub)
            check(False, "verdicts() decided claims without their encodings")
        except st.NoClaimRows:
            pass
        check(issubclass(st.NoClaimRows, st.DataError), "NoClaimRows is not a DataError")
        # A missing file.
        gone = fresh(FIXTURE, tmp, "gone")
        os.remove(plot.path_of(gone, "aliasing"))
        r = run_script(SCRIPT, gone)
        check(r.returncode == 2 and "position_extrapolation_aliasing.csv" in r.stderr,
              f"missing aliasing CSV: exit {r.returncode}, {r.stderr!r}")
    return finish("test_position_extrapolation: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
