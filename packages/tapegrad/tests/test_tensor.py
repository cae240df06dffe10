import numpy as np
import pytest
import tapegrad as tg


def test_tensor_defaults_to_float64_like_numpy():
    x = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.dtype == np.float64
    assert x.shape == (2, 2) and x.ndim == 2 and x.size == 4
    assert x.device == tg.device("cpu") and x.device == "cpu"
    assert tg.tensor([1, 2]).dtype == np.int64


def test_tensor_keeps_float32_and_copies_its_input():
    a = np.ones((2, 3), np.float32)
    w = tg.tensor(a, requires_grad=True)
    assert w.dtype == np.float32
    a[0, 0] = 7
    assert w.numpy()[0, 0] == 1.0


def test_asarray_shares_memory():
    a = np.zeros(3)
    t = tg.asarray(a)
    a[1] = 4.0
    assert t.numpy()[1] == 4.0
    assert tg.asarray(t) is t


def test_leaf_attributes():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    assert x.is_leaf and x.requires_grad and x.grad is None and x.grad_fn is None
    y = x + 1.0
    assert not y.is_leaf and y.requires_grad and y.grad_fn.name == "add"


def test_integer_and_bool_tensors_cannot_require_grad():
    with pytest.raises(TypeError, match="floating-point.*int64"):
        tg.tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError, match="bool"):
        tg.tensor([True]).requires_grad = True


def test_requires_grad_cannot_be_cleared_on_a_non_leaf():
    y = tg.tensor([1.0], requires_grad=True) + 1.0
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad = False


def test_numpy_conversion():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    arr = x.numpy()
    assert isinstance(arr, np.ndarray) and not arr.flags.writeable
    assert np.asarray(x).tolist() == [1.0, 2.0]
    assert np.asarray(x, dtype=np.float32).dtype == np.float32
    plain = tg.tensor([1.0, 2.0])
    plain.numpy()[0] = 9.0          # no grad involved: shares memory, writable
    assert plain.tolist() == [9.0, 2.0]


def test_item_and_scalar_conversions():
    x = tg.tensor([2.5])
    assert x.item() == 2.5 and float(x) == 2.5 and int(x) == 2 and bool(x)
    with pytest.raises(ValueError, match="one element"):
        tg.tensor([1.0, 2.0]).item()
    with pytest.raises(ValueError, match="ambiguous"):
        bool(tg.tensor([1.0, 2.0]))
    assert len(tg.tensor([[1.0], [2.0]])) == 2
    with pytest.raises(TypeError):
        len(tg.tensor(1.0))


def test_repr_shows_grad_state():
    assert repr(tg.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert "requires_grad=True" in repr(tg.tensor([1.0], requires_grad=True))
    assert "grad_fn=<add>" in repr(tg.tensor([1.0], requires_grad=True) + 1)
    assert "dtype=float32" in repr(tg.tensor([1.0], dtype=np.float32))


def test_creation_functions():
    assert tg.zeros((2, 3)).numpy().sum() == 0 and tg.zeros(2).shape == (2,)
    assert tg.ones((2,), dtype=np.float32).dtype == np.float32
    assert tg.full((2,), 7.0).tolist() == [7.0, 7.0]
    assert tg.arange(4).tolist() == [0, 1, 2, 3]
    assert tg.linspace(0, 1, 3).tolist() == [0.0, 0.5, 1.0]
    assert tg.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    z = tg.zeros_like(tg.ones((2, 2), requires_grad=True))
    assert z.tolist() == [[0.0, 0.0], [0.0, 0.0]] and not z.requires_grad
    assert tg.full_like(tg.ones(2), 3.0).tolist() == [3.0, 3.0]


def test_tensor_rejects_non_numeric_data():
    with pytest.raises(TypeError, match="unsupported"):
        tg.tensor(["a", "b"])


def test_tensors_are_hashable_by_identity():
    a, b = tg.tensor([1.0]), tg.tensor([1.0])
    assert len({a, b}) == 2 and {a: 1}[a] == 1


def test_python_scalars_and_ndarrays_are_accepted_as_inputs():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = 1.0 + x + np.array([10.0, 20.0])
    assert y.tolist() == [12.0, 23.0]
    y.backward(tg.ones(2))
    assert x.grad.tolist() == [1.0, 1.0]


def test_numpy_ufunc_dispatches_to_registered_ops():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = np.add(x, 1.0)
    assert isinstance(y, tg.Tensor) and y.requires_grad
    z = np.array([1.0, 1.0]) + x        # ndarray on the left defers to the tensor
    assert isinstance(z, tg.Tensor)


def test_numpy_fallback_refuses_to_drop_a_gradient():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="silently drop"):
        np.nextafter(x, 3.0)             # a ufunc with no tapegrad op
    assert np.array_equal(np.nextafter(x.detach(), 3.0), np.nextafter([1.0, 2.0], 3.0))


def test_numpy_queries_of_a_tensor_that_requires_grad_work():
    # Shapes, counts, indexes and booleans carry no gradient, so nothing is dropped.
    x = tg.tensor([[1.0, 5.0, 2.0]], requires_grad=True)
    assert np.shape(x) == (1, 3) and np.ndim(x) == 2 and np.size(x) == 3
    assert np.argmax(x) == 1 and np.all(np.isfinite(x)) and np.allclose(x, [[1.0, 5.0, 2.0]])


def test_numpy_out_into_a_tensor_bumps_its_version(times):
    # np.add(..., out=t) wrote into t's array behind its version counter: a node that had
    # saved t then backpropagated t's new value silently (x.grad [2, 2] instead of an error).
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    t = tg.tensor([0.0, 0.0])
    w = times(t, x)                      # saves t
    r = np.add(np.ones(2), np.ones(2), out=t)
    assert r is t and t.tolist() == [2.0, 2.0] and t._version == 1
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        w.backward(tg.ones(2))


def test_numpy_out_into_a_leaf_that_requires_grad_is_refused():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        np.add(np.ones(2), np.ones(2), out=x)
    assert x.tolist() == [1.0, 2.0]


def test_tensors_are_not_pickled():
    import pickle
    with pytest.raises(TypeError, match="tg.save"):
        pickle.dumps(tg.tensor([1.0]))


def test_deepcopy_copies_a_leaf_and_its_grad():
    import copy
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    (x + x).backward(tg.ones(2))
    y = copy.deepcopy(x)
    assert y is not x and y.requires_grad and y.tolist() == [1.0, 2.0]
    assert y.grad.tolist() == [2.0, 2.0]
    with tg.no_grad():
        y.add_(1.0)
    assert x.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="leaf"):
        copy.deepcopy(x + 1.0)


@pytest.mark.parametrize("args", [([1.0, 2.0],), (2, 3), (np.ones(2),), ()])
def test_calling_the_tensor_class_refuses_and_points_to_tg_tensor(args):
    # torch.Tensor(2, 3) is a shape and torch.Tensor([1., 2.]) data: neither is guessed;
    # the class used to return a tensor with no data that failed later with NoneType errors.
    with pytest.raises(TypeError, match=r"tg\.Tensor\(\.\.\.\) does not build a tensor.*tg\.tensor\(data\)"):
        tg.Tensor(*args)
    assert isinstance(tg.tensor([1.0, 2.0]), tg.Tensor)
