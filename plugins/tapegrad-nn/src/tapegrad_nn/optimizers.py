"""More optimizers of ``tg.optim``: RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, LBFGS.

Each follows PyTorch's ``torch.optim`` class of the same name (arguments, defaults, state
names and update rule, operation for operation); each docstring writes the rule out. The
conventions of :mod:`tapegrad_nn.optim` hold (parameter groups, ``step()`` skipping
parameters without ``.grad``, ``state_dict()`` of plain values for ``tg.save``).

Under ``tg.compile`` the element-wise optimizers are correct: their hyper-parameters and
Python step counts are compile guards, so a compiled training step records again on each
call (correct, not faster; only ``Adam(capturable=True)`` replays). LBFGS reads the loss
and gradients on the host and branches on them, so a signature that calls its ``step``
runs eagerly, with a ``tg.CompileWarning``.
"""

import math

import numpy as np
import tapegrad as tg
from tapegrad._compile import run_eagerly

from .optim import Optimizer, _plain, _state_created

__all__ = ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "LBFGS"]


def _power(base, exponent):
    # NOTE: as Adam does: np.power (not **) so the bias corrections are the same floats
    # whichever form computes them; float() so float32 parameters are not promoted.
    return float(np.power(float(base), float(exponent)))


def _decay(p, g, lr, weight_decay, decoupled):
    """Apply weight decay: the L2 form adds ``weight_decay * p`` to the gradient, the
    decoupled one (AdamW's) shrinks ``p`` by ``1 - lr * weight_decay``. Returns g."""
    if weight_decay != 0:
        if decoupled:
            p.mul_(1.0 - lr * weight_decay)
        else:
            g = g + p * weight_decay
    return g


