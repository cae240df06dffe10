"""Issue 14's ops against PyTorch: values, first and second derivatives (needs_torch).

Each case runs the tapegrad op and its PyTorch counterpart on the same random float64
inputs, and compares the values, the VJP with a random cotangent ``u`` and the gradient
of ``<vjp, v>`` for a random ``v`` (a Hessian-vector product, i.e. second derivatives).
PyTorch is an independent implementation, so this catches wrong rules the contract
kit's few fixed samples do not reach (other axes, batches, broadcasting, ties).

Deliberate differences (documented in the ops' docs), compared only away from them:

- hypot at (0, 0): tapegrad's gradient is 0 (a subgradient), torch's is nan.
- heaviside, floor_divide: torch has no gradient (raises); not compared here.
- fmax/fmin at ties: tapegrad splits the gradient evenly, torch gives it to x1; compared
  without ties. Where both inputs are NaN tapegrad gives g to both.
- median/nanmedian of an even count: NumPy's mean of the two middle values, torch.median
  returns the lower one; compared on odd counts (torch.quantile(0.5) on even ones).
- sort at ties: tapegrad's gradient goes where NumPy's stable sort puts the element, so
  ties are compared against torch.sort(stable=True).
- eigh/svd/qr/eig: the sign of each vector is a convention; vectors are compared through
  sign-invariant functions (|U|, |V| sign(w)), with distinct eigen/singular values.
- one-triangle inputs (cholesky, eigh, eigvalsh): tapegrad's gradient is that of the
  triangle NumPy reads, torch's the symmetric one; compared through a symmetrized input
  (the same function for both) or torch applied to the read triangle made symmetric.
- logaddexp(2) with an infinite input, arctan2 at the origin, vector norms at 0: torch's
  second derivatives are nan there, tapegrad's the limits (first order only compared).
- sinc at 0: torch's second derivative is nan there, tapegrad's the limit -pi^2/3 (0 left out).
- cumprod with zeros: both take the exact derivative (products of the other factors).
"""

import numpy as np
import pytest
import tapegrad as tg

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")


# ---------------------------------------------------------------------------------------
# The harness
# ---------------------------------------------------------------------------------------

def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy(force=True)   # (force: a ZeroTensor too)
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t)


def compare(tg_fn, t_fn, inputs, *, rtol=1e-8, atol=1e-10, second=True, seed=0,
            grad_rtol=None, grad_atol=None):
    """Values, VJP and HVP of tg_fn vs t_fn on float64 `inputs` (numpy arrays)."""
    rng = np.random.default_rng(seed)
    grad_rtol = rtol if grad_rtol is None else grad_rtol
    grad_atol = atol if grad_atol is None else grad_atol
    a = [tg.tensor(np.array(x, dtype=np.float64), requires_grad=True) for x in inputs]
    b = [torch.tensor(np.array(x, dtype=np.float64), requires_grad=True) for x in inputs]
    ya, yb = _flat(tg_fn(*a)), _flat(t_fn(*b))
    assert len(ya) == len(yb)
    for p, q in zip(ya, yb):
        assert tuple(p.shape) == tuple(q.shape), (p.shape, q.shape)
        np.testing.assert_allclose(_np(p), _np(q), rtol=rtol, atol=atol, err_msg="value")
    keep = [i for i, q in enumerate(yb) if q.requires_grad and q.dtype.is_floating_point]
    us = [rng.standard_normal(tuple(yb[i].shape)) for i in keep]
    ga = tg.grad([ya[i] for i in keep], a, grad_outputs=[tg.tensor(u) for u in us],
                 create_graph=second, allow_unused=True)
    gb = torch.autograd.grad([yb[i] for i in keep], b, grad_outputs=[torch.tensor(u) for u in us],
                             create_graph=second, allow_unused=True)
    for k, (p, q) in enumerate(zip(ga, gb)):
        pv = np.zeros(np.shape(inputs[k])) if p is None else _np(p)
        qv = np.zeros(np.shape(inputs[k])) if q is None else _np(q)
        np.testing.assert_allclose(pv, qv, rtol=grad_rtol, atol=grad_atol,
                                   err_msg=f"first derivative, input {k}")
    if not second:
        return
    vs = [rng.standard_normal(np.shape(x)) for x in inputs]
    sa = sum(((p * tg.tensor(v)).sum() for p, v in zip(ga, vs)
              if p is not None and p.requires_grad), tg.tensor(0.0))
    sb = sum(((q * torch.tensor(v)).sum() for q, v in zip(gb, vs)
              if q is not None and q.requires_grad), torch.tensor(0.0))
    ha = tg.grad(sa, a, allow_unused=True) if sa.requires_grad else [None] * len(a)
    hb = (torch.autograd.grad(sb, b, allow_unused=True) if sb.requires_grad
          else [None] * len(b))
    for k, (p, q) in enumerate(zip(ha, hb)):
        pv = np.zeros(np.shape(inputs[k])) if p is None else _np(p)
        qv = np.zeros(np.shape(inputs[k])) if q is None else _np(q)
        np.testing.assert_allclose(pv, qv, rtol=10 * grad_rtol, atol=10 * grad_atol,
                                   err_msg=f"second derivative, input {k}")


R = np.random.default_rng(1234)


def normal(*shape):
    return R.standard_normal(shape)


def uniform(lo, hi, *shape):
    return R.uniform(lo, hi, shape)


def positive(*shape):
    return R.uniform(0.3, 3.0, shape)


def away(*shape):
    """Normal values kept away from 0 (|x| >= 0.2)."""
    x = R.standard_normal(shape)
    return np.where(np.abs(x) < 0.2, np.sign(x) * 0.2 + x, x)


def off_grid(*shape, scale=3.0):
    """Values away from integers (jumps of floor/round/remainder)."""
    x = R.uniform(-scale, scale, shape)
    return np.floor(x) + R.uniform(0.15, 0.85, shape)


def case(name, tg_fn, t_fn, *inputs, **kw):
    return pytest.param(tg_fn, t_fn, inputs, kw, id=name)


def run(tg_fn, t_fn, inputs, kw):
    compare(tg_fn, t_fn, inputs, **kw)


# ---------------------------------------------------------------------------------------
# Elementwise (tapegrad_elementwise.ufuncs)
# ---------------------------------------------------------------------------------------

def _unary(name, tname, gen, shapes=((3, 4), (5,), ())):
    tf = tname if callable(tname) else getattr(torch, tname)
    return [case(f"{name}{s}", getattr(tg, name), tf, gen(*s)) for s in shapes]


def _binary(name, tname, gen_a, gen_b, shapes=(((3, 4), (3, 4)), ((2, 3, 4), (4,)),
                                                ((3, 1), (1, 5)), ((), (3,)))):
    tf = tname if callable(tname) else getattr(torch, tname)
    return [case(f"{name}{sa}{sb}", getattr(tg, name), tf, gen_a(*sa), gen_b(*sb))
            for sa, sb in shapes]


