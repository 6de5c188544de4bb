#!/usr/bin/python3
"""plots/make_report.py on the committed CSV fixtures (tests/plots/fixtures/<experiment>/).

Every experiment whose plot script defines verdicts() must have a fixture. The test copies the
fixtures into a temporary results tree, runs each plot script on its directory (as run_all.sh
does), then make_report.py, and checks REPORT.md: every claim appears, experiments with results
have computed verdicts (never "not run") of plots/seqlab_verdict.py's kinds, each row with its
test, effect, margin and artifact checks, the per-claim counts by kind ('by construction' apart),
experiments without are "not run", every linked figure exists. Then the failure paths: a malformed meta.json and a CSV without a column make the report
exit 2 naming the file or column, and leave no REPORT.md behind.
"""
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import (FIXTURES, PLOTS, ROW_KEYS, check, finish,  # noqa: E402
                               import_plots_module, run_script)

make_report = import_plots_module("make_report")
sv = import_plots_module("seqlab_verdict")


def with_verdicts():
    names = []
    for _, name, _ in make_report.CLAIMS:
        p = os.path.join(PLOTS, f"plot_{name}.py")
        if os.path.isfile(p) and re.search(r"^def verdicts\(", open(p).read(), re.M):
            names.append(name)
    return names


def build_tree(tmp, names):
    res = os.path.join(tmp, "results")
    os.makedirs(res)
    for name in names:
        src = os.path.join(FIXTURES, name)
        check(os.path.isdir(src), f"fixture directory tests/plots/fixtures/{name} exists")
        if not os.path.isdir(src):
            continue
        dst = os.path.join(res, name)
        shutil.copytree(src, dst)
        r = run_script(os.path.join(PLOTS, f"plot_{name}.py"), dst)
        check(r.returncode == 0, f"plot_{name}.py on its fixture exits 0 (stderr: {r.stderr[-500:]})")
    return res


