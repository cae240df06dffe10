"""The fused LSTM recurrence behind ``tg.nn.LSTM`` and ``tg.nn.LSTMCell``: one op runs
every time step of one layer and direction.

Note: [the fused LSTM recurrence]
Composed of tapegrad ops, an LSTM step is ~14 dispatched ops forward and ~25 backward on
(batch, 4 * hidden) arrays of a few thousand elements, where each op's fixed cost exceeds
its arithmetic: at seq 50, batch 32, hidden 64 that made tg.nn.LSTM ~3x torch. Here

- ``_lstm_sequence(xw, h0, c0, w_hh, reverse=False)`` runs the whole recurrence in one
  kernel: per step one (N, H) @ (H, 4H) GEMM and the gate nonlinearities on the
  (N, 4H) block. ``xw`` (T, N, 4H) is the input projection ``x @ W_ih.T`` with the
  biases folded in, computed by the caller for all steps in one GEMM. The result packs
  h_t and c_t: (T, N, 2H) = ``[h_t | c_t]`` (ops have one output).
- Its rule calls ``_lstm_sequence_backward``, backpropagation through time in one
  kernel: the gates are recomputed for all steps at once (one (T*N, H) @ (H, 4H) GEMM
  and vectorised nonlinearities); only the recurrence dh_{t-1} = dz_t @ W_hh runs per
  step. It returns (T, N, 5H) = ``[dz_t | dc_{t-1}]``: the gradient of each step's
  pre-activations z_t (which IS the gradient of xw_t) and of the cell state entering
  it. The rule turns that into the four gradients with three tensor ops.
- Higher orders: under ``create_graph=True`` the rule does not call the BPTT kernel; it
  records the same backpropagation through time written with tapegrad ops
  (``_lstm_bptt_composed``), so second and higher derivatives are those ops'.
  ``_lstm_sequence_backward`` itself is therefore never recorded, and declares its
  inputs not differentiable (``not_implemented``: asking for its derivative raises
  instead of giving zeros).
- Forward mode: ``_lstm_sequence`` has a JVP rule (the tangent recurrence forward in
  time), and so does ``_lstm_sequence_backward`` (the BPTT's tangent, for forward over
  reverse through a plain backward); both are written with tapegrad ops.

Gate order and formulas are torch's (i, f, g, o): z = xw_t + h_{t-1} @ W_hh.T,
c_t = sigmoid(z_f) c_{t-1} + sigmoid(z_i) tanh(z_g), h_t = sigmoid(z_o) tanh(c_t).
``reverse=True`` runs t = T-1 .. 0 (the backward direction of a bidirectional layer).

>>> import numpy as np, tapegrad as tg
>>> xw = tg.tensor(np.zeros((3, 2, 8)), requires_grad=True)
>>> h0 = c0 = tg.zeros((2, 2))
>>> seq = tg._lstm_sequence(xw, h0, c0, tg.zeros((8, 2)))
>>> seq.shape                                 # (T, N, 2H): [h_t | c_t]
(3, 2, 4)
>>> round(float(seq[0, 0, 2]), 4)             # c_1 = sigmoid(0) * tanh(0) + ... = 0
0.0
"""

from __future__ import annotations

import numpy as np
import tapegrad as tg
from tapegrad import _batching


def _sigmoid(z):
    """sigmoid(z) in a fresh array: 1 / (1 + exp(-z)). exp(-z) overflows to inf for
    z << 0, which gives the right limit 0: callers run under np.errstate(over="ignore")
    (once per kernel: entering it costs more than the arithmetic of a step)."""
    s = np.negative(z)
    np.exp(s, out=s)
    s += 1.0
    return np.reciprocal(s, out=s)


def _check(xw, h0, c0, w_hh, op):
    xw, h0, c0, w_hh = (np.asarray(a) for a in (xw, h0, c0, w_hh))
    if xw.ndim != 3 or h0.ndim != 2 or w_hh.ndim != 2:
        raise ValueError(f"{op}: expected xw (T, N, 4H), h0 (N, H), c0 (N, H) and w_hh "
                         f"(4H, H), got {xw.shape}, {h0.shape}, {c0.shape} and {w_hh.shape}")
    T, N, G = xw.shape
    H = h0.shape[1]
    if G != 4 * H or h0.shape != (N, H) or c0.shape != (N, H) or w_hh.shape != (G, H):
        raise ValueError(f"{op}: expected xw (T, N, 4H), h0 (N, H), c0 (N, H) and w_hh "
                         f"(4H, H), got {xw.shape}, {h0.shape}, {c0.shape} and {w_hh.shape}")
    dtype = np.result_type(xw, h0, c0, w_hh)
    if dtype.kind != "f":
        raise TypeError(f"{op}: inputs must be floating point, got {dtype}")
    return xw, h0, c0, w_hh, T, N, H, dtype


def _lstm_sequence_kernel(xw, h0, c0, w_hh, reverse=False):
    xw, h0, c0, w_hh, T, N, H, dtype = _check(xw, h0, c0, w_hh, "_lstm_sequence")
    with np.errstate(over="ignore"):                  # see _sigmoid
        return _lstm_forward(xw, h0, c0, w_hh, reverse, T, N, H, dtype)


