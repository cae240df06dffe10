"""``tg.optim.lr_scheduler``: learning-rate schedules, PyTorch's ``torch.optim.lr_scheduler``.

A scheduler wraps an optimizer and sets ``group["lr"]`` of each parameter group. As in
PyTorch: build it after the optimizer (construction already sets the epoch-0 rate and
``last_epoch = 0``), and call ``scheduler.step()`` *after* ``optimizer.step()``, once
per epoch (or per batch, for OneCycleLR). ``get_last_lr()`` is the list of rates
``step()`` set last. Rates follow PyTorch's recursive ("chainable") formulas, so two
schedulers on one optimizer compose as there; ``step(epoch)`` uses the closed forms.

>>> import tapegrad as tg
>>> w = tg.tensor([1.0], requires_grad=True)
>>> opt = tg.optim.SGD([w], lr=1.0)
>>> sched = tg.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
>>> lrs = []
>>> for epoch in range(5):
...     opt.step()                # (training)
...     lrs.append(sched.get_last_lr()[0])
...     sched.step()
>>> lrs
[1.0, 1.0, 0.5, 0.5, 0.25]

``state_dict()`` holds plain values (no optimizer, no functions), which ``tg.save``
writes; ``load_state_dict()`` restores them into a scheduler built over a restored
optimizer. The warning PyTorch gives when ``scheduler.step()`` precedes the first
``optimizer.step()`` is not given here.
"""

import math
import types
from bisect import bisect_right
from collections import Counter

from .optim import Optimizer, _plain

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
           "CosineAnnealingWarmRestarts", "OneCycleLR", "LinearLR", "LambdaLR",
           "ReduceLROnPlateau", "SequentialLR", "ConstantLR", "PolynomialLR",
           "ChainedScheduler"]


