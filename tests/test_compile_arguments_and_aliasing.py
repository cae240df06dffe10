"""tg.compile, issue 13 items 14-20: a replay returns what the eager call would return
(outputs, .grad, parameters, optimizer state, version counters, raised errors) whatever
arguments it gets (by keyword, inside containers, aliasing closed-over tensors), whatever
the caller does with the results (in-place writes into views), and whatever changed
outside since it recorded (hooks, modules, optimizer state). Each test runs N calls of
the compiled function against N calls of the eager function on a fresh copy of the
same state, and compares bit for bit."""

import warnings

import numpy as np
import pytest
import tapegrad as tg


def _same(a, b):
    if a is None or b is None:
        assert a is None and b is None
        return
    a = a.numpy() if isinstance(a, tg.Tensor) else np.asarray(a)
    b = b.numpy() if isinstance(b, tg.Tensor) else np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert a.tobytes() == b.tobytes(), (a, b)


def _t(values, requires_grad=False):
    return tg.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


# -- 14: tensors passed by keyword or inside a tuple/list ----------------------------------

def test_a_tensor_passed_by_keyword_is_read_afresh_and_gets_its_gradient():
    def f(x, *, scale):
        return (x * scale).sum()

    compiled = tg.compile(f)
    rng = np.random.default_rng(0)
    for _ in range(3):
        xv, sv = rng.standard_normal(3), rng.standard_normal(3)
        runs = []
        for fn in (f, compiled):
            x, s = _t(xv, True), _t(sv, True)
            out = fn(x, scale=s)
            out.backward()
            runs.append((out, x.grad, s.grad))
        for a, b in zip(*runs):
            _same(a, b)
    assert compiled.cache_info().hits == 2


@pytest.mark.parametrize("container", [tuple, list])
def test_tensors_inside_a_tuple_or_list_argument_are_read_afresh(container):
    def f(pair, k=2.0):
        a, b = pair
        return (a * b * k).sum()

    compiled = tg.compile(f)
    rng = np.random.default_rng(1)
    for _ in range(3):
        av, bv = rng.standard_normal(2), rng.standard_normal(2)
        runs = []
        for fn in (f, compiled):
            a, b = _t(av, True), _t(bv, True)
            out = fn(container([a, b]))
            out.backward()
            runs.append((out, a.grad, b.grad))
        for x, y in zip(*runs):
            _same(x, y)
    assert compiled.cache_info().hits == 2


def test_the_same_tensor_twice_in_a_container_is_part_of_the_signature():
    def f(pair):
        a, b = pair
        a.add_(1.0)
        return a * b

    compiled = tg.compile(f)
    for fn_share in (False, True, False):
        results = []
        for fn in (f, compiled):
            a = _t([1.0, 2.0])
            b = a if fn_share else _t([1.0, 2.0])
            results.append(fn((a, b)))
        _same(results[0], results[1])


# -- 15: Adam(capturable=True) resumed with load_state_dict ---------------------------------

def _model_and_adam(seed):
    tg.manual_seed(seed)
    model = tg.nn.Linear(3, 2)
    return model, tg.optim.Adam(model.parameters(), lr=0.1, capturable=True)


def test_capturable_adam_after_load_state_dict_updates_the_loaded_state():
    rng = np.random.default_rng(2)
    batches = [tg.tensor(rng.standard_normal((4, 3))) for _ in range(8)]

    def make_step(model, opt):
        def step(x):
            opt.zero_grad()
            loss = (model(x) ** 2).sum()
            loss.backward()
            opt.step()
            return loss
        return step

    (me, oe), (mc, oc) = _model_and_adam(0), _model_and_adam(0)
    eager, compiled = make_step(me, oe), tg.compile(make_step(mc, oc))
    # a checkpoint of another run to resume from
    mo, oo = _model_and_adam(0)
    other = make_step(mo, oo)
    for x in batches[:2]:
        other(x)
    checkpoint = oo.state_dict()
    for i, x in enumerate(batches):
        if i == 4:
            oe.load_state_dict(checkpoint)
            oc.load_state_dict(checkpoint)
        _same(compiled(x), eager(x))
        for pc, pe in zip(mc.parameters(), me.parameters()):
            _same(pc, pe)
        sc, se = oc.state_dict()["state"], oe.state_dict()["state"]
        assert sc.keys() == se.keys()
        for k in sc:
            for name in se[k]:
                _same(np.asarray(sc[k][name]), np.asarray(se[k][name]))