def _lstm_forward(xw, h0, c0, w_hh, reverse, T, N, H, dtype):
    out = np.empty((T, N, 2 * H), dtype)
    # NOTE: h @ W_hh.T with the transposed view is a "NT" GEMM, which OpenBLAS runs
    # ~3x slower than the "NN" one at these small sizes: transpose once, not per step.
    w_t = np.ascontiguousarray(w_hh.T, dtype=dtype)
    h, c = h0.astype(dtype, copy=False), c0.astype(dtype, copy=False)
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        z = h @ w_t
        z += xw[t]
        s = _sigmoid(z)                      # the g slice's sigmoid is unused: one call
        g = np.tanh(z[:, 2 * H:3 * H])
        c_new = out[t, :, H:]
        np.multiply(s[:, H:2 * H], c, out=c_new)
        g *= s[:, :H]
        c_new += g
        h_new = out[t, :, :H]
        np.tanh(c_new, out=h_new)
        h_new *= s[:, 3 * H:]
        h, c = h_new, c_new
    return out


def _shifted_states(seq_part, first, reverse):
    """The state entering each step, (T, N, H): `first` (h0 or c0) then the states the
    steps produced, in time order (shifted the other way for reverse)."""
    if reverse:
        return np.concatenate([seq_part[1:], first[None]], axis=0)
    return np.concatenate([first[None], seq_part[:-1]], axis=0)


def _lstm_sequence_backward_kernel(g, seq, xw, h0, c0, w_hh, reverse=False):
    xw, h0, c0, w_hh, T, N, H, dtype = _check(xw, h0, c0, w_hh, "_lstm_sequence_backward")
    g, seq = np.asarray(g, dtype), np.asarray(seq, dtype)
    with np.errstate(over="ignore"):                  # see _sigmoid
        return _lstm_backward(g, seq, xw, h0, c0, w_hh, reverse, T, N, H, dtype)


def _lstm_backward(g, seq, xw, h0, c0, w_hh, reverse, T, N, H, dtype):
    hs, cs = seq[..., :H], seq[..., H:]
    h_prev, c_prev = _shifted_states(hs, h0, reverse), _shifted_states(cs, c0, reverse)
    # Every step's gates at once: z = xw + h_{t-1} @ W_hh.T, one GEMM over T * N rows.
    z = (h_prev.reshape(T * N, H) @ np.ascontiguousarray(w_hh.T)).reshape(T, N, 4 * H)
    z += xw
    s = _sigmoid(z)
    i, f, o = s[..., :H], s[..., H:2 * H], s[..., 3 * H:]
    gate = np.tanh(z[..., 2 * H:3 * H])
    tc = np.tanh(cs)
    # Per-step factors, vectorised over t: dc_t = g_c + dc_{t+1} f_{t+1} + dh_t a_t and
    # dz_t = [dc b_i, dc b_f, dc b_g, dh b_o].
    a = o * (1.0 - tc * tc)                                  # d c_t / from h_t
    b3 = np.empty((T, N, 3, H), dtype)
    np.multiply(gate, i * (1.0 - i), out=b3[:, :, 0])         # b_i
    np.multiply(c_prev, f * (1.0 - f), out=b3[:, :, 1])       # b_f
    np.multiply(i, 1.0 - gate * gate, out=b3[:, :, 2])        # b_g
    b_o = tc * o * (1.0 - o)
    out = np.empty((T, N, 5 * H), dtype)
    dh_rec = np.zeros((N, H), dtype)                          # dz_{t+1} @ W_hh
    dc_rec = np.zeros((N, H), dtype)                          # dc_{t+1} f_{t+1}
    for t in (range(T) if reverse else range(T - 1, -1, -1)):
        dh = g[t, :, :H] + dh_rec
        dc = g[t, :, H:] + dc_rec
        dc += dh * a[t]
        row = out[t]
        np.multiply(dc[:, None, :], b3[t], out=row[:, :3 * H].reshape(N, 3, H))
        np.multiply(dh, b_o[t], out=row[:, 3 * H:4 * H])
        np.multiply(dc, f[t], out=row[:, 4 * H:])
        dc_rec = row[:, 4 * H:]
        dh_rec = row[:, :4 * H] @ w_hh
    return out


def _shifted_tensor(seq_part, first, reverse):
    """_shifted_states with tensor ops."""
    first = tg.reshape(first, (1,) + tuple(first.shape))
    if reverse:
        return tg.concatenate([seq_part[1:], first], axis=0)
    return tg.concatenate([first, seq_part[:-1]], axis=0)


def _lstm_gates(hs, cs, xw, h0, c0, w_hh, reverse):
    """(h_{t-1}, c_{t-1}, i, f, g, o, tanh(c_t)) of every step, recomputed with tapegrad ops
    from the sequence's states hs, cs (T, N, H) and its input projections xw: what the
    composed backward and the JVP rules differentiate through."""
    T, N, H = xw.shape[0], xw.shape[1], h0.shape[-1]
    h_prev, c_prev = _shifted_tensor(hs, h0, reverse), _shifted_tensor(cs, c0, reverse)
    z = tg.reshape(tg.reshape(h_prev, (T * N, H)) @ tg.transpose(w_hh), (T, N, 4 * H)) + xw
    i, f = tg.sigmoid(z[..., :H]), tg.sigmoid(z[..., H:2 * H])
    gate, o = tg.tanh(z[..., 2 * H:3 * H]), tg.sigmoid(z[..., 3 * H:])
    return h_prev, c_prev, i, f, gate, o, tg.tanh(cs)


