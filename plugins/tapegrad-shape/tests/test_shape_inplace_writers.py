"""NumPy's in-place writers (module ``writers``): copyto, fill_diagonal, place, put,
putmask -- values against NumPy on copies, np.<name>(tensor) writing into the tensor,
gradients against finite differences of slow obvious references written here, writes
through views and into saved values (version counters), the leaf refusal, tg.compile,
and the errors. The contract kit checks each as "write into a copy" (tests/test_contract.py).
"""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck, gradgradcheck, run_doctests

RNG = np.random.default_rng(14)


def T(a, requires_grad=False):
    return tg.tensor(np.asarray(a), requires_grad=requires_grad)


def same(got, want):
    g = got.numpy()
    assert (g.shape, g.dtype) == (want.shape, want.dtype), (g.shape, g.dtype, want.dtype)
    np.testing.assert_array_equal(g, want)


def written(fn):
    """The functional form of a writer: write into a copy of the first argument, return it."""
    def f(a, *rest, **kwargs):
        out = a.clone()
        assert fn(out, *rest, **kwargs) is None
        return out
    return f


# -- slow obvious references (NumPy on copies, one Python loop; no np.put & co.) ------------

def ref_copyto(dst, src, where=True):
    out = dst.copy()
    s, w = np.broadcast_to(src, dst.shape), np.broadcast_to(where, dst.shape)
    for idx in np.ndindex(dst.shape):
        if w[idx]:
            out[idx] = s[idx]
    return out


def ref_fill_diagonal(a, val, wrap=False):
    out, v = a.copy(), np.ravel(val)
    if a.ndim > 2:
        for i in range(a.shape[0]):
            out[(i,) * a.ndim] = v[i % v.size]
        return out
    rows, cols = a.shape
    i = 0
    while True:
        # wrap: after each block of cols rows one row is left out, then the diagonal restarts
        r, c = (i + i // cols, i % cols) if wrap else (i, i)
        if r >= rows or c >= cols or (not wrap and i >= min(rows, cols)):
            return out
        out[r, c] = v[i % v.size]
        i += 1


def ref_place(a, mask, vals):
    out, m, v = a.copy().reshape(-1), np.ravel(mask), np.ravel(vals)
    k = 0
    for i in range(out.size):
        if m[i]:
            out[i] = v[k % v.size]
            k += 1
    return out.reshape(a.shape)


def ref_put(a, ind, v, mode="raise"):
    out, v = a.copy().reshape(-1), np.ravel(v)
    n = out.size
    for i, j in enumerate(np.ravel(ind)):
        j = int(j)
        j = j % n if mode == "wrap" else min(max(j, 0), n - 1) if mode == "clip" else j % n
        out[j] = v[i % v.size]          # a later write wins
    return out.reshape(a.shape)


def ref_putmask(a, mask, values):
    out, m, v = a.copy().reshape(-1), np.ravel(mask), np.ravel(values)
    for i in range(out.size):
        if m[i]:
            out[i] = v[i % v.size]       # i counts every position, not the True ones
    return out.reshape(a.shape)


M34 = np.array([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 0, 1]], dtype=bool)

