"""Every docstring example of the core runs as a test."""

import doctest
import importlib

import pytest

MODULES = ["tapegrad", "tapegrad._plugins", "tapegrad._grad_mode", "tapegrad._creation",
           "tapegrad._tensor", "tapegrad.function", "tapegrad.testing", "tapegrad._engine",
           "tapegrad.random", "tapegrad.serialization"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
