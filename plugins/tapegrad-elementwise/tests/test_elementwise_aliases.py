"""NumPy's other spellings of the elementwise ops (module ``aliases``): the same op where
NumPy's is the same function, values and dtypes against NumPy for the others (fabs, fix,
float_power, positive), their gradients, and the forms they refuse.

The contract kit runs over them in test_elementwise.py::test_contract_kit_passes_for_every_op.
"""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck, gradgradcheck, run_doctests

RNG = np.random.default_rng(41)
SAME = [("acos", "arccos"), ("acosh", "arccosh"), ("asin", "arcsin"), ("asinh", "arcsinh"),
        ("atan", "arctan"), ("atan2", "arctan2"), ("atanh", "arctanh"), ("pow", "power")]
INPUTS = {"acos": (RNG.uniform(-0.9, 0.9, 5),), "acosh": (RNG.uniform(1.1, 3.0, 5),),
          "asin": (RNG.uniform(-0.9, 0.9, 5),), "asinh": (RNG.normal(size=5),),
          "atan": (RNG.normal(size=5),), "atanh": (RNG.uniform(-0.9, 0.9, 5),),
          "atan2": (RNG.normal(size=(2, 3)), RNG.normal(size=3)),
          "pow": (RNG.uniform(0.5, 2.0, (2, 3)), RNG.uniform(-1.0, 2.0, 3))}


@pytest.mark.parametrize("alias,target", SAME)
def test_an_alias_is_the_same_op_where_numpys_is_the_same_function(alias, target):
    assert getattr(np, alias) is getattr(np, target)
    assert getattr(tg, alias) is getattr(tg, target)


@pytest.mark.parametrize("alias,target", SAME)
def test_aliases_match_numpy_in_float64_and_float32(alias, target):
    for dtype in (np.float64, np.float32):
        args = [a.astype(dtype) for a in INPUTS[alias]]
        got = getattr(tg, alias)(*[tg.tensor(a) for a in args]).numpy()
        want = getattr(np, alias)(*args)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_fabs_returns_numpys_float_dtype_for_every_input_dtype():
    cases = [(a, dtype) for dtype in (np.int8, np.int32, np.int64, np.float32, np.float64)
             for a in ([-3, 0, 2],)] + [([3, 0], np.uint8), ([True, False], np.bool_)]
    for values, dtype in cases:
        a = np.array(values, dtype=dtype)
        got = tg.fabs(tg.tensor(a)).numpy()
        want = np.fabs(a)
        assert got.dtype == want.dtype, dtype
        np.testing.assert_array_equal(got, want)


def test_fabs_gradient_is_the_sign_and_zero_at_zero():
    x = tg.tensor([-1.5, 0.0, 2.0], requires_grad=True)
    tg.fabs(x).backward(tg.ones(3))     # (no .sum(): this plugin's tests run without shape)
    np.testing.assert_array_equal(x.grad.numpy(), [-1.0, 0.0, 1.0])
    assert gradgradcheck(tg.fabs, [tg.tensor([-0.7, 1.3], requires_grad=True)])


def test_fix_matches_numpy_values_and_dtypes_and_has_zero_gradient():
    a = np.array([-2.5, -0.5, -0.0, 0.3, 1.7, np.inf, -np.inf, np.nan])
    got = tg.fix(tg.tensor(a)).numpy()
    np.testing.assert_array_equal(got, np.fix(a))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.fix(a)))      # -0.0 kept
    for dtype in (np.int32, np.int64, np.float32):
        b = np.array([-3, 0, 4], dtype=dtype)
        assert tg.fix(tg.tensor(b)).dtype == np.fix(b).dtype
    x = tg.tensor([-1.3, 2.6], requires_grad=True)
    tg.fix(x).backward(tg.ones(2))
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])


def test_float_power_computes_in_float64_as_numpy():
    for dtype in (np.float32, np.int32, np.int64, np.float64):
        a = np.array([1, 2, 3], dtype=dtype)
        b = np.array([2, -1, 3], dtype=dtype)
        got = tg.float_power(tg.tensor(a), tg.tensor(b)).numpy()
        want = np.float_power(a, b)
        assert got.dtype == want.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-15)
    # Python scalars, either side, and an explicit dtype=float64
    x = np.array([0.5, 2.0], np.float32)
    np.testing.assert_allclose(tg.float_power(tg.tensor(x), 1.5).numpy(), np.float_power(x, 1.5))
    np.testing.assert_allclose(tg.float_power(2, tg.tensor(x)).numpy(), np.float_power(2, x))
    assert tg.float_power(tg.tensor(x), 2, dtype=np.float64).dtype == np.float64


def test_float_power_gradients_and_nan_for_a_negative_base():
    x = tg.tensor(RNG.uniform(0.5, 2.0, (2, 3)), requires_grad=True)
    y = tg.tensor(RNG.uniform(-1.0, 2.0, 3), requires_grad=True)
    assert gradcheck(tg.float_power, [x, y])
    assert gradgradcheck(tg.float_power, [x, y])
    x32 = tg.tensor(np.array([1.5, 2.0], np.float32), requires_grad=True)
    tg.float_power(x32, 2).backward(tg.ones(2))
    assert x32.grad.dtype == np.float32                 # the gradient keeps the input's dtype
    np.testing.assert_allclose(x32.grad.numpy(), [3.0, 4.0])
    with np.errstate(invalid="ignore"):
        assert np.isnan(tg.float_power(tg.tensor([-8.0]), 1 / 3).numpy()[0])


def test_float_power_refuses_a_dtype_numpy_has_no_loop_for_and_out():
    with pytest.raises(TypeError, match="float_power: no loop for dtype=float32"):
        tg.float_power(tg.tensor([1.0]), 2.0, dtype=np.float32)
    with pytest.raises(TypeError):
        np.float_power(np.array([1.0]), 2.0, dtype=np.float32)            # NumPy refuses too
    with pytest.raises(TypeError, match="float_power: out= is not supported"):
        tg.float_power(tg.tensor([1.0]), 2.0, np.empty(1))


def test_positive_copies_and_passes_the_gradient():
    a = np.array([-1.5, 0.0, 2.0], np.float32)
    x = tg.tensor(a, requires_grad=True)
    y = tg.positive(x)
    assert y.dtype == np.float32 and not np.shares_memory(y.numpy(), x.numpy())
    np.testing.assert_array_equal(y.numpy(), np.positive(a))
    y.backward(tg.tensor(np.array([1.0, 2.0, 3.0], np.float32)))
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 2.0, 3.0])
    assert tg.positive(tg.tensor([1, -2])).dtype == np.positive(np.array([1, -2])).dtype


def test_positive_refuses_bool_as_numpy():
    with pytest.raises(TypeError):
        np.positive(np.array([True]))
    with pytest.raises(TypeError, match="positive"):
        tg.positive(tg.tensor([True, False]))


@pytest.mark.parametrize("name", ["fabs", "fix"])
def test_out_is_refused(name):
    with pytest.raises(TypeError, match=f"{name}: out= is not supported"):
        getattr(tg, name)(tg.tensor([1.0]), np.empty(1))


def test_docstring_examples_run():
    from tapegrad_elementwise import aliases
    result = run_doctests(aliases)
    assert result.attempted > 0 and result.failed == 0