ELEMENTWISE = (
    _unary("tan", "tan", lambda *s: uniform(-1.2, 1.2, *s))
    + _unary("sinh", "sinh", normal) + _unary("cosh", "cosh", normal)
    + _unary("arcsin", "asin", lambda *s: uniform(-0.9, 0.9, *s))
    + _unary("arccos", "acos", lambda *s: uniform(-0.9, 0.9, *s))
    + _unary("arctan", "atan", normal) + _unary("arcsinh", "asinh", normal)
    + _unary("arccosh", "acosh", lambda *s: uniform(1.1, 4.0, *s))
    + _unary("arctanh", "atanh", lambda *s: uniform(-0.9, 0.9, *s))
    + _binary("arctan2", "atan2", away, away)
    # (at the origin torch's first derivatives are 0, its second ones nan)
    + [case("arctan2_origin", tg.arctan2, torch.atan2, np.array([0.0, -0.0, 1.0]),
            np.array([0.0, 0.0, 2.0]), second=False)]
    + _binary("hypot", "hypot", away, away)
    + _unary("sinc", "sinc", normal)
    + [case("sinc_small", tg.sinc, torch.sinc,
            np.array([1e-3, -0.05, 0.0999, 0.1001, -0.3, 1.0, 2.5]), rtol=1e-7)]
    + _unary("deg2rad", "deg2rad", normal) + _unary("rad2deg", "rad2deg", normal)
    + _unary("radians", "deg2rad", normal) + _unary("degrees", "rad2deg", normal)
    + _unary("log1p", "log1p", lambda *s: uniform(-0.7, 3.0, *s))
    + _unary("expm1", "expm1", normal)
    + _unary("log2", "log2", positive) + _unary("log10", "log10", positive)
    + _unary("exp2", "exp2", normal)
    + _binary("logaddexp", "logaddexp", normal, normal)
    + [case("logaddexp_far", tg.logaddexp, torch.logaddexp,
            np.array([-800.0, 800.0, 3.0]), np.array([-801.0, 799.0, 3.0]))]
    + [case("logaddexp_inf", tg.logaddexp, torch.logaddexp,
            np.array([np.inf, 2.0, -np.inf, 1.0]), np.array([1.0, np.inf, 3.0, -np.inf]),
            second=False),
       case("logaddexp2_inf", tg.logaddexp2, torch.logaddexp2,
            np.array([np.inf, -np.inf, 0.3]), np.array([1e300, 0.5, -np.inf]), second=False)]
    + _binary("logaddexp2", "logaddexp2", normal, normal)
    + _unary("reciprocal", "reciprocal", away)
    + _unary("cbrt", lambda x: torch.sign(x) * torch.abs(x) ** (1 / 3), away)
    + _binary("fmax", "fmax", normal, normal) + _binary("fmin", "fmin", normal, normal)
    + _unary("floor", "floor", off_grid) + _unary("ceil", "ceil", off_grid)
    + _unary("trunc", "trunc", off_grid) + _unary("rint", "round", off_grid)
    + [case("round_decimals", lambda x: tg.round(x, 1), lambda x: torch.round(x, decimals=1),
            off_grid(3, 4) / 10 + 0.001)]
    + _binary("remainder", "remainder", off_grid, away)
    + _binary("mod", "remainder", off_grid, away)
    + _binary("fmod", "fmod", off_grid, away)
    + _binary("copysign", "copysign", away, away)
    + _unary("absolute", "abs", away)
    + _binary("true_divide", "true_divide", normal, away)
    + [case("nan_to_num", lambda x: tg.nan_to_num(x, nan=-1.0, posinf=5.0, neginf=-5.0),
            lambda x: torch.nan_to_num(x, nan=-1.0, posinf=5.0, neginf=-5.0),
            np.array([[0.5, np.nan, np.inf], [-np.inf, 2.0, -3.0]]))]
)


@pytest.mark.parametrize("tg_fn, t_fn, inputs, kw", ELEMENTWISE)
def test_elementwise_matches_torch(tg_fn, t_fn, inputs, kw):
    run(tg_fn, t_fn, inputs, kw)


# ---------------------------------------------------------------------------------------
# Shape: scans, sorting, gathers, rearrangements, products (tapegrad_shape.rearrange)
# ---------------------------------------------------------------------------------------

def with_zeros(*shape, count=2):
    x = normal(*shape).reshape(-1)
    x[R.choice(x.size, count, replace=False)] = 0.0
    return x.reshape(shape)


def with_ties(*shape):
    """Values drawn from a few levels, so sorting meets many ties."""
    return R.integers(-2, 3, shape).astype(float) * 0.5


IDX = R.integers(0, 4, (3, 5))
PERM = np.stack([R.permutation(4) for _ in range(3)])[:, :3]       # distinct per row

SHAPE = [
    case("cumsum_ax1", lambda x: tg.cumsum(x, axis=1), lambda x: torch.cumsum(x, 1), normal(3, 4)),
    case("cumsum_none", lambda x: tg.cumsum(x), lambda x: torch.cumsum(x.flatten(), 0),
         normal(3, 4)),
    case("cumsum_neg", lambda x: x.cumsum(-2), lambda x: torch.cumsum(x, -2), normal(2, 3, 4)),
    case("cumprod_ax0", lambda x: tg.cumprod(x, axis=0), lambda x: torch.cumprod(x, 0),
         normal(4, 3)),
    case("cumprod_zeros", lambda x: tg.cumprod(x, axis=-1), lambda x: torch.cumprod(x, -1),
         with_zeros(3, 5, count=4)),
    case("cumprod_two_zeros_row", lambda x: tg.cumprod(x, axis=-1),
         lambda x: torch.cumprod(x, -1), np.array([[1.5, 0.0, 2.0, 0.0, -1.2, 0.7]])),
    case("cumprod_none", lambda x: tg.cumprod(x), lambda x: torch.cumprod(x.flatten(), 0),
         with_zeros(2, 3, count=1)),
    case("sort_last", lambda x: tg.sort(x), lambda x: torch.sort(x, -1).values, normal(3, 5)),
    case("sort_ax0", lambda x: tg.sort(x, axis=0), lambda x: torch.sort(x, 0).values,
         normal(4, 3, 2)),
    case("sort_none", lambda x: tg.sort(x, axis=None),
         lambda x: torch.sort(x.flatten()).values, normal(3, 4)),
    # stable sorts on both sides put a tie's gradient on the same element
    case("sort_ties_stable", lambda x: tg.sort(x, axis=1, kind="stable"),
         lambda x: torch.sort(x, dim=1, stable=True).values, with_ties(4, 6)),
    case("sort_ties_default", lambda x: tg.sort(x, axis=0),
         lambda x: torch.sort(x, dim=0, stable=True).values, with_ties(6, 3)),
    case("take_along_axis", lambda x: tg.take_along_axis(x, IDX, axis=1),
         lambda x: torch.take_along_dim(x, torch.tensor(IDX), 1), normal(3, 4)),
    case("take_along_axis0", lambda x: tg.take_along_axis(x, IDX.T[:, :3], axis=0),
         lambda x: torch.take_along_dim(x, torch.tensor(IDX.T[:, :3]), 0), normal(4, 3)),
    case("take_flat", lambda x: tg.take(x, IDX), lambda x: torch.take(x, torch.tensor(IDX)),
         normal(2, 3)),
    case("take_axis", lambda x: tg.take(x, [0, 2, 2, 1], axis=1),
         lambda x: torch.index_select(x, 1, torch.tensor([0, 2, 2, 1])), normal(2, 3, 2)),
    case("take_wrap", lambda x: tg.take(x, [-1, 5, 7], mode="wrap"),
         lambda x: torch.take(x, torch.tensor([5, 5, 1])), normal(2, 3)),
    case("take_clip", lambda x: tg.take(x, [-3, 2, 9], axis=0, mode="clip"),
         lambda x: torch.index_select(x, 0, torch.tensor([0, 2, 3])), normal(4, 2)),
    case("put_along_axis", lambda x, v: tg.put_along_axis(x, PERM, v, axis=1),
         lambda x, v: x.scatter(1, torch.tensor(PERM), v), normal(3, 4), normal(3, 3)),
    case("roll", lambda x: tg.roll(x, 2, axis=1), lambda x: torch.roll(x, 2, 1), normal(3, 4)),
    case("roll_none", lambda x: tg.roll(x, -3), lambda x: torch.roll(x, -3), normal(3, 4)),
    case("roll_multi", lambda x: tg.roll(x, (1, -2), axis=(0, 2)),
         lambda x: torch.roll(x, (1, -2), (0, 2)), normal(2, 3, 4)),
    case("flip", lambda x: tg.flip(x, 1), lambda x: torch.flip(x, (1,)), normal(2, 3, 4)),
    case("flip_none", lambda x: tg.flip(x), lambda x: torch.flip(x, (0, 1, 2)), normal(2, 3, 4)),
    case("fliplr", tg.fliplr, torch.fliplr, normal(2, 3, 4)),
    case("flipud", tg.flipud, torch.flipud, normal(3, 2)),
    case("repeat", lambda x: tg.repeat(x, 3, axis=1),
         lambda x: torch.repeat_interleave(x, 3, 1), normal(2, 3)),
    case("repeat_array", lambda x: tg.repeat(x, [1, 0, 2], axis=0),
         lambda x: torch.repeat_interleave(x, torch.tensor([1, 0, 2]), 0), normal(3, 2)),
    case("repeat_none", lambda x: tg.repeat(x, 2),
         lambda x: torch.repeat_interleave(x.flatten(), 2), normal(2, 3)),
    case("tile", lambda x: tg.tile(x, (2, 1, 3)), lambda x: torch.tile(x, (2, 1, 3)),
         normal(3, 2)),
    case("tile_short", lambda x: tg.tile(x, 2), lambda x: torch.tile(x, (2,)), normal(3, 2)),
    case("diag_1d", lambda x: tg.diag(x, 1), lambda x: torch.diag(x, 1), normal(4)),
    case("diag_2d", lambda x: tg.diag(x, -1), lambda x: torch.diag(x, -1), normal(4, 3)),
    case("diagonal", lambda x: tg.diagonal(x, 1, 0, 2), lambda x: torch.diagonal(x, 1, 0, 2),
         normal(3, 2, 4)),
    case("diagonal_method", lambda x: x.diagonal(-1), lambda x: torch.diagonal(x, -1),
         normal(4, 4)),
    case("trace", lambda x: tg.trace(x, 1), lambda x: torch.diagonal(x, 1).sum(-1),
         normal(3, 4)),
    case("trace_axes", lambda x: tg.trace(x, 0, 1, 2),
         lambda x: torch.diagonal(x, 0, 1, 2).sum(-1), normal(2, 3, 3)),
    case("inner", tg.inner, torch.inner, normal(2, 3, 4), normal(5, 4)),
    case("inner_1d", tg.inner, torch.inner, normal(4), normal(4)),
    case("outer", tg.outer, lambda a, b: torch.outer(a.flatten(), b.flatten()),
         normal(2, 3), normal(4)),
    case("kron", tg.kron, torch.kron, normal(2, 3), normal(3, 2)),
    case("kron_nd", tg.kron, torch.kron, normal(2, 1, 3), normal(2, 2)),
    case("kron_1d2d", tg.kron, torch.kron, normal(3), normal(2, 2)),
    case("tensordot2", tg.tensordot, torch.tensordot, normal(3, 4, 5), normal(4, 5, 2)),
    case("tensordot_int", lambda a, b: tg.tensordot(a, b, 1),
         lambda a, b: torch.tensordot(a, b, 1), normal(3, 4), normal(4, 2)),
    case("tensordot_lists", lambda a, b: tg.tensordot(a, b, axes=([2, 0], [0, 1])),
         lambda a, b: torch.tensordot(a, b, dims=([2, 0], [0, 1])), normal(3, 4, 5),
         normal(5, 3, 2)),
    case("tensordot0", lambda a, b: tg.tensordot(a, b, 0),
         lambda a, b: torch.tensordot(a, b, 0), normal(2, 3), normal(2)),
]


