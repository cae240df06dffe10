"""NumPy's other elementwise functions (module ``ufuncs``): values and dtypes against
NumPy for float64/float32/int/bool inputs, the ``%`` and ``//`` operators (in place too),
the gradient conventions at NaN, zeros, poles and jumps, aliases, and errors.

The contract kit (first/second order against finite differences, float32, the JVP rules)
runs over these ops in test_elementwise.py::test_contract_kit_passes_for_every_op.
"""

import math
import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck, gradgradcheck

RNG = np.random.default_rng(14)

# name -> values inside the op's domain (float64)
UNARY = {
    "tan": RNG.uniform(-1.2, 1.2, (3, 4)), "sinh": RNG.normal(size=(3, 4)),
    "cosh": RNG.normal(size=(3, 4)), "arcsin": RNG.uniform(-0.9, 0.9, (3, 4)),
    "arccos": RNG.uniform(-0.9, 0.9, (3, 4)), "arctan": RNG.normal(size=(3, 4)),
    "arcsinh": RNG.normal(size=(3, 4)), "arccosh": RNG.uniform(1.1, 4.0, (3, 4)),
    "arctanh": RNG.uniform(-0.9, 0.9, (3, 4)), "log1p": RNG.uniform(-0.9, 3.0, (3, 4)),
    "expm1": RNG.normal(size=(3, 4)), "log2": RNG.uniform(0.1, 5.0, (3, 4)),
    "log10": RNG.uniform(0.1, 5.0, (3, 4)), "exp2": RNG.normal(size=(3, 4)),
    "reciprocal": RNG.uniform(0.5, 2.0, (3, 4)), "cbrt": RNG.normal(size=(3, 4)),
    "sinc": np.array([0.0, 0.5, -1.5, 2.0, 1e-9]), "deg2rad": RNG.normal(size=4) * 90,
    "radians": RNG.normal(size=4) * 90, "rad2deg": RNG.normal(size=4),
    "degrees": RNG.normal(size=4), "floor": RNG.normal(size=(3, 4)) * 3,
    "ceil": RNG.normal(size=(3, 4)) * 3, "trunc": RNG.normal(size=(3, 4)) * 3,
    "rint": np.array([0.5, 1.5, 2.5, -0.5, -1.7, 3.2]),
    "round": np.array([0.5, 1.5, 2.5, -0.5, -1.7, 3.2]),
    "nan_to_num": np.array([np.nan, np.inf, -np.inf, 1.5]),
    "isnan": np.array([np.nan, np.inf, -np.inf, 1.5, -0.0]),
    "isinf": np.array([np.nan, np.inf, -np.inf, 1.5, -0.0]),
    "isfinite": np.array([np.nan, np.inf, -np.inf, 1.5, -0.0]),
    "signbit": np.array([np.nan, -np.nan, np.inf, -np.inf, 1.5, -0.0, 0.0]),
    "absolute": RNG.normal(size=(3, 4)),
}
BINARY = ("arctan2", "hypot", "logaddexp", "logaddexp2", "fmax", "fmin", "remainder", "mod",
          "fmod", "floor_divide", "copysign", "heaviside", "true_divide")
INT_INPUTS = [np.array([-3, -1, 0, 2, 5]), np.array([True, False, True])]


def numpy_fn(name):
    return getattr(np, name)


def assert_same(got, want):
    """A tensor equals NumPy's array: dtype, shape, values (NaN where NumPy has NaN)."""
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got.numpy(), want)


def grads(f, *arrays):
    """d sum(f(*xs)) / d xs as arrays (None for an input that got no gradient)."""
    xs = [tg.tensor(np.asarray(a, dtype=float), requires_grad=True) for a in arrays]
    out = f(*xs)
    out.backward(tg.ones(out.shape))
    return [None if x.grad is None else x.grad.numpy() for x in xs]


