#!/usr/bin/python3
"""plots/plot_norm_stability.py on its committed fixture (tests/plots/fixtures/norm_stability/:
the CSVs and meta.json of a real tiny run of the norm_stability binary, command line in the
meta.json: configs/tiny.ini with 3 seeds, two padding conditions and PowerNorm in the batch study).

Checks: the script exits 0 and writes every figure as PNG and PDF and the learning-rate
sensitivity table; lr_sensitivity() and the warm-up verdict against values computed by hand on
synthetic sweeps (Post-LN stalling while Pre-LN degrades: holds, with the interaction part;
equal warm-up effects: the interaction fails it; equal placements: never holds; reversed: fails;
the disclosure on a standard run of seeds 0-4 and the verdict on a sibling _confirm run's fresh
seeds only); the split train/inference rows (in distribution fails on its own; the shift row
inconclusive with the seeds needed; one training range); small batches decided by the harm part
alone, the noise part shown and not counted; PowerNorm against masked BN, naive BN beside it;
verdicts() returns one well-formed row per sub-claim, computed from the CSVs (a changed CSV
changes a verdict), writes nothing; a CSV without a column makes the script exit 2 naming the column (and verdicts() raise
DataError); a missing CSV likewise names the file.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import (check, check_figures, check_verdict_rows, drop_column,  # noqa: E402
                               finish, fixture_dir, fresh, import_plots_module, plot_script,
                               rewrite_csv, run_script)

SCRIPT = plot_script("norm_stability")
FIXTURE = fixture_dir("norm_stability")
FIGURES = ["norm_stability_lr_stability", "norm_stability_init_grads", "norm_stability_padding",
           "norm_stability_shift", "norm_stability_batch", "norm_stability_fluctuation"]
VERDICTS = ("holds", "fails", "depends on", "inconclusive")


def _column(path, col, **where):
    """The values of `col` in the CSV's rows that match `where`."""
    import csv
    with open(path, newline="") as f:
        return [r[col] for r in csv.DictReader(f) if all(r[k] == v for k, v in where.items())]


def flat_curves(study):
    """A rewrite_csv edit of the steps table: every training-loss row of `study` set to 2.0, so the
    convergence check sees flat curves and cannot decide a verdict."""
    def fn(header, body):
        i, j = header.index("study"), header.index("loss")
        for b in body:
            if b[i] == study:
                b[j] = "2.0"
        return header, body
    return fn


