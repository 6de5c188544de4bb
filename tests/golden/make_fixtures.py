#!/usr/bin/python3
"""Writes the PyTorch reference fixtures that the C++ tests compare against.

Run with Debian's python3-torch (no PyPI):  /usr/bin/python3 tests/golden/make_fixtures.py
Every module tests/golden/gen_*.py in this folder defines `generate(write)`; this script calls
each one. `write(name, tensors, meta)` stores tests/golden/<name>.json as
    {"meta": {...}, "tensors": {"<key>": {"shape": [...], "data": [flat row-major values]}}}
References are computed in float64 (torch.float64) so the C++ float32 results are compared to
values exact to ~1e-15; keys of parameters are PyTorch state_dict keys. The C++ tests read only
the committed JSON files and never need Python.
"""
import glob
import importlib.util
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def write(name, tensors, meta=None):
    out = {"meta": dict(meta or {}), "tensors": {}}
    out["meta"]["generator"] = "tests/golden/make_fixtures.py"
    out["meta"]["torch_version"] = torch.__version__
    for key, t in tensors.items():
        t = torch.as_tensor(t).detach().to(torch.float64)
        out["tensors"][key] = {"shape": list(t.shape), "data": [float(v) for v in t.reshape(-1).tolist()]}
    path = os.path.join(HERE, name + ".json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")
    os.replace(tmp, path)
    print("wrote", os.path.relpath(path, os.path.dirname(os.path.dirname(HERE))))


def main():
    torch.set_default_dtype(torch.float64)
    torch.use_deterministic_algorithms(True)
    modules = sorted(glob.glob(os.path.join(HERE, "gen_*.py")))
    if not modules:
        sys.exit("no gen_*.py generators found in " + HERE)
    for path in modules:
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        torch.manual_seed(0)
        mod.generate(write)


if __name__ == "__main__":
    main()
