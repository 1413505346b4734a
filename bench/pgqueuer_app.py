"""The pgqueuer consumer that ``bench.contenders`` runs: one no-op entrypoint, all else default.

Started as ``python -m pgqueuer run bench.pgqueuer_app:main`` (pgqueuer's documented runner, the
``pgq run`` command) with the database URL in ``PGQUEUER_BENCH_DSN``. pgqueuer 1.x requires the
factory to be an async context manager (a bare coroutine is refused), and its psycopg driver
requires an autocommit connection; the connection is closed when the runner leaves the context.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
from pgqueuer import PgQueuer
from pgqueuer.models import Job

ENTRYPOINT = "bench_noop"
DSN_ENV = "PGQUEUER_BENCH_DSN"


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    """A ``PgQueuer`` on one psycopg async connection, with the no-op entrypoint registered."""
    async with await psycopg.AsyncConnection.connect(os.environ[DSN_ENV], autocommit=True) as conn:
        pgq = PgQueuer.from_psycopg_connection(conn)

        @pgq.entrypoint(ENTRYPOINT)
        async def noop(job: Job) -> None:
            """Do nothing: the benchmark measures the queue, not the work."""

        yield pgq
