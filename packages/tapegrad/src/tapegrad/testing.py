"""The contract kit: checks an op's gradient rule against finite differences.

One finite-difference engine (``numeric_jacobian``) serves ``gradcheck`` and
``gradgradcheck`` (for any function of tensors) and the per-op checks (``check_op``,
``check_plugin``) that the repository runs over every installed op and a third-party
plugin runs over its own.
"""

from __future__ import annotations

import contextlib
import doctest
import sys
from pathlib import Path

import numpy as np

from . import _complex_kit, _engine
from ._engine import Op, TensorBase, new_tensor, run_backward
from ._grad_mode import enable_grad, no_grad
from ._plugins import LOADER, FunctionDef, Sample, register_plugin


class GradcheckError(AssertionError):
    """An analytic gradient disagrees with central finite differences."""


class ContractError(AssertionError):
    """An op breaks the contract every registered op must keep."""


# ---------------------------------------------------------------------------------------
# Finite differences
# ---------------------------------------------------------------------------------------

def _outputs(result):
    outs = result if isinstance(result, (tuple, list)) else (result,)
    return [o for o in outs if isinstance(o, TensorBase) and o.dtype.kind == "f"]


def _host(t):
    return np.array(t.device.to_numpy(t._data), copy=True)


def _with_value(t, host):
    dev = t.device
    return new_tensor(dev.asarray(host), dev, False)


def numeric_jacobian(f, inputs, wrt, eps):
    """J[k][i] as an (out.size, x.size) array per output k and checked input i."""
    base = [_host(inputs[i]) for i in wrt]
    with no_grad():
        outs = _outputs(f(*inputs))
    jac = [[np.zeros((o.size, inputs[i].size)) for i in wrt] for o in outs]
    for col, i in enumerate(wrt):
        flat = base[col].reshape(-1)
        for k in range(flat.size):
            vals = []
            for sign in (1.0, -1.0):
                pert = base[col].copy()
                pert.reshape(-1)[k] += sign * eps
                args = list(inputs)
                args[i] = _with_value(inputs[i], pert)
                with no_grad():
                    vals.append([_host(o).reshape(-1).astype(np.float64) for o in _outputs(f(*args))])
            for r, (plus, minus) in enumerate(zip(*vals)):
                jac[r][col][:, k] = (plus - minus) / (2.0 * eps)
    return jac


def analytic_jacobian(f, inputs, wrt, *, create_graph=False):
    """Rows of the Jacobian by one backward pass per output element."""
    with enable_grad():
        outs = _outputs(f(*inputs))
    targets = tuple(inputs[i] for i in wrt)
    jac = [[np.zeros((o.size, inputs[i].size)) for i in wrt] for o in outs]
    for r, o in enumerate(outs):
        if not o.requires_grad:
            continue
        for j in range(o.size):
            seed = np.zeros(o.size, dtype=o.dtype)
            seed[j] = 1.0
            grads = run_backward((o,), (_with_value(o, seed.reshape(o.shape)),),
                                 True, create_graph, targets, True)
            for col, g in enumerate(grads):
                if g is not None:
                    jac[r][col][j, :] = _host(g).reshape(-1)
    return jac


def _as_inputs(inputs):
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def _float64_inputs(inputs, upcast, eps, who):
    """The inputs as a list, float64 where they require grad (float32 refused unless
    `upcast`, which checks float64 copies instead)."""
    inputs = list(_as_inputs(inputs))
    for i, x in enumerate(inputs):
        if isinstance(x, TensorBase) and x.requires_grad and x.dtype != np.float64:
            if x.dtype == np.complex128:
                continue            # checked by the complex finite differences
            if not upcast:
                raise TypeError(
                    f"{who}: input {i} is {x.dtype}; finite differences need float64 (with "
                    f"eps={eps} a float32 difference quotient is dominated by rounding). Pass "
                    f"float64 inputs, or upcast=True to check float64 copies.")
            inputs[i] = _upcast(x)
    return inputs


def _upcast(x):
    return new_tensor(x.device.asarray(_host(x).astype(np.float64)), x.device, True)


def _grad_positions(inputs):
    return [i for i, x in enumerate(inputs) if isinstance(x, TensorBase) and x.requires_grad]


def gradcheck(f, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, *, upcast=False):
    """Check f's gradients against central finite differences in float64.

    `inputs` is a tensor or a tuple; those with requires_grad are checked. Returns True,
    or raises GradcheckError naming the worst entry (input, index, analytic, numeric).
    float32 inputs are refused: a central difference with eps=1e-6 in float32 is mostly
    rounding error. Pass ``upcast=True`` to check float64 copies of them instead.
    complex128 inputs (or outputs) are checked in PyTorch's convention: the gradients for
    random complex output cotangents w against central differences of
    ``Re(sum(conj(w) * f(z)))`` along the real and the imaginary part of each element.

    >>> import tapegrad as tg
    >>> x = tg.tensor([0.5, -1.0], requires_grad=True)
    >>> tg.gradcheck(lambda x: x + x + 1.0, x)
    True
    """
    inputs = _float64_inputs(inputs, upcast, eps, "gradcheck")
    wrt = _grad_positions(inputs)
    if not wrt:
        raise ValueError("gradcheck: no input requires grad, so there is nothing to check")
    if _complex_kit.involves_complex(f, inputs):
        _complex_kit.gradcheck(f, inputs, eps, atol, rtol)
        return True
    numeric = numeric_jacobian(f, inputs, wrt, eps)
    analytic = analytic_jacobian(f, inputs, wrt)
    _compare(analytic, numeric, inputs, wrt, atol, rtol, "gradient")
    return True


def gradgradcheck(f, inputs, grad_outputs=None, eps=1e-6, atol=1e-5, rtol=1e-3, *,
                  upcast=False):
    """Check f's second derivatives against central finite differences in float64.

    The function checked is the gradient itself, ``(inputs, grad_outputs) -> J(inputs)^T
    grad_outputs``, computed with ``create_graph=True``: its own gradient (one more
    backward through the graph the first one built) is compared with central differences
    of it, taken by the same engine as ``gradcheck``. That covers the second derivatives
    in the inputs and, since the gradient is linear in ``grad_outputs``, that the
    gradient graph is wired to them correctly.

    `grad_outputs`: one tensor per output of f that requires grad; by default seeded
    random normal float64 tensors that require grad (so they are checked too). Returns
    True, or raises GradcheckError naming the worst entry: which input (or grad_output),
    its index, which input's gradient, analytic and numeric. float32 is refused as in
    gradcheck. An op registered with ``twice_differentiable=False`` makes this raise a
    RuntimeError that names it. complex128 inputs or outputs (with the default
    grad_outputs: random complex ones) are checked as gradcheck checks them.

    >>> import tapegrad as tg
    >>> x = tg.tensor([0.5, -1.0], requires_grad=True)
    >>> tg.gradgradcheck(lambda x: x + x + 1.0, x)
    True
    """
    inputs = _float64_inputs(inputs, upcast, eps, "gradgradcheck")
    wrt = _grad_positions(inputs)
    if not wrt:
        raise ValueError("gradgradcheck: no input requires grad, so there is nothing to check")
    if grad_outputs is None and _complex_kit.involves_complex(f, inputs):
        _complex_kit.gradgradcheck(f, inputs, eps, atol, rtol)
        return True
    with enable_grad():
        outs = [o for o in _outputs(f(*inputs)) if o.requires_grad]
    if not outs:
        raise ValueError("gradgradcheck: no output of f requires grad, so it has no gradient "
                         "to differentiate")
    seeds = _grad_outputs_for(outs, grad_outputs, upcast)
    n = len(inputs)

    def gradient(create_graph, *args):
        xs = list(args[:n])
        if not create_graph:
            # A perturbed copy made by the finite-difference engine: a fresh leaf.
            for i in wrt:
                if not xs[i].requires_grad:
                    xs[i] = new_tensor(xs[i]._data, xs[i].device, True)
        with enable_grad():
            ys = [o for o in _outputs(f(*xs)) if o.requires_grad]
            if len(ys) != len(seeds):
                raise GradcheckError(
                    f"gradgradcheck: f returned {len(ys)} outputs that require grad, "
                    f"expected {len(seeds)}")
            grads = run_backward(tuple(ys), tuple(args[n:]), True, create_graph,
                                 tuple(xs[i] for i in wrt), True)
        return tuple(_zeros_like(xs[i]) if g is None else g for i, g in zip(wrt, grads))

    extended = inputs + seeds
    wrt2 = _grad_positions(extended)
    numeric = numeric_jacobian(lambda *a: gradient(False, *a), extended, wrt2, eps)
    analytic = analytic_jacobian(lambda *a: gradient(True, *a), extended, wrt2)
    _compare(analytic, numeric, extended, wrt2, atol, rtol, "second-order gradient",
             in_name=lambda i: f"input {i}" if i < n else f"grad_output {i - n}",
             out_name=lambda r: f"the gradient of input {wrt[r]}")
    return True


