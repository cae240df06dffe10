"""``tg.nn.init``: PyTorch's ``torch.nn.init``, filling a tensor IN PLACE.

Every function writes into the tensor it is given (under ``tg.no_grad()``, so a Parameter
stays the same leaf object an optimizer holds), bumps its version, and returns it. The
random ones draw from ``tg.random`` on the tensor's device, so ``tg.manual_seed`` makes
them reproducible. Fans follow PyTorch: for a weight of shape ``(out, in, *kernel)``,
``fan_in = in * prod(kernel)`` and ``fan_out = out * prod(kernel)``.

>>> import tapegrad as tg
>>> w = tg.nn.Parameter(tg.zeros((4, 3)))
>>> tg.nn.init.xavier_uniform_(w) is w
True
>>> bool((abs(w) <= (6 / 7) ** 0.5).numpy().all())
True
>>> tg.nn.init.calculate_gain("relu") == 2 ** 0.5
True
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import tapegrad as tg

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "eye_",
    "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
    "trunc_normal_", "orthogonal_",
]

_LINEAR_FNS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
               "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for `nonlinearity` (PyTorch's table): 1 for linear, conv*,
    conv_transpose* and sigmoid; 5/3 for tanh; sqrt(2) for relu; sqrt(2 / (1 + slope**2))
    for leaky_relu (slope `param`, default 0.01); 3/4 for selu.

    >>> import tapegrad as tg
    >>> tg.nn.init.calculate_gain("tanh")
    1.6666666666666667
    """
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, numbers.Real):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        # NOTE: PyTorch's value (chosen for self-normalising networks), not sqrt(...).
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight of shape (out, in, *receptive_field), as PyTorch."""
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError(f"Fan in and fan out can not be computed for a tensor with fewer "
                         f"than 2 dimensions (got shape {shape})")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower() if isinstance(mode, str) else mode
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} not supported, please use one of 'fan_in', 'fan_out'")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _check_tensor(tensor, fn):
    if not isinstance(tensor, tg.Tensor):
        raise TypeError(f"nn.init.{fn}: expected a tapegrad Tensor, got {type(tensor).__name__}")
    return tensor


def _write(tensor, value):
    with tg.no_grad():
        tensor[...] = value
    return tensor


def _draw(tensor, kind, fn, **params):
    _check_tensor(tensor, fn)
    if tensor.dtype.kind != "f":
        raise TypeError(f"nn.init.{fn}: the tensor must be floating point, got {tensor.dtype}")
    draw = tg.random.uniform if kind == "uniform" else tg.random.normal
    return draw(**params, size=tensor.shape, dtype=tensor.dtype, device=tensor.device)


def uniform_(tensor, a=0.0, b=1.0):
    """Fill `tensor` with samples of U(a, b)."""
    return _write(tensor, _draw(tensor, "uniform", "uniform_", low=a, high=b))


def normal_(tensor, mean=0.0, std=1.0):
    """Fill `tensor` with samples of N(mean, std**2)."""
    return _write(tensor, _draw(tensor, "normal", "normal_", loc=mean, scale=std))


def constant_(tensor, val):
    """Fill `tensor` with the value `val`."""
    _check_tensor(tensor, "constant_")
    return _write(tensor, val)


def zeros_(tensor):
    """Fill `tensor` with zeros."""
    return constant_(tensor, 0)


def ones_(tensor):
    """Fill `tensor` with ones."""
    return constant_(tensor, 1)


def eye_(tensor):
    """Fill the 2-D `tensor` with the identity matrix (ones on the diagonal; rectangular
    shapes as ``numpy.eye(rows, cols)``)."""
    _check_tensor(tensor, "eye_")
    if tensor.ndim != 2:
        raise ValueError(f"nn.init.eye_: only 2-D tensors are supported, got shape {tensor.shape}")
    return _write(tensor, tg.asarray(np.eye(*tensor.shape, dtype=tensor.dtype), device=tensor.device))


def dirac_(tensor, groups=1):
    """Fill the 3-, 4- or 5-D convolution weight `tensor` with the Dirac delta, so that the
    convolution keeps the identity of its input channels (per group)."""
    _check_tensor(tensor, "dirac_")
    shape = tuple(tensor.shape)
    if len(shape) not in (3, 4, 5):
        raise ValueError(f"nn.init.dirac_: only 3, 4 or 5-D tensors are supported, got shape {shape}")
    if shape[0] % groups != 0:
        raise ValueError(f"nn.init.dirac_: dim 0 ({shape[0]}) must be divisible by groups ({groups})")
    per_group = shape[0] // groups
    arr = np.zeros(shape, dtype=tensor.dtype)
    center = tuple(s // 2 for s in shape[2:])
    for g in range(groups):
        for d in range(min(per_group, shape[1])):
            arr[(g * per_group + d, d) + center] = 1
    return _write(tensor, tg.asarray(arr, device=tensor.device))


def xavier_uniform_(tensor, gain=1.0):
    """Glorot uniform: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(_check_tensor(tensor, "xavier_uniform_"))
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return _write(tensor, _draw(tensor, "uniform", "xavier_uniform_", low=-a, high=a))


