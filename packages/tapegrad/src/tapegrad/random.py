"""Random numbers on any device, from a seedable generator per device.

Every device owns its generator (the ``cpu`` one is a ``numpy.random.Generator``) and
exposes its state through the device interface (``get_rng_state``/``set_rng_state``), so
checkpointing can replay a segment with the same random numbers.

>>> import tapegrad as tg
>>> tg.manual_seed(0)
>>> a = tg.random.rand(3)
>>> tg.manual_seed(0)
>>> tg.random.rand(3).tolist() == a.tolist()
True
"""

import numpy as np

from . import _batching, _engine
from ._creation import default_float_dtype
from ._engine import get_device, get_tracer, new_tensor


def _shape(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def _draw(kind, shape, dtype, device, requires_grad, **params):
    dev = get_device(device)
    dtype = default_float_dtype() if dtype is None else np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"random.{kind}: dtype must be a floating-point type, got {dtype}")
    shape = _shape(shape)
    levels = _batching.random_levels(f"random.{kind}") if _engine.forward_active() else ()
    if levels:
        # vmap(..., randomness="different"): each example draws its own numbers
        shape = _batching.random_shape(levels, shape)
    arr = dev.random(kind, shape, dtype, **params)
    tracer = get_tracer()
    if tracer is not None:
        # tg.compile draws fresh numbers on every replay instead of baking these in.
        tracer.random(dev, kind, shape, dtype, params, arr)
    out = new_tensor(arr, dev, requires_grad)
    return _batching.wrap_random(out, levels) if levels else out


def rand(*shape, dtype=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1): ``tg.random.rand(2, 3)`` or ``rand((2, 3))``, of the
    default dtype (tg.get_default_dtype()) unless ``dtype=``.

    >>> import tapegrad as tg
    >>> tg.random.rand(2, 3).shape
    (2, 3)
    """
    return _draw("uniform", shape, dtype, device, requires_grad, low=0.0, high=1.0)


def randn(*shape, dtype=None, device=None, requires_grad=False):
    """Standard normal samples: ``tg.random.randn(4)``, of the default dtype unless
    ``dtype=``.

    >>> import tapegrad as tg
    >>> tg.random.randn(4, dtype=tg.float32).dtype
    dtype('float32')
    """
    return _draw("normal", shape, dtype, device, requires_grad, loc=0.0, scale=1.0)


def uniform(low=0.0, high=1.0, size=(), dtype=None, device=None, requires_grad=False):
    """Uniform samples in [low, high), as numpy.random.Generator.uniform (the default
    dtype unless ``dtype=``).

    >>> import tapegrad as tg
    >>> tg.random.uniform(-1.0, 1.0, (2, 3)).shape
    (2, 3)
    """
    return _draw("uniform", (size,) if isinstance(size, int) else (tuple(size),), dtype,
                 device, requires_grad, low=float(low), high=float(high))


def normal(loc=0.0, scale=1.0, size=(), dtype=None, device=None, requires_grad=False):
    """Normal samples, as numpy.random.Generator.normal (the default dtype unless
    ``dtype=``).

    >>> import tapegrad as tg
    >>> tg.random.normal(0.0, 2.0, 5, dtype=tg.float32).dtype
    dtype('float32')
    """
    return _draw("normal", (size,) if isinstance(size, int) else (tuple(size),), dtype,
                 device, requires_grad, loc=float(loc), scale=float(scale))


def manual_seed(seed):
    """Seed the generator of every registered device.

    >>> import tapegrad as tg
    >>> tg.manual_seed(42)
    """
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"manual_seed: the seed must be a non-negative integer, got {seed}")
    tracer = get_tracer()
    if tracer is not None:
        # tg.compile seeds again at this point of every replay.
        tracer.rng_seeded(seed)
    for dev in _engine.devices_table().values():
        dev.manual_seed(seed)


def get_state(devices=None):
    """The generator state of each device (a dict keyed by device name)."""
    names = devices or list(_engine.devices_table())
    state = {name: get_device(name).get_rng_state() for name in names}
    tracer = get_tracer()
    if tracer is not None:
        # tg.compile saves the states again at this point of every replay (checkpoint's
        # rerun restores them, and must see the replay's draws, not the recording's).
        tracer.rng_state_taken(state)
    return state


def set_state(state):
    """Restore states returned by get_state()."""
    tracer = get_tracer()
    if tracer is not None:
        tracer.rng_state_restored(state)
    for name, value in state.items():
        get_device(name).set_rng_state(value)


# Discrete draws and *_like creation. NOTE: every one is built from `rand` (a uniform
# draw recorded by tg.compile as fresh per replay) and tapegrad ops, so it runs on every
# device with a generator and draws new numbers on each compiled replay. Checks on the
# *values* of probs/p/logits go through compile_check, so that a replay checks each
# call's values too (a zero-sum row would otherwise give index 0 silently).

def _check_values(check, tensor):
    from ._compile import compile_check     # NOTE: lazily: _compile imports this module
    compile_check(check, tensor)

def _Tensor():
    from ._tensor import Tensor     # NOTE: lazily: _tensor imports this module
    return Tensor


def _like(x, dtype):
    if not isinstance(x, _Tensor()):
        x = new_tensor(np.asarray(x), get_device(None), False)
    return x, (x.dtype if dtype is None else np.dtype(dtype))


def rand_like(input, dtype=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1) with ``input``'s shape, and its dtype and device unless
    given (torch.rand_like).

    Example (needs the first-party plugins)::

        tg.random.rand_like(tg.zeros((2, 3), dtype=tg.float32)).dtype
        # -> dtype('float32')
    """
    x, dtype = _like(input, dtype)
    return rand(x.shape, dtype=dtype, device=device or x.device, requires_grad=requires_grad)


