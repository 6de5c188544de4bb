"""PyTorch references for seqlab::RNN and seqlab::GRU (tests/unit/test_nn_rnn.cpp, test_nn_gru.cpp).

torch.nn.RNN(batch_first=True, nonlinearity=tanh|relu) and torch.nn.GRU(batch_first=True) in
float64. Each fixture stores
  x [B, T, D], h0 [L, B, H], every parameter under its state_dict key
  (weight_ih_l{k} [G, in_k], weight_hh_l{k} [G, H], bias_ih_l{k} [G], bias_hh_l{k} [G];
   G = H for the RNN, 3H for the GRU with rows r, z, n),
  out [B, T, H], h_n [L, B, H],
  random upstream gradients dy [B, T, H] and dh_n [L, B, H],
  and the gradients of  loss = sum(out * dy) + sum(h_n * dh_n)
  w.r.t. x, h0 and every parameter, stored as "grad_<key>".
Run through make_fixtures.py (it sets float64 and seeds torch with 0 before calling generate).

The relu fixture records the smallest |pre-activation| (meta "min_abs_preactivation") and the
generator refuses to write it if any pre-activation is within 1e-3 of the kink, where float32
rounding could flip relu's branch and the comparison would test rounding, not the layer.
"""
import torch


def _rnn_min_abs_preactivation(rnn, x, h0):
    """Smallest |W_ih x_t + b_ih + W_hh h_{t-1} + b_hh| over all layers, steps and units."""
    smallest = float("inf")
    inp = x.detach()
    with torch.no_grad():
        for k in range(rnn.num_layers):
            w_ih = getattr(rnn, "weight_ih_l%d" % k)
            w_hh = getattr(rnn, "weight_hh_l%d" % k)
            b = getattr(rnn, "bias_ih_l%d" % k) + getattr(rnn, "bias_hh_l%d" % k)
            h = h0[k].detach()
            outs = []
            for t in range(inp.shape[1]):
                pre = inp[:, t] @ w_ih.T + h @ w_hh.T + b
                smallest = min(smallest, pre.abs().min().item())
                h = torch.relu(pre)
                outs.append(h)
            inp = torch.stack(outs, dim=1)
    return smallest


def _case(write, name, module, B, T, D, H, L, param_scale, extra_meta):
    with torch.no_grad():
        # Wider than the default U(-1/sqrt(H), 1/sqrt(H)) so gates leave their linear range.
        for p in module.parameters():
            p.uniform_(-param_scale, param_scale)
    x = torch.randn(B, T, D, requires_grad=True)
    h0 = torch.randn(L, B, H, requires_grad=True)
    out, h_n = module(x, h0)
    dy = torch.randn(B, T, H)
    dh_n = torch.randn(L, B, H)
    loss = (out * dy).sum() + (h_n * dh_n).sum()
    loss.backward()

    tensors = {"x": x, "h0": h0, "out": out, "h_n": h_n, "dy": dy, "dh_n": dh_n,
               "grad_x": x.grad, "grad_h0": h0.grad}
    for key, p in module.named_parameters():
        tensors[key] = p
        tensors["grad_" + key] = p.grad
    meta = {"B": B, "T": T, "input_size": D, "hidden_size": H, "num_layers": L,
            "param_init": "U(-%g, %g)" % (param_scale, param_scale),
            "loss": "sum(out*dy) + sum(h_n*dh_n)"}
    meta.update(extra_meta)
    if isinstance(module, torch.nn.RNN) and module.nonlinearity == "relu":
        m = _rnn_min_abs_preactivation(module, x, h0)
        if m < 1e-3:
            raise RuntimeError("%s: a relu pre-activation is %g from the kink; change the case" % (name, m))
        meta["min_abs_preactivation"] = m
    write(name, tensors, meta)


def generate(write):
    B, T, D, H, L = 3, 5, 4, 6, 2
    _case(write, "rnn_tanh", torch.nn.RNN(D, H, num_layers=L, nonlinearity="tanh", batch_first=True).double(),
          B, T, D, H, L, 0.6,
          {"module": "torch.nn.RNN(nonlinearity='tanh', batch_first=True)", "nonlinearity": "tanh"})
    _case(write, "rnn_relu", torch.nn.RNN(D, H, num_layers=L, nonlinearity="relu", batch_first=True).double(),
          B, T, D, H, L, 0.5,
          {"module": "torch.nn.RNN(nonlinearity='relu', batch_first=True)", "nonlinearity": "relu"})
    _case(write, "gru", torch.nn.GRU(D, H, num_layers=L, batch_first=True).double(),
          B, T, D, H, L, 0.6, {"module": "torch.nn.GRU(batch_first=True)"})
    # Longer and deeper: gradients through 9 steps and 3 layers.
    _case(write, "gru_l3", torch.nn.GRU(3, 4, num_layers=3, batch_first=True).double(),
          2, 9, 3, 4, 3, 0.8, {"module": "torch.nn.GRU(batch_first=True)"})
    # hidden_size 21: the fused per-step loops run on SIMD batches (16 or 8 lanes) and a scalar
    # tail; the cases above (H <= 6) run on the tail alone. Appended last so the cases above keep
    # their random draws.
    _case(write, "rnn_tanh_h21", torch.nn.RNN(3, 21, num_layers=1, nonlinearity="tanh", batch_first=True).double(),
          2, 4, 3, 21, 1, 0.5,
          {"module": "torch.nn.RNN(nonlinearity='tanh', batch_first=True)", "nonlinearity": "tanh"})
    _case(write, "gru_h21", torch.nn.GRU(3, 21, num_layers=1, batch_first=True).double(),
          2, 4, 3, 21, 1, 0.5, {"module": "torch.nn.GRU(batch_first=True)"})
