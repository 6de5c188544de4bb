#!/usr/bin/python3
"""plots/plot_long_range_recall.py on its committed fixture (tests/plots/fixtures/long_range_recall:
the merged CSVs and meta.json of a real tiny run of the long_range_recall binary: every task and
model, length 8, 3 seeds, 150 updates of 8-unit models; command line in its meta.json, with the
config file's keys task/model all, length 8, param_budget 0, hidden_size 4 (overridden to 8),
embedding_dim 3, n_heads 2, d_ff_ratio 2, transformer_layers 2, kernel_size 2, mqar_pairs "1 2",
mqar_keys 4, mqar_values 3, probe_symbols 3, probe_fillers 2, distance_bins 3, batch 4).

Checks: the script exits 0 and writes every figure as PNG and PDF; verdicts() returns one
well-formed row per task plus the gradient row, with allowed verdicts, and writes nothing; its
decision rules on edited copies of the fixture (a Transformer at accuracy 1 (adding: MSE 0) and
recurrent models at the baseline: "holds"; a GRU at 1 too: "depends on the recurrent cell"; an LSTM at 1: "fails";
gradients vanishing by 9 decades for RNN/LSTM/GRU and not for the Transformer: "holds"; fewer than
3 seeds: "inconclusive"); a CSV without one of its columns makes the script exit 2 naming the column
and verdicts() raise DataError; a missing CSV likewise. Exit status 0 when every check passes.
"""
import contextlib
import io
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import (check, check_figures, drop_column, finish, fixture_dir,  # noqa: E402
                               fresh, import_plots_module, plot_script, read_rows, run_script,
                               snapshot, write_rows)

SCRIPT = plot_script("long_range_recall")
FIXTURE = fixture_dir("long_range_recall")
plot = import_plots_module("plot_long_range_recall")
st = import_plots_module("seqlab_style")

NAME = "long_range_recall"
FIGURES = [NAME + s for s in ("_distance", "_length", "_grad_norms", "_attention", "_curves")]


def run_in_process(res):
    """plot.main on `res` in this process: (exit status, stderr)."""
    err = io.StringIO()
    code = 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            plot.main([SCRIPT, res])
        except SystemExit as e:
            code = e.code
    return code, err.getvalue()


def table_path(res, suffix):
    return os.path.join(res, NAME + suffix + ".csv")


def edit(path, match, column, value):
    """Sets `column` to value(row) in every row for which match(row) holds (rows as dicts)."""
    rows = read_rows(path)
    h = rows[0]
    for r in rows[1:]:
        d = dict(zip(h, r))
        if match(d):
            r[h.index(column)] = str(value(d) if callable(value) else value)
    write_rows(path, rows)


def verdict_of(res, prefix):
    rows = plot.verdicts(res)
    for r in rows:
        if r["claim"].startswith(prefix):
            return r["verdict"]
    return None


