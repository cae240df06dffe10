"""``python -m benchmarks``: run the benchmark suite (see ``benchmarks/cli.py``)."""

from .cli import main

raise SystemExit(main())
