"""tapegrad-scipy as a plugin: the contract kit over everything it registers, the
entry point, the tg.scipy namespace, the flat names, integrate's refusal and the docs."""

from importlib import metadata
from pathlib import Path

import pytest
import tapegrad as tg
from tapegrad.testing import run_doctests

import tapegrad_scipy
from tapegrad_scipy import linalg, plugin, signal, special, stats

README = Path(__file__).resolve().parents[1] / "README.md"


def test_contract_kit_passes_for_every_op_and_function(contract_reports):
    reports = list(contract_reports.values())
    names = {r.name for r in reports}
    assert {"gammaln", "polygamma", "xlogy", "scipy_special_logsumexp",
            "scipy_stats_norm_logpdf",
            "scipy_signal_convolve"} <= names
    for report in reports:
        assert "float64 gradient vs finite differences" in report.checks, report.name
        assert "float32" in report.checks, report.name


def test_entry_point_resolves_to_the_plugin_module():
    (ep,) = [ep for ep in metadata.entry_points(group="tapegrad") if ep.name == "scipy"]
    assert ep.value == "tapegrad_scipy.plugin"
    assert ep.load() is plugin
    assert "tapegrad-scipy" in tg.registry().plugins


def test_tg_scipy_publishes_the_submodules():
    assert tg.scipy.special is special and tg.scipy.stats is stats
    assert tg.scipy.linalg is linalg and tg.scipy.signal is signal
    assert tg.scipy.special.gammaln is tg.gammaln         # plain flat name
    assert tg.registry().ops["erf"].plugin == "tapegrad-scipy"


def test_names_that_first_party_plugins_use_are_not_taken():
    ops = tg.registry().ops
    # nn's softmax/log_softmax/logsumexp keep their meaning; scipy's have their own names.
    # (tapegrad-nn need not be installed: this plugin does not depend on it.)
    for name in ("softmax", "log_softmax", "logsumexp"):
        assert name not in ops or ops[name].plugin != "tapegrad-scipy"
        assert ops[f"scipy_special_{name}"].plugin == "tapegrad-scipy"


def test_no_tensor_methods_are_added():
    assert not hasattr(tg.tensor([1.0]), "gammaln")
    assert not hasattr(tg.tensor([1.0]), "scipy_stats_norm_logpdf")


def test_integrate_odeint_is_out_of_scope_and_says_so():
    with pytest.raises(NotImplementedError, match="odeint is out of scope"):
        tg.scipy.integrate.odeint(lambda y, t: -y, 1.0, [0.0, 1.0])


def test_every_op_has_a_doc_naming_its_scipy_function():
    for name, op in tg.registry().ops.items():
        if op.plugin == "tapegrad-scipy" and not name.startswith("_"):
            assert "scipy." in op.doc, name


@pytest.mark.parametrize("module", [tapegrad_scipy, special, stats, linalg, signal],
                         ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    result = run_doctests(module)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_examples_run():
    result = run_doctests(README)
    assert result.attempted > 0
    assert result.failed == 0
