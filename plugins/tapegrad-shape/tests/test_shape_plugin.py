"""The plugin as a whole: it loads through its entry point, every op keeps the contract,
and the examples in its docstrings run."""

from importlib import metadata

import tapegrad as tg
from tapegrad.testing import run_doctests
from tapegrad_shape import ops


def test_entry_point_resolves_to_the_ops_module():
    (ep,) = [e for e in metadata.entry_points(group="tapegrad") if e.name == "shape"]
    assert ep.load() is ops
    assert "tapegrad-shape" in tg.registry().plugins
    assert "tapegrad-shape" not in tg.registry().failed


def test_every_op_and_function_keeps_the_contract(contract_reports):
    reports = list(contract_reports.values())
    names = {r.name for r in reports}
    assert {"sum", "mean", "max", "min", "var", "prod", "reshape", "transpose", "flatten",
            "getitem", "_getitem_grad", "setitem", "concatenate", "stack", "split", "squeeze",
            "expand_dims", "swapaxes", "moveaxis", "copy", "clone"} <= names


def test_ops_are_owned_by_this_plugin():
    for name in ("sum", "getitem", "setitem", "concatenate", "reshape", "transpose"):
        assert tg.registry().ops[name].plugin == "tapegrad-shape"
    for name in ("var", "split", "squeeze", "moveaxis"):
        assert tg.registry().functions[name].plugin == "tapegrad-shape"


def test_every_op_has_a_doc():
    for op in tg.registry().ops.values():
        if op.plugin == "tapegrad-shape":
            assert op.doc, op.name


def test_docstring_examples_run():
    result = run_doctests(ops)
    assert result.attempted > 10
    assert result.failed == 0
