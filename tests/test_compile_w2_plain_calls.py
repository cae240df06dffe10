"""Replayed kernels called through their `plain_call` (issue 16: the compiled W2 step).

A kernel with a `plain_call` attribute (the linalg plugin's matmul: np.matmul) is called
directly by a replay when its step has positional arguments only (see Note: [plain
calls] in _compile.pyx). What must hold:

- a training step's matmul steps (forward and backward) call np.matmul, and every replay
  equals the eager step bit for bit (loss, gradients, updated weights);
- the same for the cases around it: float64, complex, integers without gradients,
  non-contiguous operands (a transpose, a strided slice), broadcasting batch products,
  1-d operands, an output the function also returns and reads again;
- transposes call np.ndarray.transpose (axes=None, positional only), bit for bit;
- kernels without the attribute (relu) keep their kernel;
- a shape that does not fit still gets the reworded error, eagerly and through a
  compiled function (which records anew for a new signature, eagerly).

References: eager calls of the same functions (bit for bit), and NumPy's own matmul for
the error case's validity.
"""

import numpy as np
import pytest
import tapegrad as tg


def _steps(program):
    out = []
    for steps in (program.forward_run, program.backward_run):
        for st in steps or ():
            out.append(st)
            out.extend(st.sub or ())
    return out


def _only_program(compiled):
    (program,) = compiled.programs()      # (one signature, recorded once)
    return program


def _names(compiled):
    return [st.describe()[1] for st in _steps(_only_program(compiled))]


