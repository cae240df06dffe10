"""The backward kernels' fusion recipes (`fused_as`, Note: [fusion recipes] in
tapegrad/_compile.pyx): a fused tg.compile replay runs a recipe's ufunc calls in place of
the kernel, so each recipe must compute what its kernel computes, bit for bit. Checked by
evaluating the recipe with plain NumPy calls on a grid of special values (NaN, +-inf,
+-0.0, subnormals, huge) and random ones, in float32 and float64."""

import warnings

import numpy as np
import pytest
from tapegrad_elementwise import _backward_kernels as K

WITH_RECIPES = ["cos_backward", "sigmoid_backward", "sin_backward", "tanh_backward"]


def evaluate(recipe, *inputs):
    """The recipe as NumPy calls: operand i < len(inputs) is input i, len(inputs) + j the
    j-th call's result, a float a 0-d constant of the inputs' dtype."""
    values = list(inputs)
    dtype = inputs[0].dtype
    for ufunc, operands in recipe:
        args = [np.array(o, dtype=dtype) if isinstance(o, float) else values[o]
                for o in operands]
        values.append(ufunc(*args))
    return values[-1]


def special_grid(dtype):
    info = np.finfo(dtype)
    v = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 0.5, 3.0, -7.5, 1e30,
                  -1e30, float(info.tiny), float(info.smallest_subnormal),
                  -float(info.smallest_subnormal), float(info.max), float(info.eps)], dtype)
    g, y = np.meshgrid(v, v, indexing="ij")
    r = np.random.default_rng(7).standard_normal((2, 300)).astype(dtype)
    return (np.concatenate([g.ravel(), r[0]]), np.concatenate([y.ravel(), r[1]]))


def test_exactly_these_kernels_carry_a_recipe():
    carrying = sorted(name for name in dir(K)
                      if getattr(getattr(K, name), "fused_as", None) is not None)
    assert carrying == WITH_RECIPES


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", WITH_RECIPES)
def test_a_recipe_computes_its_kernel_bit_for_bit(name, dtype):
    kernel = getattr(K, name)
    g, y = special_grid(dtype)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        got = evaluate(kernel.fused_as, g, y)
        want = kernel(g, y)
    assert got.dtype == want.dtype == dtype and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint8), want[~nan].view(np.uint8))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", WITH_RECIPES)
def test_a_recipe_keeps_its_kernels_nan_signs(name, dtype):
    # A fused replay must give eager's bits, NaN signs included (tests/test_compile_fused.py
    # compares raw bytes): where two NaNs of different signs meet, which one survives
    # depends on the order of the operations (cos_backward negating before or after its
    # product did: session 14).
    kernel = getattr(K, name)
    v = np.array([np.nan, -np.nan, 0.5, -2.0, np.inf], dtype)
    g, y = (a.ravel() for a in np.meshgrid(v, v, indexing="ij"))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        for n in (g.size, 1):                 # the C loop / NumPy's path, and one element
            got = evaluate(kernel.fused_as, g[:n], y[:n])
            want = kernel(g[:n], y[:n])
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
