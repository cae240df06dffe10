"""The contract kit's complex checks (issue 18), run by ``tapegrad.testing.check_op`` for
an op registered with ``complex=True``.

The convention (docs/autograd.md, "Complex numbers"): for a real loss L of z = x + iy,
``z.grad = dL/dx + i dL/dy``, and a rule gets its output's cotangent in that form. A
cotangent w of output s is the gradient of ``L = Re(sum(conj(w) * s))`` (for a real s,
w is real), so the VJP is checked against central differences of that real L, taken
along the real and the imaginary part of each input element separately: nothing here
trusts a complex derivative formula, so a rule that misses a conjugate fails.

Samples: the op's explicit complex samples (a sample with a complex array among its
arguments) and ones derived from its float samples: each differentiable float array
becomes ``x + 1j*y`` (y random normal / 2, complex128), and, where it has several, one
with only the first made complex (a real input meeting a complex one: the engine's
real-part projection). A float sample whose result is already complex (tg.complex) is
checked as it is.

A registered *function* (register_function: a composition, with no rules of its own) is
checked on its explicit complex samples and on its float samples whose result is complex
(tg.sort_complex, tg.roots): the gradient, second derivatives, complex64 and vmap
checks, as an op's (no samples are derived for a function: a function declares that it
takes complex input by giving a complex sample). An op's JVP rule is also checked on
complex samples for its own gradient (reverse over forward: the VJP of the JVP rule
against complex finite differences), on its first two complex samples.
"""

from __future__ import annotations

import numpy as np

from . import _engine
from ._engine import TensorBase, new_tensor, run_backward
from ._grad_mode import enable_grad, no_grad
from ._plugins import Sample

_CHECKS = ("complex forward", "complex128 gradient vs finite differences (real and "
           "imaginary parts)", "complex128 second derivatives vs finite differences",
           "complex128 JVP rule vs finite differences", "complex JVP rule is the transpose "
           "of the VJP rule", "complex64 preserved",
           "complex128 JVP rule differentiable (reverse over forward)")
_REVERSE_OVER_FORWARD_SAMPLES = 2       # (as the real checks: the rule's graph, not values)


class _Failure(AssertionError):
    pass


def is_complex_sample(sample) -> bool:
    """Whether a sample has a complex array among its arguments (an explicit complex
    sample: the real checks skip it, the complex ones use it)."""
    for a in sample.args:
        arrays = a if isinstance(a, (list, tuple)) else (a,)
        if any(isinstance(x, np.ndarray) and x.dtype.kind == "c" for x in arrays):
            return True
    return False


class _FunctionAsOp:
    """A registered function seen through the attributes the complex checks read of an
    op: it is called as the function, differentiable where the function says, with no
    rules of its own (so no JVP rule to check) and differentiable twice."""

    jvp = None
    vjp = True                          # (not None: its gradient is checked)
    twice_differentiable = True

    def __init__(self, entry):
        self.entry = entry
        self.name = entry.name
        self.samples = entry.samples
        self.seq_input = False

    def is_differentiable(self, i):
        diff = self.entry.differentiable
        return diff is None or i in diff

    def __call__(self, *args, **kwargs):
        return self.entry.fn(*args, **kwargs)


def function_samples(fn) -> list:
    """The complex samples the kit checks a registered function (a _FunctionAsOp) with:
    its explicit complex samples and its float samples whose result is complex."""
    out = []
    for sample in fn.samples:
        if is_complex_sample(sample) or _complex_result(fn, sample):
            out.append(sample)
    return out


def complex_samples(op) -> list:
    """The complex samples the kit checks `op` with (see the module docstring)."""
    out = []
    for s, sample in enumerate(op.samples):
        if is_complex_sample(sample):
            out.append(sample)
            continue
        positions = [i for i, a in enumerate(sample.args) if op.is_differentiable(i) and (
            (isinstance(a, np.ndarray) and a.dtype.kind == "f") or (
                isinstance(a, list) and a and all(isinstance(x, np.ndarray)
                                                  and x.dtype.kind == "f" for x in a)))]
        if not positions:
            continue
        if _complex_result(op, sample):
            # real inputs, a complex result (tg.complex): the sample checks the complex
            # cotangent as it is; its inputs must stay real
            out.append(sample)
            continue
        rng = np.random.default_rng(100 + s)

        def cx(a):
            if isinstance(a, list):
                return [cx(x) for x in a]
            return np.asarray(a.astype(np.float64) + 0.5j * rng.standard_normal(a.shape))

        out.append(Sample(*[cx(a) if i in positions else a for i, a in enumerate(sample.args)],
                          **sample.kwargs))
        if len(positions) > 1:
            first = positions[0]
            out.append(Sample(*[cx(a) if i == first else a for i, a in enumerate(sample.args)],
                              **sample.kwargs))
    return out


