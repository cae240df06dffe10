"""Every public function of NumPy and numpy.linalg is provided by tapegrad or listed, with
its reason, in docs/numpy_coverage.py -- enumerated from the installed NumPy, so a new
NumPy cannot silently leave a gap -- and docs/numpy-coverage.md is generated from that
list (``python docs/gen_numpy_coverage.py``)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
REGENERATE = "run `python docs/gen_numpy_coverage.py` and commit docs/numpy-coverage.md"


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_numpy_coverage",
                                                  ROOT / "docs" / "gen_numpy_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _load_generator()
COVERAGE = GEN.load_list()
NAMES = GEN.public_names()
PROVIDED = GEN.provided_names(NAMES)


def test_numpy_is_enumerated_as_functions_not_classes_or_constants():
    numpy = set(NAMES["numpy"])
    assert {"sum", "exp", "tensordot", "cumsum", "r_", "c_"} <= numpy
    assert not {"ndarray", "float64", "dtype", "pi", "nan", "newaxis", "linalg", "fft",
                "errstate", "_NoValue"} & numpy
    assert {"inv", "solve", "norm", "svd"} <= set(NAMES["linalg"])
    assert "LinAlgError" not in NAMES["linalg"]


def test_every_numpy_function_is_provided_or_listed_with_a_reason():
    """Fails on (a) a NumPy function neither provided nor listed (a new NumPy), (b) a
    listed function that tapegrad provides now (a stale entry), (c) a listed name NumPy
    does not have (removed), and on duplicates and groups without a category or reason."""
    wrong = GEN.problems(COVERAGE, NAMES, PROVIDED)
    assert not wrong, "docs/numpy_coverage.py is out of date:\n- " + "\n- ".join(wrong)


def test_problems_names_new_stale_and_removed_functions():
    """The check itself: a made-up NumPy with one new function, a list with a provided
    name and one NumPy never had."""
    class List:
        CATEGORIES = COVERAGE.CATEGORIES
        PLANNED_BY_ISSUE_14 = {"numpy": ["exp"]}
        GROUPS = [("no derivative", "t", "r", {"numpy": ["sum", "gone_function", "twice"]}),
                  ("nonsense", "u", "", {"numpy": ["twice"]})]
    names = {"numpy": ["exp", "sum", "twice", "new_function"], "linalg": []}
    provided = {"numpy": ["exp", "sum"], "linalg": []}
    text = "\n".join(GEN.problems(List, names, provided))
    assert "np.new_function" in text and "neither provides" in text
    assert "still in PLANNED_BY_ISSUE_14: np.exp" in text
    assert "still listed as not provided: np.sum (t)" in text
    assert "not a public function of this NumPy" in text and "np.gone_function" in text
    assert "listed more than once: np.twice" in text
    assert "unknown category 'nonsense'" in text and "'u' gives no reason" in text


def test_a_third_party_op_does_not_count_as_provided():
    # The page is about tapegrad: an op of a NumPy name from another plugin (the plugin
    # template's tg.logaddexp, say) leaves the name on the list.
    import tapegrad as tg

    class ThirdParty:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            registry.register_op("hanning", kernels={"cpu": lambda x: x},
                                 vjp=lambda g, ans, x: (g,), samples=[(np.ones(3),)])

    tg.register_plugin(ThirdParty(), name="coverage-third-party")
    try:
        assert hasattr(tg, "hanning")
        assert GEN.tapegrad_object("numpy", "hanning") is None
    finally:
        tg.unregister_plugin("coverage-third-party")
    assert GEN.tapegrad_object("numpy", "exp") is tg.exp      # first-party: provided


def test_provided_functions_take_numpys_leading_positional_parameters():
    """tg.<name>(a, b, ...) means what np.<name>(a, b, ...) means, for every provided
    function whose NumPy signature can be read, except the differences listed (with why)
    in SIGNATURE_DIFFERENCES; a listed difference that is gone fails too."""
    found = GEN.signature_differences(NAMES)
    for ns in GEN.NAMESPACES:
        listed = COVERAGE.SIGNATURE_DIFFERENCES.get(ns, {})
        new = {n: why for n, why in found[ns].items() if n not in listed}
        gone = sorted(set(listed) - set(found[ns]))
        assert not new, (f"{GEN.TG_QUALIFIED[ns]}<name> does not take NumPy's leading "
                         f"positional parameters: {new}; fix it or list it with why in "
                         f"SIGNATURE_DIFFERENCES (docs/numpy_coverage.py)")
        assert not gone, (f"SIGNATURE_DIFFERENCES lists {gone}, whose signatures match "
                          f"NumPy's now (or are not provided): delete them")


@pytest.mark.parametrize("np_fn,tg_sig,why", [
    (np.sum, ["x", "axis"], None),                        # inputs' names do not matter
    (np.add, ["x", "y"], None),                           # a ufunc: its nin
    (np.sum, [], "takes 0 positional arguments"),
    (np.eye, ["n", "m", "dtype"], "positional parameter 2 is 'dtype', NumPy's is 'k'"),
    (np.zeros, ["shape", "dtype", "device"], None),       # stops at NumPy's order=
])
def test_signature_difference_compares_parameters_past_the_inputs(np_fn, tg_sig, why):
    import inspect

    def fake(*names):
        return None
    fake.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in tg_sig])
    got = GEN.signature_difference(np_fn, fake)
    assert (got is None) if why is None else (why in got), got


def test_planned_report_splits_provided_from_missing():
    class List:
        PLANNED_BY_ISSUE_14 = {"numpy": ["exp", "hanning"], "linalg": []}
    report = GEN.planned_report(List)
    assert "np.* provided now (delete from PLANNED_BY_ISSUE_14): exp\n" in report
    assert "np.* still missing (move to a group, with why): hanning" in report


def test_numpy_coverage_page_is_current():
    committed = (ROOT / "docs" / "numpy-coverage.md").read_text()
    assert committed == GEN.render(COVERAGE, NAMES, PROVIDED), (
        f"docs/numpy-coverage.md is stale: {REGENERATE}")


def test_the_readme_quotes_the_current_counts():
    readme = (ROOT / "README.md").read_text()
    provided = {ns: len(PROVIDED[ns]) for ns in ("numpy", "linalg")}
    total = {ns: len(NAMES[ns]) for ns in ("numpy", "linalg")}
    quoted = (f"{provided['numpy']} of NumPy {np.__version__.rsplit('.', 1)[0]}'s "
              f"{total['numpy']} public functions and {provided['linalg']} of\n"
              f"`np.linalg`'s {total['linalg']}")
    assert quoted in readme, f"README.md should say: {quoted!r}"
