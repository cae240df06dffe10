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