def _complex_result(op, sample):
    with no_grad():
        out = op(*_tensors(op, sample), **sample.kwargs)
    return any(o.dtype.kind == "c" for o in _outputs(out))


def _tensors(op, sample, cast=None):
    """The sample as tensors that require grad where the op differentiates them."""
    dev = _engine.default_device()

    def one(a, grad):
        arr = np.array(a if cast is None else cast(a))
        return new_tensor(dev.asarray(arr), dev, grad and arr.dtype.kind in "fc")

    args = []
    for i, a in enumerate(sample.args):
        if isinstance(a, np.ndarray):
            args.append(one(a, op.is_differentiable(i)))
        elif isinstance(a, list) and a and isinstance(a[0], np.ndarray):
            args.append([one(x, op.is_differentiable(i)) for x in a])
        else:
            args.append(a)
    return args


def _flat(op, args):
    """(f, flat inputs): f takes the inputs flat (a sequence argument spread out)."""
    if op.seq_input:
        nseq = len(args[0])
        return (lambda *xs: op([list(xs[:nseq])] + list(xs[nseq:]), **{})), \
            list(args[0]) + list(args[1:])
    return (lambda *xs: op(*xs)), list(args)


def _outputs(result):
    outs = result if isinstance(result, (tuple, list)) else (result,)
    return [o for o in outs if isinstance(o, TensorBase) and o.dtype.kind in "fc"]


def _host(t):
    return np.array(t.device.to_numpy(t._data), copy=True)


def _value(like, host):
    return new_tensor(like.device.asarray(host), like.device, False)


def _random_like(shape, dtype, rng):
    v = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.standard_normal(shape)
    return v.astype(dtype)


def _loss(outs, ws):
    """L = sum_r Re(sum(conj(w_r) * out_r)) in float64 (the cotangents' real objective)."""
    return float(sum(np.sum(np.real(np.conj(w) * _host(o).astype(np.complex128)))
                     for o, w in zip(outs, ws)))


def _numeric_gradient(f, flat, wrt, ws, eps):
    """dL/dx + i dL/dy per input in wrt (dL/dx for a real one), central differences."""
    grads = []
    for i in wrt:
        base = _host(flat[i])
        g = np.zeros(base.shape, np.complex128 if base.dtype.kind == "c" else np.float64)
        parts = (1.0, 1j) if base.dtype.kind == "c" else (1.0,)
        for k in range(base.size):
            for part in parts:
                vals = []
                for sign in (1.0, -1.0):
                    pert = base.copy()
                    pert.reshape(-1)[k] += sign * eps * part
                    args = list(flat)
                    args[i] = _value(flat[i], pert)
                    with no_grad():
                        vals.append(_loss(f(*args), ws))
                g.reshape(-1)[k] += part * (vals[0] - vals[1]) / (2.0 * eps)
        grads.append(g)
    return grads


def excess_over_tolerance(got, expected, atol, rtol):
    """How far each entry of `got` (real or complex) lies outside atol + rtol * |expected|
    (<= 0: within); `expected` is the reference (finite differences, or the other rule).

    NOTE: NaN compares false with everything, so a plain `excess.max() > 0` let a rule that
    returns NaN pass every check. Here a NaN in `got` where `expected` is a number is an
    infinite excess. A NaN or infinite *reference* is no evidence either way (the function
    is NaN or blows up within eps of the sample: an all-NaN slice of nanvar, a pole), so
    that entry is accepted as before, and so is a NaN on both sides."""
    with np.errstate(invalid="ignore", over="ignore"):
        excess = np.abs(got - expected) - (atol + rtol * np.abs(expected))
    undefined = np.isnan(excess)
    if undefined.any():
        wrong_nan = np.isnan(got) & ~np.isnan(expected)
        excess = np.where(undefined, np.where(wrong_nan, np.inf, 0.0), excess)
    return excess


