#!/usr/bin/python3
"""plots/seqlab_stats.py on constructed inputs with known answers.

Checks: t and normal quantiles against tabulated values (Student's t table, e.g. t_{0.975,4} =
2.776; the normal table); the t CDF inverts the quantile; the incomplete beta at closed forms;
mean and paired intervals computed by hand; pairs dropped or substituted for missing and diverged
runs, with notes; TOST equivalent exactly when the 95 % interval lies inside the margin; OLS
slopes and intervals of exact and noisy lines; per-seed trends and their paired difference; the
Gehan and sign tests on fully ordered, censored and tied samples (exact p-values by hand: 1/20
for 3 vs 3 fully separated); Fisher's exact test (1/20 for 3/3 against 0/3); the convergence
check on flat, still-falling and noisy curves; the best-step rule (a best reached late or early) and
never_left; the draw-count baselines against exact enumeration
(the same constants as tests/unit/test_tasks_mqar.cpp) and a Monte-Carlo run. Exit status 0 when
every check passes.
"""
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import check, finish, import_plots_module  # noqa: E402

ss = import_plots_module("seqlab_stats")


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol * max(1.0, abs(b))


def quantiles():
    # Student's t, two-sided 95 % (t_{0.975, df}), one-sided 95 % and 99.5 %: standard tables
    # (e.g. Abramowitz & Stegun Table 26.10), 3-4 decimals.
    t975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 9: 2.262, 10: 2.228, 20: 2.086,
            30: 2.042, 60: 2.000, 120: 1.980}
    for df, v in t975.items():
        check(abs(ss.t_ppf(0.975, df) - v) < 6e-4, f"t_0.975,{df} = {v} (got {ss.t_ppf(0.975, df)})")
        check(abs(ss.t_quantile(0.95, df) - v) < 6e-4, f"t_quantile(0.95, {df}) = {v}")
    for df, v in {1: 6.314, 4: 2.132, 10: 1.812, 30: 1.697}.items():
        check(abs(ss.t_ppf(0.95, df) - v) < 6e-4, f"t_0.95,{df} = {v} (got {ss.t_ppf(0.95, df)})")
    for df, v in {2: 9.925, 5: 4.032, 30: 2.750}.items():
        check(abs(ss.t_ppf(0.995, df) - v) < 6e-4, f"t_0.995,{df} = {v}")
    # More digits where they are known exactly: df = 1 is Cauchy (tan), df = 2 has a closed form.
    for p in (0.6, 0.9, 0.975, 0.999):
        check(close(ss.t_ppf(p, 1), math.tan(math.pi * (p - 0.5)), 1e-10), f"t_ppf({p}, 1) = tan")
        a = 4 * p * (1 - p)
        check(close(ss.t_ppf(p, 2), (2 * p - 1) * math.sqrt(2 / a), 1e-10), f"t_ppf({p}, 2) closed form")
    check(ss.t_ppf(0.025, 4) == -ss.t_ppf(0.975, 4), "t quantile is symmetric")
    check(ss.t_ppf(0.5, 7) == 0.0, "t median is 0")
    for df in (1, 3, 4.5, 50):
        for p in (0.01, 0.3, 0.8, 0.999):
            check(close(ss.t_cdf(ss.t_ppf(p, df), df), p, 1e-11), f"t_cdf inverts t_ppf (p {p}, df {df})")
    check(close(ss.t_cdf(0.0, 3), 0.5), "t_cdf(0) = 1/2")
    check(close(ss.t_cdf(1.0, 1), 0.75, 1e-12), "Cauchy CDF at 1 is 3/4")
    # Large df tends to the normal.
    check(abs(ss.t_ppf(0.975, 1e6) - 1.959964) < 1e-5, "t with df 1e6 is normal")
    # Normal table.
    for p, z in {0.975: 1.959964, 0.95: 1.644854, 0.995: 2.575829, 0.5: 0.0, 0.8413447: 1.0,
                 0.001: -3.090232}.items():
        check(abs(ss.norm_ppf(p) - z) < 2e-6, f"z_{p} = {z} (got {ss.norm_ppf(p)})")
        check(abs(ss.norm_cdf(z) - p) < 2e-6, f"norm_cdf({z}) = {p}")
    # Incomplete beta: I_x(1, 1) = x, I_x(a, 1) = x^a, I_x(1, b) = 1 − (1 − x)^b, symmetry.
    for x in (0.1, 0.5, 0.93):
        check(close(ss.betainc(1, 1, x), x, 1e-13), f"I_{x}(1, 1)")
        check(close(ss.betainc(3.5, 1, x), x ** 3.5, 1e-12), f"I_{x}(3.5, 1)")
        check(close(ss.betainc(1, 2.5, x), 1 - (1 - x) ** 2.5, 1e-12), f"I_{x}(1, 2.5)")
        check(close(ss.betainc(2, 7, x), 1 - ss.betainc(7, 2, 1 - x), 1e-12), "I symmetry")
    for bad in (lambda: ss.t_ppf(0, 3), lambda: ss.t_ppf(1.2, 3), lambda: ss.t_ppf(0.5, 0),
                lambda: ss.norm_ppf(1.0), lambda: ss.betainc(1, 1, 1.5)):
        try:
            bad()
            check(False, "a bad argument raises ValueError")
        except ValueError:
            pass
    # Binomial and Fisher.
    check(close(ss.binom_sf(3, 3), 1 / 8), "P(X >= 3), Bin(3, 1/2) = 1/8")
    check(close(ss.binom_sf(0, 5), 1.0), "P(X >= 0) = 1")
    check(close(ss.binom_sf(4, 5), 6 / 32), "P(X >= 4), Bin(5, 1/2) = 6/32")
    check(close(ss.fisher_exact_greater(3, 3, 0, 3), 1 / 20), "Fisher 3/3 vs 0/3: 1/20")
    check(close(ss.fisher_exact_greater(0, 3, 3, 3), 1.0), "Fisher 0/3 vs 3/3, greater: 1")
    # 2/4 vs 1/4: P(X >= 2), X ~ hypergeometric(N 8, K 3, n 4) = (C(3,2)C(5,2) + C(3,3)C(5,1))/C(8,4)
    check(close(ss.fisher_exact_greater(2, 4, 1, 4), (3 * 10 + 1 * 5) / 70), "Fisher 2/4 vs 1/4")