def randn_like(input, dtype=None, device=None, requires_grad=False):
    """Standard normal samples with ``input``'s shape, and its dtype and device unless given
    (torch.randn_like)."""
    x, dtype = _like(input, dtype)
    return randn(x.shape, dtype=dtype, device=device or x.device, requires_grad=requires_grad)


def _size(size, name):
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        size = (size,)
    try:
        size = tuple(int(s) for s in size)
    except TypeError:
        raise TypeError(f"random.{name}: size must be an int or a tuple of ints, "
                        f"got {size!r}") from None
    if any(s < 0 for s in size):
        raise ValueError(f"random.{name}: size must not have negative entries, got {size}")
    return size


def _uniform_ints(n, size, device):
    """Integers uniform in [0, n) as int64, from one float64 uniform draw per integer."""
    import tapegrad as tg
    u = rand(size, dtype=np.float64, device=device)
    # NOTE: u * n can round up to n when u is the largest double below 1; clamp.
    return tg.minimum(tg.floor(u * float(n)), float(n - 1)).astype(np.int64)


def randint(low, high=None, size=None, dtype=np.int64, device=None):
    """Integers uniform in [low, high) (numpy.random.Generator.integers, torch.randint):
    ``randint(10, size=(3,))`` draws from [0, 10), ``randint(5, 10, (2, 2))`` from [5, 10).
    ``size=None`` gives a 0-d tensor. The result is int64 unless ``dtype`` says otherwise.
    A range wider than 2**53 is refused (each integer comes from one float64 uniform).

    Example (needs the first-party plugins)::

        v = tg.random.randint(5, 10, (100,)).numpy()
        bool(v.min() >= 5 and v.max() < 10), v.dtype
        # -> (True, dtype('int64'))
    """
    if high is None:
        low, high = 0, low
    low, high = int(low), int(high)
    size = _size(size, "randint")
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        raise TypeError(f"random.randint: dtype must be an integer type, got {dtype}")
    if high <= low:
        raise ValueError(f"random.randint: high must be greater than low, got low={low}, "
                         f"high={high}")
    if high - low > 2 ** 53:
        raise ValueError(f"random.randint: the range high - low = {high - low} is wider than "
                         f"2**53, which this generator cannot draw uniformly")
    if not (np.iinfo(dtype).min <= low and high - 1 <= np.iinfo(dtype).max):
        raise ValueError(f"random.randint: [{low}, {high}) does not fit in {dtype}")
    out = _uniform_ints(high - low, size, device)
    if low:
        out = out + low
    return out.astype(dtype)


