"""Builds the Cython engine; everything else is in pyproject.toml."""

import sys

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

# The engine reads NumPy arrays' shapes through NumPy's C API (numpy is a build requirement).
_numpy_c_api = dict(include_dirs=[numpy.get_include()],
                    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])
_no_contract = [] if sys.platform == "win32" else ["-ffp-contract=off"]
extensions = [Extension("tapegrad._engine", ["src/tapegrad/_engine.pyx"], **_numpy_c_api),
              # tg.compile's recorder and replay loop (cimports the engine's types)
              Extension("tapegrad._compile", ["src/tapegrad/_compile.pyx"], **_numpy_c_api),
              # fused replay: runs of ufunc kernels through their inner loops (cimported
              # by _compile; fenv.h's flag functions are in libm)
              Extension("tapegrad._fuse", ["src/tapegrad/_fuse.pyx"], libraries=["m"],
                        **_numpy_c_api),
              # C loops the core's kernels call (a leading-axis sum, a transposed copy);
              # -ffp-contract=off: they promise NumPy's bits (no fused multiply-adds)
              Extension("tapegrad._array_kernels", ["src/tapegrad/_array_kernels.pyx"],
                        extra_compile_args=_no_contract, **_numpy_c_api)]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "binding": False},
        annotate=False,
    ),
)
