"""tg.fft's values equal np.fft's bit for bit (same pocketfft calls), with NumPy's dtypes,
warnings and errors; out= refused; vmap's batching rules; other devices refused."""

import warnings

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing

RNG = np.random.default_rng(7)
NORMS = (None, "backward", "ortho", "forward")


def _cplx(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _same(got, want):
    got = got.numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want), np.max(np.abs(got - want))


INPUTS = {"float64": RNG.standard_normal((4, 6, 5)),
          "float32": RNG.standard_normal((4, 6, 5)).astype(np.float32),
          "int64": RNG.integers(-5, 5, (4, 6, 5)),
          "complex128": _cplx(4, 6, 5), "complex64": _cplx(4, 6, 5, dtype=np.complex64)}
ONE_D = [{}, {"n": 3}, {"n": 11}, {"axis": 0}, {"axis": -2, "n": 8}, {"axis": 1, "n": 1}]
ND = [{}, {"axes": (0, 2)}, {"axes": (-1, 0)}, {"s": (3, 7), "axes": (1, 2)},
      {"s": (2, -1), "axes": (0, -1)}, {"axes": (1, 1)}, {"axes": [2]}, {"s": (5, 4, 3),
                                                                        "axes": (0, 1, 2)}]


@pytest.mark.parametrize("dtype", sorted(INPUTS))
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
def test_one_dimensional_transforms_equal_numpys_bit_for_bit(name, dtype):
    x = INPUTS[dtype]
    if name in ("rfft", "ihfft") and x.dtype.kind == "c":
        return      # refused (test below)
    for kw in ONE_D:
        for norm in NORMS:
            _same(getattr(tg.fft, name)(tg.tensor(x), norm=norm, **kw),
                  getattr(np.fft, name)(x, norm=norm, **kw))


@pytest.mark.parametrize("dtype", sorted(INPUTS))
@pytest.mark.parametrize("name", ["fftn", "ifftn", "fft2", "ifft2", "rfftn", "irfftn",
                                  "rfft2", "irfft2"])
def test_n_dimensional_transforms_equal_numpys_bit_for_bit(name, dtype):
    x = INPUTS[dtype]
    if name.startswith("rfft") and x.dtype.kind == "c":
        return
    cases = ND if not name.endswith("2") else [{}, {"axes": (0, 2)}, {"s": (3, 4)},
                                               {"s": (2, 9), "axes": (2, 0)}]
    for kw in cases:
        for norm in NORMS:
            _same(getattr(tg.fft, name)(tg.tensor(x), norm=norm, **kw),
                  getattr(np.fft, name)(x, norm=norm, **kw))


def test_shifts_and_frequencies_equal_numpys():
    x = INPUTS["complex128"]
    for axes in (None, 0, -1, (0, 2), [1]):
        _same(tg.fft.fftshift(tg.tensor(x), axes=axes), np.fft.fftshift(x, axes=axes))
        _same(tg.fft.ifftshift(tg.tensor(x), axes=axes), np.fft.ifftshift(x, axes=axes))
    for n in (1, 4, 7):
        for d in (1.0, 0.1, 3):
            _same(tg.fft.fftfreq(n, d), np.fft.fftfreq(n, d))
            _same(tg.fft.rfftfreq(n, d=d), np.fft.rfftfreq(n, d=d))
    _same(tg.fft.fftfreq(5, tg.tensor(0.25)), np.fft.fftfreq(5, 0.25))


def test_python_lists_and_arrays_are_accepted_as_numpy_does():
    _same(tg.fft.fft([1.0, 2.0, 3.0]), np.fft.fft([1.0, 2.0, 3.0]))
    _same(tg.fft.rfftn(np.ones((2, 3))), np.fft.rfftn(np.ones((2, 3))))


def test_numpys_deprecation_warnings_are_kept():
    x = np.ones((3, 4))
    for call in (lambda m: m.fftn(x if m is np.fft else tg.tensor(x), s=(3, 4)),
                 lambda m: m.fftn(x if m is np.fft else tg.tensor(x), s=(None, 4),
                                  axes=(0, 1))):
        with warnings.catch_warnings(record=True) as want:
            warnings.simplefilter("always")
            call(np.fft)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            call(tg.fft)
        assert [w.category for w in got] == [w.category for w in want] == [DeprecationWarning]
        assert str(got[0].message) == str(want[0].message)


