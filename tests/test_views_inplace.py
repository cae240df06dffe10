"""A view of a base that is then modified in place by a recorded op (issue 13, item 1).

Expected values are worked out by hand (PyTorch gives the same: it rebases the view's
graph onto the base's new one). See Note: [views of a base modified in place].
"""

import numpy as np
import pytest
import tapegrad as tg


def _x():
    return tg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)


def test_slice_of_a_base_multiplied_in_place_differentiates_the_new_value():
    x = _x()
    a = x * 2
    v = a[0:2]
    a.mul_(x)                        # v now holds (2 x * x)[0:2]
    v.sum().backward()
    assert x.grad.tolist() == [4.0, 8.0, 0.0, 0.0]     # d(2 x^2)/dx = 4x


def test_setitem_into_the_base_reaches_a_view_of_it():
    x, w = _x(), tg.tensor([5.0, 6.0], requires_grad=True)
    a = x * 2
    v = a[0:2]
    a[0] = w[0]
    v.sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 0.0, 0.0]
    assert w.grad.tolist() == [1.0, 0.0]


def test_view_of_a_buffer_that_gets_a_differentiable_value_requires_grad():
    w = tg.tensor([5.0, 6.0], requires_grad=True)
    buf = tg.zeros(4)
    v = buf.reshape(2, 2)
    buf[0:2] = w
    assert v.requires_grad and not v.is_leaf and v.grad_fn is not None
    (v * tg.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert w.grad.tolist() == [1.0, 2.0]


def test_transposed_view_of_a_base_scaled_in_place():
    x = tg.tensor(np.arange(1.0, 7.0).reshape(2, 3), requires_grad=True)
    a = x * 1
    t = a.T
    a.mul_(3)
    c = np.arange(6.0).reshape(3, 2)
    (t * c).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 3 * c.T)


def test_stale_view_as_the_root_of_backward():
    x = _x()
    a = x * 2
    v = a[1:3]
    a.mul_(x)
    v.backward(tg.ones(2))
    assert x.grad.tolist() == [0.0, 8.0, 12.0, 0.0]


def test_view_of_a_view_is_rebased_through_its_parent():
    x = _x()
    a = x * 1
    v = a.reshape(2, 2)[1]           # a[2:4], through a reshape
    a.mul_(x)
    v.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 6.0, 8.0]


def test_hooks_and_retain_grad_follow_a_rebased_view():
    x = _x()
    a = x * 2
    v = a[0:2]
    seen = []
    v.register_hook(lambda g: seen.append(g.tolist()))
    v.retain_grad()
    a.mul_(x)
    (v * 3).sum().backward()
    assert seen == [[3.0, 3.0]]
    assert v.grad.tolist() == [3.0, 3.0]
    assert x.grad.tolist() == [12.0, 24.0, 0.0, 0.0]


def test_writes_under_no_grad_do_not_change_a_views_graph():
    x = _x()
    a = x * 2
    v = a[0:2]
    with tg.no_grad():
        a.mul_(10.0)                 # values change, the graph does not (as in PyTorch)
    assert v.tolist() == [20.0, 40.0]
    v.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 0.0, 0.0]


def test_a_detached_alias_stays_out_of_the_graph():
    x = _x()
    a = x * 2
    d = a.detach()[0:2]
    a.mul_(x)
    assert d.tolist() == [2.0, 8.0] and not d.requires_grad


def test_a_view_made_under_no_grad_of_a_base_given_a_new_graph_is_refused():
    x = _x()
    a = x * 2
    with tg.no_grad():
        v = a[0:2]
    a.mul_(x)
    with pytest.raises(RuntimeError, match="made while grad mode was off.*multiply_"):
        (v * 1).sum()
