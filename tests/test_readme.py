"""The README's tour runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})


def test_readme_quick_start_is_what_ci_runs():
    text = README.read_text()
    ci_run = (README.parent / ".ci" / "run").read_text()
    assert "ci/test" in text and "exec ci/test" in ci_run