def _error(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.type, str(info.value)


@pytest.mark.parametrize("call", [
    lambda m, x: m.fft(x, n=0), lambda m, x: m.fft(x, norm="nope"),
    lambda m, x: m.ifft(x, axis=3), lambda m, x: m.irfft(x, n=-1),
    lambda m, x: m.fftn(x, s=(2, 2), axes=(0,)), lambda m, x: m.hfft(x, axis=-4),
], ids=["n0", "norm", "axis", "irfft-n", "s-axes", "hfft-axis"])
def test_bad_arguments_raise_numpys_errors(call):
    x = INPUTS["complex128"]
    want_type, _ = _error(lambda: call(np.fft, x))
    got_type, _ = _error(lambda: call(tg.fft, tg.tensor(x)))
    assert issubclass(got_type, want_type) or issubclass(want_type, got_type)


def test_out_is_refused_naming_the_function():
    x = tg.tensor(np.ones(4))
    for name in ("fft", "rfft", "fftn", "irfft2"):
        with pytest.raises(TypeError, match=f"fft.{name}: out= is not supported"):
            getattr(tg.fft, name)(x, out=np.empty(4, complex))


def test_fftfreq_refuses_a_spacing_that_requires_grad():
    with pytest.raises(TypeError, match="fft.fftfreq: the sample spacing d must be a number"):
        tg.fft.fftfreq(4, tg.tensor(0.5, requires_grad=True))


@pytest.mark.parametrize("name,kw", [
    ("fft", {"n": 6}), ("ifft", {"axis": 0, "norm": "ortho"}), ("rfft", {"axis": -2}),
    ("irfft", {"n": 7, "axis": 1}), ("hfft", {}), ("ihfft", {"n": 5, "axis": 0}),
    ("fftshift", {}), ("ifftshift", {"axes": (0, -1)}), ("fftn", {"axes": (1, 0)}),
    ("irfftn", {"s": (3, 4), "axes": (0, 1)})])
def test_batching_rules_equal_the_per_example_loop(name, kw):
    x = INPUTS["float64"] if name in ("rfft", "ihfft") else INPUTS["complex128"]
    fn = getattr(tg.fft, name)
    got = tapegrad.testing.vmap_call(lambda v: fn(v, **kw))(x)
    want = np.stack([getattr(np.fft, name)(x[i], **kw) for i in range(x.shape[0])])
    assert np.array_equal(got.numpy(), want)


def test_an_axis_out_of_range_under_vmap_raises_as_numpy():
    x = INPUTS["complex128"]
    with pytest.raises(np.exceptions.AxisError):
        tapegrad.testing.vmap_call(lambda v: tg.fft.fft(v, axis=2))(x)


class _FakeArray(np.ndarray):
    pass


class _FakeDevice(tg.Device):
    """Only what placing a tensor there needs: the transforms must refuse before any
    other device method is called."""

    def __init__(self):
        super().__init__("fakefft", _FakeArray)

    def asarray(self, obj, dtype=None):
        return np.array(obj, dtype=dtype).view(_FakeArray)

    def to_numpy(self, arr):
        return arr.view(np.ndarray)


class _FakePlugin:
    @tg.hookimpl
    def tapegrad_register_devices(self, registry):
        registry.register_device(_FakeDevice())


def test_another_device_raises_naming_the_op_and_the_device():
    """The plugin registers cpu kernels only (cuda included: np.fft has no GPU kernel)."""
    name = tg.register_plugin(_FakePlugin(), name="fake-fft-device")
    try:
        x = tg.tensor(np.ones(4), device="fakefft")
        for fn, op in ((tg.fft.fft, "fft_fft"), (tg.fft.rfft, "fft_rfft"),
                       (tg.fft.fftshift, "fft_fftshift")):
            with pytest.raises(NotImplementedError,
                               match=f"{op}: no kernel for device 'fakefft'.*cpu"):
                fn(x)
    finally:
        tg.unregister_plugin(name)