def _compare(got, want, atol, rtol, where, what, i):
    got = np.asarray(got, np.complex128)
    want = np.asarray(want, np.complex128)
    excess = excess_over_tolerance(got, want, atol, rtol)
    if excess.size and excess.max() > 0:
        k = int(np.argmax(excess))
        index = tuple(int(v) for v in np.unravel_index(k, want.shape)) if want.ndim else ()
        raise _Failure(f"{where}: {what} failed for input {i} at index {index}: analytic "
                       f"{got.reshape(-1)[k]:.10g} vs numeric {want.reshape(-1)[k]:.10g}")


def _check_vjp(f, flat, where, what, atol, rtol, eps, seed):
    """f's gradients (one backward with random cotangents) against _numeric_gradient.
    Returns (ws, analytic gradients)."""
    wrt = [i for i, x in enumerate(flat) if isinstance(x, TensorBase) and x.requires_grad]
    with enable_grad():
        every = _outputs(f(*flat))
    # NOTE: the outputs that carry a gradient, by position: the finite differences must
    # pair each cotangent with the same output (polydiv's constant quotient, an output that
    # does not require grad, comes first)
    used = [k for k, o in enumerate(every) if o.requires_grad]
    outs = [every[k] for k in used]
    rng = np.random.default_rng(seed)
    if wrt and every and not outs:
        # no output records a gradient: then none may depend on the inputs (a rule
        # computed on host values, or a detached result, would pass unseen otherwise)
        ws = [_random_like(o.shape, o.dtype, rng) for o in every]
        numeric = _numeric_gradient(lambda *xs: _outputs(f(*xs)), flat, wrt, ws, eps)
        for i, n in zip(wrt, numeric):
            _compare(np.zeros(n.shape), n, atol, rtol, where,
                     f"{what} (no output records a gradient, but finite differences move "
                     f"it)", i)
        return None
    if not outs or not wrt:
        return None
    ws = [_random_like(o.shape, o.dtype, rng) for o in outs]
    grads = run_backward(tuple(outs), tuple(_value(o, w) for o, w in zip(outs, ws)), True,
                         False, tuple(flat[i] for i in wrt), True)

    def used_outputs(*xs):
        result = _outputs(f(*xs))
        return [result[k] for k in used]

    numeric = _numeric_gradient(used_outputs, flat, wrt, ws, eps)
    for i, g, n in zip(wrt, grads, numeric):
        got = np.zeros(n.shape) if g is None else _host(g)
        if g is not None and (g.dtype != flat[i].dtype or g.shape != flat[i].shape):
            raise _Failure(f"{where}: {what}: the gradient of input {i} is {g.shape} "
                           f"{g.dtype}, the input {flat[i].shape} {flat[i].dtype}")
        _compare(got, n, atol, rtol, where, what, i)
    return ws


def _gradient_function(f, n, wrt):
    """(x..., w...) -> the gradients of f at x for cotangents w, recorded (create_graph)
    when called with grad-requiring inputs; fresh leaves for the finite differences."""
    def gradient(*args):
        xs = list(args[:n])
        for i in wrt:
            if not xs[i].requires_grad:
                xs[i] = new_tensor(xs[i]._data, xs[i].device, True)
        with enable_grad():
            outs = [o for o in _outputs(f(*xs)) if o.requires_grad]
            grads = run_backward(tuple(outs), tuple(args[n:]), True, True,
                                 tuple(xs[i] for i in wrt), True)
        return tuple(new_tensor(xs[i].device.zeros(xs[i].shape, xs[i].dtype), xs[i].device)
                     if g is None else g for i, g in zip(wrt, grads))
    return gradient


def involves_complex(f, inputs):
    """Whether an input that requires grad, or an output of f, is complex."""
    if any(isinstance(x, TensorBase) and x.requires_grad and x.dtype.kind == "c"
           for x in inputs):
        return True
    with no_grad():
        return any(o.dtype.kind == "c" for o in _outputs(f(*inputs)))


def gradcheck(f, inputs, eps, atol, rtol):
    """tapegrad.testing.gradcheck for complex inputs or outputs (see its docstring)."""
    from .testing import GradcheckError
    try:
        _check_vjp(f, list(inputs), "gradcheck", "complex gradient check", atol, rtol, eps,
                   seed=0)
    except _Failure as exc:
        raise GradcheckError(str(exc)) from None