def _tpad(mode, widths_last_first):
    tmode = {"edge": "replicate", "wrap": "circular"}.get(mode, mode)

    def f(x):
        # torch pads the trailing dims of a batched (N, C, ...) input
        return torch.nn.functional.pad(x[None, None], widths_last_first, mode=tmode)[0, 0]
    return f


PAD = [
    case("pad_constant", lambda x: tg.pad(x, ((1, 2), (0, 3)), constant_values=1.5),
         lambda x: torch.nn.functional.pad(x, (0, 3, 1, 2), value=1.5), normal(3, 4)),
    case("pad_constant_int", lambda x: tg.pad(x, 2), lambda x: torch.nn.functional.pad(
        x, (2, 2, 2, 2, 2, 2)), normal(2, 3, 1)),
    case("pad_edge", lambda x: tg.pad(x, ((2, 1), (3, 0)), mode="edge"),
         _tpad("edge", (3, 0, 2, 1)), normal(3, 4)),
    case("pad_reflect", lambda x: tg.pad(x, ((2, 1), (3, 2)), mode="reflect"),
         _tpad("reflect", (3, 2, 2, 1)), normal(3, 4)),
    case("pad_wrap", lambda x: tg.pad(x, ((2, 1), (3, 2)), mode="wrap"),
         _tpad("wrap", (3, 2, 2, 1)), normal(3, 4)),
    case("pad_1d_reflect", lambda x: tg.pad(x, (2, 3), mode="reflect"),
         lambda x: torch.nn.functional.pad(x[None], (2, 3), mode="reflect")[0], normal(5)),
]


@pytest.mark.parametrize("tg_fn, t_fn, inputs, kw", SHAPE + PAD)
def test_shape_matches_torch(tg_fn, t_fn, inputs, kw):
    run(tg_fn, t_fn, inputs, kw)


# ---------------------------------------------------------------------------------------
# Shape: joining and splitting (tapegrad_shape.joining)
# ---------------------------------------------------------------------------------------

JOINING = [
    case("append_none", tg.append, lambda a, b: torch.cat([a.flatten(), b.flatten()]),
         normal(2, 3), normal(4)),
    case("append_axis", lambda a, b: tg.append(a, b, axis=1),
         lambda a, b: torch.cat([a, b], 1), normal(2, 3), normal(2, 2)),
    case("vstack", lambda a, b: tg.vstack([a, b]), lambda a, b: torch.vstack([a, b]),
         normal(3), normal(2, 3)),
    case("row_stack", lambda a, b: tg.row_stack((a, b)), lambda a, b: torch.vstack([a, b]),
         normal(3), normal(3)),
    case("hstack", lambda a, b: tg.hstack([a, b]), lambda a, b: torch.hstack([a, b]),
         normal(2, 3), normal(2, 1)),
    case("hstack_1d", lambda a, b: tg.hstack([a, b]), lambda a, b: torch.hstack([a, b]),
         normal(3), normal(2)),
    case("dstack", lambda a, b: tg.dstack([a, b]), lambda a, b: torch.dstack([a, b]),
         normal(3), normal(1, 3)),
    case("column_stack", lambda a, b: tg.column_stack([a, b]),
         lambda a, b: torch.column_stack([a, b]), normal(3), normal(3, 2)),
    case("array_split", lambda a: tg.array_split(a, 3, axis=1),
         lambda a: torch.tensor_split(a, 3, 1), normal(2, 7)),
    case("array_split_idx", lambda a: tg.array_split(a, [1, 3, 3, 9]),
         lambda a: torch.tensor_split(a, [1, 3, 3, 9]), normal(5, 2)),
    case("hsplit", lambda a: tg.hsplit(a, [1, 2]), lambda a: torch.hsplit(a, [1, 2]),
         normal(2, 4)),
    case("hsplit_1d", lambda a: tg.hsplit(a, 2), lambda a: torch.hsplit(a, 2), normal(4)),
    case("vsplit", lambda a: tg.vsplit(a, 2), lambda a: torch.vsplit(a, 2), normal(4, 2)),
    case("dsplit", lambda a: tg.dsplit(a, [3]), lambda a: torch.dsplit(a, [3]), normal(1, 2, 4)),
    case("atleast_1d", tg.atleast_1d, torch.atleast_1d, normal()),
    case("atleast_2d", tg.atleast_2d, torch.atleast_2d, normal(3)),
    case("atleast_3d_1d", tg.atleast_3d, torch.atleast_3d, normal(3)),
    case("atleast_3d_2d", tg.atleast_3d, torch.atleast_3d, normal(2, 3)),
    case("atleast_3d_0d", tg.atleast_3d, torch.atleast_3d, normal()),
]


# ---------------------------------------------------------------------------------------
# Shape: statistics (tapegrad_shape.statistics), logsumexp (tapegrad_nn.functional)
# ---------------------------------------------------------------------------------------

