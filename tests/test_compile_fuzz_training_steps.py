"""Differential fuzzer for tg.compile, training steps (issue 13): a replay never returns
what eager would not. (tests/test_compile_fuzz.py is its twin for argument passing,
aliasing and what a caller does between calls.)

hypothesis draws small training-like programs -- elementwise ops, matmuls, a tiny
``tg.nn.Linear``, views, in-place writes into tensors the program made, ``no_grad``
blocks, random draws and ``tg.manual_seed`` inside, tensor hooks, a backward inside or
after the function, optimizers (SGD, SGD with momentum, Adam with ``capturable=True``),
the argument passed positionally, by keyword or in a tuple, a float argument that is
sometimes ``-0.0``, calls under ``no_grad`` (with ``enable_grad`` inside, or not) -- and
runs each twice from equal starting states: ``CALLS`` consecutive calls of the plain function, then ``CALLS`` calls
of the same function under ``tg.compile``, on the same sequence of inputs and with the
random generator seeded alike. After every call, everything a user could look at must be
equal bit for bit: the returned tensors (values, ``requires_grad``, graph or not), the
inputs' and parameters' values, ``.grad`` and version counters, the optimizer's state, and
the type of any exception raised.

The default profile is deterministic (``derandomize=True``): 500 programs, about 2 s
(1500 with ``--long`` / ``TAPEGRAD_LONG=1``, docs/testing.md);
``TAPEGRAD_FUZZ_EXAMPLES=N`` draws N random programs instead.
"""

import os
import warnings

import numpy as np
import tapegrad as tg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_N = os.environ.get("TAPEGRAD_FUZZ_EXAMPLES")
_LONG = os.environ.get("TAPEGRAD_LONG") == "1"
_EXAMPLES = int(_N) if _N else 1500 if _LONG else 500
FUZZ = settings(max_examples=_EXAMPLES, deadline=None, database=None,
                derandomize=not _N, suppress_health_check=list(HealthCheck))
CALLS = 4

# ---------------------------------------------------------------------------------------
# Programs. Values are numbered from the newest back (0: the last one made); the first
# values are the argument x (2, 3), the parameters w (3, 3) and b (3,), and a buffer z (3,)
# that does not require grad.
# ---------------------------------------------------------------------------------------

operand = st.integers(0, 6)
step = st.one_of(
    st.tuples(st.just("unary"), operand, st.sampled_from(["tanh", "sin", "scale", "exp"])),
    st.tuples(st.just("binary"), operand, operand, st.sampled_from(["add", "mul", "sub"])),
    st.tuples(st.just("matmul"), operand),
    st.tuples(st.just("linear"), operand),
    st.tuples(st.just("reduce"), operand, st.sampled_from(["sum0", "mean1", "sumall"])),
    st.tuples(st.just("view"), operand, st.sampled_from(["row", "T", "flat", "slice"])),
    st.tuples(st.just("inplace"), operand, operand, st.sampled_from(["add_", "mul_", "set"])),
    st.tuples(st.just("nograd"), operand),
    st.tuples(st.just("random"), operand, st.sampled_from(["normal", "dropout"])),
    st.tuples(st.just("hook"), operand),
    st.tuples(st.just("scalar"), operand),          # times the float argument c
    st.tuples(st.just("seed"), st.integers(0, 3)),  # tg.manual_seed inside
)
program = st.fixed_dictionaries({
    "steps": st.lists(step, min_size=1, max_size=8),
    "backward": st.sampled_from(["inside", "outside", "none"]),
    "optimizer": st.sampled_from(["none", "sgd", "momentum", "adam"]),
    "x_requires_grad": st.booleans(),
    "returns": st.sampled_from(["loss", "loss_and_last", "last"]),
    "pass_as": st.sampled_from(["positional", "keyword", "tuple"]),
    "c": st.lists(st.sampled_from([1.5, 0.0, -0.0]), min_size=4, max_size=4),
    "mode": st.sampled_from(["grad", "no_grad", "no_grad_enable_inside"]),
})


def _pick(k, n):
    return n - 1 - k % n


