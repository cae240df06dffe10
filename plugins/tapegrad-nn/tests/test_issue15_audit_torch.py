"""Issue 15 audit, against PyTorch: every tg.nn module of the issue, built with the SAME
constructor arguments as its torch.nn namesake (positional where torch takes them
positionally, so an argument order that differs shows), loads torch's state dict
(converted to NumPy arrays, ``strict=True``: same names, same shapes) and gives torch's
outputs, input gradients and parameter gradients in float64.

This is what the issue's promise "a PyTorch state_dict converted to arrays loads with
load_state_dict" and "modules use torch.nn's class names, constructor arguments" means,
checked over the whole table at once; the per-layer files check the details."""

import numpy as np
import pytest

import tapegrad as tg

pytestmark = pytest.mark.needs_torch

RNG = np.random.default_rng(15)


def randn(*shape):
    return RNG.standard_normal(shape)


def labels(n, classes):
    return RNG.integers(0, classes, n)


def positive(*shape):
    return RNG.uniform(0.1, 1.0, shape)


def probabilities(*shape):
    return RNG.uniform(0.05, 0.95, shape)


def signs(n):
    return RNG.choice([-1.0, 1.0], n)


# (id, constructor arguments, constructor keywords, inputs: a function giving the arrays;
#  floating arrays get gradients, integer ones are indices or labels).
# For modules that need a tensor argument (a class weight) "W:" marks it below.
CASES = [
    ("Linear", (3, 2), {}, lambda: [randn(4, 3)]),
    ("Linear", (3, 2, False), {}, lambda: [randn(4, 3)]),
    ("Bilinear", (3, 4, 2), {}, lambda: [randn(5, 3), randn(5, 4)]),
    ("Conv1d", (3, 4, 3, 2, 1), {}, lambda: [randn(2, 3, 9)]),
    ("Conv2d", (4, 6, 3, 1, 2, 2, 2), {}, lambda: [randn(2, 4, 7, 7)]),
    ("Conv2d", (3, 4, (2, 3)), {"padding": "same", "bias": False}, lambda: [randn(1, 3, 5, 6)]),
    ("Conv3d", (2, 3, 2), {"stride": (1, 2, 1)}, lambda: [randn(1, 2, 4, 5, 4)]),
    ("ConvTranspose1d", (3, 2, 3, 2, 1, 1), {}, lambda: [randn(2, 3, 5)]),
    ("ConvTranspose2d", (4, 2, 3, 2, 1, 1, 2), {}, lambda: [randn(1, 4, 4, 4)]),
    ("ConvTranspose2d", (2, 3, 3), {"dilation": 2}, lambda: [randn(1, 2, 4, 5)]),
    ("MaxPool1d", (3, 2, 1), {}, lambda: [randn(2, 3, 9)]),
    ("MaxPool2d", (3, 2, 1, 1, True), {}, lambda: [randn(1, 2, 8, 7)]),
    ("MaxPool2d", (2,), {"return_indices": True}, lambda: [randn(1, 2, 4, 6)]),
    ("AvgPool1d", (3, 2, 1), {}, lambda: [randn(2, 3, 9)]),
    ("AvgPool2d", (3, 2, 1, True, False), {}, lambda: [randn(1, 2, 8, 7)]),
    ("AdaptiveAvgPool1d", (3,), {}, lambda: [randn(2, 3, 8)]),
    ("AdaptiveAvgPool2d", ((2, 3),), {}, lambda: [randn(1, 2, 5, 7)]),
    ("AdaptiveMaxPool2d", (2,), {}, lambda: [randn(1, 2, 5, 7)]),
    ("BatchNorm1d", (3,), {}, lambda: [randn(6, 3)]),
    ("BatchNorm1d", (3, 1e-3, 0.3, False), {}, lambda: [randn(4, 3, 5)]),
    ("BatchNorm2d", (3, 1e-5, None), {}, lambda: [randn(4, 3, 2, 2)]),
    ("BatchNorm2d", (3,), {"track_running_stats": False}, lambda: [randn(4, 3, 2, 2)]),
    ("LayerNorm", ((3, 4),), {}, lambda: [randn(2, 3, 4)]),
    ("LayerNorm", (4, 1e-6, True, False), {}, lambda: [randn(2, 3, 4)]),
    ("RMSNorm", (4,), {}, lambda: [randn(2, 3, 4)]),
    ("RMSNorm", ((3, 4), 1e-3, False), {}, lambda: [randn(2, 3, 4)]),
    ("GroupNorm", (2, 4), {}, lambda: [randn(2, 4, 3)]),
    ("GroupNorm", (2, 4, 1e-3, False), {}, lambda: [randn(2, 4, 3, 2)]),
    ("InstanceNorm1d", (3,), {"affine": True}, lambda: [randn(2, 3, 5)]),
    ("InstanceNorm2d", (3, 1e-5, 0.1, False, True), {}, lambda: [randn(2, 3, 4, 4)]),
    ("Embedding", (10, 4, 0), {}, lambda: [np.array([[3, 0, 4], [1, 3, 9]])]),
    ("Embedding", (10, 4), {"scale_grad_by_freq": True}, lambda: [np.array([1, 3, 3, 9])]),
    ("MultiheadAttention", (8, 2), {"batch_first": True},
     lambda: [randn(2, 4, 8), randn(2, 5, 8), randn(2, 5, 8)]),
    ("MultiheadAttention", (6, 3, 0.0, False), {}, lambda: [randn(4, 2, 6)] * 3),
    ("TransformerEncoderLayer", (8, 2, 16, 0.0), {}, lambda: [randn(5, 2, 8)]),
    ("TransformerEncoderLayer", (8, 2, 16, 0.0, "gelu", 1e-6, True, True),
     {}, lambda: [randn(2, 5, 8)]),
    ("TransformerDecoderLayer", (8, 2, 16, 0.0), {}, lambda: [randn(5, 2, 8), randn(6, 2, 8)]),
    ("TransformerDecoderLayer", (8, 2, 16, 0.0, "gelu"), {"norm_first": True, "batch_first": True},
     lambda: [randn(2, 5, 8), randn(2, 6, 8)]),
    ("RNN", (3, 4, 2), {}, lambda: [randn(5, 2, 3)]),
    ("RNN", (3, 4), {"nonlinearity": "relu", "bias": False}, lambda: [randn(5, 2, 3)]),
    ("LSTM", (3, 4), {"batch_first": True, "bidirectional": True}, lambda: [randn(2, 5, 3)]),
    ("LSTM", (3, 4, 2), {}, lambda: [randn(5, 2, 3), (randn(2, 2, 4), randn(2, 2, 4))]),
    ("GRU", (3, 4, 2, True, True), {}, lambda: [randn(2, 5, 3)]),
    ("RNNCell", (3, 4), {}, lambda: [randn(2, 3), randn(2, 4)]),
    ("LSTMCell", (3, 4), {}, lambda: [randn(2, 3), (randn(2, 4), randn(2, 4))]),
    ("GRUCell", (3, 4, False), {}, lambda: [randn(2, 3)]),
    ("GELU", (), {}, lambda: [randn(3, 4)]),
    ("GELU", ("tanh",), {}, lambda: [randn(3, 4)]),
    ("SiLU", (), {}, lambda: [randn(3, 4)]),
    ("Mish", (), {}, lambda: [randn(3, 4)]),
    ("ELU", (0.5,), {}, lambda: [randn(3, 4)]),
    ("SELU", (), {}, lambda: [randn(3, 4)]),
    ("CELU", (0.7,), {}, lambda: [randn(3, 4)]),
    ("LeakyReLU", (0.2,), {}, lambda: [randn(3, 4)]),
    ("PReLU", (3, 0.1), {}, lambda: [randn(2, 3, 4)]),
    ("PReLU", (), {}, lambda: [randn(2, 3, 4)]),
    ("ReLU6", (), {}, lambda: [4 * randn(3, 4)]),
    ("Hardtanh", (-2.0, 1.5), {}, lambda: [2 * randn(3, 4)]),
    ("Hardsigmoid", (), {}, lambda: [3 * randn(3, 4)]),
    ("Hardswish", (), {}, lambda: [3 * randn(3, 4)]),
    ("Softplus", (2.0, 5.0), {}, lambda: [3 * randn(3, 4)]),
    ("Softsign", (), {}, lambda: [randn(3, 4)]),
    ("LogSigmoid", (), {}, lambda: [randn(3, 4)]),
    ("Tanhshrink", (), {}, lambda: [randn(3, 4)]),
    ("GLU", (), {}, lambda: [randn(3, 4)]),
    ("GLU", (0,), {}, lambda: [randn(4, 3)]),
    ("Softmin", (1,), {}, lambda: [randn(3, 4, 2)]),
    ("Softmax", (1,), {}, lambda: [randn(3, 4, 2)]),
    ("LogSoftmax", (1,), {}, lambda: [randn(3, 4, 2)]),
    ("ReLU", (), {}, lambda: [randn(3, 4)]),
    ("Tanh", (), {}, lambda: [randn(3, 4)]),
    ("Sigmoid", (), {}, lambda: [randn(3, 4)]),
    ("Flatten", (), {}, lambda: [randn(2, 3, 4)]),
    ("Unflatten", (1, (2, 3)), {}, lambda: [randn(2, 6, 4)]),
    ("Upsample", (None, 2, "bilinear", True), {}, lambda: [randn(1, 2, 3, 3)]),
    ("Upsample", ((5, 7),), {}, lambda: [randn(1, 2, 3, 3)]),
    ("Upsample", (), {"scale_factor": 2, "mode": "linear"}, lambda: [randn(1, 2, 5)]),
    ("PixelShuffle", (2,), {}, lambda: [randn(1, 8, 2, 3)]),
    ("PixelUnshuffle", (2,), {}, lambda: [randn(1, 2, 4, 6)]),
    ("Unfold", (2,), {"stride": 2}, lambda: [randn(1, 2, 4, 6)]),
    ("Fold", ((4, 5), 2), {}, lambda: [randn(1, 8, 12)]),
    ("Dropout", (0.3,), {}, lambda: [randn(3, 4)]),            # compared in eval mode
    ("Dropout2d", (0.3,), {}, lambda: [randn(2, 3, 4, 4)]),    # compared in eval mode
    ("Identity", (), {}, lambda: [randn(3, 4)]),
    # losses (the class axis: both agree on (N, C))
    ("MSELoss", (), {}, lambda: [randn(3, 4), randn(3, 4)]),
    ("L1Loss", (), {"reduction": "sum"}, lambda: [randn(3, 4), randn(3, 4)]),
    ("SmoothL1Loss", (), {"beta": 0.5}, lambda: [randn(3, 4), randn(3, 4)]),
    ("HuberLoss", ("sum", 0.7), {}, lambda: [randn(3, 4), randn(3, 4)]),
    ("NLLLoss", (), {}, lambda: [randn(5, 3), labels(5, 3)]),
    ("NLLLoss", ("W:weight",), {"ignore_index": 1}, lambda: [randn(6, 3), labels(6, 3)]),
    ("CrossEntropyLoss", (), {}, lambda: [randn(5, 3), labels(5, 3)]),
    ("CrossEntropyLoss", ("W:weight",), {"label_smoothing": 0.1},
     lambda: [randn(6, 3), labels(6, 3)]),
    ("CrossEntropyLoss", (), {"reduction": "none"}, lambda: [randn(5, 3), probabilities(5, 3)]),
    ("BCELoss", (), {}, lambda: [probabilities(3, 4), probabilities(3, 4)]),
    ("BCEWithLogitsLoss", (), {}, lambda: [randn(3, 4), probabilities(3, 4)]),
    ("BCEWithLogitsLoss", (), {"pos_weight": "W:weight"},
     lambda: [randn(4, 3), probabilities(4, 3)]),
    ("BCEWithLogitsLoss", ("W:weight",), {"pos_weight": "W:weight", "reduction": "sum"},
     lambda: [randn(4, 3), probabilities(4, 3)]),
    ("KLDivLoss", (), {"reduction": "batchmean", "log_target": True},
     lambda: [randn(3, 4), randn(3, 4)]),
    ("KLDivLoss", (), {}, lambda: [randn(3, 4), probabilities(3, 4)]),
    ("PoissonNLLLoss", (), {}, lambda: [randn(3, 4), positive(3, 4)]),
    ("PoissonNLLLoss", (False, True), {}, lambda: [positive(3, 4), 3 * positive(3, 4)]),
    ("GaussianNLLLoss", (), {"full": True}, lambda: [randn(3, 4), randn(3, 4), positive(3, 4)]),
    ("CosineEmbeddingLoss", (0.2,), {}, lambda: [randn(5, 4), randn(5, 4), signs(5)]),
    ("MarginRankingLoss", (0.5,), {}, lambda: [randn(5), randn(5), signs(5)]),
    ("HingeEmbeddingLoss", (0.5,), {}, lambda: [randn(5, 2), signs(10).reshape(5, 2)]),
    ("TripletMarginLoss", (0.5, 1.0), {}, lambda: [randn(5, 4), randn(5, 4), randn(5, 4)]),
    ("TripletMarginLoss", (), {"swap": True}, lambda: [randn(5, 4), randn(5, 4), randn(5, 4)]),
    ("CosineSimilarity", (1,), {}, lambda: [randn(5, 4), randn(5, 4)]),
    ("PairwiseDistance", (1.0,), {}, lambda: [randn(5, 4), randn(5, 4)]),
]