def _grad_outputs_for(outs, grad_outputs, upcast):
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        return [new_tensor(o.device.asarray(rng.standard_normal(o.shape)), o.device, True)
                for o in outs]
    seeds = list(_as_inputs(grad_outputs))
    if len(seeds) != len(outs):
        raise ValueError(f"gradgradcheck: got {len(seeds)} grad_outputs for {len(outs)} "
                         f"outputs that require grad")
    for k, (v, o) in enumerate(zip(seeds, outs)):
        if not isinstance(v, TensorBase):
            v = new_tensor(o.device.asarray(np.asarray(v, dtype=np.float64)), o.device)
        if v.shape != o.shape:
            raise ValueError(f"gradgradcheck: grad_output {k} has shape {v.shape}, but output "
                             f"{k} has shape {o.shape}")
        if v.dtype != np.float64:
            if v.requires_grad and not upcast:
                raise TypeError(f"gradgradcheck: grad_output {k} is {v.dtype}; finite "
                                f"differences need float64 (or upcast=True)")
            v = _upcast(v) if v.requires_grad else new_tensor(
                v.device.asarray(_host(v).astype(np.float64)), v.device)
        seeds[k] = v
    return seeds


def _zeros_like(x):
    return new_tensor(x.device.zeros(x.shape, x.dtype), x.device)


def _compare(analytic, numeric, inputs, wrt, atol, rtol, what, *, in_name=None, out_name=None):
    worst = None
    for r, (arow, nrow) in enumerate(zip(analytic, numeric)):
        for col, (a, n) in enumerate(zip(arow, nrow)):
            excess = _complex_kit.excess_over_tolerance(a, n, atol, rtol)
            if not excess.size:
                continue
            at = int(np.argmax(excess))
            largest = excess.flat[at]
            if worst is None or largest > worst[0]:
                j, k = np.unravel_index(at, excess.shape)
                worst = (largest, r, col, j, k, a[j, k], n[j, k])
    if worst is not None and worst[0] > 0:
        _, r, col, j, k, a, n = worst
        i = wrt[col]
        index = np.unravel_index(k, inputs[i].shape) if inputs[i].ndim else ()
        source = in_name(i) if in_name else f"input {i}"
        target = out_name(r) if out_name else f"output {r}"
        raise GradcheckError(
            f"{what} check failed for {source} at index {tuple(int(v) for v in index)} "
            f"({target}, element {j}): analytic {a:.10g} vs numeric {n:.10g} "
            f"(|difference| {abs(a - n):.3g} > atol {atol} + rtol {rtol} * |numeric|)")


# ---------------------------------------------------------------------------------------
# The op contract
# ---------------------------------------------------------------------------------------

class Report:
    """What check_op verified for one op or function, and what it can do
    (``capabilities``, see :func:`capabilities`)."""

    def __init__(self, name, capabilities=frozenset()):
        self.name = name
        self.checks: list[str] = []
        self.capabilities: frozenset = frozenset(capabilities)

    def __repr__(self):
        return f"<contract report '{self.name}': {len(self.checks)} checks passed>"


def _cast(value, dtype):
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value.astype(dtype)
    return value


def _tensors(sample: Sample, dtype, grad_positions):
    """The sample's arrays as tensors on the default device (the kit checks whichever
    device is the default: tg.set_default_device("cuda") checks the GPU kernels)."""
    dev = _engine.default_device()
    out = []
    for i, a in enumerate(sample.args):
        if isinstance(a, np.ndarray):
            arr = _cast(a, dtype)
            out.append(_engine.new_tensor(dev.asarray(np.array(arr)), dev,
                                          i in grad_positions and arr.dtype.kind == "f"))
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], np.ndarray):
            out.append([_engine.new_tensor(dev.asarray(_cast(x, dtype).copy()), dev,
                                           x.dtype.kind == "f") for x in a])
        else:
            out.append(a)
    return out


def _positions(entry, sample):
    n = len(sample.args)
    if isinstance(entry, Op):
        return [i for i in range(n) if entry.is_differentiable(i)]
    diff = entry.differentiable
    return list(range(n)) if diff is None else [i for i in diff if i < n]


def _call(entry, args, kwargs):
    fn = entry if isinstance(entry, Op) else entry.fn
    return fn(*args, **kwargs)


def _flatten_seq(args):
    """Expand a sequence argument (concatenate's list) into separate positional inputs."""
    if args and isinstance(args[0], list):
        seq = args[0]
        return seq + list(args[1:]), len(seq)
    return list(args), None


