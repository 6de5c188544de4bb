"""Optimizer parity fixtures: tests/golden/optim_<case>.json (read by tests/unit/test_train_optimizer.cpp).

For each case, three parameters of different shapes (p0 [3, 4], p1 [5], p2 [2, 3, 2]) are updated
by torch.optim (PyTorch 1.13, float64) for three steps with a fixed sequence of gradients and a
learning rate that changes between steps (set_lr must take effect, Adam's bias correction must
not depend on it). Initial values and gradients are rounded to float32 first, so the C++ float32
run starts from exactly the same numbers.

Keys: "init.<p>", "grad<k>.<p>" (gradient used at step k = 1..3), "after<k>.<p>" (value after step k).
Meta: optimizer, the hyperparameters, "lrs" (lr of steps 1..3), "params" (names in order).
"""
import torch

SHAPES = {"p0": (3, 4), "p1": (5,), "p2": (2, 3, 2)}
LRS = [0.05, 0.02, 0.08]

CASES = {
    "optim_sgd": ("sgd", dict(momentum=0.0, weight_decay=0.0, nesterov=False, dampening=0.0)),
    "optim_sgd_momentum": ("sgd", dict(momentum=0.9, weight_decay=0.01, nesterov=False, dampening=0.2)),
    "optim_sgd_nesterov": ("sgd", dict(momentum=0.8, weight_decay=0.05, nesterov=True, dampening=0.0)),
    "optim_adam": ("adam", dict(beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.05)),
    "optim_adamw": ("adamw", dict(beta1=0.8, beta2=0.999, eps=1e-6, weight_decay=0.1)),
}


def f32(t):
    return t.to(torch.float32).to(torch.float64)


def make_optimizer(kind, hp, params):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=LRS[0], momentum=hp["momentum"], dampening=hp["dampening"],
                               weight_decay=hp["weight_decay"], nesterov=hp["nesterov"])
    betas = (hp["beta1"], hp["beta2"])
    cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
    return cls(params, lr=LRS[0], betas=betas, eps=hp["eps"], weight_decay=hp["weight_decay"])


def generate(write):
    g = torch.Generator().manual_seed(1234)
    init = {k: f32(torch.randn(s, generator=g, dtype=torch.float64)) for k, s in SHAPES.items()}
    # Gradients of varied scale per step; a few exact zeros so weight decay alone moves them.
    grads = []
    for step, scale in enumerate([1.0, 0.3, 2.0]):
        gs = {k: f32(scale * torch.randn(s, generator=g, dtype=torch.float64)) for k, s in SHAPES.items()}
        gs["p1"][step] = 0.0
        grads.append(gs)

    for name, (kind, hp) in CASES.items():
        params = {k: torch.nn.Parameter(v.clone()) for k, v in init.items()}
        opt = make_optimizer(kind, hp, list(params.values()))
        tensors = {"init." + k: v for k, v in init.items()}
        for step in range(3):
            for group in opt.param_groups:
                group["lr"] = LRS[step]
            for k, p in params.items():
                p.grad = grads[step][k].clone()
            opt.step()
            for k, p in params.items():
                tensors["grad%d.%s" % (step + 1, k)] = grads[step][k]
                tensors["after%d.%s" % (step + 1, k)] = p.detach().clone()
        meta = {"optimizer": kind, "lrs": LRS, "params": list(SHAPES.keys()), "steps": 3}
        meta.update(hp)
        write(name, tensors, meta)