def gradgradcheck(f, inputs, eps, atol, rtol):
    """tapegrad.testing.gradgradcheck for complex inputs or outputs: the gradient function
    (inputs, cotangents) -> gradients checked as gradcheck checks f."""
    from .testing import GradcheckError
    inputs = list(inputs)
    wrt = [i for i, x in enumerate(inputs) if isinstance(x, TensorBase) and x.requires_grad]
    with enable_grad():
        outs = [o for o in _outputs(f(*inputs)) if o.requires_grad]
    rng = np.random.default_rng(1)
    dev = _engine.default_device()
    ws = [new_tensor(dev.asarray(_random_like(o.shape, o.dtype, rng)), dev, True) for o in outs]
    try:
        _check_vjp(_gradient_function(f, len(inputs), wrt), inputs + ws, "gradgradcheck",
                   "complex second-order gradient check", atol, rtol, eps, seed=2)
    except _Failure as exc:
        raise GradcheckError(str(exc)) from None


def _check_jvp(op, f, flat, kwargs, where, atol, rtol, eps):
    wrt = [i for i, x in enumerate(flat) if isinstance(x, TensorBase) and x.requires_grad]
    rng = np.random.default_rng(3)
    tangents = [None] * len(flat)
    for i in wrt:
        tangents[i] = _value(flat[i], _random_like(flat[i].shape, flat[i].dtype, rng))
    with no_grad():
        ans = f(*flat)
        got = op.jvp(tuple(tangents), ans, *flat, **kwargs)
        if not isinstance(got, TensorBase):
            raise _Failure(f"{where}: the JVP rule returned {type(got).__name__}")
        got = np.broadcast_to(_host(got), ans.shape)
        vals = []
        for sign in (1.0, -1.0):
            args = list(flat)
            for i in wrt:
                args[i] = _value(flat[i], _host(flat[i]) + sign * eps * _host(tangents[i]))
            vals.append(_host(f(*args)).astype(np.complex128))
    numeric = (vals[0] - vals[1]) / (2.0 * eps)
    if ans.dtype.kind != "c":
        numeric = numeric.real
        if np.asarray(got).dtype.kind == "c":
            raise _Failure(f"{where}: the JVP rule returned a complex tangent for a real "
                           f"({ans.dtype}) output")
    _compare(got, numeric, atol, rtol, where, "complex JVP check", "(all)")
    # <u, J v> = <J^T u, v> in the real inner product Re(sum(conj(a) * b))
    u = _random_like(ans.shape, ans.dtype, rng)
    with enable_grad():
        out = f(*flat)
        grads = run_backward((out,), (_value(out, u),), True, False,
                             tuple(flat[i] for i in wrt), True)
    lhs = float(np.sum(np.real(np.conj(u) * got)))
    rhs = sum(float(np.sum(np.real(np.conj(_host(g)) * _host(tangents[i]))))
              for i, g in zip(wrt, grads) if g is not None)
    if abs(lhs - rhs) > atol * 10 + rtol * max(abs(lhs), abs(rhs)):
        raise _Failure(f"{where}: the complex JVP and VJP rules are not transposes: "
                       f"Re<u, J v> = {lhs:.10g} but Re<J^T u, v> = {rhs:.10g}")


def _single(x):
    if isinstance(x, np.ndarray) and x.dtype == np.complex128:
        return x.astype(np.complex64)
    if isinstance(x, np.ndarray) and x.dtype == np.float64:
        return x.astype(np.float32)
    return x


