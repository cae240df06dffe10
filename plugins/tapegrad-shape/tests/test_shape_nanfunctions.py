"""nanmax, nanmin, nanprod, nancumsum, nancumprod (module ``nanfunctions``) against
NumPy: values and dtypes over axes and keepdims, all-NaN slices (NaN and NumPy's
RuntimeWarning for nanmax/nanmin), gradients 0 at NaN entries and shared at ties, integer
inputs, and the arguments they refuse. The contract kit runs in tests/test_contract.py."""

import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck, gradgradcheck, run_doctests

RNG = np.random.default_rng(3)
NAN = np.nan
A = RNG.normal(size=(3, 4))
A[0, 1] = A[2, 0] = A[2, 3] = NAN
REDUCTIONS = ["nanmax", "nanmin", "nanprod"]
SCANS = ["nancumsum", "nancumprod"]


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions_match_numpy(name):
    f, ref = getattr(tg, name), getattr(np, name)
    for args, kwargs in [((), {}), ((0,), {}), ((1,), {"keepdims": True}),
                         ((), {"axis": (0, 1)}), ((-1,), {})]:
        got = f(tg.tensor(A), *args, **kwargs).numpy()
        want = ref(A, *args, **kwargs)
        assert got.shape == np.shape(want) and got.dtype == np.asarray(want).dtype
        np.testing.assert_allclose(got, want, rtol=1e-12)
    a32 = A.astype(np.float32)
    assert f(tg.tensor(a32), 1).dtype == ref(a32, 1).dtype == np.float32


@pytest.mark.parametrize("name", SCANS)
def test_scans_match_numpy(name):
    f, ref = getattr(tg, name), getattr(np, name)
    for args in [(), (0,), (1,), (-1,)]:
        np.testing.assert_allclose(f(tg.tensor(A), *args).numpy(), ref(A, *args), rtol=1e-12)
    assert f(tg.tensor(A), 1, np.float32).dtype == ref(A, 1, np.float32).dtype


@pytest.mark.parametrize("name", REDUCTIONS + SCANS)
def test_integer_and_bool_inputs_as_numpy(name):
    f, ref = getattr(tg, name), getattr(np, name)
    for a in (np.array([[3, -1, 2], [0, 5, 4]], np.int32), np.array([[True, False], [True, True]])):
        got, want = f(tg.tensor(a), 0).numpy(), ref(a, 0)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["nanmax", "nanmin"])
def test_all_nan_slice_gives_nan_with_numpys_warning_and_zero_gradient(name):
    a = np.array([[NAN, NAN, NAN], [1.0, NAN, 2.0]])
    with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
        want = getattr(np, name)(a, axis=1)
    x = tg.tensor(a, requires_grad=True)
    with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
        got = getattr(tg, name)(x, axis=1)
    np.testing.assert_array_equal(got.numpy(), want)
    got.backward(tg.ones(2))
    picked = [0.0, 0.0, 1.0] if name == "nanmax" else [1.0, 0.0, 0.0]
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0] * 3, picked])
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # no NaN-only slice: no warning
        getattr(tg, name)(tg.tensor(a[1:]), axis=1)


def test_all_nan_slices_of_products_and_sums():
    a = np.array([[NAN, NAN], [2.0, NAN]])
    np.testing.assert_array_equal(tg.nanprod(tg.tensor(a), 1).numpy(), np.nanprod(a, 1))
    np.testing.assert_array_equal(tg.nancumsum(tg.tensor(a), 1).numpy(), np.nancumsum(a, 1))
    np.testing.assert_array_equal(tg.nancumprod(tg.tensor(a), 1).numpy(), np.nancumprod(a, 1))


def test_gradient_is_zero_at_nan_entries():
    x = tg.tensor(np.array([2.0, NAN, 3.0, 0.5]), requires_grad=True)
    tg.nanprod(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.5, 0.0, 1.0, 6.0])
    x.grad = None
    tg.nancumsum(x).backward(tg.ones(4))
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 0.0, 2.0, 1.0])
    x.grad = None
    tg.nancumprod(x).backward(tg.ones(4))
    # d/dx0 of [x0, x0, x0 x2, x0 x2 x3] = 1 + 1 + 3 + 1.5
    np.testing.assert_allclose(x.grad.numpy(), [6.5, 0.0, 3.0, 6.0])


def test_nanmax_ties_share_the_gradient_as_max():
    x = tg.tensor(np.array([1.0, 3.0, NAN, 3.0]), requires_grad=True)
    tg.nanmax(x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.5, 0.0, 0.5])


@pytest.mark.parametrize("name", REDUCTIONS + SCANS)
def test_gradients_with_nans_first_and_second_order(name):
    a = RNG.permutation(np.linspace(-2, 2, 12)).reshape(3, 4)
    a[1, 2] = a[0, 0] = NAN
    x = tg.tensor(a, requires_grad=True)
    f = lambda t: getattr(tg, name)(t, 1)  # noqa: E731
    assert gradcheck(f, [x]) and gradgradcheck(f, [x])


@pytest.mark.parametrize("name", REDUCTIONS + SCANS)
def test_out_is_refused(name):
    with pytest.raises(TypeError, match=f"{name}: out= is not supported"):
        getattr(tg, name)(tg.ones(3), out=np.empty(()))


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("kwarg", ["initial", "where"])
def test_initial_and_where_are_refused(name, kwarg):
    with pytest.raises(TypeError, match=f"{name}: {kwarg}= is not supported"):
        getattr(tg, name)(tg.ones(3), **{kwarg: True})


def test_bad_axis_names_the_op():
    with pytest.raises(np.exceptions.AxisError, match="nanmax"):
        tg.nanmax(tg.ones(3), axis=2)


def test_docstring_examples_run():
    from tapegrad_shape import nanfunctions
    result = run_doctests(nanfunctions)
    assert result.attempted > 0 and result.failed == 0


def test_compiled_nanmax_gives_nan_for_an_all_nan_slice_met_after_recording():
    f = tg.compile(lambda x: tg.nanmax(x, axis=1))
    np.testing.assert_array_equal(f(tg.tensor([[1.0, 2.0], [3.0, NAN]])).numpy(), [2.0, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # (a replay does not warn)
        got = f(tg.tensor([[NAN, NAN], [3.0, NAN]])).numpy()
    np.testing.assert_array_equal(got, [NAN, 3.0])
