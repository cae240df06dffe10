"""Normalisation: layer_norm, rms_norm, group_norm, batch_norm, instance_norm, normalize
and the layers LayerNorm, RMSNorm, GroupNorm, BatchNorm1d/2d, InstanceNorm1d/2d.

References are slow, obvious NumPy loops (no tapegrad output as an expected value);
gradients are checked against finite differences; the needs_torch tests compare with
PyTorch."""

import itertools

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import run_doctests
from tapegrad_nn import nn_normalization, normalization

F = tg.nn.functional
nn = tg.nn


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


# ---------------------------------------------------------------------------------------
# Slow references: loop over every normalised group, one group at a time
# ---------------------------------------------------------------------------------------

def ref_standardize_rows(rows, eps):
    """rows: (M, K); each row standardised on its own, biased variance."""
    out = np.empty_like(rows)
    for i, row in enumerate(rows):
        mu = sum(row) / len(row)
        var = sum((v - mu) ** 2 for v in row) / len(row)
        out[i] = [(v - mu) / np.sqrt(var + eps) for v in row]
    return out


def ref_layer_norm(x, k, w=None, b=None, eps=1e-5):
    lead, tail = x.shape[:x.ndim - k], x.shape[x.ndim - k:]
    y = ref_standardize_rows(x.reshape(-1, int(np.prod(tail))), eps).reshape(x.shape)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    assert y.shape[:len(lead)] == lead
    return y


def ref_rms_norm(x, k, w=None, eps=1e-5):
    rows = x.reshape(-1, int(np.prod(x.shape[x.ndim - k:])))
    out = np.array([[v / np.sqrt(sum(u * u for u in row) / len(row) + eps) for v in row]
                    for row in rows]).reshape(x.shape)
    return out if w is None else out * w


def ref_group_norm(x, g, w=None, b=None, eps=1e-5):
    n, c = x.shape[:2]
    out = np.empty_like(x)
    per = c // g
    for i in range(n):
        for j in range(g):
            block = x[i, j * per:(j + 1) * per]
            out[i, j * per:(j + 1) * per] = ref_standardize_rows(
                block.reshape(1, -1), eps).reshape(block.shape)
    shape = (c,) + (1,) * (x.ndim - 2)
    if w is not None:
        out = out * w.reshape(shape)
    if b is not None:
        out = out + b.reshape(shape)
    return out


def ref_channel_stats(x):
    """Per-channel batch mean, biased and unbiased variance of an (N, C, *) array."""
    c = x.shape[1]
    vals = [np.moveaxis(x, 1, 0)[j].ravel() for j in range(c)]
    mean = np.array([sum(v) / len(v) for v in vals])
    ss = np.array([sum((u - m) ** 2 for u in v) for v, m in zip(vals, mean)])
    n = len(vals[0])
    return mean, ss / n, ss / (n - 1)


def ref_batch_norm_train(x, w=None, b=None, eps=1e-5):
    mean, var, _ = ref_channel_stats(x)
    shape = (x.shape[1],) + (1,) * (x.ndim - 2)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y


def ref_batch_norm_eval(x, rm, rv, w=None, b=None, eps=1e-5):
    shape = (x.shape[1],) + (1,) * (x.ndim - 2)
    y = (x - rm.reshape(shape)) / np.sqrt(rv.reshape(shape) + eps)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y


def close(got, want, tol=1e-10):
    np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------------
# Functional values
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,k", [((3, 5), 1), ((2, 3, 4), 2), ((2, 3, 4), 1), ((7,), 1)])
def test_layer_norm_matches_the_loop_reference(shape, k):
    x = rand(*shape)
    ns = shape[len(shape) - k:]
    w, b = rand(*ns, seed=1), rand(*ns, seed=2)
    close(F.layer_norm(tg.tensor(x), ns), ref_layer_norm(x, k))
    close(F.layer_norm(tg.tensor(x), ns, tg.tensor(w), tg.tensor(b), eps=0.1),
          ref_layer_norm(x, k, w, b, 0.1))


def test_layer_norm_int_normalized_shape_and_float32_kept():
    x = rand(4, 6).astype(np.float32)
    y = F.layer_norm(tg.tensor(x), 6)
    assert y.dtype == np.float32
    close(y, ref_layer_norm(x.astype(np.float64), 1), tol=1e-5)


