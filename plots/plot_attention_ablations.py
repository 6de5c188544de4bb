#!/usr/bin/python3
"""Figures and verdicts for experiments/attention_ablations (claim 5: separate W_Q/W_K matter,
several heads beat one, encoder-only / decoder-only / encoder-decoder suit different tasks).

usage: plot_attention_ablations.py [RESULTS_DIR]   (default: results/attention_ablations)
Reads attention_ablations.csv, attention_ablations_curve.csv, attention_ablations.meta.json and,
when present, attention_ablations_pruning.csv and attention_ablations_by_length.csv from
RESULTS_DIR; writes into RESULTS_DIR/figures:
  attention_ablations_qk.{png,pdf}         separate vs shared W_Q = W_K (vs shared with attention to
                                           self masked, and with unit-length keys too): test
                                           metric and measured logit asymmetry, every seed
  attention_ablations_qk_curves.{png,pdf}  the eval metric during training per Q/K arm, every seed
  attention_ablations_heads.{png,pdf}      test metric (every seed, fresh seeds open) and chosen
                                           learning rate against n_heads
  attention_ablations_pruning.{png,pdf}    test metric against the share of heads removed, per task
  attention_ablations_arch.{png,pdf}       the architectures per task, every seed, parameter counts
  attention_ablations_lengths.{png,pdf}    reverse: accuracy per source length (by_length table)
(a figure whose sub-design has no arms in the CSV is skipped). Exits 2 naming a missing or
malformed file or column. verdicts(RESULTS_DIR) returns the report rows (plots/make_report.py).

Arms are task:arch:qk:n_heads[/key=value...]; the overrides are part of an arm's context. Sub-designs
are recognised from the arms present, each a group of arms that differ in one field only:
  Q/K sharing:  the same (task, arch, n_heads, overrides) with qk = separate and shared and/or
                shared_noself and/or shared_noself_norm (Reformer's unit keys: not symmetric, so
                not in the symmetry row); a group run again with more updates and its own pilots
                (the overrides steps, pilot_steps, lr_grid: DESIGN_KEYS) replaces the shorter one
                once it has all of that one's arms and seeds (qk_designs), the other named beside;
  n_heads:      the same (task, arch, qk = separate, overrides) with >= 2 values of n_heads, one 1;
                plus, where the 1-head arm and the reference have fresh seeds (arms with the
                arm-only key seed_offset, pooled under the arm they extend), the pre-registered
                paired sign test on those seeds (sign_row);
  architecture: the same (task, qk = separate, n_heads, overrides) with >= 2 architectures;
  positions:    the same arm but for the override positional_encoding (Vaswani et al. row E);
  pruning:      every arm with rows in the pruning table, at a quarter and at half of the heads,
                judged per task family on the models off the ceiling and the floor in most seeds
                (the others are listed as not informative), then across the families.
Every comparison checks the compared arms' training (Arms.compare): an arm on its plateau that a
longer-budget check arm lifts, or whose best eval point comes at the end, has not converged (a
cosine schedule to 0 flattens the end slope by construction); an arm that never left the baseline
makes the row a floor row; a pilot that chose an end of its grid censors the row (seqlab_verdict.
censor) unless the arm is at the optimum or a wider-grid check arm brackets the rate; flat pilots
are named. One-seed check arms differ from the arm they check in BUDGET_KEYS only.
Arm-only keys (seeds, seed_offset) are not overrides: an arm with seed_offset adds fresh seeds to the
arm without it (used by the sign test only; every other row and figure reads the arms' own seeds).
Claim texts name no sizes (d_model, sequence length, arm overrides): those are in the measured
column, so that the same sub-claim has the same text at every scale (make_report.py pairs the
quick and standard rows by their text).
Older CSVs without the optional columns (ref_d_model, forward_macs, ...) still load.
"""
import math
import os
import sys
from collections import defaultdict
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seqlab_stats as ss  # noqa: E402
import seqlab_style as st  # noqa: E402
import seqlab_verdict as sv  # noqa: E402

NAME = "attention_ablations"
MAIN_COLS = ["arm", "task", "arch", "qk", "n_heads", "seed", "d_model", "n_params", "param_budget",
             "steps", "test_loss", "test_accuracy", "test_exact_match", "chance_accuracy",
             "best_accuracy", "chance_loss", "optimal_loss", "target_accuracy", "steps_to_target",
             "logit_asymmetry_init", "logit_asymmetry", "diverged"]
OPTIONAL_NUM = ["ref_d_model", "num_layers", "forward_macs", "lr", "seen_test_accuracy", "valid_loss", "d_ff"]
CURVE_COLS = ["arm", "seed", "step", "eval_accuracy", "eval_loss"]
PRUNE_COLS = ["arm", "seed", "fraction", "heads_removed", "heads_total", "test_loss", "test_accuracy",
              "full_test_loss", "full_test_accuracy"]

# Tasks whose attention must be asymmetric (claim: separate W_Q, W_K needed); majority is the control.
ASYMMETRIC = ["prev_token", "mqar", "induction", "text", "lag_pair", "continuation", "lm"]
LOSS_TASKS = ["lm", "text", "continuation"]  # compared on test loss; the others on accuracy
TASK_ORDER = ["prev_token", "mqar", "induction", "text", "majority", "lag_pair", "reverse", "dup_tag",
              "lm", "continuation"]
TASK_LABEL = {"prev_token": "previous token", "mqar": "MQAR (assoc. recall)", "induction": "induction copy",
              "majority": "majority (bag of tokens)", "reverse": "reverse (transduction)",
              "lm": "Markov LM continuation (generation)", "lag_pair": "lag pair (two lookups per position)",
              "dup_tag": "duplicate tagging (bidirectional classification)",
              "text": "character LM (KJV)", "continuation": "KJV continuation (generation)"}
ARCH_ORDER = ["encoder", "decoder", "prefix_lm", "encoder_decoder", "encoder_decoder_compute"]
ARCH_LABEL = {"encoder": "encoder-only", "decoder": "decoder-only", "prefix_lm": "prefix LM",
              "encoder_decoder": "encoder-decoder", "encoder_decoder_compute": "encoder-decoder (2P, equal compute)"}
ARCH_SHORT = {"encoder": "enc", "decoder": "dec", "prefix_lm": "prefix", "encoder_decoder": "enc-dec",
              "encoder_decoder_compute": "enc-dec 2P"}
QK_ORDER = ["separate", "shared", "shared_noself", "shared_noself_norm"]
QK_LABEL = {"separate": "separate", "shared": "shared", "shared_noself": "shared, self masked",
            "shared_noself_norm": "shared, unit keys, self masked (Reformer)"}
QK_COLOR = {"separate": 0, "shared": 3, "shared_noself": 2, "shared_noself_norm": 4}  # st.PALETTE indices
SYMMETRIC_QK = ("shared", "shared_noself")  # unit-length keys make S_ij = |q_i| cos θ_ij/√d_k: not symmetric
# Arm-only keys of the binary (arms.hpp): which replicates an arm has, not what it measures; an arm
# with seed_offset holds fresh seeds of the arm without it.
ARM_ONLY = ("seeds", "seed_offset")
# The architecture each task is claimed to suit (encoder-only understanding, decoder-only
# generation, encoder-decoder transduction), compared at matched parameter counts.
CLAIMED_ARCH = {"majority": "encoder", "dup_tag": "encoder", "lm": "decoder", "continuation": "decoder",
                "reverse": "encoder_decoder"}
PARAM_MATCHED = ["encoder", "decoder", "prefix_lm", "encoder_decoder"]
ACC_MARGIN = 0.02    # accuracy points below which a difference counts as none
# Rows whose final metric is at the ceiling are decided on the updates to the target instead: a ratio
# of updates within ×/÷ SPEED_RATIO counts as no difference (the standard curves are evaluated every
# 100 updates, 2-20 % of the 500-5200 updates at which the standard arms reach the target;
# Arms.compare_qk keeps the ceiling where the interval exceeds SPEED_RATIO − 1 of the fewest updates).
SPEED_RATIO = 1.25
LOSS_MARGIN = 0.02   # nats (per scored token / character)
# The shares of heads whose removal the pruning rows judge: a quarter (near Michel et al.'s ~20 % on
# WMT and ~40 % on BERT) and half.
PRUNE_FRACTIONS = (0.25, 0.5)
PRUNE_WORDS = {0.25: "A quarter", 0.5: "Half"}
SIGN_ALPHA = 0.05  # the heads sign test (README "Heads rows: a paired rule for bimodal outcomes")
SYM_SHARED_MAX = 1e-5
SYM_SEPARATE_MIN = 0.05
# The overrides by which a check arm differs from the arm it checks: a longer budget at the rate the
# arm's pilot chose (steps, lr_grid or lr), or a wider learning-rate grid (lr_grid).
BUDGET_KEYS = ("steps", "lr_grid", "lr")
PARAM_TOLERANCE = 0.05  # compared arms' parameter counts within ±5 %: controls matched
MACS_TOLERANCE = 0.30   # the compute-matched rows: forward multiply-adds within ±30 %

ANCHOR_QK = ("Kitaev et al. 2020 (Reformer, §2 'Shared-QK Transformer' and Fig. 3 left): shared-QK attention, "
             "with attention to self masked, trains no worse than separate Q, K on enwik8 and imagenet64 (the "
             "held-out bits-per-dim curves nearly coincide; no number in the text); a fastai community "
             "reproduction on enwik8 could not confirm 'no worse'")
ANCHOR_HEADS = ("Vaswani et al. 2017 Table 3 row (A), newstest2013 dev, d_model 512 at constant compute: 1 head "
                "(d_k 512) 24.9 BLEU / 5.29 PPL, 4 heads 25.5 / 5.00, 8 heads (base) 25.8 / 4.92, 16 heads "
                "25.8 / 4.91, 32 heads (d_k 16) 25.4 / 5.01: one head is 0.9 BLEU worse, too many also hurts")
ANCHOR_PRUNE = ("Michel, Levy & Neubig 2019 ('Are Sixteen Heads Really Better than One?'), §3 and §4.2: most "
                "single heads can be removed at test time without a significant drop; pruning heads by "
                "importance, 20 % (WMT) and 40 % (BERT on MNLI) can go without a noticeable loss")
ANCHOR_PE = ("Vaswani et al. 2017 Table 3 row (E): learned positional embeddings instead of sinusoids 4.92 PPL / "
             "25.7 BLEU vs the base model's 4.92 / 25.8: 'nearly identical results'")
ANCHOR_ARCH = ("Raffel et al. 2020 (T5) Table 2, denoising objective: encoder-decoder (L+L layers, 2P parameters, "
               "compute M) 83.28 GLUE / 26.98 EnDe BLEU; encoder-decoder 6+6 layers (P, M/2) 80.88 / 26.38; "
               "prefix LM (P, M) 81.82 / 26.43; decoder-only LM (P, M) 74.70 / 25.09: the "
               "encoder-decoder best on every benchmark, the prefix LM ahead of the causal LM")


def num(r, k, path):
    return st.number(r, k, path)


def parse_arm(text):
    """'task:arch:qk:h/k=v/...' -> (task, arch, qk, h, overrides) with overrides a sorted tuple of
    (key, value) pairs, without the arm-only keys (ARM_ONLY; arm_only)."""
    parts = text.split("/")
    f = parts[0].split(":")
    if len(f) != 4:
        raise st.DataError(f"arm {text!r}: expected task:arch:qk:n_heads[/key=value...]")
    ov = []
    for p in parts[1:]:
        if "=" not in p:
            raise st.DataError(f"arm {text!r}: override {p!r} is not key=value")
        k, v = p.split("=", 1)
        if k not in ARM_ONLY:
            ov.append((k, v))
    return f[0], f[1], f[2], int(f[3]), tuple(sorted(ov))


def arm_only(text):
    """The arm-only keys of an arm: {'seeds': N, 'seed_offset': K} as given (ints)."""
    return {k: int(v) for k, v in (p.split("=", 1) for p in text.split("/")[1:] if "=" in p) if k in ARM_ONLY}


def ov_text(ov):
    return ", ".join(f"{k} {v}" for k, v in ov) if ov else "the config's defaults"