# ---------------------------------------------------------------------------------------
# Values and dtypes are NumPy's
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_unary_values_and_dtypes_are_numpys(name, dtype):
    a = UNARY[name].astype(dtype)
    with np.errstate(all="ignore"):
        assert_same(getattr(tg, name)(tg.tensor(a)), numpy_fn(name)(a))
        assert_same(getattr(tg, name)(tg.tensor(a[..., 0])), numpy_fn(name)(a[..., 0]))   # 0-d


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("a", INT_INPUTS, ids=["int", "bool"])
def test_unary_integer_and_bool_inputs_give_numpys_dtype_and_no_gradient(name, a):
    with np.errstate(all="ignore"):     # reciprocal(0), arccosh(0), ... as NumPy
        want = numpy_fn(name)(a)
        got = getattr(tg, name)(tg.tensor(a))
    assert_same(got, want)
    assert not got.requires_grad


@pytest.mark.parametrize("name", BINARY)
def test_binary_values_broadcasting_and_dtypes_are_numpys(name):
    x = RNG.normal(size=(3, 1, 4)) * 3
    y = RNG.choice([-2.5, -1.0, 0.75, 2.0], size=(5, 1))
    cases = [(x, y), (x.astype(np.float32), y.astype(np.float32)),
             (x.astype(np.float32), 2.0), (1.5, y),
             (np.array([7, -7, 0, 3]), np.array([2, 3, -2, 3])),
             (np.array([7, -7, 0, 3]), 2.5), (np.array([True, False]), np.array([1.5, -0.5]))]
    for a, b in cases:
        with np.errstate(all="ignore"):
            want = numpy_fn(name)(a, b)
            ta = tg.tensor(a) if isinstance(a, np.ndarray) else a
            tb = tg.tensor(b) if isinstance(b, np.ndarray) else b
            assert_same(getattr(tg, name)(ta, tb), want)


def test_round_decimals_positional_keyword_method_and_numpy_dispatch():
    a = np.array([1.2345, -2.5, 0.5, 1234.5678, 2.675])
    for d in (0, 1, 2, -1, -2):
        want = np.round(a, d)
        assert_same(tg.round(tg.tensor(a), d), want)
        assert_same(tg.round(tg.tensor(a), decimals=d), want)
        assert_same(tg.around(tg.tensor(a), decimals=d), np.around(a, d))
        assert_same(tg.tensor(a).round(d), a.round(d))
        assert_same(np.round(tg.tensor(a), d), want)
        assert_same(round(tg.tensor(a), d), np.round(a, d))
    assert_same(round(tg.tensor(a)), np.round(a))
    ints = np.array([15, -25, 7])
    assert_same(tg.round(tg.tensor(ints), -1), np.round(ints, -1))
    assert_same(tg.round(tg.tensor(a.astype(np.float32)), 2), np.round(a.astype(np.float32), 2))


def test_nan_to_num_parameters_and_dtypes_are_numpys():
    a = np.array([np.nan, np.inf, -np.inf, -1.5, 0.0])
    for kwargs in ({}, {"nan": 2.0}, {"posinf": 9.0, "neginf": -9.0}, {"nan": -1.0, "posinf": 1e6}):
        assert_same(tg.nan_to_num(tg.tensor(a), **kwargs), np.nan_to_num(a, **kwargs))
        assert_same(tg.nan_to_num(tg.tensor(a.astype(np.float32)), **kwargs),
                    np.nan_to_num(a.astype(np.float32), **kwargs))
        assert_same(np.nan_to_num(tg.tensor(a), **kwargs), np.nan_to_num(a, **kwargs))
    # NumPy's positional order: (x, copy, nan, posinf, neginf)
    assert_same(tg.nan_to_num(tg.tensor(a), True, 3.0, 4.0), np.nan_to_num(a, True, 3.0, 4.0))