def main():
    with tempfile.TemporaryDirectory() as tmp:
        res = fresh(FIXTURE, tmp, "plain")
        r = run_script(SCRIPT, res)
        check(r.returncode == 0, f"plot script exits 0 on the fixture (stderr: {r.stderr[-800:]})")
        check_figures(res, FIGURES)

        before = snapshot(tmp)
        v = plot.verdicts(res)
        check(snapshot(tmp) == before, "verdicts() writes no file")
        check(isinstance(v, list) and len(v) == 5, f"5 verdict rows: one per task and the gradient row (got {len(v)})")
        for row in v:
            check(set(row) == {"claim", "measured", "anchor", "verdict", "rule"}, f"verdict row keys: {sorted(row)}")
            check(all(isinstance(x, str) and x for x in row.values()), f"verdict fields are non-empty text: {row}")
            check(row["verdict"] in ("holds", "fails", "inconclusive") or row["verdict"].startswith("depends on "),
                  f"allowed verdict: {row['verdict']}")
            check("3 seeds" in row["measured"], f"measured names the seeds: {row['measured'][:120]}")
        check(any("Bai et al. 2018" in row["anchor"] and "3.5e-5" in row["anchor"] for row in v),
              "copy-memory anchor quotes Bai et al.'s Table 1")

        # Decision rules, on the distance probe's rows of the main table.
        probe = "distance probe:"
        res = fresh(FIXTURE, tmp, "rules")
        main_csv = table_path(res, "")
        is_probe = lambda d: d["task"] == "distance_probe"  # noqa: E731
        edit(main_csv, is_probe, "test_accuracy",
             lambda d: 1.0 if d["model"] == "transformer_decoder" else d["baseline_accuracy"])
        check(verdict_of(res, probe) == "holds",
              f"Transformer at 1, recurrent at the baseline: holds (got {verdict_of(res, probe)})")
        edit(main_csv, lambda d: is_probe(d) and d["model"] == "gru", "test_accuracy", 1.0)
        got = verdict_of(res, probe)
        check(got is not None and got.startswith("depends on the recurrent cell") and "GRU" in got,
              f"GRU at 1 too: depends on the recurrent cell (got {got})")
        edit(main_csv, lambda d: is_probe(d) and d["model"] == "lstm", "test_accuracy", 1.0)
        check(verdict_of(res, probe) == "fails", f"LSTM at 1: fails (got {verdict_of(res, probe)})")
        # The adding problem decides on MSE: a Transformer at 0 against recurrent models at the baseline.
        edit(main_csv, lambda d: d["task"] == "adding", "test_loss",
             lambda d: 0.0 if d["model"] == "transformer_decoder" else d["baseline_loss"])
        got = verdict_of(res, "adding problem")
        check(got == "holds", f"adding: Transformer MSE 0, recurrent at the baseline: holds (got {got})")

        # The gradient rule, on the probe's grad table at initialisation.
        grad = table_path(res, "_grad_norms")
        far = lambda d: d["task"] == "distance_probe" and d["phase"] == "init" and d["steps_before_end"] == "7"  # noqa: E731
        edit(grad, far, "relative_grad_norm",
             lambda d: 0.1 if d["model"] in ("transformer_decoder", "tcn") else 1e-10)
        gv = lambda: [x for x in plot.verdicts(res) if x["claim"].startswith("vanishing")][0]["verdict"]  # noqa: E731
        check(gv() == "holds", f"gradients vanish for recurrent models only: holds (got {gv()})")
        edit(grad, lambda d: far(d) and d["model"] == "lstm", "relative_grad_norm", 0.05)
        check(gv() == "fails", f"LSTM gradient within 10x of the Transformer's: fails (got {gv()})")

        # Fewer than 3 seeds: inconclusive everywhere.
        res = fresh(FIXTURE, tmp, "two_seeds")
        for suffix in ("", "_steps", "_distance", "_grad_norms", "_attention"):
            p = table_path(res, suffix)
            rows = read_rows(p)
            i = rows[0].index("seed")
            write_rows(p, [rows[0]] + [r for r in rows[1:] if r[i] != "2"])
        check(all(x["verdict"] == "inconclusive" for x in plot.verdicts(res)), "2 seeds: every verdict inconclusive")

        # A missing column: exit 2 naming it (the first through a real process, the others through
        # main() in this process: same code path, without a second interpreter start), and
        # verdicts() raises DataError naming it.
        cases = [("", "test_accuracy"), ("", "baseline_loss"), ("_distance", "n_scored"),
                 ("_grad_norms", "relative_grad_norm"), ("_steps", "train_loss"),
                 ("_attention", "attention_prob")]
        for k, (suffix, column) in enumerate(cases):
            res = fresh(FIXTURE, tmp, f"drop{suffix}_{column}")
            drop_column(table_path(res, suffix), column)
            if k == 0:
                r = run_script(SCRIPT, res)
                code, err = r.returncode, r.stderr
            else:
                code, err = run_in_process(res)
            check(code == 2 and column in err,
                  f"without {NAME}{suffix}.csv:{column}: exit 2 naming it (got {code}: {err[-300:]})")
            try:
                plot.verdicts(res)
                check(False, f"verdicts() without {column} raises DataError")
            except st.DataError as e:
                check(column in str(e), f"DataError names {column}: {e}")
        # A missing CSV.
        res = fresh(FIXTURE, tmp, "missing")
        os.remove(table_path(res, "_grad_norms"))
        code, err = run_in_process(res)
        check(code == 2 and "long_range_recall_grad_norms.csv" in err,
              f"missing grad_norms CSV: exit 2 naming it (got {code}: {err[-300:]})")
        try:
            plot.verdicts(res)
            check(False, "verdicts() without the grad_norms CSV raises DataError")
        except st.DataError:
            pass

    return finish("all checks passed")


if __name__ == "__main__":
    sys.exit(main())
