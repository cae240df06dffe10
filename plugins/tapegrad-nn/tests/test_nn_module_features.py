"""Module features: in-place dtype conversion, forward hooks, traversal, modes."""

import copy

import numpy as np
import pytest
import tapegrad as tg

nn = tg.nn


def _net():
    tg.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Sequential(nn.Linear(4, 2), nn.Dropout(0.1)))


def test_float_after_building_the_optimizer_still_trains_the_model():
    # The regression of issue 15: to(dtype) used to replace the parameters, so the
    # optimizer kept stepping the old float64 tensors and the model never changed.
    model = _net()
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    before = [p for p in model.parameters()]
    model.float()
    after = list(model.parameters())
    assert all(a is b for a, b in zip(before, after))
    assert all(p.dtype == np.float32 and p.is_leaf and p.requires_grad for p in after)
    held = [p for group in opt.param_groups for p in group["params"]]
    assert all(any(h is p for h in held) for p in after)
    values = [p.numpy().copy() for p in after]
    x = tg.random.randn(5, 3, dtype=np.float32)
    model.eval()
    loss = (model(x) ** 2).sum()
    assert loss.dtype == np.float32
    loss.backward()
    opt.step()
    for p, v in zip(model.parameters(), values):
        assert p.dtype == np.float32
        np.testing.assert_allclose(p.numpy(), v - 0.1 * p.grad.numpy(), rtol=1e-6)


def test_to_converts_the_gradient_and_keeps_frozen_flags_and_buffers_are_replaced():
    lin = nn.Linear(2, 2)
    lin.register_buffer("steps", tg.zeros(3))
    lin.bias.requires_grad = False
    lin(tg.ones((1, 2))).sum().backward()
    w = lin.weight
    lin.double().to(tg.float32)
    assert lin.weight is w and w.grad.dtype == np.float32 and not lin.bias.requires_grad
    assert lin.steps.dtype == np.float32
    np.testing.assert_allclose(w.grad.numpy(), [[1, 1], [1, 1]])


def test_to_takes_a_tensor_and_adam_state_follows_the_same_parameters():
    lin = nn.Linear(2, 2)
    w = lin.weight
    assert lin.to(tg.zeros(1, dtype=np.float32)).weight is w and w.dtype == np.float32
    with pytest.raises(TypeError, match="Module.to: dtype must be a floating-point type"):
        lin.to(tg.zeros(1, dtype=np.int64))
    lin.double()
    opt = tg.optim.Adam(lin.parameters(), lr=0.01)
    lin.float()
    before = w.numpy().copy()
    lin(tg.ones((3, 2), dtype=np.float32)).sum().backward()
    opt.step()
    assert w.dtype == np.float32 and not np.array_equal(w.numpy(), before)
    m = nn.Module()
    m.register_module("head", lin)
    assert m.head is lin


def test_to_bumps_the_version_so_an_old_graph_cannot_use_the_new_data():
    lin = nn.Linear(2, 2)
    y = (lin(tg.ones((1, 2))) ** 2).sum()
    lin.float()
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


def test_forward_pre_hook_and_forward_hook_see_and_replace_values():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: calls.append(("pre", m)) or (args[0] * 2,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(("post", args[0].tolist())))
    x = tg.ones((1, 2))
    out = lin(x)
    np.testing.assert_allclose(out.numpy(), (2 * x.numpy()) @ lin.weight.numpy().T + lin.bias.numpy())
    assert calls == [("pre", lin), ("post", [[2.0, 2.0]])]
    h3 = lin.register_forward_hook(lambda m, args, out: out * 0)
    assert (lin(x).numpy() == 0).all()
    for h in (h1, h2, h3):
        h.remove()
    calls.clear()
    np.testing.assert_allclose(lin(x).numpy(), x.numpy() @ lin.weight.numpy().T + lin.bias.numpy())
    assert calls == []


def test_hooks_with_kwargs_prepend_and_duplicates():
    class Scale(nn.Module):
        def forward(self, x, factor=1.0):
            return x * factor

    m, order = Scale(), []
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"factor": 3.0}), with_kwargs=True)
    m.register_forward_hook(lambda mod, args, kwargs, out: order.append(("b", kwargs["factor"])),
                            with_kwargs=True)
    m.register_forward_hook(lambda mod, args, out: order.append("a"), prepend=True)
    assert m(tg.ones(2)).tolist() == [3.0, 3.0]
    assert order == ["a", ("b", 3.0)]
    f = lambda mod, args, out: order.append("dup")   # noqa: E731
    h = m.register_forward_hook(f)
    m.register_forward_hook(f)
    h.remove()
    order.clear()
    m(tg.ones(2))
    assert order.count("dup") == 1
    with pytest.raises(TypeError, match="callable"):
        m.register_forward_hook(3)


def test_a_hook_change_makes_tg_compile_record_again():
    lin = nn.Linear(2, 2)
    step = tg.compile(lambda x: lin(x))
    x = tg.ones((1, 2))
    base = step(x).numpy().copy()
    h = lin.register_forward_hook(lambda m, args, out: out * 0)
    assert (step(x).numpy() == 0).all()
    h.remove()
    np.testing.assert_allclose(step(x).numpy(), base)


def test_deepcopy_keeps_hooks_on_the_copy():
    lin = nn.Linear(2, 2)
    lin.register_forward_hook(lambda m, args, out: out * 0)
    twin = copy.deepcopy(lin)
    assert (twin(tg.ones((1, 2))).numpy() == 0).all()