class State:
    """Everything a program reads from outside: parameters, a buffer, a module, an
    optimizer. Two States made from the same spec are equal bit for bit."""

    def __init__(self, spec):
        rng = np.random.default_rng(0)
        self.w = tg.tensor(rng.uniform(-1, 1, (3, 3)), requires_grad=True)
        self.b = tg.tensor(rng.uniform(-1, 1, 3), requires_grad=True)
        self.z = tg.zeros(3)
        self.linear = tg.nn.Linear(3, 3)
        with tg.no_grad():
            self.linear.weight[...] = rng.uniform(-1, 1, (3, 3))
            self.linear.bias[...] = rng.uniform(-1, 1, 3)
        params = [self.w, self.b] + list(self.linear.parameters())
        kind = spec["optimizer"]
        self.opt = (None if kind == "none" else
                    tg.optim.SGD(params, lr=0.1) if kind == "sgd" else
                    tg.optim.SGD(params, lr=0.1, momentum=0.9) if kind == "momentum" else
                    tg.optim.Adam(params, lr=0.01, capturable=True))
        self.params = params


def _body(spec, s, x, c):
    """The program, as a function of the State and the arguments."""
    if spec["mode"] == "no_grad_enable_inside":
        with tg.enable_grad():
            return _steps(spec, s, x, c)
    return _steps(spec, s, x, c)


def _steps(spec, s, x, c):
    vals = [x, s.w, s.b, s.z]
    made = set()                      # indexes of values the program made (in-place targets)
    views = set()
    if spec["backward"] == "inside" and s.opt is not None:
        s.opt.zero_grad()
    for st_ in spec["steps"]:
        kind = st_[0]
        a_i = _pick(st_[1], len(vals))
        a = vals[a_i]
        out = None
        if kind == "unary":
            out = (tg.tanh(a) if st_[2] == "tanh" else tg.sin(a) if st_[2] == "sin"
                   else a * 1.5 if st_[2] == "scale" else tg.exp(a * 0.3))
        elif kind == "binary":
            same = [k for k, v in enumerate(vals) if v.shape == a.shape]
            b = vals[same[_pick(st_[2], len(same))]]
            out = a + b if st_[3] == "add" else a * b if st_[3] == "mul" else a - b
        elif kind == "matmul" and a.ndim >= 1 and a.shape[-1] == 3:
            out = a @ s.w
        elif kind == "linear" and a.ndim >= 1 and a.shape[-1] == 3:
            out = s.linear(a)
        elif kind == "reduce":
            if st_[2] == "sum0" and a.ndim >= 1:
                out = a.sum(axis=0)
            elif st_[2] == "mean1" and a.ndim >= 2:
                out = a.mean(axis=1)
            elif st_[2] == "sumall":
                out = a.sum()
        elif kind == "view":
            if st_[2] == "row" and a.ndim == 2:
                out = a[1]
            elif st_[2] == "T" and a.ndim == 2:
                out = a.T
            elif st_[2] == "flat" and a.ndim == 2:
                out = a.reshape(-1)
            elif st_[2] == "slice" and a.ndim == 1 and a.shape[0] >= 2:
                out = a[1:]
            if out is not None:
                views.add(len(vals))
        elif kind == "inplace":
            targets = [k for k in made if k not in views]
            if targets:
                t_i = sorted(targets)[_pick(st_[1], len(targets))]
                t = vals[t_i]
                same = [v for v in vals if v.shape == t.shape]
                v = same[_pick(st_[2], len(same))]
                if st_[3] == "add_":
                    t.add_(v)
                elif st_[3] == "mul_":
                    t.mul_(v * 0.5)
                else:
                    t[...] = v
        elif kind == "nograd":
            with tg.no_grad():
                out = a * 2.0
        elif kind == "random":
            if st_[2] == "normal":
                out = a * tg.random.normal(size=tuple(a.shape))
            else:
                out = tg.nn.functional.dropout(a, p=0.5)
        elif kind == "hook" and a.requires_grad and a_i >= 4:
            a.register_hook(lambda g: g * 2.0)
        elif kind == "scalar":
            out = a * c
        elif kind == "seed":
            tg.manual_seed(st_[1])
        if out is not None:
            made.add(len(vals))
            vals.append(out)
    diff = [v for v in vals[4:] if v.requires_grad]
    loss = None
    if diff:
        loss = sum((v * (k + 1.0)).sum() for k, v in enumerate(diff))
        if spec["backward"] == "inside":
            loss.backward()
            if s.opt is not None:
                s.opt.step()
    last = vals[-1]
    if spec["returns"] == "loss":
        return loss
    if spec["returns"] == "last":
        return last
    return (loss, last) if loss is not None else last


