"""vmap batching rules of tapegrad-linalg's ops: which ops have one (a lost rule shows),
and for the hot ones vmap with other in/out axes and nested vmap against a Python loop.

tg.vmap lives in tapegrad-higher, which is not a test dependency of this plugin:
tapegrad.testing.vmap_call opens batch levels with tapegrad._batching directly (as the
contract kit does)."""

import functools
import itertools

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _engine
from tapegrad.testing import assert_same, batching_fallbacks, grad_of, loop_call, vmap_call

WITH_RULES = {
    "matmul", "_einsum", "linalg_solve", "linalg_vector_norm",
    # batched over leading axes as NumPy's linalg: the vmapped axis is one more
    "linalg_inv", "linalg_det", "_linalg_slogdet", "linalg_cholesky", "_linalg_qr",
    "_linalg_eigh", "linalg_eigvalsh", "_linalg_eig", "linalg_eigvals", "_linalg_svd",
    "linalg_svdvals", "linalg_pinv", "linalg_matrix_rank",
    "_linalg_lstsq",          # (a batched a loops: NumPy's lstsq takes one matrix)
}


@pytest.fixture(autouse=True)
def fallbacks_allowed():
    """An op of WITH_RULES that went through the loop fallback (one call per example)
    fails the test, unless the test adds its name to this fixture's set (a rule that
    falls back on purpose). Other plugins' ops (the reshapes and transposes of a nested
    vmap) may still fall back: their rules are not this plugin's."""
    allowed = set()
    with batching_fallbacks() as fell_back:
        yield allowed
    assert not (set(fell_back) & WITH_RULES) - allowed, sorted((set(fell_back) & WITH_RULES)
                                                               - allowed)


# NOTE: not the last few ulps: the rules compute by other formulas than NumPy's loop
close = functools.partial(assert_same, rtol=1e-10, atol=1e-12)


def rand(*shape, seed=0):
    return np.random.default_rng(seed + 31 * len(shape) + sum(shape)).standard_normal(shape)


def test_ops_with_batching_rules():
    table = _engine.ops_table()
    have = {n for n, op in table.items() if op.plugin == "tapegrad-linalg" and op.batch is not None}
    assert WITH_RULES <= have, sorted(WITH_RULES - have)


# ---------------------------------------------------------------------------------------
# matmul: every rank combination, either operand batched alone or both
# ---------------------------------------------------------------------------------------

# logical shapes (x, y) of valid products: 1-d, 2-d, stacks, broadcast batch axes
MATMUL_SHAPES = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
    ((2, 2, 3), (2, 3, 4)), ((2, 1, 2, 3), (5, 3, 4)), ((2, 3, 4), (4,)), ((4,), (2, 4, 3)),
    ((2, 3, 4), (4, 2)), ((3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 2)),
]
B = 4


@pytest.mark.parametrize("xs,ys", MATMUL_SHAPES)
@pytest.mark.parametrize("which", ["both", "x", "y"])
def test_matmul_vmap_equals_loop(xs, ys, which):
    in_axes = {"both": (0, 0), "x": (0, None), "y": (None, 0)}[which]
    x = rand(B, *xs) if in_axes[0] == 0 else rand(*xs)
    y = rand(B, *ys, seed=1) if in_axes[1] == 0 else rand(*ys, seed=1)
    got = vmap_call(tg.matmul, in_axes)(x, y).numpy()
    want = loop_call(np.matmul, in_axes)(x, y)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs,ys", [((2, 3), (3,)), ((3,), (3, 4)), ((2, 3, 4), (4, 2)),
                                   ((3,), (3,))])
