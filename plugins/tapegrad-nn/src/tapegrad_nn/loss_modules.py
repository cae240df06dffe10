"""``tg.nn`` loss modules (torch.nn's class names and constructor arguments) over the
functions of :mod:`tapegrad_nn.losses`, and the class-weighted CrossEntropyLoss.

PyTorch's deprecated ``size_average=`` / ``reduce=`` are refused (use ``reduction=``).
A class ``weight`` is a buffer (in ``state_dict``, as PyTorch's).

>>> import tapegrad as tg
>>> tg.nn.L1Loss()(tg.tensor([1., 2.]), tg.tensor([0., 4.])).item()
1.5
>>> loss = tg.nn.CrossEntropyLoss(weight=tg.tensor([1., 3.]), label_smoothing=0.1)
>>> round(loss(tg.zeros((2, 2)), tg.tensor([0, 1])).item(), 6)
0.693147
"""

from __future__ import annotations

import inspect

import tapegrad as tg

from . import losses as L
from .nn import Module, _Loss

__all__ = ["NLLLoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "KLDivLoss",
           "PoissonNLLLoss", "GaussianNLLLoss", "CosineEmbeddingLoss", "MarginRankingLoss",
           "HingeEmbeddingLoss", "TripletMarginLoss", "CosineSimilarity", "PairwiseDistance"]


def _no_legacy(cls, size_average, reduce):
    if size_average is not None or reduce is not None:
        raise TypeError(f"{cls}: size_average= and reduce= are deprecated in PyTorch and not "
                        f"supported; use reduction='mean' | 'sum' | 'none'")


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        _no_legacy(type(self).__name__, size_average, reduce)
        super().__init__(reduction)
        self.register_buffer("weight", None if weight is None else tg.asarray(weight))


class NLLLoss(_WeightedLoss):
    """``tg.nll_loss(log_probs, labels, weight, ignore_index, reduction)`` (class axis
    last)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return L.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


_LEGACY = (("size_average", None), ("reduce", None))


def _simple(name, fn, doc, arguments, *, keyword_only=False):
    """A loss module whose forward is ``fn(*inputs, *(self.<arg>...), reduction=...)``.

    ``arguments`` is torch.nn's constructor signature, in torch's order, as (name,
    default) pairs including ``size_average`` / ``reduce`` / ``reduction`` where torch has
    them: positional arguments bind exactly as in PyTorch (torch's ``HuberLoss(reduction,
    delta)`` puts reduction first, ``SmoothL1Loss``'s beta comes after the legacy pair),
    so a positional call never means something else here than there."""
    kind = (inspect.Parameter.KEYWORD_ONLY if keyword_only
            else inspect.Parameter.POSITIONAL_OR_KEYWORD)
    signature = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(a, kind, default=d) for a, d in arguments])
    names = tuple(a for a, _ in arguments if a not in ("size_average", "reduce", "reduction"))

    def __init__(self, *pos, **kw):
        try:
            bound = signature.bind(self, *pos, **kw)
        except TypeError as err:
            raise TypeError(f"{name}{str(signature).replace('(self, ', '(')}: {err}") from None
        bound.apply_defaults()
        values = bound.arguments
        _no_legacy(name, values.get("size_average"), values.get("reduce"))
        _Loss.__init__(self, values["reduction"])
        for k in names:
            setattr(self, k, values[k])

    __init__.__signature__ = signature

    def forward(self, *inputs):
        return fn(*inputs, reduction=self.reduction, **{k: getattr(self, k) for k in names})

    def extra_repr(self):
        parts = [f"{k}={getattr(self, k)!r}" for k in names]
        return ", ".join(parts + ([_Loss.extra_repr(self)] if _Loss.extra_repr(self) else []))

    return type(name, (_Loss,), {"__init__": __init__, "forward": forward,
                                 "extra_repr": extra_repr, "__doc__": doc,
                                 "__module__": __name__})


_REDUCTION = ("reduction", "mean")
L1Loss = _simple("L1Loss", L.l1_loss, "``tg.l1_loss(input, target, reduction)``.",
                 (*_LEGACY, _REDUCTION))
SmoothL1Loss = _simple("SmoothL1Loss", L.smooth_l1_loss,
                       "``tg.smooth_l1_loss(input, target, reduction, beta)``.",
                       (*_LEGACY, _REDUCTION, ("beta", 1.0)))
HuberLoss = _simple("HuberLoss", L.huber_loss,
                    "``tg.huber_loss(input, target, reduction, delta)``.",
                    (_REDUCTION, ("delta", 1.0)))
PoissonNLLLoss = _simple("PoissonNLLLoss", L.poisson_nll_loss,
                         "``tg.poisson_nll_loss(input, target, log_input, full, eps)``.",
                         (("log_input", True), ("full", False), ("size_average", None),
                          ("eps", 1e-8), ("reduce", None), _REDUCTION))
GaussianNLLLoss = _simple("GaussianNLLLoss", L.gaussian_nll_loss,
                          "``tg.gaussian_nll_loss(input, target, var, full, eps)``.",
                          (("full", False), ("eps", 1e-6), _REDUCTION), keyword_only=True)
CosineEmbeddingLoss = _simple("CosineEmbeddingLoss", L.cosine_embedding_loss,
                              "``tg.cosine_embedding_loss(x1, x2, y, margin)``.",
                              (("margin", 0.0), *_LEGACY, _REDUCTION))
MarginRankingLoss = _simple("MarginRankingLoss", L.margin_ranking_loss,
                            "``tg.margin_ranking_loss(x1, x2, y, margin)``.",
                            (("margin", 0.0), *_LEGACY, _REDUCTION))
HingeEmbeddingLoss = _simple("HingeEmbeddingLoss", L.hinge_embedding_loss,
                             "``tg.hinge_embedding_loss(input, target, margin)``.",
                             (("margin", 1.0), *_LEGACY, _REDUCTION))
TripletMarginLoss = _simple("TripletMarginLoss", L.triplet_margin_loss,
                            "``tg.triplet_margin_loss(anchor, positive, negative, margin, p, "
                            "eps, swap)``.", (("margin", 1.0), ("p", 2.0), ("eps", 1e-6),
                                              ("swap", False), *_LEGACY, _REDUCTION))


class KLDivLoss(Module):
    """``tg.nn.functional.kl_div(input, target, reduction, log_target)``; reduction may
    also be 'batchmean' (the true KL divergence per sample)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        _no_legacy("KLDivLoss", size_average, reduce)
        super().__init__()
        L._reduction(reduction, "KLDivLoss", ("batchmean",))
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input, target):
        return L.kl_div(input, target, self.reduction, self.log_target)

    def extra_repr(self):
        return f"reduction={self.reduction!r}, log_target={self.log_target}"


class BCELoss(_WeightedLoss):
    """``tg.binary_cross_entropy(probabilities, target, weight, reduction)``."""

    def forward(self, input, target):
        return L.binary_cross_entropy(input, target, self.weight, self.reduction)


class CosineSimilarity(Module):
    """``tg.cosine_similarity(x1, x2, dim, eps)`` (dim 1 by default, as PyTorch's)."""

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return L.cosine_similarity(x1, x2, self.dim, self.eps)

    def extra_repr(self):
        return f"dim={self.dim}, eps={self.eps}"


class PairwiseDistance(Module):
    """``tg.pairwise_distance(x1, x2, p, eps, keepdim)``."""

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return L.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)

    def extra_repr(self):
        return f"p={self.norm}, eps={self.eps}, keepdim={self.keepdim}"