def check_op(op, *, atol=1e-5, rtol=1e-3, eps=1e-6) -> Report:
    """Check one registered op (name or Op) or function against the contract.

    For every sample: the op's tensor result equals its kernel's; in float64 its VJP
    matches central finite differences for every differentiable input (broadcast inputs
    included: their gradients must come back in their own shape), for an op with
    ``aux=`` both with its auxiliary arrays and recomputing them; its second derivatives
    pass gradgradcheck (for an op registered with ``twice_differentiable=False``: a
    gradient taken with create_graph=True raises when differentiated again); its JVP rule,
    if it has one, matches finite differences and is the transpose of the VJP rule (and,
    on its first two samples and its first broadcasting one, is itself differentiable:
    reverse over forward); inputs that are not differentiable get no gradient; in float32
    it returns float32 results, gradients and JVP tangents; under vmap (its inputs
    batched) it equals one call per example, and its VJP inside vmap the per-example VJPs
    (or it refuses with an error naming vmap). An op registered with ``complex=True`` is
    also checked on complex samples (its explicit ones and ones derived from its float
    samples, see tapegrad/_complex_kit.py): its VJP against central differences of
    ``L = Re(sum(conj(w) * f(z)))`` perturbing real and imaginary parts separately, its
    second derivatives the same way, its JVP rule against finite differences and as the
    transpose of the VJP and differentiable (reverse over forward), complex64 kept, and
    vmap; a registered function is checked the same way on its explicit complex samples
    and its float samples whose result is complex. The report lists the checks that ran and
    the op's ``capabilities``. Raises ContractError (or GradcheckError) on the first
    failure.

    >>> import tapegrad as tg
    >>> tg.testing.check_op("add")
    <contract report 'add': ... checks passed>
    >>> sorted(tg.testing.check_op("add").capabilities)
    ['backward', 'batching_rule', 'double_backward', 'forward_mode', 'jvp_rule']
    """
    entry = _resolve(op)
    report = Report(entry.name, capabilities(entry))
    if isinstance(entry, FunctionDef) and entry.writes_into is not None:
        entry = _written_form(entry)
    if not entry.samples:
        raise ContractError(f"'{entry.name}' registers no samples, so its gradient cannot be checked")
    # NOTE: the JVP rule's own gradient (reverse over forward, a gradcheck of the rule) is
    # a fifth of the kit's time when checked on every sample, so it is checked on the
    # first two samples where it runs and on the first broadcasting one. Every sample still
    # checks the rule against finite differences and against the VJP rule, which pin its
    # values; this check is about its graph.
    broadcasting = _first_broadcasting_sample(entry.samples)
    for s, sample in enumerate(entry.samples):
        if _complex_kit.is_complex_sample(sample):
            continue                # checked by the complex checks below
        where = f"'{entry.name}' sample {s} {sample!r}"
        positions = _positions(entry, sample)
        if isinstance(entry, Op):
            _check_forward(entry, sample, where, report)
        _check_gradients(entry, sample, positions, where, report, atol, rtol, eps)
        if isinstance(entry, Op) and entry.n_aux:
            _check_aux_both_ways(entry, sample, positions, where, report, atol, rtol, eps)
        _check_replayable_rule(entry, sample, positions, where, report)
        _check_second_order(entry, sample, positions, where, report, atol, rtol, eps)
        _check_jvp(entry, sample, positions, where, report, atol, rtol, eps,
                   reverse_over_forward=(report.checks.count(_REVERSE_OVER_FORWARD) < 2
                                         or s == broadcasting))
        _check_nondifferentiable(entry, sample, positions, where, report)
        _check_float32(entry, sample, positions, where, report)
        _check_batching(entry, sample, where, report)
    if getattr(entry, "supports_complex", False):
        _complex_kit.check_complex(entry, report, atol, rtol, eps, check_forward=_check_forward,
                                   check_batching=_check_batching)
    elif isinstance(entry, FunctionDef):
        # its complex samples (explicit, or a float one with a complex result)
        _complex_kit.check_complex_function(entry, report, atol, rtol, eps,
                                            check_batching=_check_batching)
    return report


_REVERSE_OVER_FORWARD = "float64 JVP rule differentiable (reverse over forward)"


def _first_broadcasting_sample(samples):
    """The index of the first sample whose array inputs differ in shape, or None."""
    for s, sample in enumerate(samples):
        if len({np.shape(a) for a in sample.args if isinstance(a, np.ndarray)}) > 1:
            return s
    return None


def _written_form(entry):
    """The function that a function writing into argument ``entry.writes_into`` (and
    returning None: tg.copyto, tg.put) is checked as: it writes into a copy of that
    argument (a non-leaf, so the write records) and returns the copy."""
    k = entry.writes_into

    def written(*args, **kwargs):
        args = list(args)
        dst = args[k] = _engine.ops_table()["astype"](args[k], dtype=args[k].dtype)  # a copy
        result = entry.fn(*args, **kwargs)
        if result is not None:
            raise ContractError(f"'{entry.name}' writes into argument {k}, so it must return "
                                f"None (as NumPy's), got {type(result).__name__}")
        return dst

    return FunctionDef(entry.name, written, entry.plugin, entry.samples, entry.method,
                       entry.differentiable)


def capabilities(op) -> frozenset:
    """What kinds of differentiation an op (a name, an Op or a registered function)
    supports, as a set of tags:

    - ``"backward"``: it has a gradient rule (reverse mode);
    - ``"double_backward"``: that rule is itself differentiable, so ``create_graph=True``
      gives gradients that can be differentiated again (Hessians, gradgradcheck);
    - ``"forward_mode"``: ``tg.jvp`` can push tangents through it (with its own JVP rule,
      or through the double-VJP trick, which needs ``"double_backward"``);
    - ``"jvp_rule"``: it registers its own forward-mode rule (``register_op(jvp=...)``);
    - ``"batching_rule"``: it registers a vmap batching rule (``register_op(batch=...)``;
      without one, vmap runs it once per example).

    A registered function (composed of other ops) has the capabilities of the ops it
    calls; it is tagged with the first three.

    >>> import tapegrad as tg
    >>> sorted(tg.testing.capabilities("add"))
    ['backward', 'batching_rule', 'double_backward', 'forward_mode', 'jvp_rule']
    """
    entry = _resolve(op)
    if not isinstance(entry, Op):
        return frozenset({"backward", "double_backward", "forward_mode"})
    tags = set()
    if entry.vjp is not None:
        tags.add("backward")
        if entry.twice_differentiable:
            tags.update(("double_backward", "forward_mode"))
    if entry.jvp is not None:
        tags.update(("jvp_rule", "forward_mode"))
    if entry.batch is not None:
        tags.add("batching_rule")
    return frozenset(tags)


def _resolve(op):
    if isinstance(op, (Op, FunctionDef)):
        return op
    table = _engine.ops_table()
    if op in table:
        return table[op]
    if op in LOADER.functions:
        return LOADER.functions[op]
    raise ContractError(f"no op or function named '{op}' is registered")


def _check_forward(op, sample, where, report):
    args = _tensors(sample, np.float64, ())
    out = op(*args, **sample.kwargs)
    if not isinstance(out, TensorBase):
        raise ContractError(f"{where}: returned {type(out).__name__}, not a Tensor")
    arrays = [[t._data for t in a] if isinstance(a, list) else (a._data if isinstance(a, TensorBase) else a)
              for a in args]
    if op.seq_input:
        arrays = list(arrays[0]) + list(arrays[1:])
    dev = _engine.default_device()
    expected = op.kernels[dev.name](*arrays, **sample.kwargs)
    if op.n_aux:
        expected = _check_aux_result(op, expected, where)
    expected = dev.to_numpy(dev.asarray(expected))
    got = _host(out)
    if got.shape != expected.shape or got.dtype != expected.dtype or not np.array_equal(got, expected, equal_nan=True):
        raise ContractError(f"{where}: the tensor result differs from the kernel's "
                            f"({got.shape} {got.dtype} vs {expected.shape} {expected.dtype})")
    report.checks.append("forward")


def _sample_function(entry, sample, positions):
    """(f, flat inputs) to differentiate for one sample, or None when the sample has
    nothing differentiable: f takes the inputs flat (a sequence argument spread out)."""
    args = _tensors(sample, np.float64, positions)
    flat, nseq = _flatten_seq(args)
    with no_grad():
        probe = _call(entry, args, sample.kwargs)
    if not _outputs(probe) or not positions:
        return None
    if isinstance(entry, Op) and entry.vjp is None:
        return None

    def f(*xs):
        if nseq is not None:
            return _call(entry, [list(xs[:nseq])] + list(xs[nseq:]), sample.kwargs)
        return _call(entry, list(xs), sample.kwargs)

    if not any(isinstance(x, TensorBase) and x.requires_grad for x in flat):
        return None
    return f, flat


