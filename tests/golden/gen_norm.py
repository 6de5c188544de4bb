"""PyTorch references for the norms and the feed-forward block
(tests/unit/test_nn_norm.cpp, tests/unit/test_nn_feed_forward.cpp).

Called by make_fixtures.py (float64 default dtype). Inputs and parameters are rounded to float32
first, so the references are exact for the very values the float32 C++ code sees. Gradients are
those of the fake loss sum(y * dy) with a random dy stored in the fixture. Parameters and buffers
are stored under their state_dict keys; a gradient under "<key>.grad". Padding masks are stored
as 0/1 values (1 = padded) of shape [B, T].

Fixtures:
  norm_layer_norm         torch.nn.LayerNorm(5) with non-trivial weight/bias, x [2, 3, 5].
  norm_rms_norm           RMSNorm written here from Zhang & Sennrich 2019 eq. 4 with eps inside
                          the root (y = x / sqrt(mean(x^2) + eps) * g), two cases: "default"
                          (eps 1e-8) and "eps" (eps 0.1 on small inputs, where the placement of
                          eps matters).
  norm_batch_norm         torch.nn.BatchNorm1d(5) on x.reshape(B*T, D): three train steps
                          ("step{k}.x", "step{k}.y", "step{k}.running_mean", "step{k}.running_var"
                          after each step), gradients of step 3, then eval ("eval.x", "eval.y").
  norm_masked_batch_norm  the same three steps with padding masks: BatchNorm1d on the non-padded
                          rows only (its running statistics, outputs and gradients); padded rows
                          are normalised with the same (differentiable) batch statistics, so the
                          gradients of sum(y * dy) over ALL rows are exact. Then eval.
  feed_forward_relu / feed_forward_gelu
                          linear2(act(linear1(x))) with torch.nn.functional.linear and relu /
                          gelu(approximate='none'), x [2, 3, 4], d_ff 6.
"""
import torch
import torch.nn.functional as F

D = torch.float64


def f32(t):
    """Rounds to float32 and back, so the C++ side sees exactly these values."""
    return t.to(torch.float32).to(D)


def randn(g, *shape, scale=1.0, shift=0.0):
    return f32(torch.randn(*shape, generator=g, dtype=D) * scale + shift)


def gen_layer_norm(write, g):
    B, T, DIM = 2, 3, 5
    ln = torch.nn.LayerNorm(DIM, eps=1e-5).to(D)
    with torch.no_grad():
        ln.weight.copy_(randn(g, DIM, scale=0.5, shift=1.0))
        ln.bias.copy_(randn(g, DIM, scale=0.5))
    x = randn(g, B, T, DIM, scale=2.0, shift=0.5).requires_grad_(True)
    dy = randn(g, B, T, DIM)
    y = ln(x)
    (y * dy).sum().backward()
    write("norm_layer_norm", {
        "x": x, "weight": ln.weight, "bias": ln.bias, "y": y, "dy": dy,
        "x.grad": x.grad, "weight.grad": ln.weight.grad, "bias.grad": ln.bias.grad,
    }, {"module": "torch.nn.LayerNorm(5, eps=1e-5)", "x_shape": "[B, T, D] = [2, 3, 5]",
        "loss": "sum(y * dy)"})


def rms_norm(x, weight, eps):
    """Zhang & Sennrich 2019 eq. 4, eps inside the root (as torch.nn.RMSNorm of PyTorch >= 2.4)."""
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight


def gen_rms_norm(write, g):
    B, T, DIM = 2, 3, 5
    out = {}
    meta = {"formula": "y = x / sqrt(mean(x^2, dim=-1) + eps) * weight (Zhang & Sennrich 2019 eq. 4)",
            "loss": "sum(y * dy)"}
    for case, eps, scale in [("default", 1e-8, 2.0), ("eps", 0.1, 0.3)]:
        weight = randn(g, DIM, scale=0.5, shift=1.0).requires_grad_(True)
        x = randn(g, B, T, DIM, scale=scale).requires_grad_(True)
        dy = randn(g, B, T, DIM)
        y = rms_norm(x, weight, eps)
        (y * dy).sum().backward()
        out.update({case + ".x": x, case + ".weight": weight, case + ".y": y, case + ".dy": dy,
                    case + ".x.grad": x.grad, case + ".weight.grad": weight.grad})
        meta[case + ".eps"] = eps
    write("norm_rms_norm", out, meta)


def masked_batch_norm_train(bn, x2, valid):
    """Train-mode masked batch norm on rows x2 [N, D]: BatchNorm1d on the valid rows (updates its
    running statistics); padded rows normalised with the same batch statistics."""
    y_valid = bn(x2[valid])
    xv = x2[valid]
    mean = xv.mean(dim=0)
    var = xv.var(dim=0, unbiased=False)
    y_all = (x2 - mean) / torch.sqrt(var + bn.eps) * bn.weight + bn.bias
    assert torch.allclose(y_all[valid], y_valid, rtol=1e-12, atol=1e-12)
    # Valid rows from BatchNorm1d itself, padded rows from the composed formula (out-of-place
    # index_put: the gradient of a valid row flows through BatchNorm1d's autograd).
    return y_all.index_put((valid.nonzero()[:, 0],), y_valid)


