"""Complex numbers (issue 18): the parts of a complex tensor, its conjugate and angle,
building one from two real tensors, and NumPy's complex predicates.

Every rule follows PyTorch's convention (docs/autograd.md, "Complex numbers"): for a real
loss L of z = x + iy the gradient is ``dL/dx + i dL/dy``, and a rule of s = f(z) returns
``conj(g) * ds/dz̄ + g * conj(ds/dz)`` for its output's cotangent g. ``tg.real`` is the
core's (the engine uses it to give a real input the real part of a complex gradient).

>>> import numpy as np, tapegrad as tg
>>> z = tg.tensor(np.array([3 + 4j, 1 - 1j]), requires_grad=True)
>>> loss = (tg.abs(z) ** 2).sum()          # |z|^2: its gradient is 2z
>>> loss.backward()
>>> z.grad
tensor([6.+8.j, 2.-2.j], dtype=complex128)
"""

import math

import numpy as np
import tapegrad as tg

_DEG_PER_RAD = 180.0 / math.pi


def _conj_vjp(g, ans, x):
    return (tg.conj(g),)


def _imag_vjp(g, ans, x):
    # d Im(z) = Im(dz): the real cotangent g is the gradient 1j * g; a real x has
    # imag(x) == 0, a constant
    if x.dtype.kind != "c":
        return (tg.zeros_like(g),)
    return (g * 1j,)


def _imag_jvp(t, ans, x):
    if t[0] is None or x.dtype.kind != "c":
        return tg.zeros_like(ans)
    return tg.imag(t[0])


def _imag_kernel(a):
    """np.imag: a view of a complex array's imaginary parts; zeros for a real array."""
    return np.imag(a)


def _angle_kernel(z, deg=False):
    return np.angle(z, deg)


def _angle_scale(deg):
    return _DEG_PER_RAD if deg else 1.0


def _angle_vjp(g, ans, z, deg=False):
    # angle = atan2(y, x): d/dx = -y/|z|^2, d/dy = x/|z|^2, so grad = g * 1j z / |z|^2
    # (PyTorch's angle_backward), 0 at 0; a real z has angle 0 or pi: gradient 0
    if z.dtype.kind != "c":
        return (tg.zeros_like(g),)
    r2 = tg.real(z * tg.conj(z))
    return (g * _angle_scale(deg) * (z * 1j) / tg.where(r2 == 0, 1, r2),)


def _angle_jvp(t, ans, z, deg=False):
    if t[0] is None or z.dtype.kind != "c":
        return tg.zeros_like(ans)
    r2 = tg.real(z * tg.conj(z))
    return tg.imag(tg.conj(z) * t[0]) * _angle_scale(deg) / tg.where(r2 == 0, 1, r2)


_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64),
               np.dtype(np.float64): np.dtype(np.complex128)}


def _complex_kernel(real, imag):
    real, imag = np.asarray(real), np.asarray(imag)
    if real.dtype != imag.dtype or real.dtype not in _COMPLEX_OF:
        # torch.complex's rule: no silent promotion of mixed or integer parts
        raise TypeError(
            f"complex: expected real and imag to be both float32 or both float64 (as "
            f"torch.complex), got {real.dtype} and {imag.dtype}; convert them with "
            f".astype() first")
    out = np.empty(np.broadcast_shapes(real.shape, imag.shape), _COMPLEX_OF[real.dtype])
    out.real = real
    out.imag = imag
    return out


def _complex_vjp(g, ans, real, imag):
    return (tg.real(g), tg.imag(g))


def _complex_jvp(t, ans, real, imag):
    tr, ti = t
    zero = tg.zeros_like(tg.real(ans))
    return tg.complex(zero + tr if tr is not None else zero, zero + ti if ti is not None else zero)


def real_if_close(a, tol=100):
    """`a`'s real part if every imaginary part is below `tol` machine epsilons (`tol` > 1)
    or `tol` itself (`tol` <= 1), else `a` unchanged, as numpy.real_if_close. The result's
    dtype depends on the values: it reads them (a real part is differentiable as
    ``tg.real``).

    >>> import numpy as np, tapegrad as tg
    >>> tg.real_if_close(tg.tensor(np.array([2.1 + 4e-14j, 5.2 + 3e-15j])))
    tensor([2.1, 5.2])
    """
    if not isinstance(a, tg.Tensor):
        a = tg.asarray(a)
    if a.dtype.kind != "c":
        return a
    if tol > 1:
        tol = np.finfo(a.dtype).eps * tol
    if bool(np.all(np.abs(np.imag(a.detach().numpy())) < tol)):
        return tg.real(a)
    return a


