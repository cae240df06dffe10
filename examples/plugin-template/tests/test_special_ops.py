"""tapegrad-special: the contract kit over every op, values against references, dtypes,
errors, the entry point, and the examples in the README and docstrings.

These tests need only tapegrad, tapegrad-elementwise and this plugin (what it declares),
installed or not: check_plugin registers the ops module itself when no entry point did.
So they use no op of tapegrad-shape (no `.sum()`: `backward(tg.ones(shape))` instead).
"""

import math
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing
import tapegrad_special
from tapegrad.testing import run_doctests
from tapegrad_special import ops

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(scope="module", autouse=True)
def registered():
    """The ops, whether tapegrad found the entry point or not (a plain checkout)."""
    if "special_erf" not in tg.registry().ops:
        tg.register_plugin(ops, name="tapegrad-special")


# ---------------------------------------------------------------------------------------
# The op contract: one line covers every op
# ---------------------------------------------------------------------------------------

def test_contract_kit_passes_for_every_op():
    reports = tapegrad.testing.check_plugin(ops)
    assert {r.name for r in reports} == set(tapegrad_special.OPS)
    for report in reports:
        assert "float64 gradient vs finite differences" in report.checks
        assert "float64 second derivatives (gradgradcheck)" in report.checks
        assert "double_backward" in report.capabilities
        # every op has a forward-mode rule, checked three ways
        assert "float64 JVP rule vs finite differences" in report.checks
        assert "JVP rule is the transpose of the VJP rule" in report.checks
        assert "float64 JVP rule differentiable (reverse over forward)" in report.checks


def test_every_op_is_a_function_and_a_method_with_a_doc():
    x = tg.tensor([0.25, -1.0])
    for name in tapegrad_special.OPS:
        assert getattr(tg, name) is tg.registry().ops[name]
        assert tg.registry().ops[name].doc
    np.testing.assert_allclose(x.special_erf().numpy(), tg.special_erf(x).numpy())
    np.testing.assert_allclose(x.special_logaddexp(1.0).numpy(), np.logaddexp(x.numpy(), 1.0))


# ---------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------

GRID = np.array([-8.0, -3.2, -1.0, -0.4, -1e-9, 0.0, 1e-9, 0.3, 1.0, 2.5, 6.0, 30.0])


def test_erf_matches_math_erf():
    got = tg.special_erf(tg.tensor(GRID)).numpy()
    np.testing.assert_array_equal(got, [math.erf(v) for v in GRID])
    assert tg.special_erf(tg.tensor(0.5)).shape == ()


def test_gelu_is_x_times_the_normal_cdf():
    expected = [v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in GRID]
    np.testing.assert_allclose(tg.special_gelu(tg.tensor(GRID)).numpy(), expected,
                               rtol=1e-15, atol=0)


def test_softplus_is_finite_and_accurate_everywhere():
    x = np.array([-1000.0, -40.0, -1.0, 0.0, 1.0, 40.0, 1000.0])
    got = tg.special_softplus(tg.tensor(x)).numpy()
    np.testing.assert_allclose(got, np.log1p(np.exp(np.minimum(x, 700))) + np.maximum(x - 700, 0),
                               rtol=1e-15)
    assert got[0] == 0.0 and got[-1] == 1000.0
    np.testing.assert_allclose(tg.special_softplus(tg.tensor(x[1:-1]), beta=2.0).numpy(),
                               np.log1p(np.exp(2 * x[1:-1])) / 2, rtol=1e-15)


def test_logaddexp_broadcasts_like_numpy_and_does_not_overflow():
    x, y = np.array([[1000.0], [-2.0]]), np.array([1000.0, 0.5, -np.inf])
    np.testing.assert_array_equal(tg.special_logaddexp(tg.tensor(x), tg.tensor(y)).numpy(),
                                  np.logaddexp(x, y))


# ---------------------------------------------------------------------------------------
# Gradients beyond the contract kit's samples
# ---------------------------------------------------------------------------------------

