"""Forward-mode (JVP) rules of the core's own ops (add, sum_to_shape, broadcast_to,
astype): every one with a VJP has a JVP, the contract kit checks each against finite
differences and against its VJP, and hand tests check one tangent at a time, the
broadcasting cases, and the integer cast (whose tangent is 0, never a truncated one).

Only the core is needed: the references are NumPy expressions."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing

CORE_DIFFERENTIABLE = sorted(name for name, op in tg.registry().ops.items()
                             if op.plugin == "tapegrad" and op.vjp is not None)


def rule(name):
    return tg.registry().ops[name].jvp


def test_every_differentiable_core_op_has_a_jvp_rule():
    assert CORE_DIFFERENTIABLE == ["add", "astype", "broadcast_to", "real", "sum_to_shape"]
    assert [n for n in CORE_DIFFERENTIABLE if rule(n) is None] == []


@pytest.mark.parametrize("name", CORE_DIFFERENTIABLE)
def test_contract_kit_checks_the_jvp_rule(name):
    checks = tapegrad.testing.check_op(name).checks
    assert "float64 JVP rule vs finite differences" in checks
    assert "JVP rule is the transpose of the VJP rule" in checks


def test_add_tangent_with_one_input_tangent_broadcasts_to_the_output():
    rng = np.random.default_rng(0)
    x, y = tg.tensor(rng.standard_normal((3, 1))), tg.tensor(rng.standard_normal(4))
    tx, ty = rng.standard_normal((3, 1)), rng.standard_normal(4)
    ans = tg.add(x, y)
    only_x = rule("add")((tg.tensor(tx), None), ans, x, y)
    only_y = rule("add")((None, tg.tensor(ty)), ans, x, y)
    both = rule("add")((tg.tensor(tx), tg.tensor(ty)), ans, x, y)
    np.testing.assert_array_equal(np.broadcast_to(only_x.numpy(), (3, 4)),
                                  np.broadcast_to(tx, (3, 4)))
    np.testing.assert_array_equal(np.broadcast_to(only_y.numpy(), (3, 4)),
                                  np.broadcast_to(ty, (3, 4)))
    np.testing.assert_array_equal(both.numpy(), tx + ty)
    none = rule("add")((None, None), ans, x, y)
    np.testing.assert_array_equal(none.numpy(), np.zeros((3, 4)))


def test_add_tangent_with_a_python_number():
    x = tg.tensor(np.array([1.0, 2.0]))
    t = tg.tensor(np.array([0.5, -1.0]))
    got = rule("add")((t, None), tg.add(x, 2.5), x, 2.5)
    np.testing.assert_array_equal(got.numpy(), [0.5, -1.0])


def test_sum_to_shape_and_broadcast_to_are_linear_rules():
    t = np.arange(24.0).reshape(2, 3, 4)
    x = tg.tensor(np.ones((2, 3, 4)))
    got = rule("sum_to_shape")((tg.tensor(t),), tg.sum_to_shape(x, shape=(3, 1)), x,
                               shape=(3, 1))
    np.testing.assert_array_equal(got.numpy(), t.sum(axis=(0, 2)).reshape(3, 1))
    v = tg.tensor(np.ones(4))
    got = rule("broadcast_to")((tg.tensor(np.arange(4.0)),), tg.broadcast_to(v, shape=(3, 4)),
                               v, shape=(3, 4))
    np.testing.assert_array_equal(got.numpy(), np.broadcast_to(np.arange(4.0), (3, 4)))


def test_astype_tangent_follows_a_float_cast():
    x = tg.tensor(np.array([1.25, -2.5]))
    t = tg.tensor(np.array([0.1, 3.0]))
    got = rule("astype")((t,), x.astype(np.float32), x, dtype=np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.numpy(), np.array([0.1, 3.0], np.float32))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
def test_astype_tangent_to_an_integer_dtype_is_zero_not_a_truncated_tangent(dtype):
    # The cast is piecewise constant: its derivative is 0 (a truncated tangent, here
    # [1, -2], would be a silently wrong derivative).
    x = tg.tensor(np.array([1.25, -2.5]))
    t = tg.tensor(np.array([1.9, -2.7]))
    ans = x.astype(dtype)
    got = rule("astype")((t,), ans, x, dtype=dtype)
    np.testing.assert_array_equal(np.broadcast_to(got.numpy(), ans.shape), 0)
