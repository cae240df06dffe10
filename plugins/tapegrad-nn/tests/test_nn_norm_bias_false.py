"""BatchNorm*/GroupNorm/InstanceNorm* take torch's keyword-only bias= (a learnable scale
without a shift): no bias parameter, and the output equals the affine layer's with its
bias at zero (an independent reference: the same layer with bias=True)."""

import numpy as np
import pytest
import tapegrad as tg

X = np.random.default_rng(0).standard_normal((4, 6, 5, 5))


@pytest.mark.parametrize("make, shape", [
    (lambda **kw: tg.nn.BatchNorm2d(6, **kw), (4, 6, 5, 5)),
    (lambda **kw: tg.nn.BatchNorm1d(6, **kw), (4, 6, 5)),
    (lambda **kw: tg.nn.GroupNorm(3, 6, **kw), (4, 6, 5, 5)),
    (lambda **kw: tg.nn.InstanceNorm2d(6, affine=True, **kw), (4, 6, 5, 5)),
])
def test_bias_false_has_no_bias_and_equals_a_zero_bias(make, shape):
    x = X.reshape(-1)[:int(np.prod(shape))].reshape(shape)
    without, with_ = make(bias=False), make()
    assert without.bias is None and "bias" not in dict(without.named_parameters())
    with tg.no_grad():
        w = np.linspace(0.5, 1.5, 6)
        without.weight[...] = w
        with_.weight[...] = w
    xt = tg.tensor(x, requires_grad=True)
    out = without(xt)
    np.testing.assert_allclose(out.numpy(), with_(tg.tensor(x)).numpy(), rtol=1e-12)
    out.sum().backward()
    assert without.weight.grad is not None and xt.grad is not None


@pytest.mark.needs_torch
def test_bias_false_matches_torch():
    import torch
    t = torch.nn.BatchNorm2d(6, bias=False).double()
    m = tg.nn.BatchNorm2d(6, bias=False)
    m.load_state_dict({k: v.numpy() for k, v in t.state_dict().items()})
    np.testing.assert_allclose(m(tg.tensor(X)).numpy(),
                               t(torch.tensor(X)).detach().numpy(), rtol=1e-10)
