"""Fixtures shared by the cross-package tests."""

import pytest
from tapegrad import _engine


@pytest.fixture
def installed():
    """A list to append the names of ops a test installs; they are uninstalled after it."""
    names = []
    yield names
    for n in names:
        _engine.uninstall_op(n)
