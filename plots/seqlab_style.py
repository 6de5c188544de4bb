"""Shared style and helpers for seqlab's report figures.

Every plot script reads only CSVs and meta.json (never reruns an experiment), uses this module for
a colour-blind-safe palette (Okabe & Ito 2008), labelled axes with units, mean with a 95% interval
over seeds, and writes each figure as PNG (200 dpi) and PDF (vector).
"""
import csv
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Okabe–Ito colour-blind-safe palette.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]

# Two-sided 95% Student-t quantiles t_{0.975, df} for df = 1..30; larger df use 1.96.
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
         2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
         2.052, 2.048, 2.045, 2.042]


class DataError(Exception):
    """A missing or malformed CSV, column or value; the message names it."""


class NoClaimRows(DataError):
    """Well-formed tables whose rows decide none of the experiment's claims (e.g. a run of only
    rope and a user's own encoding): fatal for the report, while a plot script still draws its
    figures and prints a note."""


def fail(msg):
    print("error: " + msg, file=sys.stderr)
    sys.exit(2)


def read_csv(path, required):
    """Rows of `path` as dicts of strings; raises DataError naming a missing file or column."""
    if not os.path.isfile(path):
        raise DataError(f"CSV not found: {path}")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames or []
        missing = [c for c in required if c not in cols]
        if missing:
            raise DataError(f"{path}: missing column(s) {', '.join(missing)} (has: {', '.join(cols)})")
        rows = list(reader)
    if not rows:
        raise DataError(f"{path}: no data rows")
    return rows


def number(row, key, path="CSV"):
    try:
        return float(row[key])
    except (TypeError, ValueError):
        raise DataError(f"{path}: column {key} has non-numeric value {row[key]!r}")


def read_meta(path):
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        return json.load(f)


def mean_ci95(values):
    """Mean and half-width of the 95% t-interval of the mean (0 for a single value)."""
    vals = [v for v in values if not math.isnan(v)]
    n = len(vals)
    if n == 0:
        return float("nan"), 0.0
    m = sum(vals) / n
    if n == 1:
        return m, 0.0
    sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (n - 1))
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    return m, t * sd / math.sqrt(n)


def setup():
    plt.rcParams.update({
        "figure.dpi": 100, "savefig.dpi": 200, "font.size": 10, "axes.grid": True,
        "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
        "legend.frameon": False, "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
    })


def save(fig, out_dir, stem):
    """Writes <out_dir>/<stem>.png and .pdf; returns the two paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        p = os.path.join(out_dir, f"{stem}.{ext}")
        # No creation date in the PDF: the same data give the same bytes (results/ stays clean in git).
        meta = {"CreationDate": None} if ext == "pdf" else {}
        fig.savefig(p, bbox_inches="tight", metadata=meta)
        paths.append(p)
    plt.close(fig)
    return paths


def label_log_axis(ax, axis="y"):
    """Log scale with plain-number labels on major and minor ticks (a span under a decade
    otherwise shows a single labelled tick)."""
    from matplotlib.ticker import LogLocator, FormatStrFormatter
    a = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    a.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    a.set_major_formatter(FormatStrFormatter("%g"))
    a.set_minor_formatter(FormatStrFormatter(""))


def scale_note(meta, n_seeds):
    """'quick scale, 3 seeds' from meta.json's resolved config."""
    cfg = meta.get("config", {}) if isinstance(meta, dict) else {}
    scale = cfg.get("scale", meta.get("scale", "?")) if isinstance(meta, dict) else "?"
    return f"{scale} scale, {n_seeds} seed{'s' if n_seeds != 1 else ''}, mean ± 95% CI"
