"""``tg.grad``: the gradients of outputs with respect to chosen inputs, returned rather
than accumulated into ``.grad`` (``torch.autograd.grad``)."""

from __future__ import annotations

import tapegrad as tg
from tapegrad import _engine


def _as_tuple(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False, *, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs`, as a tuple (one per input).

    Like ``torch.autograd.grad``: nothing is written to any ``.grad``. `outputs` and
    `inputs` are a tensor or a sequence of tensors; `grad_outputs` holds one gradient per
    output (None, or omitted, for an output with one element: ones). The gradients of
    several outputs are summed. With ``create_graph=True`` the returned gradients are
    tensors with a graph of their own, so they can be differentiated again;
    `retain_graph` defaults to `create_graph`. An input that no output depends on is an
    error unless ``allow_unused=True`` (its entry is then None) or
    ``materialize_grads=True`` (its entry is zeros).

    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> y = (x ** 3).sum()
    >>> (g,) = tg.grad(y, x, create_graph=True)       # 3 x^2, differentiable again
    >>> g
    tensor([ 3., 12.], grad_fn=<multiply>)
    >>> tg.grad(g.sum(), x)                           # 6 x
    (tensor([ 6., 12.]),)
    >>> x.grad is None
    True
    """
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if not outputs:
        raise ValueError("grad: outputs is empty; pass the tensor(s) to differentiate")
    if not inputs:
        raise ValueError("grad: inputs is empty; pass the tensor(s) to differentiate with "
                         "respect to")
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    else:
        grad_outputs = _as_tuple(grad_outputs)
        if len(grad_outputs) != len(outputs):
            raise ValueError(f"grad: got {len(grad_outputs)} grad_outputs for {len(outputs)} "
                             f"outputs (pass one per output, None for an implied one)")
    for i, out in enumerate(outputs):
        if not isinstance(out, _engine.TensorBase):
            raise TypeError(f"grad: output {i} must be a tensor, not {type(out).__name__}")
        if not out.requires_grad:
            raise RuntimeError(
                f"grad: output {i} (shape {out.shape}) does not require grad: nothing in its "
                f"computation requires grad (make an input with requires_grad=True, and do "
                f"not compute it under tg.no_grad())")
    grads = _engine.run_backward(outputs, grad_outputs, retain_graph, bool(create_graph),
                                 inputs, bool(allow_unused or materialize_grads))
    if materialize_grads:
        grads = tuple(tg.zeros(x.shape, x.dtype, x.device) if g is None else g
                      for g, x in zip(grads, inputs))
    return grads
