"""tapegrad-fft as a plugin: it loads, publishes tg.fft with np.fft's names, its docstring
examples and README run, and the contract kit passes on every op and function."""

from pathlib import Path

import numpy as np
import tapegrad as tg
import tapegrad.testing
from tapegrad.testing import run_doctests

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_namespace_has_numpys_names():
    import tapegrad_fft
    names = [n for n in dir(np.fft) if not n.startswith("_") and callable(getattr(np.fft, n))
             and n != "test"]      # NumPy's test runner
    assert sorted(names) == sorted(tg.fft.__all__)
    assert tg.registry().failed == {} and tapegrad_fft.__version__


def test_docstring_examples_run():
    import tapegrad_fft
    from tapegrad_fft import fft
    for module in (tapegrad_fft, fft):
        result = run_doctests(module)
        assert result.failed == 0 and result.attempted > 0, module


def test_readme_example_runs():
    result = run_doctests(README)
    assert result.failed == 0 and result.attempted > 0


def test_contract_kit_passes_on_every_op():
    reports = tapegrad.testing.check_plugin("tapegrad-fft")
    names = {r.name for r in reports}
    assert {"fft_fft", "fft_rfft", "fft_irfft", "fft_hfft", "fft_ihfft", "fft_ifft",
            "fft_fftshift", "fft_ifftshift", "_fft_fit", "fft_fftn", "fft_rfftn"} <= names
    for r in reports:
        assert r.checks, r.name
