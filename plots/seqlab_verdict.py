"""The verdict vocabulary of the report and its rules, the same for every claim.

Every plot script's verdicts() builds its rows with these functions; plots/make_report.py renders
them. A verdict is one of KINDS:

  holds / fails                 only on positive evidence: the effect's 95 % interval beyond the
                                margin in the claimed direction (holds) or the opposite one
                                (fails); where the claim predicts a difference, equivalence shown
                                within the margin (the whole interval inside ±margin) also fails;
                                where it predicts no difference, the roles swap;
  inconclusive: ceiling         every compared arm is within the margin of the task's optimum;
  inconclusive: floor           every compared arm is within the margin of the baseline (the best
                                predictor that ignores the dependency), or below it; or a compared
                                arm never left the baseline (the caller's floor_reason says which),
                                so the row cannot tell an arm that cannot do the task from one
                                that did not train;
  inconclusive: not converged   a training curve that could overturn the verdict is still moving
                                at its end (seqlab_stats.convergence: the last 20 % of the logged
                                steps), or an arm that has not left its plateau (on_plateau) is
                                still improving by another measure than the end slope, which a
                                schedule decaying to 0 flattens by construction (a longer budget
                                of the same arm reaches more; its best point is at the end:
                                seqlab_stats.best_step_state);
  inconclusive                  the interval straddles the margin (the reason names it), or there
                                are fewer than MIN_SEEDS paired seeds, or the caller names another
                                reason (lr censored: lr_censor, censor; underpowered; the
                                comparator never left its baseline plateau); the report's glance
                                tables show the reason's name beside it (why_inconclusive);
  depends on …                  the data show a condition: the claim holds at one setting and fails
                                (or is equivalent) at another;
  by construction               what the code guarantees (sequential-step counts, LayerNorm's
                                identical train/eval modes, the PE·PE identity): shown, not
                                counted as evidence.

The checks run in that order (ceiling and floor first: at the ceiling a difference cannot show).
Each verdict carries the test used, the effect with its interval, the margin and the artifact
checks ceiling / floor / converged / controls matched, each 'yes', 'no' or 'n.a.' (converged may
also be 'unclear': the end slope's interval straddles the tolerance).
"""
import math
from dataclasses import dataclass, field

import seqlab_stats as ss

HOLDS, FAILS, DEPENDS = "holds", "fails", "depends on"
CEILING, FLOOR, NOT_CONVERGED = "inconclusive: ceiling", "inconclusive: floor", "inconclusive: not converged"
INCONCLUSIVE, BY_CONSTRUCTION = "inconclusive", "by construction"
KINDS = (HOLDS, FAILS, DEPENDS, CEILING, FLOOR, NOT_CONVERGED, INCONCLUSIVE, BY_CONSTRUCTION)
MIN_SEEDS = 3  # fewer paired seeds than this: inconclusive, whatever the interval
# An arm (or a learning-rate pilot) that covered less than this share of the way from the chance
# level to the optimum has not left its initial plateau (on_plateau, pilot_flat).
PLATEAU_FRACTION = 0.25
CHECKS = ("ceiling", "floor", "converged", "controls")

# The claim an effect is judged against (the effect's sign as the caller defines it):
GREATER = "greater"    # predicts effect > +margin
LESS = "less"          # predicts effect < −margin
DIFFER = "differ"      # predicts |effect| > margin, either sign
EQUAL = "equal"        # predicts |effect| <= margin
NO_WORSE = "no_worse"  # predicts effect >= −margin (non-inferiority)
CLAIMS = (GREATER, LESS, DIFFER, EQUAL, NO_WORSE)

# Where the interval lies relative to ±margin, ordered from low to high.
BELOW, WITHIN, ABOVE, STRADDLE = "below", "within", "above", "straddles"
_ORDER = {BELOW: 0, WITHIN: 1, ABOVE: 2}
_BY_REGION = {
    GREATER: {ABOVE: HOLDS, BELOW: FAILS, WITHIN: FAILS},
    LESS: {BELOW: HOLDS, ABOVE: FAILS, WITHIN: FAILS},
    DIFFER: {ABOVE: HOLDS, BELOW: HOLDS, WITHIN: FAILS},
    EQUAL: {WITHIN: HOLDS, ABOVE: FAILS, BELOW: FAILS},
    NO_WORSE: {ABOVE: HOLDS, WITHIN: HOLDS, BELOW: FAILS},
}