def size_text(r0, ov):
    """The setting an arm was measured at, for the measured column: 'd_model 64, 2 layers, seq_len
    32, 3000 updates; arm overrides: ...' (the columns the CSV has; older CSVs lack some)."""
    def val(k):
        v = r0.get(k)
        try:
            v = float(v)
        except (TypeError, ValueError):
            return None
        return None if math.isnan(v) else int(v)
    d = val("ref_d_model") or val("d_model")
    parts = [f"d_model {d}" if d else None,
             f"{val('num_layers')} layers" if val("num_layers") else None,
             f"seq_len {val('seq_len')}" if val("seq_len") else None,
             f"{val('steps')} updates" if val("steps") else None]
    txt = ", ".join(p for p in parts if p)
    if ov:
        txt += ("; " if txt else "") + "arm overrides: " + ov_text(ov)
    return txt or "the config's defaults"


def load(res):
    main_path = os.path.join(res, NAME + ".csv")
    curve_path = os.path.join(res, NAME + "_curve.csv")
    prune_path = os.path.join(res, NAME + "_pruning.csv")
    rows = st.read_csv(main_path, MAIN_COLS)
    curve = st.read_csv(curve_path, CURVE_COLS)
    for r in rows:
        for k in MAIN_COLS[4:]:
            r[k] = num(r, k, main_path)
        for k in OPTIONAL_NUM:
            r[k] = num(r, k, main_path) if k in r and r[k] not in ("", None) else float("nan")
        r["n_heads"] = int(r["n_heads"])
        r["seed"] = int(r["seed"])
        r["key"] = parse_arm(r["arm"])
        r["offset"] = arm_only(r["arm"]).get("seed_offset", 0)
        r.setdefault("positional_encoding", "")
    for r in curve:
        for k in ("seed", "step", "eval_accuracy", "eval_loss"):
            r[k] = num(r, k, curve_path)
        r["seed"] = int(r["seed"])
    prune = []  # optional: absent in older runs, header only when no arm prunes
    if os.path.isfile(prune_path):
        with open(prune_path, newline="") as f:
            has_rows = len(f.read().splitlines()) > 1
        if has_rows:
            prune = st.read_csv(prune_path, PRUNE_COLS)
            for r in prune:
                for k in PRUNE_COLS[1:]:
                    r[k] = num(r, k, prune_path)
                r["seed"] = int(r["seed"])
    meta = st.read_meta(os.path.join(res, NAME + ".meta.json"))
    return rows, curve, prune, meta


LENGTH_COLS = ["arm", "seed", "lengths", "length", "rows", "loss", "accuracy", "exact_match"]


def load_lengths(res):
    """Reverse's per-length table (optional: absent or header only in older runs): rows with
    numeric length, rows, loss, accuracy, exact_match."""
    path = os.path.join(res, NAME + "_by_length.csv")
    if not os.path.isfile(path):
        return []
    with open(path, newline="") as f:
        if len(f.read().splitlines()) <= 1:
            return []
    out = st.read_csv(path, LENGTH_COLS)
    for r in out:
        for k in ("seed", "length", "rows", "loss", "accuracy", "exact_match"):
            r[k] = num(r, k, path)
        r["seed"], r["length"] = int(r["seed"]), int(r["length"])
    return out


def index(rows, fresh=False):
    """arm key (task, arch, qk, n_heads, overrides) -> {seed: row}: the arms' own replicates
    (fresh=False), or the fresh seeds of the arms with seed_offset (fresh=True), under the key of
    the arm they extend."""
    out = defaultdict(dict)
    for r in rows:
        if (r["offset"] > 0) == fresh:
            out[r["key"]][r["seed"]] = r
    return out


def task_rank(t):
    return TASK_ORDER.index(t) if t in TASK_ORDER else 99


def groups(idx, field):
    """Groups of arms that differ only in `field` (0 task .. 3 n_heads): {rest: {value: key}}."""
    g = defaultdict(dict)
    for k in idx:
        rest = k[:field] + k[field + 1:]
        g[rest][k[field]] = k
    return g


def metric(task):
    """(column, higher is better, margin, unit) used to compare arms on a task."""
    if task in LOSS_TASKS:
        return "test_loss", False, LOSS_MARGIN, "nats"
    return "test_accuracy", True, ACC_MARGIN, "accuracy"


def floor_accuracy(task, r0, meta):
    """The accuracy of the best predictor that ignores the dependency the task tests: MQAR's
    key-agnostic predictor (it answers with the most frequent value of the context, without
    binding keys: seqlab_stats.mqar_key_agnostic, the formula of
    MultiQueryAssociativeRecall::key_agnostic_accuracy, computed here from meta.json's mqar_pairs
    and vocab, as the experiment builds MQAR with n_keys = n_values = vocab), else the CSV's
    chance_accuracy (the registry's baseline: lag_pair one lookup 1/V, dup_tag the tag's prior)."""
    cfg = (meta or {}).get("config", {}) if isinstance(meta, dict) else {}
    if task == "mqar" and "mqar_pairs" in cfg and "vocab" in cfg:
        return ss.mqar_key_agnostic(int(cfg["mqar_pairs"]), int(cfg["vocab"]))[0]
    return r0["chance_accuracy"]