# (name, tg function, NumPy function, reference, a, args (arrays), kwargs)
CASES = [
    ("copyto-broadcast", tg.copyto, np.copyto, ref_copyto,
     RNG.normal(size=(3, 4)), (RNG.normal(size=4),), {}),
    ("copyto-where", tg.copyto, np.copyto, ref_copyto,
     RNG.normal(size=(3, 4)), (RNG.normal(size=(3, 1)),), {"where": M34[:1]}),
    ("copyto-full-where", tg.copyto, np.copyto, ref_copyto,
     RNG.normal(size=(3, 4)), (RNG.normal(size=(3, 4)),), {"where": M34}),
    ("fill_diagonal-wide-cycled", tg.fill_diagonal, np.fill_diagonal, ref_fill_diagonal,
     RNG.normal(size=(3, 5)), (RNG.normal(size=2),), {}),
    ("fill_diagonal-tall", tg.fill_diagonal, np.fill_diagonal, ref_fill_diagonal,
     RNG.normal(size=(7, 3)), (RNG.normal(size=3),), {}),
    ("fill_diagonal-tall-wrap", tg.fill_diagonal, np.fill_diagonal, ref_fill_diagonal,
     RNG.normal(size=(8, 3)), (RNG.normal(size=2),), {"wrap": True}),
    ("fill_diagonal-3d", tg.fill_diagonal, np.fill_diagonal, ref_fill_diagonal,
     RNG.normal(size=(3, 3, 3)), (RNG.normal(size=5),), {}),
    ("place-cycled", tg.place, np.place, ref_place,
     RNG.normal(size=(3, 4)), (M34, RNG.normal(size=3)), {}),
    ("place-mask-shape", tg.place, np.place, ref_place,
     RNG.normal(size=12), (M34, RNG.normal(size=(2, 2))), {}),
    ("put-repeated-cycled", tg.put, np.put, ref_put,
     RNG.normal(size=(3, 4)), (np.array([1, 7, 1, 2, 7]), RNG.normal(size=3)), {}),
    ("put-negative", tg.put, np.put, ref_put,
     RNG.normal(size=5), (np.array([-1, 0]), RNG.normal(size=2)), {}),
    ("put-wrap", tg.put, np.put, ref_put,
     RNG.normal(size=5), (np.array([[-1, 6], [12, 4]]), RNG.normal(size=4)), {"mode": "wrap"}),
    ("put-clip", tg.put, np.put, ref_put,
     RNG.normal(size=5), (np.array([-3, 9, 2]), RNG.normal(size=3)), {"mode": "clip"}),
    ("putmask-cycled", tg.putmask, np.putmask, ref_putmask,
     RNG.normal(size=(3, 4)), (M34, RNG.normal(size=5)), {}),
    ("putmask-full", tg.putmask, np.putmask, ref_putmask,
     RNG.normal(size=(3, 4)), (M34, RNG.normal(size=(3, 4))), {}),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name,tgf,npf,ref,a,args,kwargs", CASES, ids=IDS)
def test_values_match_numpy_on_a_copy_and_the_reference(name, tgf, npf, ref, a, args, kwargs):
    want = a.copy()
    assert npf(want, *args, **kwargs) is None
    np.testing.assert_array_equal(ref(a, *args, **kwargs), want)
    t = T(a)
    assert tgf(t, *args, **kwargs) is None
    same(t, want)
    t = T(a)            # mask / index / value arguments as tensors too
    assert tgf(t, *[T(x) for x in args], **kwargs) is None
    same(t, want)


@pytest.mark.parametrize("name,tgf,npf,ref,a,args,kwargs", CASES, ids=IDS)
def test_numpy_function_on_a_tensor_writes_into_the_tensor(name, tgf, npf, ref, a, args, kwargs):
    want = a.copy()
    npf(want, *args, **kwargs)
    t = T(a)
    assert npf(t, *args, **kwargs) is None
    same(t, want)


def _numeric_grads(ref, a, args, kwargs, c, diff, eps=1e-6):
    """Central differences of sum(c * ref(a, *args)) in a and in args[i] for i in diff."""
    def loss(a_, args_):
        return float(np.sum(c * ref(a_, *args_, **kwargs)))
    grads = []
    for pos in [None] + list(diff):
        base = a if pos is None else args[pos]
        g = np.zeros(np.shape(base))
        for idx in np.ndindex(g.shape):
            hi, lo = np.array(base, float), np.array(base, float)
            hi[idx] += eps
            lo[idx] -= eps
            if pos is None:
                g[idx] = (loss(hi, args) - loss(lo, args)) / (2 * eps)
            else:
                g[idx] = (loss(a, args[:pos] + (hi,) + args[pos + 1:])
                          - loss(a, args[:pos] + (lo,) + args[pos + 1:])) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("name,tgf,npf,ref,a,args,kwargs", CASES, ids=IDS)
def test_gradients_match_finite_differences_of_the_reference(name, tgf, npf, ref, a, args,
                                                             kwargs):
    diff = [len(args) - 1]                    # the values written (masks, indices: none)
    c = RNG.normal(size=a.shape)
    want = _numeric_grads(ref, a, args, kwargs, c, diff)
    ta = T(a, requires_grad=True)
    targs = [T(x, requires_grad=i in diff) for i, x in enumerate(args)]
    out = written(tgf)(ta, *targs, **kwargs)
    out.backward(T(c))
    for t, w in zip([ta] + [targs[i] for i in diff], want):
        np.testing.assert_allclose(t.grad.numpy(), w, atol=1e-6)


SECOND_ORDER = ["copyto-where", "fill_diagonal-tall-wrap", "place-cycled",
                "put-repeated-cycled", "putmask-cycled"]


@pytest.mark.parametrize("name,tgf,npf,ref,a,args,kwargs",
                         [c for c in CASES if c[0] in SECOND_ORDER], ids=SECOND_ORDER)
def test_second_derivatives_pass_gradgradcheck(name, tgf, npf, ref, a, args, kwargs):
    ta, tv = T(a, requires_grad=True), T(args[-1], requires_grad=True)

    def f(x, v):
        return written(tgf)(x * x, *args[:-1], v * x.sum(), **kwargs)
    assert gradcheck(f, (ta, tv)) and gradgradcheck(f, (ta, tv))


def test_put_repeated_index_gives_the_overwritten_value_no_gradient():
    v = T([1.0, 2.0, 3.0], requires_grad=True)
    a = tg.zeros(4) + 0.0
    tg.put(a, [2, 0, 2], v)                 # v[0] is overwritten by v[2]
    assert a.tolist() == [2.0, 0.0, 3.0, 0.0]
    a.sum().backward()
    assert v.grad.tolist() == [0.0, 1.0, 1.0]


def test_put_method_form_writes_in_place():
    a = T(np.zeros(4))
    assert a.put([1, 3], [5.0, 6.0]) is None
    assert a.tolist() == [0.0, 5.0, 0.0, 6.0]


def test_copyto_casting_float32_destination_and_scalar():
    d = T(np.zeros(3, np.float32))
    tg.copyto(d, T([1.5, 2.5, 3.5]))          # float64 -> float32: same_kind
    same(d, np.array([1.5, 2.5, 3.5], np.float32))
    i = T(np.zeros(3, np.int64))
    tg.copyto(i, T([1.7, -2.5, 3.0]), casting="unsafe")
    want = np.zeros(3, np.int64)
    np.copyto(want, np.array([1.7, -2.5, 3.0]), casting="unsafe")
    same(i, want)
    tg.copyto(d, 7.0, where=T([False, True, False]))
    same(d, np.array([1.5, 7.0, 3.5], np.float32))


def test_empty_writes_leave_the_tensor_unchanged():
    a = T(np.arange(4.0))
    tg.place(a, [False] * 4, [])
    tg.putmask(a, [True, False, True, False], [])
    tg.put(a, [], [])
    tg.copyto(a, 9.0, where=False)
    tg.fill_diagonal(T(np.zeros((2, 2))), [])
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]