class RMSprop(Optimizer):
    r"""RMSprop (Hinton's lecture 6e), optionally centered and with momentum: PyTorch's
    ``torch.optim.RMSprop``.

    For each parameter ``p`` with gradient ``g``; ``v``, ``m`` (grad average) and ``b``
    (momentum buffer) start at zero::

        if weight_decay != 0:  g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        if centered:  m = alpha * m + (1 - alpha) * g;  avg = sqrt(v - m * m) + eps
        else:         avg = sqrt(v) + eps
        if momentum > 0:  b = momentum * b + g / avg;  p = p - lr * b
        else:             p = p - lr * g / avg

    State: ``"step"``, ``"square_avg"`` (v), ``"grad_avg"`` (m, if centered),
    ``"momentum_buffer"`` (b, if momentum > 0).

    >>> import tapegrad as tg
    >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = tg.optim.RMSprop([w], lr=0.01)
    >>> (w * w).sum().backward(); opt.step()
    >>> w                             # the first step moves each entry by lr / sqrt(0.01)
    tensor([ 0.9, -1.9], requires_grad=True)
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered))

    def _check(self, hyper, where):
        for key in ("lr", "eps", "weight_decay", "momentum"):
            self._float(hyper, key, where)
        self._float(hyper, "alpha", where, high=1.0)
        self._bool(hyper, "centered")
        return hyper

    def step(self, closure=None):
        """Apply one RMSprop update to every parameter that has a gradient."""
        loss = self._closure_loss(closure)
        with tg.no_grad():
            for group in self.param_groups:
                lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
                momentum, centered = group["momentum"], group["centered"]
                for p, g in self._params_with_grad(group):
                    state = self.state.setdefault(p, {})
                    if not state:
                        _state_created()
                        state["step"] = 0
                        state["square_avg"] = tg.zeros_like(p)
                    for key, wanted in (("momentum_buffer", momentum > 0),
                                        ("grad_avg", centered)):
                        if wanted and key not in state:     # also when switched on later
                            _state_created()
                            state[key] = tg.zeros_like(p)
                    state["step"] = int(state["step"]) + 1
                    g = _decay(p, g, lr, group["weight_decay"], False)
                    v = state["square_avg"]
                    v.mul_(alpha).add_(g * g * (1.0 - alpha))
                    if centered:
                        m = state["grad_avg"]
                        m.mul_(alpha).add_(g * (1.0 - alpha))
                        avg = tg.sqrt(v - m * m) + eps
                    else:
                        avg = tg.sqrt(v) + eps
                    if momentum > 0:
                        b = state["momentum_buffer"]
                        b.mul_(momentum).add_(g / avg)
                        p.add_(b * -lr)
                    else:
                        p.add_(g / avg * -lr)
        return loss


class Adagrad(Optimizer):
    r"""Adagrad (Duchi et al., 2011): PyTorch's ``torch.optim.Adagrad``.

    For each parameter ``p`` with gradient ``g`` at its step ``t`` (1, 2, ...), with the
    sum ``s`` starting at ``initial_accumulator_value``::

        if weight_decay != 0:  g = g + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        p = p - clr * g / (sqrt(s) + eps)

    State: ``"step"`` and ``"sum"`` (s).

    >>> import tapegrad as tg
    >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = tg.optim.Adagrad([w], lr=0.5)
    >>> (w * w).sum().backward(); opt.step()
    >>> w
    tensor([ 0.5, -1.5], requires_grad=True)
    """

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                 initial_accumulator_value=0.0, eps=1e-10):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps))

    def _check(self, hyper, where):
        for key in ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"):
            self._float(hyper, key, where)
        return hyper

    def step(self, closure=None):
        """Apply one Adagrad update to every parameter that has a gradient."""
        loss = self._closure_loss(closure)
        with tg.no_grad():
            for group in self.param_groups:
                lr, eps = group["lr"], group["eps"]
                for p, g in self._params_with_grad(group):
                    state = self.state.setdefault(p, {})
                    if not state:
                        _state_created()
                        state["step"] = 0
                        state["sum"] = tg.zeros_like(p) + group["initial_accumulator_value"]
                    step = state["step"] = int(state["step"]) + 1
                    g = _decay(p, g, lr, group["weight_decay"], False)
                    clr = lr / (1.0 + (step - 1) * group["lr_decay"])
                    s = state["sum"]
                    s.add_(g * g)
                    p.add_(g / (tg.sqrt(s) + eps) * -clr)
        return loss


class Adadelta(Optimizer):
    r"""Adadelta (Zeiler, 2012): PyTorch's ``torch.optim.Adadelta``.

    For each parameter ``p`` with gradient ``g``; ``v`` and ``u`` start at zero::

        if weight_decay != 0:  g = g + weight_decay * p
        v = rho * v + (1 - rho) * g * g
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        p = p - lr * delta

    State: ``"step"``, ``"square_avg"`` (v), ``"acc_delta"`` (u).

    >>> import tapegrad as tg
    >>> w = tg.tensor([3.0], requires_grad=True)
    >>> opt = tg.optim.Adadelta([w], rho=0.0, eps=1.0)
    >>> (w * 2.0).sum().backward(); opt.step()
    >>> w                             # delta = sqrt(1) / sqrt(4 + 1) * 2
    tensor([2.10557281], requires_grad=True)
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay))

    def _check(self, hyper, where):
        for key in ("lr", "eps", "weight_decay"):
            self._float(hyper, key, where)
        self._float(hyper, "rho", where, high=1.0)
        return hyper

    def step(self, closure=None):
        """Apply one Adadelta update to every parameter that has a gradient."""
        loss = self._closure_loss(closure)
        with tg.no_grad():
            for group in self.param_groups:
                lr, rho, eps = group["lr"], group["rho"], group["eps"]
                for p, g in self._params_with_grad(group):
                    state = self.state.setdefault(p, {})
                    if not state:
                        _state_created()
                        state["step"] = 0
                        state["square_avg"] = tg.zeros_like(p)
                        state["acc_delta"] = tg.zeros_like(p)
                    state["step"] = int(state["step"]) + 1
                    g = _decay(p, g, lr, group["weight_decay"], False)
                    v, u = state["square_avg"], state["acc_delta"]
                    v.mul_(rho).add_(g * g * (1.0 - rho))
                    delta = tg.sqrt(u + eps) / tg.sqrt(v + eps) * g
                    u.mul_(rho).add_(delta * delta * (1.0 - rho))
                    p.add_(delta * -lr)
        return loss


