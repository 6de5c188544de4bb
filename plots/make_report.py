#!/usr/bin/python3
"""Writes RESULTS_DIR/REPORT.md: the machine and build, every figure, and the claims table.

usage: make_report.py [RESULTS_DIR] [--quick QUICK_DIR]   (RESULTS_DIR default: results)

For each claim of the README's claims table (the five of the design), the report takes the
experiment's results directory RESULTS_DIR/<experiment>/ and asks the experiment's plot module
(plots/plot_<experiment>.py) for its verdicts(results_dir): rows of (claim, measured, anchor,
verdict, rule) plus the verdict's parts (plots/seqlab_verdict.py, Verdict.row: kind, reason, test,
effect, margin, checks), each computed from that run's CSVs by the rule it states. Each row shows
the test, the effect with its interval, the margin and the artifact checks (ceiling, floor,
converged, controls matched); each claim gets a count by verdict kind, 'by construction' shown
but not counted as evidence. Nothing in the table is written by hand. An experiment that has not been run (no <experiment>.csv) is listed as "not run".
The figures are every RESULTS_DIR/<experiment>/figures/*.png, linked relative to the report.

--quick QUICK_DIR compares RESULTS_DIR (a standard or paper run, e.g. results/standard, as
`run_all.sh --scale standard` writes it) with the quick run in QUICK_DIR (e.g. results). The
report then also lists QUICK_DIR's runs, states each glance row's scale, and adds two sections:
- a side-by-side table per sub-claim: its verdict in QUICK_DIR's run and in RESULTS_DIR's, and the
  anchor paper's finding (RESULTS_DIR's row, else QUICK_DIR's). Sub-claims are matched by the
  verdict row's claim text (the same plot module writes both); one present in only one run shows
  "—" in the other column, and a plot module whose claim texts name the scale's sizes (d_model,
  heads) gives one row per size;
- "What this suite cannot decide here": each plot module's beyond_this_machine(), if it has one
  (dicts of plots/seqlab_verdict.py's BEYOND_KEYS: the sub-claim, why not on this machine, the
  `--scale paper` Slurm command and the cost of one cell); "(none stated)" for a module without.
Without --quick the report is the single-run report above.

The report is reproducible: it has no clock time. Its "Generated" line names the latest end_utc
of the runs' meta.json files (RESULTS_DIR's and QUICK_DIR's), so the same CSVs give the same
bytes whenever they are rendered.

--readme README also rewrites the verdict table of the top-level README (the lines between
README_BEGIN and README_END): one row per claim with the verdict counts of RESULTS_DIR's run and
QUICK_DIR's, each linking its report. tests/plots/test_make_report.py checks that the committed
README's table is the one the committed results/standard and results give.

Exit status: 0 written; 2 an unknown option, a missing RESULTS_DIR, QUICK_DIR or README, README
without the markers, or a malformed
CSV, meta.json or column (the message names it; nothing is written). The report is written atomically (temporary
file, then rename).
"""
import argparse
import glob
import importlib.util
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import seqlab_style as st  # noqa: E402
import seqlab_verdict as sv  # noqa: E402

# The claims under test, in the README's order: (number, experiment, claim as stated there).
CLAIMS = [
    (1, "parallel_speedup",
     "Self-attention computes all positions at once; RNN/LSTM must step through time, so "
     "Transformers train faster and use parallel hardware better, at a higher memory cost "
     "(attention is O(n^2))."),
    (2, "long_range_recall",
     "Recurrent state decays over long distances (vanishing gradients, even with LSTM gates); "
     "attention links any two positions directly (path length O(1))."),
    (3, "position_extrapolation",
     "Sinusoidal encodings extrapolate in theory but fail beyond the training length in practice; "
     "RoPE encodes relative position and, with position interpolation, extends far better; "
     "PE dot products fall with distance."),
    (4, "norm_stability",
     "BatchNorm is unstable in Transformers (padding, small batches, train/inference statistics); "
     "LayerNorm is not. Pre-LN trains more stably than Post-LN."),
    (5, "attention_ablations",
     "Separate W_Q and W_K matter; several heads beat one; encoder-only, decoder-only and "
     "encoder-decoder suit different tasks."),
]