def main():
    check(set(make_report.ROW_KEYS) == ROW_KEYS and set(ROW_KEYS) == set(sv.Verdict(sv.HOLDS).row("c", "m", "a", "r")),
          "the report, the tests and seqlab_verdict agree on a row's keys")
    names = with_verdicts()
    with tempfile.TemporaryDirectory() as tmp:
        res = build_tree(tmp, names)
        r = run_script(os.path.join(PLOTS, "make_report.py"), res)
        check(r.returncode == 0, f"make_report.py exits 0 (stderr: {r.stderr[-500:]})")
        report_path = os.path.join(res, "REPORT.md")
        check(r.stdout.strip() == os.path.abspath(report_path), "make_report prints the report's path")
        text = open(report_path).read() if os.path.isfile(report_path) else ""
        check(not [f for f in os.listdir(res) if ".tmp." in f], "no temporary file left")
        def section(title):
            m = re.search(r"^## " + re.escape(title) + r"\n(.*?)(?=^## |\Z)", text, re.M | re.S)
            return m.group(1).splitlines() if m else []

        claims_table = [l for l in section("Claims") if l.startswith("|") and not l.startswith("|---")][1:]
        glance = [l for l in section("Verdicts at a glance") if l.startswith("|") and not l.startswith("|---")][1:]
        check(claims_table and glance, "the report has the glance table and the claims table")
        rows = [l for l in claims_table if re.match(r"^\| \d \|", l)]
        for num, name, _ in make_report.CLAIMS:
            mine = [l for l in rows if l.startswith(f"| {num} |")]
            check(len(mine) == 1, f"claim {num} has a first row in the claims table")
            if name in names:
                claim_rows = [l for l in text.splitlines() if l.startswith(f"| {num} |")]
                check(all("not run" not in l for l in claim_rows), f"claim {num} ({name}) is not 'not run'")
                check(f"- Claim {num} ({name}): " in text, f"claim {num} has its verdict counts")
            else:
                check(any("not run" in l for l in mine), f"claim {num} ({name}) without results is 'not run'")
        # The glance table lists the claims table's sub-claims with the same verdicts, in order.
        verdict_of = lambda l: re.findall(r"\*\*([^*]+)\*\*", l)  # noqa: E731
        check([verdict_of(l) for l in glance if verdict_of(l)] == [verdict_of(l) for l in claims_table if verdict_of(l)
                                                                    and "not run" not in verdict_of(l)],
              "the glance table's verdicts are the claims table's, in order")
        table_lines = [l for l in text.splitlines() if l.startswith("| ")]
        verdict_cells = [v for l in table_lines for v in re.findall(r"\*\*([^*]+)\*\*", l)]
        check(verdict_cells and all(v == "not run" or v in sv.KINDS or v.startswith("depends on ")
                                    for v in verdict_cells),
              f"every verdict is one of seqlab_verdict.KINDS, 'depends on …' or 'not run' (got {verdict_cells})")
        # The claims table shows each verdict's test, effect, margin and artifact checks.
        header = next((l for l in section("Claims") if l.startswith("| # |")), "")
        for col in ("test", "effect (95 % interval)", "margin", "artifact checks", "rule"):
            check(f"| {col} |" in header, f"claims table has a '{col}' column")
        check(all(l.count(" | ") >= 10 for l in claims_table if "not run" not in l),
              "every claims row fills the eleven columns")
        check(all(re.search(r"ceiling (yes|no|n\.a\.).*floor .*converged .*controls matched ", l)
                  for l in claims_table if "not run" not in l),
              "every claims row has its artifact checks")
        # Per-claim counts by kind; 'by construction' shown apart, not counted as evidence.
        counts = [l for l in text.splitlines() if l.startswith("- Claim ")]
        check(counts and all(re.search(r": (holds|fails|depends on|inconclusive|no evidence)", l) for l in counts),
              f"counts by verdict kind: {counts}")
        check(any("by construction" in l and "not counted as evidence" in l for l in counts)
              == any("**by construction**" in l for l in claims_table),
              "by construction is listed apart in the counts exactly when a row has it")
        for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
            check(os.path.isfile(os.path.join(res, link)), f"linked figure {link} exists")
            check(os.path.isfile(os.path.join(res, os.path.splitext(link)[0] + ".pdf")),
                  f"PDF beside {link} exists")
        for name in names:
            check(f"| {name} | quick" in text or f"| {name} | tiny" in text or f"| {name} | " in text,
                  f"{name} listed in the runs table")

        # A malformed meta.json: exit 2 naming it, the earlier report left intact.
        if names:
            name = names[0]
            before = open(report_path).read()
            meta = os.path.join(res, name, name + ".meta.json")
            shutil.copy(meta, meta + ".bak")
            open(meta, "w").write("{ not json")
            r = run_script(os.path.join(PLOTS, "make_report.py"), res)
            check(r.returncode == 2, f"malformed meta.json: exit 2 (got {r.returncode})")
            check(name + ".meta.json" in r.stderr, f"malformed meta.json is named (stderr: {r.stderr})")
            check(open(report_path).read() == before, "malformed meta.json leaves the report intact")
            shutil.move(meta + ".bak", meta)

            # A main CSV missing a column the verdicts need: exit 2 naming the column, never a
            # crash. Columns the verdicts do not read may be absent without harm (exit 0), so
            # every column the plot script names is tried and at least one must be required.
            csv_path = os.path.join(res, name, name + ".csv")
            original = open(csv_path).read()
            lines = original.splitlines()
            header = lines[0].split(",")
            script = open(os.path.join(PLOTS, f"plot_{name}.py")).read()
            named = [c for c in header if f'"{c}"' in script]
            required_seen = 0
            for col in named:
                idx = header.index(col)
                with open(csv_path, "w") as f:
                    for l in lines:
                        cells = l.split(",")
                        f.write(",".join(cells[:idx] + cells[idx + 1:]) + "\n")
                r = run_script(os.path.join(PLOTS, "make_report.py"), res)
                check(r.returncode in (0, 2), f"CSV without column {col}: exit 0 or 2, no crash "
                      f"(got {r.returncode}: {r.stderr[-300:]})")
                if r.returncode == 2:
                    required_seen += 1
                    check(col in r.stderr, f"the missing column {col} is named (stderr: {r.stderr})")
            check(required_seen > 0, f"some column of {name}.csv is required by its verdicts")
            open(csv_path, "w").write(original)

        r = run_script(os.path.join(PLOTS, "make_report.py"), os.path.join(tmp, "nowhere"))
        check(r.returncode == 2 and "nowhere" in r.stderr, "a missing results directory: exit 2 naming it")

    return finish(f"make_report: all checks passed ({len(names)} experiment fixture(s): {', '.join(names) or 'none'})")


if __name__ == "__main__":
    sys.exit(main())