def test_gelu_first_and_second_derivatives_at_zero():
    x = tg.tensor([0.0], requires_grad=True)
    tg.special_gelu(x).backward(tg.ones(1), create_graph=True)
    d1 = x.grad
    x.grad = None
    d1.backward(tg.ones(1))
    assert d1.item() == 0.5                                   # Phi(0)
    assert math.isclose(x.grad.item(), 2 / math.sqrt(2 * math.pi), rel_tol=1e-12)   # 2 phi(0)


def test_logaddexp_gradients_sum_back_to_each_input_and_skip_numbers():
    x = tg.tensor(np.zeros((2, 1)), requires_grad=True)
    y = tg.tensor(np.zeros(3), requires_grad=True)
    tg.special_logaddexp(x, y).backward(tg.ones((2, 3)))
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 1), 1.5))   # 3 entries of 1/2
    np.testing.assert_allclose(y.grad.numpy(), np.ones(3))             # 2 entries of 1/2
    z = tg.tensor([0.0, 1.0], requires_grad=True)
    tg.special_logaddexp(z, 0.0).backward(tg.ones(2))
    np.testing.assert_allclose(z.grad.numpy(), 1 / (1 + np.exp(-z.numpy())))


def test_logaddexp_jvp_with_one_tangent_matches_finite_differences():
    # The kit gives every input a tangent; forward mode often has only one (the other
    # input a constant, or a Python number): the rule must skip the None one.
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 1)), rng.standard_normal(3)
    tx, ty = rng.standard_normal((2, 1)), rng.standard_normal(3)
    jvp = tg.registry().ops["special_logaddexp"].jvp
    ans = tg.special_logaddexp(tg.tensor(x), tg.tensor(y))
    eps = 1e-6
    for tangents, dx, dy in (((tg.tensor(tx), None), tx, 0.0), ((None, tg.tensor(ty)), 0.0, ty)):
        got = jvp(tangents, ans, tg.tensor(x), tg.tensor(y)).numpy()
        want = (np.logaddexp(x + eps * dx, y + eps * dy)
                - np.logaddexp(x - eps * dx, y - eps * dy)) / (2 * eps)
        np.testing.assert_allclose(np.broadcast_to(got, (2, 3)), want, rtol=1e-7)
    got = jvp((tg.tensor(np.array([1.0, 2.0])), None), tg.special_logaddexp(tg.zeros(2), 0.0),
              tg.zeros(2), 0.0)
    np.testing.assert_allclose(got.numpy(), [0.5, 1.0])


@pytest.mark.parametrize("name", tapegrad_special.OPS)
def test_float32_in_float32_out_and_gradients(name):
    x = tg.tensor(np.array([-1.5, 0.25, 2.0], np.float32), requires_grad=True)
    y = getattr(tg, name)(*([x, x * 0.5] if name == "special_logaddexp" else [x]))
    assert y.dtype == np.float32
    y.backward(tg.ones(3, dtype=np.float32))
    assert x.grad.dtype == np.float32


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("beta", [0, -1.0])
def test_softplus_beta_must_be_positive(beta):
    with pytest.raises(ValueError, match=r"softplus: beta must be positive.*shape \(2,\)"):
        tg.special_softplus(tg.ones(2), beta=beta)


def test_logaddexp_shapes_that_do_not_broadcast_are_named():
    with pytest.raises(ValueError, match=r"logaddexp.*\(2,\).*\(3,\)"):
        tg.special_logaddexp(tg.ones(2), tg.ones(3))


# ---------------------------------------------------------------------------------------
# Packaging and docs
# ---------------------------------------------------------------------------------------

def test_entry_point_resolves_to_the_ops_module():
    eps = [ep for ep in metadata.entry_points(group="tapegrad") if ep.name == "special"]
    if not eps:
        pytest.skip("tapegrad-special is not installed (no entry point to resolve)")
    (ep,) = eps
    assert ep.value == "tapegrad_special.ops"
    assert ep.load() is ops
    assert tg.special_erf.plugin == "tapegrad-special"
    assert "tapegrad-special" not in tg.registry().failed


@pytest.mark.parametrize("module", [tapegrad_special, ops], ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    result = run_doctests(module)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_examples_run():
    result = run_doctests(README)
    assert result.attempted > 0
    assert result.failed == 0