@pytest.mark.parametrize("k", [64, 5000])
def test_float32_accuracy_with_a_large_offset(k):
    # the variance is taken of x - mean (two passes), so an offset of 1e3 costs nothing
    x64 = 1e3 + rand(8, k)
    x = x64.astype(np.float32)
    want = ref_standardize_rows(x.astype(np.float64), 1e-5) if k < 100 else \
        (x - x.astype(np.float64).mean(1, keepdims=True)) / np.sqrt(
            x.astype(np.float64).var(1, keepdims=True) + 1e-5)
    got = F.layer_norm(tg.tensor(x), k)
    assert got.dtype == np.float32
    # float32 near 1e3 has a spacing of 6e-5: a float32 mean is off by about that much
    np.testing.assert_allclose(got.numpy(), want, atol=3e-4)
    g = tg.tensor(x, requires_grad=True)
    F.rms_norm(g, k).sum().backward()
    assert np.all(np.isfinite(g.grad.numpy()))


def test_rms_norm_matches_reference_and_default_eps_is_the_dtype_epsilon():
    x = rand(3, 4)
    w = rand(4, seed=3)
    close(F.rms_norm(tg.tensor(x), (4,), tg.tensor(w), eps=1e-3), ref_rms_norm(x, 1, w, 1e-3))
    close(F.rms_norm(tg.tensor(x), (4,)), ref_rms_norm(x, 1, eps=np.finfo(np.float64).eps))
    # a row of zeros with eps=None: 0 / sqrt(eps) = 0, no NaN
    z32 = F.rms_norm(tg.zeros((2, 3), np.float32), 3)
    assert z32.dtype == np.float32 and np.all(z32.numpy() == 0)
    x3 = rand(2, 3, 4, seed=4)
    close(F.rms_norm(tg.tensor(x3), (3, 4), eps=1e-6), ref_rms_norm(x3, 2, eps=1e-6))


@pytest.mark.parametrize("shape,g", [((2, 4, 3), 2), ((2, 6, 2, 3), 3), ((3, 4), 1),
                                     ((2, 4, 5), 4)])
def test_group_norm_matches_the_loop_reference(shape, g):
    x = rand(*shape)
    c = shape[1]
    w, b = rand(c, seed=1), rand(c, seed=2)
    close(F.group_norm(tg.tensor(x), g), ref_group_norm(x, g))
    close(F.group_norm(tg.tensor(x), g, tg.tensor(w), tg.tensor(b), 1e-3),
          ref_group_norm(x, g, w, b, 1e-3))


@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 6), (3, 2, 4, 5)])
def test_batch_norm_training_and_eval_match_the_references(shape):
    x = rand(*shape)
    c = shape[1]
    w, b = rand(c, seed=1), rand(c, seed=2)
    rm, rv = rand(c, seed=3), np.abs(rand(c, seed=4)) + 0.5
    close(F.batch_norm(tg.tensor(x), None, None, tg.tensor(w), tg.tensor(b), training=True),
          ref_batch_norm_train(x, w, b))
    close(F.batch_norm(tg.tensor(x), tg.tensor(rm), tg.tensor(rv), tg.tensor(w), tg.tensor(b)),
          ref_batch_norm_eval(x, rm, rv, w, b))


def test_batch_norm_training_updates_the_running_buffers_in_place():
    x = rand(6, 3, 4)
    rm, rv = tg.tensor(rand(3, seed=1)), tg.tensor(np.abs(rand(3, seed=2)) + 1)
    rm0, rv0 = rm.numpy().copy(), rv.numpy().copy()
    same_m, same_v = rm, rv
    F.batch_norm(tg.tensor(x), rm, rv, training=True, momentum=0.3)
    mean, _, unbiased = ref_channel_stats(x)
    assert rm is same_m and rv is same_v
    close(rm, 0.7 * rm0 + 0.3 * mean)
    close(rv, 0.7 * rv0 + 0.3 * unbiased)          # unbiased in the running update
    # NumPy arrays are updated in place too
    am, av = np.zeros(3), np.ones(3)
    F.batch_norm(tg.tensor(x), am, av, training=True)
    close(am, 0.1 * mean)
    close(av, 0.9 + 0.1 * unbiased)


