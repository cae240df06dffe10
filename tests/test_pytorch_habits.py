"""PyTorch habits (issue 15): dim=/keepdim=, PyTorch's tensor methods, tg.cat, and every
claim of docs/coming-from-pytorch.md.

References are NumPy (the meaning tapegrad keeps), finite differences (tg.gradcheck) for
gradients, and -- in the needs_torch tests -- PyTorch itself for what PyTorch means.
"""

import pickle

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck, run_doctests


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _t(*shape, seed=0, requires_grad=False):
    return tg.tensor(_rand(*shape, seed=seed), requires_grad=requires_grad)


# ---------------------------------------------------------------------------------------
# dim= / keepdim=
# ---------------------------------------------------------------------------------------

# name -> NumPy function that is the reference for tg.<name>(x, dim=d, keepdim=k)
_REDUCTIONS = {
    "sum": np.sum, "mean": np.mean, "prod": np.prod,
    "argmax": np.argmax, "argmin": np.argmin, "all": np.all, "any": np.any,
    "nansum": np.nansum, "nanmean": np.nanmean, "nanmax": np.nanmax, "ptp": np.ptp,
}


@pytest.mark.parametrize("name", sorted(_REDUCTIONS))
@pytest.mark.parametrize("dim, keepdim", [(1, False), (0, True), (-1, True)])
def test_dim_and_keepdim_mean_axis_and_keepdims(name, dim, keepdim):
    x = _rand(3, 4) + 0.5
    out = getattr(tg, name)(tg.tensor(x), dim=dim, keepdim=keepdim)
    np.testing.assert_allclose(out.numpy(), _REDUCTIONS[name](x, axis=dim, keepdims=keepdim))


def test_dim_works_through_methods():
    x = _rand(3, 4)
    t = tg.tensor(x)
    np.testing.assert_allclose(t.sum(dim=1, keepdim=True).numpy(), x.sum(1, keepdims=True))
    np.testing.assert_allclose(t.mean(dim=0).numpy(), x.mean(0))
    np.testing.assert_allclose(t.cumsum(dim=1).numpy(), x.cumsum(1))
    np.testing.assert_array_equal(t.argmax(dim=1).numpy(), x.argmax(1))
    np.testing.assert_allclose(t.std(dim=1, ddof=1).numpy(), x.std(1, ddof=1))


def test_dim_accepts_a_list_and_a_tuple_of_axes():
    x = _rand(2, 3, 4)
    np.testing.assert_allclose(tg.sum(tg.tensor(x), dim=[0, 2]).numpy(), x.sum((0, 2)))
    np.testing.assert_allclose(tg.mean(tg.tensor(x), dim=(0, 2), keepdim=True).numpy(),
                               x.mean((0, 2), keepdims=True))


def test_dim_on_joins_softmax_and_more():
    a, b = _rand(2, 3), _rand(2, 3, seed=1)
    ta, tb = tg.tensor(a), tg.tensor(b)
    np.testing.assert_allclose(tg.concatenate([ta, tb], dim=1).numpy(),
                               np.concatenate([a, b], 1))
    np.testing.assert_allclose(tg.stack([ta, tb], dim=-1).numpy(), np.stack([a, b], -1))
    e = np.exp(a - a.max(0, keepdims=True))
    np.testing.assert_allclose(tg.softmax(ta, dim=0).numpy(), e / e.sum(0, keepdims=True))
    np.testing.assert_allclose(tg.flip(ta, dim=1).numpy(), np.flip(a, 1))
    np.testing.assert_allclose(tg.diff(ta, dim=0).numpy(), np.diff(a, axis=0))
    np.testing.assert_allclose(tg.expand_dims(ta, dim=1).numpy(),
                               np.expand_dims(a, 1))
    np.testing.assert_allclose(tg.quantile(ta, 0.3, dim=1, keepdim=True).numpy(),
                               np.quantile(a, 0.3, axis=1, keepdims=True))
    pieces = tg.array_split(ta, 2, dim=1)
    for p, q in zip(pieces, np.array_split(a, 2, axis=1)):
        np.testing.assert_allclose(p.numpy(), q)
    np.testing.assert_allclose(tg.linalg_norm(ta, dim=1, keepdim=True).numpy(),
                               np.linalg.norm(a, axis=1, keepdims=True))


def _calls_with_axis():
    """(name, callable, sample) for every op and function whose contract samples pass
    axis= by keyword and that takes dim= in its place."""
    reg = tg.registry()
    found = []
    for name, op in sorted(reg.ops.items()):
        rule = op.dim_keywords
        if rule is None or rule.refusal is not None or name.startswith("_"):
            continue
        found += [(name, op, s) for s in op.samples if "axis" in s.kwargs]
    for name, fdef in sorted(reg.functions.items()):
        fn = fdef.fn
        rule = getattr(fn, "dim_keywords", None)
        if rule is None or rule.refusal is not None:
            continue
        found += [(name, fn, s) for s in fdef.samples if "axis" in s.kwargs]
    return found


_AXIS_CALLS = _calls_with_axis()