def iscomplexobj(x):
    """Whether x has a complex dtype (not whether any value has an imaginary part), as
    numpy.iscomplexobj.

    >>> import numpy as np, tapegrad as tg
    >>> tg.iscomplexobj(tg.tensor(np.array([1 + 0j]))), tg.iscomplexobj(tg.ones(2))
    (True, False)
    """
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return bool(np.iscomplexobj(x))
    return np.dtype(dtype).kind == "c"


def register(registry, draw):
    """Register this module's ops and functions; called by ``ops.tapegrad_register_ops``."""
    def cx(*shape):
        return draw.normal(*shape) + 1j * draw.normal(*shape)

    conj_op = registry.register_op(
        "conj", kernels={"cpu": np.conjugate}, vjp=_conj_vjp, jvp="linear",
        batch="elementwise", complex=True, save_inputs=(False,), save_ans=False,
        samples=[(draw.normal(3, 4),), (cx(3, 4),), (cx(),)],
        doc="The complex conjugate, elementwise (x itself, copied, for real x); as "
            "numpy.conj. Its gradient is conj(g).\n\n"
            "    >>> import numpy as np, tapegrad as tg\n"
            "    >>> tg.conj(tg.tensor(np.array([1 + 2j]))).numpy()\n"
            "    array([1.-2.j])")
    registry.register_function("conjugate", conj_op, samples=[(cx(2, 3),)])
    registry.register_op(
        "imag", kernels={"cpu": _imag_kernel}, vjp=_imag_vjp, jvp=_imag_jvp,
        batch="elementwise", complex=True, view=True, method=False,
        save_ans=False,
        samples=[(cx(3, 4),), (cx(2, 1, 3),), (draw.normal(3),)],
        doc="The imaginary part of x (np.imag: a view of a complex x's imaginary parts; "
            "zeros for a real x). Its gradient is 1j * g. Also ``Tensor.imag``.\n\n"
            "    >>> import numpy as np, tapegrad as tg\n"
            "    >>> tg.imag(tg.tensor(np.array([1 + 2j, 3 - 1j]))).numpy()\n"
            "    array([ 2., -1.])")
    registry.register_op(
        "angle", kernels={"cpu": _angle_kernel}, vjp=_angle_vjp, jvp=_angle_jvp,
        batch="elementwise", complex=True, params=("deg",), save_ans=False,
        samples=[(cx(3, 4),), tg.Sample(cx(2, 3), deg=True), (draw.nonzero(4),)],
        doc="The argument of z in (-pi, pi] (degrees with deg=True), elementwise, as "
            "numpy.angle. The gradient is g * 1j z / |z|**2 (PyTorch's), 0 at 0; a real "
            "input's angle (0 or pi) has gradient 0.\n\n"
            "    >>> import numpy as np, tapegrad as tg\n"
            "    >>> tg.angle(tg.tensor(np.array([1j, -1.0 + 0j]))).numpy()\n"
            "    array([1.57079633, 3.14159265])")
    registry.register_op(
        "complex", kernels={"cpu": _complex_kernel}, vjp=_complex_vjp, jvp=_complex_jvp,
        batch="elementwise", complex=True, method=False,
        save_inputs=(False, False), save_ans=False,
        samples=[(draw.normal(3, 4), draw.normal(3, 4)), (draw.normal(3, 4), draw.normal(4)),
                 (draw.normal(2, 1, 3), draw.normal(4, 1))],
        doc="real + 1j * imag from two real tensors of one dtype (float32 -> complex64, "
            "float64 -> complex128), as torch.complex; other dtypes are refused. The "
            "gradients are real(g) and imag(g).\n\n"
            "    >>> import tapegrad as tg\n"
            "    >>> tg.complex(tg.tensor([1.0, 2.0]), tg.tensor([3.0, -1.0])).numpy()\n"
            "    array([1.+3.j, 2.-1.j])")
    registry.register_function(
        "real_if_close", real_if_close, method=False,
        samples=[(draw.normal(3),), (draw.normal(3) + 1e-15j,), (cx(3),)])
    registry.register_function("iscomplexobj", iscomplexobj, method=False, differentiable=(),
                               samples=[(cx(2),)])