def test_batch_norm_eval_leaves_running_buffers_alone():
    rm, rv = tg.zeros(2), tg.ones(2)
    F.batch_norm(tg.tensor(rand(4, 2)), rm, rv, training=False)
    assert rm.tolist() == [0.0, 0.0] and rv.tolist() == [1.0, 1.0]


def test_instance_norm_matches_reference_and_updates_buffers():
    x = rand(3, 2, 5, 4)
    w, b = rand(2, seed=1), rand(2, seed=2)
    n, c = x.shape[:2]
    rows = x.reshape(n * c, -1)
    want = ref_standardize_rows(rows, 1e-5).reshape(x.shape) * w.reshape(2, 1, 1) \
        + b.reshape(2, 1, 1)
    rm, rv = tg.zeros(2), tg.ones(2)
    close(F.instance_norm(tg.tensor(x), rm, rv, tg.tensor(w), tg.tensor(b), momentum=0.5),
          want)
    means = rows.mean(axis=1).reshape(n, c).mean(axis=0)
    unb = rows.var(axis=1, ddof=1).reshape(n, c).mean(axis=0)
    close(rm, 0.5 * means)
    close(rv, 0.5 + 0.5 * unb)
    rmv, rvv = rm.numpy().copy(), rv.numpy().copy()
    close(F.instance_norm(tg.tensor(x), rm, rv, use_input_stats=False),
          ref_batch_norm_eval(x, rmv, rvv))


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1)])
def test_normalize_matches_reference(p, dim):
    x = rand(3, 4)
    norm = np.sum(np.abs(x) ** p, axis=dim, keepdims=True) ** (1 / p)
    close(F.normalize(tg.tensor(x), p, dim), x / np.maximum(norm, 1e-12))


def test_normalize_of_a_zero_vector_is_zero_with_a_finite_gradient():
    x = tg.tensor([[0.0, 0.0], [3.0, 4.0]], requires_grad=True)
    y = F.normalize(x, eps=1e-6)
    assert y.tolist()[0] == [0.0, 0.0]
    y.sum().backward()
    g = x.grad.numpy()
    assert np.all(np.isfinite(g))
    close(g[0], [1e6, 1e6], tol=1e-6)               # x / eps near zero (PyTorch's)


def test_functions_are_registered_and_reachable_from_tg_and_functional():
    for name in normalization.__all__:
        assert getattr(F, name) is getattr(normalization, name)
        assert callable(getattr(tg, name))


# ---------------------------------------------------------------------------------------
# Gradients (first and second order) beyond the kit's samples
# ---------------------------------------------------------------------------------------

def t64(*shape, seed=0):
    return tg.tensor(rand(*shape, seed=seed), requires_grad=True)


@pytest.mark.parametrize("f,args", [
    (lambda x, w, b: F.layer_norm(x, (3, 4), w, b, 1e-3), ((2, 3, 4), (3, 4), (3, 4))),
    (lambda x, w: F.rms_norm(x, 4, w, 1e-3), ((3, 4), (4,))),
    (lambda x, w, b: F.group_norm(x, 2, w, b), ((2, 4, 3), (4,), (4,))),
    (lambda x, w, b: F.batch_norm(x, None, None, w, b, True), ((4, 3, 2), (3,), (3,))),
    (lambda x, w, b: F.instance_norm(x, None, None, w, b), ((2, 3, 4), (3,), (3,))),
    (lambda x: F.normalize(x, 2.0, 1), ((3, 4),)),
])
def test_gradients_and_second_derivatives_match_finite_differences(f, args):
    inputs = [t64(*s, seed=i) for i, s in enumerate(args)]
    assert tg.gradcheck(f, inputs)
    assert tg.gradgradcheck(f, inputs)


def test_batch_norm_eval_gradient_flows_to_input_weight_bias_only():
    x, w, b = t64(4, 3), t64(3, seed=1), t64(3, seed=2)
    rm, rv = tg.zeros(3), tg.ones(3)
    assert tg.gradcheck(lambda x, w, b: F.batch_norm(x, rm, rv, w, b, False, eps=0.1),
                        [x, w, b])
    with pytest.raises(NotImplementedError, match="running_mean"):
        F.batch_norm(x, tg.zeros(3, requires_grad=True), rv)


