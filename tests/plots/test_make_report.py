#!/usr/bin/python3
"""plots/make_report.py on the committed CSV fixtures (tests/plots/fixtures/<experiment>/).

Every experiment whose plot script defines verdicts() must have a fixture. The test copies the
fixtures into a temporary results tree, runs each plot script on its directory (as run_all.sh
does), then make_report.py, and checks REPORT.md: every claim appears, experiments with results
have computed verdicts (never "not run") of plots/seqlab_verdict.py's kinds, each row with its
test, effect, margin and artifact checks, the per-claim counts by kind ('by construction' apart),
experiments without are "not run", every linked figure exists. Then the failure paths: a malformed meta.json and a CSV without a column make the report
exit 2 naming the file or column, and leave no REPORT.md behind.

The comparison with a quick run (--quick QUICK_DIR), on two copies of the fixtures: a "quick" one
(meta scale quick, the long_range_recall width study removed, one end_utc made the latest) and a
"standard" one (meta scale standard, parallel_speedup's recurrent step counts broken so that its
by-construction row fails): the side-by-side table matches sub-claims by text, shows both
verdicts, "—" for a sub-claim of one run only, and the anchor; the section "What this suite cannot
decide here" has every plot module's beyond_this_machine() rows with a submit.sh command whose
options submit.sh has, and "(none stated)" for a module without the function; the output is the
same bytes when rendered again after every file's mtime changed, and its Generated line names
the latest end_utc of both runs; --quick naming a missing directory exits 2 and writes nothing;
the default report keeps its sections and headers, and the comparison report only adds to it.
"""
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import (FIXTURES, PLOTS, ROW_KEYS, SRC, check, finish,  # noqa: E402
                               import_plots_module, read_rows, rewrite_csv, run_script)

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


def sections_of(text):
    """{title: body} of the report's '## ' sections, and their titles in order."""
    parts = re.split(r"^## (.+)\n", text, flags=re.M)
    titles = parts[1::2]
    return dict(zip(titles, parts[2::2])), titles


def table(body, header_start="| # |"):
    """The data lines of the first table in `body` whose header starts with header_start, the
    header first."""
    lines = body.splitlines()
    i = next((k for k, l in enumerate(lines) if l.startswith(header_start)), None)
    if i is None:
        return []
    out = [lines[i]]
    for l in lines[i + 2:]:
        if not l.startswith("|"):
            break
        out.append(l)
    return out


