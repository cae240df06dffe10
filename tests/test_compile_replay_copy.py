"""Restores replayed as copies (tg.compile, fuse=True): a recorded `p[...] = src` between
two NumPy arrays of one shape and dtype replays as one PyArray_CopyInto ("copy" steps);
anything else (a cast, a broadcast, a read-only target) goes through the recorded
setitem, so the values, the errors and the version counts are eager's.

The reference is the same function run eagerly (NumPy's own setitem); arrays are compared
by their bytes.
"""

import numpy as np
import pytest
import tapegrad as tg


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, np.ascontiguousarray(a).tobytes()


def _copy_steps(compiled):
    return [st for p in compiled.programs() for st in p.forward_run
            if st.describe()[0] == "copy"]


def _restore(p_value, src_value):
    p = tg.tensor(p_value.copy())

    def f(src, x):
        with tg.no_grad():
            p[...] = src
        return p * x
    return p, f


@pytest.mark.parametrize("src_dtype,shape,src_shape", [
    (np.float32, (64, 128), (64, 128)),      # the plain copy
    (np.float32, (), ()),                    # 0-d
    (np.float64, (64, 128), (64, 128)),      # a cast: through setitem
    (np.float32, (64, 128), (128,)),         # a broadcast: through setitem
    (np.float32, (64, 128), (1, 128)),
])
def test_restore_replays_with_eager_bits_and_versions(src_dtype, shape, src_shape):
    rng = np.random.default_rng(0)
    start = rng.standard_normal(shape).astype(np.float32)
    pe, fe = _restore(start, None)
    pc, fc = _restore(start, None)
    fc = tg.compile(fc)
    x = tg.tensor(np.float32(2.0))
    for i in range(3):
        src = tg.tensor((rng.standard_normal(src_shape) * (i + 1)).astype(src_dtype))
        assert _bits(fe(src, x).numpy()) == _bits(fc(src, x).numpy())
        assert _bits(pe.numpy()) == _bits(pc.numpy())
        assert pe._version == pc._version
    assert len(_copy_steps(fc)) == 1


def test_an_overlapping_source_is_copied_first_as_eager():
    """p[...] = p[::-1]: NumPy copies an overlapping source before writing."""
    def make():
        p = tg.tensor(np.arange(10000, dtype=np.float32))

        def f(x):
            with tg.no_grad():
                p[...] = p[::-1]
            return p * x
        return p, f

    (pe, fe), (pc, fc) = make(), make()
    fc = tg.compile(fc)
    x = tg.tensor(np.float32(1.0))
    for _ in range(3):
        assert _bits(fe(x).numpy()) == _bits(fc(x).numpy())
        assert _bits(pe.numpy()) == _bits(pc.numpy())


def test_a_read_only_target_raises_as_eager():
    def f(p, src):
        with tg.no_grad():
            p[...] = src
        return p * 1.0

    fc = tg.compile(f)
    src = tg.tensor(np.ones(5))
    fc(tg.tensor(np.zeros(5)), src)
    fc(tg.tensor(np.zeros(5)), src)
    pe, pc = tg.tensor(np.zeros(5)), tg.tensor(np.zeros(5))
    for p in (pe, pc):
        np.asarray(p).flags.writeable = False
    assert not np.asarray(pc).flags.writeable
    with pytest.raises(ValueError) as eager:
        f(pe, src)
    with pytest.raises(ValueError) as compiled:
        fc(pc, src)
    # (eager adds the op's context to NumPy's message; the replay's recorded setitem
    # raises NumPy's own, as it did before copy steps)
    assert "read-only" in str(eager.value) and "read-only" in str(compiled.value)
    assert not pc.numpy().any()