# -- errors: NumPy's, naming the op --------------------------------------------------------

@pytest.mark.parametrize("call,exc,match", [
    (lambda: tg.copyto(T(np.zeros(3, np.int64)), T([1.5, 2.0, 3.0])), TypeError,
     "copyto: Cannot cast"),
    (lambda: tg.copyto(T(np.zeros(3, np.int64)), 1.5), TypeError, "copyto: Cannot cast"),
    (lambda: tg.copyto(T(np.zeros(3, np.float32)), T(np.ones(3)), casting="no"), TypeError,
     "copyto: Cannot cast"),
    (lambda: tg.copyto(T(np.zeros(3)), T(np.ones(2))), ValueError, "copyto: could not broadcast"),
    (lambda: tg.copyto(T(np.zeros(3)), 1.0, where=[True, False]), ValueError, "copyto:"),
    (lambda: tg.copyto(T(np.zeros(3)), 1.0, casting="bogus"), ValueError, "copyto: casting"),
    (lambda: tg.copyto(np.zeros(3), T(np.ones(3))), TypeError, "copyto: dst must be a Tensor"),
    (lambda: tg.fill_diagonal(T(np.zeros(3)), 1.0), ValueError, "fill_diagonal: array must be"),
    (lambda: tg.fill_diagonal(T(np.zeros((3, 3, 2))), 1.0), ValueError,
     "fill_diagonal: All dimensions"),
    (lambda: tg.place(T(np.zeros(3)), [True, False], [1.0]), ValueError,
     "place: mask and data must be the same size"),
    (lambda: tg.place(T(np.zeros(3)), [True, False, True], []), ValueError,
     "place: Cannot insert from an empty array"),
    (lambda: tg.put(T(np.zeros(3)), [5], [1.0]), IndexError, "put: index 5 is out of bounds"),
    (lambda: tg.put(T(np.zeros(3)), [0], [1.0], mode="x"), ValueError, "put: clipmode"),
    (lambda: tg.putmask(T(np.zeros(3)), [True, False], [1.0]), ValueError,
     "putmask: mask and data must be the same size"),
    (lambda: tg.putmask([0.0, 1.0], [True, False], [1.0]), TypeError, "putmask: a must be a Tensor"),
])
def test_bad_arguments_raise_numpys_errors_naming_the_op(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_numpy_writers_tapegrad_lacks_are_still_refused():
    with pytest.raises(TypeError, match="in place.*tg.put_along_axis"):
        np.put_along_axis(T(np.zeros((2, 2))), np.array([[0], [1]]), 1.0, axis=1)


def test_numpy_function_with_a_tensor_only_as_values_is_refused_for_an_array_destination():
    # NumPy would write into the array and drop the tensor's gradient: refused instead.
    with pytest.raises(TypeError, match="put: a must be a Tensor"):
        np.put(np.zeros(3), [0], T([1.0], requires_grad=True))


# -- the in-place machinery: leaves, saved values, views ----------------------------------

WRITES = {
    "copyto": lambda t, v: tg.copyto(t, v, where=np.array([True, False, True])),
    "place": lambda t, v: tg.place(t, [True, False, True], v),
    "put": lambda t, v: tg.put(t, [0, 2], v),
    "putmask": lambda t, v: tg.putmask(t, [True, False, True], v),
    "np.putmask": lambda t, v: np.putmask(t, [True, False, True], v),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES)
def test_a_leaf_that_requires_grad_is_refused(write):
    x = T([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        write(x, T([5.0, 6.0, 7.0]))
    assert x.tolist() == [1.0, 2.0, 3.0]
    with tg.no_grad():
        write(x, T([5.0, 6.0, 7.0]))       # an update outside the graph is fine
    assert x.tolist()[:2] == [5.0, 2.0] and x._version == 1


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES)
def test_a_value_saved_for_backward_then_overwritten_raises_at_backward(write):
    x = T([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1.0
    z = y * y                                # saves y
    write(y, T([5.0, 6.0, 7.0]))
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        z.sum().backward()


def test_fill_diagonal_refuses_a_leaf_and_a_saved_matrix_raises_at_backward():
    x = T(np.ones((2, 2)), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        tg.fill_diagonal(x, 0.0)
    y = x * 1.0
    z = y * y
    tg.fill_diagonal(y, 0.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        z.sum().backward()


def test_a_view_of_the_written_tensor_is_rebased():
    x = T(np.arange(6.0), requires_grad=True)
    v = T([10.0, 20.0], requires_grad=True)
    y = x * 1.0
    row = y.reshape(2, 3)[1]                 # a view of y, made before the write
    tg.put(y, [3, 5], v)
    assert row.tolist() == [10.0, 4.0, 20.0]
    (row * T([1.0, 2.0, 3.0])).sum().backward()
    assert v.grad.tolist() == [1.0, 3.0]
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 0.0, 2.0, 0.0]


def test_writing_through_a_view_outside_the_graph_reaches_the_base():
    base = T(np.zeros((2, 3)))
    tg.putmask(base[1], [True, False, True], [1.0, 2.0])
    tg.fill_diagonal(base[:, :2], 5.0)
    want = np.zeros((2, 3))
    np.putmask(want[1], [True, False, True], [1.0, 2.0])
    np.fill_diagonal(want[:, :2], 5.0)
    same(base, want)


def test_a_recorded_write_into_a_view_is_refused_as_setitem():
    y = T(np.zeros((2, 3)), requires_grad=True) * 1.0
    with pytest.raises(RuntimeError, match="in-place modification of a view"):
        tg.put(y[0], [1], T([1.0], requires_grad=True))


# -- tg.compile: replays equal eager calls -------------------------------------------------

def _loss(x, v):
    y = x * 2.0
    tg.putmask(y, np.array([[True, False, True], [False, True, True]]), v)
    tg.put(y, [0, 5, 0], v * 3.0)
    tg.copyto(y, v[:1], where=np.array([False, True, False]))
    tg.place(y, np.array([[False, False, False], [True, False, False]]), v[1:] * v[:1])
    tg.fill_diagonal(y, v.sum())
    return (y * y).sum()


@pytest.mark.filterwarnings("error::tapegrad.CompileWarning")     # never eager behind our back
def test_compiled_writes_and_their_backward_replay_as_eager_calls():
    compiled = tg.compile(_loss)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        x, v = rng.normal(size=(2, 3)), rng.normal(size=3)
        results = []
        for fn in (compiled, _loss):
            tx, tv = T(x, requires_grad=True), T(v, requires_grad=True)
            loss = fn(tx, tv)
            loss.backward()
            results.append((loss.numpy(), tx.grad.numpy(), tv.grad.numpy()))
        for g, w in zip(*results, strict=True):
            np.testing.assert_array_equal(g, w)
    assert compiled.cache_info().hits == 2


def test_compiled_calls_see_new_tensor_masks_and_indices():
    def f(x, mask, ind):
        y = x * 1.0
        tg.putmask(y, mask, -1.0)
        tg.put(y, ind, 9.0)
        return y
    compiled = tg.compile(f)
    x = T(np.arange(4.0))
    for mask, ind in [([True, False, False, False], [1]), ([False, False, True, True], [0]),
                      ([True, False, False, False], [3])]:
        same(compiled(x, T(mask), T(ind)), f(x, T(mask), T(ind)).numpy())


def test_docstring_examples_run():
    from tapegrad_shape import writers
    result = run_doctests(writers)
    assert result.attempted > 0 and result.failed == 0