@pytest.mark.parametrize("fn", ["batch_norm", "instance_norm"])
@pytest.mark.parametrize("which", ["running_mean", "running_var"])
def test_running_statistics_refuse_a_forward_mode_tangent(fn, which):
    x = t64(4, 3, 5) if fn == "instance_norm" else t64(4, 3)
    stats = {"running_mean": tg.zeros(3), "running_var": tg.ones(3)}

    def f(s):
        kw = dict(stats, **{which: s})
        return getattr(F, fn)(x, kw["running_mean"], kw["running_var"], use_input_stats=False) \
            if fn == "instance_norm" else F.batch_norm(x, kw["running_mean"], kw["running_var"])
    with pytest.raises(NotImplementedError, match=f"{fn}: the derivative for {which} is not "
                                                  f"implemented, and {which} carries a "
                                                  f"forward-mode tangent"):
        tg.testing.check_jvp(f, stats[which] + 0.5, np.ones(3))


def test_the_fused_op_is_one_node_on_the_tape():
    y = F.layer_norm(t64(2, 5), 5)
    assert y.grad_fn.name == "_standardize"
    assert F.rms_norm(t64(2, 5), 5).grad_fn.name == "_rms_scale"


# ---------------------------------------------------------------------------------------
# Modules
# ---------------------------------------------------------------------------------------

def test_module_parameters_buffers_and_state_dict_names_are_torchs():
    bn = nn.BatchNorm2d(4)
    sd = bn.state_dict()
    assert list(sd) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert [tuple(v.shape) for v in sd.values()] == [(4,), (4,), (4,), (4,), ()]
    assert sd["num_batches_tracked"].dtype == np.int64
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var",
                                                  "num_batches_tracked"]
    assert bn.weight.tolist() == [1.0] * 4 and bn.bias.tolist() == [0.0] * 4
    assert bn.running_var.tolist() == [1.0] * 4
    assert list(nn.BatchNorm1d(3, affine=False, track_running_stats=False).state_dict()) == []
    assert list(nn.LayerNorm((2, 3)).state_dict()) == ["weight", "bias"]
    assert nn.LayerNorm((2, 3)).weight.shape == (2, 3)
    assert list(nn.LayerNorm(3, bias=False).state_dict()) == ["weight"]
    assert list(nn.LayerNorm(3, elementwise_affine=False).state_dict()) == []
    assert list(nn.RMSNorm(3).state_dict()) == ["weight"]
    assert list(nn.GroupNorm(2, 4).state_dict()) == ["weight", "bias"]
    assert list(nn.InstanceNorm2d(3).state_dict()) == []
    assert list(nn.InstanceNorm1d(3, affine=True, track_running_stats=True).state_dict()) == [
        "weight", "bias", "running_mean", "running_var", "num_batches_tracked"]


def test_batch_norm_running_trajectory_follows_the_formula():
    bn = nn.BatchNorm1d(3, momentum=0.2)
    rm, rv = np.zeros(3), np.ones(3)
    for step in range(4):
        x = rand(5, 3, seed=step) * (step + 1) + step
        bn(tg.tensor(x))
        mean, _, unbiased = ref_channel_stats(x)
        rm, rv = 0.8 * rm + 0.2 * mean, 0.8 * rv + 0.2 * unbiased
        close(bn.running_mean, rm)
        close(bn.running_var, rv)
        assert int(bn.num_batches_tracked) == step + 1


def test_batch_norm_momentum_none_is_the_cumulative_average():
    bn = nn.BatchNorm2d(2, momentum=None)
    xs = [rand(3, 2, 2, 2, seed=s) for s in range(3)]
    for x in xs:
        bn(tg.tensor(x))
    stats = [ref_channel_stats(x) for x in xs]
    close(bn.running_mean, np.mean([s[0] for s in stats], axis=0))
    close(bn.running_var, np.mean([s[2] for s in stats], axis=0))


