"""PyTorch references for seqlab::LSTM (tests/unit/test_nn_lstm.cpp).

torch.nn.LSTM(batch_first=True) in float64. Each fixture stores
  x [B, T, D], h0 and c0 [L, B, H], every parameter under its state_dict key
  (weight_ih_l{k} [4H, in_k], weight_hh_l{k} [4H, H], bias_ih_l{k} [4H], bias_hh_l{k} [4H]),
  out [B, T, H], h_n and c_n [L, B, H],
  random upstream gradients dy [B, T, H], dh_n and dc_n [L, B, H],
  and the gradients of  loss = sum(out * dy) + sum(h_n * dh_n) + sum(c_n * dc_n)
  w.r.t. x, h0, c0 and every parameter, stored as "grad_<key>".
Run through make_fixtures.py (it sets float64 and seeds torch with 0 before calling generate).
"""
import torch


def _case(write, name, B, T, D, H, L, param_scale):
    lstm = torch.nn.LSTM(D, H, num_layers=L, batch_first=True).double()
    with torch.no_grad():
        # Wider than the default U(-1/sqrt(H), 1/sqrt(H)) so gates leave their linear range.
        for p in lstm.parameters():
            p.uniform_(-param_scale, param_scale)
    x = torch.randn(B, T, D, requires_grad=True)
    h0 = torch.randn(L, B, H, requires_grad=True)
    c0 = torch.randn(L, B, H, requires_grad=True)
    out, (h_n, c_n) = lstm(x, (h0, c0))
    dy = torch.randn(B, T, H)
    dh_n = torch.randn(L, B, H)
    dc_n = torch.randn(L, B, H)
    loss = (out * dy).sum() + (h_n * dh_n).sum() + (c_n * dc_n).sum()
    loss.backward()

    tensors = {"x": x, "h0": h0, "c0": c0, "out": out, "h_n": h_n, "c_n": c_n,
               "dy": dy, "dh_n": dh_n, "dc_n": dc_n,
               "grad_x": x.grad, "grad_h0": h0.grad, "grad_c0": c0.grad}
    for key, p in lstm.named_parameters():
        tensors[key] = p
        tensors["grad_" + key] = p.grad
    meta = {"module": "torch.nn.LSTM(batch_first=True)", "B": B, "T": T, "input_size": D,
            "hidden_size": H, "num_layers": L, "param_init": "U(-%g, %g)" % (param_scale, param_scale),
            "loss": "sum(out*dy) + sum(h_n*dh_n) + sum(c_n*dc_n)"}
    write(name, tensors, meta)


def generate(write):
    _case(write, "lstm", B=3, T=5, D=4, H=6, L=2, param_scale=0.6)
    _case(write, "lstm_l3", B=2, T=9, D=3, H=4, L=3, param_scale=0.8)
    # hidden_size 21: the fused per-step loops run on SIMD batches (16 or 8 lanes) and a scalar
    # tail; the cases above (H <= 6) run on the tail alone. Appended last so the cases above keep
    # their random draws.
    _case(write, "lstm_h21", B=2, T=4, D=3, H=21, L=1, param_scale=0.5)