def _check_gradients(entry, sample, positions, where, report, atol, rtol, eps):
    found = _sample_function(entry, sample, positions)
    if found is None:
        return
    f, flat = found
    grad_inputs = [x for x in flat if isinstance(x, TensorBase) and x.requires_grad]
    try:
        gradcheck(f, flat, eps=eps, atol=atol, rtol=rtol)
    except GradcheckError as exc:
        raise GradcheckError(f"{where}: {exc}") from None
    # Gradients land in each input's own shape and dtype (broadcasting undone).
    outs = [o for o in _outputs(f(*flat)) if o.requires_grad]
    rng = np.random.default_rng(0)
    run_backward(tuple(outs), tuple(_with_value(o, rng.standard_normal(o.shape).astype(o.dtype))
                                    for o in outs), False, False)
    for i, x in enumerate(grad_inputs):
        if x.grad is None:
            continue
        if x.grad.shape != x.shape or x.grad.dtype != x.dtype:
            raise ContractError(f"{where}: gradient of input {i} has shape {x.grad.shape} "
                                f"{x.grad.dtype}, input has {x.shape} {x.dtype}")
    report.checks.append("float64 gradient vs finite differences")


def _check_replayable_rule(entry, sample, positions, where, report):
    from ._compile import compile as compile_fn

    found = _sample_function(entry, sample, positions)
    if found is None:
        return
    f, flat = found
    wrt = tuple(x for x in flat if isinstance(x, TensorBase) and x.requires_grad)
    outs = tuple(o for o in _outputs(f(*flat)) if o.requires_grad)
    if not outs:
        return
    rng = np.random.default_rng(1)

    def cotangents():
        return tuple(_with_value(o, rng.standard_normal(o.shape).astype(o.dtype)) for o in outs)

    def one_pass(*gs):
        grads = run_backward(outs, gs, True, False, wrt, True)
        return tuple(g for g in grads if g is not None)

    replay = compile_fn(one_pass)
    replay.warn_when_eager = False
    replay(*cotangents())
    second = cotangents()
    for i, (got, want) in enumerate(zip(replay(*second), one_pass(*second), strict=True)):
        if not np.array_equal(_host(got), _host(want), equal_nan=True):
            raise ContractError(
                f"{where}: a backward pass recorded by tg.compile with one output gradient "
                f"and replayed with another differs from an eager pass (gradient {i}): the "
                f"gradient rule must run the same kernels whatever the values of g (no "
                f"Python branching on them); tg.compile and tg.jacobian/tg.hessian's "
                f"replayed passes rely on it")
    report.checks.append("gradient rule replays for any output gradient")


_NOT_TWICE = "not twice differentiable"     # what the engine's guard says (tapegrad._plugins)


def _check_second_order(entry, sample, positions, where, report, atol, rtol, eps):
    found = _sample_function(entry, sample, positions)
    if found is None:
        return
    f, flat = found
    if isinstance(entry, Op) and not entry.twice_differentiable:
        _check_double_backward_raises(f, flat, where)
        report.checks.append("double backward raises (twice_differentiable=False)")
        return
    try:
        gradgradcheck(f, flat, eps=eps, atol=atol, rtol=rtol)
    except GradcheckError as exc:
        raise GradcheckError(f"{where}: {exc}") from None
    except RuntimeError as exc:
        if isinstance(entry, Op) or _NOT_TWICE not in str(exc):
            raise
        # A function that calls an op declared twice_differentiable=False: it says so.
        report.capabilities = report.capabilities - {"double_backward", "forward_mode"}
        report.checks.append("double backward raises (calls an op that is not twice "
                             "differentiable)")
        return
    report.checks.append("float64 second derivatives (gradgradcheck)")


def _check_aux_result(op, result, where):
    """The output of an aux op's kernel result (out, a1, ..., ak), checked."""
    if not isinstance(result, tuple):
        return result                 # a kernel may return the output alone
    if len(result) != op.n_aux + 1:
        raise ContractError(f"{where}: the op is registered with aux={op.n_aux}, so its kernel "
                            f"must return (out, {op.n_aux} auxiliary arrays), got "
                            f"{type(result).__name__}")
    return result[0]


def _check_aux_both_ways(entry, sample, positions, where, report, atol, rtol, eps):
    """An op with aux= has two first-order rules in one: with the forward's auxiliary
    arrays (a plain backward) and recomputing them (the rule recorded, create_graph=True).
    Both must match finite differences; gradgradcheck covers the recorded one's own
    derivative (see Note: [auxiliary outputs] in _engine.pyx)."""
    found = _sample_function(entry, sample, positions)
    if found is None:
        return
    f, flat = found
    wrt = [i for i, x in enumerate(flat) if isinstance(x, TensorBase) and x.requires_grad]
    numeric = numeric_jacobian(f, flat, wrt, eps)
    for create_graph, how in ((False, "with its aux arrays (create_graph=False)"),
                              (True, "recomputing them (create_graph=True)")):
        analytic = analytic_jacobian(f, flat, wrt, create_graph=create_graph)
        try:
            _compare(analytic, numeric, flat, wrt, atol, rtol, "gradient")
        except GradcheckError as exc:
            raise GradcheckError(f"{where}: the gradient rule {how}: {exc}") from None
    report.checks.append("gradient with and without its aux arrays vs finite differences")


def _check_double_backward_raises(f, flat, where):
    xs = tuple(x for x in flat if isinstance(x, TensorBase) and x.requires_grad)
    outs = tuple(o for o in _outputs(f(*flat)) if o.requires_grad)
    rng = np.random.default_rng(0)
    seeds = tuple(_with_value(o, rng.standard_normal(o.shape)) for o in outs)
    grads = run_backward(outs, seeds, True, True, xs, True)
    live = tuple(g for g in grads if g is not None and g.requires_grad)
    if not live:
        raise ContractError(
            f"{where}: the op is registered with twice_differentiable=False, but its gradient "
            f"taken with create_graph=True is connected to nothing, so differentiating it "
            f"cannot raise as it must")
    try:
        run_backward(live, tuple(_with_value(g, np.ones(g.shape, g.dtype)) for g in live),
                     False, False, xs, True)
    except RuntimeError as exc:
        if _NOT_TWICE in str(exc):
            return
        raise
    raise ContractError(
        f"{where}: the op is registered with twice_differentiable=False, but differentiating "
        f"its gradient did not raise")


def _worst_violation(got, expected, atol, rtol, shape):
    """(flat position, index in `shape`) of the entry of flat `got` furthest outside
    atol + rtol * |expected|, or None when every entry is within it."""
    excess = _complex_kit.excess_over_tolerance(got, expected, atol, rtol)
    if not (excess.size and excess.max() > 0):
        return None
    k = int(np.argmax(excess))
    return k, (tuple(int(v) for v in np.unravel_index(k, shape)) if len(shape) else ())


def _check_jvp(entry, sample, positions, where, report, atol, rtol, eps, *,
               reverse_over_forward=True):
    """The op's own JVP rule, if any, against J @ t with J from finite differences and
    against the VJP rule; with ``reverse_over_forward``, its own gradient too."""
    if not isinstance(entry, Op) or entry.jvp is None:
        return
    found = _sample_function(entry, sample, positions)
    if found is None:
        return
    f, flat = found
    wrt = _grad_positions(flat)
    rng = np.random.default_rng(1)
    tangents = [None] * len(flat)
    for i in wrt:
        tangents[i] = _with_value(flat[i], rng.standard_normal(flat[i].shape))
    with no_grad():
        ans = f(*flat)
        got = entry.jvp(tuple(tangents), ans, *flat, **sample.kwargs)
    if got is None or not isinstance(got, TensorBase):
        raise ContractError(f"{where}: the JVP rule returned {type(got).__name__}, not a Tensor")
    try:
        got = np.broadcast_to(_host(got), ans.shape)
    except ValueError:
        raise ContractError(f"{where}: the JVP rule returned shape {got.shape}, which does "
                            f"not broadcast to the output's shape {ans.shape}") from None
    (jac,) = numeric_jacobian(f, flat, wrt, eps)
    expected = sum(j @ _host(tangents[i]).reshape(-1) for i, j in zip(wrt, jac))
    got = got.reshape(-1).astype(np.float64)
    worst = _worst_violation(got, expected, atol, rtol, ans.shape)
    if worst is not None:
        k, index = worst
        raise GradcheckError(
            f"{where}: JVP check failed at output index {index}: rule {got[k]:.10g} vs "
            f"numeric {expected[k]:.10g}")
    report.checks.append("float64 JVP rule vs finite differences")
    _check_jvp_against_vjp(f, flat, wrt, tangents, got, ans, where, report, atol, rtol)
    if entry.twice_differentiable and reverse_over_forward:
        def rule_output(*xs):
            return entry.jvp(tuple(tangents), f(*xs), *xs, **sample.kwargs)
        try:
            gradcheck(rule_output, flat, eps=eps, atol=atol, rtol=rtol)
        except GradcheckError as exc:
            raise GradcheckError(f"{where}: the JVP rule's own gradient (reverse over "
                                 f"forward): {exc}") from None
        report.checks.append(_REVERSE_OVER_FORWARD)