# -- 16: in-place writes made by a replay bump version counters -----------------------------

def test_an_argument_written_in_place_by_a_replay_bumps_its_version():
    def f(x):
        x.mul_(2.0)
        return x + 1.0

    compiled = tg.compile(f)
    for _ in range(3):
        results = []
        for fn in (f, compiled):
            a = _t([1.0, 2.0], True)
            x = _t([3.0, 4.0])
            y = a * x                          # saves x for its gradient
            out = fn(x)
            results.append((out, x, x._version))
            with pytest.raises(RuntimeError, match="modified by an in-place operation"):
                y.sum().backward()
        _same(results[0][0], results[1][0])
        _same(results[0][1], results[1][1])
        assert results[0][2] == results[1][2] == 1


def test_an_optimizer_step_replayed_bumps_the_parameters_versions():
    def make(seed):
        tg.manual_seed(seed)
        model = tg.nn.Linear(2, 1)
        opt = tg.optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = model(x).sum()
            loss.backward()
            opt.step()
            return loss
        return model, step

    (me, se), (mc, sc) = make(0), make(0)
    sc = tg.compile(sc)
    x = _t([[1.0, 2.0]])
    for i in range(4):
        outside = [(p * p).sum() for p in me.parameters()], [(p * p).sum() for p in mc.parameters()]
        _same(sc(x), se(x))
        for pe, pc in zip(me.parameters(), mc.parameters()):
            _same(pc, pe)
            assert pc._version == pe._version
        for graphs in outside:
            for g in graphs:
                with pytest.raises(RuntimeError, match="modified by an in-place operation"):
                    g.backward()
    assert sc.cache_info().hits >= 2


# -- 17: outputs that alias an argument or a parameter --------------------------------------

def test_a_returned_view_of_a_leaf_argument_refuses_in_place_writes_like_eager():
    def f(x):
        return x.reshape(4)

    compiled = tg.compile(f)
    for call in range(3):
        errors = []
        for fn in (f, compiled):
            x = _t([[1.0, 2.0], [3.0, 4.0]], True)
            if fn is compiled and call == 0:
                with pytest.warns(tg.CompileWarning, match="output 0 is a view of an argument"):
                    y = fn(x)
            else:
                y = fn(x)
            with pytest.raises(RuntimeError) as err:
                y += 5.0
            errors.append(type(err.value))
            _same(x, np.array([[1.0, 2.0], [3.0, 4.0]]))
        assert errors[0] is errors[1]


def test_a_returned_view_of_an_argument_shares_its_version_without_grad():
    def f(x):
        return x.T

    compiled = tg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.CompileWarning)
        for _ in range(3):
            seen = []
            for fn in (f, compiled):
                x = _t([[1.0, 2.0], [3.0, 4.0]])
                y = fn(x)
                y += 5.0
                seen.append((x.numpy().copy(), x._version, y._version))
            assert seen[0][1:] == seen[1][1:] == (1, 1)
            _same(seen[0][0], seen[1][0])


def test_a_returned_parameter_is_the_parameter_itself():
    w = _t([1.0, 2.0], True)

    def f(x):
        return x * w, w

    compiled = tg.compile(f)
    for _ in range(3):
        with warnings.catch_warnings():
            # w is reached by x * w's gradient too: eagerly, see the next test
            warnings.simplefilter("ignore", tg.CompileWarning)
            y, p = compiled(_t([3.0, 4.0]))
        assert p is w
        with pytest.raises(RuntimeError, match="leaf"):
            p += 5.0
        w.grad = None
        (y.sum() + (p * p).sum()).backward()
        _same(w.grad, np.array([3.0 + 2.0, 4.0 + 4.0]))
        _same(w, np.array([1.0, 2.0]))


def test_a_returned_argument_that_other_outputs_reach_sums_its_gradient_like_eager():
    # eager sums x's three gradient terms in the engine's order; a replay returning x
    # itself would add the program's two first (found by tests/test_compile_fuzz.py)
    def f(x):
        return x * x, x

    compiled = tg.compile(f)
    rng = np.random.default_rng(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.CompileWarning)
        for _ in range(4):
            v = rng.standard_normal((2, 3))
            grads = []
            for fn in (f, compiled):
                x = _t(v, True)
                h, y = fn(x)
                assert y is x
                (h.sum() + y.sum()).backward()
                grads.append(x.grad)
            _same(grads[1], grads[0])