def intervals():
    e = ss.mean_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    # mean 3, s = sqrt(2.5), se = s / sqrt 5, half-width t_{0.975,4} · se = 2.7764 · 0.70711
    check(close(e.value, 3.0) and close(e.hi - e.value, 2.776445105 * math.sqrt(2.5 / 5), 1e-8),
          f"mean interval of 1..5: {e}")
    check(e.n == 5 and e.df == 4 and close(e.se, math.sqrt(0.5)), "n, df and se of 1..5")
    one = ss.mean_interval([0.7])
    check(one.value == 0.7 and one.lo == -math.inf and one.hi == math.inf, "one value: no interval")
    none = ss.mean_interval([None, float("nan")])
    check(none.n == 0 and not none.known, "no value: unknown")
    const = ss.mean_interval([0.5, 0.5, 0.5])
    check(const.lo == const.hi == 0.5, "equal values: zero-width interval")

    a = {0: 0.9, 1: 0.8, 2: 0.85, 3: 0.7}
    b = {0: 0.5, 1: 0.6, 2: 0.55, 4: 0.1}
    d = ss.paired_difference(a, b, what="a − b")
    check(d.n == 3 and close(d.value, (0.4 + 0.2 + 0.3) / 3), f"paired over common seeds: {d}")
    check(any("seed 3" in x and "missing in b" in x for x in d.notes) and
          any("seed 4" in x and "missing in a" in x for x in d.notes), f"missing seeds named: {d.notes}")
    # paired t by hand: diffs 0.4, 0.2, 0.3: mean 0.3, s 0.1, half-width 4.3027 · 0.1/sqrt 3
    check(close(d.hi - d.value, 4.302652730 * 0.1 / math.sqrt(3), 1e-8), "paired half-width by hand")
    dv = ss.paired_difference({0: 0.9, 1: 0.8, 2: 0.85}, {0: 0.5, 1: 0.6, 2: 0.55},
                              diverged_a={1}, worst=0.0)
    check(dv.n == 3 and close(dv.value, (0.4 - 0.6 + 0.3) / 3), f"diverged counted as worst: {dv}")
    check(any("seed 1" in x and "diverged, counted as 0" in x for x in dv.notes), f"notes: {dv.notes}")
    dd = ss.paired_difference({0: 0.9, 1: 0.8, 2: 0.85}, {0: 0.5, 1: 0.6, 2: 0.55}, diverged_b={2})
    check(dd.n == 2 and any("seed 2: b diverged, pair dropped" in x for x in dd.notes),
          f"diverged without a worst value: dropped ({dd.notes})")
    check(ss.from_range(1.0, 0.5, 2.0).fmt() == "+1 [0.5, 2]", f"from_range: {ss.from_range(1.0, 0.5, 2.0).fmt()}")

    # TOST: equivalence exactly when the 95 % interval lies inside ±margin (alpha 0.025 each side).
    for diffs, m in (([0.01, -0.01, 0.0, 0.005, -0.002], 0.02), ([0.01, -0.01, 0.0], 0.02),
                     ([0.3, 0.1, 0.2], 0.05), ([0.0, 0.0, 0.0001], 0.01)):
        est = ss.mean_interval(diffs)
        t = ss.tost(est, m)
        inside = -m < est.lo and est.hi < m
        check(t["equivalent"] == inside, f"TOST {diffs} ±{m}: equivalent {t['equivalent']}, CI inside {inside}")
        check(close(t["p"], max(t["p_lower"], t["p_upper"])), "TOST p is the larger one-sided p")
    t = ss.tost(ss.mean_interval([0.0, 0.001, -0.001, 0.0005, -0.0005]), 0.02)
    check(t["equivalent"] and t["p"] < 1e-4, f"tight interval well inside: p {t['p']}")
    # At the boundary: with the margin equal to the 95 % half-width, the larger one-sided p is 0.025.
    est0 = ss.Estimate(0.0, -0.01, 0.01, 5, se=0.004, df=4)
    check(abs(ss.tost(est0, 0.004 * ss.t_ppf(0.975, 4))["p"] - 0.025) < 1e-9,
          "TOST p = 0.025 when the margin equals the half-width")