def yes_no(flag):
    """'yes' / 'no' / 'n.a.' (None) for a check."""
    return "n.a." if flag is None else ("yes" if flag else "no")


@dataclass
class Verdict:
    """kind: one of KINDS; reason: why, one clause; condition: what a 'depends on' verdict depends
    on; test: the test used; effect: the effect with its interval (text); margin: the margin
    (text); checks: {ceiling, floor, converged, controls: 'yes' | 'no' | 'n.a.' | 'unclear'};
    part_reasons: for a plain 'inconclusive' that combine made from undecided parts, what leaves each
    undecided, without repeats: the named kinds (ceiling, floor, not converged, in KINDS order), then
    the names of plain parts' reasons (INCONCLUSIVE_REASONS, 'see the row' for none)."""
    kind: str
    reason: str = ""
    condition: str = ""
    test: str = ""
    effect: str = ""
    margin: str = ""
    checks: dict = field(default_factory=lambda: {c: "n.a." for c in CHECKS})
    part_reasons: tuple = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Verdict: kind must be one of {KINDS}, got {self.kind!r}")
        self.checks = {c: self.checks.get(c, "n.a.") for c in CHECKS}

    @property
    def text(self):
        """The verdict as the report shows it: the kind, or 'depends on <condition>'."""
        return f"{DEPENDS} {self.condition}" if self.kind == DEPENDS else self.kind

    def row(self, claim, measured, anchor, rule):
        """The report row of plots/make_report.py: the four texts, the verdict and its parts."""
        return dict(claim=claim, measured=measured, anchor=anchor, rule=rule, verdict=self.text,
                    kind=self.kind, reason=self.reason, test=self.test, effect=self.effect,
                    margin=self.margin, checks=dict(self.checks), part_reasons=list(self.part_reasons))


def region(lo, hi, margin):
    """Where [lo, hi] lies relative to ±margin: ABOVE (lo > m), BELOW (hi < −m), WITHIN
    (−m <= lo and hi <= m) or STRADDLE."""
    if lo > margin:
        return ABOVE
    if hi < -margin:
        return BELOW
    if lo >= -margin and hi <= margin:
        return WITHIN
    return STRADDLE


def at_ceiling(levels, optimum, margin, higher_is_better=True):
    """Every level (arm means, at every setting compared) within `margin` of the optimum; None if
    there is no optimum (nan/None) or no level."""
    levels = [v for v in levels if v is not None and not math.isnan(v)]
    if optimum is None or math.isnan(optimum) or not levels:
        return None
    return all((optimum - v if higher_is_better else v - optimum) <= margin for v in levels)


def at_floor(levels, baseline, margin, higher_is_better=True):
    """Every level within `margin` of the baseline or worse than it; None without a baseline."""
    levels = [v for v in levels if v is not None and not math.isnan(v)]
    if baseline is None or math.isnan(baseline) or not levels:
        return None
    return all((v - baseline if higher_is_better else baseline - v) <= margin for v in levels)


def converged_check(*states):
    """'no' if any curve is moving, 'unclear' if none is moving but one is unclear, 'yes' if all
    known are flat, 'n.a.' without curves. States: 'moving' | 'flat' | 'unclear' | None."""
    known = [s for s in states if s is not None]
    if not known:
        return "n.a."
    if "moving" in known:
        return "no"
    return "unclear" if "unclear" in known else "yes"


