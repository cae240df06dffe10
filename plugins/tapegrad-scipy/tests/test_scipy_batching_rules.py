"""vmap's batching rules of the tapegrad-scipy ops: which ops have one (so a lost rule
shows), and the special functions, logsumexp/softmax, solve_triangular and convolve,
vmapped, against a loop of SciPy calls (in_axes/out_axes, unbatched operands, nested,
per-example gradients).

tg.vmap lives in tapegrad-higher, which is not a dependency of this plugin:
tapegrad.testing.vmap_call drives the core's batch levels directly, as the contract kit
does.
"""

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.signal as ss
import scipy.special as sp
import tapegrad as tg
from tapegrad.testing import assert_same, batching_fallbacks, grad_of, loop_call, vmap_call

RNG = np.random.default_rng(5)
# SciPy is the reference: some rules compute by other formulas than SciPy does
RTOL = 1e-10

# sqrtm and its Sylvester solve go through one eigendecomposition per matrix: vmap runs
# them once per example.
WITHOUT_RULE = {"scipy_linalg_sqrtm", "_scipy_linalg_sylvester_sym"}


@pytest.fixture
def fallbacks():
    """The names of the ops vmap ran once per example (the loop fallback) in a test."""
    with batching_fallbacks() as seen:
        yield seen


def test_every_op_but_the_eigendecompositions_has_a_batching_rule():
    mine = {name: op for name, op in tg.registry().ops.items() if op.plugin == "tapegrad-scipy"}
    assert {"erf", "gammaln", "xlogy", "polygamma", "scipy_special_logsumexp",
            "scipy_linalg_solve_triangular", "scipy_signal_convolve"} <= set(mine)
    assert {name for name, op in mine.items() if op.batch is None} == WITHOUT_RULE
    for name in ("erf", "gammaln", "expit", "xlogy", "beta", "polygamma", "iv"):
        assert mine[name].batch == "elementwise", name


def test_special_functions_with_in_axes_and_shared_operands(fallbacks):
    x = RNG.uniform(0.5, 2.5, (3, 6, 4))        # in_axes=1: 6 examples of (3, 4)
    y = RNG.uniform(0.5, 2.5, (3, 4))           # shared

    def f(v, u):
        return (tg.erf(v) * tg.gammaln(u) + tg.xlogy(v, u) - tg.polygamma(1, v)
                + tg.iv(1.5, u) * tg.expit(-v))

    def f_np(v, u):
        return (sp.erf(v) * sp.gammaln(u) + sp.xlogy(v, u) - sp.polygamma(1, v)
                + sp.iv(1.5, u) * sp.expit(-v))

    got = vmap_call(f, in_axes=(1, None), out_axes=-1)(x, y)
    assert_same(got, loop_call(f_np, in_axes=(1, None), out_axes=-1)(x, y), rtol=RTOL)
    assert fallbacks == []


@pytest.mark.parametrize("params", [{}, {"axis": 0}, {"axis": (0, -1), "keepdims": True},
                                    {"axis": -1, "keepdims": True}])
@pytest.mark.parametrize("b_axis", [None, 0])
def test_logsumexp_with_a_batched_or_shared_b(params, b_axis, fallbacks):
    a = RNG.standard_normal((5, 3, 4))
    b = RNG.uniform(0.5, 2.0, (5, 4) if b_axis == 0 else (4,))    # broadcasts against a

    got = vmap_call(lambda p, q: tg.scipy.special.logsumexp(p, b=q, **params),
                    in_axes=(0, b_axis))(a, b)
    want = loop_call(lambda p, q: sp.logsumexp(p, b=q, **params), in_axes=(0, b_axis))(a, b)
    assert_same(got, want, rtol=RTOL)
    assert fallbacks == []


def test_logsumexp_with_a_b_of_more_axes_than_a():
    a = RNG.standard_normal((5, 4))                  # 5 examples of (4,)
    b = RNG.uniform(0.5, 2.0, (5, 3, 4))             # 5 examples of (3, 4)
    got = vmap_call(lambda p, q: tg.scipy.special.logsumexp(p, axis=-1, b=q))(a, b)
    assert_same(got, loop_call(lambda p, q: sp.logsumexp(p, axis=-1, b=q))(a, b), rtol=RTOL)


