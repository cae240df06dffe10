"""Command line of ``python -m benchmarks``.

    python -m benchmarks                       # every workload, 15 rounds
    python -m benchmarks --workloads W1 --rounds 25
    python -m benchmarks --quick               # a few short rounds: a smoke test
    python -m benchmarks --libraries numpy,tapegrad --json out.json
    python -m benchmarks --list

Exit status: 0 on success, 1 when the run failed (a worker error, a missing required
library), 2 for bad arguments, 3 when a result did not match the NumPy reference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import report
from .registry import LIBRARIES, REFERENCE, all_workloads
from .runner import REPO_ROOT, BenchmarkError, MismatchError, run_suite

DEFAULT_JSON = REPO_ROOT / "benchmarks" / "results" / "latest.json"

# (rounds, warm-up rounds, seconds per sample) for a full run and for --quick.
FULL = (15, 2, 0.1)
QUICK = (3, 1, 0.01)


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.replace(",", " ").split() if part.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Time tapegrad against NumPy with a hand-written backward (the floor) "
                    "and PyTorch CPU, each in its own worker process, in interleaved "
                    "rounds; every result is checked against NumPy's first.")
    parser.add_argument("--workloads", "-w", action="append", metavar="W1,W2",
                        help="workloads to run (default: all); repeatable, comma-separated")
    parser.add_argument("--libraries", "-l", metavar="numpy,tapegrad,torch",
                        help="libraries to run (default: all; numpy, the reference, "
                             "always runs)")
    parser.add_argument("--rounds", "-r", type=int, metavar="N",
                        help=f"timed rounds per workload (default {FULL[0]}; "
                             f"--quick: {QUICK[0]})")
    parser.add_argument("--warmup", type=int, metavar="N",
                        help=f"untimed rounds first (default {FULL[1]}; --quick: {QUICK[1]})")
    parser.add_argument("--min-time", type=float, metavar="SECONDS",
                        help=f"length a sample aims for; short steps are repeated to fill it "
                             f"(default {FULL[2]}; --quick: {QUICK[2]})")
    parser.add_argument("--quick", action="store_true",
                        help="few short rounds: checks that everything runs, not for figures")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="threads each library may use (BLAS, OpenMP, torch; default 1)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, metavar="PATH",
                        help="where to write the results as JSON "
                             "(default benchmarks/results/latest.json)")
    parser.add_argument("--no-json", action="store_true", help="do not write JSON")
    parser.add_argument("--list", action="store_true",
                        help="list workloads and libraries, then exit")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    workloads = all_workloads()

    if args.list:
        for key, wl in workloads.items():
            libs = ", ".join(lib for lib in LIBRARIES if lib in wl.builders)
            print(f"{key}  {wl.title}\n    {wl.description}\n    implemented in: {libs}")
        for lib in LIBRARIES.values():
            print(f"library {lib.name}: {lib.description}")
        return 0

    chosen = [k.upper() for group in (args.workloads or [",".join(workloads)])
              for k in _names(group)]
    unknown = [k for k in chosen if k not in workloads]
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(unknown)}; "
                     f"known: {', '.join(workloads)}")
    libraries = _names(args.libraries) if args.libraries else list(LIBRARIES)
    unknown = [lib for lib in libraries if lib not in LIBRARIES]
    if unknown:
        parser.error(f"unknown librar(y/ies) {', '.join(unknown)}; "
                     f"known: {', '.join(LIBRARIES)}")
    if REFERENCE not in libraries:
        libraries.insert(0, REFERENCE)

    rounds, warmup, min_time = QUICK if args.quick else FULL
    rounds = rounds if args.rounds is None else args.rounds
    warmup = warmup if args.warmup is None else args.warmup
    min_time = min_time if args.min_time is None else args.min_time
    if rounds < 1 or warmup < 0 or min_time < 0 or args.threads < 1:
        parser.error("--rounds and --threads must be at least 1, --warmup and "
                     "--min-time at least 0")

    try:
        suite = run_suite([workloads[k] for k in dict.fromkeys(chosen)], libraries,
                          rounds=rounds, warmup=warmup, min_time=min_time,
                          threads=args.threads, log=sys.stderr)
    except MismatchError as exc:
        print(f"benchmarks: ABORTED, wrong result: {exc}", file=sys.stderr)
        return 3
    except BenchmarkError as exc:
        print(f"benchmarks: failed: {exc}", file=sys.stderr)
        return 1

    data = report.to_json(suite)
    data["config"]["quick"] = args.quick
    print(report.format_table(data))
    if not args.no_json:
        report.write_json(data, args.json)
        print(f"\nresults written to {args.json}")
    return 0