def _check_complex64(op, sample, where):
    args64 = _tensors(op, sample)
    with no_grad():
        out64 = op(*args64, **sample.kwargs)
    args = _tensors(op, sample, _single)
    out = op(*args, **sample.kwargs)
    if isinstance(op, _FunctionAsOp) and not is_complex_sample(sample):
        # real inputs, a complex result: its dtype is the function's own rule (NumPy's
        # sort_complex makes float32 complex128), so only the gradients' dtypes are checked
        _check_gradient_dtypes(op, args, out, where)
        return
    if isinstance(op, _FunctionAsOp) and isinstance(out, (tuple, list)):
        # (a function's several outputs: each checked as an op's single one)
        for k, (o, o64) in enumerate(zip(_outputs(out), _outputs(out64))):
            _check_single_output(o, o64, sample, f"{where} output {k}")
        return
    if not isinstance(out, TensorBase):
        return
    if out64.dtype == np.complex128 and "dtype" not in sample.kwargs \
            and out.dtype != np.complex64:
        raise _Failure(f"{where}: complex64 inputs gave a {out.dtype} result")
    if out64.dtype == np.float64 and "dtype" not in sample.kwargs and out.dtype != np.float32:
        raise _Failure(f"{where}: complex64 inputs gave a {out.dtype} result (float32 "
                       f"expected, as NumPy's)")
    if not np.allclose(_host(out).astype(np.complex128), _host(out64), rtol=1e-3, atol=1e-4,
                       equal_nan=True):
        raise _Failure(f"{where}: the complex64 result differs from complex128's beyond "
                       f"single precision")
    f, flat = _flat(op, args)
    if out.requires_grad:
        rng = np.random.default_rng(4)
        out.backward(_value(out, _random_like(out.shape, out.dtype, rng)))
        for i, x in enumerate(flat):
            if isinstance(x, TensorBase) and x.grad is not None and x.grad.dtype != x.dtype:
                raise _Failure(f"{where}: input {i} is {x.dtype} but its gradient is "
                               f"{x.grad.dtype}")
    if op.jvp is not None and op.vjp is not None:
        rng = np.random.default_rng(5)
        tangents = [_value(x, _random_like(x.shape, x.dtype, rng))
                    if isinstance(x, TensorBase) and x.requires_grad else None for x in flat]
        if any(t is not None for t in tangents):
            with no_grad():
                ans = op(*args, **sample.kwargs)
                got = op.jvp(tuple(tangents), ans, *flat, **sample.kwargs)
            if not isinstance(got, TensorBase) or got.dtype != ans.dtype:
                raise _Failure(f"{where}: on complex64 inputs the JVP rule returned "
                               f"{getattr(got, 'dtype', type(got).__name__)}, the output is "
                               f"{ans.dtype}")


def _check_gradient_dtypes(op, args, out, where):
    """Each single-precision input's gradient keeps its dtype."""
    outs = [o for o in _outputs(out) if o.requires_grad]
    if not outs:
        return
    f, flat = _flat(op, args)
    rng = np.random.default_rng(4)
    run_backward(tuple(outs), tuple(_value(o, _random_like(o.shape, o.dtype, rng))
                                    for o in outs), False, False)
    for i, x in enumerate(flat):
        if isinstance(x, TensorBase) and x.grad is not None and x.grad.dtype != x.dtype:
            raise _Failure(f"{where}: input {i} is {x.dtype} but its gradient is "
                           f"{x.grad.dtype}")


def _check_single_output(out, out64, sample, where):
    if out.shape != out64.shape:
        raise _Failure(f"{where}: the complex64 result has shape {out.shape}, the "
                       f"complex128 one {out64.shape}")
    if out64.dtype == np.complex128 and "dtype" not in sample.kwargs \
            and out.dtype != np.complex64:
        raise _Failure(f"{where}: complex64 inputs gave a {out.dtype} result")
    if not np.allclose(_host(out).astype(np.complex128), _host(out64), rtol=1e-3, atol=1e-4,
                       equal_nan=True):
        raise _Failure(f"{where}: the complex64 result differs from complex128's beyond "
                       f"single precision")


def _check_reverse_over_forward(op, g, flat, kw, where, atol, rtol, eps, seed):
    """The VJP of op's JVP rule (for fixed complex tangents) against complex finite
    differences of the rule's output: a rule computed outside the graph (NumPy on host
    values, a detached operand) fails here though its values pass."""
    wrt = [i for i, x in enumerate(flat) if isinstance(x, TensorBase) and x.requires_grad]
    # NOTE: a seed of its own: tangents equal to _check_vjp's cotangents (the same draw)
    # make conj(w) t real, which hides exactly the imaginary-part errors looked for here
    rng = np.random.default_rng(seed + 1000)
    tangents = [None] * len(flat)
    for i in wrt:
        tangents[i] = _value(flat[i], _random_like(flat[i].shape, flat[i].dtype, rng))

    def rule_output(*xs):
        return op.jvp(tuple(tangents), g(*xs), *xs, **kw)

    _check_vjp(rule_output, flat, where, "complex JVP rule's own gradient (reverse over "
               "forward)", atol, rtol, eps, seed=seed)


