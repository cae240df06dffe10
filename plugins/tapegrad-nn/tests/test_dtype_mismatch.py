"""A float32 input to a float64 layer (or the reverse) raises TypeError naming the op and
both dtypes, as PyTorch refuses it (issue 15, "PyTorch habits"); integer inputs are refused;
same-dtype calls work (their float32 result agrees with the float64 one to float32
precision); plain NumPy ops keep NumPy's promotion."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_nn.functional as F

nn = tg.nn
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _t(a, dt):
    return tg.tensor(np.asarray(a, dtype=dt))


# Each case: (name shown in the error, call(input_dtype, param_dtype) -> result).
# The call builds input and parameters from the same float64 values in the two dtypes.

def _linear(xd, pd):
    return F.linear(_t(_r(4, 3), xd), _t(_r(2, 3, seed=1), pd), _t(_r(2, seed=2), pd))


def _linear_bias(xd, pd):
    return F.linear(_t(_r(4, 3), xd), _t(_r(2, 3, seed=1), xd), _t(_r(2, seed=2), pd))


def _bilinear(xd, pd):
    return F.bilinear(_t(_r(4, 2), xd), _t(_r(4, 3, seed=1), xd), _t(_r(5, 2, 3, seed=2), pd))


def _bilinear_input2(xd, pd):
    return F.bilinear(_t(_r(4, 2), xd), _t(_r(4, 3, seed=1), pd), _t(_r(5, 2, 3, seed=2), xd))


def _conv(fn, x_shape, w_shape, **kw):
    def call(xd, pd):
        return fn(_t(_r(*x_shape), xd), _t(_r(*w_shape, seed=1), pd),
                  _t(_r(w_shape[1] if "transpose" in fn.__name__ else w_shape[0], seed=2), pd),
                  **kw)
    return call


def _layer_norm(xd, pd):
    return F.layer_norm(_t(_r(3, 4), xd), 4, _t(_r(4, seed=1), pd), _t(_r(4, seed=2), pd))


def _rms_norm(xd, pd):
    return F.rms_norm(_t(_r(3, 4), xd), 4, _t(_r(4, seed=1), pd))


def _group_norm(xd, pd):
    return F.group_norm(_t(_r(2, 4, 3), xd), 2, _t(_r(4, seed=1), pd), _t(_r(4, seed=2), pd))


def _batch_norm_weight(xd, pd):
    return F.batch_norm(_t(_r(5, 3), xd), _t(np.zeros(3), xd), _t(np.ones(3), xd),
                        _t(_r(3, seed=1), pd), _t(_r(3, seed=2), pd), training=True)


def _batch_norm_running(xd, pd):
    return F.batch_norm(_t(_r(5, 3), xd), _t(_r(3, seed=3), pd), _t(np.abs(_r(3)) + 1, pd),
                        training=False)


def _instance_norm(xd, pd):
    return F.instance_norm(_t(_r(2, 3, 4), xd), weight=_t(_r(3, seed=1), pd),
                           bias=_t(_r(3, seed=2), pd))


def _instance_norm_running(xd, pd):
    return F.instance_norm(_t(_r(2, 3, 4), xd), _t(np.zeros(3), pd), _t(np.ones(3), pd))


def _prelu(xd, pd):
    return F.prelu(_t(_r(2, 3, 4), xd), _t(np.full(3, 0.25), pd))


def _sdpa(xd, pd):
    return F.scaled_dot_product_attention(_t(_r(2, 3, 4), xd), _t(_r(2, 5, 4, seed=1), pd),
                                          _t(_r(2, 5, 3, seed=2), xd))


def _sdpa_value(xd, pd):
    return F.scaled_dot_product_attention(_t(_r(2, 3, 4), xd), _t(_r(2, 5, 4, seed=1), xd),
                                          _t(_r(2, 5, 3, seed=2), pd))


def _module(make, x_shape, *, int_input=False, extra=()):
    """A module built in the parameter dtype, called with an input of the input dtype."""
    def call(xd, pd):
        tg.manual_seed(0)
        m = make().to(dtype=pd)
        if int_input:
            return m(tg.tensor(np.arange(6).reshape(x_shape)))
        return m(_t(_r(*x_shape), xd), *[_t(_r(*s, seed=9), xd) for s in extra])
    return call


def _first(out):
    return out[0] if isinstance(out, tuple) else out


FUNCTIONAL = [
    ("linear", _linear),
    ("linear", _linear_bias),
    ("bilinear", _bilinear),
    ("bilinear", _bilinear_input2),
    ("conv1d", _conv(F.conv1d, (2, 2, 6), (3, 2, 3))),
    ("conv2d", _conv(F.conv2d, (2, 2, 5, 5), (3, 2, 3, 3))),
    ("conv3d", _conv(F.conv3d, (1, 2, 4, 4, 4), (3, 2, 2, 2, 2))),
    ("conv_transpose1d", _conv(F.conv_transpose1d, (2, 2, 4), (2, 3, 3))),
    ("conv_transpose2d", _conv(F.conv_transpose2d, (1, 2, 3, 3), (2, 3, 2, 2))),
    ("layer_norm", _layer_norm),
    ("rms_norm", _rms_norm),
    ("group_norm", _group_norm),
    ("batch_norm", _batch_norm_weight),
    ("batch_norm", _batch_norm_running),
    ("instance_norm", _instance_norm),
    ("instance_norm", _instance_norm_running),
    ("prelu", _prelu),
    ("scaled_dot_product_attention", _sdpa),
    ("scaled_dot_product_attention", _sdpa_value),
]

MODULES = [
    ("Linear", _module(lambda: nn.Linear(3, 2), (4, 3))),
    ("Bilinear", _module(lambda: nn.Bilinear(3, 2, 4), (5, 3), extra=[(5, 2)])),
    ("Conv1d", _module(lambda: nn.Conv1d(2, 3, 3), (2, 2, 6))),
    ("Conv2d", _module(lambda: nn.Conv2d(2, 3, 3), (2, 2, 5, 5))),
    ("Conv3d", _module(lambda: nn.Conv3d(2, 3, 2), (1, 2, 3, 3, 3))),
    ("ConvTranspose1d", _module(lambda: nn.ConvTranspose1d(2, 3, 3), (2, 2, 4))),
    ("ConvTranspose2d", _module(lambda: nn.ConvTranspose2d(2, 3, 2), (1, 2, 3, 3))),
    ("LayerNorm", _module(lambda: nn.LayerNorm(4), (3, 4))),
    ("RMSNorm", _module(lambda: nn.RMSNorm(4), (3, 4))),
    ("GroupNorm", _module(lambda: nn.GroupNorm(2, 4), (2, 4, 3))),
    ("BatchNorm1d", _module(lambda: nn.BatchNorm1d(3), (5, 3))),
    ("BatchNorm2d", _module(lambda: nn.BatchNorm2d(3).eval(), (2, 3, 2, 2))),
    ("InstanceNorm1d", _module(lambda: nn.InstanceNorm1d(3, affine=True), (2, 3, 4))),
    ("PReLU", _module(lambda: nn.PReLU(3), (2, 3, 4))),
    ("RNNCell", _module(lambda: nn.RNNCell(3, 4), (2, 3))),
    ("LSTMCell", _module(lambda: nn.LSTMCell(3, 4), (2, 3))),
    ("GRUCell", _module(lambda: nn.GRUCell(3, 4), (2, 3))),
    ("RNN", _module(lambda: nn.RNN(3, 4), (5, 2, 3))),
    ("LSTM", _module(lambda: nn.LSTM(3, 4, num_layers=2), (5, 2, 3))),
    ("GRU", _module(lambda: nn.GRU(3, 4, bidirectional=True), (5, 2, 3))),
    ("MultiheadAttention", _module(lambda: nn.MultiheadAttention(4, 2), (3, 2, 4),
                                   extra=[(3, 2, 4), (3, 2, 4)])),
    ("TransformerEncoderLayer", _module(lambda: nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0),
                                        (3, 2, 4))),
    ("TransformerDecoderLayer", _module(lambda: nn.TransformerDecoderLayer(4, 2, 8, dropout=0.0),
                                        (3, 2, 4), extra=[(5, 2, 4)])),
]

CASES = FUNCTIONAL + MODULES
# What the message names when a module raises from the op or sub-layer it calls.
NAMED = {"ConvTranspose1d": "conv_transpose1d", "ConvTranspose2d": "conv_transpose2d",
         "TransformerEncoderLayer": "MultiheadAttention",
         "TransformerDecoderLayer": "MultiheadAttention"}


def _names_the_op(name, msg):
    return NAMED.get(name, name).lower() in msg.lower()


IDS = [f"{name}-{i}" for i, (name, _) in enumerate(CASES)]


@pytest.mark.parametrize("name, call", CASES, ids=IDS)
@pytest.mark.parametrize("xd, pd", [(F32, F64), (F64, F32)], ids=["f32-in-f64", "f64-in-f32"])
def test_mixed_float_dtypes_raise_naming_the_op_and_both_dtypes(name, call, xd, pd):
    with pytest.raises(TypeError) as info:
        call(xd, pd)
    msg = str(info.value)
    assert _names_the_op(name, msg), msg
    assert str(xd) in msg and str(pd) in msg, msg


@pytest.mark.parametrize("name, call", CASES, ids=IDS)
def test_same_dtype_calls_work_and_float32_agrees_with_float64(name, call):
    out64 = _first(call(F64, F64))
    out32 = _first(call(F32, F32))
    assert out64.dtype == F64 and out32.dtype == F32
    # the float64 computation is the reference for the float32 one (same inputs, rounded)
    np.testing.assert_allclose(out32.numpy(), out64.numpy(), rtol=2e-3, atol=2e-3)


INT_CASES = [
    ("linear", lambda: F.linear(tg.tensor([[1, 2, 3]]), tg.ones((2, 3)))),
    ("layer_norm", lambda: F.layer_norm(tg.tensor([[1, 2, 3]]), 3)),
    ("group_norm", lambda: F.group_norm(tg.tensor(np.ones((2, 4, 3), np.int64)), 2)),
    ("batch_norm", lambda: F.batch_norm(tg.tensor(np.ones((3, 2), np.int64)), tg.zeros(2),
                                        tg.ones(2))),
    ("instance_norm", lambda: F.instance_norm(tg.tensor(np.ones((2, 3, 4), np.int64)))),
    ("prelu", lambda: F.prelu(tg.tensor([[-1, 2]]), tg.tensor([0.25]))),
    ("conv2d", lambda: F.conv2d(tg.tensor(np.ones((1, 1, 3, 3), np.int64)),
                                tg.ones((1, 1, 2, 2)))),
    ("bilinear", lambda: F.bilinear(tg.tensor([[1, 2]]), tg.ones((1, 3)), tg.ones((4, 2, 3)))),
    ("scaled_dot_product_attention",
     lambda: F.scaled_dot_product_attention(*(tg.tensor(np.ones((2, 3), np.int64)),) * 3)),
    ("Linear", lambda: nn.Linear(3, 2)(tg.tensor([[1, 2, 3]]))),
    ("Conv1d", lambda: nn.Conv1d(1, 1, 2)(tg.tensor(np.ones((1, 1, 4), np.int64)))),
    ("LayerNorm", lambda: nn.LayerNorm(3)(tg.tensor([[1, 2, 3]]))),
    ("BatchNorm1d", lambda: nn.BatchNorm1d(2)(tg.tensor(np.ones((3, 2), np.int64)))),
    ("LSTM", lambda: nn.LSTM(3, 2)(tg.tensor(np.ones((2, 1, 3), np.int64)))),
    ("GRUCell", lambda: nn.GRUCell(3, 2)(tg.tensor(np.ones((1, 3), np.bool_)))),
]


@pytest.mark.parametrize("name, call", INT_CASES, ids=[n for n, _ in INT_CASES])
def test_integer_and_bool_inputs_to_float_layers_are_refused(name, call):
    with pytest.raises(TypeError) as info:
        call()
    msg = str(info.value)
    assert _names_the_op(name, msg), msg
    assert "int64" in msg or "bool" in msg, msg


def test_recurrent_initial_state_of_another_dtype_is_refused():
    cell = nn.LSTMCell(3, 4)
    x = tg.tensor(np.ones((2, 3)))
    h32 = tg.tensor(np.zeros((2, 4), np.float32))
    with pytest.raises(TypeError, match="float32"):
        cell(x, (h32, h32))
    rnn = nn.GRU(3, 4)
    with pytest.raises(TypeError, match="float32"):
        rnn(tg.tensor(np.ones((5, 2, 3))), tg.tensor(np.zeros((1, 2, 4), np.float32)))


def test_embedding_takes_integer_indices_whatever_the_weight_dtype():
    emb = nn.Embedding(5, 3).to(dtype=np.float32)
    out = emb(tg.tensor([[0, 4]]))
    assert out.dtype == F32
    np.testing.assert_array_equal(out.numpy()[0], emb.weight.numpy()[[0, 4]])
    emb_max = nn.Embedding(5, 3, max_norm=1.0).to(dtype=np.float32)
    assert emb_max(tg.tensor([1, 2])).dtype == F32


def test_python_scalars_and_lists_are_not_refused():
    # a Python number has no dtype: it adapts (NumPy's weak scalars), as torch's scalars
    x32 = _t(_r(2, 3), F32)
    assert F.linear(x32, _t(_r(4, 3), F32), 0.5).dtype == F32
    assert F.prelu(x32, 0.25).dtype == F32
    assert F.linear([[1.0, 2.0, 3.0]], tg.ones((2, 3))).dtype == F64   # a list: the default


def test_plain_numpy_ops_keep_numpys_promotion():
    x32, w64 = _t(_r(2, 3), F32), _t(_r(3, 4), F64)
    assert tg.matmul(x32, w64).dtype == F64
    assert (x32 + _t(_r(2, 3), F64)).dtype == F64
    assert (x32 * 2.0).dtype == F32
    np.testing.assert_allclose(tg.matmul(x32, w64).numpy(),
                               x32.numpy().astype(np.float64) @ w64.numpy())


TORCH_CASES = ["linear", "conv2d", "layer_norm", "batch_norm", "sdpa"]


@pytest.mark.needs_torch
@pytest.mark.parametrize("case", TORCH_CASES)
def test_pytorch_refuses_the_same_mixed_dtype_calls(case):
    # The rule is PyTorch's: each call that tapegrad refuses, torch refuses too (with
    # RuntimeError), and the same-dtype call works in both.
    torch = pytest.importorskip("torch")
    TF = torch.nn.functional

    def calls(lib, make):
        x32, w64 = make(_r(2, 3, 4, 4), np.float32), make(_r(5, 3, 2, 2, seed=1), np.float64)
        if case == "linear":
            return lambda: lib.linear(make(_r(4, 3), np.float32), make(_r(2, 3), np.float64))
        if case == "conv2d":
            return lambda: lib.conv2d(x32, w64)
        if case == "layer_norm":
            return lambda: lib.layer_norm(x32, (4,), make(_r(4), np.float64))
        if case == "batch_norm":
            return lambda: lib.batch_norm(x32, make(np.zeros(3), np.float64),
                                          make(np.ones(3), np.float64), training=False)
        return lambda: lib.scaled_dot_product_attention(
            make(_r(2, 3, 4), np.float32), make(_r(2, 5, 4), np.float64),
            make(_r(2, 5, 4), np.float32))

    with pytest.raises(RuntimeError):
        calls(TF, lambda a, dt: torch.tensor(np.asarray(a, dt)))()
    with pytest.raises(TypeError):
        calls(F, lambda a, dt: tg.tensor(np.asarray(a, dt)))()


@pytest.mark.needs_torch
def test_default_dtype_matches_torch_for_python_data():
    torch = pytest.importorskip("torch")
    before_tg, before_torch = tg.get_default_dtype(), torch.get_default_dtype()
    try:
        for tg_dt, torch_dt in ((np.float32, torch.float32), (np.float64, torch.float64)):
            tg.set_default_dtype(tg_dt)
            torch.set_default_dtype(torch_dt)
            for make_tg, make_torch in (
                    (lambda: tg.tensor([1.5, 2.0]), lambda: torch.tensor([1.5, 2.0])),
                    (lambda: tg.zeros(2, 3), lambda: torch.zeros(2, 3)),
                    (lambda: tg.full((2,), 0.5), lambda: torch.full((2,), 0.5)),
                    (lambda: tg.full((2,), 7), lambda: torch.full((2,), 7)),
                    (lambda: tg.arange(0.0, 1.0, 0.1), lambda: torch.arange(0.0, 1.0, 0.1)),
                    (lambda: tg.arange(5), lambda: torch.arange(5)),
                    (lambda: tg.linspace(0, 1, 5), lambda: torch.linspace(0, 1, 5)),
                    (lambda: tg.tensor(np.ones(2)), lambda: torch.tensor(np.ones(2))),
                    (lambda: tg.nn.Linear(3, 2).weight, lambda: torch.nn.Linear(3, 2).weight)):
                a, b = make_tg(), make_torch()
                assert str(a.dtype) == str(b.dtype).replace("torch.", ""), (a, b)
                assert a.shape == tuple(b.shape)
            np.testing.assert_allclose(tg.arange(0.0, 1.0, 0.1).numpy(),
                                       torch.arange(0.0, 1.0, 0.1).numpy(), rtol=1e-6)
    finally:
        tg.set_default_dtype(before_tg)
        torch.set_default_dtype(before_torch)
