"""A kernel's exception, re-raised by the engine with the op name and inputs added, keeps
its own type (np.linalg.LinAlgError, np.exceptions.AxisError, ...), so that a NumPy
user's ``except`` still catches it; the original stays as __cause__."""

import numpy as np
import pytest
import tapegrad as tg
from numpy._core._exceptions import UFuncTypeError


class TwoArgError(ValueError):
    """An exception that cannot be built from a message alone."""

    def __init__(self, what, where):
        super().__init__(f"{what} at {where}")


def _raise_two_arg(x):
    raise TwoArgError("bad", 3)


class Raisers:
    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        registry.register_op("err_inv", kernels={"cpu": np.linalg.inv}, nin=1)
        registry.register_op("err_sum", kernels={"cpu": np.sum}, nin=1, params=("axis",))
        registry.register_op("err_add", kernels={"cpu": np.add}, nin=2)
        registry.register_op("err_two", kernels={"cpu": _raise_two_arg}, nin=1)


@pytest.fixture(scope="module", autouse=True)
def raisers():
    name = tg.register_plugin(Raisers(), name="test-raisers")
    yield
    tg.unregister_plugin(name)


def test_linalg_error_keeps_its_type():
    with pytest.raises(np.linalg.LinAlgError, match=r"err_inv: Singular matrix") as info:
        tg.err_inv(tg.zeros((2, 2)))
    assert type(info.value) is np.linalg.LinAlgError
    assert "shape (2, 2) float64" in str(info.value)
    assert type(info.value.__cause__) is np.linalg.LinAlgError


def test_axis_error_keeps_its_type():
    with pytest.raises(np.exceptions.AxisError, match=r"err_sum: axis 3 is out of bounds") as info:
        tg.err_sum(tg.zeros((2, 3)), 3)
    assert type(info.value) is np.exceptions.AxisError
    assert "shape (2, 3)" in str(info.value)
    # the original keeps NumPy's attributes
    assert (info.value.__cause__.axis, info.value.__cause__.ndim) == (3, 2)


def test_ufunc_type_error_keeps_the_nearest_constructible_type():
    # NumPy raises its private _UFuncNoLoopError(ufunc, dtypes): not buildable from a
    # message, so its public base UFuncTypeError is used.
    with pytest.raises(UFuncTypeError, match=r"err_add: .*ufunc 'add'") as info:
        tg.err_add(np.array(["a"]), 1.0)
    assert "input 0" in str(info.value)
    assert isinstance(info.value.__cause__, UFuncTypeError)


def test_exception_without_a_message_constructor_falls_back_to_its_base():
    with pytest.raises(ValueError, match=r"err_two: bad at 3") as info:
        tg.err_two(tg.zeros(2))
    assert type(info.value) is ValueError
    assert type(info.value.__cause__) is TwoArgError


def test_setitem_error_keeps_its_type():
    x = tg.zeros((2, 3))
    with pytest.raises(IndexError, match=r"setitem: index 5 is out of bounds") as info:
        x[5] = 1.0
    assert type(info.value) is IndexError


class Prefixed:
    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        def kernel(x, text):
            raise ValueError(text)
        registry.register_op("err_named", kernels={"cpu": kernel}, nin=1, params=("text",))
        registry.register_op("_err_priv", kernels={"cpu": kernel}, nin=1, params=("text",))


@pytest.mark.parametrize("call,text,expected", [
    ("err_named", "err_named: names the op", "err_named: names the op (input 0:"),
    ("_err_priv", "_err_priv: names the op", "_err_priv: names the op (input 0:"),
    ("_err_priv", "err_priv: public spelling", "err_priv: public spelling (input 0:"),
    ("err_named", "a bare message", "err_named: a bare message (input 0:"),
])
def test_a_message_that_names_the_op_gets_no_second_prefix(call, text, expected):
    name = tg.register_plugin(Prefixed(), name="test-prefixed")
    try:
        with pytest.raises(ValueError) as info:
            getattr(tg, call)(tg.zeros(2), text)
    finally:
        tg.unregister_plugin(name)
    assert str(info.value).startswith(expected)


def test_ufunc_keywords_are_refused_naming_the_op():
    # A ufunc kernel would take them: where= left uninitialized memory in the result and
    # its backward crashed, out= aliased the caller's array, dtype= changed the dtype.
    x = tg.zeros(2, requires_grad=True)
    for kwargs in ({"where": [True, False]}, {"out": np.zeros(2)}, {"dtype": np.float32},
                   {"casting": "unsafe"}):
        with pytest.raises(TypeError, match=rf"err_add\(\) got an unexpected keyword argument "
                                            rf"'{next(iter(kwargs))}': NumPy's ufunc keywords"):
            tg.err_add(x, x, **kwargs)