class Adamax(Optimizer):
    r"""Adamax, Adam's infinity-norm variant (Kingma & Ba, 2015): PyTorch's
    ``torch.optim.Adamax``.

    For each parameter ``p`` with gradient ``g`` at its step ``t``; ``m`` and ``u`` start
    at zero::

        if weight_decay != 0:  g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        u = maximum(beta2 * u, abs(g) + eps)
        p = p - lr / (1 - beta1 ** t) * m / u

    State: ``"step"``, ``"exp_avg"`` (m), ``"exp_inf"`` (u).

    >>> import tapegrad as tg
    >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = tg.optim.Adamax([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> w
    tensor([ 0.9, -1.9], requires_grad=True)
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def _check(self, hyper, where):
        for key in ("lr", "eps", "weight_decay"):
            self._float(hyper, key, where)
        self._betas(hyper, where)
        return hyper

    def step(self, closure=None):
        """Apply one Adamax update to every parameter that has a gradient."""
        loss = self._closure_loss(closure)
        with tg.no_grad():
            for group in self.param_groups:
                lr, eps = group["lr"], group["eps"]
                beta1, beta2 = group["betas"]
                for p, g in self._params_with_grad(group):
                    state = self.state.setdefault(p, {})
                    if not state:
                        _state_created()
                        state["step"] = 0
                        state["exp_avg"] = tg.zeros_like(p)
                        state["exp_inf"] = tg.zeros_like(p)
                    step = state["step"] = int(state["step"]) + 1
                    g = _decay(p, g, lr, group["weight_decay"], False)
                    m, u = state["exp_avg"], state["exp_inf"]
                    m.mul_(beta1).add_(g * (1.0 - beta1))
                    u[...] = tg.maximum(u * beta2, tg.abs(g) + eps)
                    clr = lr / (1.0 - _power(beta1, step))
                    p.add_(m / u * -clr)
        return loss


class NAdam(Optimizer):
    r"""Adam with Nesterov momentum (Dozat, 2016): PyTorch's ``torch.optim.NAdam``.

    For each parameter ``p`` with gradient ``g`` at its step ``t``; ``m``, ``v`` start at
    zero and the momentum product ``P`` at 1::

        weight decay: g = g + weight_decay * p, or with decoupled_weight_decay
                      p = p * (1 - lr * weight_decay)
        mu_t  = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_t1 = beta1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        P = P * mu_t
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        denom = sqrt(v / (1 - beta2 ** t)) + eps
        p = p - lr * (1 - mu_t) / (1 - P) * g / denom
        p = p - lr * mu_t1 / (1 - P * mu_t1) * m / denom

    State: ``"step"``, ``"mu_product"`` (P, a number), ``"exp_avg"``, ``"exp_avg_sq"``.

    >>> import tapegrad as tg
    >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = tg.optim.NAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> w.numpy().round(4)           # the g term and the Nesterov look-ahead m term
    array([ 0.8944, -1.8944])
    """

    _scalar_state = ("step", "mu_product")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 momentum_decay=4e-3, decoupled_weight_decay=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _check(self, hyper, where):
        for key in ("lr", "eps", "weight_decay", "momentum_decay"):
            self._float(hyper, key, where)
        self._betas(hyper, where)
        self._bool(hyper, "decoupled_weight_decay")
        return hyper

    def step(self, closure=None):
        """Apply one NAdam update to every parameter that has a gradient."""
        loss = self._closure_loss(closure)
        with tg.no_grad():
            for group in self.param_groups:
                lr, eps, psi = group["lr"], group["eps"], group["momentum_decay"]
                beta1, beta2 = group["betas"]
                for p, g in self._params_with_grad(group):
                    state = self.state.setdefault(p, {})
                    if not state:
                        _state_created()
                        state["step"] = 0
                        state["mu_product"] = 1.0
                        state["exp_avg"] = tg.zeros_like(p)
                        state["exp_avg_sq"] = tg.zeros_like(p)
                    step = state["step"] = int(state["step"]) + 1
                    g = _decay(p, g, lr, group["weight_decay"], group["decoupled_weight_decay"])
                    mu = beta1 * (1.0 - 0.5 * _power(0.96, step * psi))
                    mu_next = beta1 * (1.0 - 0.5 * _power(0.96, (step + 1) * psi))
                    mu_product = state["mu_product"] = float(state["mu_product"]) * mu
                    m, v = state["exp_avg"], state["exp_avg_sq"]
                    m.mul_(beta1).add_(g * (1.0 - beta1))
                    v.mul_(beta2).add_(g * g * (1.0 - beta2))
                    denom = tg.sqrt(v / (1.0 - _power(beta2, step))) + eps
                    p.add_(g / denom * (-lr * (1.0 - mu) / (1.0 - mu_product)))
                    p.add_(m / denom * (-lr * mu_next / (1.0 - mu_product * mu_next)))
        return loss


class RAdam(Optimizer):
    r"""Rectified Adam (Liu et al., 2020): PyTorch's ``torch.optim.RAdam``.

    For each parameter ``p`` with gradient ``g`` at its step ``t``; ``m``, ``v`` start at
    zero::

        weight decay: as NAdam (L2, or decoupled with decoupled_weight_decay=True)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1 ** t)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * t * beta2 ** t / (1 - beta2 ** t)
        if rho_t > 5:
            r = sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            p = p - lr * m_hat * r * sqrt(1 - beta2 ** t) / (sqrt(v) + eps)
        else:
            p = p - lr * m_hat

    State: ``"step"``, ``"exp_avg"``, ``"exp_avg_sq"``.

    >>> import tapegrad as tg
    >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = tg.optim.RAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> w                             # rho_1 <= 5: a plain momentum step lr * m_hat = lr * g
    tensor([ 0.8, -1.6], requires_grad=True)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 decoupled_weight_decay=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _check(self, hyper, where):
        for key in ("lr", "eps", "weight_decay"):
            self._float(hyper, key, where)
        self._betas(hyper, where)
        self._bool(hyper, "decoupled_weight_decay")
        return hyper

    def step(self, closure=None):
        """Apply one RAdam update to every parameter that has a gradient."""
        loss = self._closure_loss(closure)
        with tg.no_grad():
            for group in self.param_groups:
                lr, eps = group["lr"], group["eps"]
                beta1, beta2 = group["betas"]
                for p, g in self._params_with_grad(group):
                    state = self.state.setdefault(p, {})
                    if not state:
                        _state_created()
                        state["step"] = 0
                        state["exp_avg"] = tg.zeros_like(p)
                        state["exp_avg_sq"] = tg.zeros_like(p)
                    step = state["step"] = int(state["step"]) + 1
                    g = _decay(p, g, lr, group["weight_decay"], group["decoupled_weight_decay"])
                    m, v = state["exp_avg"], state["exp_avg_sq"]
                    m.mul_(beta1).add_(g * (1.0 - beta1))
                    v.mul_(beta2).add_(g * g * (1.0 - beta2))
                    bc1 = 1.0 - _power(beta1, step)
                    bc2 = 1.0 - _power(beta2, step)
                    m_hat = m / bc1
                    rho_inf = 2.0 / (1.0 - beta2) - 1.0
                    rho_t = rho_inf - 2.0 * step * _power(beta2, step) / bc2
                    if rho_t > 5.0:
                        rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                                         / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                        adaptive = math.sqrt(bc2) / (tg.sqrt(v) + eps)
                        p.add_(m_hat * lr * adaptive * rect * -1.0)
                    else:
                        p.add_(m_hat * lr * -1.0)
        return loss