def _lstm_bptt_composed(g, ans, xw, h0, c0, w_hh, reverse):
    """The four gradients of _lstm_sequence written with tapegrad ops: the same
    backpropagation through time as _lstm_sequence_backward_kernel (term for term), but
    recorded, so that it can be differentiated again (create_graph=True)."""
    T, N, H = xw.shape[0], xw.shape[1], h0.shape[-1]
    hs, cs = ans[..., :H], ans[..., H:]
    h_prev, c_prev, i, f, gate, o, tc = _lstm_gates(hs, cs, xw, h0, c0, w_hh, reverse)
    a = o * (1.0 - tc * tc)
    b_i, b_f = gate * (i * (1.0 - i)), c_prev * (f * (1.0 - f))
    b_g, b_o = i * (1.0 - gate * gate), tc * (o * (1.0 - o))
    dz, dc_in = [None] * T, [None] * T
    dh_rec = dc_rec = None
    for t in (range(T) if reverse else range(T - 1, -1, -1)):
        dh = g[t, :, :H] if dh_rec is None else g[t, :, :H] + dh_rec
        dc = g[t, :, H:] if dc_rec is None else g[t, :, H:] + dc_rec
        dc = dc + dh * a[t]
        dz[t] = tg.concatenate([dc * b_i[t], dc * b_f[t], dc * b_g[t], dh * b_o[t]], axis=-1)
        dc_rec = dc_in[t] = dc * f[t]
        dh_rec = dz[t] @ w_hh
    first = T - 1 if reverse else 0
    dz_all = tg.stack(dz, axis=0)
    dw = tg.transpose(tg.reshape(dz_all, (T * N, 4 * H))) @ tg.reshape(h_prev, (T * N, H))
    return dz_all, dh_rec, dc_in[first], dw


def _lstm_sequence_vjp(g, ans, xw, h0, c0, w_hh, reverse=False):
    if tg.is_grad_enabled():
        # create_graph=True: gradients that are themselves differentiable (see the
        # module's Note); dh_rec after the last step is dz_first @ W_hh = dh0.
        return _lstm_bptt_composed(g, ans, xw, h0, c0, w_hh, reverse)
    T, N, H = xw.shape[0], xw.shape[1], h0.shape[-1]
    both = tg._lstm_sequence_backward(g, ans, xw, h0, c0, w_hh, reverse=reverse)
    dz = both[..., :4 * H]
    first = T - 1 if reverse else 0
    dh0 = dz[first] @ w_hh if tg.needs_grad(h0) else None
    dc0 = both[first, :, 4 * H:] if tg.needs_grad(c0) else None
    dw = None
    if tg.needs_grad(w_hh):
        h_prev = _shifted_tensor(ans[..., :H], h0, reverse)
        dw = tg.transpose(tg.reshape(dz, (T * N, 4 * H))) @ tg.reshape(h_prev, (T * N, H))
    return dz, dh0, dc0, dw


# Note: [forward-mode tangents of the fused recurrences]
# The JVP is the recurrence differentiated forward in time: the gates of every step are
# recomputed at once from the output (as the composed BPTT does), the terms that do not
# depend on the previous state's tangent (txw and h_{t-1} tW^T) for all steps at once
# (one GEMM), and only the state tangents (dh, dc) run step by step, in the forward's
# order. A missing tangent of h0 / c0 is a zero state; of xw / w_hh / b_hn a missing
# term. The BPTT ops' JVPs (forward over reverse) do the same for the backward
# recurrence, in the kernel's (reversed) order.

def _time_order(T, reverse):
    return range(T - 1, -1, -1) if reverse else range(T)


def _forcing(t_in, h_prev, t_w, T, N, H, width):
    """The part of each step's pre-activation tangent that does not depend on the
    previous state's tangent: t_in + h_{t-1} @ tW^T ((T, N, width), or None)."""
    terms = [t_in] if t_in is not None else []
    if t_w is not None:
        terms.append(tg.reshape(tg.reshape(h_prev, (T * N, H)) @ tg.transpose(t_w),
                                (T, N, width)))
    if not terms:
        return None
    return terms[0] if len(terms) == 1 else terms[0] + terms[1]


def _zero_if_none(v, like):
    return tg.zeros_like(like) if v is None else v


def _lstm_sequence_jvp(t, ans, xw, h0, c0, w_hh, reverse=False):
    # dz = txw + dh_{t-1} W^T + h_{t-1} tW^T; dc = f' dz_f c_{t-1} + f dc_{t-1}
    # + i' dz_i g + i g' dz_g; dh = o' dz_o tanh(c) + o (1 - tanh(c)^2) dc.
    t_xw, t_h0, t_c0, t_w = t[0], t[1], t[2], t[3]
    T, N, H = xw.shape[0], xw.shape[1], h0.shape[-1]
    hs, cs = ans[..., :H], ans[..., H:]
    h_prev, c_prev, i, f, gate, o, tc = _lstm_gates(hs, cs, xw, h0, c0, w_hh, reverse)
    # per-step factors of dz's four slices and of dc in dh
    k_i, k_f = gate * (i * (1.0 - i)), c_prev * (f * (1.0 - f))
    k_g, k_o, k_c = i * (1.0 - gate * gate), tc * (o * (1.0 - o)), o * (1.0 - tc * tc)
    forcing = _forcing(t_xw, h_prev, t_w, T, N, H, 4 * H)
    dh, dc = _zero_if_none(t_h0, h0), _zero_if_none(t_c0, c0)
    steps = [None] * T
    for s in _time_order(T, reverse):
        dz = dh @ tg.transpose(w_hh)
        if forcing is not None:
            dz = dz + forcing[s]
        dc = (k_i[s] * dz[:, :H] + k_f[s] * dz[:, H:2 * H] + f[s] * dc
              + k_g[s] * dz[:, 2 * H:3 * H])
        dh = k_o[s] * dz[:, 3 * H:] + k_c[s] * dc
        steps[s] = tg.concatenate([dh, dc], axis=-1)
    return tg.stack(steps, axis=0)


