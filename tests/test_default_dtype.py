"""tg.set_default_dtype / tg.get_default_dtype (issue 15, "PyTorch habits"): which
creation functions, samplers and layers follow the default, what keeps its dtype, the
compile guard, and the size varargs of zeros/ones/empty.

Every test that changes the default restores it (the `default` fixture): it is
process-wide, as torch's."""

import threading

import numpy as np
import pytest
import tapegrad as tg

FLOATS = [np.float16, np.float32]


@pytest.fixture
def default():
    """Yields a setter; the default dtype is float64 again after the test, even on failure."""
    before = tg.get_default_dtype()
    yield tg.set_default_dtype
    tg.set_default_dtype(before)


# -- the setting itself ----------------------------------------------------------------

def test_the_default_is_float64_like_numpy():
    assert tg.get_default_dtype() == np.float64
    assert isinstance(tg.get_default_dtype(), np.dtype)
    assert tg.tensor([1.0]).dtype == np.dtype(np.float64)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, "float32",
                                   np.dtype("float16")])
def test_set_default_dtype_accepts_the_three_float_dtypes(default, dtype):
    default(dtype)
    assert tg.get_default_dtype() == np.dtype(dtype)


@pytest.mark.parametrize("bad", [None, np.int32, np.int64, bool, np.bool_, np.complex64,
                                 np.complex128, np.longdouble, "nonsense", object, 3])
def test_set_default_dtype_refuses_anything_else_with_TypeError(default, bad):
    if bad is np.longdouble and np.dtype(np.longdouble) == np.float64:
        pytest.skip("longdouble is float64 on this platform")
    with pytest.raises(TypeError, match="set_default_dtype"):
        tg.set_default_dtype(bad)
    assert tg.get_default_dtype() == np.float64          # unchanged


def test_the_default_is_process_wide_not_per_thread(default):
    seen = []
    default(np.float32)
    t = threading.Thread(target=lambda: seen.append(tg.zeros(2).dtype))
    t.start()
    t.join()
    assert seen == [np.dtype(np.float32)]


# -- creation from Python data follows it; arrays and tensors keep theirs --------------

@pytest.mark.parametrize("dt", FLOATS)
def test_python_floats_get_the_default(default, dt):
    default(dt)
    data = [[0.1, 2.5], [-3.25, 1e-3]]
    for make in (tg.tensor, tg.asarray):
        t = make(data)
        assert t.dtype == dt
        np.testing.assert_array_equal(t.numpy(), np.array(data, dtype=dt))
    assert tg.tensor(0.5).dtype == dt
    assert tg.tensor(3.0, requires_grad=True).dtype == dt
    assert tg.tensor([1, 2.5]).dtype == dt               # mixed ints and floats: floats


@pytest.mark.parametrize("dt", FLOATS)
def test_ints_bools_arrays_numpy_scalars_and_tensors_keep_their_dtype(default, dt):
    default(dt)
    assert tg.tensor([1, 2]).dtype == np.int64
    assert tg.tensor([True, False]).dtype == np.bool_
    assert tg.tensor(np.ones(3)).dtype == np.float64      # as torch keeps a numpy array's
    assert tg.asarray(np.ones(3)).dtype == np.float64
    assert tg.tensor(np.float64(1.5)).dtype == np.float64
    assert tg.tensor([1 + 2j]).dtype == np.complex128     # complex: NumPy's (documented)
    t64 = tg.tensor(np.ones(2))
    assert tg.tensor(t64).dtype == np.float64
    assert tg.asarray(t64) is t64
    assert tg.tensor([t64.numpy()]).dtype == np.float64   # arrays inside a list: NumPy's


