"""W5: the 64x64 Hessian of f(x) = sum(tanh(W @ x)), float64.

This measures higher-order differentiation: the gradient is taken with its own graph
(``create_graph=True``) and then differentiated once per input element. The reference is
the closed form NumPy computes directly::

    t = tanh(W x)
    H = W^T diag(-2 t (1 - t^2)) W          (d/dx of grad f = W^T (1 - t^2))

so the ratio to NumPy is the whole price of getting a Hessian by autodiff instead of by
hand. tapegrad runs ``tg.hessian(f, x)`` and PyTorch ``torch.autograd.functional.hessian
(f, x)``, both with their defaults: the function as a user writes it (``W @ x``, not
batched), and one backward pass per row of the Hessian through the gradient's graph
(PyTorch's default is ``vectorize=False`` too). tapegrad's ``vectorize=True`` (one batched
pass, f written as ``tanh(x @ W.T).sum(-1)``) is documented in
plugins/tapegrad-higher/README.md; it is not what this figure measures.

NOTE: W is scaled by 1/sqrt(n) so that W x is of order one: tanh neither saturates (a
Hessian of ~0) nor stays linear (also ~0), and every entry is a sum of well-sized terms.
"""

from __future__ import annotations

import numpy as np

from ..registry import Case, Workload, register, time_per

SIZE = 64
SEED = 0

W5 = register(Workload(
    key="W5",
    title="64x64 Hessian of sum(tanh(W @ x)), float64",
    description=(
        "The Hessian of f(x) = sum(tanh(W x)) for a 64x64 W and x in R^64, by autodiff "
        "(tg.hessian, torch.autograd.functional.hessian: a gradient with create_graph, then "
        "one backward per row) against NumPy's closed form W^T diag(-2t(1-t^2)) W. "
        "Measures higher-order differentiation."),
    params={"size": SIZE, "seed": SEED, "dtype": "float64"},
    metrics=(time_per("hessian", 1, unit="ms"),),
    rtol=1e-9,
    atol=1e-12,
))


def _data(params):
    """W (n, n) scaled by 1/sqrt(n) and x (n,), the same in every library."""
    n = params["size"]
    rng = np.random.default_rng(params["seed"])
    return rng.standard_normal((n, n)) / np.sqrt(n), rng.standard_normal(n)


@W5.implementation("numpy")
def numpy_case(params) -> Case:
    """The closed form: H = W^T diag(-2 t (1 - t^2)) W with t = tanh(W x)."""
    W, x = _data(params)
    tanh = np.tanh

    def run():
        t = tanh(W @ x)
        return (W.T * (-2.0 * t * (1.0 - t * t))) @ W

    return Case(run=run, outputs=lambda H: {"hessian": H})


@W5.implementation("tapegrad")
def tapegrad_case(params) -> Case:
    """``tg.hessian`` of the function as a user writes it."""
    return _tapegrad_case(params, compiled=False)


@W5.implementation("tapegrad-compiled")
def tapegrad_compiled_case(params) -> Case:
    """The same ``tg.hessian`` call under ``tg.compile``: its double backward passes are
    recorded once and replayed as one kernel list."""
    return _tapegrad_case(params, compiled=True)


def _tapegrad_case(params, compiled):
    import tapegrad as tg

    W_np, x_np = _data(params)
    W, x = tg.tensor(W_np), tg.tensor(x_np)
    tanh, hessian = tg.tanh, tg.hessian

    def f(x):
        return tanh(W @ x).sum()

    def run_hessian(x):
        return hessian(f, x)

    if compiled:
        run_hessian = tg.compile(run_hessian)

    def run():
        return run_hessian(x)

    return Case(run=run, outputs=lambda H: {"hessian": H.numpy()})


@W5.implementation("torch")
def torch_case(params) -> Case:
    """``torch.autograd.functional.hessian`` (CPU, float64, its defaults)."""
    import torch
    from torch.autograd.functional import hessian

    W_np, x_np = _data(params)
    W, x = torch.from_numpy(W_np), torch.from_numpy(x_np)
    tanh = torch.tanh

    def f(x):
        return tanh(W @ x).sum()

    def run():
        return hessian(f, x)

    return Case(run=run, outputs=lambda H: {"hessian": H.numpy()})


@W5.implementation("tapegrad-fwd-over-rev")
def tapegrad_fwd_over_rev_case(params) -> Case:
    """``tg.hessian(f, x, outer_jacobian_strategy="forward-mode")``: forward mode over the
    gradient, one tangent (a column) at a time."""
    import tapegrad as tg

    W_np, x_np = _data(params)
    W, x = tg.tensor(W_np), tg.tensor(x_np)
    tanh, hessian = tg.tanh, tg.hessian

    def f(x):
        return tanh(W @ x).sum()

    def run():
        return hessian(f, x, outer_jacobian_strategy="forward-mode")

    return Case(run=run, outputs=lambda H: {"hessian": H.numpy()})


@W5.implementation("tapegrad-vmap")
def tapegrad_vmap_case(params) -> Case:
    """Forward over reverse over all 64 tangents at once, as JAX's ``hessian``
    (``jacfwd(jacrev(f))``) computes it: ``tg.vmap`` of the JVP of ``tg.func.grad(f)``
    over the identity's rows."""
    return _vmap_case(params, compiled=False)


@W5.implementation("tapegrad-vmap-compiled")
def tapegrad_vmap_compiled_case(params) -> Case:
    """The same vmapped forward-over-reverse call under ``tg.compile``."""
    return _vmap_case(params, compiled=True)


def _vmap_case(params, compiled):
    import tapegrad as tg

    W_np, x_np = _data(params)
    W, x = tg.tensor(W_np), tg.tensor(x_np)
    basis = tg.eye(params["size"])
    tanh, grad, jvp, vmap = tg.tanh, tg.func.grad, tg.func.jvp, tg.vmap

    def f(x):
        return tanh(W @ x).sum()

    df = grad(f)
    columns = vmap(lambda v: jvp(df, (x,), (v,))[1])
    if compiled:
        columns = tg.compile(columns)

    def run():
        return columns(basis)        # row i = H e_i (H is symmetric)

    return Case(run=run, outputs=lambda H: {"hessian": H.numpy()})


@W5.implementation("torch-func")
def torch_func_case(params) -> Case:
    """``torch.func.hessian`` (jacfwd(jacrev(f)): forward over reverse under vmap)."""
    import torch
    from torch.func import hessian

    W_np, x_np = _data(params)
    W, x = torch.from_numpy(W_np), torch.from_numpy(x_np)
    h = hessian(lambda x: torch.tanh(W @ x).sum())

    def run():
        return h(x)

    return Case(run=run, outputs=lambda H: {"hessian": H.numpy()})
