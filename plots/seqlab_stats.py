"""The statistics behind every verdict of the report (plots/plot_<experiment>.py, verdicts()).

Pure Python (math only), so the plot scripts need nothing beyond Debian's python3, numpy and
matplotlib. The quantiles are computed here rather than taken from python3-scipy: the module needs
only the Student-t and normal quantiles, an exact binomial, a hypergeometric and a permutation
distribution, each a few lines with a textbook algorithm, tested against tabulated values
(tests/plots/test_seqlab_stats.py); scipy would add a large package to run_all.sh for that.

What it provides (every interval two-sided at LEVEL = 95 % unless a caller asks otherwise):
  - Estimate: an effect with its interval, the number of replicates, how it was computed and
    which replicates were dropped or substituted;
  - mean_interval, paired_difference: Student-t intervals over seeds; arms are paired by seed
    index (the project's seed rule gives arm A's seed s and arm B's seed s the same derived seed);
  - tost: two one-sided tests for equivalence within a stated margin (Schuirmann 1987);
  - ols, trend, trend_difference: the slope over a swept axis (e.g. accuracy against log2 of the
    length), per seed, with a t-interval over seeds, paired between arms;
  - Censored, gehan_test, sign_test: rank tests for steps to a target that some runs never reach
    (an unreached target is censored at the budget: a lower bound, never infinity);
  - convergence: whether a training curve is still moving at its end (slope of the last 20 % of
    the logged steps, relative to a stated scale, with its interval, against a tolerance);
  - best_step_state, never_left: when a curve reached its best (late: still improving at the
    end, whatever the schedule does to the end slope) and whether it ever moved from its first
    evaluation;
  - fisher_exact_greater: a one-sided exact test of two failure counts;
  - the chance levels of predictors that ignore a dependency but know the counts of what they saw:
    expected_max_count, expected_plugin_entropy, mqar_key_agnostic, most_frequent_symbol.

Diverged runs are results, never silently lost: paired_difference counts a diverged run as the
metric's worst value when the caller gives one (e.g. accuracy 0 or the chance loss), else drops
its pair; either way the Estimate's notes say which seed and why.
"""
import math
from dataclasses import dataclass, field
from itertools import combinations

LEVEL = 0.95  # two-sided level of every interval


# ---------------------------------------------------------------------------------------------
# Distributions

def norm_cdf(x):
    """Standard normal CDF Φ(x)."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def norm_ppf(p):
    """Standard normal quantile Φ⁻¹(p) for 0 < p < 1 (ValueError otherwise): Acklam's rational
    approximation (relative error 1.15e-9) refined by one Halley step on Φ (to ~1e-15)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"norm_ppf: p must lie in (0, 1), got {p}")
    a = [-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
         1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00]
    b = [-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
         6.680131188771972e+01, -1.328068155288572e+01]
    c = [-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
         -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00]
    d = [7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
         3.754408661907416e+00]
    lo = 0.02425
    if p < lo:
        q = math.sqrt(-2 * math.log(p))
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    elif p <= 1 - lo:
        q = p - 0.5
        r = q * q
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    else:
        q = math.sqrt(-2 * math.log(1 - p))
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    e = norm_cdf(x) - p
    u = e * math.sqrt(2 * math.pi) * math.exp(x * x / 2)
    return x - u / (1 + x * u / 2)


def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz; Press et al.,
    Numerical Recipes 3rd ed., §6.4, betacf)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-15:
            return h
    raise ArithmeticError(f"betainc({a}, {b}, {x}): continued fraction did not converge")


def betainc(a, b, x):
    """Regularised incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1 (Numerical
    Recipes §6.4: the continued fraction, on the side of x where it converges fast)."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"betainc: x must lie in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t, df):
    """Student-t CDF with df > 0 degrees of freedom: P(T <= t) = 1 − I_{df/(df+t²)}(df/2, 1/2)/2
    for t >= 0 (Abramowitz & Stegun 26.7.1 via 26.5.27)."""
    if df <= 0:
        raise ValueError(f"t_cdf: df must be > 0, got {df}")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_ppf(p, df):
    """Student-t quantile: the t with t_cdf(t, df) = p, for 0 < p < 1 and df > 0 (ValueError
    otherwise); bracketing and bisection on t_cdf to 1e-13 relative (monotone, so it cannot miss)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_ppf: p must lie in (0, 1), got {p}")
    if df <= 0:
        raise ValueError(f"t_ppf: df must be > 0, got {df}")
    if p < 0.5:
        return -t_ppf(1.0 - p, df)
    if p == 0.5:
        return 0.0
    lo, hi = 0.0, max(1.0, norm_ppf(p))
    while t_cdf(hi, df) < p:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return 0.5 * (lo + hi)


