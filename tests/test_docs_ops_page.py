"""docs/ops.md, the table of every op by family with its gradient conventions, is what
docs/gen_ops.py generates from the registry now (``python docs/gen_ops.py``)."""

import importlib.util
from pathlib import Path

import tapegrad as tg

ROOT = Path(__file__).resolve().parents[1]


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_ops", ROOT / "docs" / "gen_ops.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _load_generator()


def test_ops_page_is_current():
    committed = (ROOT / "docs" / "ops.md").read_text()
    assert committed == GEN.render(), (
        "docs/ops.md is stale (an op was added or changed, or its doc=): run "
        "`python docs/gen_ops.py` and commit docs/ops.md")


def test_every_first_party_op_and_function_is_on_the_page():
    page = GEN.render()
    reg = tg.registry()
    families = set(GEN.families())
    entries = list(reg.ops.items()) + list(reg.functions.items())
    for name, entry in entries:
        if entry.plugin in families:
            shown = f"| `tg.{name}`" if not name.startswith("_") else f"`{name}`"
            assert shown in page, f"{name} ({entry.plugin}) is not on the page"
    third_party = [n for n, e in entries if e.plugin not in families and not n.startswith("_")]
    for name in third_party:
        assert f"| `tg.{name}`" not in page, f"third-party {name} is on the page"


def test_every_plugin_of_the_repository_is_a_family_of_the_page():
    # A plugin missing from tapegrad._plugins._FIRST_PARTY would silently drop off the page.
    plugins = {p.name for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file()}
    assert plugins <= set(GEN.families()), sorted(plugins - set(GEN.families()))


def test_rows_say_what_the_registry_says():
    page = GEN.render()
    row = next(line for line in page.splitlines() if line.startswith("| `tg.abs` |"))
    assert row.split(" | ")[1:6] == ["op", "`x`", "yes", "yes", "yes"]   # abs has a JVP rule now
    assert "The gradient at x == 0 is 0." in row
    where = next(line for line in page.splitlines() if line.startswith("| `tg.where` |"))
    assert where.split(" | ")[2] == "`x`, `y`"            # cond is not differentiable
    equal = next(line for line in page.splitlines() if line.startswith("| `tg.equal` |"))
    assert equal.split(" | ")[2:5] == ["none", "—", "—"]
    var = next(line for line in page.splitlines() if line.startswith("| `tg.var` |"))
    assert var.split(" | ")[1:3] == ["function", "`x`"]


def test_cuda_column_names_only_registered_ops_and_matches_a_gpu_registry():
    cuda = GEN.cuda_kernels()
    reg = tg.registry()
    assert {"exp", "matmul", "sum"} <= cuda
    assert cuda <= set(reg.ops), f"kernels for ops nobody registers: {sorted(cuda - set(reg.ops))}"
    if tg.cuda.is_available():      # there the registry has the kernels themselves
        registered = {n for n, op in reg.ops.items() if "cuda" in op.kernels}
        assert cuda <= registered


def test_markdown_cells_escape_outside_code_and_keep_code():
    assert GEN.markdown_inline("e**x at [0, 1], |x|, a_min <= x") == \
        r"e\*\*x at \[0, 1\], \|x\|, a\_min &lt;= x"
    assert GEN.markdown_inline("as `np.clip(a, a_min)`,\n  `a|b`") == \
        "as `np.clip(a, a_min)`, `a|b`"
