import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing
from tapegrad import _engine


class Softsign:
    """A plugin as a test would write one: softsign(x) = x / (1 + |x|)."""

    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        registry.register_op(
            "softsign_t",
            kernels={"cpu": lambda x: x / (1.0 + np.abs(x))},
            vjp=_softsign_vjp,
            save_ans=False,
            samples=[(np.random.default_rng(3).standard_normal((3, 2)),)],
        )


def _softsign_vjp(g, ans, x):
    # d/dx x/(1+|x|) = 1/(1+|x|)^2, written with tapegrad ops (core add + helper ops).
    a = tg.ss_abs(x) + 1.0
    return (tg.ss_div(g, tg.ss_mul(a, a)),)


class SoftsignHelpers:
    """The elementwise ops the rule needs, so the test runs with the core alone."""

    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        pair = [(np.array([0.5, -1.5]), np.array([2.0, 3.0]))]
        registry.register_op("ss_sign", kernels={"cpu": np.sign}, nin=1,
                             samples=[(np.array([0.5, -1.5]),)])
        registry.register_op("ss_abs", kernels={"cpu": np.abs},
                             vjp=lambda g, ans, x: (tg.ss_mul(g, tg.ss_sign(x)),),
                             save_ans=False, samples=[(np.array([0.5, -1.5]),)])
        registry.register_op("ss_mul", kernels={"cpu": np.multiply},
                             vjp=lambda g, ans, x, y: (tg.ss_mul(g, y), tg.ss_mul(g, x)),
                             save_ans=False, samples=pair)
        registry.register_op("ss_div", kernels={"cpu": np.divide}, vjp=_div_vjp,
                             save_inputs=(False, True), samples=pair)


def _div_vjp(g, ans, x, y):
    gx = tg.ss_div(g, y)
    return gx, tg.ss_mul(tg.ss_mul(gx, ans), -1.0)


@pytest.fixture
def softsign():
    helpers = tg.register_plugin(SoftsignHelpers(), name="softsign-helpers")
    plugin = Softsign()
    name = tg.register_plugin(plugin, name="softsign")
    yield plugin
    tg.unregister_plugin(name)
    tg.unregister_plugin(helpers)


def test_runtime_plugin_adds_a_working_op(softsign):
    x = tg.tensor([1.0, -3.0], requires_grad=True)
    y = tg.softsign_t(x)
    assert np.allclose(y.numpy(), [0.5, -0.75])
    y.backward(tg.ones(2))
    assert np.allclose(x.grad.numpy(), [0.25, 1 / 16])
    assert x.softsign_t().tolist() == y.tolist()          # bound as a method too
    reports = tapegrad.testing.check_plugin(softsign)
    assert [r.name for r in reports] == ["softsign_t"]
    assert tg.registry().ops["softsign_t"].plugin == "softsign"


def test_unregistered_plugin_names_are_gone(softsign):
    tg.unregister_plugin("softsign")
    assert not hasattr(tg, "softsign_t")
    assert not hasattr(tg.Tensor, "softsign_t")
    tg.register_plugin(softsign, name="softsign")     # fixture teardown unregisters it


def test_duplicate_op_is_an_error_naming_both_plugins():
    class Dup:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            registry.register_op("add", kernels={"cpu": np.add}, vjp=lambda g, ans, x, y: (g, g))

    with pytest.raises(tg.PluginError, match="'add' is defined by both 'tapegrad' and 'dup'"):
        tg.register_plugin(Dup(), name="dup")
    assert "dup" not in tg.registry().plugins
    assert tg.registry().ops["add"].plugin == "tapegrad"


def test_override_replaces_explicitly():
    class Loud:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            registry.register_op("zeros_like", kernels={"cpu": np.zeros_like}, nin=1,
                                 override=True, samples=[(np.ones(2),)])

    name = tg.register_plugin(Loud(), name="loud")
    try:
        assert tg.registry().ops["zeros_like"].plugin == "loud"
    finally:
        tg.unregister_plugin(name)


def test_plugin_raising_in_its_hook_registers_nothing():
    class Broken:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            registry.register_op("half_made", kernels={"cpu": np.negative}, nin=1)
            raise RuntimeError("boom")

    with pytest.raises(tg.PluginError, match="broken.*boom"):
        tg.register_plugin(Broken(), name="broken")
    assert "half_made" not in tg.registry().ops