@pytest.mark.parametrize("dt", FLOATS)
def test_an_explicit_dtype_wins(default, dt):
    default(dt)
    assert tg.tensor([1.0], dtype=np.float64).dtype == np.float64
    assert tg.zeros(3, dtype=np.float64).dtype == np.float64
    assert tg.ones((2, 2), np.float64).dtype == np.float64
    assert tg.full(2, 0.5, dtype=np.float64).dtype == np.float64
    assert tg.eye(2, dtype=np.float64).dtype == np.float64
    assert tg.arange(0.0, 1.0, 0.5, dtype=np.float64).dtype == np.float64
    assert tg.linspace(0, 1, 3, dtype=np.float64).dtype == np.float64
    assert tg.random.rand(2, dtype=np.float64).dtype == np.float64
    assert tg.random.normal(size=2, dtype=np.float64).dtype == np.float64
    assert tg.zeros(2, dtype=np.int32).dtype == np.int32


@pytest.mark.parametrize("dt", FLOATS)
def test_constructors_follow_the_default(default, dt):
    default(dt)
    for t in (tg.zeros(2, 3), tg.zeros((2, 3)), tg.ones(2, 3), tg.ones(4), tg.empty(2, 3),
              tg.empty((3,)), tg.eye(3), tg.eye(2, 3), tg.full((2, 2), 1.5)):
        assert t.dtype == dt
    np.testing.assert_array_equal(tg.eye(2, 3).numpy(), np.eye(2, 3, dtype=dt))
    np.testing.assert_array_equal(tg.full(3, 0.1).numpy(), np.full(3, 0.1, dtype=dt))


@pytest.mark.parametrize("dt", FLOATS)
def test_full_arange_linspace_follow_the_default_only_for_floats(default, dt):
    default(dt)
    assert tg.full(2, 7).dtype == np.int64                # an int fill stays int (torch too)
    assert tg.full(2, True).dtype == np.bool_
    assert tg.full(2, np.float64(0.5)).dtype == np.float64  # a NumPy scalar keeps its dtype
    assert tg.arange(5).dtype == np.int64
    a = tg.arange(0.0, 1.0, 0.1)
    assert a.dtype == dt
    # computed as NumPy does (same count of steps), then cast
    np.testing.assert_array_equal(a.numpy(), np.arange(0.0, 1.0, 0.1).astype(dt))
    assert tg.arange(0, 2, 0.5).dtype == dt
    assert tg.arange(np.float64(3.0)).dtype == np.float64
    lin = tg.linspace(0, 1, 5)
    assert lin.dtype == dt
    np.testing.assert_array_equal(lin.numpy(), np.linspace(0, 1, 5).astype(dt))
    assert tg.linspace(np.float64(0), np.float64(1), 3).dtype == np.float64


def test_like_functions_keep_the_arguments_dtype(default):
    x64 = tg.tensor(np.ones((2, 3)))
    default(np.float32)
    assert tg.zeros_like(x64).dtype == np.float64
    assert tg.ones_like(x64).dtype == np.float64
    assert tg.full_like(x64, 0.5).dtype == np.float64
    assert tg.empty_like(x64).dtype == np.float64
    assert tg.empty_like(x64).shape == (2, 3)
    assert tg.empty_like(x64, dtype=np.float16).dtype == np.float16
    assert tg.random.rand_like(x64).dtype == np.float64
    assert tg.random.randn_like(x64).dtype == np.float64
    assert tg.random.bernoulli(tg.tensor(np.full(3, 0.5))).dtype == np.float64


@pytest.mark.parametrize("dt", FLOATS)
def test_float_samplers_follow_the_default(default, dt):
    default(dt)
    for t in (tg.random.rand(3), tg.random.rand(2, 3), tg.random.randn(4),
              tg.random.uniform(-1.0, 1.0, (2, 2)), tg.random.normal(0.0, 1.0, 5),
              tg.random.bernoulli(0.5, size=(3,))):
        assert t.dtype == dt
    assert tg.random.randint(5, size=(3,)).dtype == np.int64        # integers: not floats
    assert tg.random.permutation(4).dtype == np.int64


def test_the_same_seed_gives_the_same_values_cast(default):
    # A float32 draw is the float64 draw of the generator cast (the device draws in the
    # requested dtype: checked against the float64 stream within float32 rounding).
    tg.manual_seed(3)
    ref = tg.random.rand(6).numpy()
    default(np.float32)
    tg.manual_seed(3)
    got = tg.random.rand(6).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-6)