def test_apply_named_modules_train_eval_requires_grad_and_zero_grad():
    net = _net()
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "Tanh", "Linear", "Dropout", "Sequential", "Sequential"]
    assert [n for n, _ in net.named_modules()] == ["", "0", "1", "2", "2.0", "2.1"]
    assert [type(c).__name__ for c in net.children()] == ["Linear", "Tanh", "Sequential"]
    net.eval()
    assert all(not m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    net.requires_grad_()
    net(tg.ones((1, 3))).sum().backward()
    net.zero_grad(set_to_none=False)
    assert all((p.grad.numpy() == 0).all() for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_apply_with_init_reinitialises_every_linear():
    net = _net()
    net.apply(lambda m: nn.init.zeros_(m.weight) if isinstance(m, nn.Linear) else None)
    assert all((m.weight.numpy() == 0).all() for m in net.modules() if isinstance(m, nn.Linear))


def test_non_persistent_buffers_are_not_saved():
    m = nn.Module()
    m.register_buffer("a", tg.zeros(2))
    m.register_buffer("b", tg.ones(2), persistent=False)
    assert list(m.state_dict()) == ["a"] and len(list(m.buffers())) == 2


def test_parameter_list_registers_converts_and_saves():
    ps = nn.ParameterList([tg.zeros(2), nn.Parameter(tg.ones(3))])
    ps.append(tg.ones((2, 2)))
    assert len(ps) == 3 and all(p.requires_grad and p.is_leaf for p in ps)
    assert [n for n, _ in ps.named_parameters()] == ["0", "1", "2"]
    assert list(ps.state_dict()) == ["0", "1", "2"] and ps[-1].shape == (2, 2)
    assert [p.shape for p in ps[1:]] == [(3,), (2, 2)]

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.ws = nn.ParameterList([tg.ones(2), tg.ones(2)])

        def forward(self, x):
            return sum(w * x for w in self.ws)

    m = M()
    m(tg.ones(2)).sum().backward()
    assert [n for n, _ in m.named_parameters()] == ["ws.0", "ws.1"]
    assert all(p.grad.tolist() == [1.0, 1.0] for p in m.parameters())
    with pytest.raises(TypeError, match="not a tensor"):
        ps.append(3.0)
    with pytest.raises(IndexError):
        ps[5]


def test_parameter_dict_and_module_dict_behave_like_dicts():
    pd = nn.ParameterDict({"a": tg.zeros(2)})
    pd["b"] = tg.ones(1)
    pd.update([("c", tg.ones(3))])
    assert list(pd) == ["a", "b", "c"] and "b" in pd and len(pd) == 3
    assert [n for n, _ in pd.named_parameters()] == ["a", "b", "c"]
    assert pd.pop("b").shape == (1,) and pd.keys() == ["a", "c"]
    with pytest.raises(KeyError):
        pd["zz"]
    md = nn.ModuleDict({"enc": nn.Linear(2, 3)})
    md["dec"] = nn.Linear(3, 2)
    assert [n for n, _ in md.named_parameters()] == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]
    assert md["dec"](md["enc"](tg.ones((1, 2)))).shape == (1, 2)
    del md["enc"]
    assert md.keys() == ["dec"] and isinstance(md.values()[0], nn.Linear)
    with pytest.raises(TypeError, match="not a tg.nn.Module"):
        md["x"] = 3
    with pytest.raises(KeyError, match="'.'"):
        md["a.b"] = nn.ReLU()


def test_unflatten_inverts_flatten_and_checks_sizes():
    x = tg.random.randn(2, 12, 3)
    y = nn.Unflatten(1, (3, -1))(x)
    assert y.shape == (2, 3, 4, 3)
    np.testing.assert_array_equal(nn.Flatten(1, 2)(y).numpy(), x.numpy())
    assert nn.Unflatten(-1, (1, 3))(x).shape == (2, 12, 1, 3)
    with pytest.raises(ValueError, match=r"Unflatten: unflattened_size \(5, 2\) does not match dimension 1 \(size 12\)"):
        nn.Unflatten(1, (5, 2))(x)


def test_bilinear_matches_numpy_and_its_gradients_finite_differences():
    tg.manual_seed(2)
    layer = nn.Bilinear(3, 4, 2)
    bound = 1 / np.sqrt(3)
    assert layer.weight.shape == (2, 3, 4) and layer.bias.shape == (2,)
    assert np.abs(layer.weight.numpy()).max() <= bound and np.abs(layer.bias.numpy()).max() <= bound
    x1, x2 = tg.random.randn(5, 3), tg.random.randn(5, 4)
    want = np.einsum("bi,oij,bj->bo", x1.numpy(), layer.weight.numpy(), x2.numpy()) + layer.bias.numpy()
    np.testing.assert_allclose(layer(x1, x2).numpy(), want, rtol=1e-12)
    w, b = layer.weight.detach(), layer.bias.detach()
    assert tg.gradcheck(lambda a, c, ww: nn.functional.bilinear(a, c, ww, b),
                        (x1.detach().requires_grad_(), x2.detach().requires_grad_(), w.requires_grad_()))
    with pytest.raises(ValueError, match=r"Bilinear\(in1_features=3.*expected inputs"):
        layer(tg.ones((5, 4)), x2)


@pytest.mark.needs_torch
def test_bilinear_and_in_place_float_match_torch():
    torch = pytest.importorskip("torch")
    t = torch.nn.Bilinear(3, 4, 2).double()
    layer = nn.Bilinear(3, 4, 2)
    layer.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    a, b = np.random.default_rng(0).normal(size=(5, 3)), np.random.default_rng(1).normal(size=(5, 4))
    np.testing.assert_allclose(layer(tg.tensor(a), tg.tensor(b)).numpy(),
                               t(torch.tensor(a), torch.tensor(b)).detach().numpy(), rtol=1e-12)
    w = t.weight
    assert t.float().weight is w and layer.float().weight.dtype == np.float32