def _check_jvp_against_vjp(f, flat, wrt, tangents, jv, ans, where, report, atol, rtol):
    """<u, J v> from the JVP rule equals <J^T u, v> from the VJP rule (the two rules are
    transposes of one linear map), for one random u."""
    u = np.random.default_rng(2).standard_normal(ans.shape)
    with enable_grad():
        out = f(*flat)
        grads = run_backward((out,), (_with_value(out, u),), True, False,
                             tuple(flat[i] for i in wrt), True)
    lhs = float(np.sum(u.reshape(-1) * jv))
    rhs = 0.0
    for i, g in zip(wrt, grads):
        if g is not None:
            rhs += float(np.sum(_host(g).astype(np.float64) * _host(tangents[i])))
    if abs(lhs - rhs) > atol * 10 + rtol * max(abs(lhs), abs(rhs)):
        raise GradcheckError(f"{where}: the JVP and VJP rules are not transposes: "
                             f"<u, J v> = {lhs:.10g} but <J^T u, v> = {rhs:.10g}")
    report.checks.append("JVP rule is the transpose of the VJP rule")


def _check_nondifferentiable(entry, sample, positions, where, report):
    refused = [i for i in getattr(entry, "not_implemented", ())
               if i < len(sample.args) and isinstance(sample.args[i], np.ndarray)
               and sample.args[i].dtype.kind == "f"]
    if refused:
        # An input whose derivative exists but is not implemented must refuse to require
        # grad (never a silent missing gradient); the other checks run with it detached.
        try:
            _call(entry, _tensors(sample, np.float64, range(len(sample.args))), sample.kwargs)
        except NotImplementedError:
            report.checks.append("refuses grad where the derivative is not implemented")
        else:
            raise ContractError(f"{where}: inputs {refused} are not_implemented but a tensor "
                                f"there that requires grad was accepted")
    args = _tensors(sample, np.float64,
                    [i for i in range(len(sample.args)) if i not in refused])
    flat, _ = _flatten_seq(args)
    floats = [i for i, x in enumerate(args) if isinstance(x, TensorBase) and x.dtype.kind == "f"]
    others = [i for i in floats if i not in positions]
    out = _call(entry, args, sample.kwargs)
    if not isinstance(out, TensorBase):
        return
    if not positions or (isinstance(entry, Op) and entry.vjp is None):
        if out.requires_grad:
            raise ContractError(f"{where}: a non-differentiable op returned a tensor that requires grad")
        report.checks.append("no gradient from a non-differentiable op")
        return
    if not others or not out.requires_grad:
        return
    out.backward(_with_value(out, np.ones(out.shape, out.dtype)))
    for i in others:
        if args[i].grad is not None:
            raise ContractError(f"{where}: input {i} is not differentiable but received a gradient")
    report.checks.append("no gradient for non-differentiable inputs")


def _check_float32(entry, sample, positions, where, report):
    args64 = _tensors(sample, np.float64, ())
    with no_grad():
        out64 = _call(entry, args64, sample.kwargs)
    args = _tensors(sample, np.float32, positions)
    out = _call(entry, args, sample.kwargs)
    if not isinstance(out, TensorBase):
        return
    had_float32 = any(
        (isinstance(a, TensorBase) and a.dtype == np.float32)
        or (isinstance(a, list) and any(t.dtype == np.float32 for t in a)) for a in args)
    if had_float32 and out64.dtype == np.float64 and "dtype" not in sample.kwargs:
        if out.dtype != np.float32:
            raise ContractError(f"{where}: float32 inputs gave a {out.dtype} result")
    if not np.allclose(_host(out), _host(out64), rtol=1e-3, atol=1e-4, equal_nan=True):
        raise ContractError(f"{where}: float32 result differs from float64 beyond float32 precision")
    if out.requires_grad:
        out.backward(_with_value(out, np.ones(out.shape, out.dtype)))
        flat, _ = _flatten_seq(args)
        for i, x in enumerate(flat):
            if isinstance(x, TensorBase) and x.grad is not None and x.grad.dtype != x.dtype:
                raise ContractError(f"{where}: input {i} is {x.dtype} but its gradient is {x.grad.dtype}")
    report.checks.append("float32")
    if isinstance(entry, Op) and entry.jvp is not None and entry.vjp is not None:
        _check_float32_jvp(entry, sample, args, where, report)


def _check_float32_jvp(op, sample, args, where, report):
    """The JVP rule itself (not only the engine, which casts) keeps a float32 output's
    dtype, with float32 tangents on the float inputs."""
    rng = np.random.default_rng(0)
    flat, _ = _flatten_seq(args)
    tangents = [new_tensor(_engine.default_device().asarray(
                    rng.standard_normal(flat[i].shape).astype(np.float32)), flat[i].device)
                if i in _grad_positions(flat) else None for i in range(len(flat))]
    with no_grad():
        ans = _call(op, args, sample.kwargs)
        got = op.jvp(tuple(tangents), ans, *flat, **sample.kwargs)
    if not isinstance(got, TensorBase) or got.dtype != ans.dtype:
        raise ContractError(f"{where}: on float32 inputs the JVP rule returned "
                            f"{getattr(got, 'dtype', type(got).__name__)}, the output is "
                            f"{ans.dtype}")
    report.checks.append("float32 JVP rule keeps the dtype")


# ---------------------------------------------------------------------------------------
# vmap: the batching rule (or the loop fallback) against one call per example
# ---------------------------------------------------------------------------------------

_BATCH = 3


def _vmap_usable():
    """vmap's batch-axis bookkeeping uses tapegrad-shape's reshape/transpose/stack; with
    the core alone (its isolation test) there is no vmap to check."""
    table = _engine.ops_table()
    return all(name in table for name in ("reshape", "transpose", "stack"))


def _examples(args, batched, rng):
    """_BATCH versions of the sample's arguments: a float array at a batched position is
    perturbed differently per example (a relative 1% with a fixed random pattern, which
    keeps a positive or a positive-definite input so); any other value is the same."""
    def vary(a, k):
        if isinstance(a, np.ndarray) and a.dtype.kind in "fc" and k:
            f = 1.0 + 0.01 * k * rng.uniform(-1.0, 1.0, a.shape)
            if a.dtype.kind == "c":
                # part by part: a complex product would turn inf + 1j y into NaN parts
                out = np.empty_like(a)
                out.real, out.imag = a.real * f, a.imag * f
                return out
            return np.asarray(a * f, a.dtype)
        return a
    out = []
    for k in range(_BATCH):
        ex = []
        for i, a in enumerate(args):
            if isinstance(a, (list, tuple)) and a and isinstance(a[0], np.ndarray):
                ex.append([vary(x, k) if batched(i) else x for x in a])
            else:
                ex.append(vary(a, k) if batched(i) else a)
        out.append(ex)
    return out