def test_per_example_gradient_of_logsumexp_and_softmax(fallbacks):
    # (logsumexp's VJP read np.shape of its tensor inputs, which vmap refuses)
    a = RNG.standard_normal((4, 3, 5))
    u = RNG.standard_normal((4, 3))

    def g_of(p, cot):
        p = p.requires_grad_(True)
        out = tg.scipy.special.logsumexp(p, axis=1) + tg.scipy.special.softmax(p).sum(1)
        return grad_of(out, p, cot)

    def g_np(p, cot):
        # d/dp of sum_i cot_i (logsumexp(p_i) + sum_j s_ij), s the softmax of all entries
        s = sp.softmax(p)
        return cot[:, None] * sp.softmax(p, axis=1) + s * (cot[:, None] - np.sum(cot[:, None] * s))

    assert_same(vmap_call(g_of)(a, u), loop_call(g_np)(a, u), rtol=RTOL)
    assert fallbacks == []


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [None, 0, (0, 1), -1])
def test_softmax_over_logical_axes(name, axis, fallbacks):
    x = RNG.standard_normal((3, 4, 5))           # in_axes=2: 5 examples of (3, 4)
    got = vmap_call(lambda v: getattr(tg.scipy.special, name)(v, axis=axis), in_axes=2)(x)
    assert_same(got, loop_call(lambda v: getattr(sp, name)(v, axis=axis), in_axes=2)(x), rtol=RTOL)
    assert fallbacks == []


def _triangular(n):
    return np.tril(RNG.standard_normal((n, n)) * 0.3) + np.diag(RNG.uniform(1.0, 2.0, n))


@pytest.mark.parametrize("b_shape", [(4,), (4, 2)])
@pytest.mark.parametrize("params", [{"lower": True}, {"lower": True, "trans": 1},
                                    {"lower": True, "unit_diagonal": True}])
def test_solve_triangular_of_one_matrix_and_batched_right_hand_sides(b_shape, params,
                                                                     fallbacks):
    a = _triangular(4)
    b = RNG.standard_normal((6,) + b_shape)
    got = vmap_call(lambda q: tg.scipy.linalg.solve_triangular(a, q, **params))(b)
    assert_same(got, loop_call(lambda q: sl.solve_triangular(a, q, **params))(b), rtol=RTOL)
    assert fallbacks == []


@pytest.mark.filterwarnings("ignore::tapegrad._batching.BatchingFallbackWarning")
def test_solve_triangular_with_a_matrix_per_example_runs_once_per_example(fallbacks):
    a = np.stack([_triangular(3) for _ in range(4)])
    b = RNG.standard_normal((4, 3))
    got = vmap_call(lambda p, q: tg.scipy.linalg.solve_triangular(p, q, lower=True))(a, b)
    assert_same(got, loop_call(lambda p, q: sl.solve_triangular(p, q, lower=True))(a, b), rtol=RTOL)
    assert fallbacks == ["scipy_linalg_solve_triangular"]


@pytest.mark.filterwarnings("ignore::tapegrad._batching.BatchingFallbackWarning")
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("batched", [(0, None), (None, 0)])
@pytest.mark.parametrize("shapes", [((6,), (3,)), ((3,), (6,)), ((4, 5), (3, 2))])
def test_convolve_with_one_input_batched(mode, batched, shapes, fallbacks):
    s1, s2 = shapes
    in1 = RNG.standard_normal((5,) + s1 if batched[0] == 0 else s1)
    in2 = RNG.standard_normal((5,) + s2 if batched[1] == 0 else s2)
    got = vmap_call(lambda p, q: tg.scipy.signal.convolve(p, q, mode=mode),
                    in_axes=batched)(in1, in2)
    want = loop_call(lambda p, q: ss.convolve(p, q, mode=mode), in_axes=batched)(in1, in2)
    assert_same(got, want, rtol=RTOL)
    # 'same' keeps in1's extent, so a batched in2 there, and a 'valid' whose larger input
    # is the unbatched one, run once per example (exactly)
    covers = all(p >= q for p, q in zip(s1, s2))         # in1 at least in2 everywhere
    covered = all(q >= p for p, q in zip(s1, s2))
    one_call = (batched[0] == 0 and (mode != "valid" or covers)) or (
        batched[1] == 0 and mode != "same" and (mode != "valid" or covered))
    assert fallbacks == ([] if one_call else ["scipy_signal_convolve"])


def test_nested_vmap_of_special_functions(fallbacks):
    x = RNG.uniform(0.2, 1.5, (3, 4, 5))
    got = vmap_call(vmap_call(lambda v: tg.scipy.special.logsumexp(tg.gammaln(v) * tg.erf(v))),
                    out_axes=1)(x)
    want = np.stack([[sp.logsumexp(sp.gammaln(x[i, j]) * sp.erf(x[i, j])) for j in range(4)]
                     for i in range(3)], axis=1)
    assert_same(got, want, rtol=RTOL)
    assert fallbacks == []
