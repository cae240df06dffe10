"""The fuzzers and the soak test run their short budgets by default and their long ones
with ``pytest --long`` or ``TAPEGRAD_LONG=1`` (docs/testing.md); the repository's
conftest.py runs the tests with one BLAS thread unless OPENBLAS_NUM_THREADS says otherwise."""

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# file: (the module's budget variable, short, long), as docs/testing.md lists them
BUDGETS = {
    "test_compile_fuzz.py": ("EXAMPLES", 1000, 3000),
    "test_views_inplace_fuzz.py": ("_EXAMPLES", 1000, 3000),
    "test_compile_fuzz_training_steps.py": ("_EXAMPLES", 500, 1500),
    "test_leaks.py": ("STEPS", 2_000, 10_000),
}


def _load(path, name):
    """A fresh copy of the module at `path` (its top level runs again, reading the
    environment as it is now)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("filename", sorted(BUDGETS))
def test_each_budget_is_short_by_default_and_long_with_tapegrad_long(filename, monkeypatch):
    variable, short, long = BUDGETS[filename]
    monkeypatch.delenv("TAPEGRAD_FUZZ_EXAMPLES", raising=False)
    monkeypatch.delenv("TAPEGRAD_LONG", raising=False)
    assert getattr(_load(REPO / "tests" / filename, "budget_short"), variable) == short
    monkeypatch.setenv("TAPEGRAD_LONG", "1")
    assert getattr(_load(REPO / "tests" / filename, "budget_long"), variable) == long


def test_the_long_option_sets_tapegrad_long_before_the_tests_are_imported(monkeypatch):
    monkeypatch.delenv("TAPEGRAD_LONG", raising=False)
    conftest = _load(REPO / "conftest.py", "repository_conftest")

    class Config:
        def __init__(self, long):
            self.long = long

        def getoption(self, name):
            assert name == "--long"
            return self.long

    conftest.pytest_configure(Config(False))
    assert "TAPEGRAD_LONG" not in os.environ
    conftest.pytest_configure(Config(True))
    assert os.environ["TAPEGRAD_LONG"] == "1"


def test_the_tests_run_with_one_blas_thread_unless_told_otherwise():
    # (threadpoolctl comes with scikit-learn, a test requirement: ci/requirements-test.txt)
    from threadpoolctl import threadpool_info

    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas, "NumPy's BLAS was not found"
    # conftest.py sets the variable (to 1) when it is missing
    assert {pool["num_threads"] for pool in blas} == {int(os.environ["OPENBLAS_NUM_THREADS"])}
