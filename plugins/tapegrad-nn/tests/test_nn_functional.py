"""The ops of tapegrad-nn: the contract kit, values against NumPy, numerical stability,
second derivatives, dtypes, errors, and the docstring and README examples."""

import inspect
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_nn
import tapegrad_nn.activations
import tapegrad_nn.losses
from tapegrad.testing import run_doctests
from tapegrad_nn import functional, plugin

F = functional
RNG = np.random.default_rng(2024)
README = Path(__file__).resolve().parents[1] / "README.md"
OPS = ("softmax", "log_softmax", "_logsumexp", "cross_entropy", "_softmax_minus_one_hot",
       "binary_cross_entropy_with_logits", "linear")
OPS += ("_conv", "_conv_transpose", "_conv_weight")
FUNCTIONS = ("mse_loss", "logsumexp")
FUNCTIONS += ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d")
OPS += ("_standardize", "_rms_scale", "_standardize_grad", "_rms_scale_grad")  # normalization
FUNCTIONS += ("layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm",
              "normalize")
OPS += ("_normal_cdf", "gelu", "silu", "softplus", "logsigmoid")
OPS += ("_gelu_backward",)
OPS += ("_lstm_sequence", "_lstm_sequence_backward")  # recurrent_ops
OPS += ("_gru_sequence", "_gru_sequence_backward")
OPS += ("silu_backward",                                   # their gradients as ops
        "softplus_backward")
FUNCTIONS += tuple(n for n in tapegrad_nn.activations.NAMES if n not in OPS)
FUNCTIONS += tapegrad_nn.losses.NAMES
FUNCTIONS += ("embedding", "masked_fill", "scaled_dot_product_attention")  # attention
OPS += ("_unfold", "_fold", "_max_pool_indices", "_adaptive_max_pool_indices")  # pooling
OPS += ("_pool_gather", "_pool_scatter")  # max pooling's gather and its adjoint
OPS += ("_standardize_backward",  # the fused backward ops of the aux rules (normspeed)
        "_rms_scale_backward",
        "_batch_moments",
        "_softmax_backward",
        "_log_softmax_backward",
        "_minus_one_hot",
        "_channel_affine",
        "_channel_dot",
        "_channel_sum")
FUNCTIONS += tapegrad_nn.pooling.NAMES


def leaf(a, dtype=None):
    return tg.tensor(np.asarray(a, dtype=dtype), requires_grad=True)


def close(t, expected, rtol=1e-12, atol=1e-14):
    np.testing.assert_allclose(np.asarray(t), expected, rtol=rtol, atol=atol)


class no_warnings:
    """Any NumPy floating-point warning (overflow, invalid, divide) or Python warning fails."""

    def __enter__(self):
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("error")
        self._e = np.errstate(over="raise", invalid="raise", divide="raise")
        self._e.__enter__()

    def __exit__(self, *exc):
        self._e.__exit__(*exc)
        self._w.__exit__(*exc)


# NumPy references, written independently of the kernels.

def np_log_softmax(a, axis=-1):
    m = np.max(a, axis=axis, keepdims=True)
    return a - m - np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True))


def np_softmax(a, axis=-1):
    return np.exp(np_log_softmax(a, axis))


def np_reduce(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction](loss)


# ---------------------------------------------------------------------------------------
# Registration and the op contract
# ---------------------------------------------------------------------------------------

def test_contract_kit_passes_for_every_op_and_function(contract_reports):
    reports = list(contract_reports.values())
    assert {r.name for r in reports} == set(OPS) | set(FUNCTIONS)


def test_entry_point_resolves_to_the_plugin_module():
    (ep,) = [e for e in metadata.entry_points(group="tapegrad") if e.name == "nn"]
    assert ep.value == "tapegrad_nn.plugin"
    assert ep.load() is plugin
    assert "tapegrad-nn" in tg.registry().plugins
    assert "tapegrad-nn" not in tg.registry().failed