EVAL_ONLY = {"Dropout", "Dropout2d"}
# Inputs that are targets, not things a PyTorch user differentiates (and that torch's
# backward refuses or ignores): (name, position).
NO_GRAD_INPUT = {("NLLLoss", 1), ("CrossEntropyLoss", 1), ("BCELoss", 1),
                 ("PoissonNLLLoss", 1), ("CosineEmbeddingLoss", 2),
                 ("MarginRankingLoss", 2), ("HingeEmbeddingLoss", 1)}


def _flatten(out):
    if isinstance(out, (tuple, list)):
        return [leaf for item in out for leaf in _flatten(item)]
    return [] if out is None else [out]


def _rebuild(tree, leaves):
    """``tree`` with each array replaced by the next of ``leaves``."""
    if isinstance(tree, (tuple, list)):
        return type(tree)(_rebuild(item, leaves) for item in tree)
    return next(leaves)


def _build(namespace, name, args, kwargs, class_weight):
    def resolve(a):
        return class_weight if isinstance(a, str) and a.startswith("W:") else a
    return getattr(namespace, name)(*map(resolve, args),
                                    **{k: resolve(v) for k, v in kwargs.items()})


@pytest.mark.parametrize("name,args,kwargs,make_inputs", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_module_with_torch_arguments_loads_torch_state_dict_and_matches(name, args, kwargs,
                                                                         make_inputs):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    weight = np.array([1.0, 2.0, 0.5])
    ref = _build(torch.nn, name, args, kwargs, torch.tensor(weight)).double()
    layer = _build(tg.nn, name, args, kwargs, tg.tensor(weight))
    if name in EVAL_ONLY:
        ref.eval(), layer.eval()

    # Same parameter and buffer names, in the same order, and torch's values load strictly.
    assert [n for n, _ in layer.named_parameters()] == [n for n, _ in ref.named_parameters()]
    state = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    assert list(layer.state_dict()) == list(state)
    layer.load_state_dict(state)

    arrays = make_inputs()              # a tuple among them is one argument (LSTM's state)
    leaves = _flatten(arrays)
    grad_wanted = [np.issubdtype(a.dtype, np.floating) and (name, i) not in NO_GRAD_INPUT
                   for i, a in enumerate(leaves)]
    t_leaves = [torch.tensor(a, requires_grad=g) for a, g in zip(leaves, grad_wanted)]
    g_leaves = [tg.tensor(a, requires_grad=g) for a, g in zip(leaves, grad_wanted)]
    t_in, g_in = _rebuild(arrays, iter(t_leaves)), _rebuild(arrays, iter(g_leaves))
    t_out = [o for o in _flatten(ref(*t_in)) if o.dtype.is_floating_point]
    g_out = [o for o in _flatten(layer(*g_in)) if np.issubdtype(o.dtype, np.floating)]
    t_all, g_all = _flatten(ref(*t_in)), _flatten(layer(*g_in))
    assert len(t_all) == len(g_all)
    for t, g in zip(t_all, g_all):            # values, and integer outputs (indices) too
        assert tuple(g.shape) == tuple(t.shape)
        np.testing.assert_allclose(g.numpy(), t.detach().numpy(), rtol=1e-7, atol=1e-9)

    cotangents = [randn(*o.shape) for o in t_out]
    sum(torch.sum(o * torch.tensor(c)) for o, c in zip(t_out, cotangents)).backward()
    total = None
    for o, c in zip(g_out, cotangents):
        term = (o * tg.tensor(c)).sum()
        total = term if total is None else total + term
    if total is None or not total.requires_grad:
        return                                   # nothing differentiable (an int-only layer)
    total.backward()
    for t, g, wanted in zip(t_leaves, g_leaves, grad_wanted):
        if wanted:
            np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-7, atol=1e-9)
    ref_grads = {n: p.grad for n, p in ref.named_parameters()}
    for n, p in layer.named_parameters():
        if ref_grads[n] is None:
            assert p.grad is None or not p.grad.numpy().any(), n
        else:
            np.testing.assert_allclose(p.grad.numpy(), ref_grads[n].numpy(), rtol=1e-7,
                                       atol=1e-9, err_msg=n)
    # Training updated the same buffers (BatchNorm's running statistics, ...).
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(np.asarray(layer.state_dict()[k]), v.numpy(), rtol=1e-7,
                                   atol=1e-9, err_msg=k)