def _as_tensor(a, dev):
    if isinstance(a, np.ndarray):
        return _engine.new_tensor(dev.asarray(np.array(a)), dev)
    if isinstance(a, list) and a and isinstance(a[0], np.ndarray):
        return [_as_tensor(x, dev) for x in a]
    return a


_REFUSED = object()     # what _attempt_under_vmap returns for a clear refusal


def _attempt_under_vmap(run, where, what, check, report):
    """run()'s result, or _REFUSED where it refused with an error that names vmap (a value
    the op cannot batch: recorded in the report as "<check> refuses clearly"). Any other
    RuntimeError / NotImplementedError is a ContractError naming `what`. The loop
    fallback's warning is silenced: the kit compares values, and a fallback is exact."""
    import warnings

    from . import _batching
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _batching.BatchingFallbackWarning)
        try:
            return run()
        except (RuntimeError, NotImplementedError) as exc:
            if "vmap" not in str(exc):
                raise ContractError(f"{where}: {what} raised {type(exc).__name__}: "
                                    f"{exc}") from exc
    report.checks.append(f"{check} refuses clearly")
    return _REFUSED


def _check_batching(entry, sample, where, report):
    """vmap of the op over _BATCH examples equals the op called once per example: with
    every array input batched, and with each one alone batched (the others shared:
    the broadcasting a rule must get right). An op may instead refuse with an error that
    names vmap (RuntimeError / NotImplementedError): a value it cannot batch."""
    if not _vmap_usable() or isinstance(entry, FunctionDef):
        return
    from . import _batching
    dev = _engine.default_device()
    arrays = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray) or (
        isinstance(a, (list, tuple)) and a and isinstance(a[0], np.ndarray))]
    if not arrays:
        return
    rng = np.random.default_rng(0)
    modes = [("every array input batched", lambda i: i in arrays)]
    if len(arrays) > 1:
        # one input batched, the others shared: the broadcasting a rule must get right
        modes += [(f"only input {j} batched", lambda i, j=j: i == j) for j in arrays]
    for label, batched in modes:
        examples = _examples(sample.args, batched, rng)
        with no_grad():
            try:
                expected = [_host(_call(entry, [_as_tensor(a, dev) for a in ex], sample.kwargs))
                            for ex in examples]
            except Exception:
                continue        # the perturbed examples left the op's domain: nothing to compare
        stacked = []
        for i, a in enumerate(sample.args):
            if not batched(i):
                stacked.append(_as_tensor(a, dev))
            elif isinstance(a, np.ndarray):
                stacked.append(np.stack([ex[i] for ex in examples]))
            else:
                stacked.append([np.stack([ex[i][j] for ex in examples]) for j in range(len(a))])
        level = _batching.enter(_BATCH)
        try:
            logical = []
            for i, a in enumerate(stacked):
                if not batched(i):
                    logical.append(a)
                elif isinstance(a, np.ndarray):
                    logical.append(_batching.wrap(_as_tensor(a, dev), level))
                else:
                    logical.append([_batching.wrap(_as_tensor(x, dev), level) for x in a])
            with no_grad():
                out = _attempt_under_vmap(lambda: _call(entry, logical, sample.kwargs),
                                          where, f"under vmap ({label}) it", "vmap", report)
            if out is _REFUSED:
                return
        finally:
            _batching.exit(level)
        got_t, is_batched = _batching.physical(out, level)
        got = _host(got_t)
        want = np.stack(expected)
        if not is_batched or got.shape != want.shape or got.dtype != want.dtype or not np.allclose(
                got, want, rtol=1e-9, atol=1e-12, equal_nan=True):
            raise ContractError(
                f"{where}: vmap ({label}) differs from one call per example: got "
                f"{got.shape} {got.dtype}, expected {want.shape} {want.dtype}"
                + ("" if got.shape != want.shape else
                   f", max difference {np.max(np.abs(got - want)) if got.size else 0}"))
    report.checks.append("vmap equals a loop over examples")
    if isinstance(entry, Op) and entry.vjp is not None:
        _check_batched_vjp(entry, sample, where, report, dev, rng)


def _check_batched_vjp(op, sample, where, report, dev, rng):
    """Reverse mode inside vmap (vmap of a VJP: per-example gradients) equals the
    per-example VJPs: every differentiable float input batched and a leaf of the
    backward, a different cotangent per example."""
    from . import _batching
    wrt = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)
           and a.dtype.kind == "f" and op.is_differentiable(i)]
    if not wrt or op.seq_input:
        return
    examples = _examples(sample.args, lambda i: i in wrt, rng)
    expected, cots = [], []
    for ex in examples:
        xs = [_as_tensor(a, dev) for a in ex]
        for i in wrt:
            xs[i].requires_grad_(True)
        with enable_grad():
            try:
                out = _call(op, xs, sample.kwargs)
            except Exception:
                return      # the perturbed examples left the op's domain: nothing to compare
        if not out.requires_grad or out.dtype.kind != "f":
            return
        u = rng.standard_normal(out.shape)
        cots.append(u)
        grads = run_backward((out,), (_as_tensor(u.astype(out.dtype), dev),), None, False,
                             tuple(xs[i] for i in wrt), True)
        expected.append([np.zeros(xs[i].shape) if g is None else _host(g)
                         for g, i in zip(grads, wrt)])
    level = _batching.enter(_BATCH)
    try:
        xs = []
        for i, a in enumerate(sample.args):
            if i in wrt:
                x = _batching.wrap(_as_tensor(np.stack([ex[i] for ex in examples]), dev), level)
                xs.append(x.requires_grad_(True))
            else:
                xs.append(_as_tensor(a, dev))
        def per_example_grads():
            out = _call(op, xs, sample.kwargs)
            g = _batching.wrap(_as_tensor(np.stack(cots).astype(out.dtype), dev), level)
            return run_backward((out,), (g,), None, False, tuple(xs[i] for i in wrt), True)
        with enable_grad():
            grads = _attempt_under_vmap(per_example_grads, where, "its VJP inside vmap",
                                        "VJP inside vmap", report)
        if grads is _REFUSED:
            return
    finally:
        _batching.exit(level)
    for k, (gr, i) in enumerate(zip(grads, wrt)):
        want = np.stack([e[k] for e in expected])
        if gr is None:
            got = np.zeros_like(want)
        else:
            p, b = _batching.physical(gr, level)
            got = _host(p) if b else np.broadcast_to(_host(gr), want.shape)
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-9, atol=1e-12):
            raise ContractError(
                f"{where}: the gradient of input {i} computed inside vmap (per-example "
                f"gradients) differs from the per-example VJPs: shapes {got.shape} vs "
                f"{want.shape}" + ("" if got.shape != want.shape else
                                   f", max difference {np.max(np.abs(got - want))}"))
    report.checks.append("VJP inside vmap equals per-example VJPs")


# ---------------------------------------------------------------------------------------
# vmap by hand, for plugins' tests of their batching rules
# ---------------------------------------------------------------------------------------
# NOTE: tg.vmap is tapegrad-higher's, which a plugin's tests may not depend on; these
# drive the core's batch levels (tapegrad._batching) directly, as the kit's vmap check
# does.