def _lstm_sequence_backward_jvp(t, ans, g, seq, xw, h0, c0, w_hh, reverse=False):
    # The tangent of the BPTT kernel (forward over reverse through _lstm_sequence's plain
    # backward), term for term: every input is independent here (seq too, as the op
    # sees it). With the kernel's factors a, b_* and the recurrence
    #     dh = g_h + dz_next W;  dc = g_c + dc_in_next + dh a;
    #     dz = [dc b_i, dc b_f, dc b_g, dh b_o];  dc_in = dc f
    # the tangent runs the same recurrence with the product rule on each line, from the
    # factors' tangents (the gates' derivatives along z's tangent).
    T, N, H = xw.shape[0], xw.shape[1], h0.shape[-1]
    t_g, t_seq, t_xw, t_h0, t_c0, t_w = t[:6]
    hs, cs = seq[..., :H], seq[..., H:]
    h_prev, c_prev, i, f, gate, o, tc = _lstm_gates(hs, cs, xw, h0, c0, w_hh, reverse)
    di, df, do = i * (1.0 - i), f * (1.0 - f), o * (1.0 - o)
    dgate, dtc = 1.0 - gate * gate, 1.0 - tc * tc
    a = o * dtc
    b_i, b_f, b_g, b_o = gate * di, c_prev * df, i * dgate, tc * do
    # the factors' tangents (zeros where no input tangent reaches them)
    t_seq = _zero_if_none(t_seq, seq)
    t_hs, t_cs = t_seq[..., :H], t_seq[..., H:]
    t_hprev = _shifted_tensor(t_hs, _zero_if_none(t_h0, h0), reverse)
    t_cprev = _shifted_tensor(t_cs, _zero_if_none(t_c0, c0), reverse)
    t_z = _forcing(t_xw, h_prev, t_w, T, N, H, 4 * H)
    t_z = tg.reshape(tg.reshape(t_hprev, (T * N, H)) @ tg.transpose(w_hh),
                     (T, N, 4 * H)) + (0.0 if t_z is None else t_z)
    t_i, t_f = di * t_z[..., :H], df * t_z[..., H:2 * H]
    t_gate, t_o = dgate * t_z[..., 2 * H:3 * H], do * t_z[..., 3 * H:]
    t_tc = dtc * t_cs
    t_a = t_o * dtc - 2.0 * o * tc * t_tc
    t_bi = t_gate * di + gate * (1.0 - 2.0 * i) * t_i
    t_bf = t_cprev * df + c_prev * (1.0 - 2.0 * f) * t_f
    t_bg = t_i * dgate - 2.0 * i * gate * t_gate
    t_bo = t_tc * do + tc * (1.0 - 2.0 * o) * t_o
    t_g = _zero_if_none(t_g, g)
    steps = [None] * T
    dh_rec = dc_rec = t_dh_rec = t_dc_rec = None
    for s in (range(T) if reverse else range(T - 1, -1, -1)):    # the kernel's order
        dh, t_dh = g[s, :, :H], t_g[s, :, :H]
        dc, t_dc = g[s, :, H:], t_g[s, :, H:]
        if dh_rec is not None:
            dh, t_dh = dh + dh_rec, t_dh + t_dh_rec
            dc, t_dc = dc + dc_rec, t_dc + t_dc_rec
        dc, t_dc = dc + dh * a[s], t_dc + t_dh * a[s] + dh * t_a[s]
        dz = tg.concatenate([dc * b_i[s], dc * b_f[s], dc * b_g[s], dh * b_o[s]], axis=-1)
        t_dz = tg.concatenate([t_dc * b_i[s] + dc * t_bi[s], t_dc * b_f[s] + dc * t_bf[s],
                               t_dc * b_g[s] + dc * t_bg[s], t_dh * b_o[s] + dh * t_bo[s]],
                              axis=-1)
        dc_rec, t_dc_rec = dc * f[s], t_dc * f[s] + dc * t_f[s]
        dh_rec, t_dh_rec = dz @ w_hh, t_dz @ w_hh
        if t_w is not None:
            t_dh_rec = t_dh_rec + dz @ t_w
        steps[s] = tg.concatenate([t_dz, t_dc_rec], axis=-1)
    return tg.stack(steps, axis=0)


