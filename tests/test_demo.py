"""The README's demo: trains on the bundled digits data, >= 95% test accuracy in < 60 s,
and the reloaded weights score the same (the script exits non-zero otherwise)."""

import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_digits_demo_reaches_95_percent_quickly(tmp_path):
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "train_digits.py"),
         "--weights", str(tmp_path / "digits.npz")],
        capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    accuracies = [float(a) for a in re.findall(r"test accuracy (\d\.\d+)", out.stdout)]
    assert accuracies and accuracies[-1] >= 0.95, out.stdout
    assert "reloaded model test accuracy" in out.stdout
    assert (tmp_path / "digits.npz").exists()
    assert seconds < 60, f"the demo took {seconds:.1f} s"


def test_readme_quick_start_has_the_two_commands():
    text = (REPO / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^(ci/\w+)", quick, flags=re.M)
    assert commands == ["ci/demo", "ci/test"]