def xavier_normal_(tensor, gain=1.0):
    """Glorot normal: N(0, std**2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(_check_tensor(tensor, "xavier_normal_"))
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _write(tensor, _draw(tensor, "normal", "xavier_normal_", loc=0.0, scale=std))


def _kaiming_std(tensor, a, mode, nonlinearity):
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """He uniform: U(-bound, bound) with ``bound = gain * sqrt(3 / fan)``, gain from
    ``calculate_gain(nonlinearity, a)``, fan = fan_in or fan_out (`mode`). A tensor with
    no elements is left as it is (PyTorch warns and does the same).

    ``kaiming_uniform_(w, a=math.sqrt(5))`` is PyTorch's default for Linear and Conv
    weights: bound ``1 / sqrt(fan_in)``.
    """
    _check_tensor(tensor, "kaiming_uniform_")
    if tensor.size == 0:
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return _write(tensor, _draw(tensor, "uniform", "kaiming_uniform_", low=-bound, high=bound))


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """He normal: N(0, std**2) with ``std = gain / sqrt(fan)`` (see kaiming_uniform_)."""
    _check_tensor(tensor, "kaiming_normal_")
    if tensor.size == 0:
        return tensor
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    return _write(tensor, _draw(tensor, "normal", "kaiming_normal_", loc=0.0, scale=std))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """N(mean, std**2) truncated to [a, b] (the bounds are absolute values, as PyTorch).

    NOTE: drawn by rejection (normal draws from ``tg.random``, those outside [a, b] drawn
    again), not by PyTorch's inverse CDF, which needs erfinv (tapegrad-scipy, not a
    dependency of tapegrad-nn): the same distribution, other numbers than torch for one
    seed. An interval holding less than 1e-4 of the normal's mass is refused (rejection
    would take too long; PyTorch's answer there is inaccurate too).
    """
    _check_tensor(tensor, "trunc_normal_")
    if tensor.dtype.kind != "f":
        raise TypeError(f"nn.init.trunc_normal_: the tensor must be floating point, got "
                        f"{tensor.dtype}")
    if not a < b:
        raise ValueError(f"nn.init.trunc_normal_: a ({a}) must be smaller than b ({b})")
    if not std > 0:
        raise ValueError(f"nn.init.trunc_normal_: std must be positive, got {std}")

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    mass = norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std)
    if mass < 1e-4:
        raise ValueError(f"nn.init.trunc_normal_: [a, b] = [{a}, {b}] holds only {mass:.3g} of "
                         f"N({mean}, {std}**2); move the bounds towards the mean")
    n = tensor.size
    out = np.empty(n, dtype=np.float64)
    filled = 0
    while filled < n:
        want = n - filled
        k = int(want / mass * 1.1) + 16
        draw = tg.random.normal(mean, std, (k,), dtype=tensor.dtype, device=tensor.device)
        x = np.asarray(draw.numpy(), dtype=np.float64)
        x = x[(x >= a) & (x <= b)][:want]
        out[filled:filled + x.size] = x
        filled += x.size
    value = out.reshape(tensor.shape).astype(tensor.dtype)
    return _write(tensor, tg.asarray(value, device=tensor.device))


def orthogonal_(tensor, gain=1.0):
    """A (semi-)orthogonal matrix times `gain` (Saxe et al.), as PyTorch: the Q of the QR
    decomposition of a standard normal (rows, numel/rows) matrix, its columns' signs fixed
    by diag(R); tensors of more than 2 dimensions are treated as (shape[0], rest)."""
    _check_tensor(tensor, "orthogonal_")
    if tensor.ndim < 2:
        raise ValueError(f"nn.init.orthogonal_: only tensors with 2 or more dimensions are "
                         f"supported, got shape {tensor.shape}")
    if tensor.size == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.size // rows
    flat = _draw(tensor, "normal", "orthogonal_", loc=0.0, scale=1.0)
    # The decomposition runs on the host (a one-off, small matrix), in float64.
    m = np.asarray(flat.numpy(), dtype=np.float64).reshape(rows, cols)
    if rows < cols:
        m = m.T
    q, r = np.linalg.qr(m)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    q = (q * gain).reshape(tensor.shape).astype(tensor.dtype)
    return _write(tensor, tg.asarray(q, device=tensor.device))