def gen_batch_norm(write, g, masked):
    B, T, DIM = 3, 4, 5
    bn = torch.nn.BatchNorm1d(DIM, momentum=0.1, eps=1e-5).to(D)
    with torch.no_grad():
        bn.weight.copy_(randn(g, DIM, scale=0.5, shift=1.0))
        bn.bias.copy_(randn(g, DIM, scale=0.5))
    out = {"weight": bn.weight.detach().clone(), "bias": bn.bias.detach().clone()}
    # Real lengths per step (masked only); padded positions hold random values that would move
    # naive statistics.
    lengths = [[4, 2, 3], [1, 4, 2], [3, 3, 4]]
    bn.train()
    for step in range(1, 4):
        x = randn(g, B, T, DIM, scale=1.5, shift=0.7 * step).requires_grad_(True)
        dy = randn(g, B, T, DIM)
        x2 = x.reshape(B * T, DIM)
        key = "step%d." % step
        if masked:
            pad = torch.zeros(B, T, dtype=torch.bool)
            for b, n in enumerate(lengths[step - 1]):
                pad[b, n:] = True
            valid = ~pad.reshape(-1)
            y2 = masked_batch_norm_train(bn, x2, valid)
            out[key + "padding"] = pad.to(D)
        else:
            y2 = bn(x2)
        y = y2.reshape(B, T, DIM)
        out.update({key + "x": x, key + "y": y,
                    key + "running_mean": bn.running_mean.clone(),
                    key + "running_var": bn.running_var.clone()})
        if step == 3:
            bn.zero_grad()
            (y * dy).sum().backward()
            out.update({key + "dy": dy, key + "x.grad": x.grad,
                        "weight.grad": bn.weight.grad, "bias.grad": bn.bias.grad})
    bn.eval()
    x = randn(g, B, T, DIM, scale=1.5, shift=1.0)
    with torch.no_grad():
        y = bn(x.reshape(B * T, DIM)).reshape(B, T, DIM)
    out.update({"eval.x": x, "eval.y": y,
                "num_batches_tracked": bn.num_batches_tracked.reshape(1)})
    name = "norm_masked_batch_norm" if masked else "norm_batch_norm"
    meta = {"module": "torch.nn.BatchNorm1d(5, momentum=0.1, eps=1e-5) on x.reshape(B*T, D)",
            "x_shape": "[B, T, D] = [3, 4, 5]", "steps": 3,
            "loss": "sum(y * dy) at step 3 (grads of step 3 only)"}
    if masked:
        meta["masked"] = ("statistics over the non-padded rows (BatchNorm1d on x2[valid]); padded "
                          "rows normalised with the same batch statistics")
        meta["lengths"] = lengths
    write(name, out, meta)


def gen_feed_forward(write, g, activation):
    B, T, DM, DFF = 2, 3, 4, 6
    act = F.relu if activation == "relu" else (lambda v: F.gelu(v, approximate="none"))
    w1 = randn(g, DFF, DM, scale=0.5).requires_grad_(True)
    b1 = randn(g, DFF, scale=0.3).requires_grad_(True)
    w2 = randn(g, DM, DFF, scale=0.5).requires_grad_(True)
    b2 = randn(g, DM, scale=0.3).requires_grad_(True)
    # Keep relu's pre-activations away from its kink (float vs double could disagree on the side).
    while True:
        x = randn(g, B, T, DM)
        if F.linear(x, w1, b1).abs().min() > 1e-2:
            break
    x.requires_grad_(True)
    dy = randn(g, B, T, DM)
    y = F.linear(act(F.linear(x, w1, b1)), w2, b2)
    (y * dy).sum().backward()
    write("feed_forward_" + activation, {
        "x": x, "linear1.weight": w1, "linear1.bias": b1, "linear2.weight": w2, "linear2.bias": b2,
        "y": y, "dy": dy, "x.grad": x.grad, "linear1.weight.grad": w1.grad,
        "linear1.bias.grad": b1.grad, "linear2.weight.grad": w2.grad, "linear2.bias.grad": b2.grad,
    }, {"formula": "F.linear(act(F.linear(x, linear1.weight, linear1.bias)), linear2.weight, "
                   "linear2.bias), as nn.TransformerEncoderLayer's feed-forward without dropout",
        "activation": activation, "x_shape": "[B, T, d_model] = [2, 3, 4]", "d_ff": DFF,
        "loss": "sum(y * dy)"})


def generate(write):
    g = torch.Generator().manual_seed(20240612)
    gen_layer_norm(write, g)
    gen_rms_norm(write, g)
    gen_batch_norm(write, g, masked=False)
    gen_batch_norm(write, g, masked=True)
    gen_feed_forward(write, g, "relu")
    gen_feed_forward(write, g, "gelu")
