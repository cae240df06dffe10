"""Each distribution works, and its tests pass, with only itself and what it declares.

This is what keeps "install only the plugins you need" true. Rather than building a
virtual environment per distribution (minutes of Cython builds), each check runs Python
with `-S` (no site-packages) and a PYTHONPATH folder that holds links to exactly the
installed files of the allowed distributions, so neither imports nor entry-point
discovery can see anything else. The distributions' runs go side by side (one per CPU).
"""

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEST_RUNNER = "pytest"


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(dist_name):
    reqs = metadata.distribution(dist_name).requires or []
    out = []
    for req in reqs:
        if "extra ==" in req:
            continue
        marker = req.split(";", 1)[1] if ";" in req else None
        if marker and not _marker_holds(marker):
            continue
        out.append(re.split(r"[\s<>=!~\[;(]", req.strip(), maxsplit=1)[0])
    return out


def _marker_holds(marker):
    try:
        from packaging.markers import Marker
    except ImportError:
        return True
    return Marker(marker).evaluate()


def _closure(*roots):
    seen, stack = set(), list(roots)
    while stack:
        name = _norm(stack.pop())
        if name in seen:
            continue
        seen.add(name)
        stack.extend(_requirements(name))
    return seen


def _isolated_env(tmp_path, dists):
    """A PYTHONPATH that exposes only `dists` (installed files linked into tmp_path)."""
    site = tmp_path / "site"
    site.mkdir()
    extra_paths = []
    for name in sorted(dists):
        dist = metadata.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in tops:
            if top in ("..", "__pycache__") or top.endswith(".pth") and _add_pth(dist, top, extra_paths):
                continue
            src = Path(dist.locate_file(top))
            dst = site / top
            if src.exists() and not dst.exists():
                dst.symlink_to(src)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TAPEGRAD"))}
    env["PYTHONPATH"] = os.pathsep.join([str(site)] + extra_paths)
    env["PYTHONNOUSERSITE"] = "1"
    return env


def _add_pth(dist, top, extra_paths):
    """Editable installs point at their sources through a .pth file of plain paths."""
    for line in Path(dist.locate_file(top)).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "import")) and Path(line).is_dir():
            extra_paths.append(line)
    return True


def _run(env, *args, timeout=300):
    return subprocess.run([sys.executable, "-S", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


CORE_ONLY = r"""
import tapegrad as tg
assert tg.registry().plugins == ["tapegrad"], tg.registry().plugins
x = tg.tensor([1.0, 2.0], requires_grad=True)
(x + x).backward(tg.ones(2))
assert x.grad.tolist() == [2.0, 2.0]
for call in (lambda: tg.exp(x), lambda: x * x):
    try:
        call()
    except tg.OpNotAvailableError as exc:
        assert "tapegrad-elementwise" in str(exc), exc
    else:
        raise AssertionError("an elementwise op worked without tapegrad-elementwise")
try:
    tg.sum(x)
except AttributeError as exc:
    assert "tapegrad-shape" in str(exc), exc
try:
    import tapegrad.nn  # noqa: F401
except ModuleNotFoundError as exc:
    assert "tapegrad-nn" in str(exc), exc
else:
    raise AssertionError("import tapegrad.nn worked without tapegrad-nn")
print("CORE-ONLY OK")
"""


def test_core_alone_imports_works_and_names_missing_plugins(tmp_path):
    env = _isolated_env(tmp_path, _closure("tapegrad"))
    out = _run(env, "-c", CORE_ONLY)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "CORE-ONLY OK" in out.stdout


def _distributions():
    dists = [("tapegrad", "packages/tapegrad")]
    for folder in sorted((REPO / "plugins").glob("tapegrad-*")):
        if (folder / "tests").is_dir():
            dists.append((folder.name, f"plugins/{folder.name}"))
    # Example distributions (the plugin template) are installed by ci/setup as well.
    for pyproject in sorted((REPO / "examples").glob("*/pyproject.toml")):
        folder = pyproject.parent
        name = re.search(r'^name\s*=\s*"([^"]+)"', pyproject.read_text(), re.M)
        if name and (folder / "tests").is_dir():
            dists.append((name.group(1), f"examples/{folder.name}"))
    return dists


# The isolated runs are separate processes that this one only waits for, so they run side
# by side, as many at a time as there are CPUs (at most 4).
_WORKERS = max(1, min(4, os.cpu_count() or 1))


@pytest.fixture(scope="module")
def isolated_runs(request, tmp_path_factory):
    """{distribution: future of its isolated test run}: the runs of every distribution
    the session selected (`-k` picks some), all started when the first one is needed."""
    test = "test_distribution_tests_pass_with_only_declared_dependencies"
    wanted = {item.callspec.params["dist"] for item in request.session.items
              if item.originalname == test and hasattr(item, "callspec")}
    pool = ThreadPoolExecutor(max_workers=_WORKERS)
    runs = {}
    for dist, folder in _distributions():
        if dist not in wanted or not _installed(dist):
            continue                # (the test of a missing distribution fails by itself)
        env = _isolated_env(tmp_path_factory.mktemp(dist), _closure(dist, TEST_RUNNER))
        runs[dist] = pool.submit(_run, env, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 f"{folder}/tests", timeout=600)
    yield runs
    pool.shutdown(wait=True, cancel_futures=True)


def _installed(dist):
    try:
        metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize("dist,folder", _distributions())
def test_distribution_tests_pass_with_only_declared_dependencies(isolated_runs, dist, folder):
    if not _installed(dist):
        pytest.fail(f"{dist} is not installed: run ci/setup")
    out = isolated_runs[dist].result()
    assert out.returncode == 0, (out.stdout[-3000:] + out.stderr[-2000:])
    assert re.search(r"\d+ passed", out.stdout)
