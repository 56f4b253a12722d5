"""``python -m benchmarks [--quick] [--only NAME ...] [--slow] [--out DIR] [--readme]``.

Runs every benchmark (or those named), prints each table, writes
``<out>/<name>.json`` and the combined ``<out>/latest.md``; a full run into
``benchmarks/results`` also rewrites the README's table of headline figures
(``--readme`` alone rewrites it from the committed results). ``--quick`` runs
each benchmark tiny, to check it still works (CI), and writes to a temporary
directory unless ``--out`` is given, so the committed results stay as they are.
``--slow`` runs the requests-per-approval benchmark at full length (about 5 minutes).
"""

from __future__ import annotations

import argparse
import datetime
import logging
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from . import (
    _headline,
    async_scale,
    grants,
    latency,
    overhead,
    policy,
    provider_alone,
    requests_per_approval,
    scale,
    server,
)
from ._common import RESULTS, Result, text_table, write_latest, write_result

BENCHMARKS: dict[str, Callable[[argparse.Namespace], Result]] = {
    "latency": lambda a: latency.run(quick=a.quick),
    "requests_per_approval": lambda a: requests_per_approval.run(quick=a.quick, slow=a.slow),
    "overhead": lambda a: overhead.run(quick=a.quick, profile=a.profile),
    "scale": lambda a: scale.run(quick=a.quick),
    "provider_alone": lambda a: provider_alone.run(quick=a.quick),
    "policy": lambda a: policy.run(quick=a.quick),
    "server": lambda a: server.run(quick=a.quick),
    "async_scale": lambda a: async_scale.run(quick=a.quick),
    "grants": lambda a: grants.run(quick=a.quick),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="tiny smoke run of each benchmark")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(BENCHMARKS),
        metavar="NAME",
        help=f"run only this benchmark (repeatable): {', '.join(BENCHMARKS)}",
    )
    parser.add_argument("--slow", action="store_true", help="requests per approval at full length")
    parser.add_argument("--profile", action="store_true", help="cProfile the overhead benchmark")
    parser.add_argument("--out", type=Path, help="where results go (default benchmarks/results)")
    parser.add_argument(
        "--readme", action="store_true", help="only rewrite the README's table from the results"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    if args.readme:
        print(f"rewrote {_headline.write_readme(args.out or RESULTS)}")
        return 0
    run = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out: Path = args.out or (Path(tempfile.mkdtemp(prefix="ag-bench-")) if args.quick else RESULTS)
    names = args.only or list(BENCHMARKS)
    failed = []
    for name in names:
        started = time.perf_counter()
        try:
            result = BENCHMARKS[name](args)
        except Exception:
            traceback.print_exc()
            print(f"== {name}: FAILED", flush=True)
            failed.append(name)
            continue
        result.quick = args.quick
        result.run = run
        result.seconds = time.perf_counter() - started
        print(text_table(result), flush=True)
        print(f"   -> {write_result(result, out)}\n", flush=True)
    latest = write_latest(out, list(BENCHMARKS))
    print(f"combined table: {latest}")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    if out == RESULTS and not args.only and not args.quick:
        print(f"headline table: {_headline.write_readme(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
