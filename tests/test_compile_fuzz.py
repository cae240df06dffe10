"""A differential fuzzer for tg.compile: hypothesis writes small programs and checks that N
consecutive calls of the compiled function equal N calls of the eager function, bit for
bit, each run on its own fresh copy of the same state ("world").

A program is a list of instructions over a register file of tensors: elementwise ops,
views, in-place writes (into intermediates, arguments and closed-over tensors, with and
without grad mode), setitem, reductions, random draws, pure hooks, detach, a tiny
module, and optionally a backward and an optimizer step (SGD with momentum, or
Adam(capturable=True)) inside. Its arguments come positionally, by keyword and inside a
tuple; a Python float argument changes between calls. Between and after calls the caller
does what users do: registers a hook, replaces a weight, appends to a ModuleList, switches
train/eval, changes the learning rate or Dropout's p, resumes the optimizer from a state
dict, calls under no_grad, passes a detached closed-over tensor as the argument,
backpropagates through the outputs, writes into an output, and backpropagates a graph
built before the call that saved a tensor the call may write.

Compared after every call: the error type raised (the call, the caller's backward and
its writes, as one unit), every output (bytes, dtype, shape, requires_grad, version, leaf),
every argument, closed-over tensor, parameter and .grad (bytes and versions), the
optimizer's state dict, and the next random number.

Budget: TAPEGRAD_FUZZ_EXAMPLES programs if set, else 1000 (about 5 s here) or, with
``--long`` / ``TAPEGRAD_LONG=1`` (docs/testing.md), 3000;
derandomized, so CI runs the same programs every time.

Not generated (fixes elsewhere, issue 13 items 21-27): threads, tg.manual_seed or
tg.enable_grad inside the function, value-dependent shapes, -0.0 as an argument, hooks
with side effects on tensors made inside, and the error timing of item 27 (an error that
eager raises in the backward after the call and the recording raises in the call: the
same error type is required, the rest of that program is not compared).
"""

import os
import warnings

import numpy as np
import tapegrad as tg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

LONG = os.environ.get("TAPEGRAD_LONG") == "1"
EXAMPLES = int(os.environ.get("TAPEGRAD_FUZZ_EXAMPLES", "3000" if LONG else "1000"))
SHAPE = (2, 3)
CALLS = 5

UNARY = {
    "tanh": tg.tanh, "sin": tg.sin, "relu": tg.relu, "neg": lambda t: -t,
    "square": lambda t: t * t, "abs": abs, "exp": lambda t: tg.exp(t * 0.1),
}
BINARY = {
    "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b,
    "max": tg.maximum,
}
VIEWS = {
    "reshape": lambda t: t.reshape(6).reshape(*SHAPE), "TT": lambda t: t.T.T,
    "slice": lambda t: t[:, :], "ellipsis": lambda t: t[...],
}


# -- programs ------------------------------------------------------------------------------

reg = st.integers(0, 15)            # taken modulo the number of registers at run time
const = st.sampled_from([0.5, 2.0, -1.5, 0.25])

instruction = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(sorted(UNARY)), reg),
    st.tuples(st.just("binary"), st.sampled_from(sorted(BINARY)), reg, reg),
    st.tuples(st.just("scalar"), st.sampled_from(["mul", "add"]), reg, const),
    st.tuples(st.just("view"), st.sampled_from(sorted(VIEWS)), reg),
    st.tuples(st.just("inplace"), st.sampled_from(["add_", "mul_"]), reg, const, st.booleans()),
    st.tuples(st.just("setitem"), reg, reg, st.booleans()),
    st.tuples(st.just("reduce"), reg),
    st.tuples(st.just("random"), reg),
    st.tuples(st.just("hook"), reg),
    st.tuples(st.just("detach"), reg),
    st.tuples(st.just("module"), reg),
    st.tuples(st.just("layers"), reg),
    st.tuples(st.just("dropout"), reg),
    st.tuples(st.just("kwscale"), reg),
    st.tuples(st.just("nograd_unary"), st.sampled_from(sorted(UNARY)), reg),
    st.tuples(st.just("tg_grad"), reg),
)

outside_action = st.sampled_from([
    "hook_w", "replace_weight", "load_state", "alias_arg", "no_grad_call", "append_layer",
    "eval_mode", "train_mode", "lr_change", "dropout_p",
    "write_output", "write_output_no_grad", "outside_graph", "nothing", "nothing",
])

program = st.fixed_dictionaries({
    "body": st.lists(instruction, min_size=1, max_size=10),
    "x_grad": st.booleans(),
    "kw": st.booleans(),
    "pair": st.booleans(),
    "inner_step": st.sampled_from([None, None, "sgd", "sgd_plain", "sgd_keep", "adam",
                                   "adam_plain"]),
    "returns": st.lists(st.integers(0, 15), min_size=1, max_size=2),
    "tuple_out": st.booleans(),
    "scale_changes": st.booleans(),
    "actions": st.lists(st.tuples(st.integers(0, CALLS - 1), outside_action), max_size=4),
})


