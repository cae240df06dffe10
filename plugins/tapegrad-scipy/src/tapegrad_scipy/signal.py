"""``tg.scipy.signal``: convolve and correlate (N-D; modes full, same, valid).

``convolve(in1, in2, mode='full', method='auto')`` is ``scipy.signal.convolve`` computed
directly (``method`` is accepted and ignored: results are 'direct''s, which for floats
match 'fft''s to rounding). Its gradient is a correlation, i.e. a convolution with the
other operand flipped along every axis, of g placed in the 'full' output. ``correlate``
is convolve with in2 flipped, as SciPy defines it for real inputs.

Flat op name: ``scipy_signal_convolve`` (NumPy's ``np.convolve`` is 1-D with other
'same'/'valid' rules).

>>> import tapegrad as tg
>>> tg.scipy.signal.convolve(tg.tensor([1.0, 2.0, 3.0]), tg.tensor([0.0, 1.0, 0.5]))
tensor([0. , 1. , 2.5, 4. , 1.5])
"""

import numpy as np
import tapegrad as tg

from ._common import Draw, loop_fallback

_MODES = ("full", "same", "valid")
_needs_grad = tg.needs_grad


def _check(name, in1, in2, mode):
    if mode not in _MODES:
        raise ValueError(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    s1, s2 = np.shape(in1), np.shape(in2)
    if len(s1) != len(s2):
        raise ValueError(f"{name}: in1 and in2 must have the same number of dimensions, "
                         f"got shapes {s1} and {s2}")
    if mode == "valid" and not (all(a >= b for a, b in zip(s1, s2))
                                or all(b >= a for a, b in zip(s1, s2))):
        raise ValueError(f"{name}: in mode 'valid' one input must be at least as large as "
                         f"the other in every dimension, got shapes {s1} and {s2}")


def _convolve_kernel(in1, in2, mode="full"):
    _check("convolve", in1, in2, mode)
    import scipy.signal as ss   # NOTE: here, not at the top: importing it costs 0.4 s, which `import tapegrad` would pay
    return np.asarray(ss.convolve(in1, in2, mode=mode, method="direct"))


def _convolve_batch(inputs, batched, mode="full"):
    """vmap's rule: one input batched is an N+1-D convolution with a unit extent of the
    other along the vmapped axis, which leaves that axis as it is in every mode ('same'
    keeps in1's extent; 'full' and 'valid' are symmetric, so a batched in2 goes first
    there). Both batched, or shapes 'valid' would refuse so: the exact loop."""
    in1, in2 = inputs
    if batched[0] == batched[1] or (batched[1] and mode == "same"):
        return loop_fallback("scipy_signal_convolve", inputs, batched, {"mode": mode})
    big, small = (in1, in2) if batched[0] else (in2, in1)
    small = tg.reshape(small, (1,) + tuple(small.shape))
    if mode == "valid" and not all(p >= q for p, q in zip(big.shape, small.shape)):
        return loop_fallback("scipy_signal_convolve", inputs, batched, {"mode": mode})
    return tg.scipy_signal_convolve(big, small, mode=mode)


def _flip(x):
    return x[(slice(None, None, -1),) * x.ndim]


def _into_full(g, s1, s2, mode):
    """g (the output of `mode`) zero-padded to the 'full' output it is the centre of."""
    if mode == "full":
        return g
    for axis, (n1, n2) in enumerate(zip(s1, s2)):
        full, out = n1 + n2 - 1, g.shape[axis]
        before = (full - out) // 2                      # SciPy's _centered
        after = full - out - before
        parts = []
        if before:
            parts.append(tg.zeros(g.shape[:axis] + (before,) + g.shape[axis + 1:],
                                  dtype=g.dtype, device=g.device))
        parts.append(g)
        if after:
            parts.append(tg.zeros(g.shape[:axis] + (after,) + g.shape[axis + 1:],
                                  dtype=g.dtype, device=g.device))
        if len(parts) > 1:
            g = tg.concatenate(parts, axis=axis)
    return g


def _convolve_vjp(g, ans, in1, in2, mode="full"):
    # full[n] = sum_k in1[k] in2[n - k]: d/d in1[k] = sum_n g[n] in2[n - k], the 'valid'
    # convolution of g (in the full output) with in2 flipped; likewise for in2.
    gf = _into_full(g, in1.shape, in2.shape, mode)
    return (tg.scipy_signal_convolve(gf, _flip(in2), mode="valid") if _needs_grad(in1) else None,
            tg.scipy_signal_convolve(gf, _flip(in1), mode="valid") if _needs_grad(in2) else None)


def _convolve_jvp(t, ans, in1, in2, mode="full"):
    # Bilinear: the op applied with one tangent at a time, each in its own position (mode
    # 'same' is relative to in1, so the order matters).
    t1, t2 = t
    terms = [tg.scipy_signal_convolve(t1, in2, mode=mode) if t1 is not None else None,
             tg.scipy_signal_convolve(in1, t2, mode=mode) if t2 is not None else None]
    terms = [v for v in terms if v is not None]
    if not terms:
        return tg.zeros_like(ans)
    return terms[0] if len(terms) == 1 else terms[0] + terms[1]


def convolve(in1, in2, mode="full", method="auto"):
    """``scipy.signal.convolve``: the N-D convolution of in1 and in2 (same number of
    dimensions), with ``mode`` 'full', 'same' (the size of in1, centred) or 'valid'.
    Differentiable in both inputs; ``method`` is ignored (always direct)."""
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"convolve: method must be 'auto', 'direct' or 'fft', got {method!r}")
    return tg.scipy_signal_convolve(in1, in2, mode=mode)


