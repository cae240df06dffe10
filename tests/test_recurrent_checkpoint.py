"""tg.checkpoint (tapegrad-checkpoint) around tg.nn's recurrent layers (tapegrad-nn): the
same gradients as without it. Here, not in tapegrad-nn's tests: it needs both plugins."""

import numpy as np
import tapegrad as tg

RNG = np.random.default_rng(0)


def test_checkpointed_equals_plain():
    m = tg.nn.GRU(2, 3)
    x = tg.tensor(RNG.standard_normal((4, 2, 2)), requires_grad=True)
    (m(x)[0] ** 2).sum().backward()
    gx, gw = x.grad.numpy().copy(), m.weight_ih_l0.grad.numpy().copy()
    x.grad = None
    m.zero_grad()
    (tg.checkpoint(lambda x: m(x)[0], x) ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-12)
    np.testing.assert_allclose(m.weight_ih_l0.grad.numpy(), gw, rtol=1e-12)


def test_checkpointed_lstm_second_order():
    m = tg.nn.LSTM(2, 3)
    x = tg.tensor(RNG.standard_normal((3, 2, 2)), requires_grad=True)
    assert tg.gradgradcheck(lambda x: (tg.checkpoint(lambda x: m(x)[0], x) ** 2).sum(), (x,))