def test_ops_and_functions_are_owned_by_this_plugin_and_documented():
    reg = tg.registry()
    for name in OPS:
        assert reg.ops[name].plugin == "tapegrad-nn", name
        assert reg.ops[name].doc, name
        assert getattr(tg, name) is reg.ops[name]
    for name in FUNCTIONS:
        assert reg.functions[name].plugin == "tapegrad-nn"


def test_public_names_are_published():
    assert tg.nn is tapegrad_nn.nn
    assert tg.nn.functional is functional
    for name in ("softmax", "log_softmax", "logsumexp", "cross_entropy", "mse_loss",
                 "relu", "tanh", "sigmoid"):
        # tg.<name> may be F.<name> wrapped to take PyTorch's dim= (tapegrad._dim_keywords)
        assert inspect.unwrap(getattr(tg, name)) is getattr(F, name), name
    assert callable(F.linear) and callable(F.dropout)
    # F's takes torch's weight=/pos_weight= and is the op itself without them
    assert callable(F.binary_cross_entropy_with_logits)
    with pytest.raises(AttributeError):
        F.no_such_function    # noqa: B018


def test_softmax_log_softmax_and_logsumexp_are_methods_and_losses_are_not():
    x = tg.tensor(RNG.standard_normal((2, 3)))
    close(x.softmax(), tg.softmax(x).numpy())
    close(x.log_softmax(0), tg.log_softmax(x, axis=0).numpy())
    close(x.logsumexp(axis=1), tg.logsumexp(x, 1).numpy())
    assert not hasattr(x, "cross_entropy") and not hasattr(x, "mse_loss")


# ---------------------------------------------------------------------------------------
# softmax, log_softmax, logsumexp: values
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, axis", [((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1),
                                         ((2, 3, 4), (0, 2)), ((5,), -1), ((3, 4), None)])
def test_softmax_and_log_softmax_match_numpy(shape, axis):
    a = 3 * RNG.standard_normal(shape)
    close(tg.softmax(tg.tensor(a), axis=axis), np_softmax(a, axis))
    close(tg.log_softmax(tg.tensor(a), axis=axis), np_log_softmax(a, axis))
    close(tg.softmax(tg.tensor(a), axis=axis).numpy().sum(axis=axis), 1.0)


@pytest.mark.parametrize("axis, keepdims", [(None, False), (None, True), (0, False), (-1, True),
                                            ((0, 2), False), ((1,), True)])
def test_logsumexp_matches_numpy(axis, keepdims):
    a = 3 * RNG.standard_normal((2, 3, 4))
    expected = np.log(np.sum(np.exp(a), axis=axis, keepdims=keepdims))
    out = tg.logsumexp(tg.tensor(a), axis=axis, keepdims=keepdims)
    assert out.shape == np.shape(expected)
    close(out, expected)


def test_default_axes_follow_the_documented_conventions():
    a = RNG.standard_normal((2, 3))
    close(tg.softmax(tg.tensor(a)), np_softmax(a, -1))            # softmax: last axis
    close(tg.logsumexp(tg.tensor(a)), np.log(np.exp(a).sum()))    # logsumexp: all (NumPy)


# ---------------------------------------------------------------------------------------
# Numerical stability
# ---------------------------------------------------------------------------------------