def cells(line):
    """The cells of a Markdown table line (escaped pipes kept inside their cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def check_default_layout(text):
    """The single-run report keeps the sections and headers it had before --quick existed, and
    its Generated line has no clock time."""
    _, titles = sections_of(text)
    check(titles == ["Machine and build", "Verdicts at a glance", "Claims", "Figures"],
          f"the default report's sections are unchanged: {titles}")
    check("\n| # | sub-claim | verdict |\n|---|---|---|\n" in text, "the default glance table keeps its three columns")
    check("\n| experiment | scale | seeds | cells | git commit | run (UTC) |\n" in text, "the runs table is unchanged")
    check(re.search(r"^Generated from runs ending \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ by `plots/make_report.py` from the "
                    r"CSVs and `meta.json` files in this directory\. ", text, re.M) is not None,
          "the default Generated line names the runs' end, not the clock")


def check_paired_rows():
    """Sub-claims are matched by claim text, in this run's order, repeated texts one to one, then
    the quick run's unmatched rows."""
    row = lambda claim, verdict: dict(claim=claim, verdict=verdict)  # noqa: E731
    std = [row("a", "holds"), row("b", "fails"), row("a", "fails"), row("only std", "holds")]
    quick = [row("b", "inconclusive"), row("only quick", "holds"), row("a", "inconclusive: floor"),
             row("a", "inconclusive")]
    pairs = make_report.paired_rows(std, quick)
    got = [(s and (s["claim"], s["verdict"]), q and (q["claim"], q["verdict"])) for s, q in pairs]
    check(got == [(("a", "holds"), ("a", "inconclusive: floor")), (("b", "fails"), ("b", "inconclusive")),
                  (("a", "fails"), ("a", "inconclusive")), (("only std", "holds"), None),
                  (None, ("only quick", "holds"))], f"paired_rows matches by claim text: {got}")
    check(make_report.paired_rows([], quick) == [(None, q) for q in quick], "a run without rows: the quick rows alone")

    # side_by_side(): the anchor of this run's row, else the quick run's; an experiment run in
    # neither is 'not run'; one run in one of them only has '—' in the other column.
    row = lambda claim, verdict, anchor: dict(claim=claim, verdict=verdict, anchor=anchor)  # noqa: E731
    meta = {"config": {"scale": "x"}}
    run = [(1, "e1", "", meta, [row("a", "holds", "std anchor"), row("b", "fails", "b anchor")], []),
           (2, "e2", "", None, [], []), (3, "e3", "", None, [], [])]
    quick_run = [(1, "e1", "", meta, [row("a", "fails", "quick anchor"), row("c", "holds", "c anchor")], []),
                 (2, "e2", "", meta, [row("d", "holds", "d anchor")], []), (3, "e3", "", None, [], [])]
    got = make_report.side_by_side(run, quick_run, "standard", "quick")
    check(got == ["| # | sub-claim | quick verdict | standard verdict | anchor paper's finding |",
                  "|---|---|---|---|---|",
                  "| 1 | a | **fails** | **holds** | std anchor |",
                  "| 1 | b | — | **fails** | b anchor |",
                  "| 1 | c | **holds** | — | c anchor |",
                  "| 2 | d | **holds** | — | d anchor |",
                  "| 3 | `e3` not run | — | — | |"], f"side_by_side rows: {got}")


def check_cannot_decide_units():
    """cannot_decide(): a module's beyond_this_machine() rows, '(none stated)' for a module
    without the function or no module; a row lacking a key is an error naming the module."""
    row = sv.beyond("a sub-claim", "why not", "experiments/slurm/submit.sh x --scale paper", "1 h")
    lines = make_report.cannot_decide([(1, "with", types.SimpleNamespace(beyond_this_machine=lambda: [row, row])),
                                       (2, "without", types.SimpleNamespace()), (3, "absent", None)])
    body = lines[2:]
    check(len(body) == 4 and all(l.startswith("| 1 | a sub-claim | why not | `experiments/slurm/submit.sh x")
                                 for l in body[:2]), f"a module's rows are listed: {body}")
    check(body[2:] == ["| 2 | (none stated) | `plots/plot_without.py` states none | | |",
                       "| 3 | (none stated) | `plots/plot_absent.py` states none | | |"],
          f"a module without beyond_this_machine(): (none stated): {body[2:]}")
    bad = types.SimpleNamespace(beyond_this_machine=lambda: [dict(sub_claim="x", why="y", command="z")])
    try:
        make_report.cannot_decide([(4, "bad", bad)])
        check(False, "a row without its cost is an error")
    except make_report.st.DataError as e:
        check("plot_bad.py" in str(e) and "cost" in str(e), f"the error names the module and the key: {e}")


def copy_fixtures(dst, names, scale, end_utc=None, last_scale=None):
    """The fixtures of `names` copied to dst/<name>/, each meta.json's scale set to `scale` (the
    last name's to `last_scale` if given), and the first name's end_utc to `end_utc` if given.
    Returns dst."""
    for i, name in enumerate(names):
        d = os.path.join(dst, name)
        shutil.copytree(os.path.join(FIXTURES, name), d)
        meta_path = os.path.join(d, name + ".meta.json")
        meta = json.load(open(meta_path))
        meta.setdefault("config", {})["scale"] = last_scale if last_scale and i == len(names) - 1 else scale
        if end_utc and i == 0:
            meta["end_utc"] = end_utc
        json.dump(meta, open(meta_path, "w"), indent=1)
    return dst