@pytest.mark.parametrize("momentum", [0.3, None])
def test_batch_norm_under_compile_updates_buffers_as_eager(momentum):
    bn, ref = nn.BatchNorm1d(2, momentum=momentum), nn.BatchNorm1d(2, momentum=momentum)
    step = tg.compile(bn)
    for s in range(4):
        x = tg.tensor(rand(4, 2, seed=s))
        close(step(x), ref(x))
    close(bn.running_mean, ref.running_mean.numpy())
    close(bn.running_var, ref.running_var.numpy())
    assert int(bn.num_batches_tracked) == 4


def test_batch_norm_train_uses_batch_stats_and_eval_uses_running_stats():
    bn = nn.BatchNorm2d(3)
    with tg.no_grad():
        bn.weight[...] = tg.tensor(rand(3, seed=1))
        bn.bias[...] = tg.tensor(rand(3, seed=2))
    w, b = bn.weight.numpy().copy(), bn.bias.numpy().copy()
    x = rand(4, 3, 2, 5)
    close(bn(tg.tensor(x)), ref_batch_norm_train(x, w, b))
    bn.eval()
    rm, rv = bn.running_mean.numpy().copy(), bn.running_var.numpy().copy()
    close(bn(tg.tensor(x)), ref_batch_norm_eval(x, rm, rv, w, b))
    assert int(bn.num_batches_tracked) == 1                     # eval does not count
    close(bn.running_mean, rm)
    # no running stats tracked: batch statistics in eval too
    free = nn.BatchNorm2d(3, track_running_stats=False).eval()
    close(free(tg.tensor(x)), ref_batch_norm_train(x))


def test_batch_norm_module_gradients_match_finite_differences():
    bn = nn.BatchNorm1d(3)
    x = t64(4, 3, 2)
    assert tg.gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, True),
                        [x, bn.weight, bn.bias])
    y = bn(x)
    (y * tg.tensor(rand(4, 3, 2, seed=5))).sum().backward()
    assert bn.weight.grad.shape == (3,) and bn.bias.grad.shape == (3,)
    close(bn.bias.grad, rand(4, 3, 2, seed=5).sum(axis=(0, 2)))


def test_state_dict_round_trip_restores_the_buffers():
    bn = nn.BatchNorm1d(2)
    bn(tg.tensor(rand(4, 2)))
    other = nn.BatchNorm1d(2)
    other.load_state_dict(bn.state_dict())
    close(other.running_mean, bn.running_mean.numpy())
    assert int(other.num_batches_tracked) == 1


def test_layer_rms_group_norm_modules_match_the_references():
    x = rand(2, 4, 3)
    ln = nn.LayerNorm((4, 3), eps=1e-3)
    with tg.no_grad():
        ln.weight[...] = tg.tensor(rand(4, 3, seed=1))
    close(ln(tg.tensor(x)), ref_layer_norm(x, 2, ln.weight.numpy(), ln.bias.numpy(), 1e-3))
    close(nn.RMSNorm(3, eps=1e-4)(tg.tensor(x)), ref_rms_norm(x, 1, eps=1e-4))
    close(nn.GroupNorm(2, 4)(tg.tensor(x)), ref_group_norm(x, 2))
    close(nn.InstanceNorm1d(4)(tg.tensor(x)),
          ref_standardize_rows(x.reshape(8, 3), 1e-5).reshape(x.shape))


def test_float32_layers():
    ln = nn.LayerNorm(4, dtype=np.float32)
    bn = nn.BatchNorm1d(4, dtype=np.float32)
    x = tg.tensor(rand(3, 4).astype(np.float32))
    assert ln(x).dtype == bn(x).dtype == bn.running_mean.dtype == np.float32


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------

