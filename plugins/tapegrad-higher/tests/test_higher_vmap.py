"""vmap and tg.func (issue 17, items 2-3): tg.vmap against a Python loop over examples,
its composition with tg.func.grad / jacfwd / jacrev / hessian / jvp and with itself, the
randomness modes, tg.Function and tg.compile inside vmap, and the refusals. References:
the loop of per-example calls (the definition of vmap), finite differences, and reverse
mode (tg.jacobian), which the contract kit checks against finite differences."""

import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _batching, _engine

RNG = np.random.default_rng(170)


def loop(f, *args, in_axes=0):
    """The definition: f on each example, stacked (numpy)."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    n = next(np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None)
    outs = []
    for i in range(n):
        ex = [a if ax is None else tg.tensor(np.take(np.asarray(a), i, axis=ax))
              for a, ax in zip(args, axes)]
        outs.append(np.asarray(f(*ex)))
    return np.stack(outs)


def fd_grad(f, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (float(f(tg.tensor(x + e))) - float(f(tg.tensor(x - e)))) / (2 * eps)
    return g


W = RNG.standard_normal((4, 3))
FUNCTIONS = {
    "elementwise": lambda x: tg.sin(x) * tg.exp(-x * x) + 2.0,
    "matvec": lambda x: tg.tanh(tg.tensor(W) @ x),
    "reduce": lambda x: (x ** 2).sum() / (1.0 + x.mean()),
    "softmax": lambda x: tg.exp(x) / tg.exp(x).sum(),
    "index_reshape": lambda x: tg.reshape(x[1:], (2, 1)) * x[0],
    "outer": lambda x: x[:, None] * x[None, :],
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_vmap_equals_the_loop_over_examples(name):
    f = FUNCTIONS[name]
    xs = RNG.standard_normal((5, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _batching.BatchingFallbackWarning)
        got = tg.vmap(f)(tg.tensor(xs)).numpy()
    np.testing.assert_allclose(got, loop(f, xs), rtol=1e-12, atol=1e-14)


def test_in_axes_out_axes_and_unmapped_arguments():
    xs = RNG.standard_normal((3, 6))          # mapped over axis 1
    w = RNG.standard_normal(3)

    def f(x, w):
        return x * w + w.sum()

    got = tg.vmap(f, in_axes=(1, None), out_axes=1)(tg.tensor(xs), tg.tensor(w)).numpy()
    want = loop(f, xs, tg.tensor(w), in_axes=(1, None)).T
    np.testing.assert_allclose(got, want, rtol=1e-13)
    # torch.func's spellings
    got2 = tg.vmap(f, in_dims=(1, None), out_dims=1)(tg.tensor(xs), tg.tensor(w)).numpy()
    np.testing.assert_array_equal(got2, got)
    # negative axes
    got3 = tg.vmap(f, in_axes=(-1, None), out_axes=-1)(tg.tensor(xs), tg.tensor(w)).numpy()
    np.testing.assert_array_equal(got3, got)


def test_containers_of_tensors_and_keyword_arguments():
    a, b = RNG.standard_normal((4, 2)), RNG.standard_normal((4, 2))

    def f(pair, scale=1.0):
        return {"sum": (pair[0] + pair[1]) * scale, "prod": pair[0] * pair[1]}

    out = tg.vmap(f)((tg.tensor(a), tg.tensor(b)), scale=3.0)
    np.testing.assert_allclose(out["sum"].numpy(), (a + b) * 3.0, rtol=1e-15)
    np.testing.assert_allclose(out["prod"].numpy(), a * b, rtol=1e-15)


def test_an_output_that_does_not_depend_on_the_mapped_input_is_expanded():
    c = tg.tensor([1.0, 2.0])
    out = tg.vmap(lambda x: c * 2.0)(tg.zeros((3, 5)))
    np.testing.assert_array_equal(out.numpy(), np.tile([2.0, 4.0], (3, 1)))
    with pytest.raises(ValueError, match="out_axes=None"):
        tg.vmap(lambda x: x * 2.0, out_axes=None)(tg.zeros((3, 2)))


def test_nested_vmap_equals_the_double_loop():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((5, 4))

    def dot(x, y):
        return (x * y).sum()

    got = tg.vmap(tg.vmap(dot, in_axes=(None, 0)), in_axes=(0, None))(tg.tensor(a), tg.tensor(b))
    np.testing.assert_allclose(got.numpy(), a @ b.T, rtol=1e-13)


def test_chunk_size_gives_the_same_result():
    xs = tg.tensor(RNG.standard_normal((7, 3)))
    f = FUNCTIONS["matvec"]
    np.testing.assert_allclose(tg.vmap(f, chunk_size=3)(xs).numpy(), tg.vmap(f)(xs).numpy(),
                               rtol=1e-15)


# ---------------------------------------------------------------------------------------
# composition with reverse and forward mode
# ---------------------------------------------------------------------------------------

def test_per_example_gradients_vmap_of_grad_equal_one_gradient_per_example():
    w = RNG.standard_normal(3)
    xs = RNG.standard_normal((6, 3))
    ys = RNG.standard_normal(6)

    def loss(w, x, y):
        return (tg.tanh((x * w).sum()) - y) ** 2

    got = tg.vmap(tg.func.grad(loss), in_axes=(None, 0, 0))(tg.tensor(w), tg.tensor(xs),
                                                            tg.tensor(ys)).numpy()
    want = np.stack([fd_grad(lambda w_: loss(w_, tg.tensor(x), tg.tensor(y)), w)
                     for x, y in zip(xs, ys)])
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)


def test_grad_of_a_vmapped_function_goes_through_the_batch():
    xs = tg.tensor(RNG.standard_normal((5, 3)))

    def total(w):
        return tg.vmap(lambda x: tg.sin((x * w).sum()), in_axes=0)(xs).sum()

    w = RNG.standard_normal(3)
    g = tg.func.grad(total)(tg.tensor(w)).numpy()
    np.testing.assert_allclose(g, fd_grad(total, w), rtol=1e-7, atol=1e-9)


def test_vmap_of_jacfwd_and_jacrev_equal_the_per_example_jacobians():
    xs = RNG.standard_normal((4, 3))
    f = FUNCTIONS["matvec"]
    want = np.stack([tg.jacobian(f, tg.tensor(x)).numpy() for x in xs])
    np.testing.assert_allclose(tg.vmap(tg.jacfwd(f))(tg.tensor(xs)).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(tg.vmap(tg.jacrev(f))(tg.tensor(xs)).numpy(), want, rtol=1e-12)


def test_jacobian_of_a_vmapped_function_is_block_diagonal():
    xs = RNG.standard_normal((3, 2))
    f = FUNCTIONS["elementwise"]
    jac = tg.jacrev(tg.vmap(f))(tg.tensor(xs)).numpy()         # (3, 2, 3, 2)
    np.testing.assert_allclose(jac, tg.jacobian(lambda x: f(x), tg.tensor(xs)).numpy(),
                               rtol=1e-12)
    assert np.all(jac[0, :, 1, :] == 0)


def test_hessian_of_a_vmapped_function_and_vmap_of_hessians():
    xs = RNG.standard_normal((3, 3))
    f = FUNCTIONS["reduce"]
    per_example = tg.vmap(tg.func.hessian(f))(tg.tensor(xs)).numpy()
    want = np.stack([tg.hessian(f, tg.tensor(x)).numpy() for x in xs])
    np.testing.assert_allclose(per_example, want, rtol=1e-10, atol=1e-12)
    total = tg.hessian(lambda x: tg.vmap(f)(x).sum(), tg.tensor(xs)).numpy()
    for i in range(3):
        np.testing.assert_allclose(total[i, :, i, :], want[i], rtol=1e-10, atol=1e-12)


def test_third_derivative_per_example():
    xs = tg.tensor([0.3, -1.1, 2.0])
    d3 = tg.vmap(tg.func.grad(tg.func.grad(tg.func.grad(lambda x: tg.sin(x) * x))))(xs)
    x = xs.numpy()
    np.testing.assert_allclose(d3.numpy(), -3 * np.sin(x) - x * np.cos(x), rtol=1e-12)


def test_jvp_of_vmap_and_vmap_of_jvp_match_finite_differences():
    xs = RNG.standard_normal((4, 3))
    vs = RNG.standard_normal((4, 3))
    f = FUNCTIONS["softmax"]
    eps = 1e-6
    fd = (tg.vmap(f)(tg.tensor(xs + eps * vs)).numpy()
          - tg.vmap(f)(tg.tensor(xs - eps * vs)).numpy()) / (2 * eps)
    _, t1 = tg.jvp(tg.vmap(f), tg.tensor(xs), tg.tensor(vs))
    t2 = tg.vmap(lambda x, v: tg.func.jvp(f, (x,), (v,))[1])(tg.tensor(xs), tg.tensor(vs))
    np.testing.assert_allclose(t1.numpy(), fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(t2.numpy(), fd, rtol=1e-6, atol=1e-8)


def test_vmap_of_vjp_gives_the_rows_of_the_jacobian():
    x = tg.tensor(RNG.standard_normal(3))
    f = FUNCTIONS["matvec"]
    _, vjp_fn = tg.func.vjp(f, x)
    rows = tg.vmap(lambda u: vjp_fn(u)[0])(tg.eye(4)).numpy()
    np.testing.assert_allclose(rows, tg.jacobian(f, x).numpy(), rtol=1e-12)


# ---------------------------------------------------------------------------------------
# randomness, tg.Function, tg.compile, fallback
# ---------------------------------------------------------------------------------------

def test_random_draws_are_refused_by_default_and_follow_randomness():
    xs = tg.zeros((4, 3))
    with pytest.raises(RuntimeError, match="randomness"):
        tg.vmap(lambda x: x + tg.random.rand(3))(xs)
    diff = tg.vmap(lambda x: x + tg.random.rand(3), randomness="different")(xs).numpy()
    same = tg.vmap(lambda x: x + tg.random.rand(3), randomness="same")(xs).numpy()
    assert not np.allclose(diff[0], diff[1])
    np.testing.assert_array_equal(same, np.broadcast_to(same[0], same.shape))
    tg.random.manual_seed(3)
    a = tg.vmap(lambda x: x + tg.random.randn(3), randomness="different")(xs).numpy()
    tg.random.manual_seed(3)
    b = tg.random.randn(4, 3).numpy()
    np.testing.assert_array_equal(a, b)     # the examples' draws, in order


class Cube(tg.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return tg.tensor(x.numpy() ** 3)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3.0 * x * x


def test_a_function_inside_vmap_runs_per_example_and_refuses_an_inner_grad():
    xs = tg.tensor([[1.0, 2.0], [3.0, -1.0]])
    with pytest.warns(_batching.BatchingFallbackWarning, match="Cube"):
        out = tg.vmap(Cube.apply)(xs)
    np.testing.assert_array_equal(out.numpy(), xs.numpy() ** 3)
    w = tg.tensor([1.0, 2.0], requires_grad=True)        # gradient outside the vmap
    tg.vmap(lambda x: Cube.apply(x * w).sum())(xs).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), (3 * (xs.numpy() * [1, 2]) ** 2 * xs.numpy()).sum(0))
    with pytest.raises(NotImplementedError, match="inside tg.vmap"):
        tg.vmap(tg.func.grad(lambda x: Cube.apply(x).sum()))(xs)
    with pytest.raises(NotImplementedError, match="batch of size 0"):
        tg.vmap(Cube.apply)(tg.zeros((0, 2)))


def test_compiled_function_of_vmap_equals_eager():
    f = tg.vmap(lambda x: tg.tanh(tg.tensor(W) @ x).sum())
    step = tg.compile(f)
    for _ in range(3):
        xs = tg.tensor(RNG.standard_normal((5, 3)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = step(xs).numpy()
        np.testing.assert_allclose(got, f(xs).numpy(), rtol=1e-14)


def test_a_compiled_function_called_inside_vmap_runs_eagerly_with_a_warning():
    f = tg.compile(lambda x: tg.sin(x) * 2.0)
    xs = tg.tensor(RNG.standard_normal((4, 3)))
    f(xs[0])
    f(xs[0])                                    # recorded outside the vmap
    with pytest.warns(tg.CompileWarning, match="vmap"):
        out = tg.vmap(f)(xs)
    np.testing.assert_allclose(out.numpy(), np.sin(xs.numpy()) * 2.0, rtol=1e-15)


def test_an_op_without_a_batching_rule_runs_per_example_with_a_one_time_note():
    def vjp(g, ans, x):
        return (g * 3.0 * x * x,)

    op = _engine.Op("_test_cube_nobatch", "tests", {"cpu": lambda a: a ** 3}, vjp, None, 1,
                    False, (), None, False, True, [], "", None, True)
    _batching._warned.discard(op.name)
    xs = tg.tensor([[0.5, 2.0], [1.0, -1.0]])
    with pytest.warns(_batching.BatchingFallbackWarning, match="_test_cube_nobatch"):
        out = tg.vmap(op)(xs)
    np.testing.assert_array_equal(out.numpy(), xs.numpy() ** 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", _batching.BatchingFallbackWarning)
        g = tg.vmap(tg.func.grad(lambda x: op(x).sum()))(xs)   # one-time note
    np.testing.assert_allclose(g.numpy(), 3 * xs.numpy() ** 2, rtol=1e-15)


# ---------------------------------------------------------------------------------------
# refusals
# ---------------------------------------------------------------------------------------

def test_data_dependent_control_flow_and_value_reads_are_refused():
    xs = tg.tensor([[1.0, -2.0], [3.0, 4.0]])
    with pytest.raises(RuntimeError, match="vmap: bool"):
        tg.vmap(lambda x: x if x.sum() > 0 else -x)(xs)
    for read in (lambda x: x.numpy(), lambda x: x.sum().item(), lambda x: x.tolist(),
                 lambda x: np.asarray(x), repr):
        with pytest.raises(RuntimeError, match="vmap"):
            tg.vmap(read)(xs)
    # the tensor-op spelling works
    out = tg.vmap(lambda x: tg.where(x.sum() > 0, x, -x))(xs)
    np.testing.assert_array_equal(out.numpy(), [[-1.0, 2.0], [3.0, 4.0]])


def test_in_place_writes_on_batched_tensors_are_refused():
    xs = tg.tensor([[1.0, 2.0], [3.0, 4.0]])

    def add_in_place(x):
        y = x * 1.0
        y += 1.0
        return y

    with pytest.raises(RuntimeError, match="in place"):
        tg.vmap(add_in_place)(xs)
    buf = tg.zeros(2)

    def write_into_unbatched(x):
        buf[...] = x
        return buf

    with pytest.raises(RuntimeError, match="in place"):
        tg.vmap(write_into_unbatched)(xs)


def test_backward_inside_vmap_is_refused():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="backward"):
        tg.vmap(lambda x: (x * w).sum().backward())(tg.ones((3, 2)))
    assert w.grad is None


def test_a_batched_tensor_kept_after_its_vmap_returned_refuses_to_be_used():
    kept = []
    tg.vmap(lambda x: kept.append(x) or x)(tg.ones((2, 3)))
    with pytest.raises(RuntimeError, match="vmap"):
        kept[0] + 1.0
    with pytest.raises(RuntimeError, match="vmap"):
        kept[0].numpy()


def test_bad_arguments_raise_clear_errors():
    x = tg.ones((3, 2))
    with pytest.raises(ValueError, match="different sizes"):
        tg.vmap(lambda a, b: a + b)(x, tg.ones((4, 2)))
    with pytest.raises(ValueError, match="out of range"):
        tg.vmap(lambda a: a, in_axes=2)(x)
    with pytest.raises(ValueError, match="at least one"):
        tg.vmap(lambda a: a, in_axes=None)(x)
    with pytest.raises(ValueError, match="0-d"):
        tg.vmap(lambda a: a)(tg.tensor(1.0))
    with pytest.raises(ValueError, match="only tensors"):
        tg.vmap(lambda a, n: a * n, in_axes=(0, 0))(x, 3)
    with pytest.raises(TypeError, match="must return tensors"):
        tg.vmap(lambda a: 3)(x)
    with pytest.raises(ValueError, match="in_axes has 1 entries"):
        tg.vmap(lambda a, b: a, in_axes=(0,))(x, x)
    with pytest.raises(ValueError, match="randomness"):
        tg.vmap(lambda a: a, randomness="sometimes")
    with pytest.raises(ValueError, match="scalar"):
        tg.func.grad(lambda a: a * 2.0)(tg.ones(2))


def test_a_batched_index_works_alone_and_is_refused_inside_an_index():
    xs = tg.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    idx = tg.tensor([2, 1])
    got = tg.vmap(lambda x, i: x[i])(xs, idx)                    # per-example x[i]
    np.testing.assert_array_equal(got.numpy(), [2.0, 4.0])
    # per-example gradients through it (an embedding lookup)
    table = tg.tensor(RNG.standard_normal((4, 3)))
    ids = tg.tensor([[0, 3], [1, 1], [2, 0]])
    g = tg.vmap(tg.func.grad(lambda t, i: (t[i] ** 2).sum()), in_axes=(None, 0))(table, ids)
    want = np.stack([2 * np.bincount(i, minlength=4)[:, None] * table.numpy()
                     for i in ids.numpy()])
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-14)

    def pick(x, i):
        return x[i, None]

    with pytest.raises(RuntimeError, match="vmap"):
        tg.vmap(pick)(xs, idx)

    def write(x, i):
        y = tg.zeros(3)
        y[i] = 1.0
        return y + x

    with pytest.raises(RuntimeError, match="vmap"):
        tg.vmap(write)(xs, idx)
    # the tensor-op spelling works
    got = tg.vmap(lambda x, i: tg.take(x, i))(xs, idx)
    np.testing.assert_array_equal(got.numpy(), [2.0, 4.0])


def test_shape_queries_do_not_read_values():
    out = tg.vmap(lambda x: x * np.size(x) + np.ndim(x) + np.shape(x)[0])(tg.ones((2, 3)))
    np.testing.assert_array_equal(out.numpy(), np.full((2, 3), 3.0 + 1 + 3))


def test_detach_inside_vmap_stops_the_gradient_per_example():
    xs = tg.tensor([[1.0, 2.0], [3.0, -1.0]])
    g = tg.vmap(tg.func.grad(lambda x: (x.detach() * x).sum()))(xs)
    np.testing.assert_array_equal(g.numpy(), xs.numpy())          # d/dx (c x) = c = x
    w = tg.tensor([0.5, 2.0], requires_grad=True)                  # and outside the vmap
    tg.vmap(lambda x: (x * w).detach().sum() + (x * w).sum())(xs).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), xs.numpy().sum(axis=0))