def _as_list(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


@pytest.mark.parametrize("name, fn, sample", _AXIS_CALLS,
                         ids=[f"{n}-{i}" for i, (n, _f, _s) in enumerate(_AXIS_CALLS)])
def test_every_axis_taker_takes_dim_with_the_same_value_and_gradient(name, fn, sample):
    """Each contract sample that passes axis= gives the same value and gradient when it
    passes dim= instead: sweeps every op and registered function that takes axis=."""
    def call(spell):
        kwargs = dict(sample.kwargs)
        kwargs[spell] = kwargs.pop("axis")
        if "keepdims" in kwargs and spell == "dim" and "keepdim" in fn.dim_keywords.renames:
            kwargs["keepdim"] = kwargs.pop("keepdims")
        inputs = [tg.tensor(a, requires_grad=a.dtype.kind == "f")
                  if isinstance(a, np.ndarray) else a for a in sample.args]
        return inputs, _as_list(fn(*inputs, **kwargs))

    inputs_a, by_axis = call("axis")
    inputs_d, by_dim = call("dim")
    assert len(by_axis) == len(by_dim)
    for a, d in zip(by_axis, by_dim):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(d))
    floats = [o for o in by_axis if o.dtype.kind == "f" and o.requires_grad]
    if not floats:
        return
    for inputs, outs in ((inputs_a, by_axis), (inputs_d, by_dim)):
        total = sum(tg.sum(o * tg.tensor(_rand(*o.shape, seed=3))) for o in outs
                    if o.dtype.kind == "f" and o.requires_grad)
        total.backward()
    for a, d in zip(inputs_a, inputs_d):
        if isinstance(a, tg.Tensor) and a.requires_grad:
            assert (a.grad is None) == (d.grad is None)
            if a.grad is not None:
                np.testing.assert_array_equal(a.grad.numpy(), d.grad.numpy())


def test_the_sweep_reaches_the_common_reductions():
    names = {n for n, _f, _s in _AXIS_CALLS}
    assert {"sum", "mean", "concatenate", "cumsum", "softmax", "argmax"} <= names


def test_dim_gradient_against_finite_differences():
    x = _t(3, 4, requires_grad=True)
    assert gradcheck(lambda t: tg.sum(t * t, dim=1, keepdim=True), (x,))
    assert gradcheck(lambda t: tg.logsumexp(t, dim=0), (x,))
    assert gradcheck(lambda t: tg.std(t, dim=1, ddof=1), (x,))
    assert gradcheck(lambda t: tg.prod(t, dim=0, keepdim=True), (x,))


@pytest.mark.parametrize("call, says", [
    (lambda x: tg.max(x, dim=1), "tg.argmax(x, axis)"),
    (lambda x: x.max(1, keepdim=True), "(values, indices)"),
    (lambda x: x.min(dim=0), "tg.argmin(x, axis)"),
    (lambda x: tg.sort(x, dim=1), "tg.argsort(x, axis)"),
    (lambda x: tg.median(x, dim=1), "method='lower'"),
    (lambda x: tg.nanmedian(x, dim=1), "(values, indices)"),
    (lambda x: tg.std(x, dim=1), "ddof=1"),
    (lambda x: x.var(dim=0, keepdim=True), "ddof=1"),
    (lambda x: tg.nanstd(x, dim=1), "ddof=1"),
    (lambda x: tg.nanvar(x, dim=1), "ddof=1"),
    (lambda x: tg.split(x, 2, dim=1), "tg.array_split"),
    (lambda x: tg.gradient(x, dim=1), "tg.gradient(x, axis=...)"),
])
def test_dim_is_refused_where_pytorch_means_something_else(call, says):
    with pytest.raises(TypeError, match="PyTorch") as info:
        call(_t(3, 4))
    assert says in str(info.value)


def test_ddof_with_dim_says_which_std_is_meant():
    x = _rand(3, 4)
    np.testing.assert_allclose(tg.std(tg.tensor(x), dim=1, ddof=1).numpy(), x.std(1, ddof=1))
    np.testing.assert_allclose(tg.var(tg.tensor(x), dim=0, ddof=0, keepdim=True).numpy(),
                               x.var(0, keepdims=True))


def test_positional_axis_keeps_numpys_meaning_on_refused_names():
    x = _rand(3, 4)
    np.testing.assert_allclose(tg.tensor(x).max(1).numpy(), x.max(1))
    np.testing.assert_allclose(tg.std(tg.tensor(x), 1).numpy(), x.std(1))


def test_both_spellings_at_once_are_a_type_error():
    x = _t(3, 4)
    with pytest.raises(TypeError, match="both axis= and dim="):
        tg.sum(x, axis=0, dim=1)
    with pytest.raises(TypeError, match="both keepdims= and keepdim="):
        x.mean(dim=0, keepdims=True, keepdim=True)
    with pytest.raises(TypeError, match="both axis= and dim="):
        tg.nanmean(x, axis=0, dim=1)
    with pytest.raises(TypeError, match="multiple values for argument 'axis'"):
        tg.sum(x, 1, dim=1)


