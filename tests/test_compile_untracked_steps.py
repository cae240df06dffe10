"""Recorded steps the cyclic GC need not see (issue 16: W1's first call, stable replays).

A recording's steps are untracked by the cyclic GC when everything they hold is a leaf
(see Note: [steps the cyclic GC need not see] in _compile.pyx). What must hold:

- a chain's kernel steps are untracked, so the first collection after a recording does
  not walk them (and replays still equal eager bit for bit);
- a step that holds something that could lead back to it (a closure as kernel) stays
  tracked, and a reference cycle through it is still collected;
- a cycle around a compiled function (the function refers to its compiled self) is
  still collected, untracked steps and all.

References: eager calls (bit for bit), and weak references that die only if the GC
frees what they point at.
"""

import gc
import weakref

import numpy as np
import tapegrad as tg
from tapegrad import _compile, _engine
from tapegrad.testing import Sample


def _chain(x):
    for _ in range(20):
        x = tg.tanh(tg.sin(x) * 1.5 + 0.25) - 0.25
    return x.sum()


def _steps(program):
    out = []
    for steps in (program.forward, program.backward, program.forward_run,
                  program.backward_run):
        for st in steps or ():
            out.append(st)
            out.extend(st.sub or ())
    return out


def _only_program(compiled):
    (program,) = compiled.programs()      # (one signature, recorded once)
    return program


def test_a_chains_steps_are_untracked_and_its_replays_equal_eager():
    x0 = np.random.default_rng(0).standard_normal(16)
    compiled = tg.compile(_chain)
    for call in range(3):
        xe = tg.tensor(x0 + call, requires_grad=True)
        xc = tg.tensor(x0 + call, requires_grad=True)
        le = _chain(xe)
        le.backward()
        lc = compiled(xc)
        lc.backward()
        assert np.array_equal(le.numpy(), lc.numpy())
        assert np.array_equal(xe.grad.numpy(), xc.grad.numpy())
    steps = _steps(_only_program(compiled))
    kernels = [st for st in steps if st.describe()[0] in ("kernel", "fused")]
    assert len(kernels) > 100
    assert all(_compile._untracked(st) for st in kernels)
    assert all(not gc.is_tracked(st.idx) for st in kernels)
    # nothing the GC tracks holds a kernel step: the collector would find it otherwise
    tracked_steps = [o for o in gc.get_objects() if type(o).__name__ == "_Step"
                     and any(o is st for st in kernels)]
    assert tracked_steps == []


def test_a_step_whose_kernel_is_a_closure_stays_tracked_and_its_cycle_is_collected(installed):
    X = np.linspace(-1.0, 1.0, 5)

    class Holder:
        pass

    holder = Holder()

    def kernel(x):
        holder.seen = True          # the closure reaches holder, which holds the function
        return 3.0 * x

    name = "_untrack_closure_kernel"
    op = _engine.Op(name, "tests", {"cpu": kernel}, lambda g, ans, x: (g * 3.0,),
                    lambda tangents, ans, x: tangents[0] * 3.0,
                    1, False, (), None, False, True, [Sample(X)], "", None, True)
    _engine.install_op(op)
    installed.append(name)

    def fn(x):
        return op(x).sum()

    holder.compiled = compiled = tg.compile(fn)     # holder -> compiled -> step -> kernel
    x = tg.tensor(X, requires_grad=True)
    compiled(x).backward()
    compiled(tg.tensor(X, requires_grad=True)).backward()
    assert np.array_equal(x.grad.numpy(), np.full(5, 3.0))
    steps = [st for st in _steps(_only_program(compiled)) if st.fn is kernel]
    assert steps and all(not _compile._untracked(st) for st in steps)
    ref = weakref.ref(holder)
    del holder, compiled, kernel, steps, op
    gc.collect()
    assert ref() is None            # the cycle through the step was found and freed


def test_a_cycle_around_a_compiled_function_is_still_collected():
    weights = np.linspace(0.5, 2.0, 4)      # held by the program only, once deleted here

    def fn(x):
        return (tg.sin(x) * weights).sum()

    compiled = tg.compile(fn)
    fn.compiled = compiled          # fn -> compiled -> fn: a cycle around the program
    x = tg.tensor(np.ones(4), requires_grad=True)
    compiled(x).backward()
    compiled(tg.tensor(np.ones(4), requires_grad=True)).backward()
    assert np.allclose(x.grad.numpy(), weights * np.cos(np.ones(4)))
    assert any(_compile._untracked(st) for st in _steps(_only_program(compiled)))
    refs = [weakref.ref(compiled), weakref.ref(weights)]
    del fn, compiled, weights
    gc.collect()
    assert [r() for r in refs] == [None, None]
