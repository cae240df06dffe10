"""Builds the Cython engine; everything else is in pyproject.toml."""

from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [Extension("tapegrad._engine", ["src/tapegrad/_engine.pyx"])]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "binding": False},
        annotate=False,
    ),
)
