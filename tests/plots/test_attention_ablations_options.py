#!/usr/bin/python3
"""plots/plot_attention_ablations.py on the committed fixture tests/plots/fixtures/
attention_ablations_options/ (CSVs and meta.json of a real tiny run of the binary — d_model 8, 20
updates, 3 seeds, learning rate chosen from a grid of two, shared_match = d_ff, half the heads
pruned — with the arms of the newer options: Q/K sharing with attention to self masked, learned
vs sinusoidal positions, head pruning, prefix LM and the compute-matched encoder-decoder).

Checks: every figure of these sub-designs (PNG and PDF) is written, the pruning figure among
them; verdicts() returns one row per sub-claim the arms allow; the rows' effects recomputed from
the CSVs (the masked shared-QK arm vs separate on test loss; pruned vs full, in its task family's
pruning row, the families being those with a model off both ends); the equivalence rule
of "no worse" on edited copies (within the margin: holds, far worse: fails), the fixture's own row
'lr censored' (every pilot chose an end of a two-rate grid); the compute control
from forward_macs; a pruning CSV without a column makes the script exit 2 naming it.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import (check, check_figures, check_verdict_rows, drop_column,  # noqa: E402
                               finish, fixture_dir, fresh, import_plots_module, plot_script,
                               read_rows, rewrite_csv, run_script)

SCRIPT = plot_script("attention_ablations")
FIXTURE = fixture_dir("attention_ablations_options")
plot = import_plots_module("plot_attention_ablations")
ss = import_plots_module("seqlab_stats")

NAME = "attention_ablations"


def table(path):
    rows = read_rows(path)
    return [dict(zip(rows[0], r)) for r in rows[1:]]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        res = fresh(FIXTURE, tmp, NAME)
        r = run_script(SCRIPT, res)
        check(r.returncode == 0, f"plot script exit {r.returncode}: {r.stderr}")
        check_figures(res, [f"{NAME}_{stem}" for stem in ("qk", "qk_curves", "pruning", "arch")],
                      "missing figure {path}")

        rows = plot.verdicts(res)
        check_verdict_rows(rows)
        claims = [v["claim"] for v in rows]
        main_rows = table(os.path.join(res, NAME + ".csv"))
        prune = table(os.path.join(res, NAME + "_pruning.csv"))
        pruned_arms = sorted({p["arm"] for p in prune})
        # The task families with a pruned model off both ends of its scale (full test accuracy, or
        # loss for lm, farther than 0.02 from the optimum and from chance) in most of its seeds,
        # judged per seed, computed here by hand.
        first = {x["arm"]: x for x in main_rows if x["seed"] == "0"}
        families = set()
        for a in pruned_arms:
            m, t = first[a], first[a]["task"]
            col = "full_test_loss" if t == "lm" else "full_test_accuracy"
            full = [float(p[col]) for p in prune if p["arm"] == a and float(p["fraction"]) == 0.5]
            if t == "lm":
                off = [lvl - float(m["optimal_loss"]) > 0.02 and float(m["chance_loss"]) - lvl > 0.02 for lvl in full]
            else:  # and at least a quarter of the way from chance to the optimum (off its plateau)
                lo, hi = float(m["chance_accuracy"]), float(m["best_accuracy"])
                off = [hi - lvl > 0.02 and lvl - lo > 0.02 and (lvl - lo) / (hi - lo) >= 0.25 for lvl in full]
            if 2 * sum(off) > len(off):
                families.add(t)
        # (the prev_token models, at 0.13-0.35 against chance 1/8, are on their plateau)
        check(families == {"lm"}, f"informative pruning families: {families}")
        # symmetry, 3 Q/K rows (separate vs shared, masked vs separate, masked vs shared), the
        # positions row, one pruning row per such family and one across them, 3 lm architecture
        # rows (decoder suits lm, compute-matched encoder-decoder, prefix LM).
        want = 1 + 3 + 1 + len(families) + 1 + 3
        check(len(rows) == want, f"verdicts() returned {len(rows)} rows, expected {want}: {claims}")
        check(len(pruned_arms) == 6, f"pruned arms (single-stack, 2 heads): {pruned_arms}")
        check(len(set(claims)) == len(claims), f"two rows share a claim: {claims}")
        check(any("self masked" in c and "no worse than separate" in c for c in claims), "no masked-QK row")
        check(any(c.startswith("Masking attention to self") for c in claims), "no masked vs unmasked row")
        check(any(c.startswith("Learned and sinusoidal positions") for c in claims), "no positions row")
        check(any(c.startswith("At equal compute an encoder-decoder") for c in claims), "no compute row")
        check(any(c.startswith("A prefix LM") for c in claims), "no prefix-LM row")
        # Every cell chose its learning rate from the grid and recorded the pilot.
        for x in main_rows:
            check(x["lr_grid"] == "0.003 0.01" and x["lr"] in ("0.003", "0.01"), f"lr pilot: {x['arm']}")

        # The masked shared-QK row: paired difference of test losses, recomputed.
        loss = {}
        for x in main_rows:
            if x["task"] == "prev_token" and x["arm"].count("/") == 0:
                loss.setdefault(x["qk"], {})[int(x["seed"])] = float(x["test_loss"])
        e = ss.paired_difference(loss["separate"], loss["shared_noself"])
        row = next(v for v in rows if "self masked" in v["claim"] and "no worse" in v["claim"])
        check(e.fmt(3) in row["effect"], f"masked-QK effect {e.fmt(3)} not in {row['effect']!r}")
        check(row["checks"]["controls"] == "yes", f"shared_match = d_ff matches the counts: {row['checks']}")

        # A pruning row: full − pruned test loss per seed (loss task), recomputed from the pruning CSV;
        # the previous-token models, on their plateau, are listed as not informative.
        arm = "lm:decoder:separate:2"
        at = {int(p["seed"]): p for p in prune if p["arm"] == arm and float(p["fraction"]) == 0.5}
        e = ss.paired_difference({s: -float(p["test_loss"]) for s, p in at.items()},
                                 {s: -float(p["full_test_loss"]) for s, p in at.items()})
        prow = [v for v in rows if v["claim"].startswith("Half of the heads can be removed at test time with little "
                                                         "loss (") and "LM" in v["claim"]]
        check(len(prow) == 1 and e.fmt(3) in prow[0]["effect"], f"pruning effect {e.fmt(3)} not in {prow}")
        across = [v for v in rows if "across task families" in v["claim"] and v["claim"].startswith("Half")]
        check(len(across) == 1 and "previous token" in across[0]["measured"] and "plateau" in across[0]["measured"],
              f"the plateau family is named as not informative: {[v['measured'][-300:] for v in across]}")

        # The compute control: forward multiply-adds of the 2P encoder-decoder within ±30 % of the
        # decoder-only model's.
        macs = {x["arch"]: float(x["forward_macs"]) for x in main_rows if x["task"] == "lm"}
        ok = abs(macs["encoder_decoder_compute"] / macs["decoder"] - 1) <= plot.MACS_TOLERANCE
        crow = next(v for v in rows if v["claim"].startswith("At equal compute"))
        check(crow["checks"]["controls"] == ("yes" if ok else "no"), f"compute control {macs}: {crow['checks']}")

        # The fixture's 20-update arms sit on their plateau and chose an end of a two-rate grid, so
        # their rows are 'not converged' or 'lr censored' (checked here); the edited copy below
        # moves the previous-token arms off the plateau (accuracy 0.6) with a four-rate pilot that
        # chose inside its grid, where the no-worse rule itself decides.
        row = next(v for v in rows if "self masked" in v["claim"] and "no worse" in v["claim"])
        check(row["verdict"] == "inconclusive" and "lr censored" in row["reason"], f"two-rate grid: {row['verdict']}")
        # "No worse" is an equivalence-type rule: the masked arm's loss within the margin of the
        # separate arm's holds; far above it fails.
        ed = fresh(FIXTURE, tmp, "edited")
        path = os.path.join(ed, NAME + ".csv")

        def set_noself_loss(delta):
            def fn(header, body):
                i_t, i_q, i_a, i_s, i_l = (header.index(c) for c in ("task", "qk", "arm", "seed", "test_loss"))
                i_acc, i_g, i_p = (header.index(c) for c in ("test_accuracy", "lr_grid", "pilot_val_losses"))
                sep = {b[i_s]: float(b[i_l]) for b in body
                       if b[i_t] == "prev_token" and b[i_q] == "separate" and "/" not in b[i_a]}
                for b in body:
                    if b[i_t] == "prev_token" and "/" not in b[i_a]:
                        b[i_acc], b[i_g], b[i_p] = "0.6", "0.001 0.003 0.01 0.03", "1.5 0.9 1.2 1.6"
                    if b[i_t] == "prev_token" and b[i_q] == "shared_noself":
                        b[i_l] = repr(sep[b[i_s]] + delta[int(b[i_s]) % len(delta)])
                return header, body
            return fn

        def noself_verdict():
            return next(v for v in plot.verdicts(ed) if "self masked" in v["claim"]
                        and "no worse" in v["claim"])["verdict"]
        for delta, want in (([0.001, -0.002, 0.0], "holds"), ([0.5, 0.6, 0.55], "fails")):
            rewrite_csv(path, set_noself_loss(delta))
            check(noself_verdict() == want, f"masked shared-QK loss + {delta}: {want} (got {noself_verdict()})")

        # The pruning CSV without a column: exit 2 naming it.
        bad = fresh(FIXTURE, tmp, "bad")
        drop_column(os.path.join(bad, NAME + "_pruning.csv"), "full_test_loss")
        r = run_script(SCRIPT, bad)
        check(r.returncode == 2 and "full_test_loss" in r.stderr, f"missing column: {r.returncode} {r.stderr!r}")
    return finish("ok")


if __name__ == "__main__":
    sys.exit(main())
