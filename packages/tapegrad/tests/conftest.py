"""Fixtures for the core's tests. They use only what the core registers (add,
sum_to_shape, broadcast_to, astype, zeros_like, ones_like) plus ops that the tests define
as plugins, so they pass with no plugin installed."""

import numpy as np
import pytest
import tapegrad as tg


class TimesPlugin:
    """A test plugin: `times(x, y)` = x * y, whose rule reads both inputs."""

    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        registry.register_op(
            "times",
            kernels={"cpu": np.multiply},
            vjp=lambda g, ans, x, y: (tg.times(g, y), tg.times(g, x)),
            save_ans=False,
            samples=[(np.random.default_rng(0).standard_normal((3, 4)),
                      np.random.default_rng(1).standard_normal(4))],
        )
        registry.register_op(
            "cube",
            kernels={"cpu": lambda x: x ** 3},
            vjp=lambda g, ans, x: (tg.times(g, tg.times(tg.times(x, x), 3.0)),),
            save_ans=False,
            samples=[(np.random.default_rng(2).standard_normal((2, 3)),)],
        )


@pytest.fixture
def times():
    """Registers the `times`/`cube` test plugin for one test."""
    name = tg.register_plugin(TimesPlugin(), name="test-times")
    yield tg.times
    tg.unregister_plugin(name)