def test_matmul_other_axes(xs, ys):
    # x mapped along its last axis, y along its first, the result's mapped axis last
    x = rand(*xs, B)
    y = rand(B, *ys, seed=1)
    in_axes = (len(xs), 0)
    out_axis = len(np.matmul(rand(*xs), rand(*ys)).shape)
    got = vmap_call(tg.matmul, in_axes, out_axis)(x, y).numpy()
    want = loop_call(np.matmul, in_axes, out_axis)(x, y)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs,ys", [((2, 3), (3,)), ((3,), (3,)), ((2, 3), (3, 4)),
                                   ((3,), (2, 3, 4))])
@pytest.mark.parametrize("outer,inner", list(itertools.product(
    [(0, 0), (0, None), (None, 0)], repeat=2)))
def test_matmul_nested_vmap(xs, ys, outer, inner):
    # shapes: axis 0 for the outer map (size 2), the inner map next (size B)
    def make(shape, seed, o, i):
        return rand(*((2,) if o == 0 else ()), *((B,) if i == 0 else ()), *shape, seed=seed)
    x, y = make(xs, 0, outer[0], inner[0]), make(ys, 1, outer[1], inner[1])
    # the inner map's axis of an argument is axis 0 of what the outer map hands on
    inner_axes = tuple(None if i is None else 0 for i in inner)
    got = vmap_call(vmap_call(tg.matmul, inner_axes), outer)(x, y).numpy()
    want = loop_call(loop_call(np.matmul, inner_axes), outer)(x, y)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs,ys", MATMUL_SHAPES[:6])
def test_matmul_per_example_gradients(xs, ys):
    # the gradient inside vmap (per example) against per-example backward passes
    x, y = rand(B, *xs), rand(*ys, seed=1)

    def per_example_grad(xl):
        xl = xl.requires_grad_(True)
        return grad_of(tg.sum(tg.matmul(xl, tg.tensor(y, requires_grad=True)) ** 2), xl)
    got = vmap_call(per_example_grad)(x).numpy()
    for i in range(B):
        xi = tg.tensor(x[i], requires_grad=True)
        tg.sum(tg.matmul(xi, tg.tensor(y)) ** 2).backward()
        np.testing.assert_allclose(got[i], xi.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_matmul_under_vmap_refuses_bad_shapes():
    with pytest.raises(ValueError, match="matmul: inner dimensions differ"):
        vmap_call(tg.matmul, (0, None))(rand(B, 2, 3), rand(4, 2))
    with pytest.raises(ValueError, match="matmul: 0-d operands"):
        vmap_call(tg.matmul, (0, None))(rand(B), rand(3))


# ---------------------------------------------------------------------------------------
# solve: vector and matrix right-hand sides, either operand batched, stacks broadcasting
# ---------------------------------------------------------------------------------------

def _well_conditioned(*shape, seed=0):
    return rand(*shape, seed=seed) + 3 * np.eye(shape[-1])


SOLVE_SHAPES = [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (3,)), ((2, 3, 3), (3, 2)),
                ((3, 3), (2, 3, 2)), ((2, 1, 3, 3), (4, 3, 1))]


@pytest.mark.parametrize("sa,sb", SOLVE_SHAPES)
@pytest.mark.parametrize("which", [(0, 0), (0, None), (None, 0)])
def test_solve_vmap_equals_loop(sa, sb, which):
    a = _well_conditioned(*((B,) if which[0] == 0 else ()), *sa)
    b = rand(*((B,) if which[1] == 0 else ()), *sb, seed=1)
    close(vmap_call(tg.linalg_solve, which)(a, b), loop_call(np.linalg.solve, which)(a, b))


def test_solve_other_axes_and_nested():
    a = _well_conditioned(B, 3, 3, seed=2).transpose(1, 0, 2)     # (3, B, 3): axis 1
    b = rand(2, B, 3, seed=3)                                      # inner axis 0, outer 1
    f = vmap_call(vmap_call(tg.linalg_solve, (None, 0)), (1, 1), out_axes=1)
    ref = loop_call(loop_call(np.linalg.solve, (None, 0)), (1, 1), out_axes=1)
    close(f(a, b), ref(a, b))


