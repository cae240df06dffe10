"""Builds the C kernels of the nn ops (tapegrad_nn._kernels: batch norm's per-channel
statistics and backward, max pooling); everything else is in pyproject.toml."""

import sys

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

# NOTE: -ffp-contract=off: no compiler-fused multiply-adds, so a kernel's float32 results
# are the same on every machine (with and without FMA hardware).
_flags = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off"]
extensions = [Extension("tapegrad_nn._kernels", ["src/tapegrad_nn/_kernels.pyx"],
                        depends=["src/tapegrad_nn/_max_pool.h"],
                        include_dirs=[numpy.get_include()],
                        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                        extra_compile_args=_flags)]

setup(ext_modules=cythonize(extensions, compiler_directives={"language_level": "3"}))