def decide(effect, margin, claim, *, unit="", test=None, ceiling=None, floor=None,
           moving_up=None, moving_down=None, controls=None, min_n=MIN_SEEDS, digits=3,
           margin_text=None, levels="", level_margin=None, floor_reason=None, moving_text=None):
    """The verdict on one effect (a seqlab_stats.Estimate) against a claim in CLAIMS with `margin`.

    ceiling / floor: the caller's at_ceiling / at_floor of the compared arms (True, False, None).
    moving_up / moving_down: the convergence state ('moving', 'flat', 'unclear' or None) of the
    arm whose further improvement would raise / lower the effect (for effect = a − b of a
    higher-is-better metric: a's and b's). A decided verdict becomes 'inconclusive: not converged'
    when an arm whose improvement could move the interval into a region of another verdict is
    still moving; an undecided one names the moving curve. controls: whether the compared arms'
    controls (parameters within ±5 %, same examples and supervised positions) are matched.
    Fewer than `min_n` replicates (an Estimate's n; ranges and exact values count as enough when
    min_n is 1): inconclusive. levels: the arms' levels against the optimum or baseline, as text
    for the ceiling / floor reason (e.g. 'means 0.999, 1.000; optimum 1'); level_margin: the
    margin of those checks when it is not the effect's (e.g. a level margin beside a slope margin).
    floor_reason: the reason of a floor verdict when the caller's floor is not 'every arm at the
    baseline' but another state of the arms (e.g. a compared arm that never left the baseline);
    moving_text: what is still moving, for the not-converged reasons (default: 'a curve that could
    change that is still moving at the end'; e.g. an arm on its plateau that a longer budget moves)."""
    if claim not in CLAIMS:
        raise ValueError(f"decide: claim must be one of {CLAIMS}, got {claim!r}")
    m_txt = margin_text or (f"±{margin:g}" + (f" {unit}" if unit else ""))
    checks = dict(ceiling=yes_no(ceiling), floor=yes_no(floor),
                  converged=converged_check(moving_up, moving_down), controls=yes_no(controls))
    base = dict(test=test or effect.method, effect=effect.text(digits, unit), margin=m_txt, checks=checks)
    lv = f" ({levels})" if levels else ""
    lm = m_txt if level_margin is None else f"{level_margin:g}"
    if ceiling:
        return Verdict(CEILING, f"every compared arm is within {lm} of the optimum{lv}", **base)
    if floor:
        return Verdict(FLOOR, floor_reason or f"every compared arm is within {lm} of the baseline or below it{lv}",
                       **base)
    moving = moving_text or "a curve that could change that is still moving at the end"
    if effect.n < min_n or not effect.known:
        return Verdict(INCONCLUSIVE, f"{effect.n} replicate(s); the rule needs {min_n}", **base)
    r = region(effect.lo, effect.hi, margin)
    iv = f"[{effect.lo:.{digits}g}, {effect.hi:.{digits}g}]"
    # An interval across a boundary whose two sides give the same verdict (GREATER: below and
    # within −m…+m both fail; NO_WORSE: within and above both hold) decides it all the same.
    touched = [q for q, hit in ((BELOW, effect.lo < -margin), (WITHIN, effect.lo <= margin and effect.hi >= -margin),
                                (ABOVE, effect.hi > margin)) if hit]
    if r == STRADDLE and len({_BY_REGION[claim][q] for q in touched}) == 1:
        kind = _BY_REGION[claim][touched[0]]
        up = [q for q in _ORDER if _ORDER[q] > max(_ORDER[t] for t in touched)]
        down = [q for q in _ORDER if _ORDER[q] < min(_ORDER[t] for t in touched)]
        if (moving_up == "moving" and any(_BY_REGION[claim][q] != kind for q in up)) or \
                (moving_down == "moving" and any(_BY_REGION[claim][q] != kind for q in down)):
            return Verdict(NOT_CONVERGED, f"the interval {iv} straddles {m_txt} on one side, but {moving}", **base)
        side = f"below +{margin:.3g}" if ABOVE not in touched else f"above −{margin:.3g}"
        return Verdict(kind, f"the interval {iv} lies {side}", **base)
    if r == STRADDLE:
        if "moving" in (moving_up, moving_down):
            return Verdict(NOT_CONVERGED, f"the interval {iv} straddles {m_txt} and "
                           + (moving_text or "a curve is still moving at the end"), **base)
        unclear = " (a curve's end slope is unclear)" if "unclear" in (moving_up, moving_down) else ""
        return Verdict(INCONCLUSIVE, f"the interval {iv} straddles {m_txt}{unclear}", **base)
    kind = _BY_REGION[claim][r]
    # Could a still-moving arm carry the interval into a region of another verdict?
    up = [q for q in _ORDER if _ORDER[q] > _ORDER[r]]
    down = [q for q in _ORDER if _ORDER[q] < _ORDER[r]]
    if (moving_up == "moving" and any(_BY_REGION[claim][q] != kind for q in up)) or \
            (moving_down == "moving" and any(_BY_REGION[claim][q] != kind for q in down)):
        return Verdict(NOT_CONVERGED, f"the interval {iv} is {r} {m_txt}, but {moving}", **base)
    where = ({ABOVE: "above 0", BELOW: "below 0", WITHIN: "at 0"} if margin == 0 else
             {ABOVE: f"above +{margin:.3g}", BELOW: f"below −{margin:.3g}", WITHIN: f"within {m_txt}"})[r]
    return Verdict(kind, f"the interval {iv} lies {where}", **base)