def _per_group(name, optimizer, value):
    """`value` once per parameter group: a list/tuple of that length, or one value."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"expected {len(optimizer.param_groups)} values for {name} (one "
                             f"per parameter group), got {len(value)}")
        return list(value)
    return [value] * len(optimizer.param_groups)


def _check_optimizer(cls, optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{cls}: {type(optimizer).__name__} is not a tg.optim optimizer")


class LRScheduler:
    """Base class: ``base_lrs`` (the groups' ``"initial_lr"``), ``last_epoch``, ``step()``.

    A subclass implements ``get_lr()`` (the rates for ``last_epoch``, from the groups'
    current rates) and may implement ``_get_closed_form_lr()`` (from ``base_lrs``).
    With ``last_epoch=-1`` each group's ``"initial_lr"`` is set to its ``"lr"`` (if not
    there yet); resuming with ``last_epoch >= 0`` needs ``"initial_lr"`` in every group.
    """

    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(type(self).__name__, optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"{type(self).__name__}: param 'initial_lr' is not specified in "
                        f"param_groups[{i}] when resuming with last_epoch={last_epoch} >= 0 "
                        f"(load the optimizer's state dict first)")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        """The rates for ``last_epoch`` (called by ``step()``)."""
        raise NotImplementedError(f"{type(self).__name__}.get_lr is not implemented")

    def get_last_lr(self):
        """The rate of each parameter group that ``step()`` set last (a list)."""
        return self._last_lr

    def step(self, epoch=None):
        """Advance one epoch (``last_epoch += 1``) and set each group's rate; with `epoch`
        (deprecated in PyTorch) jump to that epoch by the closed form."""
        self._step_count += 1
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _current(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Every attribute but the optimizer, as plain values."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        """Restore what ``state_dict()`` gave (also after a ``tg.save``/``tg.load``)."""
        # NOTE: _plain: a file writer may give numbers back as 0-d arrays
        self.__dict__.update({k: _plain(v) for k, v in dict(state_dict).items()})


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(last_epoch)``; one function or a list, one per group.

    The functions are not in ``state_dict()`` (as PyTorch: ``None`` for plain functions,
    the ``__dict__`` of callable objects).
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer("LambdaLR", optimizer)
        self.optimizer = optimizer
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        else:
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"LambdaLR: expected {len(optimizer.param_groups)} lr_lambdas, "
                                 f"got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self):
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [None if _is_function(fn) else dict(fn.__dict__)
                            for fn in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        lambdas = state_dict.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        super().load_state_dict(state_dict)
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


def _is_function(fn):
    return isinstance(fn, (types.FunctionType, types.MethodType, types.BuiltinFunctionType))


class StepLR(LRScheduler):
    """Multiply the rate by `gamma` every `step_size` epochs:
    ``lr = base_lr * gamma ** (last_epoch // step_size)``."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the rate by `gamma` at each milestone epoch:
    ``lr = base_lr * gamma ** (number of milestones <= last_epoch)``."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(int(m) for m in milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return self._current()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._current()]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base in self.base_lrs]

    def state_dict(self):
        sd = super().state_dict()
        sd["milestones"] = dict(self.milestones)
        return sd

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self.milestones = Counter({int(k): int(_plain(v)) for k, v in self.milestones.items()})


class LinearLR(LRScheduler):
    """Scale the rate linearly from ``start_factor`` to ``end_factor`` over `total_iters`
    epochs: ``lr = base_lr * (start + (end - start) * min(last_epoch, total_iters) /
    total_iters)``."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("LinearLR: start_factor must be in (0, 1], got "
                             f"{start_factor}")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in self._current()]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        diff = self.end_factor - self.start_factor
        return [lr * (1.0 + diff / (self.total_iters * self.start_factor
                                    + (self.last_epoch - 1) * diff))
                for lr in self._current()]

    def _get_closed_form_lr(self):
        return [base * (self.start_factor + (self.end_factor - self.start_factor)
                        * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the rate by `gamma` every epoch: ``lr = base_lr * gamma ** last_epoch``."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing (SGDR without restarts):
    ``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * last_epoch / T_max)) / 2``,
    computed recursively as PyTorch does (past ``T_max`` it rises again, with period
    ``2 * T_max``)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._current()
        if self._step_count == 1 and e > 0:
            return [lo + (base - lo) * (1 + math.cos(e * math.pi / T)) / 2
                    for base in self.base_lrs]
        if (e - 1 - T) % (2 * T) == 0:
            return [lr + (base - lo) * (1 - math.cos(math.pi / T)) / 2
                    for base, lr in zip(self.base_lrs, self._current())]
        return [(1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T))
                * (lr - lo) + lo for lr in self._current()]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing with warm restarts (SGDR): ``lr = eta_min + (base_lr - eta_min) *
    (1 + cos(pi * T_cur / T_i)) / 2``, ``T_cur`` the epochs since the last restart, the
    period ``T_i`` starting at ``T_0`` and multiplied by ``T_mult`` at each restart.
    ``step(epoch)`` accepts fractional epochs (per-batch stepping)."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: expected a positive integer T_0, "
                             f"got {T_0!r}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"CosineAnnealingWarmRestarts: expected an integer T_mult >= 1, "
                             f"got {T_mult!r}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2 for base in self.base_lrs]

    def step(self, epoch=None):
        """Advance one epoch, or go to `epoch` (may be fractional)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"CosineAnnealingWarmRestarts.step: expected a non-negative "
                                 f"epoch, got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr(), strict=True):
            group["lr"] = lr
        self._last_lr = self._current()


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin, 2018), stepped once per batch: the rate rises from
    ``max_lr / div_factor`` to ``max_lr`` over the first ``pct_start`` of `total_steps`,
    then falls to ``initial_lr / final_div_factor`` (cosine or linear annealing); with
    ``cycle_momentum`` the momentum (or Adam's beta1) moves the opposite way between
    `max_momentum` and `base_momentum`. ``three_phase`` as PyTorch."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        _check_optimizer("OneCycleLR", optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"OneCycleLR: expected a positive integer total_steps, got "
                                 f"{total_steps!r}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            for name, v in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
                if not isinstance(v, int) or v <= 0:
                    raise ValueError(f"OneCycleLR: expected a positive integer {name}, got {v!r}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("OneCycleLR: give either total_steps or (epochs and "
                             "steps_per_epoch)")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: expected a float in [0, 1] for pct_start, got "
                             f"{pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        T = self.total_steps
        if three_phase:
            self._schedule_phases = [
                dict(end_step=float(pct_start * T) - 1, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * T) - 2, start_lr="max_lr",
                     end_lr="initial_lr", start_momentum="base_momentum",
                     end_momentum="max_momentum"),
                dict(end_step=T - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum")]
        else:
            self._schedule_phases = [
                dict(end_step=float(pct_start * T) - 1, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=T - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum")]
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for m, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(f"OneCycleLR: cycle_momentum=True needs an optimizer with "
                                 f"momentum or betas; {type(optimizer).__name__} has neither "
                                 f"(pass cycle_momentum=False)")
            self.use_beta1 = "betas" in optimizer.defaults
            maxs = _per_group("max_momentum", optimizer, max_momentum)
            bases = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for m, b, group in zip(maxs, bases, optimizer.param_groups):
                    if self.use_beta1:
                        group["betas"] = (m, *group["betas"][1:])
                    else:
                        group["momentum"] = m
                    group["max_momentum"] = m
                    group["base_momentum"] = b
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step_num} times; total_steps is "
                             f"{self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal(group[phase["start_momentum"]],
                                                group[phase["end_momentum"]], pct)
                    break
                start_step = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    group["betas"] = (momentum, *group["betas"][1:])
                else:
                    group["momentum"] = momentum
        return lrs


class ReduceLROnPlateau(LRScheduler):
    """Multiply the rate by `factor` when a metric stopped improving for `patience` epochs:
    ``step(metric)`` after each validation. ``mode`` "min"/"max", ``threshold_mode``
    "rel" (better means below ``best * (1 - threshold)``, for "min") or "abs" (below
    ``best - threshold``), `cooldown` epochs without counting after a reduction, rates
    never below `min_lr`, and a reduction smaller than `eps` is skipped."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1.0, got {factor}")
        _check_optimizer("ReduceLROnPlateau", optimizer)
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got "
                             f"{threshold_mode!r}")
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            self.default_min_lr = None
            self.min_lrs = _per_group("min_lr", optimizer, min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = self._current()
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None):
        """Record one epoch's metric (a number or 0-d tensor); maybe reduce the rates."""
        current = float(metrics)
        epoch = self.last_epoch + 1 if epoch is None else epoch
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = self._current()

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def _reduce_lr(self):
        if len(self.optimizer.param_groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"ReduceLROnPlateau: the optimizer has {len(self.optimizer.param_groups)} "
                    f"parameter groups but min_lr gave {len(self.min_lrs)}; set min_lrs")
            self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
        for i, group in enumerate(self.optimizer.param_groups):
            old = float(group["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                group["lr"] = new

    def _is_better(self, a, best):
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if self.threshold_mode == "rel" \
                else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if self.threshold_mode == "rel" \
            else a > best + self.threshold


def _check_schedulers(cls, optimizer, schedulers):
    if len(schedulers) < 1:
        raise ValueError(f"{cls} expects at least one scheduler, got none")
    for i, s in enumerate(schedulers):
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(f"{cls}: scheduler {i} is a ReduceLROnPlateau, whose step() "
                             f"needs a metric; it cannot be combined")
        if getattr(s, "optimizer", None) is not optimizer:
            raise ValueError(f"{cls}: scheduler {i} ({type(s).__name__}) wraps another "
                             f"optimizer")


def _composite_state_dict(sched):
    sd = {k: v for k, v in sched.__dict__.items() if k not in ("optimizer", "_schedulers")}
    sd["_schedulers"] = [s.state_dict() for s in sched._schedulers]
    return sd


def _composite_load_state_dict(sched, state_dict):
    state_dict = dict(state_dict)
    inner = state_dict.pop("_schedulers")
    LRScheduler.load_state_dict(sched, state_dict)
    for s, sd in zip(sched._schedulers, inner):
        s.load_state_dict(sd)


class SequentialLR(LRScheduler):
    """Run `schedulers` one after another, switching at the `milestones` epochs; at a
    milestone the next scheduler starts from its epoch 0 (by its closed form, as PyTorch).
    Build the schedulers over the same optimizer first (their constructors' steps are
    undone here)."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        _check_optimizer("SequentialLR", optimizer)
        _check_schedulers("SequentialLR", optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: expected {len(schedulers) - 1} milestones for "
                             f"{len(schedulers)} schedulers, got {len(milestones)}")
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self._undo(self)
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = self._schedulers[idx].get_last_lr()

    def _undo(self, sched):
        # NOTE: each wrapped scheduler stepped once when it was built; undo that (also
        # inside nested SequentialLRs) so that the first one starts at epoch 0 here.
        if hasattr(sched, "_schedulers"):
            for s in sched._schedulers:
                self._undo(s)
        elif sched is not self:
            sched.last_epoch -= 1

    def step(self):
        """Advance one epoch of the scheduler whose turn it is."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        return _composite_state_dict(self)

    def load_state_dict(self, state_dict):
        _composite_load_state_dict(self, state_dict)


class ConstantLR(LRScheduler):
    """Scale the rate by `factor` until epoch `total_iters`, then restore it:
    ``lr = base_lr * (factor if last_epoch < total_iters else 1)``."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._current()]
        if self.last_epoch != self.total_iters:
            return self._current()
        return [lr * (1.0 / self.factor) for lr in self._current()]

    def _get_closed_form_lr(self):
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Polynomial decay to zero over `total_iters` epochs:
    ``lr = base_lr * (1 - min(last_epoch, total_iters) / total_iters) ** power``."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        e, T = self.last_epoch, self.total_iters
        decay = ((1.0 - e / T) / (1.0 - (e - 1) / T)) ** self.power
        return [lr * decay for lr in self._current()]

    def _get_closed_form_lr(self):
        return [base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for base in self.base_lrs]


class ChainedScheduler(LRScheduler):
    """Step several schedulers of one optimizer together: their factors multiply (each
    ``step()`` steps every scheduler, in order). Takes no step at construction."""

    def __init__(self, schedulers, optimizer=None):
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError("ChainedScheduler expects at least one scheduler, got none")
        optimizer = optimizer or schedulers[0].optimizer
        _check_schedulers("ChainedScheduler", optimizer, schedulers)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = self._current()

    def step(self):
        """Step every scheduler once."""
        for s in self._schedulers:
            s.step()
        self._last_lr = self._current()

    def state_dict(self):
        return _composite_state_dict(self)

    def load_state_dict(self, state_dict):
        _composite_load_state_dict(self, state_dict)
