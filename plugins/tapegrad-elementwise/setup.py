"""Builds the C kernels of the backward ops (tapegrad_elementwise._backward_kernels);
everything else is in pyproject.toml."""

import sys

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

# NOTE: -ffp-contract=off: the kernels promise NumPy's values bit for bit, so the compiler
# must not fuse a multiply and an add into one FMA (see the module's docstring).
_flags = [] if sys.platform == "win32" else ["-ffp-contract=off"]
extensions = [Extension("tapegrad_elementwise._backward_kernels",
                        ["src/tapegrad_elementwise/_backward_kernels.pyx"],
                        include_dirs=[numpy.get_include()],
                        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                        extra_compile_args=_flags)]

setup(ext_modules=cythonize(extensions, compiler_directives={"language_level": "3"}))