class Arms:
    """The runs, the training curves and meta.json, for comparing arms of one task."""

    def __init__(self, idx, curve, meta):
        self.idx, self.meta = idx, meta
        self.curves = defaultdict(lambda: defaultdict(list))
        for r in curve:
            self.curves[r["arm"]][r["seed"]].append((r["step"], r["eval_accuracy"], r["eval_loss"]))

    def first(self, key):
        return next(iter(self.idx[key].values()))

    def task_curves(self, runs, task):
        """{seed: [(step, value)]} of the eval curves of `runs` ({seed: row}; each row's own arm, so
        fresh seeds pooled from several arms find theirs) in the task's metric (accuracy or loss)."""
        j = 1 if metric(task)[1] else 2
        return {s: [(p[0], p[j]) for p in self.curves.get(r["arm"], {}).get(s, [])]
                for s, r in runs.items() if self.curves.get(r["arm"], {}).get(s)}

    def slope_state(self, runs, task):
        """End-slope convergence state of the eval curves of `runs` (seqlab_stats.convergence;
        accuracy: scale best − chance; loss: scale the chance loss − the optimum, or the chance loss
        where no optimum is known)."""
        r0 = next(iter(runs.values()))
        pts = self.task_curves(runs, task)
        if not pts:
            return None
        if metric(task)[1]:
            scale = r0["best_accuracy"] - r0["chance_accuracy"]
            return ss.convergence(pts, scale, higher_is_better=True).state if scale > 0 else None
        opt = r0["optimal_loss"] if not math.isnan(r0["optimal_loss"]) else 0.0
        scale = r0["chance_loss"] - opt
        return ss.convergence(pts, scale, higher_is_better=False).state if scale > 0 else None

    def ends(self, key):
        """(level, baseline, optimum, higher is better) of an arm in its task's metric: the mean test
        accuracy, the baseline (floor_accuracy) and best_accuracy; or, on the loss tasks, the mean test
        loss, the chance loss and the optimal loss (nan where unknown)."""
        r0 = self.first(key)
        col, higher, _, _ = metric(key[0])
        if higher:
            return self.levels(key, col), floor_accuracy(key[0], r0, self.meta), r0["best_accuracy"], True
        return self.levels(key, col), r0["chance_loss"], r0["optimal_loss"], False

    def checks_of(self, key):
        """The one-seed check arms of `key`: the arms whose overrides differ from its own only in
        BUDGET_KEYS (and the arm-only keys), as [(their key, their first row)]."""
        base = dict((k, v) for k, v in key[4] if k not in BUDGET_KEYS)
        out = []
        for k in self.idx:
            if k != key and k[:4] == key[:4] and dict((x, y) for x, y in k[4] if x not in BUDGET_KEYS) == base:
                out.append((k, self.first(k)))
        return out

    def budget(self, key):
        """Whether an arm that has not left its plateau (seqlab_verdict.on_plateau of its mean test
        metric) was still improving when its budget ended: 'moving' if a longer-budget check arm
        (more steps at the same rate; checks_of) ends beyond the margin better than this arm in every
        seed they share, or, without one, if its eval curve first came within the margin of its best
        in the last 20 % of training in most seeds (seqlab_stats.best_step_state: a schedule decaying
        to 0 flattens the end slope, not the step where the best is reached); 'flat' if it stays on
        the plateau by that measure; None off the plateau. Returns (state, text)."""
        level, base, opt, higher = self.ends(key)
        if not sv.on_plateau(level, base, opt, higher):
            return None, ""
        col, _, margin, unit = metric(key[0])
        r0 = self.first(key)
        name = col.replace("_", " ")
        where = (f"on its plateau ({name} {level:.3f}, {(level - base) / (opt - base):.0%} of the way from the "
                 f"baseline {base:.3g} to the optimum {opt:.3g})")
        longer = [(k, r) for k, r in self.checks_of(key) if r["steps"] > r0["steps"] and r["lr"] == r0["lr"]]
        if longer:
            k, r = max(longer, key=lambda kr: kr[1]["steps"])
            common = sorted(set(self.idx[k]) & set(self.idx[key]))
            sign = 1 if higher else -1
            gain = {s: sign * (self.idx[k][s][col] - self.idx[key][s][col]) for s in common}
            per = ", ".join(f"{self.idx[k][s][col]:.3f} in seed {s} (this arm {self.idx[key][s][col]:.3f} at "
                            f"{int(r0['steps'])})" for s in common)
            moving = bool(common) and all(g > margin for g in gain.values())
            txt = (f"{where}, and the same arm with {int(r['steps'])} updates at the same rate "
                   f"({r['lr']:g}) {'reaches' if moving else 'stays within the margin of it:'} {per}")
            return ("moving" if moving else "flat"), txt
        state, reached, (w0, last) = ss.best_step_state(self.task_curves(self.idx[key], key[0]), margin,
                                                        higher_is_better=higher)
        if state is None:
            return None, ""
        at = ", ".join(f"{int(x)}" for _, x in sorted(reached.items()))
        txt = (f"{where}, and its eval {name} first came within {margin:g} of its best at updates {at} "
               f"({'in most seeds ' if state == 'moving' else 'not mostly '}within the last 20 % of training, "
               f"updates {w0:g}–{last:g})")
        return state, txt

    def state(self, key):
        """Convergence state of an arm: 'moving' when budget() says so (an arm on its plateau still
        improving), else the end-slope state of its eval curves (slope_state)."""
        b, _ = self.budget(key)
        return "moving" if b == "moving" else self.slope_state(self.idx[key], key[0])

    def untrained(self, key):
        """Text when an arm never left the baseline: its mean test metric within the margin of the
        baseline or below it, and every seed's eval curve within the margin of its first evaluation
        (seqlab_stats.never_left); such an arm cannot tell a model that cannot do the task from one
        that did not train. None otherwise."""
        level, base, _, higher = self.ends(key)
        _, _, margin, _ = metric(key[0])
        if not sv.at_floor([level], base, margin, higher):
            return None
        pts = self.task_curves(self.idx[key], key[0])
        if not ss.never_left(pts, margin):
            return None
        first = min(x for p in pts.values() for x, _ in p)
        pilot = self.pilot(key)
        ptxt = (f"; its pilot was flat too ({pilot[2]})" if pilot and pilot[1] else "")
        return (f"at {level:.3f} against the baseline {base:.3g}, its eval curve within {margin:g} of its first "
                f"evaluation (update {first:g}) in every seed{ptxt}")

    def pilot(self, key):
        """(grid, flat, text) of an arm's learning-rate pilot (the main CSV's lr_grid and
        pilot_val_losses; flat: seqlab_verdict.pilot_flat against the chance loss), None without a
        pilot (a grid of one rate)."""
        r0 = self.first(key)
        try:
            grid = [float(x) for x in str(r0.get("lr_grid", "")).split()]
            vals = [float(x) for x in str(r0.get("pilot_val_losses", "")).split()]
        except ValueError:
            return None
        if len(grid) < 2 or len(vals) != len(grid):
            return None
        flat = sv.pilot_flat(vals, r0["chance_loss"], r0["optimal_loss"])
        txt = (" / ".join(f"{v:.3f}" for v in vals) + f" nats at {' / '.join(f'{g:g}' for g in grid)} against the "
               f"chance loss {r0['chance_loss']:.3f}")
        return grid, flat, txt

    def censored(self, key, name, col):
        """([(name, lr, 'top' | 'bottom')], note) for seqlab_verdict.censor: the arm when its pilot
        chose an end of its grid (seqlab_verdict.grid_end), unless its test metric `col` (the one the
        row compares) is within the margin of the optimum in every seed (a better rate cannot raise
        it; not for col steps_to_target, where a better rate may be faster) or a check arm with a
        grid wider on that side (checks_of) chose the same rate inside its own grid (the rate is
        bracketed); the note says which of these cleared it."""
        p = self.pilot(key)
        if not p:
            return [], ""
        r0 = self.first(key)
        lr = r0["lr"]
        end = sv.grid_end(lr, p[0])
        if not end:
            return [], ""
        higher = col != "test_loss"
        margin = ACC_MARGIN if higher else LOSS_MARGIN
        opt = r0["best_accuracy"] if higher else r0["optimal_loss"]
        per_seed = [r[col] for r in self.idx[key].values()]
        # The speed rows (col steps_to_target) have no optimum: a rate beyond the grid may be faster.
        if col != "steps_to_target" and sv.at_ceiling(per_seed, opt, margin, higher):
            return [], (f"{name} chose {lr:g}, the {end} of lr_grid, but its {col.replace('_', ' ')} is within "
                        f"{margin:g} of the optimum in every seed, so a rate beyond the grid cannot improve it")
        for k, r in self.checks_of(key):
            q = self.pilot(k)
            if not q or r["lr"] != lr:
                continue
            wider = max(q[0]) > max(p[0]) if end == "top" else min(q[0]) < min(p[0])
            if wider and sv.grid_end(r["lr"], q[0]) is None:
                return [], (f"{name} chose {lr:g}, the {end} of lr_grid; a one-seed check with the grid "
                            f"{' '.join(f'{g:g}' for g in q[0])} chose it again ({q[2]}): bracketed")
        return [(name, lr, end)], ""

    def notes(self, keys_names):
        """The learning-rate notes of a comparison of [(key, name)]: the flat pilots (every rate near
        the chance loss, so the chosen rate carries no information) and whether the arms then
        trained at different rates."""
        flat = []
        for k, n in keys_names:
            p = self.pilot(k)
            if p and p[1]:
                flat.append(f"{n}'s pilot was flat ({p[2]}), so its rate carries no information")
        if not flat:
            return ""
        lrs = {n: self.first(k)["lr"] for k, n in keys_names}
        same = len(set(lrs.values())) == 1
        rates = (f"both trained at {next(iter(lrs.values())):g}" if same else
                 "the arms trained at different rates (" + ", ".join(f"{n} {x:g}" for n, x in lrs.items()) +
                 "), so the comparison is confounded with the rate")
        return "; ".join(flat) + "; " + rates

    def values(self, key, col=None):
        """{seed: metric oriented so that higher is better} and {seeds that diverged}."""
        c, higher, _, _ = metric(key[0])
        c = col or c
        higher = higher if col is None else col != "test_loss"
        runs = self.idx[key]
        return ({s: (r[c] if higher else -r[c]) for s, r in runs.items()},
                {s for s, r in runs.items() if r["diverged"]})

    def levels(self, key, col):
        return st.mean_ci95([r[col] for r in self.idx[key].values()])[0]

    def compare(self, a, b, claim, a_name, b_name, on=None, controls=None):
        """The verdict on 'arm a beats (or is no worse than, or equals) arm b': the paired
        difference of the task's metric (or of `on`: 'test_loss' / 'test_accuracy'), oriented so
        that positive favours a; a diverged run counts as the worst value (accuracy: chance; loss:
        the chance loss); ceiling and floor over both arms; the two arms' curves; controls:
        parameters within ±5 % unless given."""
        task = a[0]
        col, higher, margin, unit = metric(task)
        if on is not None:
            col, higher = on, on != "test_loss"
            margin, unit = (ACC_MARGIN, "accuracy") if higher else (LOSS_MARGIN, "nats")
        r0 = self.first(a)
        worst = r0["chance_accuracy"] if higher else -r0["chance_loss"]
        va, da = self.values(a, col)
        vb, db = self.values(b, col)
        what = (f"{a_name} − {b_name}, test accuracy" if higher else
                f"loss of {b_name} − loss of {a_name} (positive: {a_name} better)")
        eff = ss.paired_difference(va, vb, diverged_a=da, diverged_b=db, worst=worst, what=what)
        means = [self.levels(k, col) for k in (a, b)]
        if higher:
            optimum, base = r0["best_accuracy"], floor_accuracy(task, r0, self.meta)
            ceiling = sv.at_ceiling(means, optimum, margin)
            floor = sv.at_floor(means, base, margin)
        else:
            optimum, base = r0["optimal_loss"], r0["chance_loss"]
            ceiling = sv.at_ceiling(means, optimum, margin, higher_is_better=False)
            floor = sv.at_floor(means, base, margin, higher_is_better=False)
        if controls is None:
            pa, pb = self.first(a)["n_params"], self.first(b)["n_params"]
            controls = abs(pa / pb - 1) <= PARAM_TOLERANCE
        levels = f"means {means[0]:.3f}, {means[1]:.3f}; optimum {optimum:.3g}, baseline {base:.3g}"
        # A compared arm that never left the baseline: the row is at the floor for that arm.
        floor_reason = None
        if not ceiling and not floor:
            dead = [(n, t) for k, n in ((a, a_name), (b, b_name)) for t in [self.untrained(k)] if t]
            if dead:
                floor = True
                live = [n for k, n in ((a, a_name), (b, b_name)) if n not in dict(dead)]
                floor_reason = ("; ".join(f"{n} never left the baseline ({t})" for n, t in dead) +
                                ": the row cannot tell an arm that cannot do the task from one that did not train"
                                + (f"; what it shows: {', '.join(live)} learned the task within the budget "
                                   f"({levels}) where {' and '.join(n for n, _ in dead)} did not" if live else ""))
        moving = [(n, txt) for k, n in ((a, a_name), (b, b_name)) for st_, txt in [self.budget(k)] if st_ == "moving"]
        moving_text = ("; ".join(f"{n} has not converged: {txt}" for n, txt in moving)) if moving else None
        v = sv.decide(eff, margin, claim, unit=unit, ceiling=ceiling, floor=floor, moving_up=self.state(a),
                      moving_down=self.state(b), controls=controls, levels=levels, floor_reason=floor_reason,
                      moving_text=moving_text)
        if claim in (sv.NO_WORSE, sv.EQUAL) and eff.known and eff.se > 0:
            t = ss.tost(eff, margin)
            v.test = f"{v.test}; TOST p = {t['p']:.2g} (one-sided p against −{margin:g}: {t['p_lower']:.2g})"
        return self.lr_checks(v, ((a, a_name), (b, b_name)), col)

    def lr_checks(self, v, keys_names, col):
        """v with the learning-rate checks of the compared arms [(key, name)]: 'lr censored'
        (seqlab_verdict.censor, censored()), the cleared grid ends and the flat pilots (notes())
        named in the reason."""
        cens, cleared = [], []
        for k, n in keys_names:
            c, note = self.censored(k, n, col)
            cens += c
            if note:
                cleared.append(note)
        extra = "; ".join(x for x in cleared + [self.notes(keys_names)] if x)
        if extra:
            v.reason = f"{v.reason}; {extra}"
        return sv.censor(v, cens)

    def eval_every(self, key):
        """The eval interval of arm `key` (updates between the points of its eval curve), or None."""
        for pts in self.curves.get(self.first(key)["arm"], {}).values():
            steps = sorted(p[0] for p in pts)
            if len(steps) > 1:
                return int(min(b - a for a, b in zip(steps, steps[1:])))
        return None

    def reach(self, key):
        """{seed: (updates, reached)}: the run's steps_to_target, or its budget (`steps`, a lower
        bound) for a run that never reached the target."""
        return {s: (r["steps_to_target"], True) if r["steps_to_target"] >= 0 else (r["steps"], False)
                for s, r in self.idx[key].items()}

    def compare_speed(self, a, b, claim, a_name, b_name, controls=None):
        """The verdict on 'arm a reaches the target sooner than (or no later than) arm b', for a row
        whose final metric is at the ceiling: the paired per-seed ln(steps_to_target of b / of a)
        (positive: a sooner; steps_to_target is the first evaluation at target_accuracy), t-interval,
        against ±ln SPEED_RATIO. A run that never reached the target counts at its budget, a lower
        bound of its steps: where that could favour the claim (censored runs in a) or hide it
        (censored in b, when the verdict is not 'holds'), the row is inconclusive; so it is where the
        slower arm's pilot was flat (its rate carries no information, and speed depends on it)."""
        ra, rb = self.reach(a), self.reach(b)
        ca, cb = (sum(not ok for _, ok in r.values()) for r in (ra, rb))
        eff = ss.paired_difference({s: math.log(n) for s, (n, _) in rb.items()},
                                   {s: math.log(n) for s, (n, _) in ra.items()},
                                   what=f"ln(updates to the target of {b_name} / of {a_name}) (positive: {a_name} sooner)")
        if controls is None:
            pa, pb = self.first(a)["n_params"], self.first(b)["n_params"]
            controls = abs(pa / pb - 1) <= PARAM_TOLERANCE
        v = sv.decide(eff, math.log(SPEED_RATIO), claim, controls=controls,
                      margin_text=f"±ln {SPEED_RATIO:g} (a ratio of updates ×/÷ {SPEED_RATIO:g})")
        if claim in (sv.NO_WORSE, sv.EQUAL) and eff.known and eff.se > 0:
            t = ss.tost(eff, math.log(SPEED_RATIO))
            v.test = f"{v.test}; TOST p = {t['p']:.2g} (one-sided p against −ln {SPEED_RATIO:g}: {t['p_lower']:.2g})"
        # A censored run is a lower bound on its updates: in a it could only make a slower (a "holds"
        # may not stand), in b only b slower (a "fails" may not stand); the other verdict stands.
        if (ca and v.kind == sv.HOLDS) or (cb and v.kind == sv.FAILS):
            v = sv.Verdict(sv.INCONCLUSIVE, f"runs that never reached the target ({a_name} {ca}, {b_name} {cb}) "
                           f"count at their budget, which could change the verdict; the interval alone: {v.reason}",
                           test=v.test, effect=v.effect, margin=v.margin, checks=v.checks)
        # An arm slower at a rate its flat pilot did not choose (every rate near the chance loss) may
        # be slow because of the rate: a verdict that rests on its slowness is not decided, unless
        # runs at every other rate of that grid (rate_sweep) stay slower beyond the margin.
        slow_key, slow_name = (b, b_name) if eff.known and eff.value > 0 else (a, a_name)
        fast_key, fast_name = (a, a_name) if slow_key == b else (b, b_name)
        p = self.pilot(slow_key)
        if v.kind in (sv.HOLDS, sv.FAILS) and p and p[1]:
            best, at, sweep = self.rate_sweep(slow_key, fast_key)
            if best is not None and at is None:  # the sweep chose the rate the arm trained at
                v.reason = f"{v.reason}; the slower arm's pilot was flat, and {sweep}"
            elif best is not None:
                # The sweep's rate, run on every seed, against the arm's own rate: decided at the one
                # where the slower arm's median over the seeds is lower (its better rate; the own rate
                # on a tie), so that a verdict resting on its slowness holds at both.
                own = self.first(slow_key)["lr"]
                med = {k: median(n for n, _ in self.reach(k).values()) for k in (slow_key, at)}
                txt = (f"the sweep's rate {best:g} ({sweep}) over every seed: median {med[at]:g} updates, against "
                       f"{med[slow_key]:g} at the rate of its flat pilot, {own:g}")
                if med[at] >= med[slow_key]:
                    v.reason = (f"{v.reason}; the slower arm's pilot was flat, and at {txt}, so it is decided at "
                                f"{own:g}")
                else:
                    a2, b2 = (a, at) if slow_key == b else (at, b)
                    w = self.compare_speed(a2, b2, claim, a_name, b_name, controls=controls)
                    w.reason = (f"decided at {best:g}, {slow_name}'s faster rate: {txt}; {w.reason}; at {own:g} "
                                f"the interval was {v.effect}")
                    return w
            else:
                v = sv.Verdict(sv.INCONCLUSIVE, f"the slower arm, {slow_name}, trained at a rate its flat pilot did "
                               f"not inform ({p[2]}), so its slowness may be the rate's"
                               + (f" ({sweep})" if sweep else "") + f"; the interval alone: {v.reason}",
                               test=v.test, effect=v.effect, margin=v.margin, checks=v.checks)
        return self.lr_checks(v, ((a, a_name), (b, b_name)), "steps_to_target")

    def rate_sweep(self, slow, fast):
        """The rate at which arm `slow`, whose pilot was flat, reaches the target soonest: a sweep of
        seed 0 at its full budget, its own run at its rate and its check arms at the other rates
        (checks_of: the same steps, a grid of one rate; a run that never reached the target counts at
        its budget), the fewest updates winning. Returns (best, key, text): best None (with the text
        why) when a rate of its pilot's grid has no seed-0 run or the best rate is an end of the rates
        run (a rate beyond it could be faster); key None when the best is the arm's own rate, else the
        check arm at the best rate, which must have every seed of `fast` (the row is decided again
        on it), or best None."""
        grid = self.pilot(slow)[0]
        r0 = self.first(slow)
        own = r0["lr"]
        at = {own: (None, self.reach(slow).get(0))}
        for k, r in self.checks_of(slow):
            if r["steps"] == r0["steps"] and self.pilot(k) is None and 0 in self.idx[k]:
                at[r["lr"]] = (k, self.reach(k)[0])
        at = {g: (k, n) for g, (k, n) in at.items() if n is not None}
        rates = sorted(at)
        seen = ", ".join(f"{g:g}: {at[g][1][0]:g}" + ("" if at[g][1][1] else " (never reached)") for g in rates)
        text = f"of fewest updates to the target in a sweep of seed 0 at {int(r0['steps'])} updates ({seen})"
        missing = [g for g in grid if g not in at]
        if missing:
            return None, None, f"no seed-0 run at {', '.join(f'{g:g}' for g in missing)} of its grid; the sweep {seen}"
        best = min(rates, key=lambda g: at[g][1][0])
        if best in (rates[0], rates[-1]) and len(rates) > 1:
            end = "bottom" if best == rates[0] else "top"
            return None, None, (f"the sweep of seed 0 ({seen}) is fastest at {best:g}, the {end} of the rates run, "
                                f"and a rate beyond it may be faster")
        key = at[best][0]
        if key is None:
            return best, None, f"the sweep chose its own rate, {best:g}, as the one {text}"
        lacking = sorted(set(self.idx[fast]) - set(self.idx[key]))
        if lacking:
            return None, None, (f"the sweep of seed 0 ({seen}) is fastest at {best:g}, which has no run for seeds "
                                f"{', '.join(map(str, lacking))}")
        return best, key, text

    def compare_qk(self, a, b, claim, a_name, b_name, on=None):
        """compare(), or where both arms are at the ceiling the verdict on the updates to the target
        (compare_speed), its reason naming the ceiling (the levels are in the row's measured text).
        The ceiling stays where the eval interval exceeds SPEED_RATIO − 1 of the fewest updates to
        the target of the compared runs: a resolution coarser than the margin cannot decide it."""
        v = self.compare(a, b, claim, a_name, b_name, on=on)
        if v.kind != sv.CEILING:
            return v
        every = self.eval_every(a)
        reached = [n for k in (a, b) for n, ok in self.reach(k).values() if ok and n > 0]
        if not every or not reached or every > (SPEED_RATIO - 1) * min(reached):
            v.reason = (f"{v.reason}; the updates to the target cannot decide it either: evaluated every "
                        f"{every or '?'} updates, more than {SPEED_RATIO - 1:.0%} of the fewest updates to the "
                        f"target ({min(reached) if reached else 'none reached'})")
            return v
        s = self.compare_speed(a, b, claim, a_name, b_name)
        s.reason = (f"both arms at the ceiling of the final metric ({v.effect}), so decided on the updates to the "
                    f"target: {s.reason}")
        return s

    def speed(self, a, b):
        """Steps to the target, a against b: Gehan's censored rank test, as text (never deciding)."""
        def cens(key):
            return [ss.Censored(n, ok) for n, ok in self.reach(key).values()]
        g = ss.gehan_test(cens(a), cens(b))
        return (f"steps to target: first arm earlier in {g.a_earlier}, later in {g.b_earlier} of {g.n_a * g.n_b} "
                f"pairs (Gehan, one-sided p {g.p_a_earlier:.2g} / {g.p_b_earlier:.2g}; not deciding)")