def randint_like(input, low=0, high=None, dtype=None, device=None):
    """Integers uniform in [low, high) with ``input``'s shape (torch.randint_like):
    ``randint_like(x, 10)`` or ``randint_like(x, 5, 10)``. The dtype is input's unless
    given (a float input gives whole-valued floats, as torch)."""
    import tapegrad as tg
    x, dtype = _like(input, dtype)
    if high is None:
        low, high = 0, low
    out = randint(low, high, x.shape, device=device or x.device)
    return out if dtype == np.int64 else out.astype(dtype)


def permutation(x, device=None):
    """A random permutation (numpy.random.Generator.permutation, torch.randperm):
    ``permutation(n)`` gives 0..n-1 shuffled (int64); ``permutation(tensor)`` gives a
    shuffled copy along its first axis (the result stays on the tape: it is an index).

    Example (needs the first-party plugins)::

        sorted(tg.random.permutation(5).tolist())
        # -> [0, 1, 2, 3, 4]
    """
    import tapegrad as tg
    if isinstance(x, (int, np.integer)):
        n = int(x)
        if n < 0:
            raise ValueError(f"random.permutation: n must be non-negative, got {n}")
        # argsort of iid uniforms is a uniform permutation (ties have probability ~n²/2**53).
        return tg.argsort(rand(n, dtype=np.float64, device=device), kind="stable")
    if not isinstance(x, _Tensor()):
        x = tg.tensor(np.asarray(x), device=device)
    if x.ndim == 0:
        raise ValueError("random.permutation: x must be an int or have at least one axis, "
                         "got a 0-d tensor")
    return x[permutation(x.shape[0], device=x.device)]


def _check_unit_interval(vals):
    if not np.all((vals >= 0) & (vals <= 1)):
        raise ValueError("random.bernoulli: p must be in [0, 1] (and not nan)")


def bernoulli(p, size=None, dtype=None, device=None):
    """0/1 samples that are 1 with probability ``p`` (torch.bernoulli): ``p`` a tensor of
    probabilities (the result has its shape and floating dtype, as torch) or a float with
    ``size``. Probabilities outside [0, 1] raise ValueError.

    Example (needs the first-party plugins)::

        tg.random.bernoulli(tg.tensor([0.0, 1.0])).tolist()
        # -> [0.0, 1.0]
    """
    import tapegrad as tg
    if isinstance(p, _Tensor()):
        if size is not None:
            raise TypeError("random.bernoulli: size is only for a float p; a tensor p "
                            "gives the shape")
        if p.dtype.kind != "f":
            raise TypeError(f"random.bernoulli: p must be floating-point, got {p.dtype}")
        pv = p.detach()
        shape, dtype, device = p.shape, dtype or p.dtype, device or p.device
        _check_values(_check_unit_interval, pv)
    else:
        pv = float(p)
        shape, dtype = _size(size, "bernoulli"), dtype or default_float_dtype()
        _check_unit_interval(np.asarray(pv))
    return (rand(shape, dtype=np.float64, device=device) < pv).astype(dtype)


