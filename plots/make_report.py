#!/usr/bin/python3
"""Writes RESULTS_DIR/REPORT.md: the machine and build, every figure, and the claims table.

usage: make_report.py [RESULTS_DIR]   (default: results)

For each claim of the README's claims table (the five of the design), the report takes the
experiment's results directory RESULTS_DIR/<experiment>/ and asks the experiment's plot module
(plots/plot_<experiment>.py) for its verdicts(results_dir): rows of (claim, measured, anchor,
verdict, rule) plus the verdict's parts (plots/seqlab_verdict.py, Verdict.row: kind, reason, test,
effect, margin, checks), each computed from that run's CSVs by the rule it states. Each row shows
the test, the effect with its interval, the margin and the artifact checks (ceiling, floor,
converged, controls matched); each claim gets a count by verdict kind, 'by construction' shown
but not counted as evidence. Nothing in the table is written by hand. An experiment that has not been run (no <experiment>.csv) is listed as "not run".
The figures are every RESULTS_DIR/<experiment>/figures/*.png, linked relative to the report.

Exit status: 0 written; 2 a malformed CSV, meta.json or column (the message names it; nothing is
written). The report is written atomically (temporary file, then rename).
"""
import datetime
import glob
import importlib.util
import json
import os
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
            "margin", "checks")


def load_plot_module(name):
    """plots/plot_<name>.py as a module, or None if there is none."""
    path = os.path.join(HERE, f"plot_{name}.py")
    if not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location(f"plot_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def md_cell(text):
    """One Markdown table cell: no newlines, pipes escaped."""
    return str(text).replace("\n", " ").replace("|", "\\|").strip()


def scale_of(meta):
    cfg = meta.get("config", {})
    if "scale" in cfg:
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


def render(res):
    sections = []
    metas = {}
    for num, name, claim in CLAIMS:
        meta, rows, figs = experiment_section(res, num, name)
        metas[name] = meta
        sections.append((num, name, claim, meta, rows, figs))

    any_meta = next((m for m in metas.values() if m), None)
    out = ["# seqlab results report", ""]
    out.append(f"Generated {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')} "
               f"by `plots/make_report.py` from the CSVs and `meta.json` files in this directory. "
               f"{VERDICT_RULE}")
    out.append("")
    out.append("## Machine and build")
    out.append("")
    if any_meta:
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
    out.append("| experiment | scale | seeds | cells | git commit | run (UTC) |")
    out.append("|---|---|---|---|---|---|")
    for num, name, claim, meta, rows, figs in sections:
        if not meta:
            out.append(f"| {name} | not run | | | | |")
            continue
        git = meta.get("git", {})
        commit = str(git.get("commit", "?"))[:10] + (" (dirty)" if git.get("dirty") else "")
        seeds = meta.get("config", {}).get("seeds", "?")
        out.append(f"| {name} | {scale_of(meta)} | {seeds} | {meta.get('cells_count', '?')} | "
                   f"`{commit}` | {meta.get('start_utc', '?')} – {meta.get('end_utc', '?')} |")
    out.append("")

    out.append("## Verdicts at a glance")
    out.append("")
    out.append("Each claim's sub-claims and their verdicts; what was measured, the paper's number and the "
               "rule are in the next section.")
    out.append("")
    out.append("| # | sub-claim | verdict |")
    out.append("|---|---|---|")
    for num, name, claim, meta, rows, figs in sections:
        if not meta:
            out.append(f"| {num} | `{name}` not run | |")
            continue
        for r in rows:
            out.append(f"| {num} | {md_cell(r['claim'])} | **{md_cell(r['verdict'])}** |")
    out.append("")
    for num, name, claim, meta, rows, figs in sections:
        if meta:
            out.append(f"- Claim {num} ({name}): {sv.counts(rows)}.")
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


def main(argv):
    res = argv[1] if len(argv) > 1 else "results"
    if not os.path.isdir(res):
        st.fail(f"results directory not found: {res}")
    try:
        text = render(res)
    except st.DataError as e:
        st.fail(str(e))
    path = os.path.join(res, "REPORT.md")
    tmp = path + f".tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    print(os.path.abspath(path))


if __name__ == "__main__":
    main(sys.argv)