def _mapped_axes(in_axes, args, who):
    axes = tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
    if len(axes) != len(args):
        raise ValueError(f"{who}: in_axes has {len(axes)} entries for {len(args)} arguments")
    sizes = {np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None}
    if len(sizes) != 1:
        raise ValueError(f"{who}: the mapped axes must have one size, got "
                         + (f"{sorted(sizes)}" if sizes else "no mapped argument (in_axes "
                            f"{in_axes!r})"))
    return axes, sizes.pop()


def vmap_call(f, in_axes=0, out_axes=0):
    """f mapped over axis ``in_axes[i]`` of its argument i (None: the argument is shared,
    passed as it is), with the mapped axis of each result at `out_axes`: tg.vmap's
    semantics for one batch level, without tapegrad-higher.

    - in_axes: an int for every argument, or one entry (int or None) per argument.
    - A mapped NumPy argument is moved with NumPy and made a tensor, so any axis works
      with the core alone; a mapped tensor (inside another vmap_call) at an axis other
      than 0 is moved with tg.moveaxis, which needs tapegrad-shape.
    - f returns a tensor or a tuple of tensors, each batched (a result that does not
      depend on the mapped arguments is an AssertionError here, where tg.vmap would
      broadcast it); the physical tensors come back, with the mapped axis at out_axes.
      A result that is a plain tensor (not requiring grad, not inside another batch or
      forward level) is moved with NumPy; any other result at out_axes other than 0 with
      tg.moveaxis (tapegrad-shape).

    >>> import numpy as np, tapegrad as tg
    >>> x, y = np.arange(6.0).reshape(2, 3), np.ones((3, 2))
    >>> tg.testing.vmap_call(lambda a, b: a + b, in_axes=(0, 1), out_axes=1)(x, y).numpy()
    array([[1., 4.],
           [2., 5.],
           [3., 6.]])
    """
    import tapegrad

    from . import _batching

    def mapped(*args):
        axes, size = _mapped_axes(in_axes, args, "vmap_call")
        dev = _engine.default_device()
        moved = []
        for a, ax in zip(args, axes):
            if ax is not None and not isinstance(a, TensorBase):
                a = _as_tensor(np.moveaxis(np.asarray(a), ax, 0), dev)
            elif ax not in (None, 0):
                a = tapegrad.moveaxis(a, ax, 0)
            moved.append(a)
        level = _batching.enter(size)
        try:
            result = f(*[a if ax is None else _batching.wrap(a, level)
                         for a, ax in zip(moved, axes)])
        finally:
            _batching.exit(level)
        outs = []
        for k, out in enumerate(result if isinstance(result, (tuple, list)) else (result,)):
            phys, batched = _batching.physical(out, level)
            if not batched:
                raise AssertionError(f"vmap_call: result {k} of {getattr(f, '__name__', f)} "
                                     f"is not batched (an op with a batched input must give "
                                     f"a batched output)")
            outs.append(_axis_moved(phys, out_axes))
        return tuple(outs) if isinstance(result, (tuple, list)) else outs[0]
    return mapped


def _axis_moved(phys, out_axes):
    """phys with its axis 0 at out_axes."""
    if out_axes == 0:
        return phys
    if not phys._tangents and not phys.requires_grad:
        return _with_value(phys, np.moveaxis(_host(phys), 0, out_axes))
    import tapegrad
    return tapegrad.moveaxis(phys, 0, out_axes)


def loop_call(f, in_axes=0, out_axes=0):
    """The reference for vmap_call: f called once per example on NumPy slices (axis
    ``in_axes[i]`` of argument i taken away; None: the argument as it is), the results
    (NumPy arrays, numbers or tensors; or a tuple of them) made NumPy arrays and stacked
    at `out_axes`. Nest it as vmap_call is nested.

    >>> import numpy as np, tapegrad as tg
    >>> x = np.arange(6.0).reshape(2, 3)
    >>> tg.testing.loop_call(np.sum, in_axes=1)(x)
    array([3., 5., 7.])
    """
    def looped(*args):
        axes, size = _mapped_axes(in_axes, args, "loop_call")
        hosts = [_host(a) if isinstance(a, TensorBase) and ax is not None else a
                 for a, ax in zip(args, axes)]
        outs = [f(*[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(hosts, axes)])
                for i in range(size)]

        def stacked(values):
            return np.stack([_host(v) if isinstance(v, TensorBase) else np.asarray(v)
                             for v in values], axis=out_axes)
        if outs and isinstance(outs[0], (tuple, list)):
            return tuple(stacked(column) for column in zip(*outs))
        return stacked(outs)
    return looped


@contextlib.contextmanager
def batching_fallbacks():
    """Record which ops vmap ran once per example (the loop fallback, exact and slow)
    instead of through a batching rule: yields a list that gets the op's name at each
    fallback, in order, while the block runs (a rule that falls back for the arguments it
    does not cover counts too).

    The fallback stacks the examples with tapegrad-shape's stack, so with the core alone
    an op that falls back fails after it is recorded.

    >>> import numpy as np, tapegrad as tg
    >>> with tg.testing.batching_fallbacks() as fallbacks:
    ...     _ = tg.testing.vmap_call(lambda a: a + a)(np.ones((2, 3)))
    >>> fallbacks
    []
    """
    from . import _batching
    real = _batching._loop
    seen = []

    def spy(op, *args, **kwargs):
        seen.append(op.name)
        return real(op, *args, **kwargs)
    # NOTE: a module that imported the fallback under its own name (tapegrad_shape.ops:
    # `from tapegrad._batching import _loop as _batch_loop`) would escape a patch of
    # _batching alone: every module-level name bound to it is patched
    bound = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict):
            bound += [(namespace, name) for name, value in list(namespace.items())
                      if value is real]
    for namespace, name in bound:
        namespace[name] = spy
    try:
        yield seen
    finally:
        for namespace, name in bound:
            namespace[name] = real


def grad_of(out, wrt, cotangent=None):
    """The gradient of ``<out, cotangent>`` with respect to `wrt` (a tensor, or a tuple
    of tensors for a tuple of gradients; None where out does not depend on one): what
    ``tg.grad(out, wrt, cotangent)`` gives, without tapegrad-higher. The graph is not
    kept (create_graph=False). cotangent: a tensor or an array of out's shape; default
    ones.

    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> tg.testing.grad_of(x + x + x, x, tg.tensor([1.0, -1.0]))
    tensor([ 3., -3.])
    """
    single = isinstance(wrt, TensorBase)
    inputs = (wrt,) if single else tuple(wrt)
    if cotangent is None:
        import tapegrad
        cotangent = tapegrad.ones_like(out)
    elif not isinstance(cotangent, TensorBase):
        cotangent = _as_tensor(np.asarray(cotangent, dtype=out.dtype), out.device)
    grads = run_backward((out,), (cotangent,), None, False, inputs, True)
    return grads[0] if single else tuple(grads)


def assert_same(got, want, rtol=1e-12, atol=None):
    """Assert that got (a tensor or an array) has want's shape and dtype, and its values
    within ``atol + rtol * |want|`` (atol: rtol unless given; NaNs must match).

    >>> import numpy as np, tapegrad as tg
    >>> tg.testing.assert_same(tg.tensor([1.0, 2.0]) + 1e-14, np.array([1.0, 2.0]))
    >>> tg.testing.assert_same(tg.tensor([1.0, 2.0], dtype="float32"), np.array([1.0, 2.0]))
    Traceback (most recent call last):
    ...
    AssertionError: shape (2,) dtype float32 differs from the expected (2,) float64
    """
    got = _host(got) if isinstance(got, TensorBase) else np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(f"shape {got.shape} dtype {got.dtype} differs from the expected "
                             f"{want.shape} {want.dtype}")
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol if atol is None else atol)