# ---------------------------------------------------------------------------------------
# GRU
# ---------------------------------------------------------------------------------------
# Note: [the fused GRU recurrence]
# The same scheme as the LSTM's: ``_gru_sequence(xw, h0, w_hh, b_hn, reverse=False)``
# runs every step of one layer and direction; xw (T, N, 3H) is x @ W_ih.T + b_ih with
# b_hr and b_hz folded in, b_hn (H,) stays separate (torch's n gate has r inside:
# n = tanh(xw_n + r * (h W_hn^T + b_hn))). The result is h_t, (T, N, H). Every gradient
# of a step is the incoming dh_t times a factor that does not depend on dh, so
# backward precomputes the factors for all steps at once and its per-step loop is a
# multiply and one GEMM. ``_gru_sequence_backward`` returns (T, N, 5H) =
# ``[da_r | da_z | dhw_n | da_n | dh z]`` (a the gates' pre-activations, hw_n = h W_hn^T +
# b_hn): its first 3H are the gradient of h W_hh^T, from which dW_hh and dh_{t-1} follow.

def _check_gru(xw, h0, w_hh, b_hn, op):
    xw, h0, w_hh, b_hn = (np.asarray(a) for a in (xw, h0, w_hh, b_hn))
    shapes = f"{xw.shape}, {h0.shape}, {w_hh.shape} and {b_hn.shape}"
    if xw.ndim != 3 or h0.ndim != 2:
        raise ValueError(f"{op}: expected xw (T, N, 3H), h0 (N, H), w_hh (3H, H) and b_hn "
                         f"(H,), got {shapes}")
    T, N, G = xw.shape
    H = h0.shape[1]
    if G != 3 * H or h0.shape != (N, H) or w_hh.shape != (G, H) or b_hn.shape != (H,):
        raise ValueError(f"{op}: expected xw (T, N, 3H), h0 (N, H), w_hh (3H, H) and b_hn "
                         f"(H,), got {shapes}")
    dtype = np.result_type(xw, h0, w_hh, b_hn)
    if dtype.kind != "f":
        raise TypeError(f"{op}: inputs must be floating point, got {dtype}")
    return xw, h0, w_hh, b_hn, T, N, H, dtype


def _gru_sequence_kernel(xw, h0, w_hh, b_hn, reverse=False):
    xw, h0, w_hh, b_hn, T, N, H, dtype = _check_gru(xw, h0, w_hh, b_hn, "_gru_sequence")
    out = np.empty((T, N, H), dtype)
    w_t = np.ascontiguousarray(w_hh.T, dtype=dtype)      # see _lstm_forward
    h = h0.astype(dtype, copy=False)
    with np.errstate(over="ignore"):                     # see _sigmoid
        for t in (range(T - 1, -1, -1) if reverse else range(T)):
            hw = h @ w_t
            a = hw[:, :2 * H]
            a += xw[t, :, :2 * H]
            rz = _sigmoid(a)
            hn = hw[:, 2 * H:]
            hn += b_hn
            hn *= rz[:, :H]
            hn += xw[t, :, 2 * H:]
            n = np.tanh(hn, out=hn)
            h_new = out[t]
            np.subtract(h, n, out=h_new)                 # h' = n + z (h - n)
            h_new *= rz[:, H:]
            h_new += n
            h = h_new
    return out


def _gru_sequence_backward_kernel(g, seq, xw, h0, w_hh, b_hn, reverse=False):
    xw, h0, w_hh, b_hn, T, N, H, dtype = _check_gru(xw, h0, w_hh, b_hn,
                                                    "_gru_sequence_backward")
    g, seq = np.asarray(g, dtype), np.asarray(seq, dtype)
    h_prev = _shifted_states(seq, h0, reverse)
    hw = (h_prev.reshape(T * N, H) @ np.ascontiguousarray(w_hh.T)).reshape(T, N, 3 * H)
    with np.errstate(over="ignore"):
        rz = _sigmoid(xw[..., :2 * H] + hw[..., :2 * H])
    r, z = rz[..., :H], rz[..., H:]
    hn = hw[..., 2 * H:] + b_hn
    n = np.tanh(xw[..., 2 * H:] + r * hn)
    # Factors: dxw_t and dhw_t are dh_t times these (see the Note).
    k = np.empty((T, N, 5, H), dtype)
    k_n = k[:, :, 3]
    np.multiply(1.0 - z, 1.0 - n * n, out=k_n)                      # da_n / dh
    np.multiply(k_n * hn, r * (1.0 - r), out=k[:, :, 0])            # da_r / dh
    np.multiply(h_prev - n, z * (1.0 - z), out=k[:, :, 1])          # da_z / dh
    np.multiply(k_n, r, out=k[:, :, 2])                             # dhw_n / dh
    k[:, :, 4] = z                                                  # direct: dh z
    out = np.empty((T, N, 5 * H), dtype)
    dh_rec = None
    for t in (range(T) if reverse else range(T - 1, -1, -1)):
        dh = g[t] if dh_rec is None else g[t] + dh_rec
        row = out[t]
        np.multiply(dh[:, None, :], k[t], out=row.reshape(N, 5, H))
        dh_rec = row[:, :3 * H] @ w_hh
        dh_rec += row[:, 4 * H:]
    return out


def _gru_gates(hs, xw, h0, w_hh, b_hn, reverse):
    """(h_{t-1}, r, z, W_hn h_{t-1} + b_hn, n) of every step, recomputed with tapegrad ops
    from the sequence's states hs (T, N, H) and its input projections xw: what the composed
    backward and the JVP rules differentiate through."""
    T, N, H = xw.shape[0], xw.shape[1], h0.shape[-1]
    h_prev = _shifted_tensor(hs, h0, reverse)
    hw = tg.reshape(tg.reshape(h_prev, (T * N, H)) @ tg.transpose(w_hh), (T, N, 3 * H))
    r = tg.sigmoid(xw[..., :H] + hw[..., :H])
    z = tg.sigmoid(xw[..., H:2 * H] + hw[..., H:2 * H])
    hn = hw[..., 2 * H:] + b_hn
    return h_prev, r, z, hn, tg.tanh(xw[..., 2 * H:] + r * hn)


