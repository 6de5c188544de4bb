"""References for the positional encodings (tests/unit/test_nn_positional.cpp).

Called by make_fixtures.py (float64 default dtype). PyTorch has no positional-encoding modules, so
each reference below is written from the paper's formula in float64, in a form deliberately
different from the C++ code (vectorised over a whole table; RoPE by the "x·cos + rotate(x)·sin"
formulation rather than a loop over pairs). Inputs are rounded to float32 first, so the
references are exact for the values the float32 C++ code sees.

Fixtures:
  positional_sinusoidal: Vaswani et al. 2017 §3.5 tables, interleaved (the paper's layout) and
      concatenated [sin..., cos...], also from a position offset. C++ tolerance 1e-6 absolute.
  positional_rope: RoFormer eq. 34 rotations of x [rows, T, hd] at positions pos_offset..pos_offset+T-1,
      both pairings, scaling none / position interpolation (Chen et al. 2023: m -> m/s) / NTK-aware
      (base' = base·s^(hd/(hd-2))), with context length > train_len so that s > 1; plus one case at
      positions around 100000. C++ tolerance 1e-5 relative (plus 1e-6 absolute).
  positional_alibi: ALiBi slopes (Press et al. 2021 §3 and their get_slopes) for n = 1..12.
      C++ tolerance 1e-6 absolute.
"""
import math

import torch

D = torch.float64


def f32(t):
    """Rounds to float32 and back, so the C++ side sees exactly these values."""
    return t.to(torch.float32).to(D)


# --- sinusoidal --------------------------------------------------------------------------------

def sinusoidal(length, d_model, interleaved=True, pos_offset=0):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))."""
    pos = torch.arange(pos_offset, pos_offset + length, dtype=D).unsqueeze(1)       # [len, 1]
    denom = torch.pow(torch.tensor(10000.0, dtype=D), torch.arange(0, d_model, 2, dtype=D) / d_model)
    angle = pos / denom                                                             # [len, d/2]
    if interleaved:
        pe = torch.zeros(length, d_model, dtype=D)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle)
        return pe
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)


def gen_sinusoidal(write):
    L, DM = 50, 16
    write("positional_sinusoidal", {
        "interleaved": sinusoidal(L, DM, True),
        "concatenated": sinusoidal(L, DM, False),
        "interleaved.offset1000": sinusoidal(8, DM, True, 1000),
        "concatenated.offset1000": sinusoidal(8, DM, False, 1000),
    }, {"formula": "Vaswani et al. 2017 sec. 3.5", "len": L, "d_model": DM,
        "offset_case": "len 8 from pos_offset 1000",
        "layouts": "interleaved: columns (2i, 2i+1) = (sin, cos); concatenated: [sin_0..sin_{d/2-1}, cos_0..]",
        "tolerance": "1e-6 absolute"})


# --- RoPE --------------------------------------------------------------------------------------

def rope(x, pos_offset, base, pairing, scaling, s):
    """x [rows, T, hd] float64 -> R(pos) x (RoFormer eq. 34), pos = pos_offset + t."""
    rows, T, hd = x.shape
    if scaling == "ntk" and s != 1.0:
        base = base * s ** (hd / (hd - 2))
    theta = base ** (-torch.arange(0, hd, 2, dtype=D) / hd)                         # [hd/2]
    pos = torch.arange(pos_offset, pos_offset + T, dtype=D)
    if scaling == "pi":
        pos = pos / s
    angle = torch.outer(pos, theta)                                                 # [T, hd/2]
    if pairing == "interleaved":
        cos = torch.cos(angle).repeat_interleave(2, dim=1)                          # [T, hd]
        sin = torch.sin(angle).repeat_interleave(2, dim=1)
        rot = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).reshape(rows, T, hd)  # (-x1, x0, -x3, x2..)
    else:
        cos = torch.cat([torch.cos(angle)] * 2, dim=1)
        sin = torch.cat([torch.sin(angle)] * 2, dim=1)
        h = hd // 2
        rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)                          # rotate_half
    return x * cos + rot * sin


def gen_rope(write, g):
    ROWS, T, HD, BASE, OFF, TRAIN = 3, 6, 8, 10000.0, 5, 4
    CTX = OFF + T                   # context length evaluated: 11 > train_len 4
    S = CTX / TRAIN                 # 2.75
    x = f32(torch.randn(ROWS, T, HD, generator=g, dtype=D))
    out = {"x": x}
    for pairing in ("interleaved", "halves"):
        for scaling in ("none", "pi", "ntk"):
            out[pairing + "." + scaling] = rope(x, OFF, BASE, pairing, scaling, 1.0 if scaling == "none" else S)
        out[pairing + ".none.offset100000"] = rope(x, 100000, BASE, pairing, "none", 1.0)
    write("positional_rope", out, {
        "formula": "Su et al. 2021 eq. 34; pi: Chen et al. 2023 positions m/s; ntk: base*s^(hd/(hd-2))",
        "rows": ROWS, "T": T, "head_dim": HD, "base": BASE, "pos_offset": OFF, "train_len": TRAIN,
        "context_length": CTX, "scale": S, "large_offset": 100000,
        "tolerance": "1e-5 relative + 1e-6 absolute"})


# --- ALiBi -------------------------------------------------------------------------------------

def alibi_slopes(n):
    """Press et al. 2021 sec. 3: 2^(-8i/n), i = 1..n, for n a power of two; otherwise the slopes of the
    closest lower power of two m, then every other slope of 2m (1st, 3rd, ...), n - m of them."""
    if n & (n - 1) == 0:
        return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)]
    m = 2 ** int(math.floor(math.log2(n)))
    return alibi_slopes(m) + alibi_slopes(2 * m)[0::2][: n - m]


def gen_alibi(write):
    out = {"slopes.n%d" % n: torch.tensor(alibi_slopes(n), dtype=D) for n in range(1, 13)}
    write("positional_alibi", out, {
        "formula": "Press et al. 2021 sec. 3 and get_slopes in their code", "n_heads": "1..12",
        "tolerance": "1e-6 absolute"})


def generate(write):
    g = torch.Generator().manual_seed(20240612)
    gen_sinusoidal(write)
    gen_rope(write, g)
    gen_alibi(write)