VERDICT_RULE = ("Each row's verdict is computed by the experiment's plot module "
                "(plots/plot_<experiment>.py, function verdicts) from the CSVs of this run, with the "
                "statistics of plots/seqlab_stats.py and the rules of plots/seqlab_verdict.py, the "
                "same for every claim: **holds** / **fails** only on positive evidence (the effect's "
                "95 % interval beyond the margin in the claimed / the opposite direction; where a "
                "difference is claimed, equivalence shown within the margin also fails); "
                "**inconclusive: ceiling** / **floor** when every compared arm is within the margin of "
                "the optimum / of the baseline (the best predictor that ignores the dependency); "
                "**inconclusive: not converged** when a curve that could overturn the verdict still "
                "moves at the end (last 20 % of the logged steps); plain **inconclusive** when the "
                "interval straddles the margin or there are fewer than 3 paired seeds; **depends on …** "
                "when the data show a condition; **by construction** for what the code guarantees "
                "(shown, not counted as evidence). The row's last columns give the test, the effect "
                "with its interval, the margin, the artifact checks and the specific rule; 'controls "
                "matched' checks parameter counts within ±5 % and the same training examples and "
                "supervised positions, not how learning rates were chosen (each experiment's README "
                "says).")

# The keys every verdicts() row carries (seqlab_verdict.Verdict.row).
ROW_KEYS = ("claim", "measured", "anchor", "verdict", "rule", "kind", "reason", "test", "effect",
            "margin", "checks", "part_reasons")


_MODULES = {}