def test_bad_registration_is_reported():
    class BadKernels:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            registry.register_op("bad_k", kernels={"cpu": 3}, vjp=lambda g, ans, x: (g,))

    with pytest.raises(tg.PluginError, match="not callable"):
        tg.register_plugin(BadKernels(), name="bad-kernels")


def test_api_hook_adds_names():
    import types
    extra = types.SimpleNamespace(answer=42)

    class Api:
        @tg.hookimpl
        def tapegrad_api(self):
            return {"extra_api": extra}

    name = tg.register_plugin(Api(), name="api")
    try:
        assert tg.extra_api.answer == 42
    finally:
        tg.unregister_plugin(name)
    assert not hasattr(tg, "extra_api")


def test_kernel_for_an_op_defined_elsewhere_is_attached():
    class Extra:
        @tg.hookimpl
        def tapegrad_register_kernels(self, registry):
            registry.register_kernel("add", "cpu", np.add)

    with pytest.raises(tg.PluginError, match="kernel for 'add' on 'cpu' is registered by both"):
        tg.register_plugin(Extra(), name="extra")


def test_missing_op_error_names_the_plugin():
    err = _engine.missing_op_error("exp")
    assert isinstance(err, AttributeError) and isinstance(err, NotImplementedError)
    assert "tapegrad-elementwise" in str(err)
    with pytest.raises(AttributeError, match="no attribute or op 'no_such_op'"):
        tg.no_such_op


def test_op_call_is_a_table_lookup_not_a_hook_call(monkeypatch):
    from tapegrad import _plugins

    def fail(*a, **k):
        raise AssertionError("pluggy consulted on the per-op path")

    monkeypatch.setattr(_plugins.LOADER.pm, "hook", None)
    monkeypatch.setattr(_plugins.metadata, "entry_points", fail)
    x = tg.tensor([1.0], requires_grad=True)
    (x + 1.0).backward()
    assert x.grad.item() == 1.0


def _fake_plugin_env(tmp_path, module_source, dist="tapegrad-fake"):
    """A directory holding a module and a dist-info that announces it as a plugin."""
    (tmp_path / "fake_plugin_mod.py").write_text(textwrap.dedent(module_source))
    info = tmp_path / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[tapegrad]\nfake = fake_plugin_mod\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env.get("PYTHONPATH", "")
    return env


CHECK = ("import warnings; warnings.simplefilter('always');"
         "import tapegrad as tg; x = tg.tensor([1.0], requires_grad=True); (x + x).backward();"
         "print('WORKS', x.grad.item(), sorted(tg.registry().failed))")


def test_broken_entry_point_plugin_warns_and_the_rest_works(tmp_path):
    env = _fake_plugin_env(tmp_path, "raise ImportError('needs libfoo')\n")
    out = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "WORKS 2.0 ['tapegrad-fake']" in out.stdout
    assert "tapegrad-fake" in out.stderr and "needs libfoo" in out.stderr


def test_conflicting_entry_point_plugin_warns_naming_both(tmp_path):
    env = _fake_plugin_env(tmp_path, """
        import numpy as np, tapegrad as tg

        @tg.hookimpl
        def tapegrad_register_ops(registry):
            registry.register_op("add", kernels={"cpu": np.add}, vjp=lambda g, ans, x, y: (g, g))
    """)
    out = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "'add' is defined by both 'tapegrad' and 'tapegrad-fake'" in out.stderr


def test_strict_mode_makes_a_broken_plugin_fatal(tmp_path):
    env = _fake_plugin_env(tmp_path, "raise ImportError('needs libfoo')\n")
    env["TAPEGRAD_STRICT_PLUGINS"] = "1"
    out = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert "PluginError" in out.stderr and "tapegrad-fake" in out.stderr


def test_plugin_module_imported_before_tapegrad_is_registered_later(tmp_path):
    # A program whose first import is the plugin module: when that module imports tapegrad,
    # tapegrad finds the plugin half-imported (no hooks yet) and must register it later.
    env = _fake_plugin_env(tmp_path, """
        import numpy as np, tapegrad as tg

        @tg.hookimpl
        def tapegrad_register_ops(registry):
            registry.register_op("late_double", kernels={"cpu": lambda x: 2 * x},
                                 vjp=lambda g, ans, x: (g + g,), save_inputs=(False,),
                                 save_ans=False, samples=[(np.ones(2),)])
    """)
    script = ("import fake_plugin_mod; import tapegrad as tg;"
              "x = tg.tensor([1.0], requires_grad=True); tg.late_double(x).backward();"
              "print('LATE', x.grad.item(), 'tapegrad-fake' in tg.registry().plugins)")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "LATE 2.0 True" in out.stdout