# -- tg.nn: parameters, buffers, optimiser state --------------------------------------

def _modules():
    nn = tg.nn
    return [nn.Linear(3, 2), nn.Bilinear(2, 3, 4), nn.Conv1d(2, 3, 3), nn.Conv2d(2, 3, 3),
            nn.Conv3d(1, 2, 2), nn.ConvTranspose1d(2, 3, 3), nn.ConvTranspose2d(2, 3, 3),
            nn.LayerNorm(4), nn.RMSNorm(4), nn.GroupNorm(2, 4), nn.BatchNorm1d(3),
            nn.BatchNorm2d(3), nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
            nn.Embedding(5, 3), nn.PReLU(), nn.RNNCell(3, 4), nn.LSTMCell(3, 4),
            nn.GRUCell(3, 4), nn.RNN(3, 4), nn.LSTM(3, 4, num_layers=2), nn.GRU(3, 4),
            nn.MultiheadAttention(4, 2), nn.TransformerEncoderLayer(4, 2, 8),
            nn.TransformerDecoderLayer(4, 2, 8)]


@pytest.mark.parametrize("dt", FLOATS)
def test_nn_layers_parameters_and_float_buffers_follow_the_default(default, dt):
    default(dt)
    for m in _modules():
        params = dict(m.named_parameters())
        assert params, type(m).__name__
        for name, p in params.items():
            assert p.dtype == dt, (type(m).__name__, name, p.dtype)
        for name, b in m.named_buffers():
            if b is not None and b.dtype.kind == "f":
                assert b.dtype == dt, (type(m).__name__, name, b.dtype)


def test_nn_layers_explicit_dtype_wins(default):
    default(np.float32)
    lin = tg.nn.Linear(3, 2, dtype=np.float64)
    bn = tg.nn.BatchNorm2d(3, dtype=np.float64)
    assert lin.weight.dtype == lin.bias.dtype == np.float64
    assert bn.running_mean.dtype == bn.weight.dtype == np.float64
    assert bn.num_batches_tracked.dtype == np.int64
    with pytest.raises(TypeError, match="Linear: dtype must be a floating-point type"):
        tg.nn.Linear(3, 2, dtype=np.int32)


def test_layers_made_before_the_change_keep_their_dtype(default):
    lin = tg.nn.Linear(3, 2)
    default(np.float32)
    assert lin.weight.dtype == np.float64
    lin.reset_parameters()                              # init writes into the tensors
    assert lin.weight.dtype == np.float64
    w = tg.zeros(2, 3, dtype=np.float64)
    tg.nn.init.kaiming_uniform_(w)
    tg.nn.init.orthogonal_(w)
    tg.nn.init.trunc_normal_(w)
    assert w.dtype == np.float64


def test_a_float32_model_trains_in_float32_end_to_end(default):
    default(np.float32)
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.Tanh(), tg.nn.Linear(8, 1))
    opt = tg.optim.Adam(model.parameters(), lr=1e-2)
    x, y = tg.random.randn(16, 4), tg.random.randn(16, 1)
    for _ in range(3):
        opt.zero_grad()
        loss = tg.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    assert loss.dtype == np.float32
    for p in model.parameters():
        assert p.dtype == np.float32 and p.grad.dtype == np.float32
        for v in opt.state[p].values():                 # optimiser state follows params
            if isinstance(v, tg.Tensor) and v.dtype.kind == "f" and v.ndim:
                assert v.dtype == np.float32


# -- tg.compile: the default is part of the guard --------------------------------------