def decide_rank(result, claim, *, alpha=1 - ss.LEVEL, test=None, effect=None, ceiling=None,
                floor=None, controls=None):
    """The verdict of a censored rank test (seqlab_stats.gehan_test or sign_test) of 'a earlier
    than b': claim GREATER (a reaches the target earlier) or LESS (later). Holds if the one-sided
    p in the claimed direction is <= alpha (5 %), fails if the one in the opposite direction is;
    else inconclusive. The margin is the direction (a rank test has no effect size)."""
    if claim not in (GREATER, LESS):
        raise ValueError(f"decide_rank: claim must be {GREATER!r} or {LESS!r}, got {claim!r}")
    p_claim, p_other = ((result.p_a_earlier, result.p_b_earlier) if claim == GREATER
                        else (result.p_b_earlier, result.p_a_earlier))
    eff = effect or (f"a earlier in {result.a_earlier}, later in {result.b_earlier}, undecided in "
                     f"{result.undecided} of {result.a_earlier + result.b_earlier + result.undecided} "
                     f"comparisons (concordance {result.concordance:+.2f})")
    base = dict(test=test or result.method, effect=eff, margin=f"direction only (one-sided α = {alpha:g})",
                checks=dict(ceiling=yes_no(ceiling), floor=yes_no(floor), converged="n.a.",
                            controls=yes_no(controls)))
    if ceiling:
        return Verdict(CEILING, "every compared arm is within the margin of the optimum", **base)
    if floor:
        return Verdict(FLOOR, "every compared arm is within the margin of the baseline", **base)
    if p_claim <= alpha:
        return Verdict(HOLDS, f"one-sided p = {p_claim:.3g} <= {alpha:g} in the claimed direction", **base)
    if p_other <= alpha:
        return Verdict(FAILS, f"one-sided p = {p_other:.3g} <= {alpha:g} in the opposite direction", **base)
    return Verdict(INCONCLUSIVE, f"one-sided p = {p_claim:.3g} (claimed direction) and "
                   f"{p_other:.3g} (opposite) both above {alpha:g}", **base)


def by_construction(guaranteed, what, *, shown, test="counted / computed by the implementation",
                    effect="", margin="exact"):
    """A property the code guarantees: 'by construction' (shown, not counted as evidence) when the
    data show it (`shown` True); 'fails' when they contradict it — the implementation does not do
    what it documents, a defect to fix, not a finding about the claim. guaranteed: what guarantees
    it; what: what the data show."""
    kind = BY_CONSTRUCTION if shown else FAILS
    reason = (f"{guaranteed}; the data show it: {what}" if shown
              else f"{guaranteed}, but the data contradict it: {what} (an implementation defect)")
    return Verdict(kind, reason, test=test, effect=effect, margin=margin)


def grid_end(chosen, grid):
    """'top' or 'bottom' when the learning rate `chosen` is the largest or smallest of a grid of at
    least two rates (a better rate may lie outside the grid), else None."""
    grid = sorted({float(x) for x in grid})
    if len(grid) < 2 or chosen is None or math.isnan(chosen):
        return None
    if math.isclose(chosen, grid[-1], rel_tol=1e-9):
        return "top"
    if math.isclose(chosen, grid[0], rel_tol=1e-9):
        return "bottom"
    return None


# A learning-rate pilot that chose an end of its grid is flat when its scores span less than
# PILOT_FLAT x the baseline (the choice carries nothing), levelling off when its last step toward
# the edge gains less than PILOT_STEP x the baseline, and still improving toward the edge
# otherwise: only then can a rate beyond the grid matter (pilot_edge).
PILOT_FLAT, PILOT_STEP = 0.05, 0.01