def test_an_output_written_in_place_inside_has_the_eager_version():
    def f(x):
        y = x * 2.0
        y.add_(1.0)
        return y

    compiled = tg.compile(f)
    for _ in range(3):
        assert compiled(_t([1.0]))._version == f(_t([1.0]))._version == 1


# -- 18: an argument sharing its array with a closed-over tensor ----------------------------

def test_an_argument_that_aliases_a_closed_over_tensor_when_it_records():
    w = _t([1.0, 2.0], True)

    def f(a):
        return (a * 10.0 + w * 3.0).sum()

    compiled = tg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.CompileWarning)
        for arg in (lambda: w.detach(), lambda: _t([5.0, 7.0]), lambda: w.detach(),
                    lambda: _t([-1.0, 0.5])):
            results = []
            for fn in (f, compiled):
                w.grad = None
                out = fn(arg())
                out.backward()
                results.append((out, w.grad))
            _same(results[0][0], results[1][0])
            _same(results[0][1], results[1][1])


# -- 19: hooks registered after a step recorded ---------------------------------------------

def test_a_hook_registered_after_recording_runs_in_later_calls():
    def make():
        w = _t([1.0, 2.0], True)

        def step(x):
            w.grad = None
            (w * x).sum().backward()
            return w.grad * 1.0
        return w, step

    (we, se), (wc, sc) = make(), make()
    sc = tg.compile(sc)
    x = _t([3.0, 4.0])
    seen_e, seen_c = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.CompileWarning)
        for i in range(5):
            if i == 2:
                we.register_hook(lambda g: seen_e.append(1) or g * 2.0)
                wc.register_hook(lambda g: seen_c.append(1) or g * 2.0)
            _same(sc(x), se(x))
            _same(wc.grad, we.grad)
    assert len(seen_c) == len(seen_e) == 3