def _fake_dists(tmp_path, **dists):
    """Several fake distributions, {dist name: module source}, each announcing its own
    module as a `tapegrad` entry point (first-party names shadow the installed ones)."""
    for i, (dist, source) in enumerate(dists.items()):
        mod = f"fake_mod_{i}"
        (tmp_path / f"{mod}.py").write_text(textwrap.dedent(source))
        info = tmp_path / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[tapegrad]\n{dist} = {mod}\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TAPEGRAD_STRICT_PLUGINS", None)
    return env


FIRST_PARTY_EXP = """
    import numpy as np, tapegrad as tg

    @tg.hookimpl
    def tapegrad_register_ops(registry):
        registry.register_op("exp", kernels={"cpu": np.exp}, vjp=lambda g, ans, x: (g * ans,))
        registry.register_op("log", kernels={"cpu": np.log}, vjp=lambda g, ans, x: (g / x,))
"""


def _third_party_exp(override):
    return f"""
    import numpy as np, tapegrad as tg

    @tg.hookimpl
    def tapegrad_register_ops(registry):
        registry.register_op("exp", kernels={{"cpu": lambda x: np.exp(x) + 100}}, nin=1,
                             override={override})
        registry.register_op("log", kernels={{"cpu": lambda x: np.log(x) + 100}}, nin=1,
                             override={override})
        registry.register_op("badop", kernels={{"cpu": lambda x: x}}, nin=1)
    """


PROBE = ("import warnings; warnings.simplefilter('always');"
         "import tapegrad as tg; r = tg.registry();"
         "print('OWNERS', r.ops['exp'].plugin, r.ops['log'].plugin, 'badop' in r.ops,"
         " tg.exp(tg.tensor(0.0)).item(), sorted(r.failed))")


def test_a_third_party_plugin_never_knocks_out_a_first_party_one(tmp_path):
    # "badplug" sorts before "tapegrad-elementwise": it used to register first and the
    # first-party plugin was skipped whole, the warning blaming it.
    env = _fake_dists(tmp_path, **{"badplug": _third_party_exp(False),
                                   "tapegrad-elementwise": FIRST_PARTY_EXP})
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "OWNERS tapegrad-elementwise tapegrad-elementwise False 1.0 ['badplug']" in out.stdout
    warning = [line for line in out.stderr.splitlines() if "PluginWarning" in line]
    assert len(warning) == 1, out.stderr
    assert "plugin 'badplug' was not loaded" in warning[0]
    assert "'exp', 'log' are defined by both 'tapegrad-elementwise' and 'badplug'" in warning[0]
    assert "kernel for" not in warning[0]          # one line per lost name, not per kernel


def test_a_third_party_plugin_overrides_a_first_party_name_only_explicitly(tmp_path):
    env = _fake_dists(tmp_path, **{"badplug": _third_party_exp(True),
                                   "tapegrad-elementwise": FIRST_PARTY_EXP})
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "OWNERS badplug badplug True 101.0 []" in out.stdout
    assert "PluginWarning" not in out.stderr


def test_importing_again_after_a_strict_mode_failure_raises_the_same_error(tmp_path):
    env = _fake_plugin_env(tmp_path, "raise ImportError('needs libfoo')\n")
    env["TAPEGRAD_STRICT_PLUGINS"] = "1"
    script = textwrap.dedent("""
        import os, warnings
        for attempt in (1, 2):
            try:
                import tapegrad
            except Exception as exc:
                print("FAIL", attempt, type(exc).__name__, "tapegrad-fake" in str(exc))
        del os.environ["TAPEGRAD_STRICT_PLUGINS"]
        warnings.simplefilter("ignore")
        import tapegrad as tg
        x = tg.tensor([1.0], requires_grad=True); (x + x).backward()
        print("WORKS", x.grad.item(), sorted(tg.registry().failed), tg.__version__)
    """)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "FAIL 1 PluginError True" in out.stdout and "FAIL 2 PluginError True" in out.stdout
    assert "WORKS 2.0 ['tapegrad-fake'] 0.1.0" in out.stdout