def correlate(in1, in2, mode="full", method="auto"):
    """``scipy.signal.correlate`` for real inputs: ``convolve(in1, in2 flipped)``.

    >>> import tapegrad as tg
    >>> tg.scipy.signal.correlate(tg.tensor([1.0, 2.0, 3.0]), tg.tensor([0.0, 1.0]), mode="valid")
    tensor([2., 3.])
    """
    if not isinstance(in2, tg.Tensor):
        in2 = tg.tensor(np.asarray(in2))
    return convolve(in1, _flip(in2), mode=mode, method=method)


def register(registry):
    """Register this module's op (called by the plugin's hook)."""
    draw = Draw(seed=17)
    n = draw.normal
    registry.register_op(
        "scipy_signal_convolve", kernels={"cpu": _convolve_kernel}, vjp=_convolve_vjp,
        jvp=_convolve_jvp, batch=_convolve_batch,
        method=False, save_ans=False,
        samples=[(n(5), n(3)), tg.Sample(n(6), n(3), mode="same"),
                 tg.Sample(n(6), n(4), mode="valid"), tg.Sample(n(3), n(5), mode="same"),
                 tg.Sample(n(3), n(5), mode="valid"), (n(3, 4), n(2, 2)),
                 tg.Sample(n(4, 5), n(3, 2), mode="same"),
                 tg.Sample(n(4, 5), n(2, 3), mode="valid"),
                 tg.Sample(n(2, 3, 3), n(2, 2, 1), mode="same")],
        doc="scipy.signal.convolve(in1, in2, mode='full'), computed directly: the N-D "
            "convolution (same number of dimensions), 'same' the size of in1 centred, "
            "'valid' where the inputs overlap fully. The gradient of each input is the "
            "'valid' convolution of g (zero-padded to the 'full' output) with the other "
            "input flipped.")
    registry.register_function(
        "scipy_signal_correlate", correlate, method=False,
        samples=[(n(5), n(3)), tg.Sample(n(4, 5), n(3, 2), mode="same"),
                 tg.Sample(n(6), n(4), mode="valid")])