def check_complex_function(entry, report, atol, rtol, eps, *, check_batching):
    """The complex checks of a registered function (see the module docstring), appending
    to report.checks; a function with no complex sample is not checked here."""
    import warnings

    fn = _FunctionAsOp(entry)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        samples = function_samples(fn)
        if samples and _holds_complex(_engine.default_device()):
            _check_samples(fn, entry, samples, report, atol, rtol, eps, None,
                           check_batching)


def check_complex(op, report, atol, rtol, eps, *, check_forward, check_batching):
    """Run the complex checks over op's complex samples, appending to report.checks;
    raises GradcheckError / ContractError (through the caller's types) on a failure."""
    import warnings

    with warnings.catch_warnings():
        # NumPy's complex -> real casts (astype(float) of a complex sample) warn that they
        # drop the imaginary part: that is the semantics checked, not a failure
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        _check_all(op, report, atol, rtol, eps, check_forward, check_batching)


def _holds_complex(dev):
    """Whether device `dev` holds complex arrays (the cuda plugin's refuses them with a
    TypeError naming the device)."""
    try:
        dev.asarray(np.zeros(1, np.complex128))
    except TypeError as exc:
        if dev.name not in str(exc):
            from .testing import ContractError
            raise ContractError(f"device '{dev.name}' refuses complex arrays with an error "
                                f"that does not name it: {exc}") from exc
        return False
    return True


def _check_all(op, report, atol, rtol, eps, check_forward, check_batching):
    from .testing import ContractError

    if not _holds_complex(_engine.default_device()):
        # complex values cannot reach this device's kernels: what is checked is that the
        # device refuses them clearly (above); the complex rules are checked on cpu
        report.checks.append("complex refused by the device")
        return

    samples = complex_samples(op)
    if not samples:
        raise ContractError(f"'{op.name}' is registered with complex=True but has no sample "
                            f"to check it on complex inputs (a float sample in a "
                            f"differentiable position, or an explicit complex sample)")
    _check_samples(op, op, samples, report, atol, rtol, eps, check_forward, check_batching)


def _check_samples(op, entry, samples, report, atol, rtol, eps, check_forward,
                   check_batching):
    """The complex checks of op (an Op, or a function as a _FunctionAsOp whose registry
    entry is `entry`) on `samples`."""
    from .testing import GradcheckError

    for s, sample in enumerate(samples):
        where = f"'{op.name}' complex sample {s} {_describe(sample)}"
        if check_forward is not None:
            check_forward(op, sample, where, report)
        if op.vjp is None:
            continue
        args = _tensors(op, sample)
        f, flat = _flat(op, args)
        kw = sample.kwargs
        # (a seq_input op takes its sequence as the first argument: op([a, b], *rest))
        g = (lambda *xs, kw=kw, k=len(args[0]): op(list(xs[:k]), *xs[k:], **kw)
             ) if op.seq_input else (
            lambda *xs, kw=kw: op(*xs, **kw))
        try:
            ws = _check_vjp(g, flat, where, "complex gradient check", atol, rtol, eps, seed=s)
            if ws is None:
                continue
            report.checks.append(_CHECKS[1])
            if op.twice_differentiable:
                n = len(flat)
                wrt = [i for i, x in enumerate(flat) if isinstance(x, TensorBase)
                       and x.requires_grad]
                dev = _engine.default_device()
                wt = [new_tensor(dev.asarray(w), dev, True) for w in ws]
                _check_vjp(_gradient_function(g, n, wrt), flat + wt, where,
                           "complex second-order gradient check", atol, rtol, eps, seed=50 + s)
                report.checks.append(_CHECKS[2])
            if op.jvp is not None:
                _check_jvp(op, g, flat, kw, where, atol, rtol, eps)
                report.checks.append(_CHECKS[3])
                report.checks.append(_CHECKS[4])
                if op.twice_differentiable and \
                        report.checks.count(_CHECKS[6]) < _REVERSE_OVER_FORWARD_SAMPLES:
                    _check_reverse_over_forward(op, g, flat, kw, where, atol, rtol, eps,
                                                seed=70 + s)
                    report.checks.append(_CHECKS[6])
            _check_complex64(op, sample, where)
            report.checks.append(_CHECKS[5])
        except _Failure as exc:
            raise GradcheckError(str(exc)) from None
        check_batching(entry, sample, where, report)


def _describe(sample):
    return f"Sample({[(getattr(a, 'shape', a), getattr(a, 'dtype', None)) for a in sample.args]}, {sample.kwargs})"
