"""Forward-mode (JVP) rules of tapegrad-shape's ops: every differentiable op has one, the
contract kit checks each against finite differences and against the transpose of its VJP,
and hand tests cover what the samples do not: inputs without a tangent, ties in max/min,
zeros in cumprod, positional parameters, dtype= and keepdims=."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tgt
from tapegrad import _engine

PLUGIN = "tapegrad-shape"
# Differentiable ops of this plugin that have no JVP rule of their own, with the reason
# (the engine falls back to an exact double-VJP for them). None at present.
WITHOUT_JVP = {}

RNG = np.random.default_rng(11)


def _differentiable_ops():
    return sorted(n for n, op in _engine.ops_table().items()
                  if op.plugin == PLUGIN and op.vjp is not None)


def _rule(name):
    return _engine.ops_table()[name].jvp


def _fd_jvp(fn, xs, ts, eps=1e-6):
    """Central finite difference of fn (NumPy arrays in, array out) along the tangents
    ts (None: that input does not move): the independent reference for J t, for the
    tests that call a rule directly (its calling conventions); the others go through the
    engine with tapegrad.testing.check_jvp (see _check_jvp)."""
    plus = [x if t is None else x + eps * t for x, t in zip(xs, ts)]
    minus = [x if t is None else x - eps * t for x, t in zip(xs, ts)]
    return (np.asarray(fn(*plus), dtype=np.float64)
            - np.asarray(fn(*minus), dtype=np.float64)) / (2 * eps)


def _check_jvp(name, reference, xs, ts, *args, **params):
    """The op's tangent in forward mode (tg.jvp's path: the engine calls the rule) on
    NumPy inputs and tangents (None: that input does not move), against central
    differences of `reference`, NumPy's function. `args`: positional parameters after
    the inputs."""
    op = _engine.ops_table()[name]
    return tgt.check_jvp(lambda *xs: op(*xs, *args, **params), xs, ts, reference=reference,
                         atol=1e-8, rtol=1e-7)


def test_every_differentiable_op_has_a_jvp_rule():
    missing = [n for n in _differentiable_ops()
               if _engine.ops_table()[n].jvp is None and n not in WITHOUT_JVP]
    assert missing == []


@pytest.mark.parametrize("name", _differentiable_ops())
def test_the_kit_checks_the_jvp_rule_against_finite_differences_and_the_vjp(name, contract_reports):
    if name in WITHOUT_JVP:
        pytest.skip(WITHOUT_JVP[name])
    checks = set(contract_reports[name].checks)
    assert "float64 JVP rule vs finite differences" in checks
    assert "JVP rule is the transpose of the VJP rule" in checks
    assert "float32 JVP rule keeps the dtype" in checks      # the rule itself, not the engine


# -- inputs without a tangent --------------------------------------------------------

@pytest.mark.parametrize("moving", [(True, False), (False, True), (True, True)])
def test_setitem_jvp_with_a_tangent_on_either_input(moving):
    x, v = RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    tx = RNG.standard_normal((3, 4)) if moving[0] else None
    tv = RNG.standard_normal(4) if moving[1] else None

    def f(x, v):
        out = x.copy()
        out[1] = v
        return out
    _check_jvp("setitem", f, [x, v], [tx, tv], index=1)


def test_setitem_of_a_constant_number_moves_only_the_unwritten_entries():
    x, tx = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))

    def f(x, value):
        out = x.copy()
        out[:, 0] = value
        return out
    got = _check_jvp("setitem", f, [x, 2.5], [tx, None], index=(slice(None), 0))
    assert np.all(got[:, 0] == 0)


@pytest.mark.parametrize("name,axis", [("concatenate", 1), ("concatenate", None),
                                       ("stack", 0), ("stack", -1)])
def test_joining_jvp_with_some_inputs_without_a_tangent(name, axis):
    shapes = [(2, 3), (2, 3), (2, 3)]
    xs = [RNG.standard_normal(s) for s in shapes]
    ts = [RNG.standard_normal(shapes[0]), None, RNG.standard_normal(shapes[2])]
    np_fn = getattr(np, name)

    op = _engine.ops_table()[name]
    tgt.check_jvp(lambda *xs: op(list(xs), axis=axis), xs, ts,
                  reference=lambda *xs: np_fn(xs, axis=axis), atol=1e-8, rtol=1e-7)


@pytest.mark.parametrize("moving", [(True, False), (False, True)])
def test_put_along_axis_jvp_with_a_tangent_on_either_input(moving):
    arr, values = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 1))
    idx = np.array([[0], [2], [3]])
    ta = RNG.standard_normal((3, 4)) if moving[0] else None
    tv = RNG.standard_normal((3, 1)) if moving[1] else None

    def f(arr, values):
        out = arr.copy()
        np.put_along_axis(out, idx, values, 1)
        return out
    op = _engine.ops_table()["_put_along_axis"]
    tgt.check_jvp(lambda arr, values: op(arr, tg.tensor(idx), values, axis=1), [arr, values],
                  [ta, tv], reference=f, atol=1e-8, rtol=1e-7)


# -- max / min: ties follow the VJP's convention (the mean of the tied entries) --------

@pytest.mark.parametrize("name", ["max", "min"])
def test_extremum_jvp_of_tied_entries_is_the_mean_of_their_tangents(name):
    x = np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 2.0, 2.0], [0.5, -4.0, 0.0, -4.0]])
    tx = RNG.standard_normal(x.shape)
    ans = getattr(np, name)(x, axis=1)
    got = _rule(name)((tg.tensor(tx),), tg.tensor(ans), tg.tensor(x), 1).numpy()
    hit = x == ans[:, None]
    expected = (tx * hit).sum(1) / hit.sum(1)     # independent: a plain NumPy mean
    np.testing.assert_allclose(got, expected, atol=1e-12)
    # and it is the transpose of the VJP on the tied input too: <u, J t> = <J^T u, t>
    xt = tg.tensor(x, requires_grad=True)
    u = RNG.standard_normal(ans.shape)
    (getattr(tg, name)(xt, 1) * tg.tensor(u)).sum().backward()
    np.testing.assert_allclose(np.sum(u * got), np.sum(xt.grad.numpy() * tx), atol=1e-12)


def test_extremum_jvp_keepdims_and_all_axes():
    x = RNG.standard_normal((2, 3, 4))
    tx = RNG.standard_normal(x.shape)
    for kwargs in ({}, {"axis": (0, 2), "keepdims": True}, {"axis": -1}):
        got = _rule("max")((tg.tensor(tx),), tg.tensor(np.max(x, **kwargs)), tg.tensor(x),
                           **kwargs)
        expected = _fd_jvp(lambda x: np.max(x, **kwargs), [x], [tx])
        np.testing.assert_allclose(np.broadcast_to(got.numpy(), expected.shape), expected,
                                   atol=1e-7)


# -- cumprod: exact with zeros, any axis, dtype= -----------------------------------------

@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_cumprod_jvp_with_repeated_zeros(axis):
    x = np.array([[0.0, 1.5, 0.0, -2.0], [1.2, 0.0, 0.0, 0.7], [0.3, -1.1, 2.0, 0.9]])
    tx = RNG.standard_normal(x.shape)
    got = _rule("cumprod")((tg.tensor(tx),), tg.tensor(np.cumprod(x, axis)), tg.tensor(x),
                           axis)
    expected = _fd_jvp(lambda x: np.cumprod(x, axis), [x], [tx])
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-7)
    assert got.shape == expected.shape


def test_cumprod_jvp_keeps_the_requested_dtype():
    x, tx = RNG.standard_normal(5), RNG.standard_normal(5)
    ans = np.cumprod(x, dtype=np.float32)
    got = _rule("cumprod")((tg.tensor(tx),), tg.tensor(ans), tg.tensor(x), dtype=np.float32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), _fd_jvp(np.cumprod, [x], [tx]), rtol=1e-5,
                               atol=1e-5)


# -- reductions and shapes: positional parameters, dtype= and keepdims= ---------------

@pytest.mark.parametrize("name", ["sum", "mean"])
def test_sum_and_mean_jvp_take_axis_positionally_and_keepdims(name):
    x, tx = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 4))
    np_fn = getattr(np, name)
    for args, kwargs in (((1,), {}), (((0, 2),), {"keepdims": True}), ((), {})):
        got = _rule(name)((tg.tensor(tx),), tg.tensor(np_fn(x, *args, **kwargs)),
                          tg.tensor(x), *args, **kwargs)
        expected = _fd_jvp(lambda x: np_fn(x, *args, **kwargs), [x], [tx])
        np.testing.assert_allclose(got.numpy(), expected, atol=1e-8)
        assert got.shape == expected.shape


def test_reshape_and_transpose_jvp_take_their_parameter_positionally():
    x, tx = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 4))
    got = _rule("reshape")((tg.tensor(tx),), tg.tensor(x.reshape(4, -1)), tg.tensor(x),
                           (4, -1))
    np.testing.assert_array_equal(got.numpy(), tx.reshape(4, -1))
    got = _rule("transpose")((tg.tensor(tx),), tg.tensor(x.transpose(2, 0, 1)), tg.tensor(x),
                             (2, 0, 1))
    np.testing.assert_array_equal(got.numpy(), tx.transpose(2, 0, 1))


def test_pad_jvp_pads_the_tangent_with_zeros_whatever_the_constant():
    x, tx = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    f = lambda x: np.pad(x, ((1, 0), (2, 1)), constant_values=1.5)   # noqa: E731 (affine)
    _check_jvp("pad", f, [x], [tx], ((1, 0), (2, 1)), constant_values=1.5)


def test_getitem_jvp_with_repeated_advanced_indices():
    x, tx = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    index = (np.array([0, 2, 0]), np.array([1, 1, 1]))
    got = _rule("getitem")((tg.tensor(tx),), tg.tensor(x[index]), tg.tensor(x), index=index)
    np.testing.assert_array_equal(got.numpy(), tx[index])