def test_errors_name_the_layer_and_the_shapes():
    with pytest.raises(ValueError, match=r"BatchNorm2d\(16\).*16 channels.*got 8.*\(2, 8, 5, 5\)"):
        nn.BatchNorm2d(16)(tg.ones((2, 8, 5, 5)))
    with pytest.raises(ValueError, match=r"BatchNorm2d\(3\).*4-D.*\(2, 3\)"):
        nn.BatchNorm2d(3)(tg.ones((2, 3)))
    with pytest.raises(ValueError, match=r"BatchNorm1d\(3\).*2-D or 3-D"):
        nn.BatchNorm1d(3)(tg.ones((2, 3, 4, 5)))
    with pytest.raises(ValueError, match=r"LayerNorm\(\(4,\)\).*\(\*, 4\).*\(2, 3\)"):
        nn.LayerNorm(4)(tg.ones((2, 3)))
    with pytest.raises(ValueError, match=r"RMSNorm\(\(2, 3\)\)"):
        nn.RMSNorm((2, 3))(tg.ones((3, 2)))
    with pytest.raises(ValueError, match=r"GroupNorm\(2, 4\).*\(N, 4, \*\).*\(3, 6\)"):
        nn.GroupNorm(2, 4)(tg.ones((3, 6)))
    with pytest.raises(ValueError, match=r"InstanceNorm2d\(3\).*4-D"):
        nn.InstanceNorm2d(3)(tg.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ValueError, match="num_features"):
        nn.BatchNorm1d(0)
    with pytest.raises(TypeError, match="dtype"):
        nn.LayerNorm(3, dtype=np.int64)


@pytest.mark.parametrize("layer,shape", [(nn.LayerNorm(3), (2, 3)), (nn.RMSNorm(3), (2, 3)),
                                         (nn.GroupNorm(1, 3), (2, 3)),
                                         (nn.BatchNorm1d(3), (2, 3)),
                                         (nn.BatchNorm2d(3, affine=False), (2, 3, 2, 2)),
                                         (nn.InstanceNorm1d(3, affine=True), (2, 3, 4))])
def test_a_float32_input_to_a_float64_layer_names_both_dtypes(layer, shape):
    with pytest.raises(TypeError, match=r"input is float32 but the layer's parameters are float64"):
        layer(tg.ones(shape, np.float32))
    assert layer.float()(tg.ones(shape, np.float32)).dtype == np.float32