def fmt_mean(vals, f="{:.3f}"):
    m, h = st.mean_ci95(vals)
    return (f + " ± " + f).format(m, h)


def arm_summary(runs, task):
    rows = list(runs.values())
    col, _, _, _ = metric(task)
    lr = sorted({r["lr"] for r in rows if not math.isnan(r["lr"])})
    lr_txt = f", lr {'/'.join(f'{x:g}' for x in lr)}" if lr else ""
    return (f"loss {fmt_mean([r['test_loss'] for r in rows])}, accuracy {fmt_mean([r['test_accuracy'] for r in rows])}"
            f"{lr_txt}")


RULE_COMMON = ("the paired per-seed difference of test {metric} (95 % t-interval; a diverged run counts as chance) "
               "against ±{margin:g}: {verbs}; inconclusive: ceiling / floor if both arms are within {margin:g} of "
               "the optimum / of the baseline (the best predictor that ignores the dependency; MQAR: the "
               "key-agnostic predictor); floor also if a compared arm never left the baseline (at it, and its eval "
               "curve within the margin of its first evaluation in every seed); not converged if a curve that could "
               "move the verdict is still improving at the end (last 20 % of the eval curve, tolerance 5 % of the "
               "scale), or if such an arm is on its plateau (less than a quarter of the way from the baseline to the "
               "optimum) and the same arm with a longer budget at its rate ends beyond the margin better, or, without "
               "one, its eval curve first came within the margin of its best in the last 20 % of training in most "
               "seeds; lr censored if a compared arm's pilot chose an end of lr_grid, unless that arm is within the "
               "margin of the optimum in every seed or a one-seed check with a wider grid chose the same rate inside "
               "it; a flat pilot (every rate less than a quarter of the way from the chance loss to the optimum) is "
               "named, with the arms' rates; controls: {controls}")
VERBS_GREATER = "holds if beyond +{m:g}, fails if below −{m:g} or within ±{m:g} (no difference of that size)"
VERBS_NO_WORSE = ("non-inferiority: holds if the interval lies above −{m:g} (the one-sided test of a two one-sided "
                  "tests pair at α = 0.025, TOST p shown), fails if it lies below −{m:g}")
VERBS_EQUAL = "equivalence (TOST): holds if the interval lies within ±{m:g}, fails if it lies beyond it"


def rule(claim, task, controls="parameters within ±5 %", on=None):
    col, higher, margin, _ = metric(task)
    if on is not None:
        col, higher, margin = on, on != "test_loss", ACC_MARGIN if on != "test_loss" else LOSS_MARGIN
    verbs = {sv.GREATER: VERBS_GREATER, sv.NO_WORSE: VERBS_NO_WORSE, sv.EQUAL: VERBS_EQUAL}[claim]
    return RULE_COMMON.format(metric=col.split("_")[1], margin=margin, verbs=verbs.format(m=margin),
                              controls=controls)


# ----------------------------------------------------------------------------------------------
# Verdicts


def sym_row(rows):
    sh = [r[c] for r in rows if r["qk"] in SYMMETRIC_QK for c in ("logit_asymmetry", "logit_asymmetry_init")]
    se = [r[c] for r in rows if r["qk"] == "separate" for c in ("logit_asymmetry", "logit_asymmetry_init")]
    un = [r["logit_asymmetry"] for r in rows if r["qk"] == "shared_noself_norm"]
    if not (sh and se):
        return None
    unit = (f"; shared with unit-length keys (not symmetric by construction: S_ij = |q_i| cos θ_ij/√d_k, "
            f"not counted) trained {min(un):.2f}–{max(un):.2f}" if un else "")
    v = sv.by_construction(
        "S = (XW)(XW)ᵀ/√d_k is symmetric when W_K = W_Q", f"shared max {max(sh):.1e}, separate min {min(se):.2f}",
        shown=max(sh) < SYM_SHARED_MAX and min(se) > SYM_SEPARATE_MIN,
        test="measured ‖S − Sᵀ‖/‖S‖ of every run, at initialisation and trained",
        effect=f"shared max {max(sh):.1e}; separate min {min(se):.2f}",
        margin=f"shared < {SYM_SHARED_MAX:g} (float rounding), separate > {SYM_SEPARATE_MIN:g}")
    return v.row(
        claim="A shared W_Q = W_K makes the attention logits S = QKᵀ/√d_k symmetric; separate projections do not",
        measured=f"‖S − Sᵀ‖/‖S‖ (pre-softmax, before masks, mean over self-attentions): shared max {max(sh):.1e} "
                 f"over {len(sh) // 2} runs (init and trained); separate min {min(se):.2f}, mean {sum(se) / len(se):.2f}"
                 + unit,
        anchor="algebra: S = Q Qᵀ is a Gram matrix (symmetric, positive semi-definite) when K = Q",
        rule=f"by construction if every shared-QK run has asymmetry < {SYM_SHARED_MAX:g} (float rounding) and "
             f"every separate run > {SYM_SEPARATE_MIN:g}; fails (an implementation defect) otherwise")


# The overrides by which a whole Q/K design can be run again at a longer budget: the same arms with
# more updates, and their own pilots (pilot_steps, lr_grid). The longer design's rows replace the
# shorter one's once it has every arm and seed of it (qk_designs).
DESIGN_KEYS = ("steps", "pilot_steps", "lr_grid")


def qk_designs(idx):
    """The Q/K groups (rest, {qk: key}) whose rows qk_rows writes, each with the groups of the same
    (task, arch, n_heads) and overrides but for DESIGN_KEYS that it stands for, as
    [(rest, by_qk, [(other rest, other by_qk, 'superseded' | 'incomplete')])]. Of such a set, the
    group with the most updates whose arms have at least the seeds of every other group's arms of
    the same qk (a complete rerun of the design) is written, the others are named beside it as
    superseded; a longer group without them (still running) is named as incomplete."""
    gs = qk_groups(idx)
    def base(rest):
        t, a, h, ov = rest
        return t, a, h, tuple((k, v) for k, v in ov if k not in DESIGN_KEYS)
    def steps(by_qk):
        return max(r["steps"] for k in by_qk.values() for r in idx[k].values())
    def covers(big, small):
        return all(q in big and len(idx[big[q]]) >= len(idx[small[q]]) for q in small)
    sets = defaultdict(list)
    for rest, by_qk in gs:
        sets[base(rest)].append((rest, by_qk))
    out = []
    for rest, by_qk in gs:
        family = sets[base(rest)]
        if len(family) == 1:
            out.append((rest, by_qk, []))
            continue
        complete = [(r, g) for r, g in family if all(covers(g, g2) for r2, g2 in family if r2 != r)]
        chosen = max(complete, key=lambda rg: steps(rg[1]))[0] if complete else min(family, key=lambda rg: steps(rg[1]))[0]
        if rest != chosen:
            continue
        others = [(r, g, "superseded" if steps(g) < steps(by_qk) else "incomplete") for r, g in family if r != rest]
        out.append((rest, by_qk, others))
    return out


SPEED_RULE = ("; where both arms are at the ceiling of that metric, the row is decided on the updates to the "
              "target instead (steps_to_target: the first evaluation at target_accuracy = chance + target_fraction "
              "x (best − chance)), when the eval interval is at most {q:.0%} of the fewest updates to it: the paired "
              "per-seed ln(updates of the second arm / of the first), t-interval, against ±ln {r:g} ({verbs}); a run that never reached the target counts at its budget (a lower "
              "bound), and the row is inconclusive where that could change the verdict, or where the slower arm's "
              "pilot was flat (its rate uninformed), unless a sweep of seed 0 over every rate of that grid at the "
              "full budget (one-seed runs at the rates it did not choose) is fastest inside the rates run: at its own "
              "rate the row stands, at another that rate is run on every seed and the row is decided at whichever of "
              "the two rates gives the slower arm the lower median; lr censored as above, without the ceiling exemption")


def speed_rule(claim):
    verbs = {sv.GREATER: VERBS_GREATER, sv.NO_WORSE: VERBS_NO_WORSE}[claim].replace("{m:g}", f"ln {SPEED_RATIO:g}")
    return SPEED_RULE.format(r=SPEED_RATIO, q=SPEED_RATIO - 1, verbs=verbs)


