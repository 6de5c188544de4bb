"""PyTorch references for the convolutional family: Conv1d (causal with dilation 2 and 4, and
padding='same'), and the TCN of Bai, Kolter & Koltun 2018 (arXiv 1803.01271, code
locuslab/TCN TCN/tcn.py) with and without weight normalisation
(tests/unit/test_nn_conv1d.cpp, tests/unit/test_nn_tcn.cpp).

Called by make_fixtures.py (float64 default dtype). Inputs and parameters are rounded to float32
first, so the references are exact for the values the float32 C++ code sees.

Layouts: seqlab is batch-first with channels last, x [B, T, C]; torch.nn.Conv1d takes [B, C, T].
Every stored x, y, dy and x.grad is in seqlab's [B, T, C] layout (the torch side permutes).
Parameters are stored under their state_dict keys in PyTorch's layout (Conv1d weight [out, in, k]);
a gradient under "<key>.grad". Gradients are those of the fake loss sum(y * dy).

Causal convolution as Bai et al.: Conv1d(padding=(k-1)*d) followed by dropping the last (k-1)*d
outputs (their Chomp1d).
"""
import warnings

import torch
import torch.nn.functional as F

# PyTorch notes that padding='same' with an even kernel pads a copy of the input; harmless here.
warnings.filterwarnings("ignore", message="Using padding='same' with even kernel")

D = torch.float64


def f32(t):
    """Rounds to float32 and back, so the C++ side sees exactly these values."""
    return t.to(torch.float32).to(D)


def randn(g, *shape, scale=1.0):
    return f32(torch.randn(*shape, generator=g, dtype=D) * scale)


class CausalConv(torch.nn.Module):
    """Conv1d(padding=(k-1)d) + chomp of the last (k-1)d steps, on [B, C, T]."""

    def __init__(self, cin, cout, k, d):
        super().__init__()
        self.chomp = (k - 1) * d
        self.conv = torch.nn.Conv1d(cin, cout, k, padding=self.chomp, dilation=d)

    def forward(self, x):
        y = self.conv(x)
        return y[:, :, :-self.chomp] if self.chomp > 0 else y


def gen_conv1d(write, g, name, B, T, cin, cout, k, d, causal):
    if causal:
        mod = CausalConv(cin, cout, k, d).to(D)
        conv = mod.conv
    else:
        conv = torch.nn.Conv1d(cin, cout, k, padding="same", dilation=d).to(D)
        mod = conv
    with torch.no_grad():
        conv.weight.copy_(randn(g, cout, cin, k, scale=0.5))
        conv.bias.copy_(randn(g, cout, scale=0.5))
    x = randn(g, B, T, cin).requires_grad_(True)
    dy = randn(g, B, T, cout)
    y = mod(x.permute(0, 2, 1)).permute(0, 2, 1)
    assert y.shape == (B, T, cout)
    (y * dy).sum().backward()
    write(name, {
        "x": x, "weight": conv.weight, "bias": conv.bias, "y": y, "dy": dy,
        "x.grad": x.grad, "weight.grad": conv.weight.grad, "bias.grad": conv.bias.grad,
    }, {"module": f"torch.nn.Conv1d({cin}, {cout}, kernel_size={k}, dilation={d}, "
                  + (f"padding={(k - 1) * d}) + chomp of the last {(k - 1) * d} outputs" if causal
                     else "padding='same')"),
        "causal": causal, "kernel_size": k, "dilation": d, "in_channels": cin, "out_channels": cout,
        "layout": "x, y, dy, x.grad are [B, T, C] (seqlab); torch ran on x.permute(0, 2, 1)",
        "loss": "sum(y * dy)"})