def with_nans(*shape, count=3):
    x = normal(*shape).reshape(-1)
    x[R.choice(x.size, count, replace=False)] = np.nan
    return x.reshape(shape)


def _tquantile(q, dim=None, keepdim=False, interpolation="linear", nan=False):
    fn = torch.nanquantile if nan else torch.quantile

    def f(x):
        return fn(x, torch.tensor(q, dtype=torch.float64), dim=dim, keepdim=keepdim,
                  interpolation=interpolation)
    return f


QS = np.array([0.0, 0.1, 0.25, 0.5, 0.73, 1.0])
STATISTICS = [
    case("diff", tg.diff, torch.diff, normal(3, 5)),
    case("diff_n2_ax0", lambda x: tg.diff(x, 2, axis=0), lambda x: torch.diff(torch.diff(x, dim=0), dim=0),
         normal(5, 3)),
    case("diff_prepend_append", lambda x, p, q: tg.diff(x, 1, 1, p, q),
         lambda x, p, q: torch.diff(x, 1, 1, p, q), normal(3, 4), normal(3, 2), normal(3, 1)),
    case("diff_n3", lambda x: tg.diff(x, n=3), lambda x: torch.diff(x, n=3), normal(2, 6)),
    case("gradient", tg.gradient, lambda x: torch.gradient(x)[0], normal(6)),
    case("gradient_2d", tg.gradient, lambda x: torch.gradient(x), normal(4, 5)),
    case("gradient_spacing", lambda x: tg.gradient(x, 0.5, axis=1),
         lambda x: torch.gradient(x, spacing=0.5, dim=1)[0], normal(3, 5)),
    case("gradient_edge2", lambda x: tg.gradient(x, 2.0, edge_order=2),
         lambda x: torch.gradient(x, spacing=2.0, edge_order=2), normal(4, 5)),
    case("gradient_coords", lambda x: tg.gradient(x, np.array([0.0, 0.5, 1.7, 2.0, 3.5]), axis=0),
         lambda x: torch.gradient(x, spacing=(torch.tensor([0.0, 0.5, 1.7, 2.0, 3.5],
                                                           dtype=torch.float64),), dim=0)[0],
         normal(5, 2)),
    case("gradient_coords_edge2",
         lambda x: tg.gradient(x, np.array([0.0, 0.5, 1.7, 2.0, 3.5]), edge_order=2),
         lambda x: torch.gradient(x, spacing=(torch.tensor([0.0, 0.5, 1.7, 2.0, 3.5],
                                                           dtype=torch.float64),),
                                  edge_order=2)[0], normal(5)),
    case("ptp", lambda x: tg.ptp(x, axis=1), lambda x: torch.amax(x, 1) - torch.amin(x, 1),
         normal(3, 5)),
    case("ptp_ties", lambda x: tg.ptp(x, axis=0, keepdims=True),
         lambda x: torch.amax(x, 0, keepdim=True) - torch.amin(x, 0, keepdim=True),
         with_ties(6, 4)),
    case("ptp_none", tg.ptp, lambda x: torch.amax(x) - torch.amin(x), with_ties(3, 4)),
    case("amax_ties", lambda x: tg.amax(x, axis=(0, 2)), lambda x: torch.amax(x, (0, 2)),
         with_ties(3, 2, 4)),
    case("amin", lambda x: tg.amin(x, axis=-1, keepdims=True),
         lambda x: torch.amin(x, -1, keepdim=True), normal(3, 4)),
    case("nansum", lambda x: tg.nansum(x, axis=1), lambda x: torch.nansum(x, 1), with_nans(3, 4)),
    case("nansum_none", tg.nansum, torch.nansum, with_nans(3, 4)),
    case("nanmean", lambda x: tg.nanmean(x, axis=0, keepdims=True),
         lambda x: torch.nanmean(x, 0, keepdim=True), with_nans(4, 3)),
    case("nanmean_tuple", lambda x: tg.nanmean(x, axis=(0, 2)),
         lambda x: torch.nanmean(x, (0, 2)), with_nans(3, 2, 4, count=5)),
    case("average", lambda x: tg.average(x, axis=1), lambda x: torch.mean(x, 1), normal(3, 4)),
    case("average_weights", lambda x, w: tg.average(x, axis=1, weights=w),
         lambda x, w: (x * w).sum(1) / w.sum(), normal(3, 4), positive(4)),
    case("average_weights_full", lambda x, w: tg.average(x, weights=w),
         lambda x, w: (x * w).sum() / w.sum(), normal(3, 4), positive(3, 4)),
    case("average_weights_axes", lambda x, w: tg.average(x, axis=(2, 0), weights=w),
         lambda x, w: (x * w.T[:, None, :]).sum((0, 2)) / w.sum(), normal(3, 2, 4),
         positive(4, 3)),
    case("median_odd", lambda x: tg.median(x, axis=1), lambda x: torch.median(x, 1).values,
         normal(3, 5)),
    case("median_even_as_quantile", lambda x: tg.median(x, axis=0),
         lambda x: torch.quantile(x, 0.5, dim=0), normal(4, 3)),
    case("median_none", tg.median, lambda x: torch.quantile(x, 0.5), normal(3, 4)),
    case("median_keepdims", lambda x: tg.median(x, axis=(0, 2), keepdims=True),
         lambda x: torch.quantile(x.permute(1, 0, 2).reshape(3, -1), 0.5, dim=1)
         .reshape(1, 3, 1), normal(2, 3, 4)),
    case("nanmedian_odd", lambda x: tg.nanmedian(x, axis=1),
         lambda x: torch.nanmedian(x, 1).values,
         np.array([[1.0, np.nan, 3.0, 0.5, 2.0, -1.0],
                   [np.nan, 0.7, 0.2, 0.1, -0.3, 4.0]])),
    case("nanmedian_any", lambda x: tg.nanmedian(x, axis=0),
         lambda x: torch.nanquantile(x, 0.5, dim=0), with_nans(5, 3, count=4)),
    case("quantile", lambda x: tg.quantile(x, QS, axis=1), _tquantile(QS, 1), normal(3, 7)),
    case("quantile_scalar", lambda x: tg.quantile(x, 0.3), _tquantile(0.3), normal(4, 5)),
    case("quantile_keepdims", lambda x: tg.quantile(x, QS, axis=0, keepdims=True),
         _tquantile(QS, 0, True), normal(6, 2)),
    case("quantile_ties", lambda x: tg.quantile(x, QS, axis=1), _tquantile(QS, 1),
         with_ties(3, 8), second=True),
    *[case(f"quantile_{m}", lambda x, m=m: tg.quantile(x, QS, axis=-1, method=m),
           _tquantile(QS, -1, interpolation=m), normal(2, 6))
      for m in ("lower", "higher", "midpoint", "nearest")],
    case("percentile", lambda x: tg.percentile(x, 100 * QS, axis=1), _tquantile(QS, 1),
         normal(3, 5)),
    case("nanquantile", lambda x: tg.nanquantile(x, QS, axis=1), _tquantile(QS, 1, nan=True),
         with_nans(3, 7, count=4)),
    case("nanpercentile", lambda x: tg.nanpercentile(x, [10.0, 90.0], axis=0),
         _tquantile([0.1, 0.9], 0, nan=True), with_nans(6, 3, count=4)),
    case("logsumexp", lambda x: tg.logsumexp(x, axis=1), lambda x: torch.logsumexp(x, 1),
         normal(3, 4)),
    case("logsumexp_none", tg.logsumexp, lambda x: torch.logsumexp(x, (0, 1)), normal(3, 4)),
    case("logsumexp_keep", lambda x: tg.logsumexp(x, axis=(0, 2), keepdims=True),
         lambda x: torch.logsumexp(x, (0, 2), keepdim=True), normal(2, 3, 4)),
    case("logsumexp_big", lambda x: tg.logsumexp(x, axis=0), lambda x: torch.logsumexp(x, 0),
         np.array([[800.0, -900.0], [799.0, -901.0]])),
    case("logsumexp_b", lambda x, b: tg.logsumexp(x, axis=1, b=b),
         lambda x, b: torch.logsumexp(x + torch.log(b), 1), normal(3, 4), positive(3, 4)),
    case("logsumexp_b_bcast", lambda x, b: tg.logsumexp(x, axis=0, b=b),
         lambda x, b: torch.logsumexp(x + torch.log(b), 0), normal(3, 4), positive(4)),
]