def speed_text(arms, keys_names):
    """'updates to the target accuracy A (evaluated every N updates): name median (min–max), ...'."""
    r0 = arms.first(keys_names[0][0])
    every = arms.eval_every(keys_names[0][0])
    parts = []
    for k, n in keys_names:
        reach = arms.reach(k).values()
        got = sorted(n for n, ok in reach if ok)
        miss = len(reach) - len(got)
        lr = arms.first(k).get("lr", float("nan"))
        parts.append(f"{n} " + (f"median {median(got):g} ({got[0]:g}–{got[-1]:g})" if got else "none reached")
                     + (f", {miss} never reached it" if miss else "") + (f" at lr {lr:g}" if lr == lr else ""))
    return (f"updates to the target accuracy {r0['target_accuracy']:.3f}"
            + (f" (evaluated every {every} updates)" if every else "") + ": " + "; ".join(parts))


def qk_rows(idx, arms, seeds):
    out = []
    for rest, by_qk, others in qk_designs(idx):
        t, a, h, ov = rest
        ks = by_qk["separate"]
        where = f"{TASK_LABEL.get(t, t)}, {ARCH_LABEL.get(a, a)}, {h} heads"
        params = "; ".join(f"{QK_LABEL[q]} {int(arms.first(by_qk[q])['n_params'])} parameters"
                           for q in QK_ORDER if q in by_qk)
        meas = f"at {size_text(arms.first(ks), ov)}: " + "; ".join(
            f"{QK_LABEL[q]}: {arm_summary(idx[by_qk[q]], t)}" for q in QK_ORDER if q in by_qk)
        for r2, g2, why in others:
            n = max(r["steps"] for k in g2.values() for r in idx[k].values())
            meas += (f"; the same arms {'in the earlier design' if why == 'superseded' else 'in a longer design still running'}"
                     f" ({int(n)} updates; arm overrides: {ov_text(r2[3])}), not read here: " + "; ".join(
                         f"{QK_LABEL[q]}: {arm_summary(idx[g2[q]], t)} ({len(idx[g2[q]])} seeds)"
                         for q in QK_ORDER if q in g2))
        if "shared" in by_qk:
            kb = by_qk["shared"]
            if t in ASYMMETRIC:
                v = arms.compare_qk(ks, kb, sv.GREATER, "separate", "shared")
                claim = f"Separate W_Q, W_K beat a shared W_Q = W_K where attention must be asymmetric ({where})"
                r = "separate vs shared: " + rule(sv.GREATER, t) + speed_rule(sv.GREATER)
            else:
                v = arms.compare_qk(kb, ks, sv.NO_WORSE, "shared", "separate")
                claim = f"A shared W_Q = W_K is not worse where attention need not be asymmetric ({where})"
                r = "shared vs separate: " + rule(sv.NO_WORSE, t) + speed_rule(sv.NO_WORSE)
            out.append(v.row(claim=claim, measured=f"{meas}; {params}; {arms.speed(ks, kb)}; "
                                                   f"{speed_text(arms, [(ks, 'separate'), (kb, 'shared')])} "
                                                   f"({seeds} seeds)",
                             anchor=ANCHOR_QK, rule=r))
        # Reformer's claim "no worse than separate", on test loss: its mask alone, then its mask with
        # unit-length keys (the attention as published).
        for q, name, what, how in (
                ("shared_noself", "shared (self masked)", "Shared W_Q = W_K with attention to self masked but keys "
                 "not normalised (Reformer's mask only)", "shared with self masked"),
                ("shared_noself_norm", "Reformer shared QK", "Reformer's shared-QK attention (unit-length keys "
                 "k = q/‖q‖, attention to self masked)", "shared with unit-length keys and self masked")):
            if q not in by_qk:
                continue
            v = arms.compare_qk(by_qk[q], ks, sv.NO_WORSE, name, "separate", on="test_loss")
            out.append(v.row(claim=f"{what} is no worse than separate ({where})",
                             measured=f"{meas}; {params}; {speed_text(arms, [(by_qk[q], name), (ks, 'separate')])} "
                                      f"({seeds} seeds)", anchor=ANCHOR_QK,
                             rule=f"{how} vs separate, on test loss: " + rule(sv.NO_WORSE, t, on="test_loss")
                             + speed_rule(sv.NO_WORSE)))
        if "shared_noself" in by_qk and "shared" in by_qk:
            kn, ku = by_qk["shared_noself"], by_qk["shared"]
            v = arms.compare_qk(kn, ku, sv.GREATER, "self masked", "unmasked")
            out.append(v.row(
                claim=f"Masking attention to self (Reformer §2) improves shared-QK attention ({where})",
                measured=f"{meas}; {speed_text(arms, [(kn, 'self masked'), (ku, 'unmasked')])} ({seeds} seeds)",
                anchor=ANCHOR_QK,
                rule="shared with self masked vs shared: " + rule(sv.GREATER, t) + speed_rule(sv.GREATER)))
    return out


def ref_heads(hs, d_model):
    """The reference head count of a heads group: head size 16 if present, else the largest <= 8."""
    want = int(d_model) // 16 if d_model and not math.isnan(d_model) else None
    if want in hs and want != 1:
        return want
    cand = [h for h in hs if 1 < h <= 8] or [h for h in hs if h > 1]
    return max(cand) if cand else None


def sign_row(fresh, keys, ref, idx, arms, t, where):
    """The pre-registered heads rule for bimodal outcomes (README "Heads rows: a paired rule for
    bimodal outcomes"), on the fresh seeds (the arms with seed_offset) of the reference and the
    1-head arm: d_s = metric(ref heads) − metric(1 head) per seed; k = #{d_s > margin} of n;
    holds if P(Bin(n, ½) >= k) <= SIGN_ALPHA, fails if P(Bin(n, ½) >= n − k) <= SIGN_ALPHA (the
    median difference is significantly within the margin or below), else inconclusive; ceiling /
    floor on the two arms' means. The same count over the original and fresh seeds is shown, not
    deciding. None if the arms have no fresh seeds."""
    a, b = keys[ref], keys[1]
    fa, fb = fresh.get(a, {}), fresh.get(b, {})
    common = sorted(set(fa) & set(fb))
    if not common:
        return None
    col, higher, margin, unit = metric(t)
    sign = 1 if higher else -1

    def diffs(ra, rb, seeds):
        return {s: sign * (ra[s][col] - rb[s][col]) for s in seeds}
    d = diffs(fa, fb, common)
    n, k = len(d), sum(1 for x in d.values() if x > margin)

    def longer(key, runs):
        """The fresh-seed arm with the most updates beyond `key`'s at its rate, on every common seed
        (overrides differing in BUDGET_KEYS only), or None."""
        r0_, base = next(iter(runs.values())), {x: y for x, y in key[4] if x not in BUDGET_KEYS}
        found = [(next(iter(rs.values()))["steps"], k2) for k2, rs in fresh.items()
                 if k2 != key and k2[:4] == key[:4] and {x: y for x, y in k2[4] if x not in BUDGET_KEYS} == base
                 and next(iter(rs.values()))["steps"] > r0_["steps"] and next(iter(rs.values()))["lr"] == r0_["lr"]
                 and set(common) <= set(rs)]
        return max(found)[1] if found else None
    # A longer budget of either arm at its rate on every fresh seed replaces it: the count is taken
    # where the curves have had more updates to settle (the shorter count is shown beside).
    budget_note = ""
    la, lb = longer(a, fa), longer(b, fb)
    if la or lb:
        k_short = k
        if la:
            fa = fresh[la]
        if lb:
            fb = fresh[lb]
        d = diffs(fa, fb, common)
        k = sum(1 for x in d.values() if x > margin)
        budget_note = ("; counted on the longer runs at the same rate: " + ", ".join(
            f"{name} {int(next(iter(fresh[x].values()))['steps'])} updates" for name, x in
            ((f"{ref} heads", la), ("1 head", lb)) if x) + f" (at the design's budget {k_short} of {n} beyond)")
    p_hold, p_fail = ss.binom_sf(k, n), ss.binom_sf(n - k, n)
    alla, allb = {**idx[a], **fa}, {**idx[b], **fb}
    d_all = diffs(alla, allb, sorted(set(alla) & set(allb)))
    k_all = sum(1 for x in d_all.values() if x > margin)
    r0 = arms.first(a)
    means = [st.mean_ci95([r[col] for r in f.values()])[0] for f in (fa, fb)]
    if higher:
        ceiling = sv.at_ceiling(means, r0["best_accuracy"], margin)
        floor = sv.at_floor(means, floor_accuracy(t, r0, arms.meta), margin)
    else:
        ceiling = sv.at_ceiling(means, r0["optimal_loss"], margin, higher_is_better=False)
        floor = sv.at_floor(means, r0["chance_loss"], margin, higher_is_better=False)
    # Convergence of the fresh seeds' eval curves: the reference's further improvement could raise k,
    # the single head's lower it.
    up, down = arms.slope_state(fa, t), arms.slope_state(fb, t)
    checks = dict(ceiling=sv.yes_no(ceiling), floor=sv.yes_no(floor), converged=sv.converged_check(up, down),
                  controls="yes")
    test = (f"exact one-sided sign test of the median paired difference against +{margin:g} over the {n} fresh "
            f"seeds {common[0]}–{common[-1]} (pre-registered)")
    mixed = " (the fresh seeds on the longer runs, seeds 0–4 at the design's budget)" if budget_note else ""
    effect = (f"{k} of {n} fresh seeds beyond +{margin:g} (P(Bin({n}, ½) ≥ {k}) = {p_hold:.3g}; "
              f"≥ {n - k}: {p_fail:.3g}); all {len(d_all)} seeds{mixed}: {k_all} beyond")
    if ceiling:
        kind, why = sv.CEILING, "both arms are within the margin of the optimum"
    elif floor:
        kind, why = sv.FLOOR, "both arms are within the margin of the baseline"
    elif n < sv.MIN_SEEDS:
        kind, why = sv.INCONCLUSIVE, f"only {n} fresh seeds"
    elif p_hold <= SIGN_ALPHA:
        kind, why = sv.HOLDS, f"{k} of {n} seeds beyond +{margin:g}: p = {p_hold:.3g} <= {SIGN_ALPHA:g}"
    elif p_fail <= SIGN_ALPHA:
        kind, why = sv.FAILS, (f"{n - k} of {n} seeds within +{margin:g} or below: p = {p_fail:.3g} <= "
                               f"{SIGN_ALPHA:g}")
    else:
        kind, why = sv.INCONCLUSIVE, (f"{k} of {n} seeds beyond +{margin:g}: p = {p_hold:.3g} and, the other way, "
                                      f"{p_fail:.3g}, both above {SIGN_ALPHA:g}")
    moving = [name for name, state, could in ((f"{ref} heads", up, kind in (sv.FAILS, sv.INCONCLUSIVE)),
                                              ("1 head", down, kind in (sv.HOLDS, sv.INCONCLUSIVE)))
              if state == "moving" and could]
    if moving:
        kind, why = sv.NOT_CONVERGED, (f"{why}, but the eval curves of {' and '.join(moving)} are still moving at "
                                       "the end (last 20 % of the logged steps), which could change the count")
    v = sv.measured(kind, why + budget_note, test=test, effect=effect,
                    margin=f"+{margin:g} {unit}, one-sided α = {SIGN_ALPHA:g}", checks=checks)
    v = arms.lr_checks(v, ((a, f"{ref} heads"), (b, "1 head")), col)
    per_seed = ", ".join(f"{s}: {fa[s][col]:.3f} vs {fb[s][col]:.3f}" for s in common)
    return v.row(
        claim=f"Several heads beat one at fixed d_model, paired sign test on fresh seeds ({where})",
        measured=f"at {size_text(r0, a[4])}: {ref} heads vs 1 head, test {col.split('_')[1]} per fresh seed {per_seed}"
                 + (f" ({budget_note[2:]})" if budget_note else ""),
        anchor=ANCHOR_HEADS,
        rule=f"{ref} heads vs 1, fresh seeds only: holds if P(Bin(n, ½) ≥ k) ≤ {SIGN_ALPHA:g} for k = the seeds "
             f"whose paired difference exceeds +{margin:g}, fails if P(Bin(n, ½) ≥ n − k) ≤ {SIGN_ALPHA:g}, else "
             "inconclusive; ceiling / floor if both arms' means are within the margin of the optimum / baseline; not "
             "converged if a fresh-seed eval curve whose further improvement could change the count is still moving at "
             "the end (last 20 % of the logged steps, tolerance 5 % of the scale); an arm with a longer budget at its "
             "rate on every fresh seed is counted on it; lr censored as in the other rows")


