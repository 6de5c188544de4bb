"""PyTorch references for seqlab::TransformerEncoderLayer / TransformerDecoderLayer
(tests/unit/test_nn_transformer_layer.cpp).

torch.nn.TransformerEncoderLayer(D, h, F, dropout=0, activation=..., batch_first=True,
norm_first=...) and torch.nn.TransformerDecoderLayer(same) in float64 with LayerNorm, called in
train mode with inputs that require grad (so torch 1.13's fused fast path does not run; with
dropout 0 train and eval compute the same). Masks: causal = bool torch.triu(ones(T, T), 1)
(True = not allowed) as src_mask / tgt_mask; key padding bool [B, T] (True = padded) as
src_key_padding_mask (encoder) or memory_key_padding_mask [B, S] (decoder). Every query keeps at
least one visible key.

Each fixture stores x [B, T, D] (decoder also memory [B, S, D]), the padding mask as 0/1 (only
when used, key "key_padding_mask"), every parameter under its state_dict key, y [B, T, D], a
random upstream gradient dy and the gradients of loss = sum(y * dy) w.r.t. the inputs
("grad_x", "grad_memory") and every parameter ("grad_<key>").
meta: kind (encoder/decoder), B, T, S, d_model, n_heads, d_ff, activation, norm_first, causal,
padding. Inputs and parameters are rounded to float32 first; in_proj_weight is the default xavier
draw times 2 (sharper softmax); attention, linear and norm biases U(-0.5, 0.5) and norm weights
U(0.5, 1.5) instead of PyTorch's 0 / 1 so every gradient path is exercised.
"""
import torch

DT = torch.float64


def f32(t):
    return t.to(torch.float32).to(DT)


def _randomise(layer):
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if name.endswith("in_proj_weight"):
                p.mul_(2.0)
            elif name.startswith("norm") and name.endswith("weight"):
                p.copy_(torch.rand(p.shape) + 0.5)
            elif name.endswith("bias"):
                p.copy_(torch.rand(p.shape) - 0.5)
            p.copy_(f32(p))


def _padding(B, T, lengths):
    m = torch.zeros(B, T, dtype=torch.bool)
    for b, n in enumerate(lengths):
        m[b, n:] = True
    return m


def _store(write, name, layer, inputs, y, dy, kpm, meta):
    tensors = {}
    for key, t in inputs.items():
        tensors[key] = t
        tensors["grad_" + key] = t.grad
    if kpm is not None:
        tensors["key_padding_mask"] = kpm.to(DT)
    for key, p in layer.named_parameters():
        tensors[key] = p
        tensors["grad_" + key] = p.grad
    tensors.update({"y": y, "dy": dy})
    meta = dict(meta)
    meta["loss"] = "sum(y * dy)"
    write(name, tensors, meta)


def _encoder(write, name, B, T, D, h, F, norm_first, activation, lengths):
    layer = torch.nn.TransformerEncoderLayer(D, h, F, dropout=0.0, activation=activation,
                                             batch_first=True, norm_first=norm_first).to(DT)
    _randomise(layer)
    layer.train()
    x = f32(torch.randn(B, T, D)).requires_grad_(True)
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    kpm = _padding(B, T, lengths)
    y = layer(x, src_mask=causal, src_key_padding_mask=kpm)
    dy = f32(torch.randn(B, T, D))
    (y * dy).sum().backward()
    meta = {"module": "torch.nn.TransformerEncoderLayer(%d, %d, %d, dropout=0, activation='%s', "
                      "batch_first=True, norm_first=%s)" % (D, h, F, activation, norm_first),
            "kind": "encoder", "B": B, "T": T, "S": 0, "d_model": D, "n_heads": h, "d_ff": F,
            "activation": activation, "norm_first": int(norm_first), "causal": 1, "padding": 1,
            "call": "layer(x, src_mask=bool triu(ones(T, T), 1), src_key_padding_mask=kpm), train mode"}
    _store(write, name, layer, {"x": x}, y, dy, kpm, meta)


def _decoder(write, name, B, T, S, D, h, F, norm_first, activation, lengths):
    layer = torch.nn.TransformerDecoderLayer(D, h, F, dropout=0.0, activation=activation,
                                             batch_first=True, norm_first=norm_first).to(DT)
    _randomise(layer)
    layer.train()
    x = f32(torch.randn(B, T, D)).requires_grad_(True)
    memory = f32(torch.randn(B, S, D)).requires_grad_(True)
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    kpm = _padding(B, S, lengths)
    y = layer(x, memory, tgt_mask=causal, memory_key_padding_mask=kpm)
    dy = f32(torch.randn(B, T, D))
    (y * dy).sum().backward()
    meta = {"module": "torch.nn.TransformerDecoderLayer(%d, %d, %d, dropout=0, activation='%s', "
                      "batch_first=True, norm_first=%s)" % (D, h, F, activation, norm_first),
            "kind": "decoder", "B": B, "T": T, "S": S, "d_model": D, "n_heads": h, "d_ff": F,
            "activation": activation, "norm_first": int(norm_first), "causal": 1, "padding": 1,
            "call": "layer(x, memory, tgt_mask=bool triu(ones(T, T), 1), memory_key_padding_mask=kpm), "
                    "train mode"}
    _store(write, name, layer, {"x": x, "memory": memory}, y, dy, kpm, meta)


def generate(write):
    _encoder(write, "transformer_encoder_post", B=2, T=5, D=8, h=2, F=16, norm_first=False,
             activation="relu", lengths=[5, 3])
    _encoder(write, "transformer_encoder_pre", B=2, T=5, D=8, h=2, F=16, norm_first=True,
             activation="gelu", lengths=[4, 5])
    _decoder(write, "transformer_decoder_post", B=2, T=4, S=6, D=8, h=2, F=16, norm_first=False,
             activation="relu", lengths=[6, 4])
    _decoder(write, "transformer_decoder_pre", B=2, T=4, S=6, D=8, h=2, F=16, norm_first=True,
             activation="gelu", lengths=[3, 6])