def test_functional_errors():
    x = tg.ones((2, 3))
    with pytest.raises(ValueError, match=r"layer_norm: normalized_shape \(4,\).*\(2, 3\)"):
        F.layer_norm(x, 4)
    with pytest.raises(ValueError, match=r"layer_norm: weight must have shape \(3,\), got \(2,\)"):
        F.layer_norm(x, 3, tg.ones(2))
    with pytest.raises(TypeError, match="normalized_shape"):
        F.layer_norm(x, "3")
    with pytest.raises(ValueError, match=r"group_norm: the 3 channels.*num_groups=2"):
        F.group_norm(x, 2)
    with pytest.raises(ValueError, match=r"batch_norm: running_mean must have shape \(3,\)"):
        F.batch_norm(x, tg.zeros(4), tg.ones(3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(tg.ones((1, 3)), None, None, training=True)
    with pytest.raises(ValueError, match="required when training=False"):
        F.batch_norm(x, None, None)
    with pytest.raises(ValueError, match=r"instance_norm: .*\(2, 3\)"):
        F.instance_norm(x)


def test_docstring_examples_run():
    for module in (normalization, nn_normalization):
        result = run_doctests(module)
        assert result.failed == 0 and result.attempted > 0


# ---------------------------------------------------------------------------------------
# PyTorch
# ---------------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


def _grads(f, arrays):
    ts = [tg.tensor(a, requires_grad=True) for a in arrays]
    y = f(*ts)
    gout = rand(*y.shape, seed=42)
    (y * tg.tensor(gout)).sum().backward()
    return y.numpy(), [t.grad.numpy() for t in ts], gout


def _torch_grads(torch, f, arrays, gout):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    y = f(*ts)
    (y * torch.tensor(gout)).sum().backward()
    return y.detach().numpy(), [t.grad.numpy() for t in ts]


def _compare_with_torch(torch, ours, theirs, arrays, tol=1e-9):
    y, g, gout = _grads(ours, arrays)
    ty, tgr = _torch_grads(torch, theirs, arrays, gout)
    close(y, ty, tol)
    for a, b in zip(g, tgr):
        close(a, b, tol)


@pytest.mark.needs_torch
@pytest.mark.parametrize("shape,k,eps", [((3, 5), 1, 1e-5), ((2, 3, 4), 2, 1e-3),
                                         ((4, 2, 3, 2), 3, 0.1), ((6,), 1, 1e-5)])
def test_layer_norm_and_rms_norm_equal_torch(shape, k, eps):
    torch = _torch()
    ns = shape[len(shape) - k:]
    arrays = [rand(*shape), rand(*ns, seed=1), rand(*ns, seed=2)]
    _compare_with_torch(torch, lambda x, w, b: F.layer_norm(x, ns, w, b, eps),
                        lambda x, w, b: torch.nn.functional.layer_norm(x, ns, w, b, eps), arrays)
    _compare_with_torch(torch, lambda x, w: F.rms_norm(x, ns, w, eps),
                        lambda x, w: torch.nn.functional.rms_norm(x, ns, w, eps), arrays[:2])
    _compare_with_torch(torch, lambda x: F.rms_norm(x, ns),
                        lambda x: torch.nn.functional.rms_norm(x, ns), arrays[:1])


@pytest.mark.needs_torch
@pytest.mark.parametrize("shape,g", [((2, 4, 3), 2), ((3, 6, 2, 2), 3), ((2, 4), 4),
                                     ((2, 6, 5), 1)])
def test_group_norm_equals_torch(shape, g):
    torch = _torch()
    c = shape[1]
    arrays = [rand(*shape), rand(c, seed=1), rand(c, seed=2)]
    _compare_with_torch(torch, lambda x, w, b: F.group_norm(x, g, w, b),
                        lambda x, w, b: torch.nn.functional.group_norm(x, g, w, b), arrays)


@pytest.mark.needs_torch
@pytest.mark.parametrize("cls,shape,kwargs", [
    ("BatchNorm1d", (5, 3), {}),
    ("BatchNorm1d", (4, 3, 6), {"momentum": 0.3}),
    ("BatchNorm1d", (4, 3), {"momentum": None}),
    ("BatchNorm2d", (3, 2, 4, 5), {}),
    ("BatchNorm2d", (3, 2, 4, 5), {"affine": False, "eps": 1e-3}),
    ("BatchNorm2d", (2, 3, 2, 2), {"track_running_stats": False}),
    ("InstanceNorm1d", (2, 3, 5), {}),
    ("InstanceNorm2d", (2, 3, 4, 4), {"affine": True, "track_running_stats": True}),
])
def test_norm_modules_equal_torch_in_train_and_eval_with_buffers(cls, shape, kwargs):
    torch = _torch()
    ours = getattr(nn, cls)(shape[1], **kwargs)
    theirs = getattr(torch.nn, cls)(shape[1], **kwargs).double()
    if ours.weight is not None:
        with tg.no_grad():
            ours.weight[...] = tg.tensor(rand(shape[1], seed=7))
            ours.bias[...] = tg.tensor(rand(shape[1], seed=8))
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                            for k, v in ours.state_dict().items()})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for mode, step in itertools.product(("train", "eval"), range(2)):
        getattr(ours, mode)()
        getattr(theirs, mode)()
        x = rand(*shape, seed=10 * step + (mode == "eval")) * 2 + 1
        params = [p for p in (ours.weight, ours.bias) if p is not None]
        for p in params:
            p.grad = None
        xt = tg.tensor(x, requires_grad=True)
        y = ours(xt)
        gout = rand(*shape, seed=3)
        (y * tg.tensor(gout)).sum().backward()
        theirs.zero_grad()
        xtt = torch.tensor(x, requires_grad=True)
        yt = theirs(xtt)
        (yt * torch.tensor(gout)).sum().backward()
        close(y.numpy(), yt.detach().numpy(), 1e-9)
        close(xt.grad.numpy(), xtt.grad.numpy(), 1e-8)
        tparams = [p for p in (theirs.weight, theirs.bias) if p is not None]
        for p, q in zip(params, tparams):
            close(p.grad.numpy(), q.grad.numpy(), 1e-8)
        for (name, v), (tname, tv) in zip(ours.state_dict().items(),
                                           theirs.state_dict().items()):
            assert name == tname
            close(v.numpy(), tv.numpy(), 1e-12)