@pytest.mark.parametrize("tg_fn, t_fn, inputs, kw", JOINING + STATISTICS)
def test_statistics_and_joining_match_torch(tg_fn, t_fn, inputs, kw):
    run(tg_fn, t_fn, inputs, kw)


# ---------------------------------------------------------------------------------------
# Linear algebra (tapegrad_linalg: decompositions, norms, products, linalg)
# ---------------------------------------------------------------------------------------

L = tg.linalg
TL = torch.linalg


def general(*shape):
    return normal(*shape) + 2.5 * np.eye(shape[-1])


def spd(*shape):
    x = normal(*shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def sym_tg(a):
    return 0.5 * (a + L.matrix_transpose(a))


def sym_t(a):
    return 0.5 * (a + a.mT)


def distinct_sv(*shape):
    u, _, vh = np.linalg.svd(normal(*shape), full_matrices=False)
    k = min(shape[-2:])
    return (u * (1.0 + np.arange(k)[::-1] * 0.7)) @ vh


def real_spectrum(n):
    v = normal(n, n) + 2.0 * np.eye(n)
    return (v * (1.0 + np.arange(n) * 1.1)) @ np.linalg.inv(v)


LINALG = [
    case("inv", L.inv, TL.inv, general(3, 3)),
    case("inv_batch", L.inv, TL.inv, general(2, 3, 3)),
    case("det", L.det, TL.det, general(3, 3)),
    case("det_batch", L.det, TL.det, general(2, 2, 4, 4)),
    case("det_negative", L.det, TL.det, general(3, 3) * np.array([1.0, -1.0, 1.0])),
    case("slogdet", lambda a: L.slogdet(a).logabsdet, lambda a: TL.slogdet(a).logabsdet,
         general(2, 3, 3) * np.array([1.0, -1.0, 1.0])),
    case("solve_vec", L.solve, TL.solve, general(3, 3), normal(3)),
    case("solve_mat", L.solve, TL.solve, general(3, 3), normal(3, 2)),
    case("solve_batch", L.solve, TL.solve, general(2, 3, 3), normal(2, 3, 4)),
    case("solve_bcast_a", L.solve, TL.solve, general(3, 3), normal(2, 3, 2)),
    case("solve_bcast_both", L.solve, TL.solve, general(2, 1, 3, 3), normal(4, 3, 2)),
    case("solve_batch_vec", L.solve, lambda a, b: TL.solve(a, b[..., None].expand(2, 3, 1))[..., 0],
         general(2, 3, 3), normal(3)),
    case("cholesky", lambda a: L.cholesky(sym_tg(a)), lambda a: TL.cholesky(sym_t(a)),
         spd(3, 3)),
    case("cholesky_upper", lambda a: L.cholesky(sym_tg(a), upper=True),
         lambda a: TL.cholesky(sym_t(a), upper=True), spd(2, 4, 4)),
    case("qr_tall", lambda a: tuple(L.qr(a)), lambda a: tuple(TL.qr(a)), normal(5, 3)),
    case("qr_square", lambda a: tuple(L.qr(a)), lambda a: tuple(TL.qr(a)), general(3, 3)),
    case("qr_wide", lambda a: tuple(L.qr(a)), lambda a: tuple(TL.qr(a)), normal(2, 3, 5)),
    case("qr_r", lambda a: L.qr(a, mode="r"), lambda a: TL.qr(a)[1], normal(4, 3)),
    case("qr_complete_wide", lambda a: tuple(L.qr(a, mode="complete")),
         lambda a: tuple(TL.qr(a, mode="complete")), normal(2, 4)),
    case("eigh", lambda a: (L.eigh(sym_tg(a))[0], tg.abs(L.eigh(sym_tg(a))[1])),
         lambda a: (TL.eigh(sym_t(a))[0], torch.abs(TL.eigh(sym_t(a))[1])), normal(4, 4)),
    case("eigh_batch_U", lambda a: (L.eigh(sym_tg(a), UPLO="U")[0],
                                    tg.abs(L.eigh(sym_tg(a), UPLO="U")[1])),
         lambda a: (TL.eigh(sym_t(a), UPLO="U")[0], torch.abs(TL.eigh(sym_t(a), UPLO="U")[1])),
         normal(2, 3, 3)),
    case("eigvalsh", lambda a: L.eigvalsh(sym_tg(a)), lambda a: TL.eigvalsh(sym_t(a)),
         normal(2, 4, 4)),
    case("eigvalsh_U", lambda a: L.eigvalsh(a, UPLO="U"),
         lambda a: TL.eigvalsh(torch.triu(a) + torch.triu(a, 1).mT), normal(3, 3)),
    case("eigh_L_triangle", lambda a: L.eigh(a)[0],
         lambda a: TL.eigh(torch.tril(a) + torch.tril(a, -1).mT)[0], normal(4, 4)),
    case("cholesky_triangle", L.cholesky,
         lambda a: TL.cholesky(torch.tril(a) + torch.tril(a, -1).mT), spd(3, 3)),
    case("eigvals", lambda a: tg.sort(L.eigvals(a)),
         lambda a: torch.sort(TL.eigvals(a).real).values, real_spectrum(4), rtol=1e-7),
    case("eig", lambda a: tg.abs(L.eig(a)[1]) * tg.sign(L.eig(a)[0])[..., None, :],
         lambda a: torch.abs(TL.eig(a)[1]) * torch.sign(TL.eig(a)[0].real)[..., None, :],
         real_spectrum(3), rtol=1e-7),
    case("svd_vals", lambda a: L.svd(a, full_matrices=False).S,
         lambda a: TL.svd(a, full_matrices=False).S, distinct_sv(4, 3)),
    case("svd_vectors_tall", lambda a: (tg.abs(L.svd(a, full_matrices=False).U),
                                        tg.abs(L.svd(a, full_matrices=False).Vh)),
         lambda a: (torch.abs(TL.svd(a, full_matrices=False).U),
                    torch.abs(TL.svd(a, full_matrices=False).Vh)), distinct_sv(5, 3)),
    case("svd_vectors_wide", lambda a: (tg.abs(L.svd(a, full_matrices=False).U),
                                        tg.abs(L.svd(a, full_matrices=False).Vh)),
         lambda a: (torch.abs(TL.svd(a, full_matrices=False).U),
                    torch.abs(TL.svd(a, full_matrices=False).Vh)), distinct_sv(2, 3, 5)),
    case("svd_square", lambda a: tuple(tg.abs(t) for t in L.svd(a)),
         lambda a: tuple(torch.abs(t) for t in TL.svd(a)), distinct_sv(3, 3)),
    case("svdvals", L.svdvals, TL.svdvals, normal(2, 3, 4)),
    case("pinv_tall", L.pinv, TL.pinv, normal(5, 3)),
    case("pinv_wide", L.pinv, TL.pinv, normal(2, 3, 4)),
    case("pinv_hermitian", lambda a: L.pinv(sym_tg(a), hermitian=True),
         lambda a: TL.pinv(sym_t(a), hermitian=True), spd(3, 3)),
    case("lstsq_vec", lambda a, b: L.lstsq(a, b)[0],
         lambda a, b: (TL.pinv(a) @ b), normal(5, 3), normal(5)),
    case("lstsq_mat", lambda a, b: L.lstsq(a, b)[:2:1] and L.lstsq(a, b)[0],
         lambda a, b: TL.lstsq(a, b).solution, normal(5, 3), normal(5, 2)),
    case("lstsq_residuals", lambda a, b: L.lstsq(a, b)[1],
         lambda a, b: ((a @ TL.pinv(a) @ b - b) ** 2).sum(0), normal(5, 3), normal(5, 2)),
    case("lstsq_residuals_vec", lambda a, b: L.lstsq(a, b)[1],
         lambda a, b: ((a @ TL.pinv(a) @ b - b) ** 2).sum(0, keepdim=True),
         normal(5, 3), normal(5)),
    case("lstsq_wide", lambda a, b: L.lstsq(a, b)[0], lambda a, b: TL.pinv(a) @ b,
         normal(2, 4), normal(2, 3)),
    case("lstsq_s", lambda a, b: L.lstsq(a, b)[3], lambda a, b: TL.svdvals(a),
         normal(4, 3), normal(4)),
]

NORMS = [
    *[case(f"vector_norm_{o}", lambda x, o=o: L.vector_norm(x, ord=o, axis=1),
           lambda x, o=o: TL.vector_norm(x, ord=o, dim=1), away(3, 5))
      for o in (2, 1, 3, 0.5, -1, -2.5, np.inf, -np.inf)],
    case("vector_norm_zero_ord0", lambda x: L.vector_norm(x, ord=0, axis=0),
         lambda x: TL.vector_norm(x, ord=0, dim=0), with_zeros(4, 3)),
    case("vector_norm_none", L.vector_norm, TL.vector_norm, normal(2, 3, 4)),
    case("vector_norm_keep", lambda x: L.vector_norm(x, axis=(0, 2), keepdims=True, ord=3),
         lambda x: TL.vector_norm(x, dim=(0, 2), keepdim=True, ord=3), away(2, 3, 4)),
    case("vector_norm_inf_ties", lambda x: L.vector_norm(x, ord=np.inf, axis=-1),
         lambda x: TL.vector_norm(x, ord=np.inf, dim=-1),
         np.array([[1.0, -2.0, 2.0], [0.5, 0.3, -0.1]]), second=False),
    case("vector_norm_zero_row", lambda x: L.vector_norm(x, axis=1),
         lambda x: TL.vector_norm(x, dim=1), np.array([[0.0, 0.0], [3.0, 4.0]]), second=False),
    case("norm_default", L.norm, TL.norm, normal(3, 4)),
    case("norm_vec_axis", lambda x: L.norm(x, 3, axis=0), lambda x: TL.vector_norm(x, 3, dim=0),
         away(3, 4)),
    case("norm_1d_ord1", lambda x: L.norm(x, 1), lambda x: TL.norm(x, 1), away(5)),
    *[case(f"matrix_norm_{o}", lambda x, o=o: L.matrix_norm(x, ord=o),
           lambda x, o=o: TL.matrix_norm(x, ord=o), distinct_sv(2, 3, 4) + 0.05 * normal(2, 3, 4))
      for o in ("fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf)],
    *[case(f"norm_axes_{o}", lambda x, o=o: L.norm(x, o, axis=(2, 0), keepdims=True),
           lambda x, o=o: TL.matrix_norm(x, ord=o, dim=(2, 0), keepdim=True),
           distinct_sv(4, 3, 4) + 0.05 * normal(4, 3, 4))
      for o in ("fro", "nuc", 2, 1, -1, np.inf, -np.inf)],
    *[case(f"cond_{p}", lambda x, p=p: L.cond(x, p), lambda x, p=p: TL.cond(x, p),
           general(2, 3, 3)) for p in (None, 2, -2)],
    # (torch.linalg.cond's backward fails for these p: its definition, composed)
    *[case(f"cond_{p}", lambda x, p=p: L.cond(x, p),
           lambda x, p=p: TL.matrix_norm(x, p) * TL.matrix_norm(TL.inv(x), p),
           general(2, 3, 3)) for p in ("fro", "nuc", 1, -1, np.inf, -np.inf)],
]

PRODUCTS = [
    *[case(f"matrix_power_{n}", lambda a, n=n: L.matrix_power(a, n),
           lambda a, n=n: TL.matrix_power(a, n), 0.6 * general(2, 3, 3)) for n in (0, 1, 2, 3, 5, 6, -1, -3)],
    case("multi_dot", lambda a, b, c, d: L.multi_dot([a, b, c, d]),
         lambda a, b, c, d: TL.multi_dot([a, b, c, d]), normal(3), normal(3, 6),
         normal(6, 2), normal(2)),
    case("multi_dot_mats", lambda a, b, c: L.multi_dot([a, b, c]),
         lambda a, b, c: TL.multi_dot([a, b, c]), normal(5, 2), normal(2, 6), normal(6, 3)),
    case("multi_dot_two", lambda a, b: L.multi_dot([a, b]),
         lambda a, b: TL.multi_dot([a, b]), normal(4, 2), normal(2)),
    case("vecdot", L.vecdot, TL.vecdot, normal(2, 3), normal(3)),
    case("vecdot_axis", lambda a, b: L.vecdot(a, b, axis=0), lambda a, b: TL.vecdot(a, b, dim=0),
         normal(4, 3), normal(4, 1)),
    case("cross", L.cross, lambda a, b: TL.cross(a, b.expand(4, 3)), normal(4, 3), normal(3)),
    case("cross_axis", lambda a, b: L.cross(a, b, axis=0), lambda a, b: TL.cross(a, b, dim=0),
         normal(3, 2), normal(3, 2)),
    case("np_cross", tg.cross, TL.cross, normal(2, 3), normal(2, 3)),
    case("np_cross_axes", lambda a, b: tg.cross(a, b, axisa=0, axisb=1, axisc=0),
         lambda a, b: TL.cross(a.T, b, dim=-1).T, normal(3, 4), normal(4, 3)),
    case("np_cross_2d", tg.cross, lambda a, b: a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0],
         normal(4, 2), normal(2)),
    case("np_cross_2_3", tg.cross, lambda a, b: TL.cross(
        torch.cat([a, torch.zeros(a.shape[:-1] + (1,), dtype=a.dtype)], -1), b),
         normal(4, 2), normal(4, 3)),
    case("np_cross_3_2", tg.cross, lambda a, b: TL.cross(
        a, torch.cat([b, torch.zeros(1, dtype=b.dtype)], -1).expand(4, 3)),
         normal(4, 3), normal(2)),
    case("outer_la", L.outer, torch.outer, normal(3), normal(4)),
    case("matrix_transpose", L.matrix_transpose, lambda x: x.mT, normal(2, 3, 4)),
    case("tensorinv", lambda a: L.tensorinv(a, ind=2),
         lambda a: TL.tensorinv(a, ind=2), general(6, 6).reshape(2, 3, 6)),
    case("tensorinv_ind1", lambda a: L.tensorinv(a, ind=1),
         lambda a: TL.tensorinv(a, ind=1), general(6, 6).reshape(6, 2, 3)),
    case("tensorsolve", L.tensorsolve, TL.tensorsolve, general(6, 6).reshape(2, 3, 6),
         normal(2, 3)),
    case("tensorsolve_axes", lambda a, b: L.tensorsolve(a, b, axes=(0, 2)),
         lambda a, b: TL.tensorsolve(a, b, dims=(0, 2)),
         general(4, 4).reshape(2, 2, 2, 2), normal(2, 2)),
    case("la_matmul", L.matmul, TL.matmul, normal(2, 3, 4), normal(4, 2)),
    case("la_diagonal", lambda x: L.diagonal(x, offset=1), lambda x: TL.diagonal(x, offset=1),
         normal(2, 3, 4)),
    case("la_trace", lambda x: L.trace(x, offset=-1),
         lambda x: torch.diagonal(x, -1, -2, -1).sum(-1), normal(2, 4, 3)),
    case("la_tensordot", lambda a, b: L.tensordot(a, b, axes=1),
         lambda a, b: torch.tensordot(a, b, 1), normal(2, 3), normal(3, 4)),
]


@pytest.mark.parametrize("tg_fn, t_fn, inputs, kw", LINALG + NORMS + PRODUCTS)
def test_linalg_matches_torch(tg_fn, t_fn, inputs, kw):
    run(tg_fn, t_fn, inputs, kw)


# ---------------------------------------------------------------------------------------
# tapegrad-scipy: special, stats, linalg, signal
# ---------------------------------------------------------------------------------------

SP = tg.scipy.special
TS = torch.special
D = torch.distributions


def prob(*shape):
    return uniform(0.05, 0.95, *shape)


def _sp_unary(name, tfn, gen, shapes=((3, 4), ())):
    return [case(f"{name}{s}", getattr(SP, name), tfn, gen(*s)) for s in shapes]


SPECIAL = [
    *_sp_unary("gammaln", torch.lgamma, positive),
    *_sp_unary("digamma", torch.digamma, positive),
    *_sp_unary("gamma", lambda x: torch.exp(torch.lgamma(x)), positive),
    case("gamma_negative", SP.gamma, lambda x: torch.exp(torch.lgamma(x)) * torch.tensor(
        [-1.0, 1.0, 1.0], dtype=torch.float64), np.array([-0.5, -1.5, -3.3]), rtol=1e-7),
    case("gammaln_negative", SP.gammaln, torch.lgamma, np.array([-0.5, -1.5, -3.3, 0.2])),
    *_sp_unary("erf", torch.erf, normal), *_sp_unary("erfc", torch.erfc, normal),
    *_sp_unary("erfinv", torch.erfinv, lambda *s: uniform(-0.95, 0.95, *s)),
    *_sp_unary("erfcinv", lambda x: torch.erfinv(1 - x), lambda *s: uniform(0.1, 1.9, *s),
               ),
    *_sp_unary("expit", torch.sigmoid, lambda *s: 5 * normal(*s)),
    case("expit_tails", SP.expit, torch.sigmoid, np.array([-40.0, -10.0, 0.0, 10.0, 40.0])),
    *_sp_unary("logit", torch.logit, prob),
    *_sp_unary("ndtr", TS.ndtr, normal),
    *_sp_unary("log_ndtr", TS.log_ndtr, lambda *s: 5 * normal(*s)),
    case("log_ndtr_tails", SP.log_ndtr, TS.log_ndtr, np.array([-40.0, -8.0, 0.0, 8.0, 30.0])),
    *_sp_unary("ndtri", TS.ndtri, prob),
    *_sp_unary("i0", TS.i0, lambda *s: 2 * normal(*s)),
    *_sp_unary("i1", TS.i1, lambda *s: 2 * normal(*s)),
    case("i1_zero", SP.i1, TS.i1, np.array([0.0, 1e-8, -0.3])),
    *_sp_unary("i0e", TS.i0e, lambda *s: 3 * away(*s)),
    *_sp_unary("i1e", TS.i1e, lambda *s: 3 * away(*s)),
    *_sp_unary("entr", TS.entr, positive),
    case("betaln", SP.betaln, lambda a, b: torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b),
         positive(3, 4), positive(4)),
    case("beta", SP.beta, lambda a, b: torch.exp(
        torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)), positive(3, 1), positive(4)),
    case("xlogy", SP.xlogy, TS.xlogy, normal(3, 4), positive(4)),
    case("xlogy_zero", SP.xlogy, TS.xlogy, np.array([0.0, 0.0, 1.5, -2.0]),
         np.array([0.5, 2.0, 3.0, 0.7])),
    case("xlog1py", SP.xlog1py, TS.xlog1py, normal(3, 4), uniform(-0.8, 2.0, 4)),
    case("xlog1py_zero", SP.xlog1py, TS.xlog1py, np.array([0.0, 0.0, 1.5]),
         np.array([-0.5, 2.0, 3.0])),
    case("rel_entr", SP.rel_entr, lambda x, y: x * torch.log(x / y), positive(3, 4), positive(4)),
    case("kl_div", SP.kl_div, lambda x, y: x * torch.log(x / y) - x + y, positive(3, 4),
         positive(3, 1)),
    *[case(f"polygamma{n}", lambda x, n=n: SP.polygamma(n, x),
           lambda x, n=n: torch.polygamma(n, x), positive(3, 4)) for n in (0, 1, 2, 3)],
    case("logsumexp", lambda x: SP.logsumexp(x, axis=1), lambda x: torch.logsumexp(x, 1),
         normal(3, 4)),
    case("logsumexp_all", SP.logsumexp, lambda x: torch.logsumexp(x, (0, 1, 2)), normal(2, 3, 4)),
    case("logsumexp_b", lambda x, b: SP.logsumexp(x, axis=0, b=b, keepdims=True),
         lambda x, b: torch.logsumexp(x + torch.log(b), 0, keepdim=True), normal(3, 4),
         positive(3, 4)),
    case("logsumexp_b_bcast", lambda x, b: SP.logsumexp(x, axis=-1, b=b),
         lambda x, b: torch.logsumexp(x + torch.log(b), -1), normal(3, 4), positive(4)),
    case("logsumexp_b_col", lambda x, b: SP.logsumexp(x, axis=(0, 1), b=b),
         lambda x, b: torch.logsumexp(x + torch.log(b), (0, 1)), normal(3, 1), positive(3, 4)),
    case("softmax", SP.softmax, lambda x: torch.softmax(x.flatten(), 0).reshape(x.shape),
         normal(3, 4)),
    case("softmax_axis", lambda x: SP.softmax(x, axis=0), lambda x: torch.softmax(x, 0),
         normal(3, 4)),
    case("softmax_axes", lambda x: SP.softmax(x, axis=(0, 2)),
         lambda x: torch.exp(x - torch.logsumexp(x, (0, 2), keepdim=True)), normal(2, 3, 4)),
    case("log_softmax", SP.log_softmax,
         lambda x: torch.log_softmax(x.flatten(), 0).reshape(x.shape), normal(3, 4)),
    case("log_softmax_axes", lambda x: SP.log_softmax(x, axis=(0, 2)),
         lambda x: x - torch.logsumexp(x, (0, 2), keepdim=True), normal(2, 3, 4)),
]

