"""What the tests of plots/ (tests/plots/test_*.py) share: where the sources and the committed
fixtures are, importing a script of plots/ as a module, running one as the user would, copying a
fixture to edit it, editing its CSVs, and the check()/failures bookkeeping (every check runs, each
failure is printed, the test exits non-zero at the end when any failed).

Not a test itself (ctest registers tests/plots/test_*.py only). Each test imports it after putting
its own directory first on sys.path, so the import works from any working directory:

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from plot_test_support import ...  # noqa: E402

The source tree is $SEQLAB_SOURCE_DIR (ctest sets it) or else the checkout this file lies in.
"""
import csv
import importlib
import io
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("SEQLAB_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PLOTS = os.path.join(SRC, "plots")
FIXTURES = os.path.join(SRC, "tests", "plots", "fixtures")

# The failed checks' messages, in order; tests read it at the end (never rebind it).
failures = []


def check(cond, what):
    """Records `what` in `failures` and prints "FAIL: <what>" to stderr when `cond` is false.

    Returns `cond` unchanged (so a test can guard dependent checks); raises nothing.
    """
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def plot_script(name):
    """The path of plots/plot_<name>.py (whether or not it exists)."""
    return os.path.join(PLOTS, f"plot_{name}.py")


def fixture_dir(name):
    """The path of the committed fixture tests/plots/fixtures/<name>/ (whether or not it exists)."""
    return os.path.join(FIXTURES, name)


def import_plots_module(module):
    """Imports plots/<module>.py (e.g. "plot_norm_stability", "make_report", "seqlab_style") and
    returns the module; plots/ is put first on sys.path. Raises what the import raises
    (ImportError when there is no such file, any error of the module's top level)."""
    if PLOTS not in sys.path:
        sys.path.insert(0, PLOTS)
    return importlib.import_module(module)


def run_script(script, *args):
    """Runs `script` with this interpreter and the string arguments `args`, from the temporary
    directory (so that nothing depends on the working directory), to completion.

    Returns the subprocess.CompletedProcess with .returncode and the decoded .stdout and .stderr.
    Raises OSError only when the interpreter itself cannot be started; the script's own failure is
    in the return code, never an exception."""
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                          cwd=tempfile.gettempdir())


def fresh(fixture, tmp, name):
    """Copies the directory `fixture` (e.g. fixture_dir("norm_stability")) to tmp/<name> and
    returns that path: a results directory a test may edit. Raises FileExistsError when tmp/<name>
    exists, and what shutil.copytree raises when `fixture` is missing."""
    dst = os.path.join(tmp, name)
    shutil.copytree(fixture, dst)
    return dst


def read_rows(path):
    """The CSV file `path` as a list of rows (lists of strings), the header first."""
    with open(path, newline="") as f:
        return list(csv.reader(f))


def write_rows(path, rows):
    """Writes the rows (lists of values) to `path` as CSV, replacing it, lines ended by "\\n"."""
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


def rewrite_csv(path, fn):
    """Rewrites the CSV file `path` with fn(header, rows) -> (header, rows): fn gets the header
    and the data rows (lists of strings, which it may edit in place) and returns the new ones.
    Raises what fn raises, before the file is touched."""
    rows = read_rows(path)
    header, body = fn(rows[0], rows[1:])
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(header)
    w.writerows(body)
    with open(path, "w", newline="") as f:
        f.write(out.getvalue())


def drop_column(path, column):
    """Removes the column named `column` from the CSV file `path`, in place. Raises ValueError
    when the header has no such column (the file is then left unchanged)."""
    rows = read_rows(path)
    i = rows[0].index(column)
    write_rows(path, [r[:i] + r[i + 1:] for r in rows])


def check_figures(res, stems, message="{stem}.{ext} written"):
    """Checks that res/figures/<stem>.png and .pdf exist with more than 1000 bytes for every stem.
    A failure is recorded as message.format(stem=..., ext=..., path=...). Returns nothing."""
    for stem in stems:
        for ext in ("png", "pdf"):
            p = os.path.join(res, "figures", f"{stem}.{ext}")
            check(os.path.isfile(p) and os.path.getsize(p) > 1000,
                  message.format(stem=stem, ext=ext, path=p))


def snapshot(root):
    """Every file below `root` with its modification time, sorted: equal before and after a call
    when the call wrote no file."""
    return sorted((os.path.join(d, f), os.path.getmtime(os.path.join(d, f)))
                  for d, _, fs in os.walk(root) for f in fs)


def finish(passed, failed="{n} check(s) failed"):
    """The end of a test's main(): with no failures prints `passed` to stdout and returns 0, else
    prints failed.format(n=<number of failures>) to stderr and returns 1. A test ends with
    `return finish(...)` and exits with `sys.exit(main())`."""
    if failures:
        print(failed.format(n=len(failures)), file=sys.stderr)
        return 1
    print(passed)
    return 0


# The keys of a verdicts() row (plots/seqlab_verdict.py, Verdict.row) and the values of its checks.
ROW_KEYS = {"claim", "measured", "anchor", "verdict", "rule", "kind", "reason", "test", "effect", "margin",
            "checks", "part_reasons"}
CHECK_NAMES = {"ceiling", "floor", "converged", "controls"}


def check_verdict_rows(rows, allowed=None):
    """Checks the rows of a plot script's verdicts(): each has exactly the keys of ROW_KEYS; its
    kind is one of plots/seqlab_verdict.py's KINDS (and, when `allowed` is given, starts with one
    of `allowed`), its verdict text is the kind ('depends on …' with its condition); claim,
    measured, anchor and rule are sentences (text longer than 10 characters); test, effect, margin
    and reason are text; checks has ceiling, floor, converged and controls, each 'yes', 'no',
    'n.a.' or 'unclear', possibly naming the parts it applies to ('yes (GRU)'). Returns nothing."""
    sv = import_plots_module("seqlab_verdict")
    for row in rows:
        check(set(row) == ROW_KEYS, f"verdict row keys: {sorted(row)}")
        kind = row.get("kind")
        check(kind in sv.KINDS, f"verdict kind allowed: {kind!r}")
        parts = row.get("part_reasons", [])
        names = {"ceiling", "floor", "not converged", "see the row"} | {n for _, n in sv.INCONCLUSIVE_REASONS}
        check(not parts or (kind == sv.INCONCLUSIVE and len(set(parts)) == len(parts) and set(parts) <= names),
              f"part_reasons only on a plain inconclusive, distinct names of kinds and reasons: {parts}")
        if allowed is not None:
            check(any(str(kind).startswith(v) for v in allowed), f"verdict kind expected here: {kind!r}")
        verdict = row.get("verdict", "")
        check(verdict == kind or (kind == sv.DEPENDS and verdict.startswith("depends on ") and len(verdict) > 11),
              f"verdict text matches its kind: {verdict!r} ({kind!r})")
        for k in ("claim", "measured", "anchor", "rule"):
            check(isinstance(row.get(k), str) and len(row[k]) > 10, f"{k} is a sentence: {row.get(k)!r}")
        for k in ("test", "effect", "margin", "reason"):
            check(isinstance(row.get(k), str), f"{k} is text: {row.get(k)!r}")
        checks = row.get("checks", {})
        check(isinstance(checks, dict) and set(checks) == CHECK_NAMES, f"checks: {checks!r}")
        for c, v in (checks.items() if isinstance(checks, dict) else []):
            check(str(v).split(" (")[0] in ("yes", "no", "n.a.", "unclear"), f"check {c} value: {v!r}")