def test_softmax_of_large_logits_has_no_nan_and_no_warnings():
    x = leaf([[1000.0, 0.0], [-1000.0, 1000.0], [1e30, -1e30]])
    with no_warnings():
        y = tg.softmax(x)
        (y * tg.tensor([[1.0, 2.0]])).sum().backward()
    close(y, [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    assert np.all(np.isfinite(x.grad.numpy()))


def test_log_softmax_of_large_values_is_exact_and_finite():
    x = leaf([[1000.0, 0.0, -1000.0], [1e6, 1e6, 1e6]])
    with no_warnings():
        y = tg.log_softmax(x)
        y.backward(tg.ones((2, 3)))
    close(y, [[0.0, -1000.0, -2000.0], [-np.log(3)] * 3])
    close(x.grad, [[-2.0, 1.0, 1.0], [0.0, 0.0, 0.0]], atol=1e-12)


def test_log_softmax_and_logsumexp_stay_finite_in_float32():
    x = tg.tensor(np.array([[200.0, 0.0, -200.0]], np.float32))
    with no_warnings():
        y, z = tg.log_softmax(x), tg.logsumexp(x, axis=1)
    assert y.dtype == z.dtype == np.float32
    close(y, [[0.0, -200.0, -400.0]])
    close(z, [200.0])


def test_logsumexp_of_large_values():
    with no_warnings():
        close(tg.logsumexp(tg.tensor([1000.0, 1000.0])), 1000.0 + np.log(2.0))
        close(tg.logsumexp(tg.tensor([-1000.0, -1000.0])), -1000.0 + np.log(2.0))


def test_minus_infinity_masks_entries_out_and_a_row_of_it_is_nan_without_warnings():
    ninf = -np.inf
    rows = tg.tensor([[ninf, 0.0, ninf], [ninf, ninf, ninf]])
    with no_warnings():
        lsm, sm = tg.log_softmax(rows), tg.softmax(rows)
        lse = tg.logsumexp(rows, axis=1)
    np.testing.assert_array_equal(lsm.numpy()[0], [ninf, 0.0, ninf])
    np.testing.assert_array_equal(sm.numpy()[0], [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(lse.numpy(), [0.0, ninf])
    # softmax over nothing but -inf is 0/0: nan, as in PyTorch (logsumexp is -inf)
    assert np.all(np.isnan(lsm.numpy()[1])) and np.all(np.isnan(sm.numpy()[1]))


def test_cross_entropy_of_a_confident_wrong_prediction_is_finite():
    x = leaf([[1000.0, -1000.0]])
    with no_warnings():
        loss = tg.cross_entropy(x, [1])
        loss.backward()
    close(loss, 2000.0)
    close(x.grad, [[1.0, -1.0]])


def test_binary_cross_entropy_with_logits_is_stable_for_large_logits():
    x = leaf([-1000.0, -40.0, 40.0, 1000.0])
    t = tg.tensor([1.0, 0.0, 1.0, 0.0])
    with no_warnings():
        loss = tg.binary_cross_entropy_with_logits(x, t, reduction="none")
        loss.sum().backward()
    close(loss, [1000.0, np.log1p(np.exp(-40.0)), np.log1p(np.exp(-40.0)), 1000.0])
    close(x.grad, [-1.0, 1 / (1 + np.exp(40.0)), -1 / (1 + np.exp(40.0)), 1.0])


# ---------------------------------------------------------------------------------------
# cross_entropy
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_labels_matches_numpy_values_and_gradient(reduction):
    a = 3 * RNG.standard_normal((6, 5))
    labels = np.array([0, 4, 2, 2, 1, 3])
    x = leaf(a)
    loss = tg.cross_entropy(x, tg.tensor(labels), reduction=reduction)
    per_row = -np_log_softmax(a)[np.arange(6), labels]
    close(loss, np_reduce(per_row, reduction))
    upstream = RNG.standard_normal(per_row.shape) if reduction == "none" else np.array(1.7)
    loss.backward(tg.tensor(upstream))
    one_hot = np.eye(5)[labels]
    scale = upstream[:, None] if reduction == "none" else upstream / (6 if reduction == "mean" else 1)
    close(x.grad, (np_softmax(a) - one_hot) * scale)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_probabilities_matches_numpy(reduction):
    a = 2 * RNG.standard_normal((4, 3))
    p = np_softmax(RNG.standard_normal((4, 3)))
    x, t = leaf(a), leaf(p)
    loss = tg.cross_entropy(x, t, reduction=reduction)
    per_row = -np.sum(p * np_log_softmax(a), axis=-1)
    close(loss, np_reduce(per_row, reduction))
    tg.sum(loss).backward()
    scale = 1 / 4 if reduction == "mean" else 1.0
    close(x.grad, (np_softmax(a) - p) * scale)
    close(t.grad, -np_log_softmax(a) * scale)


def test_cross_entropy_labels_and_one_hot_probabilities_agree():
    a = RNG.standard_normal((5, 4))
    labels = np.array([3, 0, 1, 1, 2])
    x1, x2 = leaf(a), leaf(a)
    l1 = tg.cross_entropy(x1, labels)
    l2 = tg.cross_entropy(x2, np.eye(4)[labels])
    close(l1, l2.item())
    l1.backward()
    l2.backward()
    close(x1.grad, x2.grad.numpy())


def test_cross_entropy_accepts_lists_arrays_tensors_and_a_single_sample():
    a = RNG.standard_normal((3, 4))
    expected = np.mean(-np_log_softmax(a)[np.arange(3), [1, 0, 3]])
    for labels in ([1, 0, 3], np.array([1, 0, 3]), tg.tensor([1, 0, 3]),
                   np.array([1, 0, 3], np.int32), np.array([1, 0, 3], np.uint8)):
        close(tg.cross_entropy(tg.tensor(a), labels), expected)
    close(tg.cross_entropy(tg.tensor(a[0]), 2), -np_log_softmax(a[0])[2])
    close(tg.cross_entropy(tg.tensor(a[0]), np.array(2)), -np_log_softmax(a[0])[2])


def test_cross_entropy_over_leading_batch_axes_uses_the_last_axis_for_classes():
    a = RNG.standard_normal((2, 3, 5))
    labels = RNG.integers(0, 5, (2, 3))
    per = -np.take_along_axis(np_log_softmax(a), labels[..., None], -1)[..., 0]
    close(tg.cross_entropy(tg.tensor(a), labels, reduction="none"), per)
    close(tg.cross_entropy(tg.tensor(a), labels), per.mean())


def test_cross_entropy_labels_get_no_gradient():
    x = leaf(RNG.standard_normal((3, 2)))
    loss = tg.cross_entropy(x, tg.tensor([0, 1, 1]))
    loss.backward()
    assert x.grad is not None
    with pytest.raises(TypeError):
        tg.tensor([0, 1, 1], requires_grad=True)      # integer tensors cannot require grad


@pytest.mark.parametrize("labels, bad", [([0, 3, 1], 3), ([0, -1, 1], -1), ([7, 9, 8], 7)])
def test_out_of_range_labels_raise_an_index_error_naming_the_op(labels, bad):
    x = leaf(RNG.standard_normal((3, 3)))
    with pytest.raises(IndexError, match=rf"cross_entropy: class label {bad} is out of range "
                                         rf"for 3 classes"):
        tg.cross_entropy(x, labels)


@pytest.mark.parametrize("target, error, match", [
    (np.array([0, 1]), ValueError, r"labels of shape \(3,\), got \(2,\)"),
    (np.zeros((3, 1), np.int64), ValueError, r"labels of shape \(3,\), got \(3, 1\)"),
    (np.array([0.0, 1.0, 1.0]), ValueError, r"class probabilities .* shape \(3, 4\), got \(3,\)"),
    (np.zeros((3, 5)), ValueError, r"shape \(3, 4\), got \(3, 5\)"),
    (np.array([True, False, True]), TypeError, r"integer class labels or floating-point"),
])
def test_cross_entropy_rejects_targets_that_do_not_fit(target, error, match):
    x = tg.tensor(RNG.standard_normal((3, 4)))
    with pytest.raises(error, match="cross_entropy: .*" + match):
        tg.cross_entropy(x, target)


def test_cross_entropy_needs_a_class_axis():
    with pytest.raises(ValueError, match="cross_entropy: logits must have at least one dimension"):
        tg.cross_entropy(tg.tensor(1.0), 0)


# ---------------------------------------------------------------------------------------
# binary_cross_entropy_with_logits, mse_loss
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits_matches_the_textbook_formula(reduction):
    a = 2 * RNG.standard_normal((4, 3))
    p = RNG.uniform(0, 1, (4, 3))
    x, t = leaf(a), leaf(p)
    s = 1 / (1 + np.exp(-a))
    per = -(p * np.log(s) + (1 - p) * np.log(1 - s))
    loss = tg.binary_cross_entropy_with_logits(x, t, reduction=reduction)
    close(loss, np_reduce(per, reduction), rtol=1e-10)
    tg.sum(loss).backward()
    scale = 1 / 12 if reduction == "mean" else 1.0
    close(x.grad, (s - p) * scale)
    close(t.grad, -a * scale)


def test_binary_cross_entropy_with_logits_gradient_at_zero_is_half_minus_target():
    x = leaf([0.0, 0.0])
    tg.binary_cross_entropy_with_logits(x, tg.tensor([1.0, 0.0]), reduction="sum").backward()
    close(x.grad, [-0.5, 0.5])


def test_binary_cross_entropy_with_logits_takes_a_number_target():
    a = RNG.standard_normal(5)
    expected = np.mean(np.log1p(np.exp(-a)))             # t = 1: -log(sigmoid(a))
    close(tg.binary_cross_entropy_with_logits(tg.tensor(a), 1.0), expected, rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_matches_numpy(reduction):
    a, b = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    x, t = leaf(a), leaf(b)
    loss = tg.mse_loss(x, t, reduction=reduction)
    close(loss, np_reduce((a - b) ** 2, reduction))
    tg.sum(loss).backward()
    scale = 1 / 12 if reduction == "mean" else 1.0
    close(x.grad, 2 * (a - b) * scale)
    close(t.grad, -2 * (a - b) * scale)


def test_mse_loss_takes_a_number_or_a_list_target():
    close(tg.mse_loss(tg.tensor([1.0, 3.0]), 1.0), 2.0)
    close(tg.mse_loss(tg.tensor([1.0, 3.0]), [1.0, 1.0], reduction="sum"), 4.0)


@pytest.mark.parametrize("loss, name", [
    (lambda x, t: tg.mse_loss(x, t), "mse_loss"),
    (lambda x, t: tg.binary_cross_entropy_with_logits(x, t), "binary_cross_entropy_with_logits"),
])
def test_losses_refuse_to_broadcast_input_and_target(loss, name):
    x = leaf(RNG.standard_normal((4, 1)))
    with pytest.raises(ValueError, match=rf"{name}: .*shape \(4, 1\) and target of shape \(4,\)"):
        loss(x, tg.tensor(RNG.standard_normal(4)))


@pytest.mark.parametrize("call", [
    lambda x: tg.cross_entropy(x, [0, 1], reduction="avg"),
    lambda x: tg.mse_loss(x, x, reduction="avg"),
    lambda x: tg.binary_cross_entropy_with_logits(x, x, reduction="avg"),
    lambda x: tg.cross_entropy(x, [0, 1], reduction=None),
], ids=["cross_entropy", "mse_loss", "bce_with_logits", "none_object"])
def test_an_unknown_reduction_is_a_value_error_naming_the_op(call):
    x = tg.tensor(RNG.standard_normal((2, 2)))
    with pytest.raises(ValueError, match=r"^\w+: reduction must be 'mean', 'sum' or 'none'"):
        call(x)


def test_reduction_is_keyword_only_in_the_losses():
    x = tg.tensor(RNG.standard_normal((2, 2)))
    with pytest.raises(TypeError, match="cross_entropy"):
        tg.cross_entropy(x, [0, 1], "sum")
    with pytest.raises(TypeError):
        tg.mse_loss(x, x, "sum")


# ---------------------------------------------------------------------------------------
# linear and dropout (functional)
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("x_shape", [(4, 3), (3,), (2, 5, 3)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_matches_numpy(x_shape, with_bias):
    a, w, b = RNG.standard_normal(x_shape), RNG.standard_normal((2, 3)), RNG.standard_normal(2)
    x, wt, bt = leaf(a), leaf(w), leaf(b)
    y = F.linear(x, wt, bt if with_bias else None)
    expected = a @ w.T + (b if with_bias else 0)
    close(y, expected)
    g = RNG.standard_normal(expected.shape)
    y.backward(tg.tensor(g))
    close(x.grad, g @ w)
    close(wt.grad, g.reshape(-1, 2).T @ a.reshape(-1, 3))
    if with_bias:
        close(bt.grad, g.reshape(-1, 2).sum(0))


def test_linear_promotes_like_numpy_and_keeps_float32():
    x32, w32 = np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)
    assert tg.linear(tg.tensor(x32), tg.tensor(w32), tg.tensor(np.ones(4, np.float32))).dtype == np.float32
    assert tg.linear(tg.tensor(x32), tg.tensor(w32), 0.5).dtype == np.float32
    assert tg.linear(tg.tensor(x32), tg.tensor(w32), tg.tensor(np.ones(4))).dtype == np.float64


def test_linear_with_mismatched_features_names_the_op_and_shapes():
    with pytest.raises(ValueError, match=r"linear: .*x \(2, 5\) and weight \(4, 3\)"):
        tg.linear(tg.ones((2, 5)), tg.ones((4, 3)))


def test_functional_dropout_is_identity_when_not_training_and_checks_p():
    x = tg.tensor([1.0, 2.0])
    assert F.dropout(x, 0.9, training=False) is x
    assert F.dropout(x, 0.0) is x
    for p in (-0.1, 1.5, "0.5", True):
        with pytest.raises(ValueError, match="dropout: p must be a probability"):
            F.dropout(x, p)


# ---------------------------------------------------------------------------------------
# Second derivatives (the rules are written with tapegrad ops)
# ---------------------------------------------------------------------------------------

def _gradient_of(f):
    """x -> df/dx as a differentiable function of x (backward with create_graph=True)."""
    def grad_fn(x):
        with tg.enable_grad():
            xr = x if x.requires_grad else x.detach().requires_grad_()
            saved, xr.grad = xr.grad, None
            f(xr).backward(create_graph=True)
            g, xr.grad = xr.grad, saved
        return g
    return grad_fn


W34 = tg.tensor(RNG.standard_normal((3, 4)))
LABELS = np.array([2, 0, 3])
PROBS = tg.tensor(np_softmax(RNG.standard_normal((3, 4))))
WEIGHT = tg.tensor(RNG.standard_normal((2, 4)))

SECOND_ORDER = {
    "softmax": lambda x: (tg.softmax(x) * W34).sum(),
    "softmax_axis0": lambda x: (tg.softmax(x, axis=0) ** 2).sum(),
    "log_softmax": lambda x: (tg.log_softmax(x) * W34).sum(),
    "logsumexp": lambda x: (tg.logsumexp(x, axis=1) ** 2).sum(),
    "logsumexp_all": lambda x: tg.logsumexp(x * x),
    "cross_entropy_labels": lambda x: tg.cross_entropy(x, LABELS),
    "cross_entropy_none": lambda x: (tg.cross_entropy(x, LABELS, reduction="none") ** 2).sum(),
    "cross_entropy_probs": lambda x: tg.cross_entropy(x, PROBS, reduction="sum"),
    "cross_entropy_target": lambda x: tg.cross_entropy(W34, tg.softmax(x)),
    "bce_with_logits": lambda x: tg.binary_cross_entropy_with_logits(x, tg.sigmoid(W34)),
    "bce_target": lambda x: tg.binary_cross_entropy_with_logits(W34, tg.sigmoid(x)),
    "mse_loss": lambda x: tg.mse_loss(x * x, W34),
    "linear": lambda x: (tg.linear(x, WEIGHT, WEIGHT[0, :2]) ** 2).sum(),
    "linear_weight": lambda x: (tg.linear(W34, x[:2], x[2, :2]) ** 2).sum(),
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_second_derivatives_match_finite_differences(name):
    x = leaf(RNG.standard_normal((3, 4)))
    assert tg.gradcheck(_gradient_of(SECOND_ORDER[name]), x)


# ---------------------------------------------------------------------------------------
# float32
# ---------------------------------------------------------------------------------------

FLOAT32 = {
    "softmax": lambda x: tg.softmax(x),
    "log_softmax": lambda x: tg.log_softmax(x, axis=0),
    "logsumexp": lambda x: tg.logsumexp(x, axis=1),
    "cross_entropy_labels": lambda x: tg.cross_entropy(x, [0, 3, 1]),
    "cross_entropy_probs": lambda x: tg.cross_entropy(x, tg.softmax(x * 2.0)),
    "cross_entropy_none": lambda x: tg.cross_entropy(x, [0, 3, 1], reduction="none"),
    "bce_with_logits": lambda x: tg.binary_cross_entropy_with_logits(x, tg.sigmoid(x)),
    "bce_number": lambda x: tg.binary_cross_entropy_with_logits(x, 0.0, reduction="sum"),
    "mse_loss": lambda x: tg.mse_loss(x, x * 0.5),
    "linear": lambda x: tg.linear(x, x[:2], x[0, :2]),
}


@pytest.mark.parametrize("name", sorted(FLOAT32))
def test_float32_stays_float32_in_values_and_gradients(name):
    x = leaf(RNG.standard_normal((3, 4)), dtype=np.float32)
    out = FLOAT32[name](x)
    assert out.dtype == np.float32
    tg.sum(out).backward()
    assert x.grad.dtype == np.float32


# ---------------------------------------------------------------------------------------
# Documentation
# ---------------------------------------------------------------------------------------

def test_docstring_examples_run():
    result = run_doctests(functional)
    assert result.attempted > 10
    assert result.failed == 0


def test_readme_examples_run():
    result = run_doctests(README)
    assert result.attempted > 0
    assert result.failed == 0


def test_linear_batched_zero_features_and_bias_broadcasting_gradients():
    # Leading axes fold into one 2-D product (forward and backward): 0 features, and a bias
    # that broadcasts x up, still give NumPy's values and the summed gradients.
    x, w = leaf(np.ones((2, 3, 0))), leaf(np.ones((4, 0)))
    tg.linear(x, w).sum().backward()
    assert x.grad.shape == (2, 3, 0) and w.grad.shape == (4, 0)
    rng = np.random.default_rng(0)
    xa, wa, ba = rng.standard_normal((3, 5)), rng.standard_normal((4, 5)), \
        rng.standard_normal((2, 1, 4))
    x, w, b = leaf(xa), leaf(wa), leaf(ba)
    y = tg.linear(x, w, b)
    close(y.numpy(), xa @ wa.T + ba)
    y.sum().backward()
    close(w.grad.numpy(), np.tile(2 * xa.sum(0), (4, 1)))        # each x row twice (b's 2)
    close(x.grad.numpy(), 2 * np.ones((3, 4)) @ wa)
    close(b.grad.numpy(), np.full((2, 1, 4), 3.0))
    xa = rng.standard_normal((2, 3, 5))
    x, w = leaf(xa), leaf(wa)
    tg.linear(x, w).sum().backward()
    close(w.grad.numpy(), np.ones((4, 1)) * xa.sum((0, 1)))
    close(x.grad.numpy(), np.ones((2, 3, 4)) @ wa)