def test_solve_under_vmap_refuses_bad_shapes():
    with pytest.raises(ValueError, match="vector b has length 2, not 3"):
        vmap_call(tg.linalg_solve, (0, None))(_well_conditioned(B, 3, 3), rand(2))
    with pytest.raises(ValueError, match="b must be at least 1-d"):
        vmap_call(tg.linalg_solve, (None, 0))(_well_conditioned(3, 3), rand(B))


# ---------------------------------------------------------------------------------------
# the stacked ops: one more leading axis
# ---------------------------------------------------------------------------------------

def _spd(*shape, seed=0):
    m = rand(*shape, seed=seed)
    return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])


STACKED = [
    ("linalg_inv", np.linalg.inv, _well_conditioned, {}),
    ("linalg_det", np.linalg.det, _well_conditioned, {}),
    ("linalg_cholesky", np.linalg.cholesky, _spd, {}),
    ("linalg_cholesky", lambda a: np.linalg.cholesky(a, upper=True), _spd, {"upper": True}),
    ("linalg_eigvalsh", np.linalg.eigvalsh, _spd, {}),
    ("linalg_svdvals", np.linalg.svdvals, rand, {}),
    ("linalg_pinv", np.linalg.pinv, rand, {}),
    ("linalg_matrix_rank", np.linalg.matrix_rank, rand, {}),
]


@pytest.mark.parametrize("name,ref,make,params", STACKED)
@pytest.mark.parametrize("logical", [(3, 3), (2, 3, 3)])
def test_stacked_ops_other_axis_and_nested(name, ref, make, params, logical):
    a = np.moveaxis(make(B, *logical), 0, -1)        # the mapped axis last
    f = lambda x: getattr(tg, name)(x, **params)    # noqa: E731
    close(vmap_call(f, (a.ndim - 1,))(a), loop_call(ref, (a.ndim - 1,))(a))
    a2 = make(2, B, *logical)
    close(vmap_call(vmap_call(f, (0,)), (1,), out_axes=0)(a2),
          loop_call(loop_call(ref, (0,)), (1,))(a2))


def test_stacked_op_on_a_vector_raises_its_own_error():
    # a batched (B, 3) must not be read as one matrix: each example is a 1-d input
    with pytest.raises(np.linalg.LinAlgError, match="1-dimensional"):
        vmap_call(tg.linalg_inv, (0,))(rand(3, 3))


@pytest.mark.filterwarnings("ignore::tapegrad._batching.BatchingFallbackWarning")
def test_stacked_op_with_an_array_parameter_loops_exactly(fallbacks_allowed):
    fallbacks_allowed.add("linalg_matrix_rank")
    a = rand(B, 2, 3, 3)
    a[1, 0] = np.outer(a[1, 0, 0], a[1, 0, 1])          # rank 1
    tol = np.array([1e-8, 0.5])
    close(vmap_call(lambda x: tg.linalg_matrix_rank(x, tol=tol), (0,))(a),
          loop_call(lambda x: np.linalg.matrix_rank(x, tol=tol), (0,))(a))


def test_vector_norm():
    x = rand(3, B, 2)
    for kw in [dict(), dict(ord=1, axis=-1), dict(ord=np.inf, axis=(0, 1), keepdims=True)]:
        close(vmap_call(lambda v: tg.linalg_vector_norm(v, **kw), (1,))(x),
              loop_call(lambda v: np.linalg.vector_norm(v, **kw), (1,))(x))


# ---------------------------------------------------------------------------------------
# einsum: the vmapped axis as one more label
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", ((2, 3), (3, 4))), ("ii->i", ((3, 3),)), ("i,j->ij", ((2,), (3,))),
    ("...ij,...jk", ((2, 1, 2, 3), (3, 3, 2))), ("ij,j->ij", ((2, 3), (1,))),
    ("i,->i", ((3,), ())), ("ij", ((2, 3),))])
