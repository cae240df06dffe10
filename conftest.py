"""Repository-wide pytest options (loaded for every test path under this folder).

``--long`` (or ``TAPEGRAD_LONG=1`` in the environment) runs the fuzzers and soak tests at
their long budgets instead of the short ones of the default suite; docs/testing.md lists
the tests that read it and both budgets. The option only sets the variable: the tests read
``TAPEGRAD_LONG`` when they are imported, so it works without pytest's option too (and in
a subprocess that inherits the environment).
"""

import os

# NOTE: [BLAS threads] The suite's matrices are small, and OpenBLAS's worker threads spin
# while they wait: on a machine whose cores are busy (CI, or several sessions on two cores)
# a multi-threaded matmul takes 3-10x longer than a single-threaded one (the digits soak
# test: 1,000 steps in 11-20 s instead of 2-4 s). So the tests run with one BLAS thread,
# unless OPENBLAS_NUM_THREADS says otherwise: the variable for the processes they start
# (MPI ranks, isolated runs, examples), threadpoolctl for this one (NumPy is already loaded
# when this file is imported, so the variable alone would come too late). Results do not
# depend on it: every test compares values computed in its own process.
if "OPENBLAS_NUM_THREADS" not in os.environ:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:         # an isolated run (tests/test_isolation.py) has no threadpoolctl
        pass
    else:
        threadpool_limits(limits=1, user_api="blas")


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="run fuzzers and soak tests at their long budgets "
                          "(same as TAPEGRAD_LONG=1; see docs/testing.md)")


def pytest_configure(config):
    # NOTE: pytest_configure runs before collection imports the test modules, which read
    # the variable at import time (hypothesis settings are decorators).
    if config.getoption("--long"):
        os.environ["TAPEGRAD_LONG"] = "1"


def pytest_report_header(config):
    budgets = "long" if os.environ.get("TAPEGRAD_LONG") == "1" else "short"
    return (f"fuzz/soak budgets: {budgets} (--long, TAPEGRAD_LONG); BLAS threads: "
            f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} (see docs/testing.md)")