ST = tg.scipy.stats


def _t_gamma(x, a, loc, scale):
    return D.Gamma(a, 1 / scale).log_prob(x - loc)


def _t_beta(x, a, b, loc, scale):
    return D.Beta(a, b).log_prob((x - loc) / scale) - torch.log(scale)


STATS = [
    case("norm_logpdf", ST.norm.logpdf, lambda x, m, s: D.Normal(m, s).log_prob(x),
         normal(3, 4), normal(4), positive(3, 1)),
    case("norm_pdf", ST.norm.pdf, lambda x, m, s: D.Normal(m, s).log_prob(x).exp(),
         normal(3, 4), normal(4), positive(3, 1)),
    case("norm_cdf", ST.norm.cdf, lambda x, m, s: D.Normal(m, s).cdf(x),
         normal(3, 4), normal(4), positive(3, 1)),
    case("norm_logcdf", ST.norm.logcdf, lambda x, m, s: TS.log_ndtr((x - m) / s),
         3 * normal(3, 4), normal(4), positive(3, 1)),
    case("t_logpdf", ST.t.logpdf, lambda x, df, m, s: D.StudentT(df, m, s).log_prob(x),
         normal(3, 4), positive(4) + 0.5, normal(3, 1), positive(4)),
    case("t_pdf", ST.t.pdf, lambda x, df, m, s: D.StudentT(df, m, s).log_prob(x).exp(),
         normal(3, 4), positive(4) + 0.5, normal(3, 1), positive(4)),
    case("gamma_logpdf", ST.gamma.logpdf, _t_gamma, positive(3, 4) + 0.5, positive(4),
         uniform(0, 0.4, 3, 1), positive(4)),
    case("gamma_pdf", ST.gamma.pdf, lambda *a: _t_gamma(*a).exp(), positive(3, 4) + 0.5,
         positive(4), uniform(0, 0.4, 3, 1), positive(4)),
    case("chi2_logpdf", ST.chi2.logpdf, lambda x, df, loc, s: _t_gamma(x, df / 2, loc, 2 * s),
         positive(3, 4) + 0.5, positive(4) + 1, uniform(0, 0.4, 3, 1), positive(4)),
    case("chi2_pdf", ST.chi2.pdf, lambda x, df: D.Chi2(df).log_prob(x).exp(),
         positive(3, 4), positive(4) + 1),
    case("beta_logpdf", ST.beta.logpdf, _t_beta, uniform(0.2, 0.8, 3, 4), positive(4),
         positive(3, 1), uniform(-0.15, 0.15, 4), uniform(1.1, 1.4, 3, 1)),
    case("beta_pdf", ST.beta.pdf, lambda *a: _t_beta(*a).exp(), uniform(0.2, 0.8, 3, 4),
         positive(4), positive(3, 1), uniform(-0.15, 0.15, 4), uniform(1.1, 1.4, 3, 1)),
    case("poisson_logpmf", lambda mu: ST.poisson.logpmf(np.array([[0.0], [1.0], [4.0]]), mu),
         lambda mu: D.Poisson(mu).log_prob(torch.tensor([[0.0], [1.0], [4.0]],
                                                        dtype=torch.float64)), positive(4)),
    case("poisson_pmf", lambda mu: ST.poisson.pmf(np.array([0.0, 2.0, 5.0]), mu),
         lambda mu: D.Poisson(mu).log_prob(torch.tensor([0.0, 2.0, 5.0],
                                                        dtype=torch.float64)).exp(),
         positive(3)),
    case("dirichlet_logpdf", lambda x, a: ST.dirichlet.logpdf(x, a),
         lambda x, a: D.Dirichlet(a).log_prob(x.T),
         (lambda s: s / s.sum(0))(uniform(0.1, 1.0, 4, 5)), positive(4)),
    case("dirichlet_pdf_1d", lambda x, a: ST.dirichlet.pdf(x, a),
         lambda x, a: D.Dirichlet(a).log_prob(x).exp(),
         (lambda s: s / s.sum())(uniform(0.1, 1.0, 3)), positive(3)),
    case("mvn_logpdf", lambda x, m, c: ST.multivariate_normal.logpdf(x, m, sym_tg(c)),
         lambda x, m, c: D.MultivariateNormal(m, covariance_matrix=sym_t(c)).log_prob(x),
         normal(4, 3), normal(3), spd(3, 3)),
    case("mvn_pdf_1x", lambda x, m, c: ST.multivariate_normal.pdf(x, m, sym_tg(c)),
         lambda x, m, c: D.MultivariateNormal(m, covariance_matrix=sym_t(c)).log_prob(x).exp(),
         normal(3), normal(3), spd(3, 3)),
    case("mvn_diag", lambda x, m, c: ST.multivariate_normal.logpdf(x, m, c),
         lambda x, m, c: D.MultivariateNormal(m, covariance_matrix=torch.diag(c)).log_prob(x),
         normal(5, 2), normal(2), positive(2)),
    case("mvn_scalar", lambda x: ST.multivariate_normal.logpdf(x, 0.5, 2.0),
         lambda x: D.Normal(torch.tensor(0.5, dtype=torch.float64),
                             torch.tensor(2.0, dtype=torch.float64).sqrt()).log_prob(x),
         normal(5)),
]