def test_einsum_vmap_equals_loop(subscripts, shapes):
    for which in itertools.product((0, None), repeat=len(shapes)):
        if 0 not in which:
            continue
        args = [rand(*((B,) if ax == 0 else ()), *sh, seed=k)
                for k, (sh, ax) in enumerate(zip(shapes, which))]
        close(vmap_call(lambda *xs: tg.einsum(subscripts, *xs), which)(*args),
              loop_call(lambda *xs: np.einsum(subscripts, *xs), which)(*args))


def test_einsum_nested():
    x, y = rand(2, B, 3, 4), rand(B, 4, 5, seed=1)
    f = vmap_call(vmap_call(lambda a, b: tg.einsum("ij,jk->ik", a, b), (0, None)), (1, 0))
    ref = loop_call(loop_call(lambda a, b: np.einsum("ij,jk->ik", a, b), (0, None)), (1, 0))
    close(f(x, y), ref(x, y))


# ---------------------------------------------------------------------------------------
# gradients through eigenvectors / singular vectors inside vmap: their check for
# repeated eigenvalues (singular values) runs per example
# ---------------------------------------------------------------------------------------

def _per_example_grad(f, a):
    def grad_f(al):
        al = al.requires_grad_(True)
        return grad_of(f(al), al)
    return vmap_call(grad_f)(a).numpy()


@pytest.mark.parametrize("f", [
    lambda a: tg.sum(tg.linalg.eigh(a)[1][..., 0] ** 3),
    lambda a: tg.sum(tg.linalg.svd(a)[0] ** 3),
    lambda a: tg.sum(tg.linalg.eig(a)[1] ** 3)])
def test_per_example_gradients_through_vectors(f):
    a = _spd(B, 3, 3)
    got = _per_example_grad(f, a)
    for i in range(B):
        ai = tg.tensor(a[i], requires_grad=True)
        f(ai).backward()
        np.testing.assert_allclose(got[i], ai.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_repeated_eigenvalue_in_one_example_raises_inside_vmap():
    a = _spd(B, 3, 3)
    a[2] = np.diag([1.0, 1.0, 2.0])          # example 2: a repeated eigenvalue
    c = tg.tensor(rand(3, 3, seed=7))       # a loss that depends on the eigenvectors' basis
    with pytest.raises(np.linalg.LinAlgError, match="repeated"):
        _per_example_grad(lambda x: tg.sum(tg.linalg.eigh(x)[1] * c), a)
    a[2] = _spd(3, 3)                       # (and without it, no error)
    assert np.isfinite(_per_example_grad(lambda x: tg.sum(tg.linalg.eigh(x)[1] * c), a)).all()


@pytest.mark.parametrize("sb", [(5,), (5, 2)])
def test_lstsq_shared_matrix(sb):
    a, b = rand(5, 3), rand(B, *sb, seed=1)
    f = lambda a, b: tg.linalg.lstsq(a, b)[0]            # noqa: E731
    close(vmap_call(f, (None, 0))(a, b),
          loop_call(lambda a, b: np.linalg.lstsq(a, b)[0], (None, 0))(a, b))


@pytest.mark.filterwarnings("ignore::tapegrad._batching.BatchingFallbackWarning")
def test_lstsq_batched_matrix_loops_exactly(fallbacks_allowed):
    # (the op: tg.linalg.lstsq itself reads a's rank on the host, which vmap refuses)
    fallbacks_allowed.add("_linalg_lstsq")
    a, b = rand(B, 5, 3), rand(5, seed=1)
    close(vmap_call(tg._linalg_lstsq, (0, None))(a, b),
          loop_call(lambda a, b: np.linalg.lstsq(a, b)[0], (0, None))(a, b))
    with pytest.raises(RuntimeError, match="vmap"):
        vmap_call(lambda a, b: tg.linalg.lstsq(a, b)[0], (0, None))(a, b)