def pilot_edge(scores, chosen, baseline, flat=PILOT_FLAT, step=PILOT_STEP):
    """None, or (end, kind, detail) when the rate `chosen` of a pilot's scores {lr: validation
    loss, lower is better; nan for a diverged rate} is an end of its grid (grid_end): kind 'flat'
    (the finite scores span < flat x baseline), 'levelling' (the step from the neighbouring rate
    to the chosen one gains < step x baseline) or 'improving'; 'improving' with ' (pilot not
    classified)' without a positive baseline or two finite scores. detail: text for lr_censor's
    entry, e.g. ' (pilot levelling off: span 6 %, last step 0.2 %)'."""
    grid = sorted(scores)
    end = grid_end(chosen, grid)
    if end is None:
        return None
    finite = [x for x in scores.values() if not math.isnan(x)]
    if not (baseline is not None and baseline > 0) or len(finite) < 2:
        return end, "improving", " (pilot not classified)"
    spread = (max(finite) - min(finite)) / baseline
    nb = grid[-2] if end == "top" else grid[1]
    gain = (scores[nb] - scores[chosen]) / baseline if not math.isnan(scores[nb]) else float("inf")
    kind = "flat" if spread < flat else "levelling" if gain < step else "improving"
    what = {"flat": "flat", "levelling": "levelling off", "improving": "still improving"}
    return end, kind, (f" (pilot {what[kind]}: span {100 * spread:.0f} %"
                       + (f", last step {100 * gain:.1f} %" if kind != "flat" else "") + ")")


def censor(v, censored):
    """The artifact check 'lr censored' where every censored arm counts: censored = [(arm name,
    chosen lr, 'top' | 'bottom')], the compared arms whose pilot chose an end of its grid. A
    decided verdict (holds, fails, depends on) becomes plain inconclusive with the reason 'lr
    censored' (the decision it would have had kept in the reason); an undecided one keeps its kind
    and gets the note (lr_censor with every arm blocking). No arms: v unchanged."""
    return lr_censor(v, [(e, lr, end, "", True) for e, lr, end in censored])


def pilot_flat(val_losses, chance_loss, optimal_loss=0.0, frac=PLATEAU_FRACTION):
    """Whether a learning-rate pilot was uninformative: every rate's validation loss (finite
    values; a diverged rate is none) covered less than `frac` of the way from the chance loss to
    the optimum (0 where unknown), so the rates were ranked on the initial plateau. None without
    finite losses or a scale."""
    opt = 0.0 if optimal_loss is None or math.isnan(optimal_loss) else optimal_loss
    vals = [x for x in val_losses if x is not None and math.isfinite(x)]
    if not vals or chance_loss is None or math.isnan(chance_loss) or chance_loss <= opt:
        return None
    return all((chance_loss - x) / (chance_loss - opt) < frac for x in vals)


def on_plateau(level, baseline, optimum, higher_is_better=True, frac=PLATEAU_FRACTION):
    """Whether a trained arm's level covered less than `frac` of the way from the baseline (the
    chance level or the best predictor that ignores the dependency) to the optimum: it has not
    left its initial plateau. None without both ends."""
    if any(x is None or math.isnan(x) for x in (level, baseline, optimum)) or optimum == baseline:
        return None
    gained = (level - baseline) / (optimum - baseline)
    return gained < frac


def measured(kind, reason, *, test, effect="", margin="", checks=None):
    """A verdict decided by an exact computation or a stated threshold outside decide() (e.g. a
    closed form against claimed numbers): the kind and reason as given."""
    return Verdict(kind, reason, test=test, effect=effect, margin=margin, checks=checks or {})


# The values of a check that flag an artifact, most serious first, and the value that clears it.
_BAD = dict(ceiling=("yes",), floor=("yes",), converged=("no", "unclear"), controls=("no",))
_OK = dict(ceiling="no", floor="no", converged="yes", controls="yes")


def _merge_checks(parts):
    """Per check, over the parts: a flagging value (ceiling / floor 'yes', converged 'no' or
    'unclear', controls 'no') with the parts it applies to named unless it applies to all, e.g.
    'yes (GRU)'; else the clearing value when any part has it; else 'n.a.'."""
    out = {}
    for c in CHECKS:
        vals = {label: v.checks[c] for label, v in parts}
        bad = next((b for b in _BAD[c] if b in vals.values()), None)
        if bad is not None:
            named = [lab for lab, x in vals.items() if x == bad]
            out[c] = bad if len(named) == len(vals) else f"{bad} ({', '.join(named)})"
        else:
            out[c] = _OK[c] if _OK[c] in vals.values() else "n.a."
    return out