def _mlp_step(weights, init, lr):
    def step(x, y):
        with tg.no_grad():
            for p, p0 in zip(weights, init):
                p[...] = p0
                p.grad = None
        h = x
        for i in range(len(weights) // 2):
            h = h @ weights[2 * i] + weights[2 * i + 1]
            if i < len(weights) // 2 - 1:
                h = tg.relu(h)
        loss = tg.cross_entropy(h, y)
        loss.backward()
        with tg.no_grad():
            for p in weights:
                p -= lr * p.grad
        return loss
    return step


def test_a_training_steps_matmuls_call_numpy_and_replays_equal_eager():
    rng = np.random.default_rng(0)
    sizes = [12, 16, 16, 5]
    init = []
    for a, b in zip(sizes, sizes[1:]):
        init += [(rng.standard_normal((a, b)) * 0.3).astype(np.float32),
                 (rng.standard_normal(b) * 0.1).astype(np.float32)]
    w_eager = [tg.tensor(a, requires_grad=True) for a in init]
    w_comp = [tg.tensor(a, requires_grad=True) for a in init]
    eager = _mlp_step(w_eager, init, 0.05)
    compiled = tg.compile(_mlp_step(w_comp, init, 0.05))
    for call in range(4):
        x = tg.tensor(rng.standard_normal((8, 12)).astype(np.float32))
        y = rng.integers(0, 5, 8)
        le, lc = eager(x, y), compiled(x, y)
        assert np.array_equal(le.numpy(), lc.numpy())
        for pe, pc in zip(w_eager, w_comp):
            assert pe.numpy().dtype == pc.numpy().dtype == np.float32
            assert np.array_equal(pe.numpy(), pc.numpy())
            assert np.array_equal(pe.grad.numpy(), pc.grad.numpy())
    names = _names(compiled)
    # forward: 3 products; backward: 3 weight gradients and 2 input gradients
    assert names.count("matmul") >= 5
    assert "_matmul_kernel" not in names


def _check(fn, arrays, grad=True):
    """fn's compiled replays equal its eager calls bit for bit (values and gradients)."""
    compiled = tg.compile(fn)
    for call in range(3):
        shifted = [a + call for a in arrays]
        te = [tg.tensor(a, requires_grad=grad) for a in shifted]
        tc = [tg.tensor(a, requires_grad=grad) for a in shifted]
        oe, oc = fn(*te), compiled(*tc)
        oe = oe if isinstance(oe, tuple) else (oe,)
        oc = oc if isinstance(oc, tuple) else (oc,)
        for e, c in zip(oe, oc):
            assert e.numpy().dtype == c.numpy().dtype
            assert np.array_equal(e.numpy(), c.numpy())
        if grad:
            oe[0].sum().backward()
            oc[0].sum().backward()
            for e, c in zip(te, tc):
                assert np.array_equal(e.grad.numpy(), c.grad.numpy())
    return compiled


_rng = np.random.default_rng(1)


@pytest.mark.parametrize("fn, shapes, dtype", [
    (lambda x, y: x @ y, [(3, 4), (4, 5)], np.float64),
    (lambda x, y: x @ y, [(3, 4), (4, 5)], np.float32),
    (lambda x, y: tg.transpose(x) @ y, [(4, 3), (4, 5)], np.float64),   # non-contiguous
    (lambda x, y: x[:, ::2] @ y, [(3, 8), (4, 5)], np.float32),         # strided slice
    (lambda x, y: x @ y, [(2, 3, 4), (4, 5)], np.float64),              # broadcast batch
    (lambda x, y: x @ y, [(2, 1, 3, 4), (5, 4, 2)], np.float32),        # both broadcast
    (lambda x, y: x @ y, [(4,), (4, 5)], np.float64),                   # 1-d left
    (lambda x, y: x @ y, [(3, 4), (4,)], np.float64),                   # 1-d right
    (lambda x, y: x @ y, [(4,), (4,)], np.float64),                     # 0-d result
])
def test_replayed_matmuls_equal_eager(fn, shapes, dtype):
    arrays = [_rng.standard_normal(s).astype(dtype) for s in shapes]
    compiled = _check(fn, arrays)
    assert "matmul" in _names(compiled)


def test_complex_matmul_replays_equal_eager():
    arrays = [(_rng.standard_normal(s) + 1j * _rng.standard_normal(s)) for s in [(3, 4), (4, 2)]]
    compiled = _check(lambda x, y: x @ y, arrays, grad=False)
    assert "matmul" in _names(compiled)


def test_integer_matmul_replays_equal_eager():
    arrays = [_rng.integers(-5, 5, s) for s in [(3, 4), (4, 2)]]
    _check(lambda x, y: x @ y, arrays, grad=False)


def test_an_output_returned_and_read_again_equals_eager():
    def fn(x, y):
        p = x @ y
        return tg.tanh(p) * p, p
    _check(fn, [_rng.standard_normal((3, 4)), _rng.standard_normal((4, 3))])


def test_transposes_call_the_ndarray_method_and_replays_equal_eager():
    for axes in (None, (1, 0, 2), (2, 0, 1)):
        if axes is None:
            arrays = [_rng.standard_normal((4, 3)), _rng.standard_normal((4, 5))]
        else:
            x = _rng.standard_normal((4, 3, 2))
            arrays = [x, _rng.standard_normal(np.transpose(x, axes).shape)]
        compiled = _check(lambda x, y: tg.transpose(x, axes) * y if axes else
                          tg.transpose(x) @ y, arrays)
        names = _names(compiled)
        if axes is None:
            assert "transpose" in names and "_transpose_kernel" not in names
        else:   # (axes as a keyword parameter: the kernel, as recorded)
            assert "transpose" not in names


def test_kernels_without_a_plain_call_keep_their_kernel():
    compiled = _check(lambda x, y: tg.sigmoid(x) @ y,
                      [_rng.standard_normal((4, 3)), _rng.standard_normal((3, 5))])
    assert "_sigmoid_kernel" in _names(compiled)


def test_a_shape_mismatch_still_gets_the_reworded_error():
    x, y = np.ones((3, 4)), np.ones((5, 2))
    with pytest.raises(ValueError) as numpy_error:
        np.matmul(x, y)
    compiled = tg.compile(lambda a, b: a @ b)
    compiled(tg.tensor(np.ones((3, 4))), tg.tensor(np.ones((4, 2))))
    for call in (lambda a, b: a @ b, compiled):
        with pytest.raises(ValueError) as exc:
            call(tg.tensor(x), tg.tensor(y))
        assert str(exc.value) != str(numpy_error.value)
        assert "(3, 4)" in str(exc.value) and "(5, 2)" in str(exc.value)
