"""The recurrent layers of ``tg.nn``: RNNCell, LSTMCell, GRUCell and RNN, LSTM, GRU, with
``torch.nn``'s constructor arguments, parameter names and shapes (``weight_ih_l0``
(gates*hidden, input), ``weight_hh_l0`` (gates*hidden, hidden), ``bias_ih_l0``,
``bias_hh_l0``, ``..._reverse`` for the backward direction), gate order (LSTM: i, f, g, o;
GRU: r, z, n) and PyTorch's initialisation (every parameter uniform in
[-1/sqrt(hidden_size), 1/sqrt(hidden_size))), so that a PyTorch ``state_dict`` converted to
arrays loads with ``load_state_dict`` and gives PyTorch's outputs.

The input projection ``x @ W_ih.T + b_ih`` of a layer is one GEMM over all time steps.
On the CPU, LSTM and GRU then run each layer and direction as ONE fused op
(``_lstm_sequence`` / ``_gru_sequence`` in recurrent_ops: one (N, H) @ (H, G) GEMM and the
gate arithmetic per step inside one kernel, and a backpropagation-through-time kernel),
the cells as that op with one step. RNN, and every layer on other devices, is composed
of tapegrad ops (matmul, sigmoid, tanh, ...; per chunk of 32 or more steps, see
_chunks). Either way first and higher derivatives are exact (the fused ops' rules record
a composed BPTT under create_graph=True).

>>> import tapegrad as tg
>>> lstm = tg.nn.LSTM(3, 5, num_layers=2)
>>> out, (h, c) = lstm(tg.ones((7, 2, 3)))          # (time, batch, feature)
>>> out.shape, h.shape, c.shape
((7, 2, 5), (2, 2, 5), (2, 2, 5))
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import tapegrad as tg

from . import functional
from .nn import Module, Parameter, _layer_dtype

__all__ = ["RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _positive(layer, name, v, minimum=1):
    if isinstance(v, bool) or not isinstance(v, (numbers.Integral, np.integer)) or v < minimum:
        raise ValueError(f"{layer}: {name} must be an integer >= {minimum}, got {v!r}")
    return int(v)


def _float_dtype(layer, dtype):
    return _layer_dtype(dtype, layer)          # None: tg.get_default_dtype()


def _mode(layer, nonlinearity):
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{layer}: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
    return "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


def _step(mode, xw, h, c, w_hh, b_hn):
    """One time step. `xw` is this step's precomputed input projection (with the biases
    folded in, see _fold_biases); `b_hn` is GRU's b_hn (None otherwise). Returns
    (h', c') (c' is None except for LSTM)."""
    hw = tg.matmul(h, w_hh.T)
    if mode == "RNN_TANH":
        return tg.tanh(xw + hw), None
    if mode == "RNN_RELU":
        return tg.relu(xw + hw), None
    H = h.shape[-1]
    if mode == "LSTM":
        gates = xw + hw
        # NOTE: one sigmoid over all four gates (the g slice's is unused) costs less than
        # three sigmoids on slices: at RNN sizes the per-op cost dominates.
        s = tg.sigmoid(gates)
        i, f, o = s[..., 0:H], s[..., H:2 * H], s[..., 3 * H:4 * H]
        g = tg.tanh(gates[..., 2 * H:3 * H])
        c = f * c + i * g
        return o * tg.tanh(c), c
    # GRU. NOTE: torch's n gate puts r inside: tanh(W_in x + b_in + r * (W_hn h + b_hn)),
    # so the hidden projection (with its bias) must stay separate from the input one.
    rz = tg.sigmoid(xw[..., 0:2 * H] + hw[..., 0:2 * H])
    r, z = rz[..., 0:H], rz[..., H:2 * H]
    hn = hw[..., 2 * H:3 * H]
    if b_hn is not None:
        hn = hn + b_hn
    n = tg.tanh(xw[..., 2 * H:3 * H] + r * hn)
    return n + z * (h - n), None           # = (1 - z) * n + z * h


def _fold_biases(mode, b_ih, b_hh):
    """The bias to add to the input projection ``x @ W_ih.T`` once for all steps, and
    what is left of b_hh for every step (GRU's b_hn, else None)."""
    if b_ih is None:
        return None, None
    if mode != "GRU":
        return b_ih + b_hh, None
    # NOTE: GRU's b_hn sits inside r * (W_hn h + b_hn), so only b_hr and b_hz fold in.
    H = b_hh.shape[0] // 3
    b = b_ih + tg.concatenate([b_hh[0:2 * H], tg.zeros((H,), b_hh.dtype, b_hh.device)])
    return b, b_hh[2 * H:3 * H]


def _chunks(T):
    """(start, stop) of the chunks the time axis is cut into: K = max(32, sqrt(T)) steps
    (one chunk up to 32 steps), so that backward's slicing cost stays ~T * K."""
    K = max(32, math.isqrt(max(T - 1, 0)) + 1)
    return [(a, min(a + K, T)) for a in range(0, T, K)]


def _fused(mode, x):
    """Whether a fused recurrence op runs (recurrent_ops: LSTM and GRU on the CPU, the
    device their kernels are for); elsewhere the step is composed of tapegrad ops."""
    return mode in ("LSTM", "GRU") and x.device == "cpu"


def _b_hn(b_hn, h):
    """GRU's b_hn for _gru_sequence, which always takes one: zeros without biases."""
    return tg.zeros((h.shape[-1],), h.dtype, h.device) if b_hn is None else b_hn


def _check_dtype(layer, x, w):
    if x.dtype != w.dtype:
        raise TypeError(f"{layer}: input dtype {x.dtype} does not match the layer's parameter "
                        f"dtype {w.dtype} (convert one of them: x.astype(...) or "
                        f"layer.to({x.dtype}))")


# ---------------------------------------------------------------------------------------
# Cells
# ---------------------------------------------------------------------------------------

class _CellBase(Module):
    _mode = ""

    def __init__(self, input_size, hidden_size, bias, dtype, device):
        super().__init__()
        layer = type(self).__name__
        self.input_size = _positive(layer, "input_size", input_size, 0)
        self.hidden_size = _positive(layer, "hidden_size", hidden_size)
        self.bias = bool(bias)
        dtype = _float_dtype(layer, dtype)
        G = _GATES[self._mode] * self.hidden_size
        self.weight_ih = Parameter(tg.zeros((G, self.input_size), dtype, device))
        self.weight_hh = Parameter(tg.zeros((G, self.hidden_size), dtype, device))
        if self.bias:
            self.bias_ih = Parameter(tg.zeros((G,), dtype, device))
            self.bias_hh = Parameter(tg.zeros((G,), dtype, device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Draw every parameter again (in place) from U(-1/sqrt(hidden), 1/sqrt(hidden))."""
        k = 1.0 / math.sqrt(self.hidden_size)
        with tg.no_grad():
            for p in self.parameters():
                p[...] = tg.random.uniform(-k, k, p.shape, dtype=p.dtype, device=p.device)

    def _check(self, x, states):
        """Checks input and states; returns (x as 2-d, states as 2-d, batched?)."""
        layer = f"{type(self).__name__}({self.extra_repr()})"
        x = tg.asarray(x)
        if x.ndim not in (1, 2):
            raise ValueError(f"{layer}: expected input of shape (batch, {self.input_size}) or "
                             f"({self.input_size},), got {x.shape}")
        if x.shape[-1] != self.input_size:
            raise ValueError(f"{layer}: expected input with input_size={self.input_size} but "
                             f"got input of shape {x.shape} ({x.shape[-1]} features)")
        _check_dtype(layer, x, self.weight_ih)
        batched = x.ndim == 2
        if not batched:
            x = x.reshape((1, self.input_size))
        want = (x.shape[0], self.hidden_size)
        out = []
        for s in states:
            if s is None:
                s = tg.zeros(want, x.dtype, x.device)
            else:
                s = tg.asarray(s)
                expected = want if batched else want[1:]
                if s.shape != expected:
                    raise ValueError(f"{layer}: expected hidden state of shape {expected} for "
                                     f"input of shape {x.shape if batched else x.shape[1:]}, "
                                     f"got {s.shape}")
                _check_dtype(layer, s, self.weight_ih)
                if not batched:
                    s = s.reshape(want)
            out.append(s)
        return x, out, batched

    def _run(self, x, h, c=None):
        b, b_hn = _fold_biases(self._mode, self.bias_ih, self.bias_hh)
        xw = functional.linear(x, self.weight_ih, b)
        if _fused(self._mode, x):
            # One step of the fused recurrence: the gates' arithmetic in one kernel.
            H = self.hidden_size
            xw = tg.reshape(xw, (1,) + xw.shape)
            if self._mode == "GRU":
                return tg._gru_sequence(xw, h, self.weight_hh, _b_hn(b_hn, h))[0], None
            seq = tg._lstm_sequence(xw, h, c, self.weight_hh)
            return seq[0, :, :H], seq[0, :, H:]
        return _step(self._mode, xw, h, c, self.weight_hh, b_hn)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if self._mode == "RNN_RELU":
            s += ", nonlinearity='relu'"
        if self.weight_ih.dtype != np.float64:
            s += f", dtype={self.weight_ih.dtype}"
        return s


class RNNCell(_CellBase):
    """Elman RNN cell: ``h' = tanh(x @ W_ih.T + b_ih + h @ W_hh.T + b_hh)`` (or relu with
    ``nonlinearity='relu'``), as ``torch.nn.RNNCell``. ``forward(input, hx=None)`` takes
    input (batch, input_size) or unbatched (input_size,); hx defaults to zeros.

    >>> import tapegrad as tg
    >>> cell = tg.nn.RNNCell(3, 4)
    >>> cell(tg.ones((2, 3))).shape
    (2, 4)
    """

    _mode = "RNN_TANH"

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", *,
                 device=None, dtype=None):
        mode = _mode("RNNCell", nonlinearity)
        super().__init__(input_size, hidden_size, bias, dtype, device)
        self._mode, self.nonlinearity = mode, nonlinearity

    def forward(self, input, hx=None):
        x, (h,), batched = self._check(input, (hx,))
        h, _ = self._run(x, h)
        return h if batched else h.reshape((self.hidden_size,))


class LSTMCell(_CellBase):
    """LSTM cell, as ``torch.nn.LSTMCell``: gates ``i, f, g, o`` (in this order in the rows
    of ``weight_ih``/``weight_hh``); ``c' = f*c + i*g``, ``h' = o*tanh(c')``.
    ``forward(input, hx=None)`` with hx = (h, c) (zeros by default) returns (h', c').

    >>> import tapegrad as tg
    >>> h, c = tg.nn.LSTMCell(3, 4)(tg.ones((2, 3)))
    >>> h.shape, c.shape
    ((2, 4), (2, 4))
    """

    _mode = "LSTM"

    def __init__(self, input_size, hidden_size, bias=True, *, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, dtype, device)

    def forward(self, input, hx=None):
        if hx is None:
            hx = (None, None)
        elif not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise TypeError(f"LSTMCell: hx must be a tuple (h, c), got {type(hx).__name__}")
        x, (h, c), batched = self._check(input, hx)
        h, c = self._run(x, h, c)
        if not batched:
            h, c = h.reshape((self.hidden_size,)), c.reshape((self.hidden_size,))
        return h, c


class GRUCell(_CellBase):
    """GRU cell, as ``torch.nn.GRUCell``: gates ``r, z, n`` (in this order);
    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``.

    >>> import tapegrad as tg
    >>> tg.nn.GRUCell(3, 4)(tg.ones(3)).shape
    (4,)
    """

    _mode = "GRU"

    def __init__(self, input_size, hidden_size, bias=True, *, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, dtype, device)

    def forward(self, input, hx=None):
        x, (h,), batched = self._check(input, (hx,))
        h, _ = self._run(x, h)
        return h if batched else h.reshape((self.hidden_size,))


# ---------------------------------------------------------------------------------------
# Multi-layer, multi-step layers
# ---------------------------------------------------------------------------------------

class _RNNBase(Module):
    _mode = ""

    def __init__(self, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                 bidirectional, proj_size, dtype, device):
        super().__init__()
        layer = type(self).__name__
        self.input_size = _positive(layer, "input_size", input_size, 0)
        self.hidden_size = _positive(layer, "hidden_size", hidden_size)
        self.num_layers = _positive(layer, "num_layers", num_layers)
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) \
                or not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{layer}: dropout must be a probability in [0, 1], got {dropout!r}")
        if proj_size != 0:
            # NOTE: torch's LSTM projections (proj_size > 0) are not implemented: refused.
            raise ValueError(f"{layer}: proj_size={proj_size!r} is not supported (only 0)")
        if dropout > 0 and self.num_layers == 1:
            # As PyTorch: dropout acts between layers only, so with one layer it does nothing.
            warnings.warn(f"{layer}: dropout={dropout} has no effect with num_layers=1 (dropout "
                          f"applies between recurrent layers)", UserWarning, stacklevel=3)
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = float(dropout)
        self.bidirectional = bool(bidirectional)
        self.proj_size = 0
        dtype = _float_dtype(layer, dtype)
        G = _GATES[self._mode] * self.hidden_size
        D = 2 if self.bidirectional else 1
        # Registration order is torch's (layer, direction, then ih/hh weights, ih/hh biases):
        # parameters() and state_dict() list them as torch does.
        for k in range(self.num_layers):
            n_in = self.input_size if k == 0 else self.hidden_size * D
            for suffix in ("", "_reverse")[:D]:
                setattr(self, f"weight_ih_l{k}{suffix}",
                        Parameter(tg.zeros((G, n_in), dtype, device)))
                setattr(self, f"weight_hh_l{k}{suffix}",
                        Parameter(tg.zeros((G, self.hidden_size), dtype, device)))
                if self.bias:
                    setattr(self, f"bias_ih_l{k}{suffix}", Parameter(tg.zeros((G,), dtype, device)))
                    setattr(self, f"bias_hh_l{k}{suffix}", Parameter(tg.zeros((G,), dtype, device)))
        self.reset_parameters()

    reset_parameters = _CellBase.reset_parameters

    def _weights(self, k, suffix):
        g = lambda name: getattr(self, f"{name}_l{k}{suffix}")  # noqa: E731
        if self.bias:
            return g("weight_ih"), g("weight_hh"), g("bias_ih"), g("bias_hh")
        return g("weight_ih"), g("weight_hh"), None, None

    def _check_state(self, layer, s, want, batched):
        expected = want if batched else (want[0], want[2])
        s = tg.asarray(s)
        if s.shape != expected:
            raise ValueError(f"{layer}: expected hidden state of shape {expected} "
                             f"(num_layers * num_directions, batch, hidden_size), "
                             f"got {s.shape}")
        _check_dtype(layer, s, self.weight_ih_l0)
        return s if batched else s.reshape(want)

    def _forward(self, input, states):
        layer = f"{type(self).__name__}({self.extra_repr()})"
        x = tg.asarray(input)
        if x.ndim not in (2, 3):
            shape = "(batch, seq, feature)" if self.batch_first else "(seq, batch, feature)"
            raise ValueError(f"{layer}: expected input of shape {shape} or (seq, feature), "
                             f"got {x.shape}")
        if x.shape[-1] != self.input_size:
            raise ValueError(f"{layer}: expected input with input_size={self.input_size} but "
                             f"got input of shape {x.shape} ({x.shape[-1]} features)")
        _check_dtype(layer, x, self.weight_ih_l0)
        batched = x.ndim == 3
        if not batched:
            x = x.reshape((x.shape[0], 1, x.shape[1]))
        elif self.batch_first:
            x = tg.swapaxes(x, 0, 1)
        T, N = x.shape[0], x.shape[1]
        D = 2 if self.bidirectional else 1
        want = (self.num_layers * D, N, self.hidden_size)
        states = [None if s is None else self._check_state(layer, s, want, batched)
                  for s in states]
        h_n, c_n = [], []
        # NOTE: the time axis is cut into chunks of K steps, each with ONE input-projection
        # matmul. Slicing one step out of a tensor costs a gradient of that tensor's full
        # size in backward, so slicing all T steps out of one (T, N, G) projection would
        # make backward O(T^2); per chunk it is O(T * K). Layers pass their output on as
        # chunks (never stacked then sliced again).
        # NOTE: the fused LSTM (recurrent_ops) takes a whole layer in one op: no chunks.
        bounds = [(0, T)] if _fused(self._mode, x) and T else _chunks(T)
        xs = [x] if len(bounds) == 1 else [x[a:b] for a, b in bounds]
        for k in range(self.num_layers):
            if k > 0 and self.dropout > 0.0 and self.training:
                xs = [functional.dropout(xc, self.dropout, True) for xc in xs]
            outs = []
            for d, suffix in enumerate(("", "_reverse")[:D]):
                w_ih, w_hh, b_ih, b_hh = self._weights(k, suffix)
                b, b_hn = _fold_biases(self._mode, b_ih, b_hh)
                idx = k * D + d
                h = tg.zeros(want[1:], x.dtype, x.device) if states[0] is None else states[0][idx]
                c = None
                if self._mode == "LSTM":
                    c = tg.zeros(want[1:], x.dtype, x.device) if states[1] is None \
                        else states[1][idx]
                chunks = [None] * len(bounds)
                if _fused(self._mode, x) and T:
                    H = self.hidden_size
                    xw = functional.linear(xs[0], w_ih, b)
                    last = 0 if d == 1 else T - 1
                    if self._mode == "GRU":
                        seq = tg._gru_sequence(xw, h, w_hh, _b_hn(b_hn, h), reverse=d == 1)
                        outs.append([seq])
                        h_n.append(seq[last])
                        c_n.append(None)
                        continue
                    seq = tg._lstm_sequence(xw, h, c, w_hh, reverse=d == 1)
                    outs.append([seq[..., :H]])
                    h_n.append(seq[last, :, :H])
                    c_n.append(seq[last, :, H:])
                    continue
                for ci in (range(len(bounds) - 1, -1, -1) if d == 1 else range(len(bounds))):
                    xw = functional.linear(xs[ci], w_ih, b)
                    n = xw.shape[0]
                    hs = [None] * n
                    for t in (range(n - 1, -1, -1) if d == 1 else range(n)):
                        h, c = _step(self._mode, xw[t], h, c, w_hh, b_hn)
                        hs[t] = h
                    chunks[ci] = tg.stack(hs, axis=0)
                outs.append(chunks)
                h_n.append(h)
                c_n.append(c)
            xs = outs[0] if D == 1 else [tg.concatenate(pair, axis=-1) for pair in zip(*outs)]
        if not xs:                                          # T == 0
            x = tg.zeros((0, N, D * self.hidden_size), x.dtype, x.device)
        else:
            x = xs[0] if len(xs) == 1 else tg.concatenate(xs, axis=0)
        h_n = tg.stack(h_n, axis=0)
        c_n = tg.stack(c_n, axis=0) if self._mode == "LSTM" else None
        if not batched:
            x = x.reshape((T, x.shape[-1]))
            h_n = h_n.reshape((want[0], self.hidden_size))
            if c_n is not None:
                c_n = c_n.reshape((want[0], self.hidden_size))
        elif self.batch_first:
            x = tg.swapaxes(x, 0, 1)
        return x, h_n, c_n

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self._mode == "RNN_RELU":
            s += ", nonlinearity='relu'"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        if self.weight_ih_l0.dtype != np.float64:
            s += f", dtype={self.weight_ih_l0.dtype}"
        return s


class RNN(_RNNBase):
    """Multi-layer Elman RNN, as ``torch.nn.RNN``: each layer runs
    ``h_t = tanh(x_t @ W_ih.T + b_ih + h_{t-1} @ W_hh.T + b_hh)`` (relu with
    ``nonlinearity='relu'``). Input (seq, batch, input_size) ((batch, seq, ...) with
    ``batch_first=True``) or unbatched (seq, input_size); ``hx`` (num_layers *
    num_directions, batch, hidden_size), zeros by default. Returns ``(output, h_n)``;
    output holds the last layer's h_t for every t (both directions concatenated).
    ``dropout`` applies between layers in training mode only.

    >>> import tapegrad as tg
    >>> out, h_n = tg.nn.RNN(3, 4, bidirectional=True)(tg.ones((5, 2, 3)))
    >>> out.shape, h_n.shape
    ((5, 2, 8), (2, 2, 4))
    """

    _mode = "RNN_TANH"

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, *,
                 device=None, dtype=None):
        mode = _mode("RNN", nonlinearity)
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, dtype, device)
        self._mode, self.nonlinearity = mode, nonlinearity

    def forward(self, input, hx=None):
        out, h_n, _ = self._forward(input, (hx,))
        return out, h_n


class LSTM(_RNNBase):
    """Multi-layer LSTM, as ``torch.nn.LSTM`` (gates i, f, g, o; ``proj_size`` 0 only).
    ``forward(input, hx=None)`` with hx = (h_0, c_0) returns ``(output, (h_n, c_n))``.

    >>> import tapegrad as tg
    >>> out, (h, c) = tg.nn.LSTM(3, 4, batch_first=True)(tg.ones((2, 5, 3)))
    >>> out.shape, h.shape
    ((2, 5, 4), (1, 2, 4))
    """

    _mode = "LSTM"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, *, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, dtype, device)

    def forward(self, input, hx=None):
        if hx is None:
            hx = (None, None)
        elif not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise TypeError(f"LSTM: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
        out, h_n, c_n = self._forward(input, hx)
        return out, (h_n, c_n)


class GRU(_RNNBase):
    """Multi-layer GRU, as ``torch.nn.GRU`` (gates r, z, n;
    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``). Returns ``(output, h_n)``.

    >>> import tapegrad as tg
    >>> out, h_n = tg.nn.GRU(3, 4, num_layers=2)(tg.ones((5, 3)))   # unbatched
    >>> out.shape, h_n.shape
    ((5, 4), (2, 4))
    """

    _mode = "GRU"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, *, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, dtype, device)

    def forward(self, input, hx=None):
        out, h_n, _ = self._forward(input, (hx,))
        return out, h_n