def comparison_trees(tmp, names):
    """(quick dir, standard dir, latest end_utc) of two edited copies of the fixtures."""
    latest = "2031-02-03T04:05:06Z"
    quick = copy_fixtures(os.path.join(tmp, "results"), names, "quick", end_utc=latest)
    std = copy_fixtures(os.path.join(tmp, "results", "standard"), names, "standard", last_scale="paper")
    lrr = os.path.join(quick, "long_range_recall")
    if os.path.isdir(lrr):  # the quick run without the width study: its sub-claim is standard's only
        for path in glob.glob(os.path.join(lrr, "*.csv")):
            if "width" in read_rows(path)[0]:
                rewrite_csv(path, lambda h, rows: (h, [r for r in rows if r[h.index("width")] == "0"]))
    ps = os.path.join(std, "parallel_speedup", "parallel_speedup.csv")
    if os.path.isfile(ps):  # standard's recurrent layers counted as one step: 'by construction' fails
        rewrite_csv(ps, lambda h, rows: (h, [r[:h.index("sequential_steps")] + ["1"] +
                                               r[h.index("sequential_steps") + 1:]
                                               if r[h.index("model")] in ("rnn", "lstm", "gru") else r
                                               for r in rows]))
    return quick, std, latest


def check_comparison(tmp, names):
    script = os.path.join(PLOTS, "make_report.py")
    quick, std, latest = comparison_trees(tmp, names)
    report_path = os.path.join(std, "REPORT.md")
    r = run_script(script, std, "--quick", quick)
    check(r.returncode == 0, f"make_report.py STD --quick QUICK exits 0 (stderr: {r.stderr[-500:]})")
    text = open(report_path).read() if os.path.isfile(report_path) else ""
    secs, titles = sections_of(text)
    check(titles == ["Machine and build", "Verdicts at a glance", "Verdicts by scale",
                     "What this suite cannot decide here", "Claims", "Figures"], f"comparison sections: {titles}")

    # The glance table: this run's rows, each with its scale.
    glance = table(secs.get("Verdicts at a glance", ""))
    check(glance[:1] == ["| # | sub-claim | scale | verdict |"], f"glance header with a scale column: {glance[:1]}")
    scale_of = {str(num): ("paper" if name == names[-1] else "standard") for num, name, _ in make_report.CLAIMS
                if name in names}
    check(len(glance) > 1 and all(cells(l)[2] == scale_of[cells(l)[0]] for l in glance[1:]),
          "every glance row states its experiment's scale")
    check("The runs compared with, in `..`:" in secs.get("Machine and build", ""), "the quick runs are listed")

    # The side-by-side table against the verdicts computed in-process from the same trees.
    side = table(secs.get("Verdicts by scale", ""))
    check(side[:1] == ["| # | sub-claim | quick verdict | paper/standard verdict | anchor paper's finding |"],
          f"side-by-side header: {side[:1]}")
    got = [cells(l) for l in side[1:]]
    want = []
    for (num, name, _, _, rows, _), (_, _, _, _, qrows, _) in zip(make_report.load_run(std), make_report.load_run(quick)):
        for s_row, q_row in make_report.paired_rows(rows, qrows):
            row = s_row or q_row
            want.append([str(num), make_report.md_cell(row["claim"]),
                         make_report.md_cell(sv.verdict_label(q_row, bold=True)) if q_row else "—",
                         make_report.md_cell(sv.verdict_label(s_row, bold=True)) if s_row else "—",
                         make_report.md_cell(row["anchor"])])
    check(got == want and got, f"the side-by-side rows are both runs' verdicts matched by claim ({len(got)} rows)")
    by_claim = {c[1]: c for c in got}
    steps = by_claim.get("Recurrent layers need O(n) sequential steps, self-attention O(1)")
    if "parallel_speedup" in names:
        check(steps is not None and steps[2:4] == ["**by construction**", "**fails**"],
              f"a sub-claim whose verdict differs shows both: {steps}")
    zoology = [c for c in got if c[1].startswith("MQAR as Zoology measures it")]
    if "long_range_recall" in names:
        check(len(zoology) == 1 and zoology[0][2] == "—" and zoology[0][3].startswith("**"),
              f"a sub-claim of the standard run only: '—' in the quick column: {zoology}")
    check(any(c[2] != "—" and c[2] == c[3] for c in got), "matched sub-claims with equal verdicts are there too")

    # What this suite cannot decide here: every module's rows, with a real submit.sh command.
    cannot = [cells(l) for l in table(secs.get("What this suite cannot decide here", ""))[1:]]
    submit = open(os.path.join(SRC, "experiments", "slurm", "submit.sh")).read()
    for num, name, _ in make_report.CLAIMS:
        mine = [c for c in cannot if c[0] == str(num)]
        mod = make_report.load_plot_module(name)
        stated = make_report.beyond_rows(name, mod)
        check(len(mine) == max(1, len(stated)), f"claim {num}: one row per beyond_this_machine() row")
        if not stated:
            check(mine and mine[0][1] == "(none stated)", f"claim {num} without rows: (none stated)")
            continue
        for c in mine:
            cmd = c[3].strip("`")
            check(cmd.startswith(f"experiments/slurm/submit.sh {name} --scale paper --out results/paper/{name} "),
                  f"claim {num}: the command submits the paper sweep into results/paper/: {cmd}")
            opts = re.findall(r"(?<= )--[a-z-]+", cmd.split(" -- ")[0])
            check(opts and all(f"{o})" in submit or f"{o} " in submit for o in opts),
                  f"claim {num}: submit.sh has the options {opts}")
            check(os.path.isfile(os.path.join(SRC, "experiments", name, "configs", "paper.ini")),
                  f"{name} has configs/paper.ini")
            check(all(len(x) > 10 for x in (c[1], c[2], c[4])), f"claim {num}: sub-claim, why and cost are stated")

    # Same bytes when rendered again after every file's mtime changed (so neither the clock nor the
    # files' times enter the report); the Generated line names the latest end_utc of both runs.
    check(f"Generated from runs ending {latest} by `plots/make_report.py`" in text,
          "the Generated line names the latest end_utc over both runs")
    for d, _, fs in os.walk(tmp):
        for f in fs:
            os.utime(os.path.join(d, f), (1e9, 1e9))
    r = run_script(script, std, "--quick", quick)
    check(r.returncode == 0 and open(report_path).read() == text,
          "rendering again, after touching every file's mtime, gives the same bytes")

    # The comparison only adds to the default report of the same run.
    r = run_script(script, std)
    default = open(report_path).read()
    check(r.returncode == 0, f"the default report of the standard tree exits 0 ({r.stderr[-300:]})")
    dsecs, _ = sections_of(default)
    check(all(dsecs.get(t) == secs.get(t) for t in ("Claims", "Figures")), "Claims and Figures are the default's")
    check(secs.get("Machine and build", "").startswith(dsecs.get("Machine and build", "").rstrip("\n")),
          "the Machine section begins as the default's")
    strip = lambda l: "|".join(p for i, p in enumerate(re.split(r"(?<!\\)\|", l)) if i != 3)  # noqa: E731
    check([strip(l) for l in glance] == table(dsecs.get("Verdicts at a glance", "")),
          "the glance rows are the default's, with the scale column added")
    check(re.sub(r"^Generated .*$", "", default, count=1, flags=re.M).count("Generated") ==
          re.sub(r"^Generated .*$", "", text, count=1, flags=re.M).count("Generated"), "one Generated line")
    check_default_layout(default)

    # --quick naming a missing directory, or an unknown option: exit 2, nothing written.
    os.remove(report_path)
    r = run_script(script, std, "--quick", os.path.join(tmp, "nowhere"))
    check(r.returncode == 2 and "--quick" in r.stderr and "nowhere" in r.stderr,
          f"--quick naming a missing directory: exit 2 naming it (got {r.returncode}: {r.stderr})")
    check(not os.path.exists(report_path) and not [f for f in os.listdir(std) if ".tmp." in f],
          "--quick naming a missing directory writes nothing")
    r = run_script(script, std, "--quik", quick)
    check(r.returncode == 2 and not os.path.exists(report_path), f"an unknown option: exit 2, nothing written ({r.stderr})")