def _gru_bptt_composed(g, ans, xw, h0, w_hh, b_hn, reverse):
    """The gradients of _gru_sequence with tapegrad ops, term for term as the kernel's
    (recorded: differentiable again, for create_graph=True)."""
    T, N, H = xw.shape[0], xw.shape[1], h0.shape[-1]
    h_prev, r, z, hn, n = _gru_gates(ans, xw, h0, w_hh, b_hn, reverse)
    k_n = (1.0 - z) * (1.0 - n * n)
    k_r, k_z, k_hn = k_n * hn * (r * (1.0 - r)), (h_prev - n) * (z * (1.0 - z)), k_n * r
    rows, dh_rec = [None] * T, None
    for t in (range(T) if reverse else range(T - 1, -1, -1)):
        dh = g[t] if dh_rec is None else g[t] + dh_rec
        dhw = tg.concatenate([dh * k_r[t], dh * k_z[t], dh * k_hn[t]], axis=-1)
        rows[t] = tg.concatenate([dhw, dh * k_n[t]], axis=-1)     # [da_r, da_z, dhw_n, da_n]
        dh_rec = dhw @ w_hh + dh * z[t]
    both = tg.stack(rows, axis=0)
    dxw = tg.concatenate([both[..., :2 * H], both[..., 3 * H:]], axis=-1)
    dhw_all = both[..., :3 * H]
    dw = tg.transpose(tg.reshape(dhw_all, (T * N, 3 * H))) @ tg.reshape(h_prev, (T * N, H))
    return dxw, dh_rec, dw, tg.sum(both[..., 2 * H:3 * H], axis=(0, 1))


def _gru_sequence_vjp(g, ans, xw, h0, w_hh, b_hn, reverse=False):
    if tg.is_grad_enabled():                          # create_graph: see the LSTM's Note
        return _gru_bptt_composed(g, ans, xw, h0, w_hh, b_hn, reverse)
    T, N, H = xw.shape[0], xw.shape[1], h0.shape[-1]
    both = tg._gru_sequence_backward(g, ans, xw, h0, w_hh, b_hn, reverse=reverse)
    dhw = both[..., :3 * H]
    dxw = tg.concatenate([both[..., :2 * H], both[..., 3 * H:4 * H]], axis=-1) \
        if tg.needs_grad(xw) else None
    first = T - 1 if reverse else 0
    dh0 = dhw[first] @ w_hh + both[first, :, 4 * H:] if tg.needs_grad(h0) else None
    dw = None
    if tg.needs_grad(w_hh):
        h_prev = _shifted_tensor(ans, h0, reverse)
        dw = tg.transpose(tg.reshape(dhw, (T * N, 3 * H))) @ tg.reshape(h_prev, (T * N, H))
    db = tg.sum(both[..., 2 * H:3 * H], axis=(0, 1)) if tg.needs_grad(b_hn) else None
    return dxw, dh0, dw, db


def _gru_sequence_jvp(t, ans, xw, h0, w_hh, b_hn, reverse=False):
    # (Note: [forward-mode tangents of the fused recurrences]) With hw = h_{t-1} W^T:
    # dhw = dh_{t-1} W^T + h_{t-1} tW^T; dr = r' (txw_r + dhw_r); dz = z' (txw_z + dhw_z);
    # dn = n' (txw_n + dr hn + r (dhw_n + tb)); dh = (1 - z) dn + z dh_{t-1}
    # + dz (h_{t-1} - n).
    t_xw, t_h0, t_w, t_b = t[0], t[1], t[2], t[3]
    T, N, H = xw.shape[0], xw.shape[1], h0.shape[-1]
    h_prev, r, z, hn, n = _gru_gates(ans, xw, h0, w_hh, b_hn, reverse)
    k_r, k_z, k_n = r * (1.0 - r), z * (1.0 - z), 1.0 - n * n
    # forcing: every term of the step's [da_r | da_z | dhw_n] and of da_n without dh_{t-1}
    # (T, N, 3H), then b_hn's tangent in the n slice ((3H,): broadcast, NOT indexed by step)
    f_hw = _forcing(None, h_prev, t_w, T, N, H, 3 * H)
    tb_full = None
    if t_b is not None:
        tb_full = tg.concatenate([tg.zeros_like(t_b), tg.zeros_like(t_b), t_b], axis=-1)
    dh = _zero_if_none(t_h0, h0)
    steps = [None] * T
    for s in _time_order(T, reverse):
        dhw = dh @ tg.transpose(w_hh)
        if f_hw is not None:
            dhw = dhw + f_hw[s]
        if tb_full is not None:
            dhw = dhw + tb_full
        da_r, da_z, d_hn = dhw[:, :H], dhw[:, H:2 * H], dhw[:, 2 * H:]
        da_n = r[s] * d_hn
        if t_xw is not None:
            da_r, da_z = da_r + t_xw[s, :, :H], da_z + t_xw[s, :, H:2 * H]
            da_n = da_n + t_xw[s, :, 2 * H:]
        dr, dz = k_r[s] * da_r, k_z[s] * da_z
        dn = k_n[s] * (da_n + dr * hn[s])
        dh = (1.0 - z[s]) * dn + z[s] * dh + dz * (h_prev[s] - n[s])
        steps[s] = dh
    return tg.stack(steps, axis=0)