# -- running one program in one world -------------------------------------------------------

class World:
    """The state a program runs against; built the same way for the eager and the
    compiled run."""

    def __init__(self, spec):
        rng = np.random.default_rng(0)
        self.w = tg.tensor(rng.standard_normal(SHAPE), requires_grad=True)   # closed over
        self.c = tg.tensor(rng.standard_normal(SHAPE))                       # closed over
        tg.manual_seed(0)
        self.model = tg.nn.Linear(3, 3)
        self.layers = tg.nn.ModuleList([tg.nn.Linear(3, 3)])      # iterated, not called
        self.drop = tg.nn.Dropout(0.5)
        params = [self.w] + list(self.model.parameters())
        self.opt = {
            None: lambda: None,
            "sgd": lambda: tg.optim.SGD(params, lr=0.1, momentum=0.9),
            "sgd_plain": lambda: tg.optim.SGD(params, lr=0.1),
            "sgd_keep": lambda: tg.optim.SGD(params, lr=0.1, momentum=0.5),
            "adam": lambda: tg.optim.Adam(params, lr=0.1, capturable=True),
            "adam_plain": lambda: tg.optim.Adam(params, lr=0.1),
        }[spec["inner_step"]]()
        self.saved_state = None
        self.log = []

    def tensors(self):
        return [self.w, self.c] + list(self.model.parameters()) + list(self.layers.parameters())


def _make_fn(spec, world):
    def fn(x, pair=None, *, k=None, scale=1.0):
        regs = [x, world.w, world.c]
        if k is not None:
            regs.append(k)
        if pair is not None:
            regs.extend(pair)
        for ins in spec["body"]:
            _execute(ins, regs, world, scale)
        outs = [regs[i % len(regs)] for i in spec["returns"]]
        if spec["inner_step"] is not None:
            loss = sum((o.sum() for o in outs), tg.zeros(()))
            if loss.requires_grad:
                world.opt.zero_grad(set_to_none=spec["inner_step"] != "sgd_keep")
                loss.backward()
                world.opt.step()
            return loss
        return tuple(outs) if spec["tuple_out"] else outs[0]
    return fn


def _execute(ins, regs, world, scale):
    kind = ins[0]
    r = lambda i: regs[i % len(regs)]        # noqa: E731
    if kind == "unary":
        regs.append(UNARY[ins[1]](r(ins[2])))
    elif kind == "binary":
        regs.append(BINARY[ins[1]](r(ins[2]), r(ins[3])))
    elif kind == "scalar":
        regs.append(r(ins[2]) * ins[3] if ins[1] == "mul" else r(ins[2]) + ins[3])
    elif kind == "view":
        regs.append(VIEWS[ins[1]](r(ins[2])))
    elif kind == "inplace":
        t = r(ins[2])
        if ins[4]:
            with tg.no_grad():
                getattr(t, ins[1])(ins[3])
        else:
            getattr(t, ins[1])(ins[3])
    elif kind == "setitem":
        t, v = r(ins[1]), r(ins[2])
        if ins[3]:
            with tg.no_grad():
                t[0] = v[1]
        else:
            t[0] = v[1]
    elif kind == "reduce":
        regs.append(r(ins[1]).sum(axis=0, keepdims=True) + tg.zeros(SHAPE))
    elif kind == "random":
        regs.append(r(ins[1]) * tg.random.rand(*SHAPE))
    elif kind == "hook":
        t = r(ins[1])
        if t.requires_grad and t.grad_fn is not None:
            t.register_hook(lambda g: g * 2.0)           # pure: no side effects
    elif kind == "detach":
        regs.append(r(ins[1]).detach())
    elif kind == "module":
        regs.append(world.model(r(ins[1])))
    elif kind == "layers":
        t = r(ins[1])
        for layer in world.layers:
            t = layer(t)
        regs.append(t)
    elif kind == "dropout":
        regs.append(world.drop(r(ins[1])))
    elif kind == "kwscale":
        regs.append(r(ins[1]) * scale)
    elif kind == "nograd_unary":
        with tg.no_grad():
            regs.append(UNARY[ins[1]](r(ins[2])))
    elif kind == "tg_grad":
        t = r(ins[1])
        if t.requires_grad:
            (g,) = tg.grad((t * t).sum(), [world.w], allow_unused=True)
            if g is not None:
                regs.append(g)


