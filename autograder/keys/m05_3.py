"""Answer key of M05-3: an int8 linear layer in integer arithmetic, as the reference representation computes it."""

from __future__ import annotations

import torch


def int8_linear(x_q, w_q, b_q, x_scale, x_zp, w_scale, out_scale, out_zp):
    acc = (x_q.to(torch.int32) - x_zp) @ w_q.to(torch.int32).T + b_q
    out = (acc.to(torch.float32) * (x_scale * w_scale / out_scale)).to(torch.int32) + out_zp
    return out.clamp(-128, 127).to(torch.int8)
