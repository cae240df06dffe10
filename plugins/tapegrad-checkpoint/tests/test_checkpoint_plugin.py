"""The plugin as a whole: its entry point, the names it publishes, and the examples in its
docs."""

from importlib import metadata
from pathlib import Path

import pytest
import tapegrad as tg
import tapegrad_checkpoint
from tapegrad.testing import run_doctests
from tapegrad_checkpoint import checkpoint, memory, plugin, strategies

README = Path(__file__).resolve().parents[1] / "README.md"


def test_entry_point_resolves_to_the_plugin_module():
    (ep,) = [e for e in metadata.entry_points(group="tapegrad") if e.name == "checkpoint"]
    assert ep.load() is plugin
    assert "tapegrad-checkpoint" in tg.registry().plugins
    assert "tapegrad-checkpoint" not in tg.registry().failed


def test_it_publishes_checkpoint_checkpoint_sequential_and_memory():
    assert tg.checkpoint is checkpoint.checkpoint
    assert tg.checkpoint_sequential is checkpoint.checkpoint_sequential
    assert tg.memory is memory
    assert set(tapegrad_checkpoint.API) == {"checkpoint", "checkpoint_sequential", "memory"}


def test_tg_checkpoint_is_callable_and_carries_the_strategies():
    for name in ("SqrtN", "Every", "Selective", "Strategy", "Segment"):
        assert getattr(tg.checkpoint, name) is getattr(strategies, name)
    assert tg.checkpoint.CheckpointManager is checkpoint.CheckpointManager
    assert tg.checkpoint.checkpoint_sequential is tg.checkpoint_sequential
    assert isinstance(tg.checkpoint.SqrtN(), tg.checkpoint.Strategy)
    assert callable(tg.checkpoint)


@pytest.mark.parametrize("module", [tapegrad_checkpoint, checkpoint, strategies, memory],
                         ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    result = run_doctests(module)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_examples_run():
    result = run_doctests(README)
    assert result.attempted > 0
    assert result.failed == 0
