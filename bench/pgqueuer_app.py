"""The pgqueuer consumers that ``bench.contenders`` runs: one no-op entrypoint, all else default.

Started as ``python -m pgqueuer run bench.pgqueuer_app:main`` (asyncpg driver, pgqueuer at its
best: the contender row) or ``…:main_psycopg`` (its psycopg driver, the second line), pgqueuer's
documented runner (the ``pgq run`` command), with the database URL in ``PGQUEUER_BENCH_DSN``.
pgqueuer 1.x requires the factory to be an async context manager (a bare coroutine is refused),
and its psycopg driver requires an autocommit connection; the connection is closed when the
runner leaves the context.
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


def _with_noop(pgq: PgQueuer) -> PgQueuer:
    @pgq.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        """Do nothing: the benchmark measures the queue, not the work."""

    return pgq


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    """A ``PgQueuer`` on one asyncpg connection, with the no-op entrypoint registered."""
    import asyncpg

    conn = await asyncpg.connect(os.environ[DSN_ENV])
    try:
        yield _with_noop(PgQueuer.from_asyncpg_connection(conn))
    finally:
        await conn.close()


@asynccontextmanager
async def main_psycopg() -> AsyncIterator[PgQueuer]:
    """A ``PgQueuer`` on one psycopg async connection, with the no-op entrypoint registered."""
    async with await psycopg.AsyncConnection.connect(os.environ[DSN_ENV], autocommit=True) as conn:
        yield _with_noop(PgQueuer.from_psycopg_connection(conn))