def test_numpy_ufuncs_called_on_tensors_dispatch_to_the_ops():
    x = tg.tensor(np.array([0.3, -0.7, 2.0]), requires_grad=True)
    for name in ("tan", "cosh", "arctan", "log1p", "expm1", "cbrt", "floor", "rint", "isnan",
                 "signbit", "deg2rad", "degrees", "absolute", "sinc"):
        out = numpy_fn(name)(x)
        assert isinstance(out, tg.Tensor), name
        assert_same(out, numpy_fn(name)(x.detach().numpy()))
    for name in ("arctan2", "hypot", "fmax", "remainder", "mod", "fmod", "floor_divide",
                 "copysign", "logaddexp", "true_divide", "heaviside"):
        out = numpy_fn(name)(x, 1.5)
        assert isinstance(out, tg.Tensor), name
        assert_same(out, numpy_fn(name)(x.detach().numpy(), 1.5))
    q, r = np.divmod(x, 0.5)
    assert_same(q, np.floor_divide(x.detach().numpy(), 0.5))
    assert_same(r, np.remainder(x.detach().numpy(), 0.5))
    assert r.requires_grad


def test_aliases_are_the_same_op_as_in_numpy():
    assert tg.absolute is tg.abs and np.absolute is np.abs
    assert tg.true_divide is tg.divide and np.true_divide is np.divide
    assert tg.mod is tg.remainder and np.mod is np.remainder
    assert tg.around is tg.round


