"""The documentation site builds without a warning, and every code example in it runs.

- ``mkdocs build --strict`` (mkdocs.yml at the repository root): broken links and anchors,
  pages missing from the nav, and mkdocstrings failures on a docstring are all warnings,
  and any warning fails.
- Every ```python block of every docs/*.md page runs, in order, one namespace per page, in
  a fresh working directory. A block that must not run (it needs a GPU, say) is preceded
  by the line ``<!-- no-run: why -->``; such blocks are listed in ``NO_RUN_ALLOWED`` so that
  they stay rare and deliberate.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tapegrad as tg

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))

# page -> how many blocks it may mark no-run (and must: a stale entry fails too).
NO_RUN_ALLOWED = {"gpu.md": 2}

_NO_RUN = re.compile(r"^<!--\s*no-run\b.*-->\s*$")
_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")


def code_blocks(text):
    """[(first line number, language, code, marked no-run)] of the fenced blocks in `text`."""
    blocks, lines, i = [], text.split("\n"), 0
    previous = ""
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        indent, fence, lang = m.groups()
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        blocks.append((start + 1, lang, "\n".join(body) + "\n", bool(_NO_RUN.match(previous))))
        previous = ""
        i += 1
    return blocks


def python_blocks(page):
    return [(line, code, norun) for line, lang, code, norun in code_blocks(page.read_text())
            if lang == "python"]


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=lambda p: p.name)
def test_page_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plugins_before = tg.registry().plugins
    namespace = {"__name__": f"docs.{page.stem}"}
    skipped = 0
    for line, code, norun in python_blocks(page):
        if norun:
            skipped += 1
            continue
        # Pad with newlines so that a traceback points at the line in the .md file.
        source = "\n" * (line - 1) + code
        exec(compile(source, str(page.relative_to(ROOT)), "exec"), namespace)
    assert skipped == NO_RUN_ALLOWED.get(page.name, 0), (
        f"{page.name} has {skipped} no-run blocks; NO_RUN_ALLOWED says "
        f"{NO_RUN_ALLOWED.get(page.name, 0)}")
    assert tg.is_grad_enabled(), "the page left grad mode off"
    assert tg.registry().plugins == plugins_before, "the page left a plugin registered"


def test_no_run_blocks_are_only_where_allowed():
    counts = {p.name: sum(norun for _, _, norun in python_blocks(p)) for p in PAGES}
    assert {k: v for k, v in counts.items() if v} == NO_RUN_ALLOWED


def test_code_block_extraction():
    text = ("a\n```python\nx = 1\n```\n<!-- no-run: needs a GPU -->\n\n```python\ny = 2\n```\n"
            "```bash\nls\n```\n    ```python\n    z = 3\n    ```\n")
    assert code_blocks(text) == [(3, "python", "x = 1\n", False), (8, "python", "y = 2\n", True),
                                 (11, "bash", "ls\n", False), (14, "python", "z = 3\n", False)]


def test_mkdocs_build_strict(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")  # Material's banner about MkDocs 2.0
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    warnings = [line for line in output.splitlines() if "WARNING" in line or "ERROR" in line]
    assert not warnings, "\n".join(warnings)
    site = tmp_path / "site"
    for page in ("index.html", "autograd/index.html", "reference-tapegrad/index.html",
                 "bad-inputs/index.html", "plugin-guide/index.html", "decisions/index.html"):
        assert (site / page).is_file(), page
    reference = (site / "reference-tapegrad" / "index.html").read_text()
    assert "register_hook" in reference and "tapegrad.Tensor" in reference