def test_empty_dim_is_refused_because_pytorch_reduces_over_everything():
    with pytest.raises(TypeError, match="axis=None for every axis"):
        tg.sum(_t(3, 4), dim=())
    with pytest.raises(TypeError, match="empty dim="):
        tg.nanmean(_t(3, 4), dim=[])


def test_ops_with_a_dim_of_their_own_are_left_alone():
    ops = tg.registry().ops
    assert all(op.dim_keywords is None for name, op in ops.items()
               if name in ("exp", "add", "reshape", "transpose", "tensordot"))
    x = _rand(3, 4)
    e = np.exp(x - x.max(0, keepdims=True))
    np.testing.assert_allclose(tg.nn.functional.softmin(tg.tensor(-x), dim=0).numpy(),
                               e / e.sum(0, keepdims=True))


def test_keyword_less_calls_do_not_look_at_the_rule():
    # the hot path: an op called without keywords is the same Op call as before
    x = _t(3, 4)
    np.testing.assert_allclose(tg.sum(x).item(), _rand(3, 4).sum())
    assert tg.exp.dim_keywords is None


def test_dim_under_compile_records_and_replays():
    def f(x):
        return (tg.sum(x * x, dim=1, keepdim=True) * tg.mean(x, dim=0)).sum()

    compiled = tg.compile(f)
    for seed in range(3):           # record, then replays on new values
        x = _rand(3, 4, seed=seed)
        a = tg.tensor(x, requires_grad=True)
        out = compiled(a)
        out.backward()
        expected = ((x * x).sum(1, keepdims=True) * x.mean(0)).sum()
        np.testing.assert_allclose(out.item(), expected)
        b = tg.tensor(x, requires_grad=True)
        f(b).backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy())
        assert gradcheck(compiled, (tg.tensor(x, requires_grad=True),))


def test_amax_is_max_and_refuses_dim_as_max_does():
    assert tg.amax is tg.max and tg.amin is tg.min
    with pytest.raises(TypeError, match="tg.argmax"):
        tg.amax(_t(3, 4), dim=1)


# ---------------------------------------------------------------------------------------
# Tensor methods
# ---------------------------------------------------------------------------------------

def test_size_is_numpys_int_and_pytorchs_method():
    x = tg.zeros((2, 3, 4))
    assert x.size == 24 and isinstance(x.size, int) and x.size + 1 == 25
    assert x.size() == (2, 3, 4) and x.size(0) == 2 and x.size(-1) == 4 and x.size(-3) == 2
    assert repr(x.size) == "24" and np.zeros(x.size).shape == (24,)
    assert type(pickle.loads(pickle.dumps(x.size))) is int
    with pytest.raises(IndexError, match="out of range"):
        x.size(3)
    with pytest.raises(TypeError, match="dim must be an int"):
        x.size(1.0)
    assert tg.tensor(5.0).size == 1 and tg.tensor(5.0).size() == ()


def test_numel_and_dim():
    x = tg.zeros((2, 3))
    assert x.numel() == 6 and type(x.numel()) is int and x.dim() == 2
    assert tg.tensor(1.0).dim() == 0


def test_view_values_gradient_and_storage():
    x = _rand(2, 6)
    t = tg.tensor(x, requires_grad=True)
    np.testing.assert_array_equal(t.view(3, 4).numpy(), x.reshape(3, 4))
    np.testing.assert_array_equal(t.view((4, -1)).numpy(), x.reshape(4, 3))
    np.testing.assert_array_equal(t.view([12]).numpy(), x.reshape(12))
    assert np.shares_memory(t.view(-1).numpy(), t.numpy())
    assert t.view().shape == (2, 6)                    # NumPy's view(): same shape
    assert gradcheck(lambda a: a.view(3, -1) * tg.arange(4.0), (t,))
    rows = tg.tensor(x)[1:]                            # a slice that is still contiguous
    np.testing.assert_array_equal(rows.view(2, 3).numpy(), x[1:].reshape(2, 3))


def test_view_refuses_where_a_copy_is_needed():
    t = _t(2, 3).T
    with pytest.raises(RuntimeError, match=r"use \.reshape"):
        t.view(6)
    with pytest.raises(RuntimeError, match="without a copy"):
        _t(4, 4)[:, :2].view(8)
    np.testing.assert_array_equal(t.reshape(6).numpy(), _rand(2, 3).T.reshape(6))
    with pytest.raises(ValueError, match="invalid for a tensor of shape"):
        _t(2, 3).view(4)


def test_view_dtype_reinterprets_bits_as_numpy():
    x = np.array([1.0, -2.5], np.float32)
    v = tg.tensor(x).view(np.int32)
    np.testing.assert_array_equal(v.numpy(), x.view(np.int32))
    np.testing.assert_array_equal(tg.tensor(x).view("uint8").numpy(), x.view(np.uint8))
    with pytest.raises(TypeError, match="not differentiable"):
        tg.tensor(x, requires_grad=True).view(np.int32)
    with tg.no_grad():
        assert tg.tensor(x, requires_grad=True).view(np.int32).dtype == np.int32


