"""Every docstring example of the core runs as a test."""

import importlib

import pytest
from tapegrad.testing import run_doctests

MODULES = ["tapegrad", "tapegrad._plugins", "tapegrad._grad_mode", "tapegrad._creation",
           "tapegrad._tensor", "tapegrad.function", "tapegrad.testing", "tapegrad._engine",
           "tapegrad.random", "tapegrad.serialization", "tapegrad._compile",
           "tapegrad._array_kernels"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = run_doctests(module)
    assert result.failed == 0
