"""The examples in the docstrings and the README run as written."""

import doctest
from pathlib import Path

import pytest
import tapegrad_elementwise
from tapegrad_elementwise import ops, ufuncs

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.parametrize("module", [tapegrad_elementwise, ops, ufuncs], ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_example_runs():
    result = doctest.testfile(str(README), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