def test_view_dtype_shares_storage_and_version():
    w = tg.tensor([2.0, 3.0], requires_grad=True)
    x = tg.tensor([1.0, 4.0])
    y = (w * x).sum()                  # saves x for w's gradient
    bits = x.view(np.int64)
    bits[0] = np.array([7.0]).view(np.int64)[0]
    assert x[0].item() == 7.0          # the same storage, as NumPy
    with pytest.raises(RuntimeError, match="modified"):
        y.backward()                   # x changed after it was saved: not a silent grad


def test_view_as_unsqueeze_expand_permute():
    x = _rand(2, 3)
    t = tg.tensor(x, requires_grad=True)
    np.testing.assert_array_equal(t.view_as(tg.zeros((3, 2))).numpy(), x.reshape(3, 2))
    np.testing.assert_array_equal(t.unsqueeze(1).numpy(), x[:, None])
    np.testing.assert_array_equal(t.unsqueeze(-1).numpy(), x[..., None])
    np.testing.assert_array_equal(t.unsqueeze(-3).numpy(), x[None])
    e = tg.tensor(x[:, :1], requires_grad=True)
    np.testing.assert_array_equal(e.expand(4, -1, 5).numpy(),
                                  np.broadcast_to(x[:, :1], (4, 2, 5)))
    np.testing.assert_array_equal(e.expand((2, 3)).numpy(), np.broadcast_to(x[:, :1], (2, 3)))
    np.testing.assert_array_equal(e.expand_as(t).numpy(), np.broadcast_to(x[:, :1], (2, 3)))
    p = tg.tensor(_rand(2, 3, 4), requires_grad=True)
    np.testing.assert_array_equal(p.permute(2, 0, 1).numpy(), _rand(2, 3, 4).transpose(2, 0, 1))
    np.testing.assert_array_equal(p.permute((1, 0, 2)).numpy(), _rand(2, 3, 4).transpose(1, 0, 2))
    assert gradcheck(lambda a: a.view_as(tg.zeros((3, 2))) ** 2, (t,))
    assert gradcheck(lambda a: a.unsqueeze(0) * tg.ones((2, 1, 1)), (t,))
    assert gradcheck(lambda a: a.expand(3, 2, 4), (e,))
    assert gradcheck(lambda a: a.expand_as(t) * t.detach(), (e,))
    assert gradcheck(lambda a: a.permute(2, 0, 1) ** 2, (p,))
    with pytest.raises(ValueError, match="new leading axis"):
        e.expand(-1, 2, 1)
    with pytest.raises(ValueError, match="at least"):
        t.expand(3)


def test_flatten_both_meanings():
    x = _rand(2, 3, 4, 5)
    t = tg.tensor(x, requires_grad=True)
    np.testing.assert_array_equal(t.flatten().numpy(), x.flatten())        # NumPy's
    np.testing.assert_array_equal(t.flatten(1).numpy(), x.reshape(2, 60))  # PyTorch's
    np.testing.assert_array_equal(t.flatten(1, 2).numpy(), x.reshape(2, 12, 5))
    np.testing.assert_array_equal(t.flatten(start_dim=-2).numpy(), x.reshape(2, 3, 20))
    np.testing.assert_array_equal(t.flatten(0, -1).numpy(), x.reshape(-1))
    assert tg.tensor(3.0).flatten(0).shape == (1,)
    assert gradcheck(lambda a: a.flatten(1, 2) * tg.arange(12.0).reshape(12, 1), (t,))
    with pytest.raises(ValueError, match="comes after"):
        t.flatten(2, 1)
    with pytest.raises(IndexError, match="out of range"):
        t.flatten(4)


def test_repeat_interleave():
    x = _rand(2, 3)
    t = tg.tensor(x, requires_grad=True)
    np.testing.assert_array_equal(t.repeat_interleave(2).numpy(), np.repeat(x, 2))
    np.testing.assert_array_equal(t.repeat_interleave(2, dim=1).numpy(), np.repeat(x, 2, 1))
    np.testing.assert_array_equal(t.repeat_interleave(tg.tensor([1, 3]), dim=0).numpy(),
                                  np.repeat(x, [1, 3], 0))
    assert gradcheck(lambda a: a.repeat_interleave([2, 0, 1], dim=1) ** 2, (t,))
    with pytest.raises(ValueError, match="output_size"):
        t.repeat_interleave(2, dim=0, output_size=5)
    assert t.repeat_interleave(2, dim=0, output_size=4).shape == (4, 3)


def test_contiguous_clone_and_masked_fill():
    x = _rand(3, 4)
    t = tg.tensor(x, requires_grad=True)
    assert t.contiguous() is t
    c = t.T.contiguous()
    assert c.numpy().flags.c_contiguous and not t.T.numpy().flags.c_contiguous
    np.testing.assert_array_equal(c.numpy(), x.T)
    np.testing.assert_array_equal(c.view(-1).numpy(), x.T.reshape(-1))
    assert gradcheck(lambda a: a.T.contiguous().view(-1) * tg.arange(12.0), (t,))
    k = t.clone()
    assert not np.shares_memory(k.numpy(), t.numpy())
    assert gradcheck(lambda a: a.clone() ** 2, (t,))
    mask = x > 0
    np.testing.assert_array_equal(t.masked_fill(tg.tensor(mask), -1.0).numpy(),
                                  np.where(mask, -1.0, x))
    assert gradcheck(lambda a: a.masked_fill(tg.tensor(mask), 0.5) ** 2, (t,))