# ---------------------------------------------------------------------------------------
# The % and // operators, in place too
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("a,b", [
    (np.array([7.5, -7.5, 3.0, -0.0]), np.array([2.0, 2.0, -1.5, 3.0])),
    (np.array([7, -7, 3, 0]), np.array([2, 2, -2, 5])),
    (np.array([7, -7, 3, 0]), 2),
    (np.array([7, -7, 3, 0]), 2.5),
    (np.array([7.5, -7.5], np.float32), 2.0),
    (np.array([[1.5], [-4.0]]), np.array([2.0, -3.0, 0.5])),
])
def test_mod_floordiv_and_divmod_operators_match_numpy(a, b):
    ta = tg.tensor(a)
    tb = tg.tensor(b) if isinstance(b, np.ndarray) else b
    assert_same(ta % tb, a % b)
    assert_same(ta // tb, a // b)
    with np.errstate(divide="ignore", invalid="ignore"):     # a has a 0: as NumPy
        assert_same(tb % ta, b % a)      # __rmod__ where b is a number
        assert_same(tb // ta, b // a)
    q, r = divmod(ta, tb)
    assert_same(q, divmod(a, b)[0])
    assert_same(r, divmod(a, b)[1])
    q, r = tg.divmod(ta, tb)
    assert_same(q, np.divmod(a, b)[0])
    assert_same(r, np.divmod(a, b)[1])


def test_in_place_mod_and_floordiv_write_into_the_tensor():
    for a, b in [(np.array([7.5, -7.5, 3.25]), 2.0), (np.array([7, -7, 3]), 2),
                 (np.array([7.5, -7.5], np.float32), np.array([2.0, -2.0], np.float32))]:
        t = tg.tensor(a.copy())
        before = t
        t %= tg.tensor(b) if isinstance(b, np.ndarray) else b
        assert t is before
        assert_same(t, a % b)
        t = tg.tensor(a.copy())
        t //= tg.tensor(b) if isinstance(b, np.ndarray) else b
        assert_same(t, a // b)


def test_gradient_flows_through_in_place_mod():
    x = tg.tensor([7.5, -7.5, 3.25], requires_grad=True)
    y = tg.tensor([2.0, 2.0, -1.5], requires_grad=True)
    z = x * 3.0
    z %= y                              # 22.5 % 2, -22.5 % 2, 9.75 % -1.5
    assert z.grad_fn is not None
    (z * z).backward(tg.ones(3))
    r = np.remainder([22.5, -22.5, 9.75], [2.0, 2.0, -1.5])
    np.testing.assert_allclose(x.grad.numpy(), 2 * r * 3.0)
    np.testing.assert_allclose(y.grad.numpy(), 2 * r * -np.floor_divide([22.5, -22.5, 9.75],
                                                                        [2.0, 2.0, -1.5]))


def test_in_place_mod_by_a_tensor_that_requires_grad_records_the_divisor():
    t = tg.tensor([7.5, -7.5])                    # a plain leaf: may be modified in place
    y = tg.tensor([2.0, 2.0], requires_grad=True)
    t %= y
    assert t.requires_grad
    t.backward(tg.ones(2))
    np.testing.assert_array_equal(y.grad.numpy(), [-3.0, 4.0])     # -floor(x / y)


def test_ndarray_on_the_left_of_mod_and_floordiv_gives_a_tensor():
    a = np.array([7.5, -7.5])
    y = tg.tensor([2.0, -2.0], requires_grad=True)
    r, q = a % y, a // y
    assert isinstance(r, tg.Tensor) and isinstance(q, tg.Tensor) and r.requires_grad
    assert_same(r, a % np.array([2.0, -2.0]))
    assert_same(q, a // np.array([2.0, -2.0]))


def test_in_place_floordiv_in_a_graph_has_zero_gradient():
    x = tg.tensor([7.5, -7.5], requires_grad=True)
    z = x + 0.0
    z //= 2.0
    (z + x).backward(tg.ones(2))
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_in_place_mod_refuses_a_leaf_that_requires_grad_and_an_unstorable_dtype():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="remainder_.*leaf"):
        x %= 2.0
    with pytest.raises(RuntimeError, match="floor_divide_.*leaf"):
        x //= 2.0
    i = tg.tensor([1, 2])
    with pytest.raises(TypeError, match="remainder_.*float64.*int64"):
        i %= 1.5
    with pytest.raises(TypeError, match="floor_divide_.*float64.*int64"):
        i //= 1.5


# ---------------------------------------------------------------------------------------
# Gradient conventions
# ---------------------------------------------------------------------------------------

def test_remainder_and_fmod_gradients_follow_pytorch():
    x = np.array([7.5, -7.5, 7.5, -7.5])
    y = np.array([2.0, 2.0, -2.0, -2.0])
    for f, quotient in ((tg.remainder, np.floor(x / y)), (tg.fmod, np.trunc(x / y))):
        gx, gy = grads(f, x, y)
        np.testing.assert_array_equal(gx, np.ones(4))
        np.testing.assert_array_equal(gy, -quotient)
    # at a jump (x an exact multiple of y) the rule still holds: 1 and -x/y
    gx, gy = grads(tg.remainder, [4.0, -6.0], [2.0, 3.0])
    np.testing.assert_array_equal(gx, [1.0, 1.0])
    np.testing.assert_array_equal(gy, [-2.0, 2.0])


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "rint", "round"])
def test_rounding_ops_have_a_zero_gradient_not_none(name):
    (g,) = grads(getattr(tg, name), [0.5, 1.0, -2.3, 2.5])
    np.testing.assert_array_equal(g, np.zeros(4))


def test_floor_divide_has_zero_gradients():
    gx, gy = grads(tg.floor_divide, [7.5, -3.0], [2.0, 2.0])
    np.testing.assert_array_equal(gx, [0.0, 0.0])
    np.testing.assert_array_equal(gy, [0.0, 0.0])


def test_fmax_and_fmin_send_the_gradient_to_the_non_nan_input():
    nan = np.nan
    x = [nan, 1.0, nan, 3.0, 2.0]
    y = [0.0, nan, nan, 1.0, 2.0]
    for f, x_wins in ((tg.fmax, [0, 1, 1, 1, 0.5]), (tg.fmin, [0, 1, 1, 0, 0.5])):
        gx, gy = grads(f, x, y)
        np.testing.assert_array_equal(gx, x_wins)
        # y: all of g where x is NaN (and y is not), none where y is NaN (and x is not),
        # both get g where both are NaN, halves at the tie
        want_y = [1, 0, 1, 1 - x_wins[3], 0.5]
        np.testing.assert_array_equal(gy, want_y)
    out = tg.fmax(tg.tensor(x), tg.tensor(y)).numpy()
    np.testing.assert_array_equal(out, np.fmax(x, y))


def test_fmax_gradient_with_nan_is_finite_and_twice_differentiable():
    x = tg.tensor([np.nan, 0.3, -1.0], requires_grad=True)
    y = tg.tensor([0.5, np.nan, 2.0], requires_grad=True)
    (tg.fmax(x, y) ** 2).backward(tg.ones(3), create_graph=True)
    gx, gy = x.grad, y.grad
    np.testing.assert_allclose(gx.numpy(), [0.0, 0.6, 0.0])
    np.testing.assert_allclose(gy.numpy(), [1.0, 0.0, 4.0])
    x.grad = y.grad = None
    gy.backward(tg.ones(3))
    np.testing.assert_allclose(y.grad.numpy(), [2.0, 0.0, 2.0])


def test_nan_to_num_passes_the_gradient_where_x_was_finite_only():
    x = [np.nan, np.inf, -np.inf, -1.5, 2.0]
    (g,) = grads(lambda t: tg.nan_to_num(t, posinf=5.0, neginf=-5.0) * 3.0, x)
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.0, 3.0, 3.0])