def heads_rows(idx, arms, seeds, fresh=None):
    out = []
    studies = [(rest, by_h) for rest, by_h in sorted(groups(idx, 3).items(), key=lambda kv: (task_rank(kv[0][0]), kv[0]))
               if rest[2] == "separate" and 1 in by_h and len(by_h) >= 2]
    # Two head-count studies of one task and architecture (at two widths) are named by their d_model,
    # so that each row's claim text is its own (the report matches rows across scales by it).
    per_task = {}
    for rest, by_h in studies:
        per_task[rest[:2]] = per_task.get(rest[:2], 0) + 1
    for rest, by_h in studies:
        t, a, q, ov = rest
        hs = sorted(by_h)
        d_model = arms.first(by_h[1])["d_model"]
        ref = ref_heads(hs, d_model)
        if ref is None:
            continue
        col, _, _, _ = metric(t)
        v = arms.compare(by_h[ref], by_h[1], sv.GREATER, f"{ref} heads", "1 head")
        per_h = "; ".join(f"{h} heads (d_k {int(d_model) // h}): {arm_summary(idx[by_h[h]], t)}" for h in hs)
        where = f"{TASK_LABEL.get(t, t)}, {ARCH_LABEL.get(a, a)}" + (
            f", d_model {int(d_model)}" if per_task[(t, a)] > 1 else "")
        out.append(v.row(
            claim=f"Several heads beat one at fixed d_model ({where})",
            measured=f"at {size_text(arms.first(by_h[1]), ov)}: {per_h}; {ref} heads vs 1, "
                     f"{arms.speed(by_h[ref], by_h[1])} ({seeds} seeds; the learning rate chosen per head count)",
            anchor=ANCHOR_HEADS,
            rule=f"{ref} heads (head size 16, else the largest count <= 8) vs 1: " + rule(sv.GREATER, t)))
        srow = sign_row(fresh or {}, by_h, ref, idx, arms, t, where)
        if srow:
            out.append(srow)
    return out


def pe_rows(idx, arms, seeds):
    """Arms that differ only in the override positional_encoding (learned vs the default)."""
    out = []
    for k in sorted(idx, key=lambda k: (task_rank(k[0]), k)):
        ov = dict(k[4])
        if ov.get("positional_encoding") != "learned":
            continue
        base = k[:4] + (tuple(sorted((x, y) for x, y in ov.items() if x != "positional_encoding")),)
        if base not in idx:
            continue
        t = k[0]
        v = arms.compare(k, base, sv.EQUAL, "learned", "sinusoidal")
        out.append(v.row(
            claim=f"Learned and sinusoidal positions perform alike ({TASK_LABEL.get(t, t)}, {ARCH_LABEL.get(k[1], k[1])}, "
                  f"{k[3]} heads)",
            measured=f"at {size_text(arms.first(base), base[4])}: learned: {arm_summary(idx[k], t)}; sinusoidal: "
                     f"{arm_summary(idx[base], t)} ({seeds} seeds)",
            anchor=ANCHOR_PE, rule="learned vs sinusoidal: " + rule(sv.EQUAL, t)))
    return out


def model_end(task, r0, full_level, meta):
    """Whether a trained model is at an end of its task's scale, where pruning it says nothing
    about heads: 'ceiling' if its test metric is within the margin of the optimum (a saturated task
    leaves spare heads that only the easy task creates), 'floor' if within the margin of the
    baseline or below it (a model that learned nothing has no heads to spare), 'plateau' if it is
    above that but less than a quarter of the way from the baseline to the optimum (on its
    initial plateau: it has not learned the task either; accuracy tasks, seqlab_verdict.on_plateau),
    else None."""
    _, higher, margin, _ = metric(task)
    if higher:
        base = floor_accuracy(task, r0, meta)
        ceiling = sv.at_ceiling([full_level], r0["best_accuracy"], margin)
        floor = sv.at_floor([full_level], base, margin)
        plateau = sv.on_plateau(full_level, base, r0["best_accuracy"])
    else:
        ceiling = sv.at_ceiling([full_level], r0["optimal_loss"], margin, higher_is_better=False)
        floor = sv.at_floor([full_level], r0["chance_loss"], margin, higher_is_better=False)
        plateau = False  # the LM tasks' optimum (0 nats) is not a level a model can reach
    return "ceiling" if ceiling else ("floor" if floor else ("plateau" if plateau else None))


def prune_rows(idx, prune, arms, seeds):
    """The pruning rows (Michel et al. 2019), for each share in PRUNE_FRACTIONS that the table has:
    per model with pruning data, the test metric with the least important share of its heads
    removed against the full model, paired per seed (non-inferiority), for the models whose full
    test metric is off both ends of the task's scale in most of their seeds (model_end, judged per
    seed: a seed at the ceiling or at the floor says nothing about spare heads; the seeds at an end
    are named); the other models are listed as not informative with the reason. One row per task family (its models' verdicts
    combined: 'depends on the model' when they disagree), then one row across the families
    ('depends on the task' when they disagree). A family without an informative model has no row
    of its own; it is named in the last row."""
    by_arm = defaultdict(lambda: defaultdict(dict))
    for r in prune:
        if arm_only(r["arm"]):  # one-seed check arms and fresh seeds: not models of the design
            continue
        by_arm[r["arm"]][r["fraction"]][r["seed"]] = r
    keys = {next(iter(v.values()))["arm"]: k for k, v in idx.items()}
    out = []
    for frac in PRUNE_FRACTIONS:
        out += prune_rows_at(frac, by_arm, keys, arms, seeds)
    return out


def prune_rows_at(frac, by_arm, keys, arms, seeds):
    """prune_rows at one share of the heads."""
    parts = defaultdict(list)       # task -> [(model label, Verdict, measured text)]
    skipped = defaultdict(list)     # task -> [text]
    first = {}                      # task -> its first model's key (the setting's text)
    words = PRUNE_WORDS.get(frac, f"A share {frac:g}")
    for arm in sorted(by_arm, key=lambda a: (task_rank(keys[a][0]), keys[a]) if a in keys else (99, ())):
        if arm not in keys or frac not in by_arm[arm]:
            continue
        key = keys[arm]
        t = key[0]
        first.setdefault(t, key)
        col, higher, margin, unit = metric(t)
        pcol, fcol = col, "full_" + col
        at = by_arm[arm][frac]
        r0 = arms.first(key)
        label = (f"{ARCH_LABEL.get(key[1], key[1])}, {QK_LABEL.get(key[2], key[2])} W_Q/W_K, {key[3]} heads"
                 + (f", {ov_text(key[4])}" if key[4] else ""))
        lv = [st.mean_ci95([r[c] for r in at.values()])[0] for c in (pcol, fcol)]
        ends = {s: model_end(t, r0, r[fcol], arms.meta) for s, r in at.items()}
        off = sorted(s for s, e in ends.items() if e is None)
        name = col.replace("_", " ")
        if 2 * len(off) <= len(ends):  # at most half of the seeds off both ends: not informative
            kinds = sorted({e for e in ends.values() if e})
            if len(kinds) == 1 and not off:
                end = kinds[0]
                ref = ("the optimum " + f"{(r0['best_accuracy'] if higher else r0['optimal_loss']):.3g}"
                       if end == "ceiling" else
                       "the baseline " + f"{(floor_accuracy(t, r0, arms.meta) if higher else r0['chance_loss']):.3g}")
                where = (f"less than a quarter of the way from {ref} to the optimum {r0['best_accuracy']:.3g}"
                         if end == "plateau" else f"within {margin:g} of {ref}")
                skipped[t].append(f"{label}: full model {name} {lv[1]:.3f}, {where} ({end}; pruned {lv[0]:.3f})")
            else:
                per = ", ".join(f"seed {s} {at[s][fcol]:.3f}{' (' + ends[s] + ')' if ends[s] else ''}"
                                for s in sorted(at))
                skipped[t].append(f"{label}: full model {name} per seed {per}: {len(off)} of {len(ends)} seeds off "
                                  f"both ends (pruned {lv[0]:.3f})")
            continue
        sign = 1 if higher else -1
        pruned = {s: sign * r[pcol] for s, r in at.items()}
        full = {s: sign * r[fcol] for s, r in at.items()}
        eff = ss.paired_difference(pruned, full, what=(f"pruned − full, test accuracy" if higher else
                                                       "loss of the full model − loss pruned (positive: pruned better)"))
        v = sv.decide(eff, margin, sv.NO_WORSE, unit=unit, ceiling=False, floor=False, controls=True,
                      levels=f"pruned {lv[0]:.3f}, full {lv[1]:.3f}")
        n_rm = int(next(iter(at.values()))["heads_removed"])
        n_all = int(next(iter(at.values()))["heads_total"])
        levels = "; ".join(
            f"{f:g}: {fmt_mean([r[pcol] for r in by_arm[arm][f].values()])}" for f in sorted(by_arm[arm]))
        at_end = [s for s in sorted(at) if ends[s]]
        left_txt = ("; at an end: " + ", ".join(f"seed {s} {ends[s]} (full {at[s][fcol]:.3f})" for s in at_end)
                    ) if at_end else ""
        parts[t].append((label, v, f"{label} (the {n_rm} least important of {n_all} heads): full {name} "
                                   f"{lv[1]:.3f}, after removing a share of the heads {levels}{left_txt}"))
    rule_text = (f"per model off both ends of the task's scale in most of its seeds (the full model's test metric "
                 f"farther than the margin from the optimum and from the baseline, and on accuracy tasks at least a "
                 f"quarter of the way from the baseline to the optimum, judged per seed), "
                 f"pruned ({frac:g} of the heads, least important first; importance = validation loss increase when "
                 "the head alone is masked) vs the full model, paired per seed: " + VERBS_NO_WORSE.format(m=ACC_MARGIN)
                 + f" (accuracy; loss tasks ±{LOSS_MARGIN:g} nats); a family's models combined (depends on the model "
                 "when they disagree)")
    out, fam = [], []
    for t in sorted(set(parts) | set(skipped), key=task_rank):
        not_inf = (f"; not informative: {'; '.join(skipped[t])}" if skipped[t] else "")
        if not parts[t]:
            continue
        ps = [(lab, v) for lab, v, _ in parts[t]]
        v = ps[0][1] if len(ps) == 1 else sv.combine(ps, condition="the model")
        fam.append((TASK_LABEL.get(t, t), v))
        out.append(v.row(
            claim=f"{words} of the heads can be removed at test time with little loss ({TASK_LABEL.get(t, t)})",
            measured=f"at {size_text(arms.first(first[t]), ())}: " + "; ".join(m for _, _, m in parts[t]) + f"{not_inf} ({seeds} seeds)",
            anchor=ANCHOR_PRUNE, rule=rule_text))
    if fam:
        v = fam[0][1] if len(fam) == 1 else sv.combine(fam, condition="the task")
        none = [f"{TASK_LABEL.get(t, t)} ({'; '.join(skipped[t])})" for t in sorted(skipped, key=task_rank)
                if not parts[t]]
        out.append(v.row(
            claim=f"{words} of the heads can be removed at test time with little loss (across task families)",
            measured="; ".join(f"{lab}: {x.text}" for lab, x in fam)
                     + (f"; families without an informative model (every model at the ceiling, the floor or on its plateau, "
                        f"not counted): {'; '.join(none)}" if none else "") + f" ({seeds} seeds)",
            anchor=ANCHOR_PRUNE,
            rule="the task families' verdicts above combined (holds if every family holds; depends on the task "
                 "when some hold and some fail); " + rule_text))
    return out


def length_text(lengths, by_a, archs, idx):
    """Reverse per length: test accuracy at each held-out length and over the training lengths, per
    architecture, mean ± 95 % CI over seeds ('' without the by_length table)."""
    arm_of = {a: next(iter(idx[by_a[a]].values()))["arm"] for a in archs}
    parts = []
    for a in archs:
        rows = [r for r in lengths if r["arm"] == arm_of[a]]
        if not rows:
            continue
        held = sorted({r["length"] for r in rows if r["lengths"] == "held_out"})
        txt = [f"{n}: {fmt_mean([r['accuracy'] for r in rows if r['length'] == n and r['lengths'] == 'held_out'])}"
               for n in held]
        # Over the training lengths: each seed's accuracy weighted by its scored positions.
        per_seed = defaultdict(lambda: [0.0, 0.0])
        for r in rows:
            if r["lengths"] == "training":
                per_seed[r["seed"]][0] += r["accuracy"] * r["rows"] * r["length"]
                per_seed[r["seed"]][1] += r["rows"] * r["length"]
        if per_seed:
            txt.append(f"training lengths: {fmt_mean([a_ / b_ for a_, b_ in per_seed.values()])}")
        parts.append(f"{ARCH_LABEL[a]} " + ", ".join(txt))
    return ("; test accuracy per held-out length " + "; ".join(parts)) if parts else ""