def test_a_hook_registered_after_recording_runs_in_a_tg_grad_inside():
    def make():
        w = _t([1.0, 2.0], True)

        def f(x):
            (g,) = tg.grad((w * x).sum(), [w])
            return g * 1.0
        return w, f

    (we, fe), (wc, fc) = make(), make()
    fc = tg.compile(fc)
    x = _t([3.0, 4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.CompileWarning)
        for i in range(4):
            if i == 2:
                we.register_hook(lambda g: g * 2.0)
                wc.register_hook(lambda g: g * 2.0)
            _same(fc(x), fe(x))


# -- 20: modules that are not called --------------------------------------------------------

def test_a_module_appended_to_a_module_list_is_seen_by_the_next_call():
    class Net(tg.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = tg.nn.ModuleList([tg.nn.Linear(2, 2)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    tg.manual_seed(0)
    net = Net()
    compiled = tg.compile(lambda x: net(x))
    x = _t([[1.0, -1.0]])
    compiled(x), compiled(x)
    net.layers.append(tg.nn.Linear(2, 3))
    _same(compiled(x), net(x))
    assert compiled(x).shape == (1, 3)


def test_a_module_list_iterated_by_a_plain_function_and_appended_to_is_seen():
    tg.manual_seed(0)
    layers = tg.nn.ModuleList([tg.nn.Linear(2, 2)])

    def f(x):
        for layer in layers:               # the ModuleList itself is never called
            x = layer(x)
        return x

    compiled = tg.compile(f)
    x = _t([[1.0, -1.0]])
    compiled(x), compiled(x)
    layers.append(tg.nn.Linear(2, 2))
    _same(compiled(x), f(x))


def test_a_sub_module_replaced_in_a_module_that_is_not_called_is_seen():
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(2, 2), tg.nn.Tanh())

    def f(x):
        return model[0](x)                 # model is never called, model[0] is

    compiled = tg.compile(f)
    x = _t([[1.0, -1.0]])
    compiled(x), compiled(x)
    model[0] = tg.nn.Linear(2, 2)
    _same(compiled(x), f(x))


def test_a_weight_read_directly_and_replaced_is_seen_by_the_next_call():
    class Tied(tg.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = tg.nn.Linear(3, 2, bias=False)

        def forward(self, x):
            return x @ self.emb.weight.T          # emb itself is never called

    tg.manual_seed(0)
    net = Tied()
    compiled = tg.compile(lambda x: net(x))
    x = _t([[1.0, 2.0, 3.0]])
    compiled(x), compiled(x)
    net.emb.weight = tg.nn.Parameter(tg.ones((2, 3)))
    _same(compiled(x), net(x))

    emb = tg.nn.Linear(3, 2, bias=False)          # no module called at all

    def plain(x):
        return x @ emb.weight.T

    compiled = tg.compile(plain)
    compiled(x), compiled(x)
    emb.weight = tg.nn.Parameter(tg.ones((2, 3)) * 3.0)
    _same(compiled(x), plain(x))


# -- found by tests/test_compile_fuzz.py ----------------------------------------------------

def test_an_in_place_op_on_an_intermediate_in_grad_mode_replays_on_the_new_values():
    # _inplace's copy of the old value (mul_ saves it) was made outside the recording, so
    # every replay read the first call's copy.
    w = _t([1.0, 2.0], True)

    def f(x):
        h = x * w
        h.mul_(0.5)
        return h

    compiled = tg.compile(f)
    for k in (1.0, 2.0, 3.0):
        runs = []
        for fn in (f, compiled):
            w.grad = None
            out = fn(_t([k, -k]))
            out.sum().backward()
            runs.append((out, w.grad))
        _same(runs[1][0], runs[0][0])
        _same(runs[1][1], runs[0][1])


def test_an_in_place_op_that_gives_an_outside_tensor_a_grad_fn_runs_eagerly():
    w = _t([1.0, 2.0], True)

    def f(x):
        x[0] = w[1]                          # grad mode on: x now has a grad_fn
        return x * 3.0

    compiled = tg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.CompileWarning)
        for k in (1.0, 2.0, 3.0):
            runs = []
            for fn in (f, compiled):
                w.grad = None
                x = _t([k, k])
                out = fn(x)
                out.sum().backward()
                runs.append((out, x, x.requires_grad, x.grad_fn is None, w.grad))
            for a, b in zip(*runs):
                if isinstance(a, tg.Tensor):
                    _same(b, a)
                else:
                    assert a == b


def test_outputs_of_a_step_that_ran_backward_inside_require_grad_like_eager():
    def make():
        w = _t([1.0, 2.0], True)

        def step(x):
            w.grad = None
            loss = (w * x).sum()
            loss.backward()
            return loss
        return step

    eager, compiled = make(), tg.compile(make())
    for _ in range(3):
        le, lc = eager(_t([1.0, 1.0])), compiled(_t([1.0, 1.0]))
        _same(lc, le)
        assert (lc.requires_grad, lc.is_leaf) == (le.requires_grad, le.is_leaf) == (True, False)
        for loss in (le, lc):
            with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                loss.backward()


@pytest.mark.parametrize("make_opt", [
    lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: tg.optim.Adam(ps, lr=0.1, capturable=True),
])
def test_an_optimizer_whose_state_is_emptied_again_creates_it_again(make_opt):
    def make():
        w = _t([1.0, -2.0], True)
        opt = make_opt([w])
        empty = opt.state_dict()

        def step(x):
            opt.zero_grad()
            (w * w * x).sum().backward()
            opt.step()
            return w * 1.0
        return w, opt, empty, step

    (we, oe, ee, se), (wc, oc, ec, sc) = make(), make()
    sc = tg.compile(sc)
    for i in range(7):
        if i == 4:                           # resume from a checkpoint taken before step 1
            oe.load_state_dict(ee)
            oc.load_state_dict(ec)
        _same(sc(_t([1.0, 0.5])), se(_t([1.0, 0.5])))
        _same(wc, we)
        sde, sdc = oe.state_dict()["state"], oc.state_dict()["state"]
        assert sdc.keys() == sde.keys()
        for k in sde:
            assert sdc[k].keys() == sde[k].keys()
            for name in sde[k]:
                _same(np.asarray(sdc[k][name]), np.asarray(sde[k][name]))


def test_a_replay_that_writes_into_a_tensor_sharing_the_arguments_version_counter():
    # recorded with a plain argument, then called with w.detach(): the write into w
    # counts on the argument's version too, so abs's saved input is stale, as eagerly
    def make():
        w = tg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)

        def f(x):
            a = abs(x)
            with tg.no_grad():
                w[0] = x[1]
            return a
        return w, f

    (we, fe), (wc, fc) = make(), make()
    fc = tg.compile(fc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.CompileWarning)
        for call in range(4):
            seen = []
            for w, fn in ((we, fe), (wc, fc)):
                x = w.detach().requires_grad_() if call in (1, 3) else \
                    tg.tensor(np.full((2, 3), call + 2.0), requires_grad=True)
                try:
                    fn(x).sum().backward()
                    error = None
                except RuntimeError as exc:
                    error = "modified by an in-place operation" in str(exc)
                seen.append((error, x._version, w._version))
                _same(w, we)
            assert seen[0] == seen[1]
            assert seen[0][0] == (True if call in (1, 3) else None)


def test_a_closed_over_tensor_first_read_through_its_detach_still_gets_its_gradient():
    w = _t([1.0, 2.0], True)

    def f(x):
        return (w.detach() * x + w).sum()

    compiled = tg.compile(f)
    for k in (1.0, 2.0, 3.0):
        runs = []
        for fn in (f, compiled):
            w.grad = None
            out = fn(_t([k, k]))
            out.backward()
            runs.append((out, w.grad))
        _same(runs[1][0], runs[0][0])
        _same(runs[1][1], runs[0][1])


def test_an_argument_aliasing_a_tensor_read_through_its_detach_inside():
    # recorded with f(w.detach()): the code's w.detach() reads the argument's array, and
    # a replay with another argument read that one where eager reads w
    w = _t([1.0, 2.0])

    def f(x):
        x.add_(0.5)
        return w.detach() * 3.0

    compiled = tg.compile(f)
    we = _t([1.0, 2.0])

    def eager(x):
        x.add_(0.5)
        return we.detach() * 3.0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.CompileWarning)
        for call in range(4):
            outs = []
            for fn, v in ((eager, we), (compiled, w)):
                x = v.detach() if call == 0 else _t([10.0, 20.0])
                outs.append(fn(x))
            _same(outs[1], outs[0])
            _same(w, we)


def test_a_detach_of_an_argument_made_and_written_inside_still_replays():
    # a tensor made inside over an argument's array is not an alias from outside: the
    # call replays (no CompileWarning), and equals eager
    def f(x):
        d = x.detach()
        with tg.no_grad():
            d[0] = 5.0
        return x * 2.0

    compiled = tg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tg.CompileWarning)
        for k in (1.0, 2.0, 3.0):
            xe, xc = _t([k, k]), _t([k, k])
            _same(compiled(xc), f(xe))
            _same(xc, xe)
            assert xc._version == xe._version
    assert compiled.cache_info().hits == 2