def _arguments(spec, world, call, aliased):
    rng = np.random.default_rng(1000 + call)
    if aliased:
        x = world.w.detach()
        if spec["x_grad"]:
            x = x.requires_grad_()
    else:
        x = tg.tensor(rng.standard_normal(SHAPE), requires_grad=spec["x_grad"])
    args, kwargs = [x], {"scale": [0.5, 2.0][call % 2] if spec["scale_changes"] else 0.5}
    if spec["pair"]:
        args.append((tg.tensor(rng.standard_normal(SHAPE), requires_grad=True),
                     tg.tensor(rng.standard_normal(SHAPE))))
    if spec["kw"]:
        kwargs["k"] = tg.tensor(rng.standard_normal(SHAPE), requires_grad=True)
    return args, kwargs


def _flat(out):
    if out is None:
        return []
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _describe(t):
    if t is None:
        return None
    a = t.numpy()
    return (a.dtype.str, a.shape, a.tobytes(), t.requires_grad, t.is_leaf, t._version,
            None if t.grad is None else (t.grad.numpy().tobytes(), t.grad.dtype.str))


def _snapshot(world, args, kwargs, outs, error):
    tensors = list(args[:1]) + (list(args[1]) if len(args) > 1 else []) + \
        ([kwargs["k"]] if "k" in kwargs else [])
    snap = {
        "error": error,
        "outs": [_describe(o) for o in outs],
        "args": [_describe(t) for t in tensors],
        "world": [_describe(t) for t in world.tensors()],
        "log": len(world.log),
        "rng": tg.random.rand(1).numpy().tobytes(),
    }
    if world.opt is not None:
        sd = world.opt.state_dict()
        snap["opt"] = sorted(
            (k, name, np.asarray(v).tobytes()) for k, s in sd["state"].items()
            for name, v in s.items())
    return snap


def _run(spec, compiled):
    world = World(spec)
    fn = _make_fn(spec, world)
    if compiled:
        fn = tg.compile(fn)
    actions = {}
    for call, action in spec["actions"]:
        actions.setdefault(call, set()).add(action)
    snaps = []
    for call in range(CALLS):
        todo = actions.get(call, set())
        if "hook_w" in todo:
            world.w.register_hook(lambda g: world.log.append(1) or g * 0.5)
        if "eval_mode" in todo:
            world.model.eval()
            world.drop.eval()
        if "train_mode" in todo:
            world.model.train()
            world.drop.train()
        if "lr_change" in todo and world.opt is not None:
            world.opt.param_groups[0]["lr"] = 0.05 * (call + 1)
        if "dropout_p" in todo:
            world.drop.p = 0.25
        if "append_layer" in todo:
            tg.manual_seed(call)
            world.layers.append(tg.nn.Linear(3, 3))
        if "replace_weight" in todo:
            world.model.weight = tg.nn.Parameter(tg.full((3, 3), 0.1 * (call + 1)))
        if "load_state" in todo and world.opt is not None and world.saved_state is not None:
            world.opt.load_state_dict(world.saved_state)
        args, kwargs = _arguments(spec, world, call, "alias_arg" in todo)
        outside = None
        if "outside_graph" in todo:
            outside = (world.w * world.c).sum() + (args[0] * world.w).sum()
        tg.manual_seed(100 + call)
        outs, error, stage = [], None, "call"
        try:
            if "no_grad_call" in todo:
                with tg.no_grad():
                    outs = _flat(fn(*args, **kwargs))
            else:
                outs = _flat(fn(*args, **kwargs))
            stage = "after"
            if spec["inner_step"] is None:
                need = [o for o in outs if o.requires_grad]
                if need:
                    sum((o.sum() for o in need), tg.zeros(())).backward()
            if "write_output" in todo and outs:
                outs[0] += 1.0
            if "write_output_no_grad" in todo and outs:
                with tg.no_grad():
                    outs[0] += 1.0
            if outside is not None:
                outside.backward()
        except Exception as exc:             # compared: the same type, or both none
            error = type(exc).__name__
            if "modified by an in-place operation" in str(exc):
                error += " (modified)"
        snaps.append(_snapshot(world, args, kwargs, outs, error))
        snaps[-1]["stage"] = stage
        if call == 0 and world.opt is not None:
            world.saved_state = world.opt.state_dict()
    return snaps


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(spec=program)
def test_compiled_calls_equal_eager_calls_bit_for_bit(spec):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = _run(spec, compiled=False)
        compiled = _run(spec, compiled=True)
    for call, (e, c) in enumerate(zip(eager, compiled)):
        if e["error"] is not None and e["error"] == c["error"] and \
                (e["stage"], c["stage"]) == ("after", "call"):
            # Item 27 (fixed in another branch): the recording's hidden backward raises in
            # the call what eager raises in the backward after it (a value modified in
            # place, a graph tg.grad freed); the state after is not compared.
            return
        for key in e:
            if key == "stage":
                continue
            if key == "outs" and e["error"] is not None and c["error"] is not None:
                continue     # raised in the call or in its backward (item 27: timing)
            assert c[key] == e[key], \
                f"call {call}: {key} differs: eager {e[key]!r}, compiled {c[key]!r}"