def trends():
    f = ss.ols([0, 1, 2, 3], [1, 3, 5, 7])
    check(close(f["slope"], 2.0) and close(f["intercept"], 1.0) and f["se"] == 0.0, f"exact line: {f}")
    xs, ys = [0, 1, 2, 3], [1, 0, 1, 4]
    f = ss.ols(xs, ys)
    # slope = Σ(x − 1.5)(y − 1.5) / Σ(x − 1.5)² = (−1.5·−0.5 + −0.5·−1.5 + 0.5·−0.5 + 1.5·2.5) / 5 = 1
    check(close(f["slope"], 1.0), f"hand slope: {f['slope']}")
    # residuals y − (0 + 1·x): 1, −1, −1, 1 (intercept 1.5 − 1.5 = 0): rss 4, se = sqrt(4/2/5)
    check(close(f["se"], math.sqrt(4 / 2 / 5)) and close(f["hi"] - 1.0, 4.302652730 * math.sqrt(0.4), 1e-8),
          f"hand se and interval: {f}")
    two = ss.ols([1, 2], [5, 4])
    check(two["df"] == 0 and two["lo"] == two["hi"] == -1.0, "two points: exact slope")
    for bad in (lambda: ss.ols([1], [1]), lambda: ss.ols([2, 2, 2], [1, 2, 3])):
        try:
            bad()
            check(False, "ols rejects bad input")
        except ValueError:
            pass
    # Per-seed slopes over log2 length: seed s falls by 0.1 + 0.01·s per doubling.
    pts = {s: [(k, 1.0 - (0.1 + 0.01 * s) * k) for k in (4, 5, 6)] for s in range(5)}
    tr = ss.trend(pts, what="accuracy per doubling")
    check(close(tr.value, -0.12) and tr.n == 5, f"trend over seeds: {tr}")
    check(tr.hi < 0 and "5 seeds" in tr.method, f"trend interval below 0: {tr}")
    flat = {s: [(k, 0.5) for k in (4, 5, 6)] for s in range(3)}
    diff = ss.trend_difference(flat, pts)
    check(diff.n == 3 and close(diff.value, 0.11), f"paired slope difference on seeds 0-2: {diff}")
    single = ss.trend({0: [(0, 0), (1, 1.1), (2, 1.9), (3, 3.05)]})
    check(single.n == 1 and single.lo < single.value < single.hi and "1 seed" in single.method,
          f"one seed: OLS interval: {single}")
    short = ss.trend({0: [(1, 1.0)], 1: [(1, 1.0), (2, 2.0)], 2: [(1, 0.0), (2, 1.5)]})
    check(short.n == 2 and any("seed 0" in x for x in short.notes), f"a seed with one point is noted: {short.notes}")


