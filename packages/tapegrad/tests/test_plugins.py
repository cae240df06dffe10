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