def test_transformer_encoder_and_decoder_stacks_load_torch_state_dicts_and_match():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    for stack, layer_name, inputs in [
            ("TransformerEncoder", "TransformerEncoderLayer", [randn(5, 2, 8)]),
            ("TransformerDecoder", "TransformerDecoderLayer", [randn(5, 2, 8), randn(6, 2, 8)])]:
        ref = getattr(torch.nn, stack)(
            getattr(torch.nn, layer_name)(8, 2, 16, 0.0), 2, torch.nn.LayerNorm(8)).double()
        mine = getattr(tg.nn, stack)(getattr(tg.nn, layer_name)(8, 2, 16, 0.0), 2,
                                     tg.nn.LayerNorm(8))
        mine.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
        t_in = [torch.tensor(a, requires_grad=True) for a in inputs]
        g_in = [tg.tensor(a, requires_grad=True) for a in inputs]
        t_out, g_out = ref(*t_in), mine(*g_in)
        np.testing.assert_allclose(g_out.numpy(), t_out.detach().numpy(), rtol=1e-7, atol=1e-9)
        c = randn(*t_out.shape)
        (t_out * torch.tensor(c)).sum().backward()
        (g_out * tg.tensor(c)).sum().backward()
        for t, g in zip(t_in, g_in):
            np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-7, atol=1e-9)


