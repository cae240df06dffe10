"""NumPy's other spellings of the shape ops (module ``aliases``): concat and permute_dims
are the same ops as concatenate and transpose (as in NumPy); rollaxis, matrix_transpose,
cumulative_sum and cumulative_prod against NumPy, with their errors. The contract kit
(first and second order, float32) runs over them in tests/test_contract.py."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck, gradgradcheck, run_doctests

RNG = np.random.default_rng(7)


def test_concat_and_permute_dims_are_the_same_ops_as_in_numpy():
    assert np.concat is np.concatenate and tg.concat is tg.concatenate
    assert np.permute_dims is np.transpose and tg.permute_dims is tg.transpose
    a, b = RNG.normal(size=(2, 3)), RNG.normal(size=(2, 1))
    np.testing.assert_array_equal(tg.concat([tg.tensor(a), tg.tensor(b)], axis=1).numpy(),
                                  np.concat([a, b], axis=1))
    c = RNG.normal(size=(2, 3, 4))
    np.testing.assert_array_equal(tg.permute_dims(tg.tensor(c), (2, 0, 1)).numpy(),
                                  np.permute_dims(c, (2, 0, 1)))


def test_rollaxis_matches_numpy_for_every_axis_and_start():
    a = RNG.normal(size=(2, 3, 4, 5))
    for axis in range(-4, 4):
        for start in range(-4, 5):
            got = tg.rollaxis(tg.tensor(a), axis, start).numpy()
            np.testing.assert_array_equal(got, np.rollaxis(a, axis, start),
                                          err_msg=f"{axis} {start}")


def test_rollaxis_errors_are_numpys_axis_errors():
    x = tg.zeros((2, 3, 4))
    with pytest.raises(np.exceptions.AxisError,
                       match="rollaxis: 'start' arg requires -3 <= start < 4, but 5"):
        tg.rollaxis(x, 0, 5)
    with pytest.raises(np.exceptions.AxisError, match="-5"):
        tg.rollaxis(x, 0, -5)
    with pytest.raises(np.exceptions.AxisError, match="rollaxis"):
        tg.rollaxis(x, 3)


def test_rollaxis_gradient():
    x = tg.tensor(RNG.normal(size=(2, 3, 4)), requires_grad=True)
    assert gradcheck(lambda t: tg.rollaxis(t, 2, 1) * tg.arange(24.0).reshape(2, 4, 3), [x])


def test_matrix_transpose_matches_numpy_and_refuses_vectors():
    a = RNG.normal(size=(4, 2, 3))
    np.testing.assert_array_equal(tg.matrix_transpose(tg.tensor(a)).numpy(), np.matrix_transpose(a))
    with pytest.raises(ValueError,
                       match="matrix_transpose: input array must be at least 2-dimensional"):
        tg.matrix_transpose(tg.ones(3))


@pytest.mark.parametrize("name,scan", [("cumulative_sum", np.cumulative_sum),
                                       ("cumulative_prod", np.cumulative_prod)])
def test_cumulative_scans_match_numpy(name, scan):
    f = getattr(tg, name)
    a = RNG.normal(size=(3, 4))
    for kwargs in ({"axis": 0}, {"axis": 1}, {"axis": -1, "include_initial": True},
                   {"axis": 0, "include_initial": True}, {"axis": 1, "dtype": np.float32}):
        got, want = f(tg.tensor(a), **kwargs).numpy(), scan(a, **kwargs)
        assert got.dtype == want.dtype, kwargs
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=str(kwargs))
    v = RNG.normal(size=5)
    for include_initial in (False, True):
        np.testing.assert_allclose(f(tg.tensor(v), include_initial=include_initial).numpy(),
                                   scan(v, include_initial=include_initial))
    # integers, bools and scalars (a scalar counts as 1-d) as NumPy
    for arr in (np.array([1, 2, 3], np.int32), np.array([True, True, False]), np.float64(2.5),
                np.array([1.5, 2.0], np.float32)):
        got = f(tg.tensor(arr), include_initial=True).numpy()
        want = scan(arr, include_initial=True)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
def test_cumulative_scans_need_an_axis_for_nd_input_and_refuse_out(name):
    f = getattr(tg, name)
    with pytest.raises(ValueError, match=f"{name}: for arrays which have more than one dimension"):
        f(tg.ones((2, 3)))
    with pytest.raises(np.exceptions.AxisError, match=name):
        f(tg.ones(3), axis=1)
    with pytest.raises(TypeError, match=f"{name}: out= is not supported"):
        f(tg.ones(3), out=np.empty(3))


def test_cumulative_prod_gradient_is_exact_at_zeros_with_the_initial_entry():
    x = tg.tensor(np.array([[1.5, 0.0, 2.0], [0.0, 0.0, -1.2]]), requires_grad=True)
    f = lambda t: tg.cumulative_prod(t, axis=1, include_initial=True)  # noqa: E731
    assert gradcheck(f, [x]) and gradgradcheck(f, [x])
    tg.cumulative_sum(x, axis=0, include_initial=True).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2.0] * 3, [1.0] * 3])


def test_docstring_examples_run():
    from tapegrad_shape import aliases
    result = run_doctests(aliases)
    assert result.attempted > 0 and result.failed == 0