def test_pow_and_comparisons():
    x, y = _rand(3, 4), _rand(3, 4, seed=1)
    t = tg.tensor(np.abs(x) + 0.5, requires_grad=True)
    np.testing.assert_allclose(t.pow(2.5).numpy(), (np.abs(x) + 0.5) ** 2.5)
    assert gradcheck(lambda a: a.pow(1.5), (t,))
    a, b = tg.tensor(x), tg.tensor(y)
    for name, ref in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                      ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)):
        np.testing.assert_array_equal(getattr(a, name)(b).numpy(), ref(x, y))
        np.testing.assert_array_equal(getattr(a, name)(0.0).numpy(), ref(x, 0.0))
    np.testing.assert_array_equal(a.eq(a).numpy(), np.ones((3, 4), bool))


@pytest.mark.parametrize("method, dtype", [
    ("float", np.float32), ("double", np.float64), ("half", np.float16),
    ("long", np.int64), ("int", np.int32), ("bool", np.bool_)])
def test_dtype_methods_are_astype(method, dtype):
    x = np.array([[-1.7, 0.0, 2.5]])
    out = getattr(tg.tensor(x), method)()
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), x.astype(dtype))


def test_dtype_methods_differentiate_to_float_targets_only():
    x = tg.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    w = np.array([3.0, -4.0])
    (x.double() * tg.tensor(w)).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.numpy(), w.astype(np.float32))
    d = tg.tensor([1.0, 2.0], requires_grad=True)
    assert d.double() is d and not d.long().requires_grad and not d.bool().requires_grad
    assert gradcheck(lambda a: a.type_as(tg.zeros(1)) ** 2, (d,))
    f32 = d.float()
    assert f32.dtype == np.float32 and f32.requires_grad
    for method, dtype in (("float", np.float32), ("half", np.float16)):
        a = tg.tensor([0.5, -1.25], requires_grad=True)
        (getattr(a, method)() * tg.tensor(w.astype(dtype))).sum().backward()
        assert a.grad.dtype == np.float64                      # back to the input's dtype
        np.testing.assert_array_equal(a.grad.numpy(), w.astype(dtype).astype(np.float64))
    assert d.type_as(tg.tensor([1], dtype=np.int32)).dtype == np.int32


def test_methods_keep_numpys_meaning_where_numpy_has_it():
    x = _rand(2, 3)
    t = tg.tensor(x)
    np.testing.assert_array_equal(t.repeat(2).numpy(), x.repeat(2))        # np.repeat
    np.testing.assert_array_equal(t.transpose(1, 0).numpy(), x.transpose(1, 0))
    np.testing.assert_array_equal(t.max(1).numpy(), x.max(1))
    assert t.size == x.size


def test_method_docstrings_run():
    import tapegrad._aliases
    import tapegrad._dim_keywords
    import tapegrad._tensor
    for module in (tapegrad._tensor, tapegrad._aliases, tapegrad._dim_keywords):
        result = run_doctests(module)
        assert result.failed == 0 and result.attempted > 0


# ---------------------------------------------------------------------------------------
# tg.cat
# ---------------------------------------------------------------------------------------

def test_cat_is_concatenate_under_pytorchs_name():
    a, b = _rand(2, 3), _rand(2, 1, seed=1)
    ta, tb = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
    np.testing.assert_array_equal(tg.cat([ta, tb], dim=1).numpy(), np.concatenate([a, b], 1))
    np.testing.assert_array_equal(tg.cat((ta, ta)).numpy(), np.concatenate([a, a]))
    np.testing.assert_array_equal(tg.cat([ta, tb], 1).numpy(), np.concatenate([a, b], 1))
    np.testing.assert_array_equal(tg.cat([ta, tb], axis=-1).numpy(), np.concatenate([a, b], -1))
    assert gradcheck(lambda p, q: tg.cat([p, q], dim=1) ** 2, (ta, tb))
    assert tg.concat is tg.concatenate
    with pytest.raises(ValueError, match="concatenate"):
        tg.cat([ta, tb], dim=0)


# ---------------------------------------------------------------------------------------
# docs/coming-from-pytorch.md: each row's claim about tapegrad (NumPy's meaning)
# ---------------------------------------------------------------------------------------

def test_row_transpose_with_two_axes_is_numpys_permutation():
    x = _rand(2, 3)
    t = tg.tensor(x)
    np.testing.assert_array_equal(t.transpose(-2, -1).numpy(), x)       # axes (0, 1): as is
    np.testing.assert_array_equal(t.transpose(0, 1).numpy(), x)
    np.testing.assert_array_equal(tg.swapaxes(t, -2, -1).numpy(), x.T)  # PyTorch's meaning
    y = _rand(2, 3, 4)
    np.testing.assert_array_equal(tg.tensor(y).mT.numpy(), np.swapaxes(y, -2, -1))
    with pytest.raises(ValueError):
        tg.tensor(y).transpose(-2, -1)                          # not a permutation of 3 axes