def _observe(out, s, x):
    """What a user can see after a call, as plain Python/NumPy values."""
    outs = out if isinstance(out, tuple) else (out,)
    seen = [("out", None if o is None else (o.numpy().copy(), o.requires_grad, o.grad_fn is None))
            for o in outs]
    for name, t in [("x", x)] + [(f"p{k}", p) for k, p in enumerate(s.params)]:
        seen.append((name, t.numpy().copy(), None if t.grad is None else t.grad.numpy().copy(),
                     t._version))
    seen.append(("z", s.z.numpy().copy(), s.z._version))
    if s.opt is not None:
        for k, st_ in sorted(s.opt.state.items(), key=lambda kv: str(kv[0])):
            seen.append(("opt", {n: np.asarray(v).copy() for n, v in st_.items()}))
    return seen


def _calls(spec, fn, s):
    """CALLS calls of fn, each followed (as the program says) by a backward and an
    optimizer step outside it; returns what was observed after each."""
    tg.manual_seed(1234)
    rng = np.random.default_rng(99)
    record = []
    for call in range(CALLS):
        x = tg.tensor(rng.uniform(-1, 1, (2, 3)), requires_grad=spec["x_requires_grad"])
        c = spec["c"][call]
        try:
            with tg.set_grad_enabled(spec["mode"] == "grad"):
                out = (fn(x, c) if spec["pass_as"] == "positional" else
                       fn(x=x, c=c) if spec["pass_as"] == "keyword" else fn((x, c)))
            if spec["backward"] == "outside":
                loss = out[0] if isinstance(out, tuple) else out
                if loss is not None and loss.requires_grad and loss.size == 1:
                    if s.opt is not None:
                        s.opt.zero_grad()
                    loss.backward()
                    if s.opt is not None:
                        s.opt.step()
            record.append(_observe(out, s, x))
        except Exception as exc:     # the same error, in the same call, or the test fails
            record.append(("raised", type(exc).__name__))
            break
    return record


def _equal(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
                and np.array_equal(np.signbit(a), np.signbit(b)))
    if isinstance(a, (tuple, list)):
        return (isinstance(b, (tuple, list)) and len(a) == len(b)
                and all(_equal(p, q) for p, q in zip(a, b)))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return a == b


def _signature(spec, s):
    """The program as a function taking its arguments the way spec says."""
    if spec["pass_as"] == "tuple":
        return lambda xc: _body(spec, s, *xc)
    return lambda x, c: _body(spec, s, x, c)


def run_program(spec):
    """Eager calls vs compiled calls of one program; returns the compiled function."""
    eager_state, compiled_state = State(spec), State(spec)
    eager = _calls(spec, _signature(spec, eager_state), eager_state)
    compiled_fn = tg.compile(_signature(spec, compiled_state))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.CompileWarning)
        compiled = _calls(spec, compiled_fn, compiled_state)
    for call, (e, c) in enumerate(zip(eager, compiled)):
        if not _equal(e, c):
            what = [f"{p[0]}: eager {p[1:]} compiled {q[1:]}" for p, q in zip(e, c)
                    if not _equal(p, q)] if isinstance(e, list) and isinstance(c, list) else [
                        f"eager {e} compiled {c}"]
            raise AssertionError(f"call {call} differs for {spec}: " + "; ".join(what))
    assert len(eager) == len(compiled), f"{spec}: eager {eager[-1]}, compiled {compiled[-1]}"
    return compiled_fn


_ran = {"programs": 0, "replayed": 0}


@FUZZ
@given(program)
def test_compiled_calls_equal_eager_calls(spec):
    with np.errstate(all="ignore"):       # exp of a large value: inf, in both runs alike
        fn = run_program(spec)
    _ran["programs"] += 1
    _ran["replayed"] += fn.cache_info().hits > 0


def test_the_fuzzer_exercises_replays():
    """Run after the fuzz test (file order): most programs must really replay."""
    if _ran["programs"]:
        assert _ran["replayed"] >= _ran["programs"] // 2, _ran