def load_plot_module(name):
    """plots/plot_<name>.py as a module (loaded once), or None if there is none."""
    if name not in _MODULES:
        path = os.path.join(HERE, f"plot_{name}.py")
        mod = None
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location(f"plot_{name}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        _MODULES[name] = mod
    return _MODULES[name]


def md_cell(text):
    """One Markdown table cell: no newlines, pipes escaped."""
    return str(text).replace("\n", " ").replace("|", "\\|").strip()


def scale_of(meta):
    """The run's scale: its resolved config's `scale`, else its config file's stem, else 'custom'."""
    cfg = meta.get("config", {})
    if cfg.get("scale"):
        return str(cfg["scale"])
    f = cfg.get("config_file", "")
    return os.path.splitext(os.path.basename(f))[0] if f else "custom"


def read_meta(path):
    try:
        return st.read_meta(path)
    except (OSError, ValueError) as e:
        raise st.DataError(f"{path}: not a readable meta.json ({e})")


def experiment_section(res, num, name):
    """(summary dict, verdict rows, figure paths relative to res) of one experiment."""
    exp_dir = os.path.join(res, name)
    csv_path = os.path.join(exp_dir, name + ".csv")
    meta_path = os.path.join(exp_dir, name + ".meta.json")
    if not os.path.isfile(csv_path):
        return None, [], []
    meta = read_meta(meta_path)
    if not meta:
        raise st.DataError(f"{meta_path}: missing (every merged experiment writes one)")
    mod = load_plot_module(name)
    if mod is None or not hasattr(mod, "verdicts"):
        rows = [sv.Verdict(sv.INCONCLUSIVE, "no decision rule implemented").row(
            f"claim {num}", "(no verdicts() in plots/plot_%s.py)" % name, "", "no decision rule implemented")]
    else:
        rows = mod.verdicts(exp_dir)
        for r in rows:
            missing = [k for k in ROW_KEYS if k not in r]
            if missing:
                raise st.DataError(f"plots/plot_{name}.py: verdicts() row lacks {', '.join(missing)}")
            if r["kind"] not in sv.KINDS:
                raise st.DataError(f"plots/plot_{name}.py: verdict kind {r['kind']!r} is not one of "
                                   f"{', '.join(sv.KINDS)}")
    figs = sorted(glob.glob(os.path.join(exp_dir, "figures", "*.png")))
    figs = [os.path.relpath(p, res) for p in figs]
    return meta, rows, figs


def checks_cell(checks):
    """'ceiling no · floor no · converged yes · controls n.a.' from a row's checks."""
    names = dict(ceiling="ceiling", floor="floor", converged="converged", controls="controls matched")
    return " · ".join(f"{names[c]} {checks.get(c, 'n.a.')}" for c in sv.CHECKS)


def load_run(res):
    """Every claim's (number, experiment, claim, meta or None, verdict rows, figures) for the
    results directory `res`, in CLAIMS order. Raises st.DataError as experiment_section does."""
    out = []
    for num, name, claim in CLAIMS:
        meta, rows, figs = experiment_section(res, num, name)
        out.append((num, name, claim, meta, rows, figs))
    return out


def latest_end(*runs):
    """The latest end_utc ('YYYY-MM-DDTHH:MM:SSZ', so the largest string) over the meta.json files
    of the runs (load_run results), or None if no run has one."""
    ends = [str(meta["end_utc"]) for run in runs for _, _, _, meta, _, _ in run
            if meta and meta.get("end_utc")]
    return max(ends) if ends else None


def scale_label(run, fallback):
    """The scale of a run's experiments ('standard'; 'quick/tiny' when they differ), or
    `fallback` when none was run."""
    scales = sorted({scale_of(meta) for _, _, _, meta, _, _ in run if meta})
    return "/".join(scales) if scales else fallback


def cells_provenance(meta):
    """'N commits (d cells from a build with uncommitted changes); CPU a (k cells), b (m cells), not
    recorded (j cells)' of the cells a run merged (meta.json's cells_git_commits and each cell's
    git_dirty and cpu_model), or '' where meta.json has neither. A merge records its own commit and
    machine at the top of meta.json; these say where the cells themselves were computed."""
    commits = meta.get("cells_git_commits") or []
    cpus = {}
    dirty = 0
    for c in meta.get("cells") or []:
        key = str(c.get("cpu_model") or "") or "not recorded"
        cpus[key] = cpus.get(key, 0) + 1
        dirty += 1 if c.get("git_dirty") else 0
    parts = []
    if commits:
        parts.append(f"{len(commits)} commit{'s' if len(commits) != 1 else ''}"
                     + (f" ({dirty} cell{'s' if dirty != 1 else ''} from a build with uncommitted changes)"
                        if dirty else ""))
    if cpus:
        parts.append("CPU " + ", ".join(f"{k} ({n} cells)" for k, n in sorted(cpus.items())))
    return "; ".join(parts)


def runs_table(run):
    """The lines of the table of a run's experiments: scale, seeds, cells, commit, UTC times; then
    where the merged cells themselves came from (cells_provenance), one line per experiment."""
    out = ["| experiment | scale | seeds | cells | git commit | run (UTC) |", "|---|---|---|---|---|---|"]
    prov = []
    for num, name, claim, meta, rows, figs in run:
        if not meta:
            out.append(f"| {name} | not run | | | | |")
            continue
        git = meta.get("git", {})
        commit = str(git.get("commit", "?"))[:10] + (" (dirty)" if git.get("dirty") else "")
        seeds = meta.get("config", {}).get("seeds", "?")
        out.append(f"| {name} | {scale_of(meta)} | {seeds} | {meta.get('cells_count', '?')} | "
                   f"`{commit}` | {meta.get('start_utc', '?')} – {meta.get('end_utc', '?')} |")
        p = cells_provenance(meta)
        if p:
            prov.append(f"- {name}: {p}")
    if prov:
        out += ["", "The git commit is that of the merge; the merged cells were computed by (meta.json's "
                "`cells_git_commits` and each cell's `cpu_model`):", ""] + prov
    return out


def paired_rows(rows, quick_rows):
    """(row or None, quick row or None) pairs of one claim's sub-claims, matched by their claim
    text: `rows` in order (each with the first unmatched quick row of the same text), then the
    quick rows that matched none, in their order."""
    left = list(quick_rows)
    pairs = []
    for r in rows:
        q = next((x for x in left if x["claim"] == r["claim"]), None)
        if q is not None:
            left.remove(q)
        pairs.append((r, q))
    return pairs + [(None, q) for q in left]


def side_by_side(run, quick, label, quick_label):
    """The lines of the side-by-side table: per sub-claim, its verdict in the quick run and in
    this run, and the anchor paper's finding (this run's row, else the quick run's)."""
    out = [f"| # | sub-claim | {md_cell(quick_label)} verdict | {md_cell(label)} verdict | anchor paper's finding |",
           "|---|---|---|---|---|"]
    verdict = lambda r: md_cell(sv.verdict_label(r, bold=True)) if r else "—"  # noqa: E731
    for (num, name, claim, meta, rows, figs), (_, _, _, qmeta, qrows, _) in zip(run, quick):
        if not meta and not qmeta:
            out.append(f"| {num} | `{name}` not run | — | — | |")
            continue
        for r, q in paired_rows(rows, qrows):
            row = r or q
            out.append(f"| {num} | {md_cell(row['claim'])} | {verdict(q)} | {verdict(r)} | {md_cell(row['anchor'])} |")
    return out


def beyond_rows(name, mod):
    """The rows of the plot module `mod`'s beyond_this_machine() (dicts with
    seqlab_verdict.BEYOND_KEYS), [] when `mod` is None or has no such function. Raises
    st.DataError naming the module when a row lacks a key or the function returns no list."""
    fn = getattr(mod, "beyond_this_machine", None)
    if fn is None:
        return []
    rows = fn()
    if not isinstance(rows, list):
        raise st.DataError(f"plots/plot_{name}.py: beyond_this_machine() must return a list of dicts")
    for r in rows:
        missing = [k for k in sv.BEYOND_KEYS if not isinstance(r, dict) or k not in r]
        if missing:
            raise st.DataError(f"plots/plot_{name}.py: beyond_this_machine() row lacks {', '.join(missing)}")
    return rows


def cannot_decide(modules):
    """The lines of "What this suite cannot decide here" from (number, experiment, plot module or
    None) triples: one table row per beyond_this_machine() row, '(none stated)' for a module
    without one."""
    out = ["| # | sub-claim | why not on this machine | command (`--scale paper`, Slurm) | cost per cell |",
           "|---|---|---|---|---|"]
    for num, name, mod in modules:
        rows = beyond_rows(name, mod)
        if not rows:
            out.append(f"| {num} | (none stated) | `plots/plot_{name}.py` states none | | |")
        for r in rows:
            out.append(f"| {num} | {md_cell(r['sub_claim'])} | {md_cell(r['why'])} | `{md_cell(r['command'])}` | "
                       f"{md_cell(r['cost'])} |")
    return out


def load_runs(res, quick_dir=None):
    """(load_run(res), load_run(quick_dir) or None): the runs render and readme_block read."""
    return load_run(res), (load_run(quick_dir) if quick_dir is not None else None)


def render(res, quick_dir=None, runs=None):
    """The report's text for the results directory `res`; with `quick_dir`, compared with the
    quick run there (module docstring); `runs`: load_runs(res, quick_dir) when already loaded.
    Raises st.DataError on a malformed CSV or meta.json."""
    sections, quick = runs or load_runs(res, quick_dir)
    label = scale_label(sections, "this run")
    end = latest_end(sections, *([quick] if quick else []))
    qrel = os.path.relpath(quick_dir, res) if quick else None  # the quick run, relative to the report

    any_meta = next((s[3] for s in sections if s[3]), None)
    out = ["# seqlab results report", ""]
    where = "in this directory"
    if quick:
        where += f" and, for the {scale_label(quick, 'quick')} column, in `{qrel}`"
    out.append(f"Generated {f'from runs ending {end} ' if end else ''}by `plots/make_report.py` from the CSVs "
               f"and `meta.json` files {where}. {VERDICT_RULE}")
    out.append("")
    out.append("## Machine and build")
    out.append("")
    if any_meta:
        out += ["The machine and build that merged the runs (the first experiment's meta.json); the "
                "commits and CPUs that computed the merged cells follow the table.", ""]
        mach, build, blas = any_meta.get("machine", {}), any_meta.get("build", {}), any_meta.get("blas", {})
        out += [
            f"- CPU: {mach.get('cpu_model', '?')}, {mach.get('cores', '?')} cores, host `{mach.get('host', '?')}`",
            f"- seqlab {any_meta.get('seqlab_version', '?')}, {build.get('compiler', '?')}, "
            f"{build.get('build_type', '?')}, flags `{build.get('cxx_flags', '?')}`",
            f"- BLAS: {blas.get('config', '?')}",
        ]
    else:
        out.append("- no experiment has been run yet (no meta.json found)")
    out.append("")
    out += runs_table(sections)
    out.append("")
    if quick:
        out.append(f"The runs compared with, in `{qrel}`:")
        out.append("")
        out += runs_table(quick)
        out.append("")

    out.append("## Verdicts at a glance")
    out.append("")
    out.append("Each claim's sub-claims and their verdicts; what was measured, the paper's number and the "
               "rule are in the next section." if not quick else
               "Each claim's sub-claims and their verdicts in this run, with its scale; the next section sets them "
               "beside the quick run's, and the section \"Claims\" gives what was measured, the paper's number and "
               "the rule.")
    out.append("")
    out.append("| # | sub-claim | scale | verdict |" if quick else "| # | sub-claim | verdict |")
    out.append("|---|---|---|---|" if quick else "|---|---|---|")
    for num, name, claim, meta, rows, figs in sections:
        if not meta:
            out.append(f"| {num} | `{name}` not run | |" + (" |" if quick else ""))
            continue
        scale = f" {md_cell(scale_of(meta))} |" if quick else ""
        for r in rows:
            out.append(f"| {num} | {md_cell(r['claim'])} |{scale} {md_cell(sv.verdict_label(r, bold=True))} |")
    out.append("")
    for num, name, claim, meta, rows, figs in sections:
        if meta:
            out.append(f"- Claim {num} ({name}): {sv.counts(rows)}.")
    out.append("")

    if quick:
        qlabel = scale_label(quick, "quick")
        out.append("## Verdicts by scale")
        out.append("")
        out.append(f"Each sub-claim's verdict at the {qlabel} scale (`{qrel}`) and at the "
                   f"{label} scale (this run), so that one sees what scale each conclusion needs. Sub-claims are "
                   "matched by their text; \"—\": the sub-claim is not in that run (a plot module writes a row for "
                   "what the run measured, and some name the sizes they were measured at).")
        out.append("")
        out += side_by_side(sections, quick, label, qlabel)
        out.append("")
        out.append("## What this suite cannot decide here")
        out.append("")
        out.append("Sub-claims that need a cluster node or a GPU, as each plot module states them "
                   "(`beyond_this_machine()`), with the command that submits the experiment's `--scale paper` "
                   "sweep as a Slurm job array (experiments/slurm/README.md) and the cost of one cell. Copied back "
                   "into `results/paper/`, the sweep is reported with `plots/make_report.py results/paper --quick "
                   "results`.")
        out.append("")
        out += cannot_decide([(num, name, load_plot_module(name)) for num, name, _ in CLAIMS])
        out.append("")

    out.append("## Claims")
    out.append("")
    out.append("| # | claim | sub-claim | measured | anchor | verdict | test | effect (95 % interval) "
               "| margin | artifact checks | rule |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for num, name, claim, meta, rows, figs in sections:
        if not meta:
            out.append(f"| {num} | {md_cell(claim)} | | | | **not run** | | | | | `{name}` has no results here |")
            continue
        for i, r in enumerate(rows):
            head = f"{num} | {md_cell(claim)}" if i == 0 else " | "
            why = f": {md_cell(r['reason'])}" if r["reason"] else ""
            out.append(f"| {head} | {md_cell(r['claim'])} | {md_cell(r['measured'])} | "
                       f"{md_cell(r['anchor'])} | **{md_cell(r['verdict'])}**{why} | {md_cell(r['test'])} | "
                       f"{md_cell(r['effect'])} | {md_cell(r['margin'])} | {md_cell(checks_cell(r['checks']))} | "
                       f"{md_cell(r['rule'])} |")
    out.append("")

    out.append("## Figures")
    out.append("")
    for num, name, claim, meta, rows, figs in sections:
        out.append(f"### {num}. {name}")
        out.append("")
        if not figs:
            out.append("(no figures: not run)" if not meta else "(no figures found)")
            out.append("")
        for f in figs:
            stem = os.path.splitext(os.path.basename(f))[0]
            out.append(f"![{stem}]({f})")
            out.append("")
            out.append(f"*{stem}* (vector version: `{os.path.splitext(f)[0]}.pdf`)")
            out.append("")
    return "\n".join(out) + "\n"


README_BEGIN = "<!-- verdicts: begin (written by plots/make_report.py --readme; do not edit by hand) -->"
README_END = "<!-- verdicts: end -->"


def readme_block(res, quick_dir, readme, runs=None):
    """The lines of the README's verdict table (between README_BEGIN and README_END): per claim,
    the verdict counts (seqlab_verdict.counts) of the run in `res` and, with `quick_dir`, of the
    quick run there, each column linking its REPORT.md relative to the README file `readme`;
    `runs`: load_runs(res, quick_dir) when already loaded."""
    sections, quick = runs or load_runs(res, quick_dir)
    base = os.path.dirname(os.path.abspath(readme))
    link = lambda d: os.path.relpath(os.path.join(os.path.abspath(d), "REPORT.md"), base)  # noqa: E731
    label = scale_label(sections, "this run")
    head = f"| # | experiment | {md_cell(label)} scale ([report]({link(res)})) |"
    rule = "|---|---|---|"
    if quick:
        head += f" {md_cell(scale_label(quick, 'quick'))} scale ([report]({link(quick_dir)})) |"
        rule += "---|"
    out = [README_BEGIN, head, rule]
    for i, (num, name, _, meta, rows, _) in enumerate(sections):
        line = f"| {num} | [`{name}`](experiments/{name}/README.md) | {sv.counts(rows) if meta else 'not run'} |"
        if quick:
            qmeta, qrows = quick[i][3], quick[i][4]
            line += f" {sv.counts(qrows) if qmeta else 'not run'} |"
        out.append(line)
    out.append(README_END)
    return out


def replace_readme_block(text, block, readme):
    """`text` (the README) with the lines between README_BEGIN and README_END replaced by `block`;
    st.DataError naming `readme` when the markers are missing, repeated or out of order."""
    lines = text.split("\n")
    b = [i for i, l in enumerate(lines) if l.strip() == README_BEGIN]
    e = [i for i, l in enumerate(lines) if l.strip() == README_END]
    if len(b) != 1 or len(e) != 1 or e[0] < b[0]:
        raise st.DataError(f"--readme: {readme} must hold the line {README_BEGIN!r} once, and after it the "
                           f"line {README_END!r} once")
    return "\n".join(lines[:b[0]] + block + lines[e[0] + 1:])


def parse_args(argv):
    """RESULTS_DIR and --quick QUICK_DIR from argv (without the program name); argparse exits 2
    with its usage on an unknown option."""
    p = argparse.ArgumentParser(
        prog="make_report.py",
        description="Writes RESULTS_DIR/REPORT.md from the CSVs and meta.json files of RESULTS_DIR/<experiment>/.")
    p.add_argument("results_dir", nargs="?", default="results", metavar="RESULTS_DIR",
                   help="the run to report (default: results, the quick run; results/standard for the standard run)")
    p.add_argument("--quick", metavar="QUICK_DIR",
                   help="the quick run to compare RESULTS_DIR with (e.g. results): adds the side-by-side table of "
                        "verdicts and the section on what this suite cannot decide on this machine")
    p.add_argument("--readme", metavar="README",
                   help="also rewrite README's verdict table (the lines between the markers "
                        f"{README_BEGIN!r} and {README_END!r}) from RESULTS_DIR and QUICK_DIR")
    return p.parse_args(argv)


def main(argv):
    args = parse_args(argv[1:])
    res = args.results_dir
    if not os.path.isdir(res):
        st.fail(f"results directory not found: {res}")
    if args.quick is not None and not os.path.isdir(args.quick):
        st.fail(f"--quick: quick results directory not found: {args.quick} (run ./run_all.sh for the quick run, "
                f"or leave out --quick)")
    readme_path = None
    if args.readme is not None:
        if not os.path.exists(args.readme):
            st.fail(f"--readme: file not found: {args.readme}")
        readme_path = os.path.realpath(args.readme)  # a link's target is the file rewritten
        if not os.path.isfile(readme_path):
            st.fail(f"--readme: not a regular file: {args.readme}")
        if not os.access(readme_path, os.R_OK | os.W_OK):
            st.fail(f"--readme: {args.readme} is not readable and writable by this user")
    try:
        runs = load_runs(res, args.quick)
        text = render(res, args.quick, runs)
        readme = None
        if readme_path is not None:
            try:
                with open(readme_path, encoding="utf-8", newline="") as f:
                    old = f.read()
            except (OSError, UnicodeDecodeError) as e:
                raise st.DataError(f"--readme: cannot read {args.readme} as UTF-8 text ({e})")
            nl = "\r\n" if "\r\n" in old else "\n"
            readme = replace_readme_block(old.replace("\r\n", "\n"), readme_block(res, args.quick, readme_path, runs),
                                          args.readme).replace("\n", nl)
    except st.DataError as e:
        st.fail(str(e))
    writes = [(os.path.join(res, "REPORT.md"), text)] + ([(readme_path, readme)] if readme is not None else [])
    # Every temporary file first, then the renames: a write that fails replaces nothing.
    tmps = []
    try:
        for path, body in writes:
            tmp = path + f".tmp.{os.getpid()}"
            tmps.append(tmp)
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                f.write(body)
            if os.path.exists(path):
                shutil.copymode(path, tmp)
    except OSError as e:
        for tmp in tmps:
            if os.path.exists(tmp):
                os.remove(tmp)
        st.fail(f"cannot write {os.path.dirname(tmps[-1]) or '.'}: {e.strerror or e}")
    for (path, _), tmp in zip(writes, tmps):
        os.replace(tmp, path)
        print(os.path.abspath(path))


if __name__ == "__main__":
    main(sys.argv)
