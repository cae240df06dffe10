"""vmap batching rules of tapegrad-linalg's ops: which ops have one (a lost rule shows),
and for the hot ones vmap with other in/out axes and nested vmap against a Python loop.

tg.vmap lives in tapegrad-higher, which is not a test dependency of this plugin: the
helper `vmap` below opens batch levels with tapegrad._batching directly (as the contract
kit does)."""

import itertools
import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _batching, _engine
from tapegrad._engine import run_backward

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
    _batching._warned.clear()       # the fallback warns once per op and process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", _batching.BatchingFallbackWarning)
        yield allowed
    fell_back = {str(w.message).split("'")[1] for w in caught
                 if issubclass(w.category, _batching.BatchingFallbackWarning)}
    assert not (fell_back & WITH_RULES) - allowed, sorted((fell_back & WITH_RULES) - allowed)


def vmap(f, in_axes, out_axis=0):
    """f mapped over axis in_axes[i] of argument i (None: shared), the mapped axis of the
    result at out_axis: tg.vmap's semantics with the engine's batch levels."""
    def mapped(*args):
        size = next(a.shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
        level = _batching.enter(size)
        try:
            logical = [a if ax is None else _batching.wrap(_front(tg.asarray(a), ax), level)
                       for a, ax in zip(args, in_axes)]
            out = f(*logical)
        finally:
            _batching.exit(level)
        phys, batched = _batching.physical(out, level)
        assert batched
        return phys if out_axis == 0 else tg.moveaxis(phys, 0, out_axis)
    return mapped


def _front(a, axis):
    return a if axis == 0 else tg.moveaxis(a, axis, 0)


def loop(f, in_axes, out_axis=0):
    """The reference: f once per example, stacked."""
    def looped(*args):
        size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
        outs = [f(*[a if ax is None else np.take(np.asarray(a), i, axis=ax)
                    for a, ax in zip(args, in_axes)]) for i in range(size)]
        return np.stack([np.asarray(o.numpy() if hasattr(o, "numpy") else o) for o in outs],
                        axis=out_axis)
    return looped


def close(got, want):
    got = got.numpy() if hasattr(got, "numpy") else got
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


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
    got = vmap(tg.matmul, in_axes)(x, y).numpy()
    want = loop(np.matmul, in_axes)(x, y)
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
    got = vmap(tg.matmul, in_axes, out_axis)(x, y).numpy()
    want = loop(np.matmul, in_axes, out_axis)(x, y)
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
    got = vmap(vmap(tg.matmul, inner_axes), outer)(x, y).numpy()
    want = loop(loop(np.matmul, inner_axes), outer)(x, y)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs,ys", MATMUL_SHAPES[:6])
def test_matmul_per_example_gradients(xs, ys):
    # the gradient inside vmap (per example) against per-example backward passes
    x, y = rand(B, *xs), rand(*ys, seed=1)
    level = _batching.enter(B)
    try:
        xl = _batching.wrap(tg.tensor(x), level).requires_grad_(True)
        yl = tg.tensor(y, requires_grad=True)
        out = tg.sum(tg.matmul(xl, yl) ** 2)
        seed = _batching.wrap(tg.ones(B), level)
        gx, = run_backward((out,), (seed,), None, False, (xl,), True)
    finally:
        _batching.exit(level)
    got = _batching.physical(gx, level)[0].numpy()
    for i in range(B):
        xi = tg.tensor(x[i], requires_grad=True)
        tg.sum(tg.matmul(xi, tg.tensor(y)) ** 2).backward()
        np.testing.assert_allclose(got[i], xi.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_matmul_under_vmap_refuses_bad_shapes():
    with pytest.raises(ValueError, match="matmul: inner dimensions differ"):
        vmap(tg.matmul, (0, None))(rand(B, 2, 3), rand(4, 2))
    with pytest.raises(ValueError, match="matmul: 0-d operands"):
        vmap(tg.matmul, (0, None))(rand(B), rand(3))


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
    close(vmap(tg.linalg_solve, which)(a, b), loop(np.linalg.solve, which)(a, b))


def test_solve_other_axes_and_nested():
    a = _well_conditioned(B, 3, 3, seed=2).transpose(1, 0, 2)     # (3, B, 3): axis 1
    b = rand(2, B, 3, seed=3)                                      # inner axis 0, outer 1
    f = vmap(vmap(tg.linalg_solve, (None, 0)), (1, 1), out_axis=1)
    ref = loop(loop(np.linalg.solve, (None, 0)), (1, 1), out_axis=1)
    close(f(a, b), ref(a, b))


def test_solve_under_vmap_refuses_bad_shapes():
    with pytest.raises(ValueError, match="vector b has length 2, not 3"):
        vmap(tg.linalg_solve, (0, None))(_well_conditioned(B, 3, 3), rand(2))
    with pytest.raises(ValueError, match="b must be at least 1-d"):
        vmap(tg.linalg_solve, (None, 0))(_well_conditioned(3, 3), rand(B))


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
    close(vmap(f, (a.ndim - 1,))(a), loop(ref, (a.ndim - 1,))(a))
    a2 = make(2, B, *logical)
    close(vmap(vmap(f, (0,)), (1,), out_axis=0)(a2), loop(loop(ref, (0,)), (1,))(a2))


def test_stacked_op_on_a_vector_raises_its_own_error():
    # a batched (B, 3) must not be read as one matrix: each example is a 1-d input
    with pytest.raises(np.linalg.LinAlgError, match="1-dimensional"):
        vmap(tg.linalg_inv, (0,))(rand(3, 3))


def test_stacked_op_with_an_array_parameter_loops_exactly(fallbacks_allowed):
    fallbacks_allowed.add("linalg_matrix_rank")
    a = rand(B, 2, 3, 3)
    a[1, 0] = np.outer(a[1, 0, 0], a[1, 0, 1])          # rank 1
    tol = np.array([1e-8, 0.5])
    close(vmap(lambda x: tg.linalg_matrix_rank(x, tol=tol), (0,))(a),
          loop(lambda x: np.linalg.matrix_rank(x, tol=tol), (0,))(a))


def test_vector_norm():
    x = rand(3, B, 2)
    for kw in [dict(), dict(ord=1, axis=-1), dict(ord=np.inf, axis=(0, 1), keepdims=True)]:
        close(vmap(lambda v: tg.linalg_vector_norm(v, **kw), (1,))(x),
              loop(lambda v: np.linalg.vector_norm(v, **kw), (1,))(x))


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
        close(vmap(lambda *xs: tg.einsum(subscripts, *xs), which)(*args),
              loop(lambda *xs: np.einsum(subscripts, *xs), which)(*args))


def test_einsum_nested():
    x, y = rand(2, B, 3, 4), rand(B, 4, 5, seed=1)
    f = vmap(vmap(lambda a, b: tg.einsum("ij,jk->ik", a, b), (0, None)), (1, 0))
    close(f(x, y), loop(loop(lambda a, b: np.einsum("ij,jk->ik", a, b), (0, None)), (1, 0))(x, y))


# ---------------------------------------------------------------------------------------
# gradients through eigenvectors / singular vectors inside vmap: their check for
# repeated eigenvalues (singular values) runs per example
# ---------------------------------------------------------------------------------------

def _per_example_grad(f, a):
    level = _batching.enter(a.shape[0])
    try:
        al = _batching.wrap(tg.tensor(a), level).requires_grad_(True)
        out = f(al)
        (g,) = run_backward((out,), (_batching.wrap(tg.ones(a.shape[0]), level),), None,
                            False, (al,), True)
    finally:
        _batching.exit(level)
    return _batching.physical(g, level)[0].numpy()


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
    close(vmap(f, (None, 0))(a, b), loop(lambda a, b: np.linalg.lstsq(a, b)[0], (None, 0))(a, b))


def test_lstsq_batched_matrix_loops_exactly(fallbacks_allowed):
    # (the op: tg.linalg.lstsq itself reads a's rank on the host, which vmap refuses)
    fallbacks_allowed.add("_linalg_lstsq")
    a, b = rand(B, 5, 3), rand(5, seed=1)
    close(vmap(tg._linalg_lstsq, (0, None))(a, b),
          loop(lambda a, b: np.linalg.lstsq(a, b)[0], (0, None))(a, b))
    with pytest.raises(RuntimeError, match="vmap"):
        vmap(lambda a, b: tg.linalg.lstsq(a, b)[0], (0, None))(a, b)
