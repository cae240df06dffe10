"""tapegrad's benchmark suite: ``python -m benchmarks`` (or ``ci/bench``).

Each workload (W1..W6, DESIGN.md §8) is written once per library: ``numpy`` with a
hand-written backward (the floor: no framework at all), ``tapegrad``, and ``torch``
(PyTorch CPU, when installed). Every library runs in its own long-lived worker process;
the parent interleaves the rounds, checks every result against NumPy's before a figure
is kept, and reports medians and ratios. See ``benchmarks/README.md``.

Layout:

- ``registry``  -- the vocabulary: ``Library``, ``Workload``, ``Case``, ``Metric``.
- ``workloads`` -- one module per workload; importing the package registers them all.
- ``worker``    -- the worker process (``python -m benchmarks.worker LIBRARY``).
- ``runner``    -- the parent: starts workers, interleaves rounds, checks results.
- ``report``    -- the stdout table and the JSON file.
- ``cli``       -- the command line.
"""