def rank_tests():
    C = ss.Censored
    # 3 vs 3, a always earlier: W = 9 is the largest of C(6,3) = 20 splits: p = 1/20.
    a = [C(100, True), C(120, True), C(150, True)]
    b = [C(400, True), C(500, True), C(800, False)]
    r = ss.gehan_test(a, b)
    check(r.statistic == 9 and close(r.p_a_earlier, 1 / 20), f"Gehan fully separated: {r}")
    check(close(r.p_b_earlier, 1.0) and r.concordance == 1.0, "the opposite direction: p = 1")
    # Both censored: order unknown; a reached after b was censored: unknown.
    check(ss.gehan_score(C(800, False), C(800, False)) == 0, "two censored: 0")
    check(ss.gehan_score(C(900, True), C(800, False)) == 0, "reached after the other's censoring: 0")
    check(ss.gehan_score(C(700, True), C(800, False)) == 1, "reached before the other's censoring: +1")
    check(ss.gehan_score(C(800, False), C(700, True)) == -1, "antisymmetric")
    check(ss.gehan_score(C(5, True), C(5, True)) == 0, "tie: 0")
    # Every run censored: no information.
    r0 = ss.gehan_test([C(800, False)] * 3, [C(800, False)] * 3)
    check(r0.statistic == 0 and r0.p_a_earlier == 1.0 and r0.undecided == 9, f"all censored: {r0}")
    # Interleaved 2 vs 2: a = (1, 3), b = (2, 4): W = (1 + 1) + (−1 + 1) = 2; splits of 4 into 2:
    # W values of the 6 splits: {1,2}: 4, {1,3}: 2, {1,4}: 0, {2,3}: 0, {2,4}: −2, {3,4}: −4.
    r2 = ss.gehan_test([C(1, True), C(3, True)], [C(2, True), C(4, True)])
    check(r2.statistic == 2 and close(r2.p_a_earlier, 2 / 6) and close(r2.p_b_earlier, 5 / 6),
          f"interleaved 2 vs 2: {r2}")
    # Normal approximation for large samples agrees in direction.
    big = ss.gehan_test([C(i, True) for i in range(12)], [C(i + 6, True) for i in range(12)], max_exact=10)
    check("normal approximation" in big.method and big.p_a_earlier < 0.05, f"normal approximation: {big}")
    # Paired sign test: 5 seeds, a earlier in every pair: p = 1/32.
    pa = {s: C(100 + s, True) for s in range(5)}
    pb = {s: C(300, s != 2) for s in range(5)}
    st = ss.sign_test(pa, pb)
    check(st.a_earlier == 5 and close(st.p_a_earlier, 1 / 32), f"sign test 5/5: {st}")
    pb2 = {**pb, 4: C(800, False)}
    pa2 = {**pa, 4: C(800, False)}
    st2 = ss.sign_test(pa2, pb2)
    check(st2.undecided == 1 and close(st2.p_a_earlier, 1 / 16), f"an undecided pair is left out: {st2}")