def test_row_max_with_an_axis_gives_values_only():
    x = _rand(3, 4)
    t = tg.tensor(x)
    np.testing.assert_array_equal(t.max(1).numpy(), x.max(1))
    np.testing.assert_array_equal(tg.argmax(t, 1).numpy(), x.argmax(1))
    with pytest.raises((TypeError, ValueError)):
        tg.max(t, tg.tensor(x))           # torch.max(a, b) is tg.maximum(a, b)
    np.testing.assert_array_equal(tg.maximum(t, 0.0).numpy(), np.maximum(x, 0.0))


def test_row_split_counts_sections():
    x = np.arange(6.0)
    pieces = tg.split(tg.tensor(x), 2)
    assert [p.shape for p in pieces] == [(3,), (3,)]            # 2 sections
    assert [p.shape for p in tg.split(tg.tensor(x), 1)] == [(6,)]
    pytorch_pieces = tg.array_split(tg.tensor(x), range(2, 6, 2))   # pieces of size 2
    assert [p.tolist() for p in pytorch_pieces] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    odd = tg.array_split(tg.tensor(np.arange(5.0)), range(2, 5, 2))
    assert [p.shape for p in odd] == [(2,), (2,), (1,)]


def test_row_std_and_var_are_biased_unless_ddof():
    x = _rand(3, 4)
    t = tg.tensor(x)
    np.testing.assert_allclose(t.std().item(), x.std())
    np.testing.assert_allclose(t.var(1).numpy(), x.var(1))
    np.testing.assert_allclose(tg.std(t, ddof=1).item(), x.std(ddof=1))


def test_row_repeat_is_numpys_and_tile_is_pytorchs_repeat():
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(tg.tensor(x).repeat(2).numpy(), [1.0, 1.0, 2.0, 2.0])
    np.testing.assert_array_equal(tg.tile(tg.tensor(x), 2).numpy(), [1.0, 2.0, 1.0, 2.0])
    np.testing.assert_array_equal(tg.tile(tg.tensor(x), (2, 1)).numpy(), np.tile(x, (2, 1)))


def test_row_median_is_the_mean_of_the_middle_two():
    x = np.array([1.0, 2.0, 3.0, 10.0])
    assert tg.median(tg.tensor(x)).item() == 2.5
    assert tg.quantile(tg.tensor(x), 0.5, method="lower").item() == 2.0