def _gru_sequence_backward_jvp(t, ans, g, seq, xw, h0, w_hh, b_hn, reverse=False):
    # The tangent of the GRU's BPTT kernel, term for term (as _lstm_sequence_backward's,
    # every input independent): rows = dh * [k_r, k_z, k_hn, k_n, z] with
    #     dh = g + rows_next[:3H] W + rows_next[4H:]
    # so the tangent of a row is t_dh * k + dh * t_k, from the factors' tangents.
    T, N, H = xw.shape[0], xw.shape[1], h0.shape[-1]
    t_g, t_seq, t_xw, t_h0, t_w, t_b = t[:6]
    h_prev, r, z, hn, n = _gru_gates(seq, xw, h0, w_hh, b_hn, reverse)
    dr, dz, dn = r * (1.0 - r), z * (1.0 - z), 1.0 - n * n
    k_n = (1.0 - z) * dn
    k = tg.concatenate([k_n * hn * dr, (h_prev - n) * dz, k_n * r, k_n, z], axis=-1)
    # the factors' tangents
    t_hprev = _shifted_tensor(_zero_if_none(t_seq, seq), _zero_if_none(t_h0, h0), reverse)
    t_hw = _forcing(None, h_prev, t_w, T, N, H, 3 * H)
    t_hw = tg.reshape(tg.reshape(t_hprev, (T * N, H)) @ tg.transpose(w_hh),
                      (T, N, 3 * H)) + (0.0 if t_hw is None else t_hw)
    t_a = t_hw[..., :2 * H] if t_xw is None else t_hw[..., :2 * H] + t_xw[..., :2 * H]
    t_r, t_z = dr * t_a[..., :H], dz * t_a[..., H:]                # (a_r, a_z: pre-sigmoid)
    t_hn = t_hw[..., 2 * H:] if t_b is None else t_hw[..., 2 * H:] + t_b
    t_pre_n = t_r * hn + r * t_hn
    if t_xw is not None:
        t_pre_n = t_pre_n + t_xw[..., 2 * H:]
    t_n = dn * t_pre_n
    t_kn = -t_z * dn - (1.0 - z) * (2.0 * n) * t_n
    t_k = tg.concatenate([
        t_kn * hn * dr + k_n * t_hn * dr + k_n * hn * (1.0 - 2.0 * r) * t_r,
        (t_hprev - t_n) * dz + (h_prev - n) * (1.0 - 2.0 * z) * t_z,
        t_kn * r + k_n * t_r, t_kn, t_z], axis=-1)
    t_g = _zero_if_none(t_g, g)
    steps = [None] * T
    dh_rec = t_dh_rec = None
    for s in (range(T) if reverse else range(T - 1, -1, -1)):    # the kernel's order
        dh, t_dh = g[s], t_g[s]
        if dh_rec is not None:
            dh, t_dh = dh + dh_rec, t_dh + t_dh_rec
        rep, t_rep = tg.concatenate([dh] * 5, axis=-1), tg.concatenate([t_dh] * 5, axis=-1)
        row, t_row = rep * k[s], t_rep * k[s] + rep * t_k[s]
        dh_rec = row[:, :3 * H] @ w_hh + row[:, 4 * H:]
        t_dh_rec = t_row[:, :3 * H] @ w_hh + t_row[:, 4 * H:]
        if t_w is not None:
            t_dh_rec = t_dh_rec + row[:, :3 * H] @ t_w
        steps[s] = t_row
    return tg.stack(steps, axis=0)


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

def _r(seed, *shape, scale=1.0):
    return scale * np.random.default_rng(seed).standard_normal(shape)


def _samples():
    T, N, H = 4, 3, 2
    args = (_r(1, T, N, 4 * H), _r(2, N, H), _r(3, N, H), _r(4, 4 * H, H, scale=0.7))
    return [tg.Sample(*args), tg.Sample(*args, reverse=True),
            tg.Sample(_r(5, 1, 2, 4 * 3), _r(6, 2, 3), _r(7, 2, 3), _r(8, 12, 3))]


def _backward_samples():
    out = []
    for s in _samples()[:2]:
        xw, h0, c0, w_hh = s.args
        reverse = s.kwargs.get("reverse", False)
        seq = _lstm_sequence_kernel(xw, h0, c0, w_hh, reverse)
        out.append(tg.Sample(_r(9, *seq.shape), seq, xw, h0, c0, w_hh, reverse=reverse))
    return out


def _gru_samples():
    T, N, H = 4, 3, 2
    args = (_r(11, T, N, 3 * H), _r(12, N, H), _r(13, 3 * H, H, scale=0.7), _r(14, H))
    return [tg.Sample(*args), tg.Sample(*args, reverse=True),
            tg.Sample(_r(15, 1, 2, 9), _r(16, 2, 3), _r(17, 9, 3), _r(18, 3))]


def _gru_backward_samples():
    out = []
    for s in _gru_samples()[:2]:
        reverse = s.kwargs.get("reverse", False)
        seq = _gru_sequence_kernel(*s.args, reverse)
        out.append(tg.Sample(_r(19, *seq.shape), seq, *s.args, reverse=reverse))
    return out