def combine(parts, condition=None, test=None, margin=None):
    """One verdict from the verdicts of the parts of a claim (parts = [(label, Verdict)], e.g. one
    per recurrent cell or per learning rate):
      all 'by construction' -> by construction;  all 'holds' -> holds;
      some hold and some fail, with a `condition` named -> 'depends on <condition>: holds for …;
      fails for …';  otherwise any 'fails' -> fails (a claim about every part fails on one);
      parts that hold or depend on a condition -> depends on (their conditions);
      otherwise inconclusive: the shared inconclusive kind if every undecided part has the same,
      else plain, with each part's verdict in the reason and what leaves each part undecided in
      part_reasons ('inconclusive (floor, interval straddles the margin)' in the glance)."""
    if not parts:
        raise ValueError("combine: no parts")
    kinds = [v.kind for _, v in parts]

    def listing(sel):  # 'holds for LSTM, GRU' per distinct verdict, in order of appearance
        groups = {}
        for lab, v in parts:
            if sel(v):
                groups.setdefault(v.text, []).append(lab)
        return "; ".join(f"{t} for {', '.join(labs)}" for t, labs in groups.items())
    every = "; ".join(f"{lab}: {v.text} ({v.reason})" for lab, v in parts)
    base = dict(test=test or "; ".join(dict.fromkeys(v.test for _, v in parts if v.test)),
                effect="; ".join(f"{lab}: {v.effect}" for lab, v in parts if v.effect),
                margin=margin or "; ".join(dict.fromkeys(v.margin for _, v in parts if v.margin)),
                checks=_merge_checks(parts))
    if all(k == BY_CONSTRUCTION for k in kinds):
        return Verdict(BY_CONSTRUCTION, every, **base)
    if all(k == HOLDS for k in kinds):
        return Verdict(HOLDS, every, **base)
    if condition and HOLDS in kinds and FAILS in kinds:
        cond = (f"{condition}: {listing(lambda v: v.kind == HOLDS)}; "
                f"{listing(lambda v: v.kind == FAILS)}")
        rest = listing(lambda v: v.kind not in (HOLDS, FAILS))
        return Verdict(DEPENDS, every, condition=cond + (f"; {rest}" if rest else ""), **base)
    if FAILS in kinds:
        return Verdict(FAILS, every, **base)
    if DEPENDS in kinds and all(k in (HOLDS, DEPENDS) for k in kinds):
        return Verdict(DEPENDS, every, condition="; ".join(v.condition for _, v in parts if v.kind == DEPENDS),
                       **base)
    undecided = {k for k in kinds if k not in (HOLDS, BY_CONSTRUCTION, DEPENDS)}
    if len(undecided) == 1 and INCONCLUSIVE not in undecided:
        return Verdict(undecided.pop(), every, **base)
    names = [k.split(": ", 1)[1] for k in KINDS if k in undecided and k != INCONCLUSIVE]
    names += [reason_name(v.reason) for _, v in parts if v.kind == INCONCLUSIVE]
    return Verdict(INCONCLUSIVE, every, part_reasons=tuple(dict.fromkeys(names)), **base)


# The named reasons of a plain 'inconclusive' verdict, in the order they are looked for in its
# reason: (what the reason text contains, the name the report shows).
INCONCLUSIVE_REASONS = (
    ("lr censored", "lr censored"),
    ("comparator never left its baseline plateau", "comparator on its plateau"),
    ("not trained:", "not trained"),
    ("underpowered", "underpowered"),
    ("replicate(s); the rule needs", "too few seeds"),
    ("straddles", "interval straddles the margin"),
    ("the fit needs", "too few points to fit"),
    ("both above", "test not significant"),
    ("one was run", "not in this run's design"),
    ("the bound cannot decide", "crossover beyond the grid"),
)


def reason_name(reason):
    """The name of a plain 'inconclusive' reason: the first of INCONCLUSIVE_REASONS whose text it
    contains, else 'see the row'."""
    return next((name for text, name in INCONCLUSIVE_REASONS if text in reason), "see the row")


def why_inconclusive(row):
    """The named reason of a plain 'inconclusive' report row (a Verdict.row dict): what leaves its
    parts undecided where combine recorded it ('ceiling, floor'), else reason_name of its reason;
    '' for any other kind (whose kind already names it: ceiling, floor, not converged)."""
    if row.get("kind") != INCONCLUSIVE:
        return ""
    if row.get("part_reasons"):
        return ", ".join(row["part_reasons"])
    return reason_name(row.get("reason", ""))


def verdict_label(row, bold=False):
    """The verdict as the glance tables show it: the verdict text (in bold, Markdown, with
    `bold`), and for a plain 'inconclusive' its named reason after it in parentheses
    ('**inconclusive** (lr censored)')."""
    why = why_inconclusive(row)
    text = f"**{row['verdict']}**" if bold else row["verdict"]
    return f"{text} ({why})" if why else text


