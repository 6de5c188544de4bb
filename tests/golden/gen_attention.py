"""PyTorch references for seqlab::MultiheadAttention (tests/unit/test_nn_attention.cpp).

torch.nn.MultiheadAttention(D, h, batch_first=True, bias=...) in float64, called as
  self-attention:  mha(x, x, x, ...)    cross-attention:  mha(q, kv, kv, ...)
with need_weights=True, average_attn_weights=False. Masks: causal = bool attn_mask
torch.triu(ones(Tq, Tk), diagonal=1) (True = not allowed); key_padding_mask bool [B, Tk]
(True = padded). Every query row keeps at least one visible key (PyTorch gives NaN for a fully
masked row; seqlab gives zeros, tested separately).

Each fixture stores
  x [B, T, D] (self) or query [B, Tq, D] and key_value [B, Tk, D] (cross),
  key_padding_mask [B, Tk] as 0/1 (only when used), the parameters under their state_dict keys
  (in_proj_weight [3D, D], in_proj_bias [3D], out_proj.weight [D, D], out_proj.bias [D]),
  y [B, Tq, D], attn_weights [B, h, Tq, Tk], a random upstream gradient dy [B, Tq, D] and the
  gradients of loss = sum(y * dy) w.r.t. the inputs and every parameter as "grad_<key>".
meta: B, Tq, Tk, d_model, n_heads, bias, self (1/0), causal (1/0), padding (1/0).
Inputs and parameters are rounded to float32 first, so the references are exact for the values
the float32 C++ code sees. Parameters: in_proj_weight is the default xavier draw times 2 (wider
scores, so the softmax is far from uniform); biases U(-0.5, 0.5) instead of PyTorch's zeros so
their gradient paths are exercised.
"""
import torch

DT = torch.float64


def f32(t):
    return t.to(torch.float32).to(DT)


def _padding(B, Tk, lengths):
    """bool [B, Tk]: True beyond each length, plus an interior padded key in sequences long enough."""
    m = torch.zeros(B, Tk, dtype=torch.bool)
    for b, n in enumerate(lengths):
        m[b, n:] = True
        if n >= 4:
            m[b, 2] = True  # padding is not only a suffix (e.g. packed segments)
    return m


def _case(write, name, B, Tq, Tk, D, h, self_attn, causal, lengths=None, bias=True):
    mha = torch.nn.MultiheadAttention(D, h, batch_first=True, bias=bias).to(DT)
    with torch.no_grad():
        mha.in_proj_weight.mul_(2.0)
        for p in mha.parameters():
            p.copy_(f32(p))
        if bias:
            mha.in_proj_bias.copy_(f32(torch.rand(3 * D) - 0.5))
            mha.out_proj.bias.copy_(f32(torch.rand(D) - 0.5))
    if self_attn:
        assert Tq == Tk
        x = f32(torch.randn(B, Tq, D)).requires_grad_(True)
        q = kv = x
    else:
        q = f32(torch.randn(B, Tq, D)).requires_grad_(True)
        kv = f32(torch.randn(B, Tk, D)).requires_grad_(True)
    attn_mask = torch.triu(torch.ones(Tq, Tk, dtype=torch.bool), diagonal=1) if causal else None
    kpm = _padding(B, Tk, lengths) if lengths is not None else None
    # Every query must see at least one key, else PyTorch returns NaN (seqlab: zeros).
    allowed = torch.ones(B, Tq, Tk, dtype=torch.bool)
    if attn_mask is not None:
        allowed &= ~attn_mask
    if kpm is not None:
        allowed &= ~kpm[:, None, :]
    assert allowed.any(dim=-1).all(), name + ": a fully masked row"

    y, w = mha(q, kv, kv, key_padding_mask=kpm, attn_mask=attn_mask, need_weights=True,
               average_attn_weights=False)
    dy = f32(torch.randn(B, Tq, D))
    (y * dy).sum().backward()

    tensors = {}
    if self_attn:
        tensors["x"] = x
        tensors["grad_x"] = x.grad
    else:
        tensors.update({"query": q, "key_value": kv, "grad_query": q.grad, "grad_key_value": kv.grad})
    if kpm is not None:
        tensors["key_padding_mask"] = kpm.to(DT)
    for key, p in mha.named_parameters():
        tensors[key] = p
        tensors["grad_" + key] = p.grad
    tensors.update({"y": y, "attn_weights": w, "dy": dy})
    meta = {"module": "torch.nn.MultiheadAttention(%d, %d, batch_first=True, bias=%s)" % (D, h, bias),
            "B": B, "Tq": Tq, "Tk": Tk, "d_model": D, "n_heads": h, "bias": int(bias),
            "self": int(self_attn), "causal": int(causal), "padding": int(kpm is not None),
            "call": "need_weights=True, average_attn_weights=False; causal = bool triu(ones(Tq, Tk), 1)",
            "loss": "sum(y * dy)"}
    write(name, tensors, meta)


def generate(write):
    _case(write, "attention_self_causal", B=2, Tq=5, Tk=5, D=8, h=2, self_attn=True, causal=True)
    _case(write, "attention_self_padding", B=3, Tq=6, Tk=6, D=8, h=2, self_attn=True, causal=False,
          lengths=[6, 4, 2])
    _case(write, "attention_self_causal_padding", B=3, Tq=6, Tk=6, D=12, h=3, self_attn=True,
          causal=True, lengths=[5, 6, 3])
    _case(write, "attention_cross", B=2, Tq=4, Tk=7, D=8, h=4, self_attn=False, causal=False,
          lengths=[7, 5])
    _case(write, "attention_cross_causal_nobias", B=2, Tq=5, Tk=3, D=6, h=2, self_attn=False,
          causal=True, bias=False)