def test_hypot_gradient_at_the_origin_is_zero_and_elsewhere_exact():
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no 0/0 warning either
        gx, gy = grads(tg.hypot, [0.0, 3.0, -0.0], [0.0, -4.0, 0.0])
    np.testing.assert_array_equal(gx, [0.0, 0.6, 0.0])
    np.testing.assert_array_equal(gy, [0.0, -0.8, 0.0])


def test_arctan2_gradient_is_zero_at_the_origin_as_pytorch():
    # (torch.atan2's backward gives 0 and 0 at (0, 0); it was nan here, with a warning)
    with np.errstate(all="raise"):
        gx, gy = grads(tg.arctan2, [0.0, 1.0, -0.0], [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(gx, [0.0, 0.5, 0.0])
    np.testing.assert_array_equal(gy, [0.0, -0.5, 0.0])
    assert gradgradcheck(tg.arctan2, [tg.tensor([0.3, -1.2], requires_grad=True),
                                      tg.tensor([-0.7, 0.4], requires_grad=True)])


def test_arcsin_and_arccos_gradients_are_infinite_at_the_ends():
    with np.errstate(divide="ignore"):
        (g,) = grads(tg.arcsin, [1.0, -1.0, 0.0])
        (h,) = grads(tg.arccos, [1.0, -1.0, 0.0])
    np.testing.assert_array_equal(g, [np.inf, np.inf, 1.0])
    np.testing.assert_array_equal(h, [-np.inf, -np.inf, -1.0])


def test_copysign_gradient_follows_pytorch():
    x = [2.0, -2.0, 2.0, 0.0, -3.0]
    y = [1.0, 1.0, -0.0, -1.0, -5.0]
    gx, gy = grads(tg.copysign, x, y)
    np.testing.assert_array_equal(gx, [1.0, -1.0, -1.0, 0.0, 1.0])
    np.testing.assert_array_equal(gy, np.zeros(5))


def test_heaviside_gradient_is_zero_for_x1_and_the_x1_eq_0_mask_for_x2():
    gx, gy = grads(tg.heaviside, [-1.0, 0.0, 2.0, -0.0], [0.5, 0.25, 0.5, 0.75])
    np.testing.assert_array_equal(gx, np.zeros(4))
    np.testing.assert_array_equal(gy, [0.0, 1.0, 0.0, 1.0])
    # broadcast x2 (a scalar tensor): its gradient sums over the x1 == 0 entries
    gx, gy = grads(tg.heaviside, [0.0, 0.0, 1.0], 0.5)
    assert gy.shape == () and gy == 2.0


def test_sinc_derivatives_at_and_near_zero_are_the_limits():
    x = tg.tensor([0.0, 1e-3, 0.0999, 0.1001, -0.05], requires_grad=True)
    tg.sinc(x).backward(tg.ones(5), create_graph=True)
    g, x.grad = x.grad, None
    xs = x.detach().numpy()
    pi = math.pi
    with np.errstate(invalid="ignore", divide="ignore"):
        exact = (pi * xs * np.cos(pi * xs) - np.sin(pi * xs)) / (pi * xs * xs)
    exact[0] = 0.0
    np.testing.assert_allclose(g.numpy(), exact, rtol=1e-9, atol=1e-12)
    g.backward(tg.ones(5))
    assert x.grad.numpy()[0] == pytest.approx(-pi * pi / 3, rel=1e-12)
    assert gradgradcheck(tg.sinc, [tg.tensor([0.0, 0.0999, 0.1001, 1e-4], requires_grad=True)])


def test_logaddexp_gradients_do_not_overflow():
    gx, gy = grads(tg.logaddexp, [1000.0, -1000.0], [1000.0, 0.0])
    np.testing.assert_allclose(gx, [0.5, 0.0])
    np.testing.assert_allclose(gy, [0.5, 1.0])
    gx, gy = grads(tg.logaddexp2, [1000.0], [999.0])
    np.testing.assert_allclose(gx, [2 / 3])
    np.testing.assert_allclose(gy, [1 / 3])


def test_gradients_of_mixed_integer_and_float_inputs_reach_the_float_one_only():
    x = tg.tensor([7.5, -3.25], requires_grad=True)
    i = tg.tensor([2, 3])
    out = tg.fmod(x, i) + tg.hypot(i, x) + tg.copysign(x, i)
    assert not i.requires_grad
    out.backward(tg.ones(2))
    assert i.grad is None
    want = 1.0 + np.array([7.5, -3.25]) / np.hypot([2, 3], [7.5, -3.25]) + np.sign([7.5, -3.25])
    np.testing.assert_allclose(x.grad.numpy(), want)


def test_float32_gradients_stay_float32():
    x = tg.tensor(np.array([0.3, 1.7], np.float32), requires_grad=True)
    y = (tg.tan(x) + tg.arcsinh(x) + tg.log2(x) + tg.exp2(x) + tg.sinc(x) + x % 0.5
         + tg.hypot(x, 1.0) + tg.nan_to_num(x) + tg.fmax(x, 1.0))
    assert y.dtype == np.float32
    y.backward(tg.ones(2, dtype=np.float32))
    assert x.grad.dtype == np.float32


@pytest.mark.parametrize("name", ["tan", "arccosh", "cbrt", "log10", "degrees", "fmod", "hypot"])
def test_method_forms_exist_and_agree(name):
    x = tg.tensor(np.array([1.5, 2.25]))
    args = (0.75,) if name in ("fmod", "hypot") else ()
    assert_same(getattr(x, name)(*args), numpy_fn(name)(x.numpy(), *args))


def test_jvp_rules_agree_with_reverse_mode_on_broadcast_inputs():
    x = tg.tensor(RNG.normal(size=(3, 1)), requires_grad=True)
    y = tg.tensor(RNG.uniform(1.0, 2.0, size=4), requires_grad=True)
    for name in ("arctan2", "hypot", "logaddexp", "fmod", "copysign", "fmin"):
        op = getattr(tg, name)
        tx, ty = tg.tensor(RNG.normal(size=(3, 1))), tg.tensor(RNG.normal(size=4))
        with tg.no_grad():
            ans = op(x, y)
            got = np.broadcast_to(op.jvp((tx, ty), ans, x, y).numpy(), ans.shape)
        assert gradcheck(op, [x, y])
        x.grad = y.grad = None
        op(x, y).backward(tg.ones((3, 4)))
        # sum over the output of J t == <J^T 1, t> (elementwise ops: diagonal Jacobian)
        assert got.sum() == pytest.approx((x.grad.numpy() * tx.numpy()).sum()
                                          + (y.grad.numpy() * ty.numpy()).sum(), rel=1e-9)


# ---------------------------------------------------------------------------------------
# Not differentiable, and bad input
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite", "signbit"])
def test_float_classification_is_bool_and_never_requires_grad(name):
    x = tg.tensor([np.nan, -1.0, np.inf], requires_grad=True)
    out = getattr(tg, name)(x)
    assert out.dtype == np.bool_ and not out.requires_grad
    assert getattr(tg.registry().ops[name], "vjp") is None


def test_bad_inputs_raise_numpys_error_types_naming_the_op():
    x = tg.tensor([1.0, np.nan])
    with pytest.raises(ValueError, match="nan_to_num: copy=False"):
        tg.nan_to_num(x, copy=False)
    with pytest.raises(ValueError, match="nan_to_num: copy=False"):
        tg.nan_to_num(x, False)
    with pytest.raises(ValueError, match=r"remainder.*\(3,\).*\(4,\)"):
        tg.ones(3) % tg.ones(4)
    with pytest.raises(ValueError, match=r"floor_divide.*\(3,\).*\(2,\)"):
        tg.ones(3) // tg.ones(2)
    with pytest.raises(ValueError, match=r"hypot.*\(3,\).*\(2,\)"):
        tg.hypot(tg.ones(3), tg.ones(2))
    with pytest.raises(TypeError, match="round.*out"):
        tg.round(x, out=np.zeros(2))
    with pytest.raises(TypeError, match=r"round\(\) got 2 extra positional"):
        tg.round(x, 1, 2)
    with pytest.raises(TypeError, match=r"floor\(\) got 1 extra positional"):
        tg.floor(x, 2)
    with pytest.raises(TypeError, match=r"fmax\(\) takes 2 tensor inputs"):
        tg.fmax(x)
    with pytest.raises(TypeError, match=r"heaviside\(\) takes 2 tensor inputs"):
        tg.heaviside(x)
    with pytest.raises(TypeError, match="only floating-point and complex tensors can require gradients"):
        tg.tensor([1, 2], requires_grad=True)


def test_logaddexp_gradients_with_an_infinite_input():
    # logaddexp(inf, y) = inf for finite y: d/dx -> 1, d/dy -> 0 (the limits, PyTorch's);
    # it was exp(inf - inf) = nan. -inf inputs get 0 and the other one 1.
    with np.errstate(all="raise"):
        gx, gy = grads(tg.logaddexp, [np.inf, 2.0, -np.inf, 1.0], [1.0, np.inf, 3.0, -np.inf])
        np.testing.assert_array_equal(gx, [1.0, 0.0, 0.0, 1.0])
        np.testing.assert_array_equal(gy, [0.0, 1.0, 1.0, 0.0])
        gx, gy = grads(tg.logaddexp2, [np.inf, -np.inf], [1e308, 0.5])
        np.testing.assert_array_equal(gx, [1.0, 0.0])
        np.testing.assert_array_equal(gy, [0.0, 1.0])
    x = tg.tensor([np.inf, 0.5], requires_grad=True)
    tg.logaddexp(x, tg.tensor([1.0, 2.0])).backward(tg.ones(2), create_graph=True)
    g, x.grad = x.grad, None
    g.backward(tg.ones(2))
    s = 1 / (1 + np.exp(1.5))                       # sigmoid(0.5 - 2)
    np.testing.assert_allclose(x.grad.numpy(), [0.0, s * (1 - s)])
