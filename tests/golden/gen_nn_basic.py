"""PyTorch references for the basic nn layers: Linear, Embedding, the element-wise activations,
softmax / log_softmax and CrossEntropyLoss with reduction mean and sum
(tests/unit/test_nn_{linear,embedding,activations,loss}.cpp).

Called by make_fixtures.py (float64 default dtype). Inputs and parameters are rounded to float32
first, so the references are exact for the very values the float32 C++ code sees. Gradients are
those of the fake loss sum(y * dy) with a random dy stored in the fixture (for the scalar
cross-entropy, dy has shape [1]). Parameters are stored under their state_dict keys; a gradient
under "<key>.grad".
"""
import torch
import torch.nn.functional as F

D = torch.float64


def f32(t):
    """Rounds to float32 and back, so the C++ side sees exactly these values."""
    return t.to(torch.float32).to(D)


def randn(g, *shape, scale=1.0):
    return f32(torch.randn(*shape, generator=g, dtype=D) * scale)


def gen_linear(write, g):
    B, T, IN, OUT = 2, 3, 5, 4
    lin = torch.nn.Linear(IN, OUT).to(D)
    with torch.no_grad():
        lin.weight.copy_(randn(g, OUT, IN, scale=0.5))
        lin.bias.copy_(randn(g, OUT, scale=0.5))
    x = randn(g, B, T, IN).requires_grad_(True)
    dy = randn(g, B, T, OUT)
    y = lin(x)
    (y * dy).sum().backward()
    write("linear", {
        "x": x, "weight": lin.weight, "bias": lin.bias, "y": y, "dy": dy,
        "x.grad": x.grad, "weight.grad": lin.weight.grad, "bias.grad": lin.bias.grad,
    }, {"module": "torch.nn.Linear(5, 4)", "x_shape": "[B, T, in] = [2, 3, 5]",
        "loss": "sum(y * dy)"})


def gen_embedding(write, g):
    V, DIM, PAD = 7, 4, 2
    emb = torch.nn.Embedding(V, DIM, padding_idx=PAD).to(D)
    with torch.no_grad():
        # Every row non-zero, the padding row included: PyTorch's forward returns the padding row
        # as it is and only its gradient is suppressed.
        emb.weight.copy_(randn(g, V, DIM))
    ids = torch.tensor([[1, 2, 5, 1, 6], [0, 3, 2, 1, 4]], dtype=torch.long)  # repeats and the pad id
    dy = randn(g, 2, 5, DIM)
    y = emb(ids)
    (y * dy).sum().backward()
    write("embedding", {"weight": emb.weight, "ids": ids, "y": y, "dy": dy,
                        "weight.grad": emb.weight.grad},
          {"module": "torch.nn.Embedding(7, 4, padding_idx=2)", "padding_idx": PAD,
           "loss": "sum(y * dy)"})


def gen_activations(write, g):
    x = randn(g, 4, 8, scale=2.0)
    x[0, :6] = torch.tensor([-8.0, -5.0, -3.0, 3.0, 5.0, 8.0])  # tails of gelu / sigmoid / tanh
    x[x.abs() < 0.05] += 0.1  # keep away from relu's kink at 0
    dy = randn(g, 4, 8)
    out = {"x": x, "dy": dy}
    for name, fn in [("relu", F.relu), ("gelu", lambda v: F.gelu(v, approximate="none")),
                     ("tanh", torch.tanh), ("sigmoid", torch.sigmoid)]:
        xi = x.clone().requires_grad_(True)
        y = fn(xi)
        (y * dy).sum().backward()
        out[name + ".y"] = y
        out[name + ".x.grad"] = xi.grad
    write("activations", out, {"functions": "relu, gelu (exact erf), tanh, sigmoid",
                               "loss": "sum(y * dy)"})


def gen_softmax(write, g):
    x = randn(g, 5, 6, scale=2.0)
    x[1] = f32(x[1] + 1000.0)      # large offset: only the max-subtracted form stays finite
    x[2] = f32(x[2] * 20.0)        # one entry dominates, the others underflow towards 0
    x[3] = f32(x[3] - 500.0)
    dy = randn(g, 5, 6)
    out = {"x": x, "dy": dy}
    for name, fn in [("softmax", lambda v: torch.softmax(v, dim=-1)),
                     ("log_softmax", lambda v: torch.log_softmax(v, dim=-1))]:
        xi = x.clone().requires_grad_(True)
        y = fn(xi)
        (y * dy).sum().backward()
        out[name + ".y"] = y
        out[name + ".x.grad"] = xi.grad
    write("softmax", out, {"functions": "torch.softmax(dim=-1), torch.log_softmax(dim=-1)",
                           "loss": "sum(y * dy)"})


def gen_cross_entropy(write, g):
    # Two cases: the default ignore_index -100, and ignore_index = 0 (padding token 0, so class 0
    # is never a target).
    N, C = 9, 5
    out = {}
    meta = {"loss": "dy * CrossEntropyLoss(ignore_index, reduction='mean')(logits, targets)"}
    for case, ignore, targets in [
        ("default", -100, [3, -100, 0, 4, 4, -100, 1, 2, 0]),
        ("ignore0", 0, [3, 0, 1, 4, 0, 2, 2, 0, 1]),
    ]:
        logits = randn(g, N, C, scale=2.0).requires_grad_(True)
        t = torch.tensor(targets, dtype=torch.long)
        dy = randn(g, 1)
        loss = torch.nn.CrossEntropyLoss(ignore_index=ignore, reduction="mean")(logits, t)
        (loss * dy[0]).backward()
        out.update({case + ".logits": logits, case + ".targets": t, case + ".loss": loss.reshape(1),
                    case + ".dy": dy, case + ".logits.grad": logits.grad,
                    case + ".probabilities": torch.softmax(logits, dim=-1)})
        meta[case + ".ignore_index"] = ignore
    write("cross_entropy", out, meta)


def gen_cross_entropy_sum(write, g):
    # reduction='sum' (and 'mean' on the same logits): the same two ignore_index cases as above.
    N, C = 9, 5
    out = {}
    meta = {"loss": "dy * CrossEntropyLoss(ignore_index, reduction)(logits, targets)"}
    for case, ignore, targets in [
        ("default", -100, [3, -100, 0, 4, 4, -100, 1, 2, -100]),
        ("ignore0", 0, [3, 0, 1, 4, 0, 2, 2, 0, 1]),
    ]:
        logits = randn(g, N, C, scale=2.0)
        t = torch.tensor(targets, dtype=torch.long)
        dy = randn(g, 1)
        out.update({case + ".logits": logits, case + ".targets": t, case + ".dy": dy})
        for reduction in ("sum", "mean"):
            x = logits.clone().requires_grad_(True)
            loss = torch.nn.CrossEntropyLoss(ignore_index=ignore, reduction=reduction)(x, t)
            (loss * dy[0]).backward()
            out.update({case + "." + reduction + ".loss": loss.reshape(1),
                        case + "." + reduction + ".logits.grad": x.grad})
        meta[case + ".ignore_index"] = ignore
    write("cross_entropy_sum", out, meta)


def generate(write):
    g = torch.Generator().manual_seed(20240611)
    gen_linear(write, g)
    gen_embedding(write, g)
    gen_activations(write, g)
    gen_softmax(write, g)
    gen_cross_entropy(write, g)
    # Its own generator, so the fixtures above keep their draws.
    gen_cross_entropy_sum(write, torch.Generator().manual_seed(20250101))
