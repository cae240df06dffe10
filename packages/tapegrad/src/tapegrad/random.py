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

from . import _engine
from ._engine import get_device, get_tracer, new_tensor


def _shape(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def _draw(kind, shape, dtype, device, requires_grad, **params):
    dev = get_device(device)
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"random.{kind}: dtype must be a floating-point type, got {dtype}")
    shape = _shape(shape)
    arr = dev.random(kind, shape, dtype, **params)
    tracer = get_tracer()
    if tracer is not None:
        # tg.compile draws fresh numbers on every replay instead of baking these in.
        tracer.random(dev, kind, shape, dtype, params, arr)
    return new_tensor(arr, dev, requires_grad)


def rand(*shape, dtype=np.float64, device=None, requires_grad=False):
    """Uniform samples in [0, 1): ``tg.random.rand(2, 3)`` or ``rand((2, 3))``.

    >>> import tapegrad as tg
    >>> tg.random.rand(2, 3).shape
    (2, 3)
    """
    return _draw("uniform", shape, dtype, device, requires_grad, low=0.0, high=1.0)


def randn(*shape, dtype=np.float64, device=None, requires_grad=False):
    """Standard normal samples: ``tg.random.randn(4)``.

    >>> import tapegrad as tg
    >>> tg.random.randn(4, dtype=tg.float32).dtype
    dtype('float32')
    """
    return _draw("normal", shape, dtype, device, requires_grad, loc=0.0, scale=1.0)


def uniform(low=0.0, high=1.0, size=(), dtype=np.float64, device=None, requires_grad=False):
    """Uniform samples in [low, high), as numpy.random.Generator.uniform."""
    return _draw("uniform", (size,) if isinstance(size, int) else (tuple(size),), dtype,
                 device, requires_grad, low=float(low), high=float(high))


def normal(loc=0.0, scale=1.0, size=(), dtype=np.float64, device=None, requires_grad=False):
    """Normal samples, as numpy.random.Generator.normal."""
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
