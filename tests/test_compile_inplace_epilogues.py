"""In-place epilogues (tg.compile, Note: [in-place epilogues] in _compile.pyx): a replayed
elementwise kernel whose input dies at it writes its result into that input. These tests
check that replays stay bit for bit equal to eager calls (and to NumPy's closed form),
that the in-place write really happens where planned (so a silent fallback does not
pass), and -- the trap -- that it never happens while something else still sees the
array: a NumPy view of it inside the function, a returned view, a returned value.
Each of those cases is planned in place at recording (the test checks that), so only
the replay's reference test keeps them right: loosening it makes them fail.
"""

import numpy as np
import pytest
import tapegrad as tg

FLOATS = (np.float32, np.float64)


def _bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.dtype, a.shape, a.tobytes()


def _program(cf):
    (program,) = cf.programs()
    return program


def _mlp(dtype, seed=0):
    """A small ReLU MLP step with SGD (W2's shape of program, smaller)."""
    rng = np.random.default_rng(seed)
    init = [(rng.standard_normal((16, 24)) / 4).astype(dtype), np.zeros(24, dtype),
            (rng.standard_normal((24, 8)) / 5).astype(dtype), np.full(8, 0.1, dtype)]
    params = [tg.tensor(a.copy(), requires_grad=True) for a in init]

    def step(x):
        for p in params:
            p.grad = None
        w1, b1, w2, b2 = params
        h = tg.relu(x @ w1 + b1)
        loss = tg.sum((h @ w2 + b2) * 0.5)
        loss.backward()
        with tg.no_grad():
            for p in params:
                p -= 0.01 * p.grad
        return loss

    xs = [rng.standard_normal((6, 16)).astype(dtype) for _ in range(4)]
    return params, step, xs, init


def _closed_form(x, w1, b1, w2):
    """The gradients of sum((relu(x w1 + b1) w2 + b2) * 0.5), by hand."""
    z = x @ w1 + b1
    h = np.maximum(z, 0)
    g_out = np.full((x.shape[0], w2.shape[1]), 0.5, x.dtype)
    gh = (g_out @ w2.T) * (z > 0)
    return x.T @ gh, gh.sum(axis=0), h.T @ g_out, g_out.sum(axis=0)


@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("dtype", FLOATS)
def test_mlp_step_in_place_is_bit_identical_to_eager(dtype, fuse):
    params_e, step_e, xs, init = _mlp(dtype)
    params_c, step_c, _, _ = _mlp(dtype)
    cf = tg.compile(step_c, fuse=fuse)
    for x in xs + xs:
        loss_e = step_e(tg.tensor(x))
        loss_c = cf(tg.tensor(x))
        assert _bits(loss_c.numpy()) == _bits(loss_e.numpy())
        for pe, pc in zip(params_e, params_c):
            assert _bits(pc.numpy()) == _bits(pe.numpy())
            assert _bits(pc.grad.numpy()) == _bits(pe.grad.numpy())
    planned, done = _program(cf).inplace_writes()
    # the bias adds write into the matmul outputs, relu into the bias add's output
    assert planned >= 3
    assert done >= 3 * (len(xs) * 2 - 1)
    # and the gradients are the closed form's (the last step's inputs: weights before it)
    x = xs[-1]
    w1, b1, w2, b2 = (p.numpy() + 0.01 * p.grad.numpy() for p in params_c)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    for p, want in zip(params_c, _closed_form(x, w1, b1, w2)):
        np.testing.assert_allclose(p.grad.numpy(), want, **tol)


def test_a_view_alive_inside_the_function_blocks_the_write():
    # z's last reader is the add, so the plan writes z + 1 into z; but v = z.T, read
    # after the add, is a view of z: writing into z would change v (the result would be
    # 2 * (z + 1) where eager gives z + 1 + z.T).
    def f(x):
        z = x * 2.0
        v = z.T
        h = z + 1.0
        return h + v

    cf = tg.compile(f, fuse=False)
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((5, 5))
        want = x * 2.0 + 1.0 + (x * 2.0).T
        assert _bits(cf(tg.tensor(x)).numpy()) == _bits(f(tg.tensor(x)).numpy())
        np.testing.assert_array_equal(cf(tg.tensor(x)).numpy(), want)
    program = _program(cf)
    add_step = [st for st in program.forward if st.describe() == ("kernel", "add")][0]
    assert add_step.inplace == 0          # planned: only the replay's check refuses it
    assert add_step.inplace_runs == 0


def test_a_returned_view_never_changes():
    def f(x):
        z = x * 2.0
        v = z.T
        return z + 1.0, v

    cf = tg.compile(f, fuse=False)
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((4, 4))
        h, v = cf(tg.tensor(x))
        np.testing.assert_array_equal(v.numpy(), (x * 2.0).T)
        np.testing.assert_array_equal(h.numpy(), x * 2.0 + 1.0)
    planned, done = _program(cf).inplace_writes()
    assert planned == 1 and done == 0


def test_a_returned_intermediate_is_never_written():
    def f(x):
        z = x * 2.0
        return z + 1.0, z

    cf = tg.compile(f, fuse=False)
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal(7)
        h, z = cf(tg.tensor(x))
        np.testing.assert_array_equal(z.numpy(), x * 2.0)
        np.testing.assert_array_equal(h.numpy(), x * 2.0 + 1.0)
    assert _program(cf).inplace_writes() == (0, 0)   # a returned value is never freed


def test_in_place_chain_writes_and_matches_numpy():
    # x * 2 -> + 1 -> sin: each output dies at the next kernel, so two write in place
    def f(x):
        return tg.sin((x * 2.0) + 1.0)

    cf = tg.compile(f, fuse=False)
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)
        out = cf(tg.tensor(x)).numpy()
        assert _bits(out) == _bits(np.sin((x * np.float32(2.0)) + np.float32(1.0)))
        assert _bits(out) == _bits(f(tg.tensor(x)).numpy())
    planned, done = _program(cf).inplace_writes()
    assert planned == 2 and done == 2 * 2     # (the first call records: 2 replays)


def test_the_same_array_twice_and_arguments_are_never_planned():
    def f(x):
        z = x * 3.0
        return z * z + x          # z twice; x is the caller's

    cf = tg.compile(f, fuse=False)
    x = np.random.default_rng(0).standard_normal(6)
    for _ in range(3):
        xt = tg.tensor(x)
        assert _bits(cf(xt).numpy()) == _bits(f(tg.tensor(x)).numpy())
        np.testing.assert_array_equal(xt.numpy(), x)
    program = _program(cf)
    mul2 = [st for st in program.forward if st.describe() == ("kernel", "multiply")][1]
    assert mul2.inplace == -1