def check_readme():
    """The committed results/standard/REPORT.md is the one the committed runs give, byte for byte;
    --readme: the committed README's verdict table is the one the committed results/standard
    and results give; replacing the block keeps the rest of the file; a README without the
    markers exits 2 naming it and is left as it was."""
    readme = os.path.join(SRC, "README.md")
    std, quick = os.path.join(SRC, "results", "standard"), os.path.join(SRC, "results")
    committed = open(os.path.join(std, "REPORT.md")).read()
    runs = make_report.load_runs(std, quick)
    check(make_report.render(std, quick, runs) == committed,
          "results/standard/REPORT.md is what plots/make_report.py results/standard --quick results writes from "
          "the committed CSVs (rerun it after changing a committed run or a plot module)")
    text = open(readme).read()
    block = make_report.readme_block(std, quick, readme, runs)
    check(make_report.replace_readme_block(text, block, readme) == text,
          "README.md's verdict table is the one plots/make_report.py results/standard --quick results "
          "--readme README.md writes (rerun it after changing a committed run)")
    check(len(block) == 4 + len(make_report.CLAIMS) and block[0] == make_report.README_BEGIN,
          f"a header, a rule and one row per claim between the markers ({len(block)} lines)")
    swapped = make_report.replace_readme_block("a\n" + block[0] + "\nold\n" + block[-1] + "\nb", ["X"], "r")
    check(swapped == "a\nX\nb", f"only the block is replaced: {swapped!r}")
    with tempfile.TemporaryDirectory() as tmp:
        bare = os.path.join(tmp, "README.md")
        open(bare, "w").write("no markers\n")
        r = run_script(os.path.join(PLOTS, "make_report.py"), std, "--quick", quick, "--readme", bare)
        check(r.returncode == 2 and "README.md" in r.stderr and open(bare).read() == "no markers\n",
              f"a README without the markers: exit 2 naming it, unchanged (stderr: {r.stderr.strip()})")