def test_zero_grad_without_set_to_none_in_a_compiled_step_zeroes_the_current_grads():
    # the .grad that zero_grad(set_to_none=False) zeroes was baked in at record time: the
    # replays zeroed the first call's object and backward accumulated onto the live one
    def make():
        tg.manual_seed(0)
        model = tg.nn.Linear(3, 2)
        opt = tg.optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad(set_to_none=False)
            loss = model(x).sum()
            loss.backward()
            opt.step()
            return loss
        return model, step

    (me, se), (mc, sc) = make(), make()
    sc = tg.compile(sc)
    for i in range(5):
        x = tg.ones((2, 3)) * (i + 1.0)
        _same(sc(x), se(x))
        for pc, pe in zip(mc.parameters(), me.parameters()):
            _same(pc, pe)
            _same(pc.grad, pe.grad)
            assert pc.grad._version == pe.grad._version
    assert sc.cache_info().hits == 3


def test_an_output_that_is_a_view_of_a_tensor_made_inside_refuses_in_place_writes():
    # (found by tests/test_compile_fuzz.py) eagerly abs(x).T is a view in a graph, so
    # `y += 1` raises; a replay's output must not accept it silently
    def f(x):
        return abs(x).T

    compiled = tg.compile(f)
    for _ in range(3):
        errors = []
        for fn in (f, compiled):
            y = fn(_t([[1.0, -2.0]], True))
            try:
                y += 1.0
                errors.append(None)
            except RuntimeError:
                errors.append(RuntimeError)
        assert errors[0] is errors[1] is RuntimeError