def convergence_checks():
    steps = list(range(50, 801, 50))
    flat = {s: [(x, 1.0 + 0.001 * ((x // 50 + s) % 2)) for x in steps] for s in range(3)}
    c = ss.convergence(flat, scale=2.0)
    check(c.state == "flat" and c.moving is False, f"flat curve: {c.text()}")
    # Falling by 0.002 per step: over the last 20 % (150 steps) 0.3, i.e. 0.15 of the scale 2.
    falling = {s: [(x, 3.0 - 0.002 * x + 0.01 * s) for x in steps] for s in range(3)}
    c = ss.convergence(falling, scale=2.0)
    check(c.state == "moving" and close(c.drift.value, 0.15, 1e-9), f"falling curve: {c.text()}")
    check(c.window == (650.0, 800), f"window = last 20 % of the steps: {c.window}")
    rising = {s: [(x, 0.1 + 0.001 * x) for x in steps] for s in range(3)}
    check(ss.convergence(rising, scale=1.0, higher_is_better=True).state == "moving", "rising accuracy moves")
    check(ss.convergence(rising, scale=1.0).state == "flat", "a rising loss is not improving")
    rnd = random.Random(4)
    noisy = {s: [(x, 1.0 + rnd.gauss(0, 0.2) - (0.0005 * x if s == 0 else 0)) for x in steps] for s in range(3)}
    check(ss.convergence(noisy, scale=1.0).state == "unclear", "noisy, one seed falling: unclear")
    check(ss.convergence({}, scale=1.0).state is None, "no curve: None")
    # Two logged steps only (a short fine-tune): the window takes both.
    short = {s: [(50, 2.4 - 0.1 * s), (60, 1.6 - 0.1 * s)] for s in range(3)}
    c = ss.convergence(short, scale=2.0)
    check(c.window == (50, 60) and c.state == "moving" and close(c.drift.value, 0.4, 1e-9),
          f"two steps: both in the window ({c.text()})")
    try:
        ss.convergence(flat, scale=0.0)
        check(False, "scale 0 rejected")
    except ValueError:
        pass


def best_step_checks():
    # A curve creeping up to its end (best within 0.02 first reached at the last step) is moving,
    # however flat its end slope; one that reached its level early and stayed is flat.
    late = {s: [(100 * k, 0.02 + 0.004 * k + 0.001 * s) for k in range(1, 31)] for s in range(5)}
    state, reached, window = ss.best_step_state(late, 0.02, higher_is_better=True)
    check(state == "moving" and all(x >= 2500 for x in reached.values()) and window == (2420, 3000),
          f"late best: {state} {reached} {window}")
    early = {s: [(100 * k, min(0.21, 0.03 * k)) for k in range(1, 31)] for s in range(5)}
    state, reached, _ = ss.best_step_state(early, 0.02, higher_is_better=True)
    check(state == "flat" and set(reached.values()) == {700}, f"early best: {state} {reached}")
    loss = {0: [(100, 4.1), (2000, 3.9), (3000, 3.6)]}
    check(ss.best_step_state(loss, 0.02)[0] == "moving", "a loss still falling at the end")
    check(ss.best_step_state({}, 0.02)[0] is None, "no curve")
    # never_left: every point within tol of the first evaluation.
    flat = {s: [(100 * k, 0.62 + 0.001 * (k % 3)) for k in range(1, 21)] for s in range(5)}
    check(ss.never_left(flat, 0.02) is True, "flat at the prior from the first evaluation")
    check(ss.never_left(early, 0.02) is False, "rose from 0.03 to 0.21")
    check(ss.never_left({}, 0.02) is None, "no curve")


def baselines():
    # Exact enumeration (fractions for the maximum): the constants of tests/unit/test_tasks_mqar.cpp.
    cases = [(2, 16, 17 / 16, 0.6498254817749495), (4, 16, 1381 / 1024, 1.2596590597943813),
             (10, 8, 202656935 / 67108864, 1.6600161564138094), (6, 4, 1443 / 512, 1.0807733884431943),
             (5, 5, 1429 / 625, 1.1187137434327616), (3, 2, 9 / 4, 0.4773856262211096)]
    for n, k, emax, ent in cases:
        check(close(ss.expected_max_count(n, k), emax, 1e-12), f"E[max count] n {n} k {k}")
        check(close(ss.expected_plugin_entropy(n, k), ent, 1e-12), f"E[plug-in entropy] n {n} k {k}")
    check(ss.expected_max_count(0, 4) == 0 and close(ss.expected_max_count(7, 1), 7), "edge cases")
    acc, loss = ss.mqar_key_agnostic(2, 16)
    check(close(acc, 0.53125, 1e-14) and close(loss, 15 / 16 * math.log(2), 1e-14), "MQAR P 2, 16 values")
    acc, _ = ss.mqar_key_agnostic(4, 16)
    check(close(acc, 1381 / 4096, 1e-14), "MQAR P 4, 16 values: 1381/4096")
    pooled, _ = ss.mqar_key_agnostic_pooled([2, 4], 16)
    check(close(pooled, (17 / 16 + 1381 / 1024) / 6, 1e-14), f"pooled 2+4: {pooled}")
    acc, loss = ss.most_frequent_symbol(10, 8)
    check(close(acc, 202656935 / 67108864 / 10, 1e-12), "copy memory 10 symbols over 8")
    # Monte Carlo of the most-frequent-value predictor (the C++ test does this on the generator).
    rnd = random.Random(9)
    hits, rows = 0, 20000
    for _ in range(rows):
        vals = [rnd.randrange(16) for _ in range(4)]
        top = max(vals.count(v) for v in vals)
        guess = rnd.choice([v for v in set(vals) if vals.count(v) == top])
        hits += guess == vals[rnd.randrange(4)]
    check(abs(hits / rows - 1381 / 4096) < 4 * math.sqrt(0.25 / rows), f"Monte Carlo {hits / rows}")


def main():
    quantiles()
    intervals()
    trends()
    rank_tests()
    convergence_checks()
    best_step_checks()
    baselines()
    return finish("test_seqlab_stats: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