def check_plugin(plugin, *, atol=1e-5, rtol=1e-3, eps=1e-6) -> list:
    """Run check_op over every op and function a plugin registers (registering it first
    if it is not registered yet). Returns the reports; raises ContractError listing every
    failure."""
    name = LOADER.pm.get_name(plugin) if not isinstance(plugin, str) else plugin
    if name is None:
        name = register_plugin(plugin)
    entries = [op for op in _engine.ops_table().values() if op.plugin == name]
    entries += [f for f in LOADER.functions.values() if f.plugin == name]
    if not entries:
        raise ContractError(f"plugin '{name}' registers no ops or functions")
    reports, failures = [], []
    for entry in sorted(entries, key=lambda e: e.name):
        try:
            reports.append(check_op(entry, atol=atol, rtol=rtol, eps=eps))
        except AssertionError as exc:
            failures.append(f"- {entry.name}: {exc}")
    if failures:
        raise ContractError(f"plugin '{name}': {len(failures)} of {len(entries)} ops fail the "
                            f"contract:\n" + "\n".join(failures))
    return reports


# ---------------------------------------------------------------------------------------
# Documentation examples
# ---------------------------------------------------------------------------------------

DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def run_doctests(target):
    """Run the ``>>>`` examples of a module, or of a text file such as a README (a path),
    with the flags tapegrad's examples are written for (ELLIPSIS, NORMALIZE_WHITESPACE).
    Returns doctest's ``TestResults(failed, attempted)``.

    >>> import tapegrad.random
    >>> result = run_doctests(tapegrad.random)
    >>> result.failed, result.attempted > 0
    (0, True)
    """
    if isinstance(target, (str, Path)):
        return doctest.testfile(str(target), module_relative=False, optionflags=DOCTEST_FLAGS)
    return doctest.testmod(target, optionflags=DOCTEST_FLAGS)


# ---------------------------------------------------------------------------------------
# Forward mode
# ---------------------------------------------------------------------------------------

def check_jvp(f, inputs, tangents=None, *, reference=None, eps=1e-6, atol=1e-5, rtol=1e-3):
    """Check forward mode through f: the tangent that ``f(*inputs)`` gets when the inputs
    carry `tangents` (what ``tg.jvp(f, inputs, tangents)`` computes, through the engine
    and the ops' JVP rules) against central finite differences along the same tangents.

    Returns that tangent as a NumPy array (a tuple of them when f returns a tuple), so a
    test can assert more of it; raises GradcheckError naming the worst entry (output,
    index, forward mode vs numeric) on failure.

    - inputs: a tensor or a tuple of tensors, NumPy arrays (made tensors, as tg.tensor
      does) and numbers. Use float64: a float32 difference quotient is mostly rounding.
    - tangents: one per input, None where the input does not move (f gets it as it is,
      without a tangent: the rules see None there); default: a random normal tangent on
      every floating-point tensor input.
    - reference: a NumPy function taking the inputs as arrays (numbers as they are) and
      returning an array (or a tuple): the finite differences are taken of it instead of
      f, so the check does not trust the op's own kernel (np.linalg.qr for tg.linalg.qr).

    It needs nothing beyond the core and the ops f calls (forward mode is the engine's,
    tapegrad/_forward.py), so a plugin's own tests can use it.

    >>> import numpy as np, tapegrad as tg
    >>> tg.testing.check_jvp(lambda x, y: x + x + y, (np.array([1.0, 2.0]), np.array([3.0, 4.0])),
    ...                      (np.array([1.0, -1.0]), None))
    array([ 2., -2.])
    """
    from . import _forward

    dev = _engine.default_device()
    xs = [new_tensor(dev.asarray(x), dev) if isinstance(x, np.ndarray) else x
          for x in _as_inputs(inputs)]
    if tangents is None:
        rng = np.random.default_rng(0)
        tangents = [rng.standard_normal(x.shape) if isinstance(x, TensorBase)
                    and x.dtype.kind == "f" else None for x in xs]
    tangents = list(_as_inputs(tangents))
    if len(tangents) != len(xs):
        raise ValueError(f"check_jvp: {len(xs)} inputs but {len(tangents)} tangents (give "
                         f"None for an input that does not move)")
    ts = []
    for i, (x, t) in enumerate(zip(xs, tangents)):
        if t is None:
            ts.append(None)
            continue
        if not isinstance(x, TensorBase) or x.dtype.kind != "f":
            raise TypeError(f"check_jvp: input {i} ({type(x).__name__}) is not a "
                            f"floating-point tensor, so it cannot carry a tangent")
        host = _host(t) if isinstance(t, TensorBase) else np.asarray(t)
        if host.shape != x.shape:
            raise ValueError(f"check_jvp: tangent {i} has shape {host.shape}, its input "
                             f"{x.shape}")
        ts.append(host.astype(x.dtype))
    moving = [i for i, t in enumerate(ts) if t is not None]
    if not moving:
        raise ValueError("check_jvp: no input has a tangent, so there is nothing to check")

    level = _forward.enter_level()
    try:
        duals = list(xs)
        for i in moving:
            duals[i] = _forward.detached_dual(xs[i])
            _forward.set_tangent(duals[i], level, _with_value(xs[i], ts[i]))
        result = f(*duals)
        outs = _outputs(result)
        found = [_forward.tangent_of(o, level) for o in outs]
    finally:
        _forward.exit_level(level)
    got = [np.zeros(o.shape) if t is None else _host(t).astype(np.float64)
           for o, t in zip(outs, found)]

    def evaluate(values):
        with no_grad():
            if reference is not None:
                out = reference(*[_host(v) if isinstance(v, TensorBase) else v
                                  for v in values])
                out = out if isinstance(out, (tuple, list)) else (out,)
                return [np.asarray(o, dtype=np.float64) for o in out]
            return [_host(o).astype(np.float64) for o in _outputs(f(*values))]

    # NOTE: one input moved at a time (J v = sum_i J_i v_i): an input that only selects
    # (a +-1 target compared with == 1) would otherwise move off its values while the
    # others move, and the difference would read the others' derivative elsewhere
    numeric = None
    for i in moving:
        plus, minus = list(xs), list(xs)
        plus[i] = _with_value(xs[i], _host(xs[i]) + eps * ts[i])
        minus[i] = _with_value(xs[i], _host(xs[i]) - eps * ts[i])
        term = [(p - m) / (2 * eps) for p, m in zip(evaluate(plus), evaluate(minus))]
        numeric = term if numeric is None else [a + b for a, b in zip(numeric, term)]
    if len(numeric) != len(got):
        raise ValueError(f"check_jvp: f returns {len(got)} floating-point outputs but the "
                         f"reference {len(numeric)}")
    for r, (a, n) in enumerate(zip(got, numeric)):
        if a.shape != n.shape:
            raise GradcheckError(f"JVP check failed: output {r} has shape {a.shape}, the "
                                 f"finite differences {n.shape}")
        worst = _worst_violation(a.reshape(-1), n.reshape(-1), atol, rtol, a.shape)
        if worst is not None:
            k, index = worst
            raise GradcheckError(
                f"JVP check failed for output {r} at index {index}: forward mode "
                f"{a.reshape(-1)[k]:.10g} vs numeric {n.reshape(-1)[k]:.10g} (|difference| "
                f"{abs(a.reshape(-1)[k] - n.reshape(-1)[k]):.3g} > atol {atol} + rtol {rtol} "
                f"* |numeric|)")
    return tuple(got) if isinstance(result, (tuple, list)) else got[0]
