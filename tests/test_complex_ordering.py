"""Ordering ops on complex input (issue 18, helper cx18): NumPy orders complex values
lexicographically (real part, then imaginary part), and sort/max/min/maximum/minimum/
fmax/fmin/clip/ptp/median/partition have complex loops there; their gradient is a
selection or a permutation of the cotangent (no conjugate), with the tie rules of real
input. Values (NaN handling included) are checked against NumPy's, gradients against
complex finite differences (first and second order, real and imaginary parts perturbed
separately: tapegrad.testing's complex gradcheck) and, for ties, against the real-input
gradient of the same pattern. relu (an nn activation with no NumPy complex loop of its
own) and the quantile family (NumPy refuses complex data) keep refusing."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tgt

RNG = np.random.default_rng(1818)


def crand(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


Z = crand(3, 4)
W = crand(3, 4)
WITH_NAN = Z.copy()
WITH_NAN[0, 1] = np.nan + 0.5j         # a NaN real part
WITH_NAN[2, 2] = 1.0 + np.nan * 1j     # a NaN imaginary part (NumPy: the whole value is NaN)

UNARY = {
    "sort": (lambda x: tg.sort(x), lambda x: np.sort(x)),
    "sort axis 0": (lambda x: tg.sort(x, axis=0), lambda x: np.sort(x, axis=0)),
    "sort flat": (lambda x: tg.sort(x, axis=None), lambda x: np.sort(x, axis=None)),
    "max": (lambda x: tg.max(x), np.max),
    "max axis 1": (lambda x: tg.max(x, axis=1), lambda x: np.max(x, axis=1)),
    "min axis 0 keepdims": (lambda x: tg.min(x, axis=0, keepdims=True),
                            lambda x: np.min(x, axis=0, keepdims=True)),
    "amax": (lambda x: tg.amax(x, axis=0), lambda x: np.amax(x, axis=0)),
    "ptp": (lambda x: tg.ptp(x, axis=1), lambda x: np.ptp(x, axis=1)),
    "median": (lambda x: tg.median(x), np.median),
    "median axis 1": (lambda x: tg.median(x, axis=1), lambda x: np.median(x, axis=1)),
    "median axis 0": (lambda x: tg.median(x, axis=0), lambda x: np.median(x, axis=0)),
    "nanmedian": (lambda x: tg.nanmedian(x, axis=1), lambda x: np.nanmedian(x, axis=1)),
    "nanmax": (lambda x: tg.nanmax(x, axis=0), lambda x: np.nanmax(x, axis=0)),
    "nanmin": (lambda x: tg.nanmin(x), np.nanmin),
    "partition": (lambda x: tg.partition(x, 2, axis=1), lambda x: np.partition(x, 2, axis=1)),
    "clip": (lambda x: tg.clip(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5)),
    "clip complex bounds": (lambda x: tg.clip(x, -0.5 + 1j, 0.5 - 1j),
                            lambda x: np.clip(x, -0.5 + 1j, 0.5 - 1j)),
}
BINARY = {name: (getattr(tg, name), getattr(np, name))
          for name in ("maximum", "minimum", "fmax", "fmin")}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("data", ["plain", "nan"])
def test_unary_ordering_values_and_dtypes_are_numpys(name, data):
    ours, numpys = UNARY[name]
    z = Z if data == "plain" else WITH_NAN
    with np.errstate(invalid="ignore"):
        want = numpys(z)
    got = ours(tg.tensor(z)).numpy()
    assert got.dtype == want.dtype
    if name.startswith("partition"):       # the order inside each side is unspecified
        np.testing.assert_array_equal(np.sort(got, axis=1), np.sort(want, axis=1))
        np.testing.assert_array_equal(got[:, 2], want[:, 2])
    else:
        np.testing.assert_array_equal(got, want)
    got64 = ours(tg.tensor(z.astype(np.complex64))).numpy()
    assert got64.dtype == numpys(z.astype(np.complex64)).dtype == np.complex64


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ordering_values_are_numpys_with_nan_and_broadcasting(name):
    ours, numpys = BINARY[name]
    for a, b in ((Z, W), (WITH_NAN, W[0]), (Z, np.complex128(0.1 + 2j)), (WITH_NAN, 0.3)):
        got = ours(tg.tensor(a), tg.tensor(b)).numpy()
        np.testing.assert_array_equal(got, numpys(a, b))
        assert got.dtype == numpys(a, b).dtype


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_ordering_gradients_vs_complex_finite_differences(name):
    ours, _ = UNARY[name]
    x = tg.tensor(Z, requires_grad=True)
    tgt.gradcheck(ours, [x])
    tgt.gradgradcheck(ours, [x])


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ordering_gradients_vs_complex_finite_differences(name):
    ours, _ = BINARY[name]
    a = tg.tensor(WITH_NAN if name.startswith("f") else Z, requires_grad=True)
    b = tg.tensor(W[0], requires_grad=True)           # broadcast: reduced back to (4,)
    tgt.gradcheck(ours, [a, b])
    tgt.gradgradcheck(ours, [a, b])
    # a real input against a complex one gets the real part of its gradient
    r = tg.tensor(W[0].real, requires_grad=True)
    tgt.gradcheck(ours, [a, r])


def test_the_gradient_of_a_sort_is_the_permutation_numpy_sorts_by():
    z = np.array([1 + 1j, 1 - 1j, 0.5 + 3j, -2 + 0.5j, 0.5 - 1j])
    x = tg.tensor(z, requires_grad=True)
    g = crand(5)
    (gx,) = tg.grad(tg.sort(x), [x], tg.tensor(g))
    expected = np.empty_like(g)
    expected[np.argsort(z, kind="stable")] = g          # no conjugate: pure routing
    np.testing.assert_array_equal(gx.numpy(), expected)


def test_complex_ties_follow_the_real_tie_rules():
    # the same pattern of exactly equal entries, once real and once complex: max/min share
    # evenly, maximum/minimum halve, sort gives each position to the stable sort's entry
    real = np.array([1.0, 3.0, 3.0, -1.0, 3.0])
    cplx = real * (1 + 2j)                       # equal entries stay equal, order kept
    g = np.array(0.7 - 1.1j)
    for f in (tg.max, tg.min, lambda v: tg.median(v)):
        xr = tg.tensor(real, requires_grad=True)
        xc = tg.tensor(cplx, requires_grad=True)
        (gr,) = tg.grad(f(xr), [xr])
        (gc,) = tg.grad(f(xc), [xc], tg.tensor(g))
        np.testing.assert_allclose(gc.numpy(), gr.numpy() * g, rtol=0, atol=1e-15)
    gs = crand(5)
    xr, xc = tg.tensor(real, requires_grad=True), tg.tensor(cplx, requires_grad=True)
    (gr,) = tg.grad(tg.sort(xr), [xr], tg.tensor(gs.real))
    (gc,) = tg.grad(tg.sort(xc), [xc], tg.tensor(gs))
    np.testing.assert_array_equal(gc.numpy().real, gr.numpy())
    for f in (tg.maximum, tg.minimum, tg.fmax, tg.fmin):
        a = tg.tensor(cplx, requires_grad=True)
        b = tg.tensor(cplx[::-1].copy(), requires_grad=True)
        ar = tg.tensor(real, requires_grad=True)
        br = tg.tensor(real[::-1].copy(), requires_grad=True)
        got = tg.grad(f(a, b), [a, b], tg.tensor(np.full(5, g)))
        want = tg.grad(f(ar, br), [ar, br], tg.tensor(np.ones(5)))
        for x, y in zip(got, want):
            np.testing.assert_allclose(x.numpy(), y.numpy() * g, rtol=0, atol=1e-15)
        (same,) = tg.grad(f(a, a), [a], tg.tensor(np.full(5, g)))   # maximum(z, z) == z
        np.testing.assert_allclose(same.numpy(), np.full(5, g), rtol=0, atol=1e-15)


def test_nan_gradients_follow_the_real_rules():
    # max of a slice holding NaN is NaN and its gradient NaN, as for real input; fmax
    # gives all of g to the non-NaN input
    z = np.array([1 + 1j, np.nan + 0j, 0.5 + 0j])
    x = tg.tensor(z, requires_grad=True)
    xr = tg.tensor(z.real.copy(), requires_grad=True)
    with np.errstate(invalid="ignore"):
        (gc,) = tg.grad(tg.max(x), [x], tg.tensor(np.array(1 + 0j)))
        (gr,) = tg.grad(tg.max(xr), [xr])
    np.testing.assert_array_equal(np.isnan(gc.numpy()), np.isnan(gr.numpy()))
    y = tg.tensor(np.array([0.0, 2 + 0j, np.nan]), requires_grad=True)
    ga, gb = tg.grad(tg.fmax(x, y), [x, y], tg.tensor(np.full(3, 2j)))
    np.testing.assert_array_equal(ga.numpy(), [2j, 0, 2j])
    np.testing.assert_array_equal(gb.numpy(), [0, 2j, 0])


def test_complex64_gradients_stay_complex64():
    z = Z.astype(np.complex64)
    for f in (tg.sort, tg.max, lambda v: tg.clip(v, -0.5, 0.5), tg.median,
              lambda v: tg.maximum(v, tg.tensor(W.astype(np.complex64)))):
        x = tg.tensor(z, requires_grad=True)
        out = f(x)
        assert out.dtype == np.complex64
        (g,) = tg.grad(out, [x], tg.tensor(np.ones(out.shape, np.complex64)))
        assert g.dtype == np.complex64


def test_relu_keeps_refusing_a_complex_gradient_as_pytorch():
    x = tg.tensor(Z, requires_grad=True)
    with pytest.raises(TypeError, match="relu: the op has no complex gradient rule"):
        tg.relu(x)
    with tg.no_grad():                   # its value is NumPy's maximum(z, 0)
        np.testing.assert_array_equal(tg.relu(x).numpy(), np.maximum(Z, 0))


@pytest.mark.parametrize("name", ["quantile", "percentile", "nanquantile", "nanpercentile"])
def test_the_quantile_family_refuses_complex_as_numpy(name):
    q = 0.5 if "quantile" in name else 50
    with pytest.raises(TypeError, match="a must be an array of real numbers"):
        getattr(np, name)(Z, q)
    for requires_grad in (False, True):
        with pytest.raises(TypeError, match=rf"{name}: a must be an array of real numbers, "
                                            rf"got a complex128 tensor of shape \(3, 4\)"):
            getattr(tg, name)(tg.tensor(Z, requires_grad=requires_grad), q)


# -- np.sort_complex ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int8, np.uint16,
                                   np.int32, np.int64, np.bool_, np.complex64,
                                   np.complex128])
def test_sort_complex_values_and_dtypes_are_numpys(dtype):
    a = (RNG.standard_normal((3, 5)) * 4).astype(dtype) if np.dtype(dtype).kind != "c" \
        else crand(3, 5, dtype=dtype)
    want = np.sort_complex(a)
    got = tg.sort_complex(tg.tensor(a)).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(tg.sort_complex(a).numpy(), want)     # an array too


def test_sort_complex_orders_ties_of_the_real_part_by_the_imaginary_part():
    z = np.array([3 + 5j, 1 + 2j, 3 - 3j, 2 - 1j, 3 - 2j, np.nan + 0j])
    np.testing.assert_array_equal(tg.sort_complex(tg.tensor(z)).numpy(), np.sort_complex(z))


def test_sort_complex_refuses_a_0d_input_as_numpy():
    with pytest.raises(np.exceptions.AxisError):
        np.sort_complex(np.array(2.0))
    with pytest.raises(np.exceptions.AxisError, match="axis -1 is out of bounds"):
        tg.sort_complex(tg.tensor(2.0))


def test_sort_complex_gradient_is_the_permutation_and_real_input_gets_the_real_part():
    z = crand(2, 5)
    x = tg.tensor(z, requires_grad=True)
    tgt.gradcheck(tg.sort_complex, [x])
    tgt.gradgradcheck(tg.sort_complex, [x])
    r = RNG.standard_normal((2, 5))
    xr = tg.tensor(r, requires_grad=True)
    tgt.gradcheck(tg.sort_complex, [xr])         # real input, complex output
    g = crand(2, 5)
    (gr,) = tg.grad(tg.sort_complex(xr), [xr], tg.tensor(g))
    assert gr.dtype == np.float64
    expected = np.empty_like(r)
    np.put_along_axis(expected, np.argsort(r, axis=-1, kind="stable"), g.real, axis=-1)
    np.testing.assert_array_equal(gr.numpy(), expected)
    x32 = tg.tensor(r.astype(np.float32), requires_grad=True)
    out = tg.sort_complex(x32)
    assert out.dtype == np.complex128             # NumPy's: float32 -> complex128
    (g32,) = tg.grad(out, [x32], tg.tensor(g))
    assert g32.dtype == np.float32
