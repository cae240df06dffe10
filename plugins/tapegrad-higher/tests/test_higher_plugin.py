"""The plugin as a whole: its entry point, the names it publishes, ops that are not twice
differentiable seen through its transforms, and the examples in its docs."""

from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_higher
from tapegrad.testing import run_doctests
from tapegrad_higher import autograd, forward, forward_ad, func, functional, plugin, vmap

README = Path(__file__).resolve().parents[1] / "README.md"


def test_entry_point_resolves_to_the_plugin_module():
    (ep,) = [e for e in metadata.entry_points(group="tapegrad") if e.name == "higher"]
    assert ep.load() is plugin
    assert "tapegrad-higher" in tg.registry().plugins
    assert "tapegrad-higher" not in tg.registry().failed


def test_it_publishes_the_transforms_as_tapegrad_names():
    assert tg.grad is autograd.grad
    for name in ("vjp", "jacobian", "hessian", "hvp"):
        assert getattr(tg, name) is getattr(functional, name)
    for name in ("jvp", "linearize", "jacfwd", "jacrev"):
        assert getattr(tg, name) is getattr(forward, name)
    assert tg.forward_ad is forward_ad
    assert tg.vmap is vmap.vmap and tg.func is func
    assert set(tapegrad_higher.API) == {"grad", "vjp", "jvp", "jacobian", "hessian", "hvp",
                                        "linearize", "jacfwd", "jacrev", "forward_ad", "vmap",
                                        "func"}


class Declared:
    """An op whose rule is right once and not differentiable: it says so."""

    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        registry.register_op(
            "cube_np", kernels={"cpu": lambda x: x ** 3},
            vjp=lambda g, ans, x: (g * tg.asarray(3.0 * np.asarray(x) ** 2),),
            twice_differentiable=False, save_ans=False,
            samples=[(np.array([0.5, -1.0]),)])


@pytest.fixture
def declared():
    name = tg.register_plugin(Declared(), name="test-declared")
    yield
    tg.unregister_plugin(name)


def test_second_derivatives_through_an_undeclared_op_raise_naming_it(declared):
    x = tg.tensor([0.5, -1.0])
    f = lambda z: tg.cube_np(z).sum()
    J = tg.jacobian(f, x)                                   # first derivatives work
    np.testing.assert_allclose(J.numpy(), 3 * x.numpy() ** 2)
    _, g = tg.vjp(f, x)
    np.testing.assert_allclose(g.numpy(), 3 * x.numpy() ** 2)
    for second in (lambda: tg.hessian(f, x), lambda: tg.hvp(f, x, tg.ones(2)),
                   lambda: tg.jvp(lambda z: tg.cube_np(z), x, tg.ones(2))):
        with pytest.raises(RuntimeError, match="'cube_np' is not twice differentiable"):
            second()


def test_a_tall_jacobian_through_an_undeclared_op_falls_back_to_rows(declared):
    x = tg.tensor([0.5])
    f = lambda z: tg.concatenate([tg.cube_np(z), z, z * 2.0])        # 3 x 1: columns first
    np.testing.assert_allclose(tg.jacobian(f, x).numpy(), [[0.75], [1.0], [2.0]])
    with pytest.raises(RuntimeError, match="not twice differentiable"):
        tg.jacobian(f, x, strategy="forward-mode")


@pytest.mark.parametrize("module", [tapegrad_higher, autograd, functional, func, vmap],
                         ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    result = run_doctests(module)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_examples_run():
    result = run_doctests(README)
    assert result.attempted > 0
    assert result.failed == 0
