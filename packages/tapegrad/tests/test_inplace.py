import pytest
import tapegrad as tg


def test_inplace_on_leaf_that_requires_grad_raises():
    x = tg.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="add_.*leaf.*no_grad"):
        x.add_(1.0)
    with pytest.raises(RuntimeError, match="leaf"):
        x += 1.0


def test_inplace_under_no_grad_updates_data_and_version():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    v = x._version
    with tg.no_grad():
        x.add_(1.0)
        x += 0.5
    assert x._version == v + 2 and x.is_leaf and x.requires_grad
    assert x.tolist() == [2.5, 3.5]


def test_inplace_on_non_leaf_is_recorded(times):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = times(x, 2.0)
    y.add_(x)                 # y = 2x + x
    assert y.grad_fn.name == "add"
    y.backward(tg.ones(2))
    assert x.grad.tolist() == [3.0, 3.0]


def test_inplace_keeps_aliases_in_sync():
    x = tg.tensor([1.0, 2.0])
    alias = x.numpy()
    x.add_(1.0)
    assert alias.tolist() == [2.0, 3.0]


def test_modifying_a_saved_value_raises_naming_op_and_versions(times):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    a = x + 0.0
    b = times(a, a)           # saves a at version 0
    a.add_(1.0)               # a is now version 1
    with pytest.raises(RuntimeError, match=r"input 0 of 'times'.*version 1.*version 0"):
        b.backward(tg.ones(2))


def test_modifying_a_value_the_rule_does_not_read_is_fine():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    a = x + 0.0
    b = a + 3.0               # add's rule reads neither input
    a.add_(1.0)
    b.backward(tg.ones(2))
    assert x.grad.tolist() == [1.0, 1.0]


def test_modifying_through_detach_is_detected(times):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    a = x + 0.0
    b = times(a, a)
    a.detach().add_(1.0)      # shares storage and the version counter
    with pytest.raises(RuntimeError, match="in-place"):
        b.backward(tg.ones(2))


def test_inplace_dtype_that_cannot_be_stored_raises():
    x = tg.tensor([1, 2])
    with pytest.raises(TypeError, match="add_.*float64.*int64"):
        x.add_(1.5)


def test_inplace_shape_that_cannot_be_stored_raises():
    x = tg.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match=r"add_.*\(2, 2\)"):
        x.add_(tg.ones((2, 2)))


def test_zero_():
    x = tg.tensor([1.0, 2.0])
    assert x.zero_().tolist() == [0.0, 0.0]
    leaf = tg.tensor([1.0], requires_grad=True)
    with tg.no_grad():
        leaf.grad = tg.ones(1)
        leaf.grad.zero_()
    assert leaf.grad.item() == 0.0


def test_setitem_without_grad_writes_in_place():
    x = tg.zeros((2, 3))
    v = x._version
    x[0, 1] = 5.0
    x[1] = tg.tensor([1.0, 2.0, 3.0])
    assert x.tolist() == [[0.0, 5.0, 0.0], [1.0, 2.0, 3.0]]
    assert x._version == v + 2
    with pytest.raises(ValueError, match="setitem"):
        x[0] = tg.ones(4)


def test_setitem_on_leaf_that_requires_grad_raises():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        x[0] = 1.0


def test_inplace_error_names_the_op_that_saved_and_the_op_that_modified(times):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    a = x + 0.0
    b = times(a, a)
    a.add_(1.0)
    with pytest.raises(RuntimeError, match=r"input 0 of 'times'.*'times' saved it at version 0, "
                                           r"and 'add_' modified it in place last"):
        b.backward(tg.ones(2))


def test_anomaly_mode_shows_where_the_value_was_saved_and_where_it_was_modified(times):
    with tg.detect_anomaly():
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        a = x + 0.0
        b = times(a, a)   # the line that saved a
        a.add_(1.0)       # the line that modified a
    with pytest.raises(RuntimeError) as info:
        b.backward(tg.ones(2))
    message = str(info.value)
    assert "'add_' modified it in place last" in message
    assert "# the line that saved a" in message and "# the line that modified a" in message