def t_quantile(level, df):
    """Two-sided critical value t_{(1+level)/2, df} (e.g. level 0.95, df 4: 2.776)."""
    return t_ppf(0.5 + level / 2.0, df)


def binom_sf(k, n, p=0.5):
    """P(X >= k) for X ~ Binomial(n, p), exact."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(max(k, 0), n + 1))


def fisher_exact_greater(k1, n1, k2, n2):
    """One-sided Fisher exact test that group 1's rate k1/n1 exceeds group 2's k2/n2: P(X >= k1)
    for X hypergeometric with the margins fixed (n1 draws from n1 + n2 items, k1 + k2 marked)."""
    K, N = k1 + k2, n1 + n2
    total = math.comb(N, n1)
    return sum(math.comb(K, x) * math.comb(N - K, n1 - x)
               for x in range(k1, min(K, n1) + 1)) / total


# ---------------------------------------------------------------------------------------------
# Estimates with intervals

@dataclass
class Estimate:
    """An effect (or level) with its two-sided interval.

    value, lo, hi: the estimate and its interval (lo = -inf, hi = +inf when there is too little
    data for one; nan when there is none); n: replicates used; se, df: standard error and degrees
    of freedom of a t-interval (nan for intervals of another kind, e.g. a min-max range); what:
    what is estimated ("separate − shared, test accuracy"); method: how ("paired t over 5 seeds");
    notes: dropped or substituted replicates, one string each."""
    value: float
    lo: float
    hi: float
    n: int
    se: float = float("nan")
    df: float = float("nan")
    level: float = LEVEL
    what: str = ""
    method: str = ""
    notes: list = field(default_factory=list)

    @property
    def known(self):
        return not (math.isnan(self.value) or math.isnan(self.lo) or math.isnan(self.hi))

    def fmt(self, digits=3, unit=""):
        """'+0.668 [0.653, 0.683]' (with ' unit' appended when given)."""
        if math.isnan(self.value):
            return "n/a"
        u = f" {unit}" if unit else ""

        def g(v):
            return "−∞" if v == -math.inf else "+∞" if v == math.inf else f"{v:.{digits}g}"
        return f"{self.value:+.{digits}g} [{g(self.lo)}, {g(self.hi)}]{u}"

    def text(self, digits=3, unit=""):
        """fmt() preceded by what and followed by the notes (dropped or substituted replicates)."""
        notes = f" ({'; '.join(self.notes)})" if self.notes else ""
        return f"{self.what + ': ' if self.what else ''}{self.fmt(digits, unit)}{notes}"


def from_range(value, lo, hi, what="", method="range"):
    """An Estimate whose interval is a stated range (e.g. min-max over repetitions of a timing, or
    an exact computation with lo = hi = value), not a t-interval."""
    return Estimate(value, lo, hi, 1, what=what, method=method)


def _finite(v):
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def mean_interval(values, level=LEVEL, what="", method=None):
    """Mean of `values` (None and nan skipped) with its Student-t interval
    mean ± t_{(1+level)/2, n−1} · s/√n; one value gives (−∞, +∞), none gives nan."""
    vals = [float(v) for v in values if _finite(v)]
    n = len(vals)
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0, what=what, method=method or "no data")
    m = sum(vals) / n
    if n == 1:
        return Estimate(m, -math.inf, math.inf, 1, what=what, method=method or "1 value: no interval")
    sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (n - 1))
    se = sd / math.sqrt(n)
    h = t_quantile(level, n - 1) * se
    return Estimate(m, m - h, m + h, n, se=se, df=n - 1, level=level, what=what,
                    method=method or f"t over {n} values")


def paired_difference(a, b, level=LEVEL, diverged_a=(), diverged_b=(), worst=None, what=""):
    """Per-seed differences a[s] − b[s] over the seeds of both arms, with their t-interval.

    a, b: {seed: value}; a value of None or nan is missing. diverged_a / diverged_b: seeds whose
    run diverged. With `worst` given (the metric's worst value, e.g. 0 accuracy), a diverged run
    counts as that value (a result, not a gap); without it, its pair is dropped. Missing values
    drop their pair. Every dropped or substituted seed is named in the Estimate's notes."""
    notes, diffs = [], []
    for s in sorted(set(a) | set(b)):
        va, vb = a.get(s), b.get(s)
        bad = False
        for arm, v, div in (("a", va, diverged_a), ("b", vb, diverged_b)):
            if s in div:
                if worst is None:
                    notes.append(f"seed {s}: {arm} diverged, pair dropped")
                    bad = True
                else:
                    notes.append(f"seed {s}: {arm} diverged, counted as {worst:g}")
            elif not _finite(v):
                notes.append(f"seed {s}: missing in {arm}, pair dropped")
                bad = True
        if bad:
            continue
        va = worst if s in diverged_a else va
        vb = worst if s in diverged_b else vb
        diffs.append(float(va) - float(vb))
    est = mean_interval(diffs, level, what=what, method=f"paired t over {len(diffs)} seeds")
    est.notes = notes
    return est


def tost(est, margin, alpha=(1 - LEVEL) / 2):
    """Two one-sided t-tests (Schuirmann 1987) that the true effect lies within (−margin, +margin),
    from a t-Estimate (se and df known). Returns dict(p, p_lower, p_upper, equivalent): p_lower
    tests H0 effect <= −margin, p_upper H0 effect >= +margin, p = max of the two; equivalent if
    p < alpha. With the default alpha = (1 − LEVEL)/2 = 0.025, equivalence holds exactly when the
    95 % interval lies inside the margin, so one interval decides every verdict."""
    if margin <= 0:
        raise ValueError(f"tost: margin must be > 0, got {margin}")
    if not (est.se > 0 and est.df > 0):
        return dict(p=float("nan"), p_lower=float("nan"), p_upper=float("nan"), equivalent=False)
    p_lower = 1.0 - t_cdf((est.value + margin) / est.se, est.df)
    p_upper = t_cdf((est.value - margin) / est.se, est.df)
    p = max(p_lower, p_upper)
    return dict(p=p, p_lower=p_lower, p_upper=p_upper, equivalent=p < alpha)


# ---------------------------------------------------------------------------------------------
# Trends over a swept axis

def ols(xs, ys, level=LEVEL):
    """Least-squares line y = intercept + slope·x. Returns dict(slope, intercept, se, df, lo, hi):
    the slope's t-interval from the residuals (df = n − 2; with exactly 2 points or a perfect fit
    se = 0 and the interval is the point). ValueError with fewer than 2 points or equal xs."""
    n = len(xs)
    if n != len(ys) or n < 2:
        raise ValueError(f"ols: need >= 2 (x, y) pairs of equal length, got {len(xs)} and {len(ys)}")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("ols: every x is the same; no slope")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    icpt = my - slope * mx
    df = n - 2
    if df == 0:
        return dict(slope=slope, intercept=icpt, se=0.0, df=0, lo=slope, hi=slope)
    rss = sum((y - icpt - slope * x) ** 2 for x, y in zip(xs, ys))
    se = math.sqrt(rss / df / sxx)
    h = t_quantile(level, df) * se if se > 0 else 0.0
    return dict(slope=slope, intercept=icpt, se=se, df=df, lo=slope - h, hi=slope + h)


def seed_slopes(points, min_points=2):
    """{seed: OLS slope} of points = {seed: [(x, y), ...]} (y None/nan skipped), and the notes
    for seeds with fewer than `min_points` distinct x."""
    out, notes = {}, []
    for s in sorted(points):
        pts = [(x, y) for x, y in points[s] if _finite(y)]
        if len({x for x, _ in pts}) < max(2, min_points):
            notes.append(f"seed {s}: fewer than {max(2, min_points)} points, no slope")
            continue
        out[s] = ols([x for x, _ in pts], [y for _, y in pts])["slope"]
    return out, notes


def trend(points, level=LEVEL, what=""):
    """Mean slope over seeds of y against x (points = {seed: [(x, y), ...]}, x already transformed,
    e.g. log2 of the length), with its t-interval over the per-seed slopes (seeds are the
    replicates). With a single seed, the OLS interval of that seed's points (df = points − 2)."""
    slopes, notes = seed_slopes(points)
    if len(slopes) == 1 and len(points) == 1:
        s = next(iter(points))
        pts = [(x, y) for x, y in points[s] if _finite(y)]
        f = ols([x for x, _ in pts], [y for _, y in pts], level)
        return Estimate(f["slope"], f["lo"], f["hi"], 1, se=f["se"], df=f["df"], level=level,
                        what=what, method=f"OLS over {len(pts)} points of 1 seed", notes=notes)
    est = mean_interval(list(slopes.values()), level, what=what,
                        method=f"per-seed OLS slopes, t over {len(slopes)} seeds")
    est.notes = notes
    return est


def trend_difference(points_a, points_b, level=LEVEL, what=""):
    """Paired difference of per-seed slopes, slope_a(s) − slope_b(s), over the seeds of both arms,
    with its t-interval (points_* = {seed: [(x, y), ...]})."""
    sa, na = seed_slopes(points_a)
    sb, nb = seed_slopes(points_b)
    est = paired_difference(sa, sb, level, what=what)
    est.method = f"paired per-seed OLS slopes, t over {est.n} seeds"
    est.notes = [f"a: {x}" for x in na] + [f"b: {x}" for x in nb] + est.notes
    return est


# ---------------------------------------------------------------------------------------------
# Rank tests with censoring (steps or time to a target)

@dataclass(frozen=True)
class Censored:
    """Steps (or seconds) to a target: `value` if `reached`, else the budget the run used without
    reaching it (a lower bound on the true value, never infinity)."""
    value: float
    reached: bool


def gehan_score(x, y):
    """Gehan's (1965) score of a pair: +1 if x is certainly earlier than y, −1 if certainly later,
    0 if the order is unknown (both censored, or the earlier one censored) or tied."""
    if x.reached and y.reached:
        return (x.value < y.value) - (x.value > y.value)
    if x.reached and not y.reached:
        return 1 if x.value <= y.value else 0
    if y.reached and not x.reached:
        return -1 if y.value <= x.value else 0
    return 0


@dataclass
class RankResult:
    """A rank test of 'a earlier than b': statistic, one-sided p-values for each direction, the
    two-sided p, the counts behind it and the method."""
    statistic: float
    p_a_earlier: float
    p_b_earlier: float
    p_two_sided: float
    a_earlier: int
    b_earlier: int
    undecided: int
    n_a: int
    n_b: int
    method: str

    @property
    def concordance(self):
        """(a earlier − b earlier) / all comparisons: +1 when a is always earlier."""
        tot = self.a_earlier + self.b_earlier + self.undecided
        return (self.a_earlier - self.b_earlier) / tot if tot else float("nan")


def gehan_test(a, b, max_exact=200000):
    """Gehan's generalised Wilcoxon test for two samples of Censored times (Gehan 1965): W = Σ_ij
    score(a_i, b_j) (positive: a earlier). p-values from the exact permutation distribution of W
    over all splits of the pooled sample when there are at most `max_exact` of them, else from the
    normal approximation with Mantel's (1967) permutation variance n_a·n_b·ΣU_k²/(N(N − 1)),
    U_k = Σ_l score(k, l) over the pooled sample."""
    a, b = list(a), list(b)
    na, nb = len(a), len(b)
    if na == 0 or nb == 0:
        raise ValueError("gehan_test: both samples need at least one run")
    pooled = a + b
    N = na + nb
    S = [[gehan_score(pooled[k], pooled[l]) for l in range(N)] for k in range(N)]
    U = [sum(row) for row in S]

    def w_of(idx):  # Σ_{k in idx, l not in idx} S[k][l] = Σ_{k in idx} U_k (S is antisymmetric)
        return sum(U[k] for k in idx)
    w = w_of(range(na))
    pos = sum(1 for i in range(na) for j in range(nb) if S[i][na + j] > 0)
    neg = sum(1 for i in range(na) for j in range(nb) if S[i][na + j] < 0)
    n_split = math.comb(N, na)
    if n_split <= max_exact:
        ws = [w_of(c) for c in combinations(range(N), na)]
        p_a = sum(1 for v in ws if v >= w) / n_split
        p_b = sum(1 for v in ws if v <= w) / n_split
        method = f"Gehan–Wilcoxon, exact permutation over {n_split} splits ({na} vs {nb} runs)"
    else:
        var = na * nb * sum(u * u for u in U) / (N * (N - 1))
        z = w / math.sqrt(var) if var > 0 else 0.0
        p_a, p_b = 1 - norm_cdf(z), norm_cdf(z)
        method = f"Gehan–Wilcoxon, normal approximation ({na} vs {nb} runs)"
    return RankResult(w, p_a, p_b, min(1.0, 2 * min(p_a, p_b)), pos, neg, na * nb - pos - neg,
                      na, nb, method)


def sign_test(a, b):
    """Paired sign test of 'a earlier than b' over seeds (a, b = {seed: Censored}): each pair
    scored by gehan_score; pairs of unknown order are left out; exact binomial p-values."""
    seeds = sorted(set(a) & set(b))
    sc = [gehan_score(a[s], b[s]) for s in seeds]
    pos, neg = sc.count(1), sc.count(-1)
    n = pos + neg
    p_a = binom_sf(pos, n) if n else 1.0
    p_b = binom_sf(neg, n) if n else 1.0
    return RankResult(pos - neg, p_a, p_b, min(1.0, 2 * min(p_a, p_b)), pos, neg, len(seeds) - n,
                      len(seeds), len(seeds), f"paired sign test over {len(seeds)} seeds")


# ---------------------------------------------------------------------------------------------
# Convergence: is a training curve still moving at its end?

CONV_FRACTION = 0.2   # the last 20 % of the logged steps
CONV_TOL = 0.05       # improvement over that window, as a fraction of the curve's scale


@dataclass
class Convergence:
    """state: 'moving' (the interval of the improvement over the window lies above +tol),
    'flat' (it lies below +tol: any further improvement is smaller than tol), or None (no curve).
    drift: the Estimate of the improvement over the window as a fraction of the scale (positive =
    still improving); window: (first step, last step)."""
    state: object
    drift: Estimate
    window: tuple
    tol: float

    @property
    def moving(self):
        return None if self.state is None else self.state == "moving"

    def text(self):
        if self.state is None:
            return "no curve"
        return (f"improvement over steps {self.window[0]:g}–{self.window[1]:g}: "
                f"{self.drift.fmt(2)} of the scale ({self.state}, tolerance {self.tol:g})")


def convergence(curves, scale, frac=CONV_FRACTION, tol=CONV_TOL, higher_is_better=False, level=LEVEL):
    """Whether training curves (curves = {seed: [(step, value), ...]}) still move at their end.

    Per seed, the OLS slope of the value over the last `frac` of the logged step range (at least
    the last two logged steps) times that window's length is the change over the window; as an improvement (sign flipped for a loss) and
    divided by `scale` (a stated size of the quantity, e.g. the baseline loss, or 1 − chance for
    an accuracy), it is averaged over seeds with its t-interval (one seed: the OLS interval).
    'moving' if the interval lies above tol, 'flat' if below it; between, the interval straddles
    tol and the state is 'unclear' (reported as such, not counted as moving)."""
    if scale <= 0 or math.isnan(scale):
        raise ValueError(f"convergence: scale must be > 0, got {scale}")
    if not curves:
        return Convergence(None, Estimate(float("nan"), float("nan"), float("nan"), 0), (0, 0), tol)
    steps = sorted({s for pts in curves.values() for s, _ in pts})
    first, last = steps[0], steps[-1]
    w0 = last - frac * (last - first)
    if len(steps) >= 2:
        w0 = min(w0, steps[-2])
    sign = 1.0 if higher_is_better else -1.0
    window = {s: [(x, sign * y * (last - w0) / scale) for x, y in pts if x >= w0 - 1e-9]
              for s, pts in curves.items()}
    drift = trend(window, level, what="improvement over the last window / scale")
    if not drift.known:
        return Convergence(None, drift, (w0, last), tol)
    state = "moving" if drift.lo > tol else "flat" if drift.hi < tol else "unclear"
    return Convergence(state, drift, (w0, last), tol)


def best_step_state(curves, tol, frac=CONV_FRACTION, higher_is_better=False):
    """Whether training curves (curves = {seed: [(step, value), ...]}) reached their best late: per
    seed, the first logged step whose value is within `tol` (the metric's units) of that seed's
    best value; 'moving' if in most seeds that step lies in the last `frac` of the logged step
    range (the curve was still improving by more than tol when training ended, however flat a
    schedule decaying to 0 makes its end slope), 'flat' otherwise, None without curves. Returns
    (state, {seed: that step}, (first step of the window, last step))."""
    pts_all = {s: sorted(p) for s, p in curves.items() if p}
    if not pts_all:
        return None, {}, (0, 0)
    steps = sorted({x for p in pts_all.values() for x, _ in p})
    first, last = steps[0], steps[-1]
    w0 = last - frac * (last - first)
    reached = {}
    for s, p in pts_all.items():
        best = max(y for _, y in p) if higher_is_better else min(y for _, y in p)
        reached[s] = next(x for x, y in p if (best - y if higher_is_better else y - best) <= tol)
    late = sum(1 for x in reached.values() if x > w0 + 1e-9)
    return ("moving" if 2 * late > len(reached) else "flat"), reached, (w0, last)


def never_left(curves, tol):
    """Whether every seed's curve (curves = {seed: [(step, value), ...]}) stayed within `tol` of its
    first logged value at every later step: the model learned nothing the eval shows after its
    first evaluation. None without curves."""
    pts_all = {s: sorted(p) for s, p in curves.items() if p}
    if not pts_all:
        return None
    return all(max(abs(y - p[0][1]) for _, y in p) <= tol for p in pts_all.values())


# ---------------------------------------------------------------------------------------------
# Chance levels of predictors that ignore a dependency

def count_distribution_max(n, k):
    """P(max_v c_v <= m) for m = 0..n, where (c_1..c_k) are the counts of n independent uniform
    draws over k categories: filled category by category (category i holds c of the draws left
    with probability Binomial(left, 1/(k − i))), a dynamic programme in probabilities."""
    if n < 0 or k < 1:
        raise ValueError(f"count_distribution_max: need n >= 0 and k >= 1, got n = {n}, k = {k}")
    out = []
    for m in range(n + 1):
        f = [0.0] * (n + 1)  # f[j]: probability that j draws are placed so far, all counts <= m
        f[0] = 1.0
        for i in range(k):
            q = 1.0 / (k - i)
            g = [0.0] * (n + 1)
            for j in range(n + 1):
                if f[j] == 0.0:
                    continue
                left = n - j
                for c in range(0, min(m, left) + 1):
                    pc = math.comb(left, c) * q ** c * (1 - q) ** (left - c) if q < 1 else float(c == left)
                    g[j + c] += f[j] * pc
            f = g
        out.append(f[n])
    return out


def expected_max_count(n, k):
    """E[max_v c_v] for the counts of n independent uniform draws over k categories:
    Σ_{m>=1} P(max >= m) = Σ_{m=0}^{n−1} (1 − P(max <= m))."""
    cdf = count_distribution_max(n, k)
    return sum(1.0 - cdf[m] for m in range(n))


def expected_plugin_entropy(n, k):
    """E[−Σ_v (c_v/n) ln(c_v/n)] (nats) for the counts of n independent uniform draws over k
    categories: k · Σ_c Binomial(n, 1/k)(c) · (c/n)(−ln(c/n)), by symmetry of the categories."""
    if n < 1 or k < 1:
        raise ValueError(f"expected_plugin_entropy: need n >= 1 and k >= 1, got n = {n}, k = {k}")
    p = 1.0 / k
    return k * sum(math.comb(n, c) * p ** c * (1 - p) ** (n - c) * (c / n) * -math.log(c / n)
                   for c in range(1, n + 1))


def mqar_key_agnostic(n_pairs, n_values):
    """(accuracy, loss in nats) on the scored positions of MQAR (lib/include/seqlab/tasks/mqar.hpp:
    P = n_pairs independent uniform values over n_values, each query asks a pair chosen uniformly)
    for the best predictors that ignore which key is queried. Given the context, the queried value
    is v with probability c_v / P, so the best accuracy is the most frequent context value's,
    E[max_v c_v] / P, and the best cross-entropy predicts c_v / P: E[plug-in entropy of the
    counts]. The same values as MultiQueryAssociativeRecall::key_agnostic_accuracy() / _loss()."""
    return expected_max_count(n_pairs, n_values) / n_pairs, expected_plugin_entropy(n_pairs, n_values)


def mqar_key_agnostic_pooled(pair_counts, n_values):
    """The same pooled over a mixture of pair counts whose test sets have equally many rows (so
    P·rows scored positions each, as long_range_recall's mqar_pairs = "2+4"): weights ∝ P, i.e.
    accuracy Σ_P E[max c] / Σ_P P and loss Σ_P P·H_P / Σ_P P."""
    tot = sum(pair_counts)
    acc = sum(expected_max_count(P, n_values) for P in pair_counts) / tot
    loss = sum(P * expected_plugin_entropy(P, n_values) for P in pair_counts) / tot
    return acc, loss


def most_frequent_symbol(n_symbols, alphabet):
    """(accuracy, loss) per recall position of a copy task whose n_symbols source symbols are
    independent uniform over `alphabet`, for the best predictors that know which symbols occurred
    (their counts) but not in which order: accuracy E[max c] / n (the most frequent symbol), loss
    the expected plug-in entropy of the counts. CopyMemoryTask::most_frequent_symbol_accuracy()."""
    return expected_max_count(n_symbols, alphabet) / n_symbols, expected_plugin_entropy(n_symbols, alphabet)