SL = tg.scipy.linalg


def triangular(n, lower):
    a = normal(n, n) + 3 * np.eye(n)
    return np.tril(a) if lower else np.triu(a)


SCIPY_LINALG = [
    case("solve_triangular_lower", lambda a, b: SL.solve_triangular(a, b, lower=True),
         lambda a, b: TL.solve_triangular(torch.tril(a), b, upper=False),
         triangular(3, True) + np.triu(normal(3, 3), 1), normal(3, 2)),
    case("solve_triangular_upper_vec", lambda a, b: SL.solve_triangular(a, b),
         lambda a, b: TL.solve_triangular(torch.triu(a), b[:, None], upper=True)[:, 0],
         triangular(4, False) + np.tril(normal(4, 4), -1), normal(4)),
    case("solve_triangular_trans", lambda a, b: SL.solve_triangular(a, b, trans="T", lower=True),
         lambda a, b: TL.solve_triangular(torch.tril(a).mT, b, upper=True),
         triangular(3, True), normal(3, 2)),
    case("solve_triangular_trans1", lambda a, b: SL.solve_triangular(a, b, trans=1),
         lambda a, b: TL.solve_triangular(torch.triu(a).mT, b[:, None], upper=False)[:, 0],
         triangular(3, False), normal(3)),
    case("solve_triangular_unit", lambda a, b: SL.solve_triangular(a, b, lower=True,
                                                                   unit_diagonal=True),
         lambda a, b: TL.solve_triangular(torch.tril(a), b, upper=False, unitriangular=True),
         triangular(3, True) * 0.3, normal(3, 2)),
    case("scipy_cholesky", lambda a: SL.cholesky(a),
         lambda a: TL.cholesky(torch.triu(a) + torch.triu(a, 1).mT, upper=True), spd(3, 3)),
    case("scipy_cholesky_lower", lambda a: SL.cholesky(a, lower=True),
         lambda a: TL.cholesky(torch.tril(a) + torch.tril(a, -1).mT), spd(3, 3)),
    case("cho_solve_lower", lambda c, b: SL.cho_solve((c, True), b),
         lambda c, b: torch.cholesky_solve(b, torch.tril(c), upper=False),
         np.linalg.cholesky(spd(3, 3)) + np.triu(normal(3, 3), 1), normal(3, 2)),
    case("cho_solve_upper_vec", lambda c, b: SL.cho_solve((c, False), b),
         lambda c, b: torch.cholesky_solve(b[:, None], torch.triu(c), upper=True)[:, 0],
         np.linalg.cholesky(spd(3, 3)).T, normal(3)),
    case("sqrtm", lambda a: SL.sqrtm(sym_tg(a)),
         lambda a: (lambda w, v: (v * torch.sqrt(w)) @ v.mT)(*TL.eigh(sym_t(a))), spd(4, 4)),
]


