"""``tg.optim``: optimizers that update parameters in place from their ``.grad``.

The update rules are PyTorch's (``torch.optim.SGD``, ``Adam``, ``AdamW``), operation for
operation, so a model trained here follows the same trajectory as in PyTorch. Each
optimizer's docstring writes its rule out.

>>> import tapegrad as tg
>>> w = tg.tensor([1.0, -2.0], requires_grad=True)
>>> opt = tg.optim.SGD([w], lr=0.25)
>>> loss = (w * w).sum()
>>> loss.backward()
>>> opt.step()                      # w <- w - lr * dloss/dw = w - 0.25 * 2w
>>> w
tensor([ 0.5, -1. ], requires_grad=True)

Conventions shared by every optimizer here:

- ``params`` is an iterable of tensors, or of dicts ("parameter groups") each with a
  ``"params"`` entry and optional per-group hyper-parameters, as in PyTorch::

      tg.optim.SGD([{"params": body, "lr": 0.01}, {"params": head}], lr=0.1, momentum=0.9)

- every parameter is a floating-point leaf tensor that requires grad, and appears once;
- ``step()`` skips parameters whose ``.grad`` is None, and writes into the parameters'
  own storage under ``tg.no_grad()`` (the version counter is bumped, as for any in-place
  op);
- hyper-parameters are kept as Python scalars: under NumPy's promotion rules (NEP 50) a
  Python float is "weak", so float32 parameters and their state stay float32;
- ``state_dict()`` holds only plain Python values and NumPy arrays (copies), which
  ``tg.save`` can write; ``load_state_dict()`` accepts that back (also with ``"0"``
  string keys and 0-d / 1-d arrays in place of numbers and tuples, as a round trip
  through ``.npz`` may give).

RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam and LBFGS are in
:mod:`tapegrad_nn.optimizers`, the learning-rate schedules in ``tg.optim.lr_scheduler``
(:mod:`tapegrad_nn.lr_scheduler`); all are reachable as ``tg.optim.<name>``.
"""

import math

import numpy as np
import tapegrad as tg
from tapegrad._compile import record_once

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "required"]


class _RequiredParameter:
    """Marks a hyper-parameter with no default: every parameter group must give it."""

    def __repr__(self):
        return "<required parameter>"

    def __reduce__(self):
        return "required"


required = _RequiredParameter()