def main():
    check(set(make_report.ROW_KEYS) == ROW_KEYS and set(ROW_KEYS) == set(sv.Verdict(sv.HOLDS).row("c", "m", "a", "r")),
          "the report, the tests and seqlab_verdict agree on a row's keys")
    # Where the merged cells came from: their commits and CPU models, counted.
    prov = make_report.cells_provenance({"cells_git_commits": ["a", "b"], "cells": [
        {"cpu_model": "X"}, {"cpu_model": "X"}, {"cpu_model": ""}, {}]})
    check(prov == "2 commits; CPU X (2 cells), not recorded (2 cells)", f"cells_provenance: {prov!r}")
    prov = make_report.cells_provenance({"cells_git_commits": ["a"], "cells": [
        {"cpu_model": "X", "git_dirty": True}, {"cpu_model": "X", "git_dirty": False}]})
    check(prov == "1 commit (1 cell from a build with uncommitted changes); CPU X (2 cells)",
          f"cells_provenance counts the cells of a dirty build: {prov!r}")
    check(make_report.cells_provenance({}) == "", "cells_provenance without the keys: ''")
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
        plain = [l for l in glance if "**inconclusive**" in l]
        check(all(re.search(r"\*\*inconclusive\*\* \([a-z][^)]*\) \|", l) for l in plain),
              f"every plain inconclusive glance row names its reason ({len(plain)} rows)")
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

        check_default_layout(text)
    check_paired_rows()
    check_cannot_decide_units()
    check_readme()
    with tempfile.TemporaryDirectory() as tmp:
        check_comparison(tmp, names)

    return finish(f"make_report: all checks passed ({len(names)} experiment fixture(s): {', '.join(names) or 'none'})")


if __name__ == "__main__":
    sys.exit(main())