def test_unregistering_an_override_restores_the_method_too(times):
    class Loud:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            registry.register_op("times", kernels={"cpu": lambda x, y: 10 * x * y}, nin=2,
                                 override=True)

    original, original_method = tg.times, vars(tg.Tensor)["times"]
    x = tg.tensor([2.0])
    name = tg.register_plugin(Loud(), name="loud-times")
    assert tg.times(x, 3.0).item() == 60.0 and x.times(3.0).item() == 60.0
    tg.unregister_plugin(name)
    assert tg.times is original and vars(tg.Tensor)["times"] is original_method
    assert tg.times(x, 3.0).item() == 6.0 and x.times(3.0).item() == 6.0


class _LaterOp:
    """Defines `later_op` (x + 1) on the cpu."""

    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        registry.register_op("later_op", kernels={"cpu": lambda x: x + 1}, nin=1)


def _kernel_plugin(device, fn):
    class Kernels:
        @tg.hookimpl
        def tapegrad_register_kernels(self, registry):
            registry.register_kernel("later_op", device, fn)
    return Kernels()


def test_a_kernel_waiting_for_its_op_goes_away_with_its_plugin():
    name = tg.register_plugin(_kernel_plugin("cpu", lambda x: 100 * x), name="early-kernel")
    tg.unregister_plugin(name)
    later = tg.register_plugin(_LaterOp(), name="later-op")
    try:
        assert tg.later_op(tg.tensor([1.0])).item() == 2.0      # was 100.0
    finally:
        tg.unregister_plugin(later)


def test_a_waiting_kernel_for_a_device_the_op_defines_is_a_conflict_naming_both():
    name = tg.register_plugin(_kernel_plugin("cpu", lambda x: 100 * x), name="early-kernel")
    try:
        with pytest.raises(tg.PluginError,
                           match="kernel for 'later_op' on 'cpu' is registered by both 'early-kernel' and 'later-op'"):
            tg.register_plugin(_LaterOp(), name="later-op")
        assert "later_op" not in tg.registry().ops
    finally:
        tg.unregister_plugin(name)


def test_a_kernel_for_another_device_reattaches_when_its_op_is_registered_again():
    other = lambda x: x - 1   # noqa: E731
    name = tg.register_plugin(_kernel_plugin("other", other), name="other-kernel")
    try:
        for _ in range(2):        # the op's plugin comes and goes; the kernel stays with it
            later = tg.register_plugin(_LaterOp(), name="later-op")
            assert tg.registry().ops["later_op"].kernels["other"] is other
            tg.unregister_plugin(later)
        later = tg.register_plugin(_LaterOp(), name="later-op")
    finally:
        tg.unregister_plugin(name)
    assert "other" not in tg.registry().ops["later_op"].kernels
    tg.unregister_plugin(later)


@pytest.mark.parametrize("key", ["__version__", "_engine", "_private", "__getattr__"])
def test_api_hook_may_not_export_private_or_dunder_names(key):
    class Sneaky:
        @tg.hookimpl
        def tapegrad_api(self):
            return {key: 1}

    with pytest.raises(tg.PluginError, match=f"plugin 'sneaky'.*'{key}'.*private"):
        tg.register_plugin(Sneaky(), name="sneaky")
    assert "sneaky" not in tg.registry().plugins
    assert tg.__version__ == "0.1.0" and tg._engine is _engine


@pytest.mark.parametrize("key", ["tensor", "Tensor", "save"])
def test_api_hook_may_not_replace_a_core_name(key):
    class Sneaky:
        @tg.hookimpl
        def tapegrad_api(self):
            return {key: 1}

    before = getattr(tg, key)
    with pytest.raises(tg.PluginError, match=f"'{key}' is defined by both 'tapegrad' and 'sneaky'"):
        tg.register_plugin(Sneaky(), name="sneaky")
    assert getattr(tg, key) is before


def test_an_op_may_not_take_a_core_private_name():
    class Sneaky:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            registry.register_op("_engine", kernels={"cpu": np.negative}, nin=1)

    with pytest.raises(tg.PluginError, match="'_engine'.*'sneaky'"):
        tg.register_plugin(Sneaky(), name="sneaky")
    assert tg._engine is _engine
