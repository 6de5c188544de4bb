"""PyTorch references for seqlab::EncoderDecoderModel (tests/unit/test_models_encoder_decoder.cpp).

The reference model is what models/encoder_decoder_model.hpp documents, with sinusoidal
positions:
    embedding = nn.Embedding(V, D)                      (shared by source and target)
    transformer = nn.Transformer(D, h, L, L, F, dropout=0, activation, batch_first=True,
                                 norm_first=...)          (encoder.norm / decoder.norm included)
    head = nn.Linear(D, O)
    logits = head(transformer(embedding(src) + PE[:S], embedding(tgt_in) + PE[:T],
                              tgt_mask=bool triu(ones(T, T), 1),
                              src_key_padding_mask=src_kpm, tgt_key_padding_mask=tgt_kpm,
                              memory_key_padding_mask=src_kpm))
with PE the interleaved sinusoidal table of Vaswani et al. 2017 §3.5 (PE[p, 2i] = sin(p /
10000^(2i/D)), PE[p, 2i+1] = cos(same)), computed in float64. Run in float64, train mode (dropout 0,
parameters require grad, so torch 1.13's fused fast path does not run). Padding is at the end of
each sequence and never covers position 0, so every query sees at least one key (PyTorch gives NaN
for a fully masked row).

Each fixture stores src [B, S] and tgt_in [B, T] (ids as floats), src_key_padding_mask [B, S] and
tgt_key_padding_mask [B, T] (0/1), every parameter under its state_dict key, logits [B, T, O], a
random upstream gradient dlogits and the gradients of loss = sum(logits * dlogits) w.r.t. every
parameter ("grad_<key>"). Parameters are rounded to float32; in_proj_weight is the default xavier
draw times 2 (sharper softmax), attention/linear/norm biases U(-0.5, 0.5) and norm weights
U(0.5, 1.5) instead of PyTorch's 0 / 1, so every gradient path is exercised.
meta: B, S, T, vocab_size, d_model, n_heads, d_ff, num_layers, output_size, activation,
norm_first, positional_encoding.
"""
import math

import torch

DT = torch.float64


def f32(t):
    return t.to(torch.float32).to(DT)


def sinusoidal(length, d):
    pe = torch.zeros(length, d, dtype=DT)
    for p in range(length):
        for i in range(d // 2):
            angle = p / math.pow(10000.0, 2.0 * i / d)
            pe[p, 2 * i] = math.sin(angle)
            pe[p, 2 * i + 1] = math.cos(angle)
    return f32(pe)  # seqlab rounds the table to float once


class Reference(torch.nn.Module):
    def __init__(self, V, D, h, L, F, O, activation, norm_first):
        super().__init__()
        self.embedding = torch.nn.Embedding(V, D)
        self.transformer = torch.nn.Transformer(D, h, L, L, F, dropout=0.0, activation=activation,
                                                batch_first=True, norm_first=norm_first)
        self.head = torch.nn.Linear(D, O)
        self.D = D

    def forward(self, src, tgt_in, src_kpm, tgt_kpm):
        S, T = src.shape[1], tgt_in.shape[1]
        xs = self.embedding(src) + sinusoidal(S, self.D)
        xt = self.embedding(tgt_in) + sinusoidal(T, self.D)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        y = self.transformer(xs, xt, tgt_mask=causal, src_key_padding_mask=src_kpm,
                             tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=src_kpm)
        return self.head(y)


def _randomise(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.split(".")[-1]
            parent = name.split(".")[-2] if "." in name else ""
            if leaf == "in_proj_weight":
                p.mul_(2.0)
            elif parent.startswith("norm") and leaf == "weight":
                p.copy_(torch.rand(p.shape) + 0.5)
            elif leaf == "bias" or leaf == "in_proj_bias":
                p.copy_(torch.rand(p.shape) - 0.5)
            p.copy_(f32(p))


def _padding(B, T, lengths):
    m = torch.zeros(B, T, dtype=torch.bool)
    for b, n in enumerate(lengths):
        m[b, n:] = True
    return m


def _model(write, name, norm_first, activation, src_lengths, tgt_lengths):
    B, S, T, V, D, h, F, L, O = 2, 5, 4, 7, 8, 2, 16, 2, 6
    model = Reference(V, D, h, L, F, O, activation, norm_first).to(DT)
    _randomise(model)
    model.train()
    src = torch.randint(0, V, (B, S))
    tgt_in = torch.randint(0, V, (B, T))
    src_kpm = _padding(B, S, src_lengths)
    tgt_kpm = _padding(B, T, tgt_lengths)
    logits = model(src, tgt_in, src_kpm, tgt_kpm)
    dlogits = f32(torch.randn(B, T, O))
    (logits * dlogits).sum().backward()
    tensors = {"src": src.to(DT), "tgt_in": tgt_in.to(DT),
               "src_key_padding_mask": src_kpm.to(DT), "tgt_key_padding_mask": tgt_kpm.to(DT)}
    for key, p in model.named_parameters():
        tensors[key] = p
        tensors["grad_" + key] = p.grad
    tensors.update({"logits": logits, "dlogits": dlogits})
    meta = {"module": "Embedding(%d, %d) + sinusoidal PE -> torch.nn.Transformer(%d, %d, %d, %d, %d, "
                      "dropout=0, activation='%s', batch_first=True, norm_first=%s) -> Linear(%d, %d)"
                      % (V, D, D, h, L, L, F, activation, norm_first, D, O),
            "B": B, "S": S, "T": T, "vocab_size": V, "d_model": D, "n_heads": h, "d_ff": F,
            "num_layers": L, "output_size": O, "activation": activation,
            "norm_first": int(norm_first), "positional_encoding": "sinusoidal",
            "call": "transformer(xs, xt, tgt_mask=bool triu(ones(T, T), 1), src_key_padding_mask=src_kpm, "
                    "tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=src_kpm), train mode",
            "loss": "sum(logits * dlogits)"}
    write(name, tensors, meta)


def generate(write):
    _model(write, "encoder_decoder_post", norm_first=False, activation="relu",
           src_lengths=[5, 3], tgt_lengths=[4, 2])
    _model(write, "encoder_decoder_pre", norm_first=True, activation="gelu",
           src_lengths=[2, 5], tgt_lengths=[3, 4])