class Optimizer:
    """Base class of the optimizers: parameter groups, ``zero_grad``, state dicts.

    A subclass passes its hyper-parameters as `defaults`, implements ``step()``, and may
    override ``_check(hyper, where)`` to validate and normalize a dict of
    hyper-parameters (called on `defaults` and on every parameter group), and
    ``_scalar_state`` (the per-parameter state entries that are numbers, not tensors).

    Attributes:
        defaults: the hyper-parameters given to the constructor.
        param_groups: list of dicts, each with ``"params"`` (a list of tensors) and every
            hyper-parameter (group values override `defaults`).
        state: per-parameter state, a dict keyed by the parameter tensor (tensors hash by
            identity), e.g. ``{"step": 3, "exp_avg": <tensor>}``.

    >>> import tapegrad as tg
    >>> a = tg.tensor([1.0], requires_grad=True)
    >>> b = tg.tensor([2.0], requires_grad=True)
    >>> opt = tg.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.01}], lr=0.1)
    >>> [g["lr"] for g in opt.param_groups]
    [0.1, 0.01]
    >>> sd = opt.state_dict()
    >>> sd["param_groups"][1]["params"]
    [1]
    """

    #: per-parameter state entries held as Python numbers (everything else is a tensor
    #: shaped like the parameter)
    _scalar_state = ("step",)

    def __init__(self, params, defaults):
        self.defaults = self._check(dict(defaults), "")
        self.state = {}
        self.param_groups = []
        if isinstance(params, tg.Tensor):
            raise TypeError(
                f"{self._name}: params must be an iterable of tensors or of parameter-group "
                f"dicts, but got a single tensor of shape {params.shape}; pass [tensor]")
        if isinstance(params, (set, frozenset)):
            raise TypeError(
                f"{self._name}: params must be an ordered iterable (list, tuple, generator); "
                f"a set has no stable order, so state_dict() could not match parameters")
        if isinstance(params, dict):
            params = [params]
        try:
            groups = list(params)
        except TypeError:
            raise TypeError(
                f"{self._name}: params must be an iterable of tensors or of parameter-group "
                f"dicts, but got {type(params).__name__}") from None
        if not groups:
            raise ValueError(f"{self._name}: got an empty parameter list (nothing to optimize)")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    @property
    def _name(self):
        return type(self).__name__

    def __repr__(self):
        lines = [f"{self._name} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]!r}")
        lines.append(")")
        return "\n".join(lines)

    # -- parameter groups -----------------------------------------------------------------

    def add_param_group(self, param_group):
        """Add a group: a dict with ``"params"`` (tensors) and optional hyper-parameters.

        Hyper-parameters the group leaves out are taken from ``defaults``.
        """
        index = len(self.param_groups)
        where = f"parameter group {index}: "
        if not isinstance(param_group, dict):
            raise TypeError(
                f"{self._name}: {where}expected a dict with a 'params' entry, got "
                f"{type(param_group).__name__} (do not mix tensors and group dicts in params)")
        if "params" not in param_group:
            raise ValueError(f"{self._name}: {where}the dict has no 'params' entry")
        params = param_group["params"]
        if isinstance(params, tg.Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(
                f"{self._name}: {where}'params' is a set, which has no stable order; "
                f"pass a list")
        else:
            params = list(params)
        if not params:
            raise ValueError(f"{self._name}: {where}got an empty parameter list")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for i, p in enumerate(params):
            self._check_param(p, f"{where}parameter {i}")
            if id(p) in seen:
                raise ValueError(
                    f"{self._name}: {where}parameter {i} (shape {p.shape}) appears more than "
                    f"once in the optimizer's parameters; each must appear once (or its update "
                    f"would be applied twice)")
            seen.add(id(p))
        group = dict(param_group)
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        group = self._check(group, where)
        for key, value in group.items():
            if value is required:
                raise ValueError(
                    f"{self._name}: {where}no value for the required hyper-parameter "
                    f"'{key}' (give it to the optimizer or in the group)")
        group["params"] = params
        self.param_groups.append(group)

    def _check_param(self, p, where):
        if not isinstance(p, tg.Tensor):
            raise TypeError(
                f"{self._name}: {where} is a {type(p).__name__}, not a tapegrad tensor "
                f"(optimizers update tensors made with tg.tensor(..., requires_grad=True))")
        if not p.is_leaf:
            raise ValueError(
                f"{self._name}: {where} (shape {p.shape}) is not a leaf tensor (it was computed "
                f"by {p.grad_fn.name}); only leaves get .grad: optimize the tensors you created")
        if not p.requires_grad:
            raise ValueError(
                f"{self._name}: {where} (shape {p.shape}, dtype {p.dtype}) does not require "
                f"grad, so it would never be updated; create it with requires_grad=True")

    def _check(self, hyper, where):
        """Validate and normalize the hyper-parameters in `hyper` (a dict); return it."""
        return hyper

    def _fail(self, where, message):
        raise ValueError(f"{self._name}: {where}{message}")

    def _float(self, hyper, key, where, low=0.0, high=None, high_open=False):
        """hyper[key] as a Python float in [low, high] (or [low, high)); `required` passes."""
        value = hyper[key]
        if value is required:
            return
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"{self._name}: {where}{key} must be a real number, got {value!r}") from None
        if math.isnan(value) or value < low or (high is not None and (
                value >= high if high_open else value > high)):
            bound = f"[{low}, {high})" if high_open else (
                f"[{low}, {high}]" if high is not None else f">= {low}")
            self._fail(where, f"invalid {key} {value} (must be {'in ' if high is not None else ''}"
                              f"{bound})")
        hyper[key] = value

    def _betas(self, hyper, where):
        """hyper["betas"] as a pair of Python floats, each in [0, 1)."""
        betas = hyper["betas"]
        if isinstance(betas, np.ndarray):
            betas = betas.tolist()
        try:
            beta1, beta2 = betas
            betas = (float(beta1), float(beta2))
        except (TypeError, ValueError):
            raise TypeError(
                f"{self._name}: {where}betas must be a pair of numbers (beta1, beta2), "
                f"got {hyper['betas']!r}") from None
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                self._fail(where, f"invalid beta{i + 1} {beta} in betas (each must be in "
                                  f"[0, 1))")
        hyper["betas"] = betas

    def _bool(self, hyper, key):
        value = hyper[key]
        hyper[key] = bool(value.item() if isinstance(value, np.ndarray) else value)

    # -- gradients ----------------------------------------------------------------------

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of every parameter.

        With ``set_to_none=True`` (the default, as in PyTorch) ``.grad`` becomes None, which
        frees it and lets ``step()`` skip parameters that get no new gradient. With
        ``set_to_none=False`` existing gradients are filled with zeros in place (and cut
        from any graph ``create_graph=True`` gave them).

        >>> import tapegrad as tg
        >>> w = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> opt = tg.optim.SGD([w], lr=0.1)
        >>> (w * 3.0).sum().backward()
        >>> opt.zero_grad(set_to_none=False); w.grad
        tensor([0., 0.])
        >>> opt.zero_grad(); w.grad is None
        True
        """
        tg.compile_guard(self._compile_key)    # it branches on which .grad are None
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                g = p.grad
                with tg.no_grad():
                    if g.grad_fn is not None or g.requires_grad:
                        g.detach_()
                    g.zero_()

    def step(self, closure=None):
        """Update every parameter that has a ``.grad``; return ``closure()``'s value.

        `closure`, if given, is called first (with grad mode on): it should zero the
        gradients, recompute the loss, call ``backward()`` and return the loss.
        """
        raise NotImplementedError(f"{self._name}.step() is not implemented")

    def _closure_loss(self, closure):
        # Every step() starts here. Under tg.compile the update's kernels depend on the
        # hyperparameters, on which parameters have a gradient and on the Python state
        # (step counts, which buffers exist): a change in any of them records again.
        tg.compile_guard(self._compile_key)
        if closure is None:
            return None
        with tg.enable_grad():
            return closure()

    def _compile_key(self):
        # NOTE: the parameters and state tensors by identity (id(): a recording holds them,
        # so their ids cannot be reused while it lives): load_state_dict puts new state
        # tensors in, which a replay recorded with the old ones would keep updating.
        groups = tuple(tuple((k, repr(v)) for k, v in sorted(g.items()) if k != "params")
                       for g in self.param_groups)
        params = tuple((id(p), p.grad is None,
                        tuple((k, v if isinstance(v, (int, float, bool)) else
                               (type(v).__name__, id(v)))
                              for k, v in sorted(self.state.get(p, {}).items())))
                       for g in self.param_groups for p in g["params"])
        return groups, params

    def _params_with_grad(self, group):
        for p in group["params"]:
            if p.grad is not None:
                yield p, p.grad

    # -- state dicts --------------------------------------------------------------------

    def state_dict(self):
        """The optimizer's state as plain values: ``{"state": ..., "param_groups": ...}``.

        ``"param_groups"`` is a list of dicts with every hyper-parameter and, under
        ``"params"``, the parameters' indices (counted across groups, in order).
        ``"state"`` maps a parameter's index to its state: numbers (``"step"``) and NumPy
        arrays (copies, in the parameter's dtype). Parameters without state are absent.
        Tensors are not stored, so the dict can be written with ``tg.save`` and loaded
        into an optimizer built over other (e.g. freshly created) parameters.
        """
        index = {}
        groups = []
        for group in self.param_groups:
            ids = []
            for p in group["params"]:
                index[id(p)] = len(index)
                ids.append(index[id(p)])
            saved = {k: v for k, v in group.items() if k != "params"}
            saved["params"] = ids
            groups.append(saved)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state.get(p)
                if not st:
                    continue
                state[index[id(p)]] = {
                    k: (np.array(v.numpy(), copy=True) if isinstance(v, tg.Tensor) else v)
                    for k, v in st.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore state saved by ``state_dict()`` (of an optimizer over as many parameters,
        grouped the same way). Hyper-parameters are taken from `state_dict`; arrays are
        copied into new tensors of each parameter's dtype and device. Nothing changes if
        `state_dict` does not fit (a ValueError says what does not).
        """
        name = self._name
        # NOTE: "state" may be missing: a file writer can drop the empty dict of an
        # optimizer that never stepped.
        if not isinstance(state_dict, dict) or "param_groups" not in state_dict:
            raise ValueError(
                f"{name}.load_state_dict: expected a dict with 'state' and 'param_groups' "
                f"(from state_dict()), got "
                f"{sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__}")
        saved_groups = list(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"{name}.load_state_dict: the state dict has {len(saved_groups)} parameter "
                f"groups, this optimizer has {len(self.param_groups)}")
        id_map = {}
        new_groups = []
        for gi, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            ids = [int(i) for i in np.asarray(saved["params"]).reshape(-1)]
            if len(ids) != len(group["params"]):
                raise ValueError(
                    f"{name}.load_state_dict: parameter group {gi} has {len(ids)} parameters in "
                    f"the state dict but {len(group['params'])} in this optimizer")
            for i, p in zip(ids, group["params"]):
                id_map[i] = p
            hyper = {k: _plain(v) for k, v in saved.items() if k != "params"}
            for key, value in group.items():        # keys the saved group lacks: keep
                hyper.setdefault(key, value)
            for key, value in self.defaults.items():
                if isinstance(value, tuple) and isinstance(hyper.get(key), list):
                    hyper[key] = tuple(hyper[key])
            hyper = self._check(hyper, f"load_state_dict: parameter group {gi}: ")
            hyper["params"] = group["params"]
            new_groups.append(hyper)
        new_state = {}
        for key, st in dict(state_dict.get("state", {})).items():
            try:
                p = id_map[int(key)]
            except (KeyError, ValueError):
                raise ValueError(
                    f"{name}.load_state_dict: the state dict has state for parameter {key!r}, "
                    f"which no parameter group lists") from None
            new_state[p] = self._load_param_state(p, int(key), st)
        self.param_groups = new_groups
        self.state = new_state

    def _load_param_state(self, p, key, st):
        out = {}
        for k, v in dict(st).items():
            if k in self._scalar_state:
                out[k] = _plain(v)
                continue
            arr = np.asarray(v)
            if arr.shape != p.shape:
                raise ValueError(
                    f"{self._name}.load_state_dict: state '{k}' of parameter {key} has shape "
                    f"{arr.shape}, but the parameter has shape {p.shape}")
            out[k] = tg.tensor(arr, dtype=p.dtype, device=p.device)
        return out


def _plain(value):
    """A value read back from a file as the Python value it was: 0-d arrays become
    numbers, 1-d arrays lists."""
    if isinstance(value, np.ndarray):
        return value.item() if value.ndim == 0 else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _step_count(step, capturable, p):
    """Adam's step count in the form `capturable` asks for: a 0-d float64 tensor on p's
    device, or an int (either may come from a state dict or from before a switch)."""
    if capturable:
        if isinstance(step, tg.Tensor):
            return step
        return tg.tensor(float(step), dtype=np.float64, device=p.device)
    return int(step.item()) if isinstance(step, tg.Tensor) else int(step)


def _state_created():
    # NOTE: under tg.compile, a replay of this step would not put the new state tensors
    # into self.state (Python state), and the step would replay again whenever the state
    # is empty again (load_state_dict of an early checkpoint, state.clear()): such a
    # recording is not kept, the next call records with the state in place.
    record_once("the optimizer created its per-parameter state")


def _copy(t):
    """A new tensor equal to `t`, on its device (run under no_grad)."""
    out = tg.zeros_like(t)
    out.add_(t)
    return out


class SGD(Optimizer):
    r"""Stochastic gradient descent, optionally with momentum, Nesterov momentum and L2
    weight decay: PyTorch's ``torch.optim.SGD``.

    For each parameter ``p`` with gradient ``g`` at step ``t`` (1, 2, ...)::

        if weight_decay != 0:  g = g + weight_decay * p
        if momentum != 0:
            b = g                                      if t == 1
            b = momentum * b + (1 - dampening) * g     otherwise
            g = g + momentum * b    if nesterov  else  b
        p = p - lr * g

    The momentum buffer ``b`` is the state ``"momentum_buffer"``; a parameter's ``t``
    counts only the steps in which it had a gradient.

    Args:
        params: tensors, or parameter-group dicts (see the module doc).
        lr: learning rate (>= 0); required, here or in every group.
        momentum: momentum factor (>= 0).
        dampening: dampening of the momentum (>= 0).
        weight_decay: L2 penalty (>= 0), added to the gradient.
        nesterov: Nesterov momentum (needs momentum > 0 and dampening == 0).

    >>> import tapegrad as tg
    >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = tg.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...     opt.zero_grad()
    ...     loss = (w * w).sum()
    ...     loss.backward()
    ...     opt.step()
    >>> w
    tensor([ 0.46, -0.92], requires_grad=True)
    >>> opt.state[w]["momentum_buffer"]
    tensor([ 3.4, -6.8])
    """

    def __init__(self, params, lr=required, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults)

    def _check(self, hyper, where):
        for key in ("lr", "momentum", "dampening", "weight_decay"):
            self._float(hyper, key, where)
        self._bool(hyper, "nesterov")
        if hyper["nesterov"] and (hyper["momentum"] <= 0 or hyper["dampening"] != 0):
            self._fail(where, f"nesterov=True needs momentum > 0 and dampening == 0 (got "
                              f"momentum={hyper['momentum']}, dampening={hyper['dampening']})")
        return hyper

    def step(self, closure=None):
        """Apply one SGD update to every parameter that has a gradient (see the class doc)."""
        loss = self._closure_loss(closure)
        with tg.no_grad():
            for group in self.param_groups:
                lr = float(group["lr"])
                momentum = float(group["momentum"])
                dampening = float(group["dampening"])
                weight_decay = float(group["weight_decay"])
                nesterov = group["nesterov"]
                for p, g in self._params_with_grad(group):
                    if weight_decay != 0:
                        g = g + p * weight_decay
                    if momentum != 0:
                        state = self.state.setdefault(p, {})
                        buf = state.get("momentum_buffer")
                        if buf is None:
                            _state_created()
                            buf = state["momentum_buffer"] = _copy(g)
                        else:
                            buf.mul_(momentum).add_(g * (1.0 - dampening))
                        g = g + buf * momentum if nesterov else buf
                    p.add_(g * -lr)
        return loss


class Adam(Optimizer):
    r"""Adam (Kingma & Ba, 2015), optionally with AMSGrad and L2 weight decay: PyTorch's
    ``torch.optim.Adam``.

    For each parameter ``p`` with gradient ``g``, at its step ``t`` (1, 2, ...), with
    ``m``, ``v`` (and ``v_max``) starting at zero::

        if weight_decay != 0:  g = g + weight_decay * p       # L2 penalty (Adam)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        step_size = lr / (1 - beta1 ** t)
        if amsgrad:  v_max = maximum(v_max, v);  v_hat = v_max
        else:        v_hat = v
        denom = sqrt(v_hat) / sqrt(1 - beta2 ** t) + eps
        p = p - step_size * m / denom

    State per parameter: ``"step"`` (t, an int), ``"exp_avg"`` (m), ``"exp_avg_sq"`` (v)
    and, with amsgrad, ``"max_exp_avg_sq"`` (v_max). Bias corrections are computed in
    Python floats, as PyTorch does, so float32 parameters are updated in float32.

    With ``capturable=True`` (PyTorch's name) ``"step"`` is a 0-d float64 tensor on the
    parameter's device, counted up in place, and the bias corrections are tensor ops:
    a step inside ``tg.compile`` then records once and replays (with a Python step count
    it records again on every call, since the count is baked into a recording). Eager,
    it costs a few more small ops per parameter; the updates are the same, bit for bit.

    Args:
        params: tensors, or parameter-group dicts (see the module doc).
        lr: learning rate (>= 0).
        betas: decay rates (beta1, beta2) of the moment estimates, each in [0, 1).
        eps: added to the denominator (>= 0).
        weight_decay: L2 penalty (>= 0), added to the gradient (see AdamW for the decoupled
            form).
        amsgrad: use the running maximum of ``v`` (Reddi et al., 2018).
        capturable: keep the step count in a tensor, so that ``tg.compile`` can replay
            the step (see above).
        decoupled_weight_decay: decay the parameter itself (``p *= 1 - lr *
            weight_decay``) instead of adding ``weight_decay * p`` to the gradient: AdamW's
            rule, as PyTorch's keyword of the same name.

    >>> import tapegrad as tg
    >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = tg.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()                   # the first step moves each entry by about lr
    >>> w
    tensor([ 0.9, -1.9], requires_grad=True)
    >>> opt.state[w]["step"]
    1
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, *, capturable=False, decoupled_weight_decay=False):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _check(self, hyper, where):
        for key in ("lr", "eps", "weight_decay"):
            self._float(hyper, key, where)
        self._betas(hyper, where)
        self._bool(hyper, "amsgrad")
        self._bool(hyper, "capturable")
        # NOTE: a state dict saved before this option existed lacks the key; AdamW's
        # groups are decoupled whatever the dict says (PyTorch forces it too).
        hyper.setdefault("decoupled_weight_decay", isinstance(self, AdamW))
        self._bool(hyper, "decoupled_weight_decay")
        if isinstance(self, AdamW):
            hyper["decoupled_weight_decay"] = True
        return hyper

    def step(self, closure=None):
        """Apply one update to every parameter that has a gradient (see the class doc)."""
        loss = self._closure_loss(closure)
        with tg.no_grad():
            for group in self.param_groups:
                lr = float(group["lr"])
                beta1, beta2 = (float(b) for b in group["betas"])
                eps = float(group["eps"])
                weight_decay = float(group["weight_decay"])
                amsgrad, capturable = group["amsgrad"], group["capturable"]
                decoupled = group["decoupled_weight_decay"]
                for p, g in self._params_with_grad(group):
                    state = self.state.setdefault(p, {})
                    if not state:
                        _state_created()
                        state["step"] = 0
                        state["exp_avg"] = tg.zeros_like(p)
                        state["exp_avg_sq"] = tg.zeros_like(p)
                        if amsgrad:
                            state["max_exp_avg_sq"] = tg.zeros_like(p)
                    step = state["step"] = _step_count(state["step"], capturable, p)
                    m, v = state["exp_avg"], state["exp_avg_sq"]
                    if weight_decay != 0:
                        if decoupled:
                            p.mul_(1.0 - lr * weight_decay)
                        else:
                            g = g + p * weight_decay
                    m.mul_(beta1).add_(g * (1.0 - beta1))
                    v.mul_(beta2).add_(g * g * (1.0 - beta2))
                    if capturable:
                        step.add_(1.0)
                        # NOTE: float64 like the Python floats of the other branch, then
                        # cast: a float64 0-d array would promote float32 parameters.
                        step_size = (lr / (1.0 - beta1 ** step)).astype(p.dtype)
                        bias_correction2_sqrt = ((1.0 - beta2 ** step) ** 0.5).astype(p.dtype)
                    else:
                        step = state["step"] = step + 1
                        # NOTE: np.power, not Python's **: NumPy's pow can differ from the C
                        # library's in the last bit, and capturable=True must give the same
                        # updates. float(): a NumPy float64 would promote float32 params.
                        step_size = lr / (1.0 - float(np.power(beta1, float(step))))
                        bias_correction2_sqrt = float(
                            np.power(1.0 - float(np.power(beta2, float(step))), 0.5))
                    if amsgrad:
                        v_max = state.get("max_exp_avg_sq")
                        if v_max is None:       # amsgrad switched on after some steps
                            _state_created()
                            v_max = state["max_exp_avg_sq"] = _copy(v)
                        else:
                            v_max[...] = tg.maximum(v_max, v)
                        v = v_max
                    denom = tg.sqrt(v) / bias_correction2_sqrt + eps
                    p.add_(m / denom * -step_size)
        return loss


class AdamW(Adam):
    r"""Adam with decoupled weight decay (Loshchilov & Hutter, 2019): PyTorch's
    ``torch.optim.AdamW``.

    The same rule as :class:`Adam`, except that weight decay does not touch the gradient:
    before the Adam update, each step shrinks the parameter::

        p = p * (1 - lr * weight_decay)          # i.e. p -= lr * weight_decay * p
        (then m, v, denom and p -= step_size * m / denom as in Adam, with g unchanged)

    Args: as Adam, with ``weight_decay`` defaulting to 1e-2.

    >>> import tapegrad as tg
    >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = tg.optim.AdamW([w], lr=0.1, weight_decay=0.5)
    >>> (w * w).sum().backward()
    >>> opt.step()                   # (1 - 0.1 * 0.5) * w, then the Adam step of about lr
    >>> w
    tensor([ 0.85, -1.8 ], requires_grad=True)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, capturable=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, capturable=capturable, decoupled_weight_decay=True)


# NOTE: at the end: these modules import Optimizer from here.
from . import lr_scheduler  # noqa: E402
from .optimizers import LBFGS, Adadelta, Adagrad, Adamax, NAdam, RAdam, RMSprop  # noqa: E402

__all__ += ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "LBFGS",
            "lr_scheduler"]
