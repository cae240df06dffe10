"""W8: forward + backward of a GPT block stack (issue 15), float32.

Two pre-norm decoder blocks (LayerNorm, causal multi-head self-attention, residual;
LayerNorm, Linear(E, 4E) + GELU(tanh) + Linear(4E, E), residual) with E = 128, 4 heads,
on a batch of 16 sequences of 64 positions; the loss is ``sum(output * G)`` for a fixed
random G, so every gradient is of order one. The step is forward and backward (no
optimizer update: W2/W3 measure that part); the outputs checked are the loss, the input's
gradient and two weight gradients.

- **numpy**: the blocks and their backward written out by hand (the floor).
- **tapegrad**: ``tg.nn.LayerNorm``, ``tg.nn.MultiheadAttention(batch_first=True)`` with
  a boolean causal ``attn_mask``, ``tg.nn.Linear``, ``tg.nn.GELU("tanh")`` -- the modules
  of ``examples/char_gpt.py``.
- **torch**: the same ``torch.nn`` modules, the same weights.

NOTE: the GELU is the tanh approximation so that the NumPy reference needs no erf.
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import Case, Workload, register, time_per

W8 = register(Workload(
    key="W8",
    title="GPT blocks: 2 x (LN, causal MHA 4 heads, LN, GELU MLP), E 128, batch 16 x 64, "
          "float32, forward + backward",
    description=("Forward and backward of sum(output * G) through two pre-norm GPT blocks "
                 "(LayerNorm, causal MultiheadAttention, GELU MLP) at embed 128, 4 heads, "
                 "batch 16, sequence 64, float32: the transformer layers' speed against "
                 "PyTorch and a hand-written NumPy backward."),
    params={"layers": 2, "embed": 128, "heads": 4, "batch": 16, "seq": 64, "seed": 0,
            "dtype": "float32"},
    metrics=(time_per("step", 1, unit="ms"),),
    rtol=2e-3,
    atol=2e-4,
))

_C = math.sqrt(2.0 / math.pi)


def _data(params):
    """x, G and per block a dict of weights (torch's names and shapes)."""
    rng = np.random.default_rng(params["seed"])
    e, f32 = params["embed"], np.float32

    def u(shape, fan_in):
        bound = 1.0 / math.sqrt(fan_in)
        return rng.uniform(-bound, bound, shape).astype(f32)

    blocks = [{
        "ln1.weight": (1 + 0.1 * rng.standard_normal(e)).astype(f32),
        "ln1.bias": (0.1 * rng.standard_normal(e)).astype(f32),
        "attn.in_proj_weight": u((3 * e, e), e), "attn.in_proj_bias": u(3 * e, e),
        "attn.out_proj.weight": u((e, e), e), "attn.out_proj.bias": u(e, e),
        "ln2.weight": (1 + 0.1 * rng.standard_normal(e)).astype(f32),
        "ln2.bias": (0.1 * rng.standard_normal(e)).astype(f32),
        "fc1.weight": u((4 * e, e), e), "fc1.bias": u(4 * e, e),
        "fc2.weight": u((e, 4 * e), 4 * e), "fc2.bias": u(e, 4 * e),
    } for _ in range(params["layers"])]
    shape = (params["batch"], params["seq"], e)
    x = rng.standard_normal(shape).astype(f32)
    g = rng.standard_normal(shape).astype(f32)
    return x, g, blocks


def _outputs(loss, gx, g_in0, g_fc2_last):
    return {"loss": float(loss), "grad x": gx, "grad block0 in_proj_weight": g_in0,
            "grad last fc2.weight": g_fc2_last}


# -- numpy ----------------------------------------------------------------------------


@W8.implementation("numpy")
def _numpy(params):
    x, gout, blocks = _data(params)
    h, eps = params["heads"], 1e-5
    b_, t, e = x.shape
    d = e // h
    scale = np.float32(1.0 / math.sqrt(d))
    causal = np.where(np.triu(np.ones((t, t), dtype=bool), 1), -np.inf, 0).astype(np.float32)

    def wgrad(dy, v):                                  # sum over (B, T) of dy_i v_j
        return dy.reshape(-1, dy.shape[-1]).T @ v.reshape(-1, v.shape[-1])

    def ln(v, w, b):
        mu = v.mean(-1, keepdims=True)
        inv = 1.0 / np.sqrt(v.var(-1, keepdims=True) + eps)
        xhat = (v - mu) * inv
        return xhat * w + b, (xhat, inv)

    def ln_back(dy, w, saved):
        xhat, inv = saved
        dxhat = dy * w
        dx = inv * (dxhat - dxhat.mean(-1, keepdims=True)
                    - xhat * (dxhat * xhat).mean(-1, keepdims=True))
        return dx, (dy * xhat).sum((0, 1)), dy.sum((0, 1))

    def heads(v):                                      # (B, T, E) -> (B, H, T, D)
        return v.reshape(b_, t, h, d).transpose(0, 2, 1, 3)

    def merge(v):
        return v.transpose(0, 2, 1, 3).reshape(b_, t, e)

    def forward_block(v, p):
        h1, s1 = ln(v, p["ln1.weight"], p["ln1.bias"])
        qkv = h1 @ p["attn.in_proj_weight"].T + p["attn.in_proj_bias"]
        q, k, vv = (heads(a) for a in np.split(qkv, 3, axis=-1))
        s = (q * scale) @ k.transpose(0, 1, 3, 2) + causal
        s = np.exp(s - s.max(-1, keepdims=True))
        pr = s / s.sum(-1, keepdims=True)
        o = merge(pr @ vv)
        x1 = v + o @ p["attn.out_proj.weight"].T + p["attn.out_proj.bias"]
        h2, s2 = ln(x1, p["ln2.weight"], p["ln2.bias"])
        z = h2 @ p["fc1.weight"].T + p["fc1.bias"]
        th = np.tanh(_C * (z + 0.044715 * z * z * z))
        gz = 0.5 * z * (1 + th)
        y = x1 + gz @ p["fc2.weight"].T + p["fc2.bias"]
        return y, (h1, s1, q, k, vv, pr, o, h2, s2, z, th, gz)

    def backward_block(dy, p, saved):
        h1, s1, q, k, vv, pr, o, h2, s2, z, th, gz = saved
        grads = {}
        grads["fc2.weight"] = wgrad(dy, gz)
        dgz = dy @ p["fc2.weight"]
        dz = dgz * (0.5 * (1 + th) + 0.5 * z * (1 - th * th) * _C * (1 + 3 * 0.044715 * z * z))
        dh2 = dz @ p["fc1.weight"]
        dx1, _, _ = ln_back(dh2, p["ln2.weight"], s2)
        dx1 += dy
        do = heads(dx1 @ p["attn.out_proj.weight"])
        dpr = do @ vv.transpose(0, 1, 3, 2)
        dvv = pr.transpose(0, 1, 3, 2) @ do
        ds = pr * (dpr - (dpr * pr).sum(-1, keepdims=True))
        dq = (ds @ k) * scale
        dk = (ds.transpose(0, 1, 3, 2) @ q) * scale
        dqkv = np.concatenate([merge(dq), merge(dk), merge(dvv)], axis=-1)
        grads["attn.in_proj_weight"] = wgrad(dqkv, h1)
        dh1 = dqkv @ p["attn.in_proj_weight"]
        dx, _, _ = ln_back(dh1, p["ln1.weight"], s1)
        return dx + dx1, grads

    def run():
        v, saved = x, []
        for p in blocks:
            v, s = forward_block(v, p)
            saved.append(s)
        loss = (v * gout).sum()
        dv, grads = gout, []
        for p, s in zip(reversed(blocks), reversed(saved)):
            dv, gr = backward_block(dv, p, s)
            grads.append(gr)
        return loss, dv, grads[-1]["attn.in_proj_weight"], grads[0]["fc2.weight"]

    return Case(run=run, outputs=lambda r: _outputs(*r))


# -- tapegrad and torch: the same modules ---------------------------------------------


def _blocks(nn, e, h, n):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(e)
            self.attn = nn.MultiheadAttention(e, h, batch_first=True)
            self.ln2 = nn.LayerNorm(e)
            self.fc1 = nn.Linear(e, 4 * e)
            self.act = nn.GELU(approximate="tanh")
            self.fc2 = nn.Linear(4 * e, e)

        def forward(self, x, mask):
            a = self.ln1(x)
            x = x + self.attn(a, a, a, attn_mask=mask, need_weights=False)[0]
            return x + self.fc2(self.act(self.fc1(self.ln2(x))))

    return [Block() for _ in range(n)]


@W8.implementation("tapegrad")
def _tapegrad(params):
    import tapegrad as tg

    x_np, g_np, init = _data(params)
    blocks = _blocks(tg.nn, params["embed"], params["heads"], params["layers"])
    for block, weights in zip(blocks, init):
        block.float()
        block.load_state_dict({k: tg.tensor(v) for k, v in weights.items()})
    t = params["seq"]
    mask = tg.tensor(np.triu(np.ones((t, t), dtype=bool), 1))
    x, g = tg.tensor(x_np, requires_grad=True), tg.tensor(g_np)
    parameters = [p for b in blocks for p in b.parameters()]

    def run():
        x.grad = None
        for p in parameters:
            p.grad = None
        v = x
        for block in blocks:
            v = block(v, mask)
        loss = (v * g).sum()
        loss.backward()
        return loss

    return Case(run=run, outputs=lambda loss: _outputs(
        loss.item(), x.grad.numpy(), blocks[0].attn.in_proj_weight.grad.numpy(),
        blocks[-1].fc2.weight.grad.numpy()))


@W8.implementation("torch")
def _torch(params):
    import torch

    x_np, g_np, init = _data(params)
    blocks = _blocks(torch.nn, params["embed"], params["heads"], params["layers"])
    for block, weights in zip(blocks, init):
        block.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    t = params["seq"]
    mask = torch.from_numpy(np.triu(np.ones((t, t), dtype=bool), 1))
    x = torch.from_numpy(x_np).requires_grad_()
    g = torch.from_numpy(g_np)
    parameters = [p for b in blocks for p in b.parameters()]

    def run():
        x.grad = None
        for p in parameters:
            p.grad = None
        v = x
        for block in blocks:
            v = block(v, mask)
        loss = (v * g).sum()
        loss.backward()
        return loss

    return Case(run=run, outputs=lambda loss: _outputs(
        loss.item(), x.grad.numpy(), blocks[0].attn.in_proj_weight.grad.numpy(),
        blocks[-1].fc2.weight.grad.numpy()))