# vmap's batching rule (register_op(batch=)): inputs are physical, the vmapped axis first

def _recurrence_batch(name, kinds):
    """The rule of a fused recurrence: the vmapped axis B is folded into the batch axis N
    of every sequence ("T": (T, N, F) -> (T, B*N, F)) and state ("N": (N, F) ->
    (B*N, F)) -- the rows of a recurrence are independent -- and split off the output
    (T, B*N, F) again. A batched weight ("W": per-example weights, one recurrence each)
    or shapes that do not fit run once per example (the kernel's behaviour)."""
    def rule(inputs, batched, reverse=False):
        size = next(x.shape[0] for x, b in zip(inputs, batched) if b)
        shapes = [tuple(x.shape[1:]) if b else tuple(np.shape(x))
                  for x, b in zip(inputs, batched)]
        fits = all(len(s) == {"T": 3, "N": 2}[k] for s, k in zip(shapes, kinds) if k != "W")
        rows = {s[1] if k == "T" else s[0] for s, k in zip(shapes, kinds) if k != "W"} \
            if fits else set()
        if len(rows) != 1 or any(b for b, k in zip(batched, kinds) if k == "W"):
            return _batching._loop(getattr(tg, name), inputs, batched, {"reverse": reverse},
                                   None)
        (n,) = rows
        args = []
        for x, b, s, k in zip(inputs, batched, shapes, kinds):
            if k == "W":
                args.append(x)
                continue
            x = x if b else tg.broadcast_to(x, (size,) + s)
            if k == "T":
                x = tg.swapaxes(x, 0, 1)                                 # (T, B, N, F)
                args.append(tg.reshape(x, (s[0], size * n, s[2])))
            else:
                args.append(tg.reshape(x, (size * n, s[1])))
        out = getattr(tg, name)(*args, reverse=reverse)                 # (T, B*N, F)
        out = tg.reshape(out, (out.shape[0], size, n, out.shape[2]))
        return tg.swapaxes(out, 0, 1)
    rule.__name__ = rule.__qualname__ = f"_{name}_batch"
    return rule


def register(registry):
    """Register the fused recurrence ops (called from functional.register)."""
    registry.register_op(
        "_gru_sequence", kernels={"cpu": _gru_sequence_kernel}, vjp=_gru_sequence_vjp,
        jvp=_gru_sequence_jvp,
        params=("reverse",), method=False, samples=_gru_samples(),
        batch=_recurrence_batch("_gru_sequence", "TNWW"),
        doc="_gru_sequence(xw, h0, w_hh, b_hn, reverse=False): every step of one GRU layer "
            "and direction (torch's gates r, z, n) given the input projection xw (T, N, 3H) "
            "with b_ih, b_hr and b_hz folded in; returns h_t (T, N, H). The op behind "
            "tg.nn.GRU and tg.nn.GRUCell on the CPU.")
    registry.register_op(
        "_gru_sequence_backward", kernels={"cpu": _gru_sequence_backward_kernel},
        vjp=None, nin=6, params=("reverse",), differentiable=(),
        jvp=_gru_sequence_backward_jvp,
        not_implemented=(0, 1, 2, 3, 4, 5), method=False, samples=_gru_backward_samples(),
        batch=_recurrence_batch("_gru_sequence_backward", "TTTNWW"),
        doc="_gru_sequence_backward(g, seq, xw, h0, w_hh, b_hn, reverse=False): "
            "backpropagation through time for _gru_sequence (its rule's kernel): (T, N, 5H) "
            "= [da_r | da_z | dhw_n | da_n | dh z]. Not differentiable itself in reverse "
            "mode: higher derivatives of _gru_sequence differentiate the recorded BPTT "
            "instead; it has a forward-mode (JVP) rule, for forward over reverse.")
    registry.register_op(
        "_lstm_sequence", kernels={"cpu": _lstm_sequence_kernel}, vjp=_lstm_sequence_vjp,
        jvp=_lstm_sequence_jvp,
        params=("reverse",), method=False, samples=_samples(),
        batch=_recurrence_batch("_lstm_sequence", "TNNW"),
        doc="_lstm_sequence(xw, h0, c0, w_hh, reverse=False): every step of one LSTM layer "
            "and direction (torch's gates i, f, g, o) given the input projection xw (T, N, "
            "4H) with the biases folded in; returns (T, N, 2H) = [h_t | c_t]. The op behind "
            "tg.nn.LSTM and tg.nn.LSTMCell on the CPU.")
    registry.register_op(
        "_lstm_sequence_backward", kernels={"cpu": _lstm_sequence_backward_kernel},
        vjp=None, nin=6, params=("reverse",), differentiable=(),
        jvp=_lstm_sequence_backward_jvp,
        not_implemented=(0, 1, 2, 3, 4, 5), method=False, samples=_backward_samples(),
        batch=_recurrence_batch("_lstm_sequence_backward", "TTTNNW"),
        doc="_lstm_sequence_backward(g, seq, xw, h0, c0, w_hh, reverse=False): "
            "backpropagation through time for _lstm_sequence (its rule's kernel): (T, N, "
            "5H) = [dz_t | dc_(t-1)]. Not differentiable itself in reverse mode: higher "
            "derivatives of _lstm_sequence differentiate the composed recurrence instead; "
            "it has a forward-mode (JVP) rule, for forward over reverse.")