def main():
    mod = import_plots_module("plot_norm_stability")
    with tempfile.TemporaryDirectory() as tmp:
        # 1. Figures.
        res = fresh(FIXTURE, tmp, "ok")
        r = run_script(SCRIPT, res)
        check(r.returncode == 0, f"plot script exits 0 (stderr: {r.stderr[-800:]})")
        check_figures(res, FIGURES)
        table = os.path.join(res, "figures", "norm_stability_lr_sensitivity.csv")
        check(os.path.isfile(table), "the learning-rate sensitivity table is written")
        if os.path.isfile(table):
            lrs_vals = _column(table, "lr_sensitivity")
            check(len(lrs_vals) == 24 and all(float(x) >= 0 for x in lrs_vals),
                  f"one row per depth, placement, warm-up and seed, LRS >= 0 ({len(lrs_vals)} rows)")

        # 2. Verdicts: one row per sub-claim, well formed, and nothing written.
        res2 = fresh(FIXTURE, tmp, "verdicts")
        before = sorted(os.listdir(res2))
        rows = mod.verdicts(res2)
        check(sorted(os.listdir(res2)) == before, "verdicts() writes nothing")
        check(len(rows) == 8, f"8 verdict rows (got {len(rows)})")
        check_verdict_rows(rows, VERDICTS + ("by construction",))
        claims = " ".join(r["claim"] for r in rows)
        for word in ("Padding", "Small batches", "LayerNorm uses the same statistics", "harms BatchNorm in distribution",
                     "Under a shift", "PowerNorm", "Pre-LN", "At initialisation"):
            check(word in claims, f"a sub-claim about {word}")

        def row_of(res, text):
            return [r for r in mod.verdicts(res) if text in r["claim"]][0]
        # The fixture's numbers: LayerNorm's modes agree exactly (by construction, shown); the tiny
        # model stays near the unigram baseline, so the padding rule says floor.
        check(row_of(res2, "LayerNorm uses")["verdict"] == "by construction", "LayerNorm modes: by construction")
        pad = row_of(res2, "Padding pollutes")
        check(pad["verdict"] == "inconclusive: floor", f"padding on the fixture: {pad['verdict']} ({pad['reason']})")
        check("±0.02 nats" in pad["margin"] and "paired t over 3 seeds" in pad["test"],
              f"padding row parts: {pad['margin']!r}, {pad['test']!r}")

        # 3. The verdicts are computed from the CSVs.
        res3 = fresh(FIXTURE, tmp, "edited")
        eval_csv = os.path.join(res3, "norm_stability_eval.csv")

        def set_loss(fn_loss):
            def fn(header, body):
                i = {k: header.index(k) for k in ("study", "norm", "mode", "loss", "seed", "train_pad_max")}
                for b in body:
                    v = fn_loss(b[i["study"]], b[i["norm"]], b[i["mode"]], int(b[i["seed"]]), float(b[i["train_pad_max"]]))
                    if v is not None:
                        b[i["loss"]] = str(v)
                return header, body
            return fn
        # LayerNorm's train mode differs from its eval mode: the construction is contradicted.
        rewrite_csv(eval_csv, set_loss(lambda s, n, m, seed, p: 2.0 if n == "layer_norm" and m == "train" else None))
        got = row_of(res3, "LayerNorm uses")
        check(got["verdict"] == "fails" and "defect" in got["reason"], f"LayerNorm gap -> fails ({got['verdict']})")
        # Naive BatchNorm 0.3 nats worse than the masked one, both well below the baseline: holds.
        res3 = fresh(FIXTURE, tmp, "edited2")
        eval_csv = os.path.join(res3, "norm_stability_eval.csv")

        def padding_losses(gap):
            def f(s, n, m, seed, p):
                if s != "padding":
                    return None
                return {"batch_norm": 2.0 + gap, "masked_batch_norm": 2.0}.get(n, 2.1) + 0.001 * seed
            return f
        rewrite_csv(eval_csv, set_loss(padding_losses(0.3)))
        got = row_of(res3, "Padding pollutes")
        check(got["verdict"] in ("holds", "inconclusive: not converged"), f"naive BN 0.3 worse -> holds ({got['verdict']}: {got['reason']})")
        rewrite_csv(eval_csv, set_loss(padding_losses(0.0)))
        got = row_of(res3, "Padding pollutes")
        check(got["verdict"] in ("fails", "inconclusive: not converged") and "within" in got["reason"],
              f"no gap -> within the margin ({got['verdict']}: {got['reason']})")

        # Train/inference: BatchNorm's eval mode equal to precise BN, every loss off the floor. With both
        # training padding ranges the shift part decides too (no difference: fails); with one range
        # the rule cannot tell fails from 'depends on the shift': inconclusive.
        res7 = fresh(FIXTURE, tmp, "mismatch")
        flat = set_loss(lambda s, n, m, seed, p: 2.0 + 0.001 * seed if s == "padding" else None)
        rewrite_csv(os.path.join(res7, "norm_stability_eval.csv"), flat)
        got = row_of(res7, "in distribution")
        check(got["verdict"] in ("fails", "inconclusive: not converged"), f"no harm in distribution -> fails ({got['verdict']}: {got['reason']})")
        check("cosine-to-0" in got["reason"] and "frozen weights" in got["reason"],
              f"the in-distribution row states the schedule caveat ({got['reason']})")
        got = row_of(res7, "Under a shift")
        check(got["verdict"] in ("fails", "inconclusive: not converged"), f"no harm under the shift -> fails ({got['verdict']}: {got['reason']})")
        # No harm in distribution but a shift part whose interval straddles the margin: two rows, the
        # first fails on its own (no special case turns it into inconclusive), the second is
        # inconclusive and says how many seeds would decide.
        res9 = fresh(FIXTURE, tmp, "mismatch_undecided")
        lo9 = min(float(r) for r in _column(os.path.join(res9, "norm_stability.csv"), "train_pad_max", study="padding"))
        q9 = max(float(r) for r in _column(os.path.join(res9, "norm_stability_eval.csv"), "test_pad", study="padding"))
        noise = {0: 0.2, 1: -0.15, 2: 0.05}  # BN's shift cost − LN's: mean +0.033, interval about ±0.44

        def noisy_shift(header, body):
            i = {k: header.index(k) for k in ("study", "norm", "loss", "seed", "train_pad_max", "test_pad")}
            for b in body:
                if b[i["study"]] == "padding":
                    v = 2.0 + 0.001 * int(b[i["seed"]])
                    if (b[i["norm"]] == "batch_norm" and float(b[i["train_pad_max"]]) == lo9
                            and float(b[i["test_pad"]]) == q9):
                        v += noise[int(b[i["seed"]])]
                    b[i["loss"]] = str(v)
            return header, body
        rewrite_csv(os.path.join(res9, "norm_stability_eval.csv"), noisy_shift)
        got = row_of(res9, "in distribution")
        check(got["verdict"] == "fails", f"in distribution, no harm -> fails beside an undecided shift row "
              f"({got['verdict']}: {got['reason']})")
        got = row_of(res9, "Under a shift")
        check(got["verdict"] == "inconclusive" and "underpowered" in got["reason"] and "seeds would decide" in got["reason"],
              f"shift undecided -> inconclusive, underpowered with the seeds needed ({got['verdict']}: {got['reason']})")
        # The planning figure by hand: mean 0, SD 0.028 (se 0.028/sqrt 5), margin 0.02: the smallest n with
        # t_{0.975, n-1}·0.028/sqrt(n) < 0.02; n = 10: 2.262·0.028/3.162 = 0.02003 (not below), n = 11:
        # 2.228·0.028/3.317 = 0.0188, so 11.
        est = mod.ss.Estimate(0.0, -1.0, 1.0, 5, se=0.028 / 5 ** 0.5, df=4)
        check(mod.seeds_needed(est, 0.02) == 11, f"seeds_needed(mean 0, SD 0.028, margin 0.02) = 11 "
              f"(got {mod.seeds_needed(est, 0.02)})")
        lo = min(float(r) for r in _column(os.path.join(res7, "norm_stability.csv"), "train_pad_max", study="padding"))

        def one_range(header, body):
            i, j = header.index("train_pad_max"), header.index("study")
            return header, [b for b in body if b[j] != "padding" or float(b[i]) != lo]
        for t in ("", "_steps", "_eval", "_pilot"):
            rewrite_csv(os.path.join(res7, f"norm_stability{t}.csv"), one_range)
        got = row_of(res7, "Under a shift")
        check(got["verdict"] == "inconclusive" and "shift part" in got["reason"],
              f"one training padding range -> shift row inconclusive ({got['verdict']}: {got['reason']})")
        got = row_of(res7, "in distribution")
        check(got["verdict"] in ("fails", "inconclusive: not converged"),
              f"one training padding range: the in-distribution row still decides ({got['verdict']}: {got['reason']})")

        # Small batches: the harm part decides; the noise ratio is shown as sampling by construction and
        # not counted. Flat training curves (so convergence cannot decide), LN 2.0 (+0.001·seed) at every
        # batch; BN the same plus `harm` at the smallest batch: slope of BN − LN = −harm per doubling.
        def batch_case(name, harm, noise_ratio):
            res = fresh(FIXTURE, tmp, name)
            bmin = min(int(float(b)) for b in _column(os.path.join(res, "norm_stability.csv"), "batch", study="batch"))

            def losses(header, body):
                i = {k: header.index(k) for k in ("study", "norm", "batch", "loss", "seed")}
                for b in body:
                    if b[i["study"]] == "batch":
                        extra = harm if b[i["norm"]] == "batch_norm" and int(float(b[i["batch"]])) == bmin else 0.0
                        b[i["loss"]] = str(2.0 + 0.001 * int(b[i["seed"]]) + extra)
                return header, body
            rewrite_csv(os.path.join(res, "norm_stability_eval.csv"), losses)

            rewrite_csv(os.path.join(res, "norm_stability_steps.csv"), flat_curves("batch"))

            def dev(header, body):
                i = {k: header.index(k) for k in ("study", "batch", "mu_dev_late", "seed")}
                for b in body:
                    if b[i["study"]] == "batch":
                        small = int(float(b[i["batch"]])) == bmin
                        b[i["mu_dev_late"]] = str((0.01 * noise_ratio if small else 0.01) * (1 + 0.01 * int(b[i["seed"]])))
                return header, body
            rewrite_csv(os.path.join(res, "norm_stability.csv"), dev)
            return row_of(res, "Small batches")
        got = batch_case("batch_harm_no_noise", 0.1, 1.0)
        check(got["verdict"] == "holds", f"BN 0.1 worse at the smallest batch, no noise: harm decides -> holds "
              f"({got['verdict']}: {got['reason']})")
        check("sampling by construction (shown, not counted)" in got["reason"] and "contrast" in got["reason"],
              f"the noise part is labelled by construction, the contrast beside the slope ({got['reason']})")
        check("-0.1 [-0.1, -0.1]" in got["effect"] and "contrast 2 vs 4 +0.1" in got["measured"],
              f"the slope by hand, -0.1 per doubling ({got['effect']})")
        got = batch_case("batch_noise_no_harm", 0.0, 4.0)
        check(got["verdict"] == "fails", f"statistics 4x noisier but no harm: fails, the noise counts for nothing "
              f"({got['verdict']}: {got['reason']})")
        check("x4.00" in got["reason"], f"BN's deviation ratio shown ({got['reason']})")

        # PowerNorm is judged against masked BatchNorm (Shen et al.'s baseline); naive BN, which PN beats by
        # construction, is beside it: PN equal to masked BN and LN, naive BN 0.3 worse -> fails (within).
        res11 = fresh(FIXTURE, tmp, "power_norm")
        rewrite_csv(os.path.join(res11, "norm_stability_eval.csv"),
                    set_loss(lambda s, n, m, seed, p: (2.3 if n == "batch_norm" else 2.0) + 0.001 * seed
                             if s == "padding" else None))
        rewrite_csv(os.path.join(res11, "norm_stability_steps.csv"), flat_curves("padding"))
        got = row_of(res11, "PowerNorm")
        check(got["verdict"] == "fails" and "better than masked BatchNorm: fails" in got["reason"],
              f"PN = masked BN, naive BN worse: fails, the naive comparison not counted ({got['verdict']}: {got['reason']})")
        check("by construction" in got["measured"] and "+0.3" in got["measured"],
              f"naive BN − PN beside it, by construction ({got['measured']})")

        # Pre vs Post-LN: the learning-rate sensitivity (Wortsman et al. 2023 §2.2) of each sweep.
        # By hand first: the mean of the capped losses minus the best, a diverged run (nan) and a
        # run above the initial loss both counting as the initial loss.
        got = mod.lr_sensitivity({0.001: 2.0, 0.01: 2.1, 0.1: 3.1, 1.0: float("nan")}, 4.0)
        check(all(abs(a - b) < 1e-12 for a, b in zip(got, (0.8, 2.0, 2.8))),
              f"LRS of 2.0, 2.1, 3.1, diverged with l0 4: (0.8, 2.0, 2.8) (got {got})")
        got = mod.lr_sensitivity({0.01: 2.0, 0.1: 5.0}, 4.0)
        check(abs(got[0] - 1.0) < 1e-12, f"a loss above l0 is capped at l0: LRS 1.0 (got {got[0]})")
        check(mod.lr_sensitivity({0.01: 4.5, 0.1: 4.6}, 4.0)[0] == 0.0, "no run below l0: LRS 0 (the floor)")

        # A synthetic warm-up table replacing the fixture's (depth 2 only; 4 rates, l0 = 4 nats; seed
        # s adds e = 0.01·s to every finite loss). Pre-LN degrades gracefully: 2.0, 2.1, 2.4, 2.8 (+e)
        # at every warm-up: mean 2.325 + e, best 2.0 + e, LRS 0.325. Post-LN without warm-up stalls
        # above 0.01 and diverges at the top: 2.0, 2.1, 3.1 (+e), diverged (4): mean 2.8 + 0.75e,
        # best 2.0 + e, LRS 0.8 − 0.25e = 0.8, 0.7975, 0.795. Post-LN with warm-up 100 stalls only at
        # the top: 2.0, 2.1, 2.3, 3.1 (+e): mean 2.375 + e, LRS 0.375. So Pre − Post without warm-up
        # = −0.475 + 0.25e, mean −0.4725, and Post with − without = −0.425 + 0.25e, mean −0.4225, both
        # far below −0.05: holds.
        LRS_GRID = (0.001, 0.01, 0.1, 1.0)
        NAN = float("nan")
        PRE = (2.0, 2.1, 2.4, 2.8)
        POST = {0: (2.0, 2.1, 3.1, NAN), 100: (2.0, 2.1, 2.3, 3.1)}

        def synthetic_warmup(post_curves, pre_curves=None, seeds=range(3)):
            pre_curves = pre_curves or {0: PRE, 100: PRE}

            def fn(header, body):
                i = {k: header.index(k) for k in ("study", "num_layers", "norm_placement", "warmup_steps", "lr",
                                                  "seed", "initial_loss", "baseline_loss", "valid_loss",
                                                  "diverged", "failed")}
                template = next(b for b in body if b[i["study"]] == "warmup")
                out = [b for b in body if b[i["study"]] != "warmup"]
                base = float(template[i["baseline_loss"]])
                for seed in seeds:
                    for pl in ("pre", "post"):
                        for w in (0, 100):
                            for lr, v in zip(LRS_GRID, pre_curves[w] if pl == "pre" else post_curves[w]):
                                b = list(template)
                                v = v + 0.01 * seed
                                b[i["num_layers"]], b[i["norm_placement"]], b[i["warmup_steps"]] = "2", pl, str(w)
                                b[i["lr"]], b[i["seed"]], b[i["initial_loss"]] = f"{lr:g}", str(seed), "4"
                                b[i["valid_loss"]] = "nan" if v != v else f"{v:.6f}"
                                b[i["diverged"]] = "1" if v != v else "0"
                                b[i["failed"]] = "1" if v != v or v >= base - 0.1 else "0"
                                out.append(b)
                return header, out
            return fn
        res8 = fresh(FIXTURE, tmp, "warmup_lrs")
        rewrite_csv(os.path.join(res8, "norm_stability.csv"), synthetic_warmup(POST))
        sweeps = mod.warmup_sweeps(mod.Data(res8))
        for (pl, w), want in ((("pre", 0), [0.325] * 3), (("post", 0), [0.8, 0.7975, 0.795]),
                              (("post", 100), [0.375] * 3)):
            got = [sweeps[(2, pl, w, s)]["lrs"] for s in range(3)]
            check(all(abs(a - b) < 1e-6 for a, b in zip(got, want)), f"LRS {pl}/w{w}: {want} (got {got})")
        got = row_of(res8, "Pre-LN trains")
        check(got["verdict"] == "holds", f"Post-LN stalls, Pre-LN degrades: holds ({got['verdict']}: {got['reason']})")
        check("-0.472" in got["effect"] and "-0.422" in got["effect"],
              f"the paired LRS differences by hand, -0.4725 and -0.4225 ({got['effect']})")
        # Pre-LN's curves are the same at every warm-up, so the interaction (Post's warm-up effect −
        # Pre's) equals Post's warm-up effect, −0.4225: a third part, holding.
        check("interaction: Post's warm-up effect − Pre's: holds" in got["reason"]
              and got["effect"].count("-0.422") == 2,
              f"the interaction is a part of the verdict, -0.4225 by hand ({got['reason']}; {got['effect']})")
        check("mean capped loss" in got["measured"] and "co-primary" in got["measured"],
              "the mean capped loss is reported beside the LRS")
        check(not got["reason"].startswith("rule revised"), "no disclosure on a tiny-scale run")
        check("±0.05 nats" in got["margin"], f"LRS margin stated ({got['margin']})")
        check("threshold criterion" in got["measured"] and "half-gap criterion" in got["measured"],
              "the largest stable rate under both stall criteria is shown beside the verdict")
        # Warm-up helps Pre-LN exactly as much as Post-LN (Pre 2.0, 2.1, 2.4, diverged at w0: LRS
        # 0.625 − 0.25e; 2.0, 2.1, 2.2, 2.5 at w100: LRS 0.2): Pre − Post without warm-up −0.175 and
        # Post's warm-up effect −0.425 + 0.25e hold, but the interaction is 0 in every seed: within
        # ±0.05, so the verdict fails (not 'depends on the depth': one depth, a failing part).
        res8 = fresh(FIXTURE, tmp, "warmup_no_interaction")
        rewrite_csv(os.path.join(res8, "norm_stability.csv"),
                    synthetic_warmup(POST, {0: (2.0, 2.1, 2.4, NAN), 100: (2.0, 2.1, 2.2, 2.5)}))
        got = row_of(res8, "Pre-LN trains")
        check(got["verdict"] == "fails" and "interaction: Post's warm-up effect − Pre's: fails" in got["reason"]
              and "Pre − Post without warm-up: holds" in got["reason"],
              f"equal warm-up effects -> the interaction fails the claim ({got['verdict']}: {got['reason']})")
        # The rule was revised after the standard run's seeds 0-4 were seen: on such a run the row says
        # so, with the pre-specified rule's verdict; and a sibling <dir>_confirm run reports the verdict
        # on its fresh seeds only (here seeds 5-7 where Pre = Post: fails), seeds 0-2 there ignored.
        res10 = fresh(FIXTURE, tmp, "warmup_std")
        rewrite_csv(os.path.join(res10, "norm_stability.csv"), synthetic_warmup(POST))
        meta_path = os.path.join(res10, "norm_stability.meta.json")
        import json
        with open(meta_path) as f:
            meta = json.load(f)
        meta["config"]["scale"] = "standard"
        with open(meta_path, "w") as f:
            json.dump(meta, f)
        got = row_of(res10, "Pre-LN trains")
        check(got["verdict"] == "holds" and got["reason"].startswith(
            "rule revised after seeing this run; pre-specified rule (largest stable rate, threshold criterion): "),
            f"standard seeds 0-4: the revision is disclosed ({got['reason'][:160]})")
        check("confirmation" not in got["reason"], "no confirmation without the sibling directory")
        conf = fresh(FIXTURE, tmp, "warmup_std_confirm")
        rewrite_csv(os.path.join(conf, "norm_stability.csv"), synthetic_warmup(POST))  # seeds 0-2: holds

        def add_fresh(header, body):  # seeds 5-7 with Post-LN = Pre-LN
            _, extra = synthetic_warmup({0: PRE, 100: PRE}, seeds=range(5, 8))(header, [list(b) for b in body])
            j = header.index("seed")
            return header, body + [b for b in extra if b[header.index("study")] == "warmup" and int(b[j]) >= 5]
        rewrite_csv(os.path.join(conf, "norm_stability.csv"), add_fresh)
        got = row_of(res10, "Pre-LN trains")
        # The confirmation is the pre-registered test: it decides, the revised-on seeds are shown beside.
        check(got["reason"].startswith("decided by the confirmation on fresh seeds 5-7 (rule fixed before they "
                                       "ran): fails") and "exploratory seeds 0-2: holds" in got["reason"]
              and got["verdict"] == "fails",
              f"the fresh seeds' verdict decides, the original one beside ({got['verdict']}: {got['reason'][:300]})")
        check("Confirmation on fresh seeds 5, 6, 7" in got["measured"], "the fresh seeds are named in measured")
        v, _, _ = mod.warmup_verdict_on(mod.Data(conf))
        check(v.kind != "fails", f"all ten seeds together would not fail (so the seeds 0-2 were left out): {v.kind}")
        # The placements equal (Post-LN's curves = Pre-LN's at every warm-up): no difference, so the
        # claim of a lower sensitivity cannot hold (equivalence within ±0.05: fails).
        res8 = fresh(FIXTURE, tmp, "warmup_equal")
        rewrite_csv(os.path.join(res8, "norm_stability.csv"), synthetic_warmup({0: PRE, 100: PRE}))
        got = row_of(res8, "Pre-LN trains")
        check(got["verdict"] != "holds" and got["verdict"] == "fails" and "within" in got["reason"],
              f"equal placements -> fails, never holds ({got['verdict']}: {got['reason']})")
        # Post-LN graceful, Pre-LN stalling: the opposite direction fails too.
        res8 = fresh(FIXTURE, tmp, "warmup_reversed")

        def swap(header, body):
            j = header.index("norm_placement")
            for b in body:
                if b[j] in ("pre", "post"):
                    b[j] = "post" if b[j] == "pre" else "pre"
            return header, body
        rewrite_csv(os.path.join(res8, "norm_stability.csv"), synthetic_warmup({0: POST[0], 100: POST[0]}))
        rewrite_csv(os.path.join(res8, "norm_stability.csv"), swap)
        got = row_of(res8, "Pre-LN trains")
        check(got["verdict"] == "fails" and "above" in got["reason"],
              f"Pre-LN the sensitive one -> fails ({got['verdict']}: {got['reason']})")

        # Gradients at initialisation: Theorem 1's last-layer comparison across depths is reported, and the
        # margin is stated as a choice.
        got = row_of(res2, "At initialisation")
        check("Theorem 1's 1/sqrt(L) predicts" in got["measured"] and "a choice" in got["rule"],
              f"init grads: the last-layer comparison and the margin's status ({got['measured']})")

        # One seed makes every rule that needs seeds inconclusive.
        res4 = fresh(FIXTURE, tmp, "one_seed")

        def one_seed(header, body):
            i = header.index("seed")
            return header, [b for b in body if b[i] == "0"]
        for t in ("", "_steps", "_eval", "_pilot", "_init_grads"):
            rewrite_csv(os.path.join(res4, f"norm_stability{t}.csv"), one_seed)
        check(all(r["verdict"].startswith("inconclusive") for r in mod.verdicts(res4) if r["kind"] != "by construction"),
              "one seed -> every verdict inconclusive")

        # 4. A missing column: exit 2 naming it; verdicts() raises DataError naming it.
        for table, col in (("norm_stability.csv", "valid_loss"), ("norm_stability_steps.csv", "mu_dev"),
                           ("norm_stability_eval.csv", "test_pad"), ("norm_stability_init_grads.csv", "grad_norm")):
            res5 = fresh(FIXTURE, tmp, f"drop_{col}")
            drop_column(os.path.join(res5, table), col)
            r = run_script(SCRIPT, res5)
            check(r.returncode == 2, f"missing {col}: exit 2 (got {r.returncode})")
            check(col in r.stderr, f"missing {col}: named on stderr ({r.stderr.strip()!r})")
            check(r.stderr.count("\n") == 1, f"missing {col}: one line on stderr")
            try:
                mod.verdicts(res5)
                check(False, f"verdicts() raises DataError for missing {col}")
            except mod.st.DataError as e:
                check(col in str(e), f"DataError names {col}: {e}")

        # 5. A missing file.
        res6 = fresh(FIXTURE, tmp, "no_pilot")
        os.remove(os.path.join(res6, "norm_stability_pilot.csv"))
        r = run_script(SCRIPT, res6)
        check(r.returncode == 2 and "norm_stability_pilot.csv" in r.stderr,
              f"missing pilot CSV: exit 2 naming it ({r.returncode}, {r.stderr.strip()!r})")

    return finish("test_norm_stability: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