def test_row_integer_division_and_default_dtypes():
    a = tg.tensor([-7, 7])
    assert a.dtype == np.int64 and tg.tensor([1.0]).dtype == np.float64
    np.testing.assert_array_equal((a // 2).numpy(), [-4, 3])          # floor, both
    assert (a / 2).dtype == np.float64                                  # true division
    np.testing.assert_array_equal(tg.trunc(a / 2).numpy(), [-3.0, 3.0])
    np.testing.assert_array_equal((a % 3).numpy(), [2, 1])
    np.testing.assert_array_equal(tg.fmod(a, 3).numpy(), [-1, 1])
    assert tg.arange(3.0).dtype == np.float64 and tg.arange(3).dtype == np.int64
    assert tg.tensor([1.0], dtype=tg.float32).dtype == np.float32


def test_row_argmax_ties_go_to_the_first():
    assert tg.argmax(tg.tensor([1.0, 3.0, 3.0, 0.0])).item() == 1
    assert tg.argmin(tg.tensor([2.0, 0.0, 0.0])).item() == 1


def test_row_squeeze_of_a_longer_axis_raises():
    with pytest.raises(ValueError):
        tg.squeeze(_t(2, 3), 1)
    assert tg.squeeze(_t(2, 1), dim=1).shape == (2,)


def test_row_roll_and_flip_take_axis():
    x = _rand(2, 3)
    np.testing.assert_array_equal(tg.roll(tg.tensor(x), 1, axis=1).numpy(), np.roll(x, 1, 1))
    np.testing.assert_array_equal(tg.flip(tg.tensor(x), axis=(0, 1)).numpy(), x[::-1, ::-1])


def test_row_sort_is_a_function_with_values_only():
    x = _rand(3, 4)
    assert not hasattr(tg.Tensor, "sort")      # NumPy's method sorts in place
    np.testing.assert_array_equal(tg.sort(tg.tensor(x), 1).numpy(), np.sort(x, 1))
    np.testing.assert_array_equal(tg.argsort(tg.tensor(x), 1).numpy(), np.argsort(x, 1))
    np.testing.assert_array_equal(tg.flip(tg.sort(tg.tensor(x), 1), 1).numpy(),
                                  -np.sort(-x, 1))


# ---------------------------------------------------------------------------------------
# Against PyTorch (needs_torch)
# ---------------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


_TORCH_REDUCTIONS = ["sum", "mean", "prod", "argmax", "argmin", "logsumexp",
                     "nansum", "nanmean", "all", "any"]


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", _TORCH_REDUCTIONS)
@pytest.mark.parametrize("dim, keepdim", [(1, False), (0, True), (-1, True)])
def test_dim_keepdim_match_torch(name, dim, keepdim):
    torch = _torch()
    x = _rand(3, 4) + 0.3
    if name in ("all", "any"):
        x = x > 0.5
    ours = getattr(tg, name)(tg.tensor(x), dim=dim, keepdim=keepdim)
    theirs = getattr(torch, name)(torch.tensor(x), dim=dim, keepdim=keepdim)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


@pytest.mark.needs_torch
def test_more_dim_calls_match_torch_values_and_gradients():
    torch = _torch()
    x = _rand(3, 4)
    cases = [
        (lambda m, t: m.cumsum(t, dim=1), None),
        (lambda m, t: m.cumprod(t, dim=0), None),
        (lambda m, t: m.softmax(t, dim=1), None),
        (lambda m, t: m.log_softmax(t, dim=0), None),
        (lambda m, t: m.flip(t, dims=(1,)) if m is torch else m.flip(t, dim=1), None),
        (lambda m, t: m.diff(t, dim=1), None),
        (lambda m, t: m.trapezoid(t, dim=1), None),
        (lambda m, t: m.quantile(t, 0.3, dim=1, keepdim=True), None),
        (lambda m, t: m.std(t, dim=1, ddof=1) if m is tg else m.std(t, dim=1), None),
        (lambda m, t: m.var(t, dim=0, ddof=1, keepdim=True) if m is tg
         else m.var(t, dim=0, keepdim=True), None),
        (lambda m, t: m.linalg.vector_norm(t, dim=1, keepdim=True) if m is torch
         else m.linalg_vector_norm(t, dim=1, keepdim=True), None),
        (lambda m, t: m.linalg.norm(t, dim=0) if m is torch else m.linalg_norm(t, dim=0), None),
        (lambda m, t: m.cat([t, t * 2], dim=1), None),
        (lambda m, t: m.stack([t, t * 2], dim=1), None),
        (lambda m, t: m.take_along_dim(t, m.tensor([[0], [2], [1]]), dim=1) if m is torch
         else m.take_along_axis(t, np.array([[0], [2], [1]]), dim=1), None),
        (lambda m, t: m.unsqueeze(t, dim=1) if m is torch else m.expand_dims(t, dim=1), None),
    ]
    for i, (f, _) in enumerate(cases):
        a = tg.tensor(x, requires_grad=True)
        b = torch.tensor(x, requires_grad=True)
        ours, theirs = f(tg, a), f(torch, b)
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=f"case {i}")
        u = _rand(*ours.shape, seed=7)
        (ours * tg.tensor(u)).sum().backward()
        (theirs * torch.tensor(u)).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"case {i}")


@pytest.mark.needs_torch
def test_array_split_with_dim_is_torch_tensor_split():
    torch = _torch()
    x = _rand(7, 2)
    for sections in (3, [1, 4]):
        ours = tg.array_split(tg.tensor(x), sections, dim=0)
        theirs = torch.tensor_split(torch.tensor(x), sections, dim=0)
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            np.testing.assert_array_equal(o.numpy(), t.numpy())


@pytest.mark.needs_torch
def test_torch_really_means_something_else_where_dim_is_refused():
    """Why each refusal exists: torch's answer to the same line is not NumPy's."""
    torch = _torch()
    x = _rand(3, 4)
    tx = torch.tensor(x)
    assert isinstance(torch.max(tx, dim=1), tuple) and isinstance(torch.min(tx, dim=1), tuple)
    assert isinstance(torch.sort(tx, dim=1), tuple)
    assert isinstance(torch.median(tx, dim=1), tuple)
    assert isinstance(torch.nanmedian(tx, dim=1), tuple)
    assert isinstance(torch.gradient(tx, dim=1), tuple)
    np.testing.assert_allclose(torch.std(tx, dim=1).numpy(), x.std(1, ddof=1))
    np.testing.assert_allclose(torch.var(tx, dim=1).numpy(), x.var(1, ddof=1))
    assert [p.shape[1] for p in torch.split(tx, 1, dim=1)] == [1, 1, 1, 1]   # NumPy: 1 piece
    assert torch.sum(tx, dim=()).shape == ()                                 # NumPy: (3, 4)
    assert np.sum(x, axis=()).shape == (3, 4)


