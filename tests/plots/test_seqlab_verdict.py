#!/usr/bin/python3
"""plots/seqlab_verdict.py: every verdict kind from constructed inputs.

Checks: decide() gives holds / fails (opposite direction, and equivalence shown where a
difference is claimed) / plain inconclusive (straddling, too few seeds) for each claim type;
ceiling and floor take precedence over any interval; a still-moving curve makes a verdict
'inconclusive: not converged' only when that arm could overturn it; decide_rank on censored
samples; by_construction shown and contradicted; flat pilots, arms on their plateau, the
grid's ends and 'lr censored' (lr_censor on blocking and non-blocking arms, censor), the caller's
floor and not-converged reasons; combine() into holds, depends on, fails and the shared
inconclusive kind; the rows and counts that make_report renders. Exit status 0 when every
check passes.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import check, finish, import_plots_module  # noqa: E402

ss = import_plots_module("seqlab_stats")
sv = import_plots_module("seqlab_verdict")


def est(values):
    return ss.mean_interval(values, what="a − b")


UP = est([0.30, 0.32, 0.31, 0.29, 0.33])       # interval far above +0.02
DOWN = est([-0.30, -0.32, -0.31, -0.29, -0.33])
SAME = est([0.001, -0.002, 0.0, 0.002, -0.001])  # interval well inside ±0.02
WIDE = est([0.3, -0.2, 0.1])                  # straddles


def decide_kinds():
    m = 0.02
    for claim, effect, kind in [
            (sv.GREATER, UP, sv.HOLDS), (sv.GREATER, DOWN, sv.FAILS), (sv.GREATER, SAME, sv.FAILS),
            (sv.GREATER, WIDE, sv.INCONCLUSIVE),
            (sv.LESS, DOWN, sv.HOLDS), (sv.LESS, UP, sv.FAILS), (sv.LESS, SAME, sv.FAILS),
            (sv.DIFFER, UP, sv.HOLDS), (sv.DIFFER, DOWN, sv.HOLDS), (sv.DIFFER, SAME, sv.FAILS),
            (sv.EQUAL, SAME, sv.HOLDS), (sv.EQUAL, UP, sv.FAILS), (sv.EQUAL, WIDE, sv.INCONCLUSIVE),
            (sv.NO_WORSE, SAME, sv.HOLDS), (sv.NO_WORSE, UP, sv.HOLDS), (sv.NO_WORSE, DOWN, sv.FAILS),
            (sv.NO_WORSE, WIDE, sv.INCONCLUSIVE)]:
        v = sv.decide(effect, m, claim, unit="accuracy")
        check(v.kind == kind, f"decide {claim} on {effect.fmt()}: {kind} (got {v.kind}: {v.reason})")
        check(v.margin == "±0.02 accuracy" and v.test and "[" in v.effect, f"verdict parts: {v}")
    v = sv.decide(WIDE, 0.02, sv.GREATER)
    check("straddles ±0.02" in v.reason, f"the straddle is spelled out: {v.reason}")
    v = sv.decide(SAME, 0.02, sv.GREATER)
    check("within" in v.reason, f"equivalence named: {v.reason}")
    # An interval across one boundary whose two sides give the same verdict decides it: GREATER
    # below and within ±m both fail; NO_WORSE within and above both hold; across +m for GREATER
    # (within: fails, above: holds) stays inconclusive. A still-moving arm that could carry it into
    # the other verdict's region makes it not converged.
    for lo, hi, claim, kind in ((-0.07, -0.01, sv.GREATER, sv.FAILS), (-0.01, 0.05, sv.NO_WORSE, sv.HOLDS),
                                (0.0, 0.05, sv.GREATER, sv.INCONCLUSIVE), (-0.05, 0.01, sv.NO_WORSE, sv.INCONCLUSIVE)):
        v = sv.decide(ss.from_range((lo + hi) / 2, lo, hi), 0.02, claim, min_n=1)
        check(v.kind == kind, f"one-sided straddle [{lo}, {hi}] {claim}: want {kind}, got {v.kind}: {v.reason}")
    v = sv.decide(ss.from_range(-0.04, -0.07, -0.01), 0.02, sv.GREATER, min_n=1, moving_up="moving")
    check(v.kind == sv.NOT_CONVERGED, f"one-sided straddle, moving toward holds: {v.kind}: {v.reason}")
    # Too few seeds: inconclusive whatever the interval (2 seeds with identical differences).
    v = sv.decide(est([0.5, 0.5]), 0.02, sv.GREATER)
    check(v.kind == sv.INCONCLUSIVE and "needs 3" in v.reason, f"2 seeds: {v.reason}")
    check(sv.decide(ss.from_range(0.5, 0.4, 0.6), 0.02, sv.GREATER, min_n=1).kind == sv.HOLDS,
          "a range with min_n 1 decides")
    try:
        sv.decide(UP, 0.02, "bigger")
        check(False, "an unknown claim type raises")
    except ValueError:
        pass


def artifact_checks():
    # Ceiling and floor come first: even an interval beyond the margin is not evidence there.
    v = sv.decide(UP, 0.02, sv.GREATER, ceiling=True, floor=False)
    check(v.kind == sv.CEILING and v.checks["ceiling"] == "yes" and v.checks["floor"] == "no",
          f"ceiling: {v}")
    v = sv.decide(SAME, 0.02, sv.GREATER, ceiling=False, floor=True)
    check(v.kind == sv.FLOOR, f"floor: {v.kind}")
    check(sv.at_ceiling([0.999, 1.0, 0.985], 1.0, 0.02) is True, "at_ceiling: all within")
    check(sv.at_ceiling([0.999, 0.95], 1.0, 0.02) is False, "at_ceiling: one arm below")
    check(sv.at_ceiling([1.01, 0.99], 1.0, 0.02, higher_is_better=False) is True, "loss at its optimum")
    check(sv.at_ceiling([0.5], float("nan"), 0.02) is None, "no optimum: n.a.")
    check(sv.at_floor([0.06, 0.1, 0.13], 0.125, 0.02) is True, "at_floor: below or within")
    check(sv.at_floor([0.06, 0.5], 0.125, 0.02) is False, "at_floor: one arm above")
    check(sv.at_floor([2.8, 2.77], 2.77, 0.05, higher_is_better=False) is True, "loss at the baseline")
    # Not converged: the arm behind (b, whose improvement lowers a − b) still moving overturns a
    # 'holds'; the arm ahead still moving does not (the gap can only widen).
    v = sv.decide(UP, 0.02, sv.GREATER, moving_up="flat", moving_down="moving")
    check(v.kind == sv.NOT_CONVERGED and v.checks["converged"] == "no", f"laggard moving: {v}")
    v = sv.decide(UP, 0.02, sv.GREATER, moving_up="moving", moving_down="flat")
    check(v.kind == sv.HOLDS, f"leader moving, gap widens: holds ({v.kind})")
    v = sv.decide(SAME, 0.02, sv.GREATER, moving_up="moving", moving_down="flat")
    check(v.kind == sv.NOT_CONVERGED, f"equivalent while a is still improving: {v.kind}")
    v = sv.decide(SAME, 0.02, sv.GREATER, moving_up="flat", moving_down="moving")
    check(v.kind == sv.FAILS, f"equivalent, b improving can only make it worse for the claim: {v.kind}")
    v = sv.decide(WIDE, 0.02, sv.GREATER, moving_up="moving")
    check(v.kind == sv.NOT_CONVERGED and "straddles" in v.reason, f"straddle with a moving curve: {v}")
    v = sv.decide(UP, 0.02, sv.GREATER, moving_up="unclear", moving_down="unclear")
    check(v.kind == sv.HOLDS and v.checks["converged"] == "unclear", f"unclear is reported, not moving: {v}")
    v = sv.decide(UP, 0.02, sv.GREATER, moving_up="flat", moving_down="flat", controls=False)
    check(v.checks == dict(ceiling="n.a.", floor="n.a.", converged="yes", controls="no"), f"checks: {v.checks}")


def rank_and_construction():
    C = ss.Censored
    fast = [C(100, True), C(120, True), C(150, True)]
    slow = [C(400, True), C(500, True), C(800, False)]
    v = sv.decide_rank(ss.gehan_test(fast, slow), sv.GREATER)
    check(v.kind == sv.HOLDS and "0.05" in v.reason, f"rank test holds at p = 1/20: {v.reason}")
    check(sv.decide_rank(ss.gehan_test(slow, fast), sv.GREATER).kind == sv.FAILS, "reversed: fails")
    mixed = [C(100, True), C(600, True), C(800, False)]
    check(sv.decide_rank(ss.gehan_test(mixed, slow), sv.GREATER).kind == sv.INCONCLUSIVE, "mixed: inconclusive")
    check(sv.decide_rank(ss.gehan_test(fast, slow), sv.GREATER, ceiling=True).kind == sv.CEILING,
          "rank test at the ceiling")
    v = sv.by_construction("the code counts L steps per layer", "1 → 1", shown=True)
    check(v.kind == sv.BY_CONSTRUCTION and v.text == "by construction", f"by construction: {v}")
    v = sv.by_construction("the code counts L steps per layer", "1 → 4", shown=False)
    check(v.kind == sv.FAILS and "defect" in v.reason, f"contradicted construction fails: {v.reason}")
    try:
        sv.Verdict("probably")
        check(False, "an unknown kind raises")
    except ValueError:
        pass


def combining():
    h = sv.decide(UP, 0.02, sv.GREATER, controls=True)
    f = sv.decide(SAME, 0.02, sv.GREATER, controls=True)
    c = sv.decide(UP, 0.02, sv.GREATER, ceiling=True, controls=False)
    i = sv.decide(WIDE, 0.02, sv.GREATER)
    check(sv.combine([("LSTM", h), ("GRU", h)]).kind == sv.HOLDS, "all hold: holds")
    d3 = sv.combine([("RNN", h), ("LSTM", h), ("GRU", f)], condition="the recurrent cell")
    check(d3.text == "depends on the recurrent cell: holds for RNN, LSTM; fails for GRU", f"grouped: {d3.text}")
    d = sv.combine([("LSTM", h), ("GRU", f)], condition="the recurrent cell")
    check(d.kind == sv.DEPENDS and d.text.startswith("depends on the recurrent cell: holds for LSTM")
          and "fails for GRU" in d.text, f"depends on: {d.text}")
    check(sv.combine([("LSTM", h), ("GRU", f)]).kind == sv.FAILS, "holds and fails without a condition: fails")
    nested = sv.combine([("noise", h), ("accuracy", d)])
    check(nested.kind == sv.DEPENDS and nested.condition == d.condition,
          f"holds and depends on: depends on, the inner condition kept ({nested.text})")
    check(sv.combine([("LSTM", i), ("GRU", f)], condition="x").kind == sv.FAILS, "fails and inconclusive: fails")
    cc = sv.combine([("LSTM", c), ("GRU", c)])
    check(cc.kind == sv.CEILING, f"all at the ceiling: {cc.kind}")
    hc = sv.combine([("LSTM", h), ("GRU", c)], condition="the cell")
    check(hc.kind == sv.CEILING and "holds" in hc.reason and "ceiling" in hc.reason,
          f"holds and ceiling: the undecided part's kind, both named ({hc.kind}: {hc.reason})")
    hci = sv.combine([("a", h), ("b", c), ("c", i)])
    check(hci.kind == sv.INCONCLUSIVE, f"mixed undecided kinds: plain inconclusive ({hci.kind})")
    check(hc.checks["ceiling"] == "yes (GRU)" and hc.checks["controls"] == "no (GRU)",
          f"checks merged per part: {hc.checks}")
    b = sv.by_construction("x", "y", shown=True)
    check(sv.combine([("p", b), ("q", b)]).kind == sv.BY_CONSTRUCTION, "all by construction")
    # Rows and counts for the report.
    rows = [v.row("claim text", "measured text", "anchor text", "rule text") for v in (h, f, c, b, d)]
    check(all({"claim", "measured", "anchor", "rule", "verdict", "kind", "reason", "test", "effect",
               "margin", "checks"} <= set(r) for r in rows), "rows have every field")
    check(rows[4]["verdict"].startswith("depends on the recurrent cell") and rows[4]["kind"] == sv.DEPENDS,
          "a depends-on row keeps its condition in the verdict text")
    # A plain inconclusive row is shown with its named reason; other kinds as they are.
    w = sv.decide(WIDE, 0.02, sv.GREATER).row("c", "m", "a", "r")
    check(sv.verdict_label(w) == "inconclusive (interval straddles the margin)", f"label: {sv.verdict_label(w)}")
    few = sv.decide(est([0.3, 0.31]), 0.02, sv.GREATER).row("c", "m", "a", "r")
    check(sv.verdict_label(few) == "inconclusive (too few seeds)", f"label: {sv.verdict_label(few)}")
    cens = dict(w, reason="lr censored: x chose 0.016, the top of lr_grid; " + w["reason"])
    check(sv.why_inconclusive(cens) == "lr censored", "lr censored named before the straddle")
    check(sv.verdict_label(dict(w, reason="something else")) == "inconclusive (see the row)", "unnamed reason")
    check(sv.verdict_label(rows[2]) == rows[2]["verdict"] and sv.why_inconclusive(rows[0]) == "",
          "other kinds keep their text")
    plat = dict(w, reason="the comparator never left its baseline plateau (Transformer in 2/5 seeds)")
    check(sv.why_inconclusive(plat) == "comparator on its plateau", f"plateau named: {sv.why_inconclusive(plat)}")
    # Parts undecided for different reasons: plain inconclusive, labelled with each part's reason
    # (a named kind, or a plain part's reason name), without repeats.
    ceil = sv.Verdict(sv.CEILING, "at the optimum")
    flo = sv.Verdict(sv.FLOOR, "at the baseline")
    mixed = sv.combine([("LSTM", ceil), ("RNN", flo), ("GRU", ceil)]).row("c", "m", "a", "r")
    check(mixed["kind"] == sv.INCONCLUSIVE and sv.verdict_label(mixed) == "inconclusive (ceiling, floor)",
          f"mixed named kinds: {sv.verdict_label(mixed)}")
    same = sv.combine([("LSTM", ceil), ("GRU", ceil)]).row("c", "m", "a", "r")
    check(same["kind"] == sv.CEILING and sv.verdict_label(same) == sv.CEILING, "one shared kind stays that kind")
    wide = sv.combine([("LSTM", ceil), ("RNN", sv.decide(WIDE, 0.02, sv.GREATER))]).row("c", "m", "a", "r")
    check(sv.verdict_label(wide) == "inconclusive (ceiling, interval straddles the margin)",
          f"a plain part: named from its own reason: {sv.verdict_label(wide)}")
    n = sv.counts(rows)
    check(n == "holds 1, fails 1, depends on 1, inconclusive: ceiling 1; by construction 1 (shown, not "
              "counted as evidence)", f"counts: {n}")


def censoring():
    # lr_censor: a blocking censored arm turns a decided verdict into plain inconclusive, named
    # 'lr censored', keeping what the interval says; a non-blocking one only adds a note that
    # why_inconclusive does not pick up; an undecided verdict keeps its kind with the notes.
    h = sv.decide(UP, 0.02, sv.GREATER)
    check(sv.lr_censor(h, []) is h, "nothing censored: the verdict as it was")
    v = sv.lr_censor(sv.decide(UP, 0.02, sv.GREATER), [("GRU", 0.03, "top", " (pilot improving)", True)])
    check(v.kind == sv.INCONCLUSIVE and v.reason.startswith("lr censored: GRU chose 0.03, the top of lr_grid "
                                                             "(pilot improving)")
          and "would say holds" in v.reason, f"blocking arm: {v.kind}: {v.reason}")
    check(sv.why_inconclusive(v.row("c", "m", "a", "r")) == "lr censored", "named lr censored")
    f = sv.lr_censor(sv.decide(UP, 0.02, sv.GREATER), [("RNN", 0.001, "bottom", " (pilot flat)", False)])
    check(f.kind == sv.HOLDS and "at an end of its grid without consequence: RNN chose 0.001, the bottom"
          in f.reason and "lr censored" not in f.reason, f"non-blocking arm: {f.kind}: {f.reason}")
    u = sv.lr_censor(sv.decide(WIDE, 0.02, sv.GREATER), [("GRU", 0.03, "top", "", True),
                                                         ("RNN", 0.001, "bottom", "", False)])
    check(u.kind == sv.INCONCLUSIVE and "straddles" in u.reason and "lr censored: GRU" in u.reason
          and "without consequence: RNN" in u.reason, f"undecided: notes added: {u.reason}")
    c = sv.lr_censor(sv.decide(UP, 0.02, sv.GREATER, ceiling=True), [("GRU", 0.03, "top", "", True)])
    check(c.kind == sv.CEILING and "lr censored: GRU" in c.reason, f"ceiling keeps its kind: {c.kind}")


def plateau_and_censoring():
    # A pilot is flat (uninformative) when every rate stayed within a quarter of the way from the
    # chance loss to the optimum; one rate beyond that quarter makes it informative.
    check(sv.pilot_flat([4.136, 3.939, 4.037, 4.070], 4.159) is True, "induction pilot near chance: flat")
    check(sv.pilot_flat([4.160, 4.097, 1.118, 1.082], 4.159) is False, "one rate left the plateau: not flat")
    check(sv.pilot_flat([0.657, 0.650], 0.662, 0.0) is True, "duplicate-tagging pilot: flat")
    check(sv.pilot_flat([float("inf"), float("nan")], 4.159) is None, "every rate diverged: n.a.")
    check(sv.pilot_flat([2.0], float("nan")) is None, "no chance loss: n.a.")
    # An arm on its plateau: less than a quarter of the way from the baseline to the optimum.
    check(sv.on_plateau(0.103, 1 / 64, 1.0) is True, "accuracy 0.10 of 64 symbols: on its plateau")
    check(sv.on_plateau(0.989, 1 / 64, 1.0) is False, "accuracy 0.99: off it")
    check(sv.on_plateau(3.60, 4.159, 0.0, higher_is_better=False) is True, "loss 3.60 against chance 4.16")
    check(sv.on_plateau(1.5, 3.0, float("nan"), higher_is_better=False) is None, "no optimum: n.a.")
    # The grid's ends, and the censoring of a verdict (decided -> inconclusive, reason kept).
    grid = [0.001, 0.003, 0.01, 0.03]
    check(sv.grid_end(0.03, grid) == "top" and sv.grid_end(0.001, grid) == "bottom"
          and sv.grid_end(0.01, grid) is None and sv.grid_end(0.03, [0.03]) is None, "grid ends")
    h = sv.decide(UP, 0.02, sv.GREATER)
    c = sv.censor(h, [("unit keys", 0.03, "top")])
    check(c.kind == sv.INCONCLUSIVE and "lr censored: unit keys chose 0.03, the top of lr_grid" in c.reason
          and "would say holds" in c.reason, f"censored holds: {c.kind}: {c.reason}")
    check(sv.why_inconclusive(c.row("c", "m", "a", "r")) == "lr censored", "named lr censored")
    w = sv.censor(sv.decide(WIDE, 0.02, sv.GREATER), [("x", 0.001, "bottom")])
    check(w.kind == sv.INCONCLUSIVE and "straddles" in w.reason and "bottom of lr_grid" in w.reason,
          f"censored straddle keeps its reason: {w.reason}")
    check(sv.censor(h, []) is h, "no censored arm: unchanged")
    # The caller's floor and not-converged reasons replace the generic texts.
    v = sv.decide(UP, 0.02, sv.GREATER, floor=True, floor_reason="b never left the baseline")
    check(v.kind == sv.FLOOR and v.reason == "b never left the baseline", f"floor reason: {v.reason}")
    v = sv.decide(DOWN, 0.02, sv.NO_WORSE, moving_up="moving", moving_text="a longer budget moves a")
    check(v.kind == sv.NOT_CONVERGED and v.reason.endswith("but a longer budget moves a"),
          f"moving text: {v.reason}")


def main():
    decide_kinds()
    censoring()
    artifact_checks()
    plateau_and_censoring()
    rank_and_construction()
    combining()
    return finish("test_seqlab_verdict: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