def test_compile_records_again_when_the_default_changes(default):
    def f(x):
        return x.astype(np.float16) + tg.ones(3) + tg.random.rand(3) * 0.0

    cf = tg.compile(f)
    x = tg.tensor(np.arange(3.0))
    assert cf(x).dtype == np.float64 and cf(x).dtype == np.float64
    assert cf.cache_info().misses == 1
    default(np.float32)
    out = cf(x)
    assert out.dtype == f(x).dtype == np.float32       # not the stale float64 recording
    np.testing.assert_array_equal(out.numpy(), np.arange(3.0, dtype=np.float32) + 1)
    assert cf.cache_info().misses == 2
    assert "get_default_dtype" in cf.last_explanation
    default(np.float64)
    assert cf(x).dtype == np.float64
    assert cf.cache_info().misses == 2                 # the float64 program is kept


def test_compile_of_a_function_building_a_layer_follows_the_default(default):
    def f(x):
        tg.manual_seed(0)
        return tg.nn.Linear(2, 2)(x)

    cf = tg.compile(f)
    x64 = tg.tensor(np.ones((1, 2)))
    assert cf(x64).dtype == np.float64
    default(np.float32)
    x32 = tg.tensor(np.ones((1, 2), np.float32))
    assert cf(x32).dtype == np.float32


def test_compile_without_creation_is_not_guarded(default):
    cf = tg.compile(lambda x: x * 2.0)
    x = tg.tensor(np.ones(2))
    cf(x)
    default(np.float32)
    cf(x)
    assert cf.cache_info().misses == 1


# -- size varargs (torch) without changing NumPy's meanings ----------------------------

@pytest.mark.parametrize("make, ref", [(tg.zeros, np.zeros), (tg.ones, np.ones)])
def test_size_varargs(make, ref):
    np.testing.assert_array_equal(make(2, 3).numpy(), ref((2, 3)))
    np.testing.assert_array_equal(make(2, 3, 4).numpy(), ref((2, 3, 4)))
    np.testing.assert_array_equal(make(np.int64(2), 3).numpy(), ref((2, 3)))
    assert make(2, 3, dtype=np.float32).dtype == np.float32
    assert make(2, 3, requires_grad=True).requires_grad
    assert make(2, 3, device="cpu").shape == (2, 3)


@pytest.mark.parametrize("make", [tg.zeros, tg.ones, tg.empty])
def test_numpy_positional_meanings_stay(make):
    t = make(2, np.float32)                  # NumPy: zeros(shape, dtype)
    assert t.shape == (2,) and t.dtype == np.float32
    t = make((2, 3), np.float32, "cpu", True)   # tapegrad's positional order
    assert t.shape == (2, 3) and t.dtype == np.float32 and t.requires_grad
    assert make((2, 3), "f4").dtype == np.float32
    assert make(()).shape == ()


@pytest.mark.parametrize("make, ref", [(tg.zeros, np.zeros), (tg.ones, np.ones)])
def test_numpys_shape_keyword_stays(make, ref):
    np.testing.assert_array_equal(make(shape=(2, 3)).numpy(), ref(shape=(2, 3)))
    assert make(shape=4, dtype=np.float32).dtype == np.float32
    with pytest.raises(TypeError, match="shape given both"):
        make(2, shape=(2,))


def test_empty_has_the_shape_and_dtype_asked():
    t = tg.empty(2, 3)
    assert t.shape == (2, 3) and t.dtype == np.float64 and not t.requires_grad
    assert tg.empty((4,), dtype=np.int32).dtype == np.int32


def test_size_vararg_errors():
    with pytest.raises(TypeError, match="zeros: missing the shape"):
        tg.zeros()
    with pytest.raises(TypeError, match="dtype given both by position and by keyword"):
        tg.zeros((2,), np.float32, dtype=np.float64)
    with pytest.raises(TypeError, match="too many positional"):
        tg.ones((2,), np.float32, "cpu", False, 1)
    with pytest.raises(TypeError):
        tg.zeros(2, True)                    # a bool is not a size (nor a dtype)


def test_full_keeps_shape_then_value():
    t = tg.full(2, 3)
    np.testing.assert_array_equal(t.numpy(), np.full(2, 3))
    np.testing.assert_array_equal(tg.full((2, 3), 0.5).numpy(), np.full((2, 3), 0.5))
