"""Every .cu file compiles with nvcc for sm_90 with warnings as errors, and defines every
kernel the Python wrappers look up. Needs nvcc (not a GPU); skipped only without it."""

import shutil
import subprocess

import numpy as np
import pytest
from tapegrad_cuda import kernels

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH: cannot compile the .cu kernels")


def test_manifest_matches_the_kernel_folder():
    assert kernels.source_files() == sorted(kernels.expected_kernels())
    names = [n for ns in kernels.expected_kernels().values() for n in ns]
    assert len(names) == len(set(names))
    for op in ("add", "subtract", "multiply", "divide", "negative", "exp", "log", "sqrt",
               "tanh", "sigmoid", "relu", "sin", "cos", "maximum", "minimum", "power", "abs"):
        for sfx in ("f32", "f64"):
            assert f"tg_{op}_{sfx}" in names
    for sfx in ("f32", "f64"):
        assert {f"tg_{op}_rows_{sfx}" for op in ("sum", "mean", "max", "min", "argmax",
                                                  "argmin", "softmax", "log_softmax",
                                                  "logsumexp", "cross_entropy")} <= set(names)
        assert {f"tg_gather_{sfx}", f"tg_scatter_{sfx}", f"tg_scatter_add_{sfx}",
                f"tg_where_{sfx}", f"tg_bce_logits_strided_{sfx}"} <= set(names)
    for sfx in ("f32", "f64", "i32", "i64", "b8"):       # every cast, both ways
        for dst in ("f32", "f64", "i32", "i64", "b8"):
            assert f"tg_cast_{sfx}_{dst}" in names
        for op in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
            assert f"tg_{op}_strided_{sfx}" in names
    assert {"tg_logical_and_b8", "tg_logical_or_b8", "tg_logical_not_b8",
            "tg_argmax_rows_i64", "tg_sum_rows_i64"} <= set(names)


def test_sources_are_self_contained():
    for name in kernels.source_files():
        text = kernels.source(name)
        assert '#include "common.cuh"' not in text and "tg_offset" in text


def _symbols(cubin):
    if shutil.which("readelf"):
        out = subprocess.run(["readelf", "-sW", str(cubin)], capture_output=True, text=True,
                             check=True).stdout
        return {line.split()[-1] for line in out.splitlines()
                if " FUNC " in line and " GLOBAL " in line}
    if shutil.which("cuobjdump"):
        out = subprocess.run(["cuobjdump", "-elf", str(cubin)], capture_output=True,
                             text=True, check=True).stdout
        return {w for w in out.split() if w.startswith("tg_")}
    pytest.skip("neither readelf nor cuobjdump is available to list the cubin's kernels")