@pytest.mark.needs_torch
def test_functional_batch_instance_norm_and_normalize_equal_torch():
    torch = _torch()
    x = rand(4, 3, 5)
    for training in (True, False):
        rm, rv = rand(3, seed=1), np.abs(rand(3, seed=2)) + 0.5
        trm, trv = torch.tensor(rm), torch.tensor(rv)
        arrays = [x, rand(3, seed=3), rand(3, seed=4)]
        _compare_with_torch(
            torch, lambda x, w, b, rm=rm, rv=rv, tr=training: F.batch_norm(
                x, rm, rv, w, b, tr, 0.25, 1e-4),
            lambda x, w, b, rm=trm, rv=trv, tr=training: torch.nn.functional.batch_norm(
                x, rm, rv, w, b, tr, 0.25, 1e-4), arrays)
        close(rm, trm.numpy(), 1e-12)
        close(rv, trv.numpy(), 1e-12)
    rm, rv = np.zeros(3), np.ones(3)
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    _compare_with_torch(torch, lambda x: F.instance_norm(x, rm, rv, momentum=0.4),
                        lambda x: torch.nn.functional.instance_norm(x, trm, trv, momentum=0.4),
                        [x])
    close(rm, trm.numpy(), 1e-12)
    close(rv, trv.numpy(), 1e-12)
    for p, dim in ((2.0, 1), (1.0, 0), (3.0, -1), (2.0, 2)):
        _compare_with_torch(torch, lambda x, p=p, dim=dim: F.normalize(x, p, dim),
                            lambda x, p=p, dim=dim: torch.nn.functional.normalize(x, p, dim),
                            [x])
    z = np.zeros((2, 3))
    _compare_with_torch(torch, lambda x: F.normalize(x, eps=1e-3),
                        lambda x: torch.nn.functional.normalize(x, eps=1e-3), [z])


@pytest.mark.needs_torch
def test_float32_layer_norm_and_batch_norm_close_to_torch():
    torch = _torch()
    x = rand(8, 4, 6).astype(np.float32)
    y = F.layer_norm(tg.tensor(x), (6,))
    close(y.numpy(), torch.nn.functional.layer_norm(torch.tensor(x), (6,)).numpy(), 1e-5)
    y = F.batch_norm(tg.tensor(x), None, None, training=True)
    ty = torch.nn.functional.batch_norm(torch.tensor(x), None, None, training=True)
    close(y.numpy(), ty.numpy(), 1e-5)


@pytest.mark.needs_torch
@pytest.mark.parametrize("which", ["layer_norm", "rms_norm", "group_norm", "batch_norm"])
def test_second_derivatives_equal_torch(which):
    torch = _torch()
    x, w, b = rand(3, 4, 5), rand(4, seed=1), rand(4, seed=2)
    gout, v = rand(3, 4, 5, seed=3), rand(3, 4, 5, seed=4)
    calls = {
        "layer_norm": (lambda m, x, w, b: m.layer_norm(x, (5,), None, None, 1e-3)),
        "rms_norm": (lambda m, x, w, b: m.rms_norm(x, (4, 5), None, 1e-3)),
        "group_norm": (lambda m, x, w, b: m.group_norm(x, 2, w, b, 1e-3)),
        "batch_norm": (lambda m, x, w, b: m.batch_norm(x, None, None, w, b, True, 0.1, 1e-3)),
    }
    f = calls[which]
    # ours: d/dx of <v, d<gout, f>/dx>, through backward(create_graph=True)
    xt, wt, bt = (tg.tensor(a, requires_grad=True) for a in (x, w, b))
    (f(F, xt, wt, bt) * tg.tensor(gout)).sum().backward(create_graph=True)
    gx = xt.grad
    xt.grad = wt.grad = bt.grad = None
    (gx * tg.tensor(v)).sum().backward()
    xs, ws, bs = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    (tgx,) = torch.autograd.grad((f(torch.nn.functional, xs, ws, bs) * torch.tensor(gout)).sum(),
                                 xs, create_graph=True)
    want = torch.autograd.grad((tgx * torch.tensor(v)).sum(), [xs, ws], allow_unused=True)
    close(gx.detach().numpy(), tgx.detach().numpy(), 1e-9)
    close(xt.grad.numpy(), want[0].numpy(), 1e-8)
    if want[1] is not None:
        close(wt.grad.numpy(), want[1].numpy(), 1e-8)
