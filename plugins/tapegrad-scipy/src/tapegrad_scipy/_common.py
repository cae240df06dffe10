"""What every module of tapegrad-scipy shares: the kernel wrapper that keeps NumPy's
result dtype, the diagonal-JVP and binary-rule helpers and the seeded sample draws."""

import functools

import numpy as np
import tapegrad as tg


def scipy_kernel(fn, orders=0):
    """`fn` (a SciPy function) as a kernel whose float result has NumPy's dtype for the
    value arguments (all but the first `orders`, which are integer or real orders).

    NOTE: some SciPy functions compute in float64 where NumPy's promotion (Python numbers
    are "weak", NEP 50) keeps float32: ``xlogy(float32, 2.0)``, ``polygamma(1, float32)``,
    ``iv(int array, float32)``. tapegrad's dtype contract is NumPy's, so the result is cast
    back; an order argument never decides the dtype (as in torch.special.polygamma).
    """
    @functools.wraps(fn)
    def kernel(*args, **params):
        out = np.asarray(fn(*args, **params))
        want = np.result_type(*args[orders:])
        if want.kind != "f":
            want = np.dtype(np.float64)
        if out.dtype.kind == "f" and out.dtype != want:
            out = out.astype(want)
        return out
    return kernel


def diagonal_jvp(vjp, i=0):
    """The JVP of an elementwise op from its VJP: the Jacobian is diagonal, so the rule
    applied to the tangent of input `i` is the tangent of the output."""
    def jvp(t, ans, *inputs, **params):
        return vjp(t[i], ans, *inputs, **params)[i]
    return jvp


def binary_rules(name, dx, dy):
    """The (vjp, jvp) pair of a binary elementwise op from its two partials, each
    ``d(v, ans, x, y) = v * d ans / d input`` for a gradient or a tangent `v`: one
    expression per derivative, so the two modes share their masks and limits.

    NOTE: the JVP tests ``t[i] is None``, never ``tg.needs_grad``: in forward mode an input
    can carry a tangent without requiring grad.
    """
    def vjp(g, ans, x, y):
        return (dx(g, ans, x, y) if tg.needs_grad(x) else None,
                dy(g, ans, x, y) if tg.needs_grad(y) else None)

    def jvp(t, ans, x, y):
        # Each term has its input's shape broadcast with the other's: it broadcasts to ans.
        terms = [d(v, ans, x, y) for d, v in ((dx, t[0]), (dy, t[1])) if v is not None]
        if not terms:
            return tg.zeros_like(ans)
        out = terms[0] if len(terms) == 1 else terms[0] + terms[1]
        # NOTE: a Python-number input enters a partial as a float64 tensor (log(1.5) in
        # xlogy(x, 1.5)), which promotes a float32 tangent. The engine casts a VJP's
        # gradients back to their input's dtype; the tangent is cast to ans's here.
        return out if out.dtype == ans.dtype else out.astype(ans.dtype)
    vjp.__qualname__ = vjp.__name__ = f"{name}_vjp"     # readable tracebacks
    jvp.__qualname__ = jvp.__name__ = f"{name}_jvp"
    return vjp, jvp


def loop_fallback(name, inputs, batched, params):
    """vmap's exact per-example loop, for the inputs a batching rule does not cover."""
    from tapegrad._batching import _loop
    return _loop(tg.registry().ops[name], inputs, batched, params, None)


class Draw:
    """Seeded sample values: the same arrays every time the plugin registers."""

    def __init__(self, seed):
        self._rng = np.random.default_rng(seed)

    def uniform(self, lo, hi, *shape):
        return self._rng.uniform(lo, hi, shape)

    def normal(self, *shape):
        return self._rng.standard_normal(shape)

    def positive(self, *shape):
        return self._rng.uniform(0.5, 2.5, shape)

    def nonzero(self, *shape):
        return self._rng.choice([-1.0, 1.0], shape) * self._rng.uniform(0.3, 2.0, shape)

    def ints(self, lo, hi, *shape):
        return self._rng.integers(lo, hi, shape)

    def spd(self, n, jitter=1.0):
        a = self._rng.standard_normal((n, n))
        return a @ a.T / n + jitter * np.eye(n)