@needs_nvcc
@pytest.mark.parametrize("name", sorted(kernels.expected_kernels()))
def test_cu_file_compiles_for_sm90_without_warnings(tmp_path, name):
    src = tmp_path / name
    src.write_text(kernels.source(name))
    cubin = tmp_path / (name[:-3] + ".cubin")
    out = subprocess.run([NVCC, "-cubin", "-arch=sm_90", "-Werror", "all-warnings",
                          str(src), "-o", str(cubin)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, f"nvcc failed on {name}:\n{out.stdout}\n{out.stderr}"
    missing = set(kernels.expected_kernels()[name]) - _symbols(cubin)
    assert not missing, f"{name} does not define {sorted(missing)}"


def test_suffix_names_the_op_and_dtype():
    assert kernels.suffix(np.float32, "exp") == "f32"
    assert kernels.suffix("float64", "exp") == "f64"
    assert kernels.suffix(np.bool_, "where", kernels.ALL) == "b8"
    with pytest.raises(TypeError, match=r"exp: dtype int64 is not supported on device 'cuda' "
                                        r"\(its kernels cover float32, float64\)"):
        kernels.suffix(np.int64, "exp")


class _Meta:
    def __init__(self, arr):
        self.shape, self.strides, self.ndim, self.dtype = arr.shape, arr.strides, arr.ndim, arr.dtype


def test_broadcast_strides_match_numpy():
    a = np.ones((3, 1), np.float32)
    assert kernels._elem_strides(_Meta(a), (2, 3, 4)) == [0, 1, 0]
    b = np.ones((4, 5), np.float64)[:, ::2]            # non-contiguous view
    assert kernels._elem_strides(_Meta(b), (4, 3)) == [5, 2]
    assert kernels._elem_strides(_Meta(np.float64(2.0).reshape(())), (2, 2)) == [0, 0]
    # a reference gather with those strides equals np.broadcast_to
    x = np.arange(3.0).reshape(3, 1)
    shape = (2, 3, 4)
    st = kernels._elem_strides(_Meta(x), shape)
    flat = x.ravel()
    got = [flat[sum(i * s for i, s in zip(np.unravel_index(k, shape), st))]
           for k in range(int(np.prod(shape)))]
    assert np.array_equal(np.reshape(got, shape), np.broadcast_to(x, shape))


# -- math.cuh run on the host ------------------------------------------------------------------
_EDGE = np.array([-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.0, -3.0, np.inf, -np.inf,
                  np.nan, 1e-30, 7.3, -7.3, 1e300, -5e-324])
_IEDGE = [0, 1, -1, 2, -2, 3, 7, -7, 100]
_TYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}


@pytest.fixture(scope="module")
def math_harness(tmp_path_factory):
    """math.cuh's helpers compiled into a host program (math_harness.cpp): a runner
    (op, type, a, b) -> the helper's results as a NumPy array."""
    if NVCC is None:
        pytest.skip("nvcc is not on PATH: cannot compile math.cuh for the host")
    from pathlib import Path

    tmp = tmp_path_factory.mktemp("math_harness")
    src = tmp / "harness.cu"
    src.write_text(kernels.source("math.cuh")
                   + Path(__file__).with_name("math_harness.cpp").read_text())
    exe = tmp / "harness"
    out = subprocess.run([NVCC, "-Werror", "all-warnings", str(src), "-o", str(exe)],
                         capture_output=True, text=True, timeout=300, cwd=tmp)
    assert out.returncode == 0, f"nvcc failed on math.cuh + math_harness.cpp:\n{out.stderr}"

    def run(op, sfx, a, b=None):
        dtype = _TYPES[sfx]
        a = np.ascontiguousarray(a, dtype)
        b = np.ascontiguousarray(a if b is None else np.broadcast_to(b, a.shape), dtype)
        (tmp / "a.bin").write_bytes(a.tobytes())
        (tmp / "b.bin").write_bytes(b.tobytes())
        res = subprocess.run([str(exe), op, sfx, str(a.size), str(tmp / "a.bin"),
                              str(tmp / "b.bin"), str(tmp / "out.bin")], timeout=60)
        assert res.returncode == 0, f"harness {op} {sfx} exited with {res.returncode}"
        return np.frombuffer((tmp / "out.bin").read_bytes(),
                             np.int64 if op in ("sort", "search_right") else dtype)[:a.size]
    return run


def _assert_same(got, want, what):
    assert got.dtype == want.dtype, what
    if want.dtype.kind == "f":
        # NOTE: exact, zero signs included: these helpers are NumPy's own algorithms.
        np.testing.assert_array_equal(got, want, err_msg=what)
        assert np.array_equal(np.signbit(got), np.signbit(want)), what
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("sfx", ["f32", "f64"])
def test_float_helpers_on_the_host_equal_numpy(math_harness, sfx):
    dt = _TYPES[sfx]
    with np.errstate(all="ignore"):
        x = _EDGE.astype(dt)
        a, b = np.repeat(x, x.size), np.tile(x, x.size)
        for op in ("remainder", "floor_divide", "heaviside"):
            _assert_same(math_harness(op, sfx, a, b), getattr(np, op)(a, b), f"{op} {sfx}")
        for op in ("logaddexp", "logaddexp2"):
            got, want = math_harness(op, sfx, a, b), getattr(np, op)(a, b)
            # the host's exp/log1p and NumPy's (SIMD) ones may differ in the last bit
            np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dt).eps, atol=0,
                                       err_msg=f"{op} {sfx}")
        got, want = math_harness("sinc", sfx, x), np.sinc(x)
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dt).eps,
                                   atol=4 * np.finfo(dt).eps, err_msg=f"sinc {sfx}")
        _assert_same(math_harness("nan_to_num", sfx, x),
                     np.nan_to_num(x, nan=5, posinf=7, neginf=-9), f"nan_to_num {sfx}")
        vals = (np.linspace(-30, 30, 241) * 1.25).astype(dt)
        for decimals in (0, 1, 2, -1, -2):
            f = dt(10.0 ** abs(decimals))
            got = math_harness("round_div" if decimals < 0 else "round_mul", sfx, vals, f)
            _assert_same(got, np.round(vals, decimals), f"round({decimals}) {sfx}")


@pytest.mark.parametrize("sfx", ["i32", "i64"])
def test_integer_helpers_on_the_host_equal_numpy(math_harness, sfx):
    dt = _TYPES[sfx]
    info = np.iinfo(dt)
    x = np.array(_IEDGE + [-v for v in _IEDGE] + [info.min, info.max, info.min + 1], dt)
    a, b = np.repeat(x, x.size), np.tile(x, x.size)
    with np.errstate(all="ignore"):
        for op in ("remainder", "floor_divide", "fmod"):
            _assert_same(math_harness(op, sfx, a, b), getattr(np, op)(a, b), f"{op} {sfx}")
        _assert_same(math_harness("reciprocal", sfx, x), np.reciprocal(x), f"reciprocal {sfx}")


@pytest.mark.parametrize("sfx", ["f32", "f64", "i32", "i64"])
def test_the_bitonic_sort_network_on_the_host_is_numpys_stable_argsort(math_harness, sfx):
    rng = np.random.default_rng(3)
    rows = [rng.integers(0, 5, n) for n in (1, 2, 3, 7, 8, 9, 33, 100)]
    if sfx[0] == "f":
        rows += [np.array([3.0, np.nan, 1, 1, -0.0, 0.0, np.inf, -np.inf, np.nan, 2]),
                 rng.standard_normal(257)]
    for row in rows:
        row = row.astype(_TYPES[sfx])
        np.testing.assert_array_equal(math_harness("sort", sfx, row),
                                      np.argsort(row, kind="stable"), err_msg=str(row))


@pytest.mark.parametrize("sfx", ["f32", "f64", "i32", "i64"])
def test_the_binary_search_on_the_host_is_numpys_searchsorted_right(math_harness, sfx):
    rng = np.random.default_rng(4)
    for n in (1, 2, 5, 16, 101):
        xp = np.sort(rng.integers(-5, 5, n)).astype(_TYPES[sfx])
        x = rng.integers(-7, 7, n).astype(_TYPES[sfx])
        if sfx[0] == "f" and n > 2:
            xp[-1], x[0], x[1] = np.nan, np.nan, np.inf       # NaN sorts last in NumPy
        np.testing.assert_array_equal(math_harness("search_right", sfx, xp, x),
                                      np.searchsorted(xp, x, side="right"), err_msg=str((xp, x)))
