"""``python -m bench.index_cost [--jobs N] [--threads T] [--runs R] [--only NAME ...]``: each
index's cost to the drain (``--only``: just those indexes).

A scratch database (``jobqueue_index_cost``, never the benchmark's own) is drained in batch mode
with every index, then once with each ``jobs_job`` / ``jobs_jobevent`` index dropped in turn
(its definition read from ``pg_indexes`` and recreated right after), runs alternating so that
the machine's drift spreads over all of them. Primary keys and unique constraints stay: the
queue's correctness needs them. An update that is not HOT inserts into every index, so each
index is paid on every transition; what a page or the claim needs an index for is in
docs/benchmarks.md beside the figures this prints.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import psycopg

from . import drain
from .db import fresh_database, libpq

BATCH = {"JOB_WORKER_BATCH_SIZE": "16"}


def droppable(url: str) -> list[tuple[str, str]]:
    """``(name, definition)`` of every index that backs no constraint, on the two tables."""
    with psycopg.connect(libpq(url)) as conn:
        return conn.execute(
            """
            SELECT i.indexname, i.indexdef FROM pg_indexes i
            WHERE i.tablename IN ('jobs_job', 'jobs_jobevent')
              AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)
            ORDER BY i.tablename, i.indexname
            """
        ).fetchall()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.index_cost", description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="drop only these indexes in turn")
    args = parser.parse_args(argv)
    url = fresh_database("jobqueue_index_cost")
    indexes = [(name, sql) for name, sql in droppable(url) if not args.only or name in args.only]
    if args.only and len(indexes) < len(args.only):
        parser.error(f"no such droppable index among {args.only}")
    rates: dict[str, list[float]] = {"(all indexes)": [], **{name: [] for name, _ in indexes}}
    for _ in range(args.runs):
        rates["(all indexes)"].append(drain.throughput(url, jobs=args.jobs, threads=args.threads, **BATCH))
        for name, definition in indexes:
            with psycopg.connect(libpq(url), autocommit=True) as conn:
                conn.execute(f'DROP INDEX "{name}"')
            try:
                rates[name].append(drain.throughput(url, jobs=args.jobs, threads=args.threads, **BATCH))
            finally:
                with psycopg.connect(libpq(url), autocommit=True) as conn:
                    conn.execute(definition)
    base = statistics.median(rates["(all indexes)"])
    print(f"batch mode, {args.threads} threads, {args.jobs:,} no-op jobs, medians of {args.runs}")
    for name, values in rates.items():
        median = statistics.median(values)
        spread = f"({min(values):,.0f}-{max(values):,.0f})"
        print(f"without {name:<40} {median:>8,.0f} jobs/s {spread} {median / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
