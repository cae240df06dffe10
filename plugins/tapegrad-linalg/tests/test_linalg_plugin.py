"""The plugin as a whole: it loads through its entry point, every op keeps the contract,
and the examples in its docstrings and README run."""

from importlib import metadata
from pathlib import Path

import pytest
import tapegrad as tg
import tapegrad_linalg
from tapegrad.testing import run_doctests
from tapegrad_linalg import ops

README = Path(__file__).resolve().parents[1] / "README.md"


def test_entry_point_resolves_to_the_ops_module():
    (ep,) = [e for e in metadata.entry_points(group="tapegrad") if e.name == "linalg"]
    assert ep.load() is ops
    assert "tapegrad-linalg" in tg.registry().plugins
    assert "tapegrad-linalg" not in tg.registry().failed


# tg.linalg functions that return a tuple; the packed op behind each is float32-checked
TUPLE_RESULTS = {"linalg_eig", "linalg_eigh", "linalg_qr", "linalg_svd", "linalg_slogdet",
                 "linalg_lstsq",
                 "polydiv"}
# NumPy's legacy polynomial functions (polynomial.py), top-level names as in NumPy
POLYNOMIAL = {"poly", "polyadd", "polyder", "polydiv", "polyfit", "polyint", "polymul",
              "polysub", "polyval", "roots", "_roots"}


def test_every_op_and_function_keeps_the_contract(contract_reports):
    reports = list(contract_reports.values())
    names = {r.name for r in reports}
    top = {"matmul", "dot", "einsum", "_einsum", "cross",      # NumPy's top-level names
           "vdot", "vecdot", "matvec", "vecmat"}
    top |= POLYNOMIAL
    assert top <= names
    # tg.linalg's ops and functions: every other one is linalg_<name> (or _linalg_<name>)
    assert all(n in top or n.startswith(("linalg_", "_linalg_")) for n in names), sorted(names)
    for r in reports:
        if r.name == "linalg_matrix_rank":   # an integer result, not differentiable
            assert "no gradient from a non-differentiable op" in r.checks
            continue
        assert "float64 gradient vs finite differences" in r.checks, r.name
        if r.name not in TUPLE_RESULTS:      # (the kit checks float32 on tensor results)
            assert "float32" in r.checks, r.name


def test_samples_cover_every_matmul_case():
    shapes = {(s.args[0].shape, s.args[1].shape) for s in tg.registry().ops["matmul"].samples}
    assert {((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
            ((2, 1, 3, 4), (5, 4, 2))} <= shapes


def test_samples_cover_the_einsum_strings():
    strings = {s.args[0] for s in tg.registry().functions["einsum"].samples
               if isinstance(s.args[0], str)}
    assert {"ij,jk->ik", "ii->", "ii->i", "ij->ji", "bij,bjk->bik", "i,i->", "i,j->ij",
            "ijk,jl->ikl", "ij,jk,kl->il", "ij,jk"} <= strings


def test_ops_are_owned_by_this_plugin():
    for name in ("matmul", "_einsum"):
        assert tg.registry().ops[name].plugin == "tapegrad-linalg"
    for name in ("dot", "einsum"):
        assert tg.registry().functions[name].plugin == "tapegrad-linalg"


def test_every_op_has_a_doc():
    for op in tg.registry().ops.values():
        if op.plugin == "tapegrad-linalg":
            assert op.doc, op.name
    assert "matmul" in tg.matmul.__doc__


@pytest.mark.parametrize("module", [tapegrad_linalg, ops], ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    result = run_doctests(module)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_example_runs():
    result = run_doctests(README)
    assert result.attempted > 0
    assert result.failed == 0