def _tconv(a, b, mode, flip=True):
    """scipy.signal.convolve (flip) / correlate of 1-d or 2-d inputs through conv{1,2}d."""
    nd = a.ndim
    k = torch.flip(b, tuple(range(nd))) if flip else b
    conv = torch.nn.functional.conv1d if nd == 1 else torch.nn.functional.conv2d
    full = conv(a[None, None], k[None, None], padding=tuple(s - 1 for s in b.shape))[0, 0]
    if mode == "full":
        return full
    if mode == "valid":
        idx = tuple(slice(s - 1, s - 1 + n - s + 1) for n, s in zip(a.shape, b.shape))
        return full[idx]
    idx = tuple(slice((f - n) // 2, (f - n) // 2 + n) for f, n in zip(full.shape, a.shape))
    return full[idx]


SIGNAL = [
    *[case(f"convolve_{mode}_{'x'.join(map(str, sa))}",
           lambda a, b, mode=mode: tg.scipy.signal.convolve(a, b, mode=mode),
           lambda a, b, mode=mode: _tconv(a, b, mode), normal(*sa), normal(*sb))
      for mode in ("full", "same", "valid") for sa, sb in (((7,), (3,)), ((5, 6), (2, 3)),
                                                            ((4, 5), (3, 4)))],
    *[case(f"correlate_{mode}_{'x'.join(map(str, sa))}",
           lambda a, b, mode=mode: tg.scipy.signal.correlate(a, b, mode=mode),
           lambda a, b, mode=mode: _tconv(a, b, mode, flip=False), normal(*sa), normal(*sb))
      for mode in ("full", "same", "valid") for sa, sb in (((8,), (4,)), ((5, 6), (2, 3)))],
]


@pytest.mark.parametrize("tg_fn, t_fn, inputs, kw", SPECIAL + STATS + SCIPY_LINALG + SIGNAL)
def test_scipy_matches_torch(tg_fn, t_fn, inputs, kw):
    run(tg_fn, t_fn, inputs, kw)