# Layers big enough that each parameter's spread is a sharp statistic (>= 2,000 entries
# for every random parameter): tapegrad's initial values must follow the same
# distribution as torch's default initialisation (same bound, same standard deviation).
INIT_CASES = [
    ("Linear", (200, 100)), ("Bilinear", (40, 30, 20)), ("Conv1d", (32, 64, 5)),
    ("Conv2d", (16, 32, 3, 1, 0, 1, 2)), ("Conv3d", (8, 16, 3)),
    ("ConvTranspose1d", (64, 32, 5)), ("ConvTranspose2d", (32, 16, 3, 1, 0, 0, 2)),
    ("Embedding", (100, 40)), ("MultiheadAttention", (64, 4)),
    ("TransformerEncoderLayer", (64, 4, 128)), ("TransformerDecoderLayer", (64, 4, 128)),
    ("RNN", (64, 64)), ("LSTM", (32, 48, 2)), ("GRU", (32, 48, 1, True, False, 0.0, True)),
    ("RNNCell", (64, 64)), ("LSTMCell", (32, 48)), ("GRUCell", (32, 48)),
    ("PReLU", (64,)), ("LayerNorm", (64,)), ("RMSNorm", (64,)), ("GroupNorm", (4, 64)),
    ("BatchNorm2d", (64,)), ("InstanceNorm1d", (64, 1e-5, 0.1, True)),
]