def counts(rows):
    """'holds 2, fails 1, inconclusive: ceiling 3; by construction 1 (shown, not counted)' for
    report rows (their 'kind'); kinds with no row are left out; by construction is listed apart
    because it is not evidence."""
    n = {k: sum(r.get("kind") == k for r in rows) for k in KINDS}
    ev = [f"{k} {n[k]}" for k in KINDS if k != BY_CONSTRUCTION and n[k]]
    out = ", ".join(ev) if ev else "no evidence rows"
    if n[BY_CONSTRUCTION]:
        out += f"; {BY_CONSTRUCTION} {n[BY_CONSTRUCTION]} (shown, not counted as evidence)"
    return out


def lr_censor(v, censored):
    """The artifact check 'lr censored' on verdict v. censored: [(arm, lr, end, detail, blocks)]
    for the compared arms whose learning-rate pilot chose an end of the grid (end 'top' or
    'bottom'; detail: text after the entry, e.g. the pilot's scores; an optional sixth field names
    the grid instead of 'lr_grid', '' leaving the name to detail; blocks: whether the choice
    can matter, i.e. the pilot is informative or not classified). A decided verdict (holds,
    fails, depends on) with a blocking arm becomes plain inconclusive with the reason 'lr
    censored: …' and what the interval alone would say; an undecided one gets the note. Arms
    that do not block (a flat pilot, or one levelling off at the edge) are listed apart, without
    the words 'lr censored', so why_inconclusive does not name them."""
    if not censored:
        return v
    # an optional sixth field replaces the grid's name ('lr_grid')
    entry = lambda c: f"{c[0]} chose {c[1]:g}, the {c[2]} of {c[5] if len(c) > 5 else 'lr_grid'}{c[3]}"  # noqa: E731
    block = [c for c in censored if c[4]]
    other = [c for c in censored if not c[4]]
    notes = []
    if block:
        notes.append("lr censored: " + ", ".join(entry(c) for c in block) +
                     " (its tuned rate may lie outside the grid)")
    if other:
        notes.append("at an end of its grid without consequence: " + ", ".join(entry(c) for c in other))
    if block and v.kind in (HOLDS, FAILS, DEPENDS):
        rest = f"; {notes[1]}" if len(notes) > 1 else ""
        return Verdict(INCONCLUSIVE, f"{notes[0]}; the interval alone would say {v.text}: {v.reason}{rest}",
                       test=v.test, effect=v.effect, margin=v.margin, checks=v.checks)
    v.reason = "; ".join([v.reason] + notes) if v.reason else "; ".join(notes)
    return v


# What a plot module's optional beyond_this_machine() returns, one dict per sub-claim that this
# suite cannot decide on its 2-core development machine (plots/make_report.py, section "What this
# suite cannot decide here"): the sub-claim, why not here, the Slurm command of its paper-scale
# sweep, and the cost of one cell.
BEYOND_KEYS = ("sub_claim", "why", "command", "cost")


def paper_sweep(experiment, *, mem, time, cpus=1, checkpoint_every=0, sbatch="--partition=PARTITION"):
    """The command that submits `experiment`'s paper-scale sweep (configs/paper.ini) to Slurm as
    one job array plus a merge job (experiments/slurm/submit.sh; experiments/slurm/README.md), into
    results/paper/<experiment>/ so that no quick or standard run is overwritten. mem and time are
    sbatch's syntax ("2G", "3:00:00"), per cell; cpus the cores each cell gets (its --threads);
    checkpoint_every > 0 makes every cell resumable after preemption; sbatch: the options passed to
    sbatch after `--` (PARTITION is the cluster's)."""
    cmd = [f"experiments/slurm/submit.sh {experiment} --scale paper --out results/paper/{experiment}",
           f"--cpus-per-task {cpus}", f"--mem {mem}", f"--time {time}"]
    if checkpoint_every:
        cmd.append(f"--checkpoint-every {checkpoint_every}")
    return " ".join(cmd) + f" -- {sbatch}"


def beyond(sub_claim, why, command, cost):
    """One row of beyond_this_machine() (keys BEYOND_KEYS): the sub-claim, why this machine cannot
    decide it, the command that can (paper_sweep), and the measured or stated cost of one cell."""
    return dict(sub_claim=sub_claim, why=why, command=command, cost=cost)
