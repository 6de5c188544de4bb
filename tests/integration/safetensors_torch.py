#!/usr/bin/python3
"""seqlab's safetensors weights files read from Python (nn/safetensors.hpp).

usage: safetensors_torch.py EXPORTER   (the seqlab_export_weights binary, safetensors_export.cpp)

The exporter writes, for an LSTM, a Transformer encoder (post-norm), a Transformer decoder
(pre-norm, gelu) and a BatchNorm, the module's state_dict and an eval-mode input/output pair. This
test
  1. reads every file with numpy alone (the format: u64 little-endian header size, JSON header,
     raw little-endian row-major tensors) and checks the layout (8-byte aligned data, offsets
     tiling the buffer), the PyTorch keys and shapes of each module, and every value against the
     sums and end values the exporter computed in C++;
  2. if torch is installed (Debian's python3-torch), loads each state dict with
     load_state_dict(strict=True) into the torch.nn module of the same structure (torch.nn.LSTM,
     TransformerEncoderLayer, BatchNorm1d, ...) and checks that it computes seqlab's output.
Without torch, step 2 is skipped with a note; step 1 still runs. Exit status 0 = passed.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

DTYPES = {"F32": "<f4", "I64": "<i8"}
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAILED:", what)


def read_safetensors(path):
    """(tensors, metadata) of a safetensors file, with numpy only."""
    with open(path, "rb") as f:
        b = f.read()
    n = int.from_bytes(b[:8], "little")
    check((8 + n) % 8 == 0, f"{path}: data start {8 + n} is not 8-byte aligned")
    header = json.loads(b[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = b[8 + n:]
    spans = sorted(tuple(e["data_offsets"]) for e in header.values())
    end = 0
    for s, t in spans:
        check(s == end, f"{path}: tensor data [{s}, {t}) does not start where the previous ended ({end})")
        end = t
    check(end == len(data), f"{path}: tensors cover {end} of {len(data)} data bytes")
    tensors = {}
    for key, e in header.items():
        s, t = e["data_offsets"]
        tensors[key] = np.frombuffer(data[s:t], dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
    return tensors, meta


def expected_shapes(case, m):
    """The PyTorch state_dict keys and shapes of each exported module (from its metadata)."""
    if case == "batch_norm":
        d = int(m["num_features"])
        return {"weight": [d], "bias": [d], "running_mean": [d], "running_var": [d],
                "num_batches_tracked": []}
    V, H, L, O = (int(m[k]) for k in ("vocab_size", "hidden_size", "num_layers", "output_size"))
    if m["model"] == "lstm":
        E = int(m["embedding_dim"])
        out = {"embedding.weight": [V, E], "head.weight": [O, H], "head.bias": [O]}
        for l in range(L):
            out.update({f"lstm.weight_ih_l{l}": [4 * H, E if l == 0 else H],
                        f"lstm.weight_hh_l{l}": [4 * H, H],
                        f"lstm.bias_ih_l{l}": [4 * H], f"lstm.bias_hh_l{l}": [4 * H]})
        return out
    F, name = int(m["d_ff"]), m["model"]
    out = {"embedding.weight": [V, H], f"{name}.pos_embedding.weight": [int(m["max_len"]), H],
           "head.weight": [O, H], "head.bias": [O]}
    for l in range(L):
        p = f"{name}.layers.{l}."
        out.update({p + "self_attn.in_proj_weight": [3 * H, H], p + "self_attn.in_proj_bias": [3 * H],
                    p + "self_attn.out_proj.weight": [H, H], p + "self_attn.out_proj.bias": [H],
                    p + "linear1.weight": [F, H], p + "linear1.bias": [F],
                    p + "linear2.weight": [H, F], p + "linear2.bias": [H]})
        for k in ("norm1", "norm2"):
            out.update({p + k + ".weight": [H], p + k + ".bias": [H]})
    if m["norm_placement"] == "pre":
        out.update({f"{name}.norm.weight": [H], f"{name}.norm.bias": [H]})
    return out


def check_numpy(case, sd, meta, io, io_meta):
    want = expected_shapes(case, meta)
    check(sorted(sd) == sorted(want), f"{case}: keys {sorted(set(sd) ^ set(want))} differ from PyTorch's")
    for key, shape in want.items():
        if key in sd:
            check(list(sd[key].shape) == shape, f"{case}: {key} has shape {list(sd[key].shape)}, want {shape}")
    for key, a in sd.items():
        total, first, last = (float(v) for v in io_meta[key].split(";"))
        flat = a.reshape(-1).astype(np.float64)
        got = float(flat.sum()) if flat.size else 0.0
        check(math.isclose(got, total, rel_tol=1e-6, abs_tol=1e-5), f"{case}: sum of {key} is {got}, C++ {total}")
        if flat.size:
            # %.9g round-trips a float32 exactly.
            check(np.float32(flat[0]) == np.float32(first) and np.float32(flat[-1]) == np.float32(last),
                  f"{case}: first/last of {key} are {flat[0]}/{flat[-1]}, C++ {first}/{last}")
    check(np.isfinite(io["output"]).all(), f"{case}: output not finite")
    if case == "batch_norm":
        check(int(sd["num_batches_tracked"]) == 3, f"{case}: num_batches_tracked = {sd['num_batches_tracked']}")


def torch_module(case, m):
    import torch

    if case == "batch_norm":
        return torch.nn.BatchNorm1d(int(m["num_features"]))
    V, H, L, O = (int(m[k]) for k in ("vocab_size", "hidden_size", "num_layers", "output_size"))

    class Lstm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = torch.nn.Embedding(V, int(m["embedding_dim"]))
            self.lstm = torch.nn.LSTM(int(m["embedding_dim"]), H, L, batch_first=True)
            self.head = torch.nn.Linear(H, O)

        def forward(self, ids):
            return self.head(self.lstm(self.embedding(ids))[0])

    class Body(torch.nn.Module):
        def __init__(self, pre):
            super().__init__()
            self.pos_embedding = torch.nn.Embedding(int(m["max_len"]), H)
            self.layers = torch.nn.ModuleList(
                torch.nn.TransformerEncoderLayer(H, int(m["n_heads"]), int(m["d_ff"]), dropout=0.0,
                                                 activation=m["activation"], batch_first=True, norm_first=pre)
                for _ in range(L))
            if pre:
                self.norm = torch.nn.LayerNorm(H)

    class Transformer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = torch.nn.Embedding(V, H)
            setattr(self, m["model"], Body(m["norm_placement"] == "pre"))
            self.head = torch.nn.Linear(H, O)

        def forward(self, ids):
            body = getattr(self, m["model"])
            T = ids.shape[1]
            x = self.embedding(ids) + body.pos_embedding.weight[:T]
            mask = None
            if m["model"] == "transformer_decoder":
                mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
            for layer in body.layers:
                x = layer(x, src_mask=mask)
            if hasattr(body, "norm"):
                x = body.norm(x)
            return self.head(x)

    return Lstm() if m["model"] == "lstm" else Transformer()


def check_torch(case, sd, meta, io):
    import torch

    module = torch_module(case, meta)
    module.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in sd.items()}, strict=True)
    module.eval()
    with torch.no_grad():
        x = torch.from_numpy(np.array(io["input"]))
        if case == "batch_norm":
            B, T, D = x.shape
            y = module(x.reshape(B * T, D)).reshape(B, T, D)
        else:
            y = module(x)
    want = io["output"].astype(np.float64)
    err = float(np.abs(y.numpy().astype(np.float64) - want).max())
    scale = float(np.abs(want).max())
    print(f"{case}: torch.nn output vs seqlab: max abs difference {err:.2e} (outputs up to {scale:.2f})")
    check(err <= 1e-5 + 1e-4 * scale, f"{case}: torch output differs from seqlab's by {err}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: safetensors_torch.py EXPORTER")
    with tempfile.TemporaryDirectory(prefix="seqlab_safetensors_") as tmp:
        subprocess.run([sys.argv[1], tmp], check=True)
        cases = sorted(f[:-len(".safetensors")] for f in os.listdir(tmp)
                       if f.endswith(".safetensors") and not f.endswith(".io.safetensors"))
        check(cases == ["batch_norm", "lstm", "transformer_decoder", "transformer_encoder"],
              f"exported cases {cases}")
        try:
            import torch  # noqa: F401
            have_torch = True
        except ImportError:
            have_torch = False
            print("note: torch is not installed (Debian: python3-torch): skipped loading into torch.nn")
        for case in cases:
            sd, meta = read_safetensors(os.path.join(tmp, case + ".safetensors"))
            io, io_meta = read_safetensors(os.path.join(tmp, case + ".io.safetensors"))
            check(meta.get("case") == case, f"{case}: metadata {meta}")
            check_numpy(case, sd, meta, io, io_meta)
            if have_torch:
                check_torch(case, sd, meta, io)
    print(f"safetensors: {len(FAILURES)} failure(s)" if FAILURES else "safetensors: ok")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