def arch_rows(idx, arms, seeds, lengths=()):
    out = []
    for rest, by_a in sorted(groups(idx, 1).items(), key=lambda kv: (task_rank(kv[0][0]), kv[0])):
        t, q, h, ov = rest
        if q != "separate" or len(by_a) < 2:
            continue
        archs = [a for a in ARCH_ORDER if a in by_a]
        params = ", ".join(f"{ARCH_LABEL[a]} {int(arms.first(by_a[a])['n_params'])}" for a in archs)
        macs = ", ".join(f"{ARCH_LABEL[a]} {arms.first(by_a[a]).get('forward_macs', float('nan')) / 1e6:.2f}M"
                         for a in archs)
        meas = f"at {size_text(arms.first(by_a[archs[0]]), ov)}: " + "; ".join(
            f"{ARCH_LABEL[a]} {arm_summary(idx[by_a[a]], t)}" for a in archs)
        if t == "reverse":
            seen = ", ".join(f"{ARCH_LABEL[a]} {fmt_mean([r['seen_test_accuracy'] for r in idx[by_a[a]].values()])}"
                             for a in archs)
            meas += f"; accuracy at the training lengths {seen}" + length_text(lengths, by_a, archs, idx)
        where = f"{h} heads"
        best = CLAIMED_ARCH.get(t)
        if best in by_a and len([a for a in archs if a in PARAM_MATCHED]) >= 2:
            parts = [(f"vs {ARCH_LABEL[o]}", arms.compare(by_a[best], by_a[o], sv.GREATER, ARCH_LABEL[best], ARCH_LABEL[o]))
                     for o in archs if o != best and o in PARAM_MATCHED]
            v = sv.combine(parts)
            out.append(v.row(
                claim=f"{ARCH_LABEL[best]} suits {TASK_LABEL.get(t, t)} best among "
                      f"{', '.join(ARCH_LABEL[a] for a in archs if a in PARAM_MATCHED)} at matched parameter counts ({where})",
                measured=f"{meas}; parameters {params}; forward multiply-adds per example {macs} ({seeds} seeds)",
                anchor=ANCHOR_ARCH,
                rule=f"{ARCH_LABEL[best]} against each other parameter-matched architecture (holds if it beats every "
                     "one): " + rule(sv.GREATER, t)))
        if "encoder_decoder_compute" in by_a and "decoder" in by_a:
            a, b = by_a["encoder_decoder_compute"], by_a["decoder"]
            ma, mb = arms.first(a).get("forward_macs", float("nan")), arms.first(b).get("forward_macs", float("nan"))
            ok = not (math.isnan(ma) or math.isnan(mb)) and abs(ma / mb - 1) <= MACS_TOLERANCE
            v = arms.compare(a, b, sv.GREATER, "encoder-decoder (2P)", "decoder-only", controls=ok)
            out.append(v.row(
                claim=f"At equal compute an encoder-decoder (2P parameters) beats the decoder-only model "
                      f"({TASK_LABEL.get(t, t)}, {where})",
                measured=f"{meas}; parameters {params}; forward multiply-adds per example {macs} ({seeds} seeds)",
                anchor=ANCHOR_ARCH,
                rule="encoder-decoder L+L layers vs decoder-only L layers: " +
                     rule(sv.GREATER, t, controls=f"forward multiply-adds within ±{MACS_TOLERANCE:.0%} (parameters "
                                                  "differ by design, 2P vs P)")))
        if "prefix_lm" in by_a and "decoder" in by_a:
            v = arms.compare(by_a["prefix_lm"], by_a["decoder"], sv.GREATER, "prefix LM", "decoder-only")
            out.append(v.row(
                claim=f"A prefix LM (bidirectional over its input) beats the causal decoder-only model "
                      f"({TASK_LABEL.get(t, t)}, {where})",
                measured=f"{meas}; parameters {params} ({seeds} seeds)", anchor=ANCHOR_ARCH,
                rule="prefix LM vs decoder-only, the same parameters: " + rule(sv.GREATER, t)))
    return out


def verdicts(results_dir):
    rows, curve, prune, meta = load(results_dir)
    lengths = load_lengths(results_dir)
    idx = index(rows)
    fresh = index(rows, fresh=True)
    # The fresh seeds of a one-rate arm (lr_grid of one rate, a rate sweep's run) join it: they
    # complete the sweep's chosen rate to every seed (Arms.rate_sweep).
    for k, runs in fresh.items():
        if len(str(dict(k[4]).get("lr_grid", "")).split()) == 1 and k in idx:
            idx[k].update({s: r for s, r in runs.items() if s not in idx[k]})
    arms = Arms(idx, curve, meta)
    seeds = len({r["seed"] for r in rows if r["offset"] == 0})
    out = [r for r in [sym_row(rows)] if r]
    out += qk_rows(idx, arms, seeds)
    out += heads_rows(idx, arms, seeds, fresh)
    out += pe_rows(idx, arms, seeds)
    out += prune_rows(idx, prune, arms, seeds)
    out += arch_rows(idx, arms, seeds, lengths)
    if not out:
        raise st.DataError(os.path.join(results_dir, NAME + ".csv") + ": no sub-design found (no arms to compare)")
    return out


def beyond_this_machine():
    """What this experiment cannot decide on the 2-core development machine (plots/make_report.py,
    "What this suite cannot decide here"; keys seqlab_verdict.BEYOND_KEYS)."""
    return [sv.beyond(
        "The three sub-designs at the paper scale (paper.ini): d_model 64, 4 layers (encoder-decoder 2 + 2), "
        "T = 32, 8 heads as Vaswani et al.'s reference and heads of 4–64 dimensions (n_heads 1–16), 3000 updates, "
        "5 seeds",
        "165 cells, about 8 core-hours: some 4 h on both cores of this machine, beyond the standard scale's "
        "hour per experiment; as a Slurm array it takes one cell's time",
        sv.paper_sweep("attention_ablations", mem="1G", time="0:30:00", checkpoint_every=250),
        "~3 min per cell, ~8 core-hours for the 165 cells: 0.055 CPU-s per update at one thread on an idle 2-core "
        "AMD EPYC VM (the 8-head decoder on induction; CPU time of 80 updates minus 20) × 3000 updates, plus 60 "
        "evaluations of 0.06 s (README \"Paper scale\")")]


# ----------------------------------------------------------------------------------------------
# Figures


def seed_points(ax, x, vals, color, width=0.6, label=None, marker="o"):
    """Every seed's value as a point (spread over `width` around x) and their mean as a short bar:
    for few seeds with bimodal outcomes a t-interval would leave the metric's range."""
    vals = [v for v in vals if not math.isnan(v)]
    if not vals:
        return
    n = len(vals)
    xs = [x + (i - (n - 1) / 2) * width / max(n, 1) for i in range(n)]
    ax.scatter(xs, vals, s=14, color=color, marker=marker, label=label, zorder=3, edgecolors="none")
    m = sum(vals) / n
    ax.plot([x - width / 2, x + width / 2], [m, m], color=color, linewidth=1.5, zorder=2)


def short(rest):
    t, a, h, ov = rest
    o = ",".join(f"{k}={v}" for k, v in ov)
    return f"{t}\n{ARCH_SHORT.get(a, a)} h={h}" + (f"\n{o}" if o else "")


def qk_groups(idx):
    return [(rest, g) for rest, g in sorted(groups(idx, 2).items(), key=lambda kv: (task_rank(kv[0][0]), kv[0]))
            if "separate" in g and len(g) >= 2]


ASYM_FLOOR = 1e-9  # where an exactly symmetric run (asymmetry < this) is drawn on the log axis


def fig_qk(idx, out_dir, note):
    """Per Q/K group: test accuracy (accuracy tasks) or test loss (LM tasks), one point per seed, and
    the measured logit asymmetry of every arm, trained, with the exactly symmetric runs drawn on a
    marked floor line."""
    gs = qk_groups(idx)
    if not gs:
        return []
    acc = [(rest, g) for rest, g in gs if rest[0] not in LOSS_TASKS]
    los = [(rest, g) for rest, g in gs if rest[0] in LOSS_TASKS]
    panels = [p for p in ((acc, "test_accuracy", "test accuracy (fraction of scored tokens)"),
                          (los, "test_loss", "test loss (nats per character)")) if p[0]]
    fig, axes = st.plt.subplots(1, len(panels) + 1, figsize=(5 + 4 * len(panels), 4.8), squeeze=False)
    axes = axes[0]
    nq = len(QK_ORDER)
    for ax, (sel, col, ylabel) in zip(axes, panels):
        for j, (rest, g) in enumerate(sel):
            for i, q in enumerate(QK_ORDER):
                if q in g:
                    seed_points(ax, j + (i - (nq - 1) / 2) * 0.8 / nq, [r[col] for r in idx[g[q]].values()],
                                st.PALETTE[QK_COLOR[q]], width=0.8 / nq * 0.8, label=QK_LABEL[q] if j == 0 else None)
        ax.set_xticks(range(len(sel)))
        ax.set_xticklabels([short(rest) for rest, _ in sel], fontsize=7)
        ax.set_ylabel(ylabel)
        if col == "test_accuracy":
            ax.set_ylim(-0.02, 1.05)
        ax.set_title(f"{ylabel.split(' (')[0]}: each seed, bar = mean", fontsize=9)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, title="W_Q, W_K", title_fontsize=8, loc="lower center",
               bbox_to_anchor=(0.5, -0.08), ncol=len(QK_ORDER))
    ax = axes[-1]
    for j, (rest, g) in enumerate(gs):
        for i, q in enumerate(QK_ORDER):
            if q in g:
                vals = [max(r["logit_asymmetry"], ASYM_FLOOR) for r in idx[g[q]].values()]
                seed_points(ax, j + (i - (nq - 1) / 2) * 0.8 / nq, vals, st.PALETTE[QK_COLOR[q]], width=0.8 / nq * 0.8)
    ax.set_yscale("log")
    ax.axhline(ASYM_FLOOR, color="grey", linestyle=":", linewidth=1)
    ax.annotate("exactly symmetric (< 1e-9; shared W_Q = W_K without unit keys)", (0, ASYM_FLOOR),
                xytext=(0, 4), textcoords="offset points", fontsize=6, color="grey")
    ax.set_xticks(range(len(gs)))
    ax.set_xticklabels([short(rest) for rest, _ in gs], fontsize=7)
    ax.set_ylabel("‖S − Sᵀ‖_F / ‖S‖_F of the pre-softmax logits (trained)")
    ax.set_title("Measured logit asymmetry, each seed", fontsize=9)
    fig.suptitle(f"Separate vs shared W_Q = W_K ({note})", fontsize=9, y=1.02)
    return st.save(fig, out_dir, NAME + "_qk")


def curves_by_seed(curve, arm, col):
    """{seed: ([steps], [values])} of an arm's eval curve."""
    out = defaultdict(list)
    for r in curve:
        if r["arm"] == arm:
            out[r["seed"]].append((r["step"], r[col]))
    return {s: ([x for x, _ in sorted(v)], [y for _, y in sorted(v)]) for s, v in out.items()}


def fig_qk_curves(idx, curve, out_dir, note):
    """The eval metric during training, one thin line per seed, per Q/K arm (each arm its colour)."""
    gs = qk_groups(idx)
    if not gs:
        return []
    fig, axes = st.plt.subplots(1, len(gs), figsize=(3.8 * len(gs), 3.4), squeeze=False)
    for ax, (rest, g) in zip(axes[0], gs):
        t = rest[0]
        col = "eval_loss" if t in LOSS_TASKS else "eval_accuracy"
        for q in QK_ORDER:
            if q not in g:
                continue
            color = st.PALETTE[QK_COLOR[q]]
            for k, (_, (xs, ys)) in enumerate(sorted(curves_by_seed(curve, next(iter(idx[g[q]].values()))["arm"], col).items())):
                ax.plot(xs, ys, color=color, linewidth=0.8, alpha=0.8,
                        label=QK_LABEL[q] if k == 0 else None)
        ax.set_xlabel("training step")
        ax.set_ylabel(col.replace("_", " ") + (" (nats)" if col == "eval_loss" else " (fraction)"))
        ax.set_title(short(rest).replace("\n", ", "), fontsize=8)
        ax.legend(fontsize=6)
    fig.suptitle(f"Separate vs shared W_Q = W_K during training, one line per seed ({note})", fontsize=9, y=1.04)
    return st.save(fig, out_dir, NAME + "_qk_curves")


