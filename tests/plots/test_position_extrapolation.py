#!/usr/bin/python3
"""plots/plot_position_extrapolation.py on the committed fixture (tests/plots/fixtures/
position_extrapolation/: CSVs and meta.json of a real tiny run of the binary, every task and
encoding, 3 seeds, with the analysis cells).

Checks: every figure (PNG and PDF) and the similarity-table CSV are written; verdicts() returns
well-formed rows with the verdicts the fixture's numbers imply (the 0.92/0.65/0.12/-0.06 claim
fails, the dot product does not depend on p, the tiny models are inconclusive); a CSV without a
column or a missing CSV makes the script exit 2 naming it, and verdicts() raise DataError.
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
SCRIPT = os.path.join(PLOTS, "plot_position_extrapolation.py")
FIXTURE = os.path.join(SRC, "tests", "plots", "fixtures", "position_extrapolation")
sys.path.insert(0, PLOTS)
import plot_position_extrapolation as plot  # noqa: E402
import seqlab_style as st  # noqa: E402

NAME = "position_extrapolation"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


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
        res = os.path.join(tmp, NAME)
        shutil.copytree(FIXTURE, res)
        r = run(res)
        check(r.returncode == 0, f"plot script exit {r.returncode}: {r.stderr}")
        figs = os.path.join(res, "figures")
        for stem in ("copy", "mqar", "char_lm", "similarity", "rope_decay", "resolution"):
            for ext in ("png", "pdf"):
                p = os.path.join(figs, f"{NAME}_{stem}.{ext}")
                check(os.path.isfile(p) and os.path.getsize(p) > 1000, f"missing figure {p}")
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
        for v in rows:
            check(set(v) >= {"claim", "measured", "anchor", "verdict", "rule"}, f"row lacks keys: {v}")
            check(v["verdict"] in ("holds", "fails", "inconclusive") or v["verdict"].startswith("depends on"),
                  f"bad verdict {v['verdict']!r}")
            check(all(isinstance(v[k], str) and v[k] for k in ("claim", "measured", "rule")), f"empty field: {v}")
        by_claim = {v["claim"]: v for v in rows}
        sim = [v for c, v in by_claim.items() if "0.92 / 0.65 / 0.12 / -0.06" in c]
        check(len(sim) == 1 and sim[0]["verdict"] == "fails", "similarity claim not decided 'fails'")
        check(len(sim) == 1 and "0.973 / 0.679 / 0.437 / 0.176" in sim[0]["measured"],
              "similarity verdict does not show the measured cosines")
        dot = [v for c, v in by_claim.items() if "not on the position p" in c]
        check(len(dot) == 1 and dot[0]["verdict"] == "holds", "dot-product-vs-p claim not 'holds'")
        decay = [v for c, v in by_claim.items() if "RoPE scores decay" in c]
        check(len(decay) == 1 and decay[0]["verdict"] == "depends on how q and k correlate",
              f"RoPE decay verdict: {decay[0]['verdict'] if decay else None}")
        for task in ("copy", "mqar", "char_lm"):
            trained = [v for c, v in by_claim.items() if c.endswith(f"({task})")]
            check(len(trained) == 3, f"{task}: {len(trained)} trained-model verdicts, expected 3")
            # 6 updates of a width-8 model learn nothing: the rule must refuse to decide.
            check(all(v["verdict"] == "inconclusive" for v in trained), f"{task}: tiny models decided")

        # A missing column: exit 2 naming it, verdicts() raises DataError.
        for table_name, column in (("eval", "accuracy"), ("similarity", "cosine"), ("main", "variant"),
                                   ("rope_decay", "roformer_bound")):
            bad = os.path.join(tmp, f"bad_{table_name}")
            shutil.copytree(FIXTURE, bad)
            drop_column(plot.path_of(bad, table_name), column)
            r = run(bad)
            check(r.returncode == 2, f"{table_name} without {column}: exit {r.returncode}")
            check(column in r.stderr, f"{table_name} without {column}: stderr {r.stderr!r}")
            try:
                plot.verdicts(bad)
                check(False, f"verdicts() accepted {table_name} without {column}")
            except st.DataError as e:
                check(column in str(e), f"DataError does not name {column}: {e}")
        # A missing file.
        gone = os.path.join(tmp, "gone")
        shutil.copytree(FIXTURE, gone)
        os.remove(plot.path_of(gone, "aliasing"))
        r = run(gone)
        check(r.returncode == 2 and "position_extrapolation_aliasing.csv" in r.stderr,
              f"missing aliasing CSV: exit {r.returncode}, {r.stderr!r}")
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("test_position_extrapolation: all checks passed")


if __name__ == "__main__":
    main()