@pytest.mark.needs_torch
def test_doc_rows_match_torch_on_the_tapegrad_spelling():
    torch = _torch()
    x = _rand(2, 3)
    tx, t = torch.tensor(x), tg.tensor(x)
    np.testing.assert_array_equal(tg.swapaxes(t, -2, -1).numpy(), tx.transpose(-2, -1).numpy())
    values, indices = tx.max(1)
    np.testing.assert_array_equal(t.max(1).numpy(), values.numpy())
    np.testing.assert_array_equal(tg.argmax(t, 1).numpy(), indices.numpy())
    six = np.arange(6.0)
    for o, p in zip(tg.array_split(tg.tensor(six), range(2, 6, 2)),
                    torch.split(torch.tensor(six), 2)):
        np.testing.assert_array_equal(o.numpy(), p.numpy())
    np.testing.assert_allclose(tg.std(t, ddof=1).item(), tx.std().item())
    np.testing.assert_array_equal(tg.tile(t, (2, 1)).numpy(), tx.repeat(2, 1).numpy())
    np.testing.assert_array_equal(t.repeat(2, axis=1).numpy(),
                                  tx.repeat_interleave(2, dim=1).numpy())
    ev = np.array([1.0, 2.0, 3.0, 10.0])
    assert tg.quantile(tg.tensor(ev), 0.5, method="lower").item() == \
        torch.median(torch.tensor(ev)).item()
    a = np.array([-7, 7])
    np.testing.assert_array_equal((tg.tensor(a) // 2).numpy(), (torch.tensor(a) // 2).numpy())
    np.testing.assert_array_equal(tg.trunc(tg.tensor(a) / 2).numpy(),
                                  torch.div(torch.tensor(a), 2, rounding_mode="trunc").numpy())
    np.testing.assert_array_equal((tg.tensor(a) % 3).numpy(), (torch.tensor(a) % 3).numpy())
    np.testing.assert_array_equal(tg.fmod(tg.tensor(a), 3).numpy(),
                                  torch.fmod(torch.tensor(a), 3).numpy())
    assert torch.tensor([1.0]).dtype == torch.float32 and tg.tensor([1.0]).dtype == np.float64
    ties = np.array([1.0, 3.0, 3.0, 0.0])
    assert tg.argmax(tg.tensor(ties)).item() == torch.argmax(torch.tensor(ties)).item()
    f32 = np.array([1.0, -2.5], np.float32)
    np.testing.assert_array_equal(tg.tensor(f32).view(np.int32).numpy(),
                                  torch.tensor(f32).view(torch.int32).numpy())
    assert t.size() == tuple(tx.size()) and t.size(-1) == tx.size(-1)
    assert tx.squeeze(0).shape == (2, 3)                  # torch: a no-op; tapegrad raises
    with pytest.raises(ValueError):
        t.squeeze(0)


@pytest.mark.needs_torch
@pytest.mark.parametrize("name, call", [
    ("view", lambda t: t.view(3, 4)),
    ("view-1", lambda t: t.view(-1, 6)),
    ("view_as", lambda t: t.view_as(t.reshape(4, 3))),
    ("unsqueeze", lambda t: t.unsqueeze(-2)),
    ("expand", lambda t: t[:, :1].expand(5, -1, 3)),
    ("expand_as", lambda t: t[:1].expand_as(t)),
    ("permute", lambda t: t.reshape(2, 2, 3).permute(2, 0, 1)),
    ("flatten", lambda t: t.reshape(2, 2, 3).flatten(1)),
    ("flatten2", lambda t: t.reshape(2, 2, 3).flatten(0, 1)),
    ("repeat_interleave", lambda t: t.repeat_interleave(2, dim=0)),
    ("repeat_interleave-flat", lambda t: t.repeat_interleave(3)),
    ("clone", lambda t: t.clone()),
    ("contiguous", lambda t: t.T.contiguous()),
    ("pow", lambda t: t.abs().pow(1.5)),
    ("masked_fill", lambda t: t.masked_fill(t > 0, 0.25)),
    ("double", lambda t: t.double()),
    ("float", lambda t: t.float()),
])
def test_methods_match_torch(name, call):
    torch = _torch()
    x = _rand(4, 3) + 0.1
    a = tg.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    ours, theirs = call(a), call(b)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-6)
    u = _rand(*ours.shape, seed=5)
    (ours * tg.tensor(u).astype(ours.dtype)).sum().backward()
    (theirs * torch.tensor(u, dtype=theirs.dtype)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)


@pytest.mark.needs_torch
def test_non_differentiable_methods_match_torch():
    torch = _torch()
    x = _rand(3, 4)
    t, tx = tg.tensor(x), torch.tensor(x)
    assert t.numel() == tx.numel() and t.dim() == tx.dim()
    assert t.size() == tuple(tx.size()) and t.size(1) == tx.size(1)
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        np.testing.assert_array_equal(getattr(t, name)(0.1).numpy(),
                                      getattr(tx, name)(0.1).numpy())
    for name in ("long", "int", "bool", "half"):
        np.testing.assert_array_equal(getattr(t, name)().numpy(),
                                      getattr(tx, name)().numpy())
    np.testing.assert_array_equal(t.type_as(tg.tensor([1], dtype=np.int32)).numpy(),
                                  tx.type_as(torch.tensor([1], dtype=torch.int32)).numpy())
    with pytest.raises(RuntimeError):
        tx.T.view(-1)
    with pytest.raises(RuntimeError):
        t.T.view(-1)
    np.testing.assert_array_equal(tg.cat([t, t], dim=1).numpy(),
                                  torch.cat([tx, tx], dim=1).numpy())