def heads_groups(idx):
    return [(rest, g) for rest, g in sorted(groups(idx, 3).items(), key=lambda kv: (task_rank(kv[0][0]), kv[0]))
            if rest[2] == "separate" and len(g) >= 2 and 1 in g]


def fig_heads(idx, out_dir, note, fresh=None):
    """Test metric against n_heads, one point per seed (accuracy tasks and loss tasks on their own
    axes; fresh seeds of an arm as open markers), and the learning rate each head count's pilot
    chose."""
    gs = heads_groups(idx)
    if not gs:
        return []
    fresh = fresh or {}
    kinds = [k for k in ("test_accuracy", "test_loss")
             if any((rest[0] in LOSS_TASKS) == (k == "test_loss") for rest, _ in gs)]
    fig, axes = st.plt.subplots(1, len(kinds) + 1, figsize=(5.2 * (len(kinds) + 1), 4.2), squeeze=False)
    axes = axes[0]
    all_h = sorted({h for _, g in gs for h in g})
    grid = set()
    for i, (rest, g) in enumerate(gs):
        t, a, _, ov = rest
        hs = sorted(g)
        d_model = int(next(iter(idx[g[hs[0]]].values()))["d_model"])
        col = "test_loss" if t in LOSS_TASKS else "test_accuracy"
        ax = axes[kinds.index(col)]
        color, marker = st.PALETTE[i % len(st.PALETTE)], st.MARKERS[i % len(st.MARKERS)]
        label = f"{t} d_model {d_model}" + (f" ({ov_text(tuple(x for x in ov if x[0] != 'd_model'))})" if ov else "")
        for h in hs:
            x = math.log2(h) + (i - (len(gs) - 1) / 2) * 0.12
            seed_points(ax, x, [r[col] for r in idx[g[h]].values()], color, width=0.1, marker=marker,
                        label=label if h == hs[0] else None)
            fr = [r[col] for r in fresh.get(g[h], {}).values()]
            if fr:
                ax.scatter([x + 0.05] * len(fr), fr, s=14, facecolors="none", edgecolors=color, marker=marker,
                           zorder=3, label=f"{label}, fresh seeds" if h == 1 else None)
        lrs = [st.mean_ci95([r["lr"] for r in idx[g[h]].values()])[0] for h in hs]
        grid |= {x for x in lrs if not math.isnan(x)}
        axes[-1].plot([math.log2(h) for h in hs], lrs, color=color, marker=marker, label=label)
    for ax in axes:
        ax.set_xticks([math.log2(h) for h in all_h])
        ax.set_xticklabels([str(h) for h in all_h])
        ax.set_xlabel("n_heads at fixed d_model (head size d_model / n_heads)")
    for ax, col in zip(axes, kinds):
        ax.set_ylabel("test accuracy (fraction)" if col == "test_accuracy" else "test loss (nats)")
        ax.set_title(f"{'Accuracy' if col == 'test_accuracy' else 'Loss'} vs heads, each seed", fontsize=9)
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.16))  # under the axes, off the data
    axes[-1].set_yscale("log")
    axes[-1].set_yticks(sorted(grid))
    axes[-1].set_yticklabels([f"{x:g}" for x in sorted(grid)])
    axes[-1].minorticks_off()
    axes[-1].set_ylabel("learning rate chosen by the pilot")
    axes[-1].set_title("Learning rate per head count", fontsize=9)
    fig.suptitle(f"Several heads vs one ({note})", fontsize=9, y=1.02)
    return st.save(fig, out_dir, NAME + "_heads")


def fig_pruning(idx, prune, out_dir, note):
    """Test metric against the share of heads removed, one panel per task (accuracy or loss), the
    design's arms of the task as lines (mean over seeds; the one-seed check arms and fresh seeds,
    with arm-only keys, left out), each panel's legend in its own blank axes under it so that no
    legend covers a panel below."""
    if not prune:
        return []
    by_arm = defaultdict(lambda: defaultdict(list))
    for r in prune:
        if arm_only(r["arm"]):
            continue
        by_arm[r["arm"]][r["fraction"]].append(r)
    if not by_arm:
        return []
    tasks = sorted({parse_arm(a)[0] for a in by_arm}, key=task_rank)
    ncol = min(4, len(tasks))
    nrow = (len(tasks) + ncol - 1) // ncol
    n_leg = max(sum(1 for a in by_arm if parse_arm(a)[0] == t) for t in tasks)
    leg_h = 0.25 + 0.16 * n_leg  # inches for the legend rows under each panel
    fig, grid = st.plt.subplots(2 * nrow, ncol, figsize=(4.4 * ncol, (3.4 + leg_h) * nrow), squeeze=False,
                                gridspec_kw=dict(height_ratios=[3.4, leg_h] * nrow, hspace=0.45))
    axes = [grid[2 * (i // ncol)][i % ncol] for i in range(nrow * ncol)]
    legs = [grid[2 * (i // ncol) + 1][i % ncol] for i in range(nrow * ncol)]
    for ax in legs:
        ax.axis("off")
    for ax in axes[len(tasks):]:
        ax.set_visible(False)
    for ax, lax, t in zip(axes, legs, tasks):
        col = "test_loss" if t in LOSS_TASKS else "test_accuracy"
        arms = sorted(a for a in by_arm if parse_arm(a)[0] == t)
        for i, arm in enumerate(arms):
            fr = sorted(by_arm[arm])
            full = st.mean_ci95([r["full_" + col] for rows in by_arm[arm].values() for r in rows])[0]
            xs = [0.0] + fr
            ys = [full] + [st.mean_ci95([r[col] for r in by_arm[arm][f]])[0] for f in fr]
            k = parse_arm(arm)
            label = f"{ARCH_SHORT.get(k[1], k[1])} {QK_LABEL.get(k[2], k[2])} h={k[3]}" + (f" {ov_text(k[4])}" if k[4] else "")
            ax.plot(xs, ys, marker=st.MARKERS[i % len(st.MARKERS)], color=st.PALETTE[i % len(st.PALETTE)],
                    label=label)
        ax.set_xlabel("share of heads removed (least important first)", fontsize=8)
        ax.set_ylabel("test loss (nats)" if col == "test_loss" else "test accuracy (fraction)", fontsize=8)
        ax.set_title(TASK_LABEL.get(t, t), fontsize=8)
        handles, labels = ax.get_legend_handles_labels()
        lax.legend(handles, labels, fontsize=6, loc="upper center", ncol=1, frameon=False)
    fig.suptitle(f"Test-time head pruning, Michel et al. 2019; mean over seeds ({note})", fontsize=9, y=1.01)
    return st.save(fig, out_dir, NAME + "_pruning")


def fig_arch(idx, out_dir, note, meta=None):
    gs = [(rest, g) for rest, g in sorted(groups(idx, 1).items(), key=lambda kv: (task_rank(kv[0][0]), kv[0]))
          if rest[1] == "separate" and len(g) >= 2]
    if not gs:
        return []
    holdout = ((meta or {}).get("config", {}) or {}).get("reverse_holdout", "") if isinstance(meta, dict) else ""
    fig, axes = st.plt.subplots(1, len(gs), figsize=(4.6 * len(gs), 4.2), squeeze=False)
    for ax, (rest, g) in zip(axes[0], gs):
        t = rest[0]
        archs = [a for a in ARCH_ORDER if a in g]
        col = "test_loss" if t in LOSS_TASKS else "test_accuracy"
        for j, a in enumerate(archs):
            seed_points(ax, j, [r[col] for r in idx[g[a]].values()], st.PALETTE[ARCH_ORDER.index(a) % len(st.PALETTE)])
            r0 = next(iter(idx[g[a]].values()))
            ax.annotate(f"{int(r0['n_params'])} p.\nD {int(r0['d_model'])}", (j, 0), xycoords=("data", "axes fraction"),
                        ha="center", va="bottom", fontsize=6, xytext=(0, 3), textcoords="offset points")
        ax.set_xticks(range(len(archs)))
        ax.set_xticklabels([ARCH_SHORT[a] for a in archs], fontsize=8)
        r0 = next(iter(idx[g[archs[0]]].values()))
        if col == "test_loss":
            ax.set_ylabel("test loss on the continuation (nats per symbol)")
        else:
            ax.axhline(r0["chance_accuracy"], color="grey", linestyle=":", linewidth=1)
            where = (f" at the held-out lengths {holdout}" if t == "reverse" and holdout
                     else " at the held-out lengths" if t == "reverse" else "")
            ax.set_ylabel(f"test accuracy{where} (dotted: baseline)")
            ax.set_ylim(-0.02, 1.05)
        claimed = CLAIMED_ARCH.get(t)
        ax.set_title(f"{short(rest).replace(chr(10), ', ')}\n(claimed best: {ARCH_LABEL.get(claimed, '-')})", fontsize=8)
    fig.suptitle(f"Architectures, each seed, bar = mean ({note})", fontsize=9, y=1.06)
    return st.save(fig, out_dir, NAME + "_arch")


def fig_lengths(idx, lengths, out_dir, note):
    """Reverse: test accuracy against the source length per architecture (mean over seeds; the
    held-out lengths as filled markers, the training lengths open), when the by_length table has
    rows."""
    if not lengths:
        return []
    arms = sorted({r["arm"] for r in lengths}, key=lambda a: ARCH_ORDER.index(parse_arm(a)[1])
                  if parse_arm(a)[1] in ARCH_ORDER else 99)
    fig, ax = st.plt.subplots(figsize=(7, 4.2))
    for arm in arms:
        k = parse_arm(arm)
        if arm_only(arm) or "lr_grid" in dict(k[4]):  # the design's arms only (not the one-seed grid checks)
            continue
        color = st.PALETTE[ARCH_ORDER.index(k[1]) % len(st.PALETTE)] if k[1] in ARCH_ORDER else "black"
        rows = [r for r in lengths if r["arm"] == arm]
        ns = sorted({r["length"] for r in rows})
        ys = [st.mean_ci95([r["accuracy"] for r in rows if r["length"] == n])[0] for n in ns]
        ax.plot(ns, ys, color=color, linewidth=1, label=ARCH_LABEL.get(k[1], k[1]))
        for n, y in zip(ns, ys):
            held = any(r["lengths"] == "held_out" for r in rows if r["length"] == n)
            ax.scatter([n], [y], color=color if held else "white", edgecolors=color, zorder=3, s=30 if held else 14)
    ax.set_xlabel("source length (filled: held out of training)")
    ax.set_ylabel("test accuracy (fraction of target symbols)")
    ax.set_ylim(-0.02, 1.05)
    ax.set_title(f"Reverse: accuracy per length, mean over seeds ({note})", fontsize=9)
    ax.legend(fontsize=7)
    return st.save(fig, out_dir, NAME + "_lengths")


def main(argv):
    res = argv[1] if len(argv) > 1 else os.path.join("results", NAME)
    try:
        rows, curve, prune, meta = load(res)
        lengths = load_lengths(res)
        st.setup()
        idx = index(rows)
        fresh = index(rows, fresh=True)
        # The figures show every seed (the pruning figure: means), not intervals.
        note = st.scale_note(meta, len({r["seed"] for r in rows if r["offset"] == 0})).replace(", mean ± 95% CI", "")
        out_dir = os.path.join(res, "figures")
        paths = []
        paths += fig_qk(idx, out_dir, note)
        paths += fig_qk_curves(idx, curve, out_dir, note)
        paths += fig_heads(idx, out_dir, note, fresh)
        paths += fig_pruning(idx, prune, out_dir, note)
        paths += fig_arch(idx, out_dir, note, meta)
        paths += fig_lengths(idx, lengths, out_dir, note)
        verdicts(res)  # fails (exit 2) on data the report could not use
    except st.DataError as e:
        st.fail(str(e))
    for p in paths:
        print("wrote", p)


if __name__ == "__main__":
    main(sys.argv)