def multinomial(probs, num_samples, replacement=False):
    """Category indices drawn from the rows of ``probs`` (torch.multinomial): ``probs`` is
    1-D (categories) or 2-D (one distribution a row), non-negative, not necessarily
    normalised; the result is int64 of shape ``(num_samples,)`` or ``(rows, num_samples)``.

    With ``replacement=False`` (torch's default) each row draws distinct categories, each
    draw with probability proportional to the weights not yet drawn: the row's categories
    ordered by ``E / p`` with ``E`` iid exponential (the exponential race, exact for this
    scheme); a row needs at least ``num_samples`` non-zero weights. With replacement it
    inverts the row's cumulative distribution; it holds a ``rows × num_samples ×
    categories`` boolean array while it does. Zero-weight categories are never drawn.

    Errors (ValueError, as torch's RuntimeError): probs not 1-D/2-D, no categories,
    negative, inf or nan weights, a row summing to zero, num_samples < 1, and without
    replacement num_samples greater than the categories (or the non-zero weights).

    Example (needs the first-party plugins)::

        tg.manual_seed(0)
        sorted(tg.random.multinomial(tg.tensor([1.0, 0.0, 2.0, 3.0]), 3).tolist())
        # -> [0, 2, 3]
    """
    import tapegrad as tg
    if not isinstance(probs, _Tensor()):
        probs = tg.tensor(np.asarray(probs, dtype=np.float64))
    if probs.dtype.kind != "f":
        raise TypeError(f"random.multinomial: probs must be floating-point, got {probs.dtype}")
    if probs.ndim not in (1, 2):
        raise ValueError(f"random.multinomial: probs must be 1-D or 2-D, got shape "
                         f"{probs.shape}")
    if probs.shape[-1] == 0:
        raise ValueError(f"random.multinomial: probs has no categories (shape {probs.shape})")
    num_samples = int(num_samples)
    if num_samples < 1:
        raise ValueError(f"random.multinomial: num_samples must be positive, got {num_samples}")
    p2 = probs.detach().astype(np.float64)
    if p2.ndim == 1:
        p2 = p2.reshape(1, -1)
    rows, cats = p2.shape
    if not replacement and num_samples > cats:
        raise ValueError(f"random.multinomial: cannot draw {num_samples} samples from "
                         f"{cats} categories without replacement")

    def check(vals):
        if not np.all(np.isfinite(vals)) or np.any(vals < 0):
            raise ValueError("random.multinomial: probs must be finite and non-negative")
        if np.any(vals.sum(axis=1) <= 0):
            raise ValueError("random.multinomial: a row of probs sums to zero")
        if not replacement and np.any((vals > 0).sum(axis=1) < num_samples):
            raise ValueError(f"random.multinomial: a row of probs has fewer than "
                             f"{num_samples} non-zero weights, needed without replacement")

    _check_values(check, p2)
    if not replacement:
        e = -tg.log(1.0 - rand((rows, cats), dtype=np.float64, device=probs.device))
        key = tg.where(p2 > 0, e / tg.where(p2 > 0, p2, 1.0), np.inf)
        out = tg.argsort(key, axis=-1)[:, :num_samples]
    else:
        c = tg.cumsum(p2, axis=-1)
        # NOTE: dividing by the row's own total makes every entry from the last non-zero
        # weight on exactly 1.0, which u < 1 never reaches: trailing zero weights stay out.
        cdf = c / c[:, -1:]
        u = rand((rows, num_samples), dtype=np.float64, device=probs.device)
        out = (cdf[:, None, :-1] <= u[:, :, None]).sum(axis=-1).astype(np.int64)
    return out.reshape(num_samples) if probs.ndim == 1 else out


def categorical(logits, num_samples=1, replacement=True):
    """Category indices drawn from unnormalised log-probabilities (the rows of a 1-D or
    2-D ``logits``): ``multinomial(softmax(logits, -1), num_samples, replacement)``, same
    shapes and errors; ``-inf`` logits are never drawn. Note the default ``replacement``
    is True here (torch.distributions.Categorical draws with replacement).

    Example (needs the first-party plugins)::

        tg.random.categorical(tg.tensor([[0.0, -float("inf")]]), 2).tolist()
        # -> [[0, 0]]
    """
    import tapegrad as tg
    if not isinstance(logits, _Tensor()):
        logits = tg.tensor(np.asarray(logits, dtype=np.float64))
    if logits.dtype.kind != "f":
        raise TypeError(f"random.categorical: logits must be floating-point, got "
                        f"{logits.dtype}")
    if logits.ndim not in (1, 2) or logits.shape[-1] == 0:
        raise ValueError(f"random.categorical: logits must be 1-D or 2-D with at least one "
                         f"category, got shape {logits.shape}")
    lv = logits.detach()

    def check(vals):
        if np.any(np.isnan(vals)) or np.any(vals == np.inf):
            raise ValueError("random.categorical: logits must not be nan or +inf")
        if np.any(np.all(vals == -np.inf, axis=-1)):
            raise ValueError("random.categorical: a row of logits is all -inf")

    _check_values(check, lv)
    p = tg.exp(lv - tg.max(lv, axis=-1, keepdims=True))
    return multinomial(p, num_samples, replacement)
