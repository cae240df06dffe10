"""Grad mode and anomaly mode switches: context managers that are also decorators.

The state lives in context variables (tapegrad._engine.GRAD_ENABLED / ANOMALY_ENABLED),
so it is per thread and per asyncio task, and each switch restores exactly the value it
replaced when it exits.
"""

import functools
import inspect

from ._engine import ANOMALY_ENABLED, GRAD_ENABLED, _GradSwitchCore, anomaly_blocks


class _Switch:
    """Sets `var` to a value for the duration of a with-block or a decorated call."""

    _var = GRAD_ENABLED

    def __init__(self, value):
        self._value = bool(value)
        self._tokens = []

    def __enter__(self):
        self._tokens.append(self._var.set(self._value))
        return self

    def __exit__(self, *exc):
        self._var.reset(self._tokens.pop())
        return False

    def _fresh(self):
        return type(self).__new__(type(self)).__init_copy(self)

    def __init_copy(self, other):
        self._value = other._value
        self._tokens = []
        return self

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            return self._wrap_generator(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            # A fresh switch per call: one decorated function may run in many threads.
            with self._fresh():
                return fn(*args, **kwargs)
        return wrapper

    def _wrap_generator(self, fn):
        # NOTE: the mode is set only while the generator's own code runs (each send, throw
        # and close) and restored while it is suspended, so the caller's code between two
        # `next()`s keeps its own mode. throw() and close() must be forwarded, not raised
        # at our `yield`: the generator may handle them (torch's _wrap_generator).
        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            gen = fn(*args, **kwargs)
            try:
                with self._fresh():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self._fresh():
                            gen.close()
                        raise
                    except BaseException as exc:  # noqa: BLE001 - forwarded to the generator
                        with self._fresh():
                            response = gen.throw(exc)
                    else:
                        with self._fresh():
                            response = gen.send(request)
            except StopIteration as stop:
                return stop.value
        return gen_wrapper


class no_grad(_GradSwitchCore, _Switch):
    """Disable recording: ops inside build no graph. Context manager or decorator.

    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0], requires_grad=True)
    >>> with tg.no_grad():
    ...     y = x + 1
    >>> y.requires_grad
    False
    """

    # NOTE: __init__, __enter__ and __exit__ are _GradSwitchCore's, in C (no Python frame
    # per `with tg.no_grad():`, which an optimizer step opens once per step); the
    # decorator forms (__call__, _fresh) are _Switch's. Do not define them here: a Python
    # method would put the frames back.


class enable_grad(_Switch):
    """Enable recording (inside a no_grad block). Context manager or decorator.

    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0], requires_grad=True)
    >>> with tg.no_grad():
    ...     with tg.enable_grad():
    ...         y = x + 1
    >>> y.requires_grad
    True
    """

    def __init__(self):
        super().__init__(True)


class inference_mode(_Switch):
    """Like no_grad (ops build no graph); tapegrad has no separate inference tensors.

    >>> import tapegrad as tg
    >>> with tg.inference_mode():
    ...     tg.is_grad_enabled()
    False
    """

    def __init__(self, mode=True):
        super().__init__(not mode)


class set_grad_enabled(_Switch):
    """Set grad mode: called plainly it sets the mode for the current thread/task; as a
    context manager or decorator it restores the previous mode afterwards.

    >>> import tapegrad as tg
    >>> with tg.set_grad_enabled(False):
    ...     tg.is_grad_enabled()
    False
    >>> tg.is_grad_enabled()
    True
    """

    def __init__(self, mode):
        super().__init__(mode)
        # Takes effect at once (torch semantics), so plain calls work too.
        self._immediate = GRAD_ENABLED.set(self._value)

    def __enter__(self):
        if self._immediate is not None:
            self._tokens.append(self._immediate)
            self._immediate = None
            return self
        return super().__enter__()

    def __call__(self, fn):
        if self._immediate is not None:
            GRAD_ENABLED.reset(self._immediate)
            self._immediate = None
        return super().__call__(fn)

    def _fresh(self):
        fresh = _Switch.__new__(_Switch)
        _Switch.__init__(fresh, self._value)
        return fresh


class detect_anomaly(_Switch):
    """Record where each node is created and raise, naming the op and that line, when a
    backward produces NaN or inf. Slow: for debugging. Context manager or decorator.

    >>> import tapegrad as tg
    >>> with tg.detect_anomaly():
    ...     tg.is_anomaly_enabled()
    True
    """

    _var = ANOMALY_ENABLED

    def __init__(self, mode=True):
        super().__init__(mode)

    def __enter__(self):
        anomaly_blocks(1)
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            anomaly_blocks(-1)


def is_anomaly_enabled():
    return ANOMALY_ENABLED.get()