# -- L-BFGS -------------------------------------------------------------------------------

def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1), (x2, f2, g2), clipped to bounds
    (Nocedal & Wright eq. 3.59; PyTorch's ``_cubic_interpolate``)."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = math.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """Line search for a step t along d satisfying the strong Wolfe conditions (Nocedal &
    Wright, algorithms 3.5 and 3.6, as PyTorch's ``_strong_wolfe``). Returns
    ``(f_new, g_new, t, evaluations)``."""
    d_norm = float(np.abs(d).max())
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]

    # zoom: the bracket holds a point satisfying the conditions
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.copy(), gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


class LBFGS(Optimizer):
    r"""Limited-memory BFGS: PyTorch's ``torch.optim.LBFGS``, closure API included.

    ``step(closure)`` runs up to `max_iter` L-BFGS iterations. `closure` must zero the
    gradients, compute the loss, call ``backward()`` and return the loss; it is called
    once at the start and once per iteration (more with the line search). Each iteration:

    - the direction ``d = -H g``, H the inverse-Hessian estimate of the last
      `history_size` pairs ``(s, y)`` (step, change of gradient; a pair is kept when
      ``y.s > 1e-10``) by the two-loop recursion with initial scaling ``y.s / y.y``
      (``d = -g`` on the very first iteration);
    - the step ``t``: ``lr * min(1, 1 / sum|g|)`` on the first iteration, ``lr`` after,
      or, with ``line_search_fn="strong_wolfe"``, a strong-Wolfe line search from there;
    - stop when ``max|g| <= tolerance_grad``, ``d.g > -tolerance_change``, the step or the
      change of loss is below `tolerance_change`, or `max_eval` closure calls are spent.

    The history and the last direction persist across ``step`` calls (the state of the
    first parameter, as in PyTorch). One parameter group only. The iterates are computed
    in NumPy on the host over the flattened parameters (in their common dtype).
    ``tg.compile``: a compiled function that calls ``step`` runs eagerly (it branches on
    loss values), with a ``tg.CompileWarning``.

    >>> import tapegrad as tg
    >>> x = tg.tensor([-1.5, 2.0], requires_grad=True)
    >>> opt = tg.optim.LBFGS([x], line_search_fn="strong_wolfe", tolerance_change=1e-14)
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
    ...     loss.backward()
    ...     return loss
    >>> for _ in range(5):
    ...     _ = opt.step(closure)
    >>> x.numpy().round(6)
    array([1., 1.])
    """

    _scalar_state = ("func_evals", "n_iter", "t", "H_diag", "prev_loss")
    _lists = ("old_dirs", "old_stps", "ro")

    def __init__(self, params, lr=1.0, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size, line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups): "
                             "pass one list of tensors")
        self._params = self.param_groups[0]["params"]

    def _check(self, hyper, where):
        for key in ("lr", "tolerance_grad", "tolerance_change"):
            self._float(hyper, key, where)
        for key in ("max_iter", "max_eval", "history_size"):
            value = _plain(hyper[key])
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                self._fail(where, f"{key} must be a positive integer, got {hyper[key]!r}")
            hyper[key] = value
        ls = _plain(hyper["line_search_fn"])
        if ls in ("", "None"):     # None as a file writer may give it back
            ls = None
        if ls not in (None, "strong_wolfe"):
            self._fail(where, f"line_search_fn must be None or 'strong_wolfe', got {ls!r}")
        hyper["line_search_fn"] = ls
        return hyper

    def add_param_group(self, param_group):
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups): "
                             "it optimizes one flat vector; pass one list of tensors")
        super().add_param_group(param_group)

    # -- flat views of the parameters (host NumPy arrays) --

    def _gather_flat_grad(self):
        parts = [np.zeros(p.size, p.dtype) if p.grad is None else p.grad.numpy().reshape(-1)
                 for p in self._params]
        return np.concatenate(parts)

    def _flat_params(self):
        return np.concatenate([p.numpy().reshape(-1) for p in self._params])

    def _add_grad(self, step_size, update):
        offset = 0
        with tg.no_grad():
            for p in self._params:
                part = update[offset:offset + p.size].reshape(p.shape)
                p.add_(tg.tensor(part * step_size, dtype=p.dtype, device=p.device))
                offset += p.size

    def _set_params(self, flat):
        offset = 0
        with tg.no_grad():
            for p in self._params:
                p[...] = tg.tensor(flat[offset:offset + p.size].reshape(p.shape),
                                   dtype=p.dtype, device=p.device)
                offset += p.size

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        with tg.enable_grad():
            loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_params(x)
        return loss, flat_grad

    def step(self, closure=None):
        """Run up to ``max_iter`` L-BFGS iterations; return the loss of the first
        ``closure()`` call (the loss before this step)."""
        if closure is None or not callable(closure):
            raise TypeError("LBFGS.step needs a closure: a function that zeroes the "
                            "gradients, computes the loss, calls backward() and returns it")
        run_eagerly("LBFGS.step branches on loss and gradient values")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with tg.enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if np.abs(flat_grad).max() <= tolerance_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(y @ s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / float(y @ y)
                # the two-loop recursion: d = -H g
                num_old = len(old_dirs)
                al = [0.0] * num_old
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = float(old_stps[i] @ q) * ro[i]
                    q = q - al[i] * old_dirs[i]
                d = r = q * H_diag
                for i in range(num_old):
                    be_i = float(old_dirs[i] @ r) * ro[i]
                    r = r + (al[i] - be_i) * old_stps[i]
                d = r
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(np.abs(flat_grad).sum())) * lr
            else:
                t = lr
            gtd = float(flat_grad @ d)
            if gtd > -tolerance_change:
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = self._flat_params()

                def obj_func(x, t, d):
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd)
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    with tg.enable_grad():
                        loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.abs(d * t).max() <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    # -- state dicts: the history lists are stacked into arrays for tg.save --

    def state_dict(self):
        """As :meth:`Optimizer.state_dict`; the history (lists of flat vectors) is stored
        as 2-d arrays ``old_dirs``/``old_stps`` (one row per pair) and a 1-d ``ro``."""
        sd = super().state_dict()
        for st in sd["state"].values():
            n = sum(p.size for p in self._params)
            for key in self._lists:
                if key in st:
                    rows = st[key]
                    st[key] = (np.array(rows, dtype=np.float64) if key == "ro" else
                               np.stack(rows) if rows else np.zeros((0, n)))
            for key in ("d", "prev_flat_grad"):
                if key in st:
                    st[key] = np.array(st[key], copy=True)
        return sd

    def _load_param_state(self, p, key, st):
        n = sum(q.size for q in self._params)
        out = {}
        for k, v in dict(st).items():
            if k in self._scalar_state:
                out[k] = None if v is None else _plain(v)
            elif k in self._lists:
                arr = np.asarray(v)
                out[k] = [float(x) for x in arr.reshape(-1)] if k == "ro" else [
                    row.copy() for row in arr.reshape(-1, n)]
            else:
                arr = np.array(v, copy=True)
                if arr.shape != (n,):
                    raise ValueError(
                        f"LBFGS.load_state_dict: state '{k}' has shape {arr.shape}, but the "
                        f"parameters have {n} entries in all")
                out[k] = arr
        return out

