"""tg.nn: the Module API (registration, traversal, state dicts, modes, gradients), the
containers, Linear, Dropout, the activation and loss modules, and the docstring examples."""

import collections
import copy
import math

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import run_doctests
from tapegrad_nn import nn as nn_module

nn = tg.nn
RNG = np.random.default_rng(99)


class Block(nn.Module):
    """A parameter of its own, a sub-module, another parameter, a buffer."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(tg.ones(3))
        self.inner = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3, bias=False))
        self.shift = tg.zeros(3, requires_grad=True)
        self.register_buffer("count", tg.zeros(()))
        self.constant = tg.ones(3)                        # a plain attribute
        self.cached = self.scale * 2.0                    # a non-leaf: a plain attribute

    def forward(self, x):
        return self.inner(x * self.scale) + self.shift


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Block()
        self.head = nn.Linear(3, 2)

    def forward(self, x):
        return self.head(self.first(x))


NET_PARAMETERS = ["first.scale", "first.shift", "first.inner.0.weight", "first.inner.0.bias",
                  "first.inner.2.weight", "head.weight", "head.bias"]
NET_STATE = ["first.scale", "first.shift", "first.count", "first.inner.0.weight",
             "first.inner.0.bias", "first.inner.2.weight", "head.weight", "head.bias"]


def values(module):
    return {k: v.numpy().copy() for k, v in module.state_dict().items()}


# ---------------------------------------------------------------------------------------
# Registration and traversal
# ---------------------------------------------------------------------------------------

def test_named_parameters_lists_own_parameters_first_then_sub_modules_in_order():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == NET_PARAMETERS
    assert [p for p in net.parameters()] == [p for _, p in net.named_parameters()]
    assert net.first.scale is dict(net.named_parameters())["first.scale"]


def test_only_leaves_that_require_grad_are_registered_as_parameters():
    block = Block()
    names = [n for n, _ in block.named_parameters()]
    assert "constant" not in names and "cached" not in names
    assert isinstance(block.constant, tg.Tensor) and not block.cached.is_leaf


def test_children_modules_and_named_modules():
    net = Net()
    assert [type(m).__name__ for m in net.children()] == ["Block", "Linear"]
    assert [n for n, _ in net.named_modules()] == [
        "", "first", "first.inner", "first.inner.0", "first.inner.1", "first.inner.2", "head"]
    assert list(net.modules())[0] is net
    assert net.get_submodule("first.inner.0") is net.first.inner[0]
    with pytest.raises(AttributeError, match="no sub-module 'nope'"):
        net.get_submodule("first.nope")


def test_recurse_false_lists_only_own_parameters():
    assert [n for n, _ in Block().named_parameters(recurse=False)] == ["scale", "shift"]


def test_a_shared_parameter_or_module_is_listed_once():
    a, b = nn.Linear(3, 3), nn.Linear(3, 3)
    b.weight = a.weight                                   # weight tying
    seq = nn.Sequential(a, b, a)
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "1.bias"]
    assert len(list(seq.modules())) == 3


def test_reassigning_and_deleting_attributes_keeps_the_registry_in_step():
    m = nn.Linear(2, 2)
    m.weight = nn.Parameter(tg.zeros((2, 2)))
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    m.bias = None
    assert [n for n, _ in m.named_parameters()] == ["weight"] and m.bias is None
    del m.weight
    assert list(m.named_parameters()) == [] and not hasattr(m, "weight")
    m.weight = "now a plain attribute"
    assert list(m.state_dict()) == []


@pytest.mark.parametrize("name, value, match", [
    ("weight", tg.ones((2, 2)), "it is a parameter"),
    ("weight", np.ones((2, 2)), "it is a parameter"),
    ("inner", tg.ones(2), "it is a sub-module"),
    ("count", 3.0, "it is a buffer"),
])
def test_assigning_the_wrong_kind_of_value_to_a_registered_name_is_a_type_error(name, value, match):
    m = nn.Linear(2, 2)
    m.inner = nn.ReLU()
    m.register_buffer("count", tg.zeros(()))
    with pytest.raises(TypeError, match=rf"'{name}' of Linear: {match}"):
        setattr(m, name, value)


def test_a_frozen_parameter_made_with_parameter_stays_registered():
    m = nn.Module()
    m.frozen = nn.Parameter(tg.ones(2), requires_grad=False)
    m.live = nn.Parameter([1.0, 2.0])
    assert [n for n, _ in m.named_parameters()] == ["frozen", "live"]
    assert not m.frozen.requires_grad and m.live.requires_grad and m.live.is_leaf


def test_parameter_shares_a_tensors_storage_and_copies_arrays():
    t = tg.zeros(2)
    p = nn.Parameter(t)
    with tg.no_grad():
        p[0] = 5.0
    assert t.tolist() == [5.0, 0.0]
    already = tg.ones(2, requires_grad=True)
    assert nn.Parameter(already) is already
    a = np.zeros(2)
    q = nn.Parameter(a)
    a[0] = 1.0
    assert q.tolist() == [0.0, 0.0]


def test_register_parameter_buffer_and_add_module():
    m = nn.Module()
    m.register_parameter("w", tg.ones(2))
    m.register_parameter("none", None)
    m.register_buffer("running", tg.zeros(2))
    m.register_buffer("scratch", tg.zeros(2), persistent=False)
    m.add_module("sub", nn.Linear(2, 1))
    assert [n for n, _ in m.named_parameters()] == ["w", "sub.weight", "sub.bias"]
    assert [n for n, _ in m.named_buffers()] == ["running", "scratch"]
    assert list(m.state_dict()) == ["w", "running", "sub.weight", "sub.bias"]
    assert m.w.requires_grad and m.none is None
    with pytest.raises(KeyError, match="contain no '.'"):
        m.add_module("a.b", nn.ReLU())
    with pytest.raises(TypeError, match="must be a Module"):
        m.add_module("x", tg.ones(2))
    with pytest.raises(KeyError, match="attribute 'training'|'training'"):
        m.register_buffer("training", tg.ones(1))


def test_a_subclass_that_forgets_super_init_still_registers():
    class Forgetful(nn.Module):
        def __init__(self):
            self.w = tg.ones(2, requires_grad=True)
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x * self.w)

    m = Forgetful()
    assert [n for n, _ in m.named_parameters()] == ["w", "lin.weight", "lin.bias"]
    assert m.training and m(tg.ones(2)).shape == (2,)


def test_module_without_forward_raises_not_implemented():
    with pytest.raises(NotImplementedError, match="Module has no forward"):
        nn.Module()(tg.ones(1))


# ---------------------------------------------------------------------------------------
# state_dict / load_state_dict
# ---------------------------------------------------------------------------------------

def test_state_dict_is_an_ordered_snapshot_of_parameters_and_persistent_buffers():
    net = Net()
    sd = net.state_dict()
    assert isinstance(sd, collections.OrderedDict) and list(sd) == NET_STATE
    for name, value in sd.items():
        assert isinstance(value, tg.Tensor) and not value.requires_grad, name
    before = sd["head.weight"].numpy().copy()
    with tg.no_grad():
        net.head.weight -= 1.0
    np.testing.assert_array_equal(sd["head.weight"].numpy(), before)   # a copy, not a view
    live = net.state_dict(keep_vars=True)
    assert live["head.weight"] is net.head.weight


def test_load_state_dict_round_trip_restores_outputs_in_place():
    tg.manual_seed(0)
    src = Net()
    tg.manual_seed(1)
    dst = Net()
    x = tg.tensor(RNG.standard_normal((5, 3)))
    assert not np.allclose(src(x).numpy(), dst(x).numpy())
    weight = dst.head.weight
    result = dst.load_state_dict(src.state_dict())
    assert result == nn.IncompatibleKeys([], [])
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(src(x).numpy(), dst(x).numpy())
    assert dst.head.weight is weight and weight.requires_grad    # same tensor, updated
    assert all(np.array_equal(a, b) for a, b in zip(values(src).values(), values(dst).values()))


def test_load_state_dict_accepts_arrays_and_converts_dtypes():
    m = nn.Linear(3, 2, dtype=np.float32)
    w, b = RNG.standard_normal((2, 3)), RNG.standard_normal(2).tolist()
    m.load_state_dict({"weight": w, "bias": b})
    assert m.weight.dtype == np.float32
    np.testing.assert_allclose(m.weight.numpy(), w.astype(np.float32))
    np.testing.assert_allclose(m.bias.numpy(), np.float32(b))
    m.load_state_dict({"weight": tg.tensor(w), "bias": tg.tensor(b)})
    assert m.weight.dtype == np.float32


def test_strict_loading_lists_missing_and_unexpected_keys_and_copies_nothing():
    net = Net()
    before = values(net)
    sd = Net().state_dict()
    del sd["head.bias"], sd["first.count"]
    sd["head.extra"] = tg.ones(1)
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(sd)
    msg = str(info.value)
    assert "Error(s) in loading state_dict for Net" in msg
    assert "Missing key(s) in state_dict: 'first.count', 'head.bias'" in msg
    assert "Unexpected key(s) in state_dict: 'head.extra'" in msg
    assert all(np.array_equal(before[k], v) for k, v in values(net).items())


def test_a_shape_mismatch_names_the_key_and_both_shapes_even_when_not_strict():
    net = Net()
    before = values(net)
    sd = net.state_dict()
    sd["head.weight"] = tg.ones((3, 3))
    sd["first.scale"] = tg.zeros(3)
    for strict in (True, False):
        with pytest.raises(RuntimeError, match=r"size mismatch for 'head.weight': copying a value "
                                               r"of shape \(3, 3\) .* module has shape \(2, 3\)"):
            net.load_state_dict(sd, strict=strict)
    assert all(np.array_equal(before[k], v) for k, v in values(net).items())


def test_non_strict_loading_loads_what_matches_and_reports_the_rest():
    net = Net()
    other = Net()
    sd = other.state_dict()
    del sd["head.bias"]
    sd["unknown"] = tg.ones(1)
    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["head.bias"] and result.unexpected_keys == ["unknown"]
    np.testing.assert_array_equal(net.head.weight.numpy(), other.head.weight.numpy())


def test_state_dict_survives_tg_save_and_tg_load(tmp_path):
    if not hasattr(tg, "save"):
        pytest.skip("this tapegrad has no tg.save")
    net = Net()
    path = tmp_path / "net.npz"
    tg.save(net.state_dict(), path)
    twin = Net()
    twin.load_state_dict(tg.load(path))
    x = tg.tensor(RNG.standard_normal((2, 3)))
    np.testing.assert_array_equal(twin(x).numpy(), net(x).numpy())


def test_load_state_dict_needs_a_mapping():
    with pytest.raises(TypeError, match="expected a mapping"):
        nn.Linear(2, 2).load_state_dict([("weight", tg.ones((2, 2)))])


def test_deepcopy_gives_an_independent_model():
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    net.register_buffer("steps", tg.zeros(()))
    twin = copy.deepcopy(net)
    assert list(twin.state_dict()) == list(net.state_dict())
    assert twin[0].weight is not net[0].weight and twin[0].weight.requires_grad
    with tg.no_grad():
        twin[0].weight -= 1.0
    assert not np.array_equal(twin[0].weight.numpy(), net[0].weight.numpy())
    twin(tg.ones((1, 3))).sum().backward()
    assert twin[0].weight.grad is not None and net[0].weight.grad is None


# ---------------------------------------------------------------------------------------
# Modes, gradients, dtypes
# ---------------------------------------------------------------------------------------

def test_train_and_eval_set_the_mode_recursively_and_return_self():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5)))
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    assert net.train() is net and all(m.training for m in net.modules())
    net.train(False)
    assert not net[1][0].training
    with pytest.raises(TypeError, match="mode must be a bool"):
        net.train("no")


def test_eval_mode_turns_dropout_off_inside_a_model():
    net = nn.Sequential(nn.Dropout(0.5), nn.Identity())
    x = tg.ones((50, 50))
    assert np.any(net(x).numpy() == 0.0)
    net.eval()
    assert net(x) is x


def test_zero_grad_sets_gradients_to_none_or_zeros():
    net = Net()
    net(tg.ones((2, 3))).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    for p in net.parameters():
        assert p.grad is not None and not np.any(p.grad.numpy())
        assert p.grad.shape == p.shape and p.grad.dtype == p.dtype
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_gradients_accumulate_until_zero_grad():
    m = nn.Linear(3, 1)
    x = tg.ones((1, 3))
    m(x).sum().backward()
    first = m.weight.grad.numpy().copy()
    m(x).sum().backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), 2 * first)
    m.zero_grad()
    m(x).sum().backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), first)


def test_requires_grad_false_freezes_parameters():
    m = nn.Linear(3, 2)
    m.requires_grad_(False)
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]   # still listed
    x = tg.ones((1, 3), requires_grad=True)
    m(x).sum().backward()
    assert m.weight.grad is None and x.grad is not None


def test_to_dtype_converts_parameters_and_keeps_them_trainable():
    m = nn.Sequential(nn.Linear(3, 2))
    m.register_buffer("steps", tg.zeros(2))
    before = m[0].weight.numpy().copy()
    assert m.to(dtype=np.float32) is m
    assert [p.dtype for p in m.parameters()] == [np.float32, np.float32]
    assert m.steps.dtype == np.float32
    assert all(p.requires_grad and p.is_leaf for p in m.parameters())
    np.testing.assert_allclose(m[0].weight.numpy(), before.astype(np.float32))
    assert m(tg.ones((1, 3), dtype=np.float32)).dtype == np.float32
    m.double()
    assert m[0].weight.dtype == np.float64
    weight = m[0].weight
    m.to("cpu")
    assert m[0].weight is weight                          # nothing to move: kept
    with pytest.raises(TypeError, match="floating-point"):
        m.to(dtype=np.int64)


def test_to_accepts_a_positional_dtype_like_torch():
    # torch's Module.to(dtype), to(device), to(device, dtype): a dtype first is a dtype.
    m = nn.Linear(3, 2)
    assert m.to(np.float32) is m and m.weight.dtype == np.float32
    m.to(tg.float64)
    assert m.weight.dtype == np.float64 and m.bias.dtype == np.float64
    m.to("cpu", np.float32)
    assert m.weight.dtype == np.float32 and m.weight.device.name == "cpu"
    m.to(np.dtype("float64"))
    assert m.weight.dtype == np.float64
    with pytest.raises(TypeError, match="floating-point"):
        m.to(np.int32)
    with pytest.raises(TypeError, match="dtype given twice"):
        m.to(np.float32, dtype=np.float64)


# ---------------------------------------------------------------------------------------
# Containers
# ---------------------------------------------------------------------------------------

def test_sequential_indexing_len_iteration_slicing_and_append():
    layers = [nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)]
    seq = nn.Sequential(*layers)
    assert len(seq) == 3 and list(seq) == layers
    assert seq[0] is layers[0] and seq[-1] is layers[2] and seq[np.int64(1)] is layers[1]
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and list(head) == layers[:2]
    assert [n for n, _ in seq[1:].named_parameters()] == ["2.weight", "2.bias"]
    with pytest.raises(IndexError, match="index 3 is out of range for a Sequential of length 3"):
        seq[3]     # noqa: B018
    with pytest.raises(TypeError, match="indices must be integers or slices"):
        seq["0"]   # noqa: B018
    seq.append(nn.Tanh())
    assert len(seq) == 4 and isinstance(seq[3], nn.Tanh)
    seq[1] = nn.Sigmoid()
    assert isinstance(seq[1], nn.Sigmoid) and len(seq) == 4


def test_sequential_forward_applies_the_modules_in_order():
    seq = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    x = tg.tensor(RNG.standard_normal((5, 4)))
    np.testing.assert_allclose(seq(x).numpy(), seq[2](seq[1](seq[0](x))).numpy())


def test_sequential_with_named_modules_and_bad_elements():
    seq = nn.Sequential(collections.OrderedDict(encoder=nn.Linear(2, 2), act=nn.ReLU()))
    assert [n for n, _ in seq.named_parameters()] == ["encoder.weight", "encoder.bias"]
    assert seq.encoder is seq[0]
    with pytest.raises(TypeError, match="element 1 is an Op, not a tg.nn.Module"):
        nn.Sequential(nn.ReLU(), tg.relu)


def test_module_list_registers_its_modules():
    layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])
    layers.append(nn.Linear(2, 1))
    assert len(layers) == 3 and isinstance(layers[-1], nn.Linear)
    assert [n for n, _ in layers.named_parameters()][-2:] == ["2.weight", "2.bias"]
    holder = nn.Module()
    holder.layers = layers
    assert len(list(holder.parameters())) == 6


def test_repr_looks_like_pytorch():
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Dropout(0.25),
                        nn.Linear(3, 2, bias=False, dtype=np.float32))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Linear(in_features=4, out_features=3, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Dropout(p=0.25)\n"
        "  (3): Linear(in_features=3, out_features=2, bias=False, dtype=float32)\n"
        ")")


# ---------------------------------------------------------------------------------------
# Linear
# ---------------------------------------------------------------------------------------

def test_linear_shapes_dtype_and_forward_match_numpy():
    m = nn.Linear(5, 3)
    assert m.weight.shape == (3, 5) and m.bias.shape == (3,)
    assert m.weight.dtype == m.bias.dtype == np.float64
    a = RNG.standard_normal((4, 5))
    np.testing.assert_allclose(m(tg.tensor(a)).numpy(),
                               a @ m.weight.numpy().T + m.bias.numpy(), rtol=1e-13)
    np.testing.assert_allclose(m(tg.tensor(a[0])).numpy(),
                               a[0] @ m.weight.numpy().T + m.bias.numpy(), rtol=1e-13)


def test_linear_without_bias():
    m = nn.Linear(5, 3, bias=False)
    assert m.bias is None and [n for n, _ in m.named_parameters()] == ["weight"]
    assert list(m.state_dict()) == ["weight"]
    a = RNG.standard_normal((2, 5))
    np.testing.assert_allclose(m(tg.tensor(a)).numpy(), a @ m.weight.numpy().T)


@pytest.mark.parametrize("n_in, n_out", [(1, 3), (16, 8), (300, 200)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_linear_init_lies_within_pytorchs_bounds(n_in, n_out, dtype):
    m = nn.Linear(n_in, n_out, dtype=dtype)
    bound = 1 / math.sqrt(n_in)
    for p in (m.weight, m.bias):
        assert p.dtype == dtype and p.requires_grad and p.is_leaf
        assert np.all(np.abs(p.numpy()) <= np.asarray(bound, dtype))


def test_linear_init_is_uniform():
    w = nn.Linear(400, 500).weight.numpy().ravel()
    bound = 1 / math.sqrt(400)
    # U(-b, b): mean 0, variance b^2 / 3; 200,000 draws make these tight.
    assert abs(w.mean()) < 5 * bound / math.sqrt(3 * w.size)
    assert abs(w.var() / (bound ** 2 / 3) - 1) < 0.02
    assert w.min() < -0.99 * bound and w.max() > 0.99 * bound


def test_linear_init_is_deterministic_under_manual_seed_and_drawn_weight_first():
    tg.manual_seed(123)
    a = nn.Linear(6, 4)
    tg.manual_seed(123)
    b = nn.Linear(6, 4)
    c = nn.Linear(6, 4)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    np.testing.assert_array_equal(a.bias.numpy(), b.bias.numpy())
    assert not np.array_equal(b.weight.numpy(), c.weight.numpy())
    tg.manual_seed(123)
    bound = 1 / math.sqrt(6)
    w = tg.random.uniform(-bound, bound, (4, 6))
    bias = tg.random.uniform(-bound, bound, (4,))
    # The weight goes through init.kaiming_uniform_(a=sqrt(5)) as PyTorch: its bound
    # sqrt(3) * sqrt(1/3) / sqrt(6) is 1/sqrt(6) up to rounding.
    np.testing.assert_allclose(a.weight.numpy(), w.numpy(), rtol=1e-14, atol=0)
    np.testing.assert_array_equal(a.bias.numpy(), bias.numpy())


def test_linear_reset_parameters_redraws_in_place():
    m = nn.Linear(3, 3)
    weight, before = m.weight, m.weight.numpy().copy()
    m.reset_parameters()
    assert m.weight is weight and not np.array_equal(before, weight.numpy())


@pytest.mark.parametrize("args, kwargs, error", [
    ((-1, 2), {}, ValueError), ((2.5, 2), {}, ValueError), ((2, "3"), {}, ValueError),
    ((2, 3), {"dtype": np.int64}, TypeError),
])
def test_linear_rejects_bad_arguments(args, kwargs, error):
    with pytest.raises(error, match="Linear"):
        nn.Linear(*args, **kwargs)


def test_linear_with_the_wrong_number_of_features_names_the_op_and_shapes():
    with pytest.raises(ValueError, match=r"linear: .*\(2, 4\).*\(3, 5\)"):
        nn.Linear(5, 3)(tg.ones((2, 4)))


# ---------------------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_zeroes_a_fraction_p_and_scales_the_rest(p):
    drop = nn.Dropout(p)
    out = drop(tg.ones((400, 500))).numpy()
    n = out.size
    dropped = np.mean(out == 0.0)
    assert abs(dropped - p) < 5 * math.sqrt(p * (1 - p) / n)
    np.testing.assert_allclose(out[out != 0.0], 1 / (1 - p), rtol=1e-15)
    assert abs(out.mean() - 1.0) < 5 * math.sqrt(p / (1 - p) / n)    # expectation kept


def test_dropout_is_deterministic_under_manual_seed():
    drop = nn.Dropout(0.5)
    x = tg.ones((20, 30))
    tg.manual_seed(7)
    a = drop(x).numpy()
    b = drop(x).numpy()
    tg.manual_seed(7)
    np.testing.assert_array_equal(drop(x).numpy(), a)
    assert not np.array_equal(a, b)


def test_dropout_gradient_uses_the_same_mask():
    x = tg.tensor(RNG.standard_normal((30, 40)), requires_grad=True)
    y = nn.Dropout(0.3)(x)
    y.backward(tg.ones(x.shape))
    kept = y.numpy() != 0.0
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 1 / 0.7, 0.0))


def test_dropout_edge_probabilities_and_dtype():
    x = tg.tensor(RNG.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    assert nn.Dropout(0.0)(x) is x
    zeros = nn.Dropout(1.0)(x)
    assert zeros.dtype == np.float32 and not np.any(zeros.numpy())
    zeros.backward(tg.ones((3, 4), dtype=np.float32))
    assert not np.any(x.grad.numpy())
    assert nn.Dropout(0.5)(x).dtype == np.float32
    for p in (-0.5, 1.01, None, "0.1"):
        with pytest.raises(ValueError, match="Dropout: p must be a probability"):
            nn.Dropout(p)


# ---------------------------------------------------------------------------------------
# Activations and losses as modules
# ---------------------------------------------------------------------------------------

def test_activation_modules_match_the_functions():
    a = RNG.standard_normal((3, 4))
    x = tg.tensor(a)
    cases = [(nn.ReLU(), np.maximum(a, 0)), (nn.Tanh(), np.tanh(a)),
             (nn.Sigmoid(), 1 / (1 + np.exp(-a))), (nn.Identity(), a),
             (nn.Softmax(dim=0), tg.softmax(x, axis=0).numpy()),
             (nn.Softmax(axis=1), tg.softmax(x, axis=1).numpy()),
             (nn.LogSoftmax(), tg.log_softmax(x).numpy())]
    for module, expected in cases:
        np.testing.assert_allclose(module(x).numpy(), expected, rtol=1e-12, err_msg=repr(module))


def test_flatten():
    x = tg.zeros((2, 3, 4, 5))
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 1)(x).shape == (6, 4, 5)
    assert nn.Flatten(-2)(x).shape == (2, 3, 20)
    with pytest.raises(ValueError, match="start_dim 2 comes after end_dim 1"):
        nn.Flatten(2, 1)(x)


def test_loss_modules_match_the_functions():
    a, b = RNG.standard_normal((4, 3)), RNG.uniform(0, 1, (4, 3))
    labels = np.array([0, 2, 1, 1])
    x, t = tg.tensor(a), tg.tensor(b)
    for reduction in ("mean", "sum", "none"):
        pairs = [
            (nn.CrossEntropyLoss(reduction=reduction)(x, labels),
             tg.cross_entropy(x, labels, reduction=reduction)),
            (nn.MSELoss(reduction)(x, t), tg.mse_loss(x, t, reduction=reduction)),
            (nn.BCEWithLogitsLoss(reduction)(x, t),
             tg.binary_cross_entropy_with_logits(x, t, reduction=reduction)),
        ]
        for got, expected in pairs:
            np.testing.assert_array_equal(got.numpy(), expected.numpy())
    with pytest.raises(ValueError, match="MSELoss: reduction must be"):
        nn.MSELoss("average")


# ---------------------------------------------------------------------------------------
# Documentation
# ---------------------------------------------------------------------------------------

def test_docstring_examples_run():
    result = run_doctests(nn_module)
    assert result.attempted > 20
    assert result.failed == 0