class Block(torch.nn.Module):
    """Bai et al.'s TemporalBlock (Fig. 1b) without the nn.Sequential alias, so the state_dict has
    exactly conv1.*, conv2.*, downsample.*; weight_norm on conv1/conv2 as their code."""

    def __init__(self, cin, cout, k, d, weight_norm):
        super().__init__()
        self.chomp = (k - 1) * d
        self.conv1 = torch.nn.Conv1d(cin, cout, k, padding=self.chomp, dilation=d)
        self.conv2 = torch.nn.Conv1d(cout, cout, k, padding=self.chomp, dilation=d)
        if weight_norm:
            self.conv1 = torch.nn.utils.weight_norm(self.conv1)
            self.conv2 = torch.nn.utils.weight_norm(self.conv2)
        self.downsample = torch.nn.Conv1d(cin, cout, 1) if cin != cout else None
        self.pre = []  # pre-activations of the last forward (kink check)

    def _c(self, y):
        return y[:, :, :-self.chomp] if self.chomp > 0 else y

    def forward(self, x):
        a1 = self._c(self.conv1(x))
        a2 = self._c(self.conv2(F.relu(a1)))          # dropout p = 0 / eval: identity
        s = F.relu(a2) + (x if self.downsample is None else self.downsample(x))
        self.pre = [a1, a2, s]
        return F.relu(s)


class TCN(torch.nn.Module):
    def __init__(self, cin, channels, k, weight_norm):
        super().__init__()
        blocks = []
        for i, c in enumerate(channels):
            blocks.append(Block(cin if i == 0 else channels[i - 1], c, k, 2 ** i, weight_norm))
        self.network = torch.nn.Sequential(*blocks)

    def forward(self, x):
        return self.network(x)


def gen_tcn(write, g, name, B, T, cin, channels, k, weight_norm):
    net = TCN(cin, channels, k, weight_norm).to(D)
    with torch.no_grad():
        for key, p in net.named_parameters():
            if key.endswith("weight_g"):
                continue  # set from weight_v below
            p.copy_(randn(g, *p.shape, scale=0.2 if key.endswith("bias") else 0.4))
        for key, p in net.named_parameters():
            if key.endswith("weight_g"):
                v = dict(net.named_parameters())[key[:-1] + "v"]
                nrm = v.reshape(v.shape[0], -1).norm(dim=1).reshape(p.shape)
                scale = torch.rand(p.shape, generator=g, dtype=D) + 0.5  # g != ‖v‖
                p.copy_(f32(nrm * scale))
    net.eval()
    x = randn(g, B, T, cin).requires_grad_(True)
    dy = randn(g, B, T, channels[-1])
    y = net(x.permute(0, 2, 1)).permute(0, 2, 1)
    # Keep the float32 C++ run on the same side of every ReLU kink. Exact zeros are fine: they
    # arise only as relu(a2) + x with both terms exactly 0 (identity residual), in float as well.
    kink = min(float(t.abs()[t != 0].min()) for blk in net.network for t in blk.pre)
    assert kink > 1e-4, f"{name}: a pre-activation is within {kink} of a ReLU kink; change the seed"
    (y * dy).sum().backward()
    tensors = {"x": x, "y": y, "dy": dy, "x.grad": x.grad}
    for key, p in net.state_dict().items():
        tensors[key] = p
    for key, p in net.named_parameters():
        tensors[key + ".grad"] = p.grad
    write(name, tensors, {
        "module": f"Bai et al. TemporalConvNet({cin}, {channels}, kernel_size={k}, dropout=0), eval"
                  + (", weight_norm on conv1/conv2" if weight_norm else ", no weight norm"),
        "num_inputs": cin, "num_channels": channels, "kernel_size": k, "weight_norm": weight_norm,
        "min_abs_preactivation": kink,
        "layout": "x, y, dy, x.grad are [B, T, C] (seqlab); torch ran on x.permute(0, 2, 1)",
        "loss": "sum(y * dy)"})


def generate(write):
    g = torch.Generator().manual_seed(20240618)
    gen_conv1d(write, g, "conv1d_d2", B=2, T=9, cin=3, cout=4, k=3, d=2, causal=True)
    gen_conv1d(write, g, "conv1d_d4", B=2, T=12, cin=2, cout=3, k=3, d=4, causal=True)
    gen_conv1d(write, g, "conv1d_same_k4", B=2, T=7, cin=3, cout=2, k=4, d=1, causal=False)
    gen_conv1d(write, g, "conv1d_same_k3_d2", B=2, T=8, cin=2, cout=3, k=3, d=2, causal=False)
    # Level 0: 3 -> 5 with downsample; level 1: 5 -> 5 with identity residual.
    gen_tcn(write, g, "tcn", B=2, T=10, cin=3, channels=[5, 5], k=3, weight_norm=False)
    gen_tcn(write, g, "tcn_wn", B=2, T=9, cin=2, channels=[4, 4], k=2, weight_norm=True)