@pytest.mark.parametrize("name,args", INIT_CASES, ids=[c[0] for c in INIT_CASES])
def test_default_initialisation_follows_torchs_distribution(name, args):
    torch = pytest.importorskip("torch")

    def draws(namespace, seed, n):
        """Each parameter's values over n fresh layers (a small bias needs many)."""
        namespace.manual_seed(seed) if namespace is torch else tg.manual_seed(seed)
        layers = [getattr(namespace.nn, name)(*args) for _ in range(n)]
        names = [k for k, _ in layers[0].named_parameters()]
        return {k: np.concatenate([np.asarray(
            dict(m.named_parameters())[k].detach().double().numpy() if namespace is torch
            else dict(m.named_parameters())[k].numpy()).ravel() for m in layers])
            for k in names}

    ref, mine = draws(torch, 0, 20), draws(tg, 0, 20)
    assert list(mine) == list(ref)
    for n, want in ref.items():
        got = mine[n]
        if want.std() == 0:                          # constants (norm weights, zero biases)
            np.testing.assert_array_equal(got, want, err_msg=n)
            continue
        assert want.size >= 320, n
        # The bound of a uniform init, or a normal's spread: std and max |p| agree.
        assert abs(got.std() / want.std() - 1) < 0.1, (n, got.std(), want.std())
        assert abs(np.abs(got).max() / np.abs(want).max() - 1) < 0.25, n
        assert abs(got.mean()) < 5 * want.std() / np.sqrt(want.size), n
