"""Peer queues on our benchmark server: pgqueuer, in its default configuration.

``python -m bench.contenders [--jobs N]`` prints pgqueuer's drain rate and its enqueue rates
(:func:`pgqueuer_enqueue_rate`). The drain follows ``bench.drain.throughput`` so the
figures compare: jobs are enqueued first, then ONE consumer process drains them, and the clock
runs from the first pick to the last completion, so process start-up and connection set-up are
excluded. pgqueuer gets its own database on the same server,
so its schema never meets ours. Nothing is tuned: batch size, concurrency, buffering, durability
and log level are whatever ``pgq install`` and ``pgq run`` choose.
The contender row uses pgqueuer's asyncpg driver (``driver="asyncpg"``, its fastest: the peer is
compared at its best); ``driver="psycopg"`` (our driver) is the second line. The psycopg
driver's NOTIFY watcher holds the connection for up to 1 s at a time, which shows as a ~1 s stall
between the first pick and the first completion, once, at start-up. The rate is taken from the
first completion on, so the stall is left out as our worker's start-up is: with it inside, a
10,000-job drain read about a quarter lower, and how much lower varied from run to run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import IO

import asyncpg
import pgqueuer
import psycopg
from pgqueuer.db import AsyncpgDriver, PsycopgDriver
from pgqueuer.domain.settings import db_settings
from pgqueuer.queries import Queries
from sqlalchemy.engine import make_url

from .db import ROOT, checkpoint, server_url
from .pgqueuer_app import DSN_ENV, ENTRYPOINT

DATABASE = "pgqueuer_bench"
ENQUEUE_CHUNK = 1_000  # jobs per bulk enqueue call, as our own bulk enqueue benchmark uses


def _pgq(url: str, *args: str) -> list[str]:
    """A ``pgq`` command line (``python -m pgqueuer`` is the same CLI, without relying on PATH)."""
    return [sys.executable, "-m", "pgqueuer", "--pg-dsn", url, *args]


def _fresh_database(admin_url: str, name: str) -> str:
    """Drop and recreate ``name`` (as ``bench.db.fresh_database``, minus our migrations)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_url(admin_url).set(database=name).render_as_string(False)


async def _enqueue(url: str, jobs: int) -> None:
    """``jobs`` no-op jobs through pgqueuer's bulk ``Queries.enqueue`` (lists = one INSERT)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        queries = Queries(PsycopgDriver(conn))
        for start in range(0, jobs, ENQUEUE_CHUNK):
            n = min(ENQUEUE_CHUNK, jobs - start)
            await queries.enqueue([ENTRYPOINT] * n, [None] * n, [0] * n)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM (pgqueuer shuts down gracefully on it), then kill after 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _tail(log: IO[str]) -> str:
    log.seek(0)
    return log.read()[-2000:]


def _wait_drained(url: str, table: str, proc: subprocess.Popen, log: IO[str], timeout: float) -> None:
    """Poll until the queue table is empty: pgqueuer deletes each job once it has run."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"pgqueuer consumer exited with {proc.returncode}:\n{_tail(log)}")
            if not conn.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0]:
                return
            time.sleep(0.05)
    raise TimeoutError(f"pgqueuer did not drain its queue within {timeout} s")


FACTORIES = {"asyncpg": "bench.pgqueuer_app:main", "psycopg": "bench.pgqueuer_app:main_psycopg"}


def pgqueuer_throughput(admin_url: str, *, jobs: int, timeout: float = 600, driver: str = "asyncpg") -> float:
    """Jobs per second of one default pgqueuer consumer draining ``jobs`` queued no-op jobs.

    ``admin_url`` is a libpq URL of the server's ``postgres`` database (``bench.db.server_url()``).
    The rate comes from pgqueuer's own log table (``pgqueuer_log``): the jobs completed after
    the first completion (pgqueuer records completions in groups, one timestamp each), over
    the span from the earliest ``successful`` row to the latest. pgqueuer writes those rows in
    its completion statement with ``now()``, i.e. server clock, like our ``finished_at``.
    Starting at the first completion rather than the first ``picked`` row leaves out the
    start-up stall described above. Raises if any job did not end ``successful``.
    """
    url = _fresh_database(admin_url, DATABASE)
    subprocess.run(_pgq(url, "install"), check=True, capture_output=True, text=True, timeout=120)
    asyncio.run(_enqueue(url, jobs))
    settings = db_settings()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pgqueuer", "run", FACTORIES[driver]],
            cwd=ROOT,
            env={**os.environ, DSN_ENV: url},
            stdout=subprocess.DEVNULL,
            stderr=log,
            text=True,
        )
        try:
            _wait_drained(url, settings.queue_table, proc, log, timeout)
        finally:
            _stop(proc)
    with psycopg.connect(url) as conn:
        first, last, succeeded, after_first = conn.execute(
            f"WITH done AS (SELECT created FROM {settings.queue_table_log} WHERE status = 'successful')"
            " SELECT min(created), max(created), count(*),"
            " count(*) FILTER (WHERE created > (SELECT min(created) FROM done)) FROM done"
        ).fetchone()
    if succeeded != jobs:
        raise RuntimeError(f"only {succeeded} of {jobs} pgqueuer jobs succeeded")
    return after_first / max((last - first).total_seconds(), 1e-6)


async def _enqueue_timed(url: str, jobs: int, per_call: int, keyed: bool) -> float:
    """Seconds for ``jobs`` jobs through ``Queries.enqueue`` on one held asyncpg connection."""
    conn = await asyncpg.connect(url)
    try:
        queries = Queries(AsyncpgDriver(conn))
        await queries.enqueue([ENTRYPOINT], [b"{}"], [0])  # warm: the statement is prepared once
        payloads = [b'{"i": %d}' % i for i in range(jobs)]  # as our rows post {"i": i}
        keys = [f"k{i}" for i in range(jobs)] if keyed else None
        start = time.perf_counter()
        if per_call == 1:
            for i in range(jobs):
                await queries.enqueue(ENTRYPOINT, payloads[i], 0, dedupe_key=keys[i] if keys else None)
        else:
            for first in range(0, jobs, per_call):
                part = slice(first, min(first + per_call, jobs))
                n = part.stop - part.start
                if keys:
                    await queries.enqueue(
                        [ENTRYPOINT] * n, payloads[part], [0] * n, dedupe_key=keys[part], on_conflict="skip"
                    )
                else:
                    await queries.enqueue([ENTRYPOINT] * n, payloads[part], [0] * n)
        return time.perf_counter() - start
    finally:
        await conn.close()


def pgqueuer_enqueue_rate(admin_url: str, *, jobs: int, per_call: int, keyed: bool = False) -> float:
    """Jobs per second of pgqueuer's own enqueue (``Queries.enqueue``), ``per_call`` jobs per
    call, on one held connection of its asyncpg driver (its fastest), as a client script would.

    One call is one statement: the jobs' insert and their ``queued`` log rows, committed.
    ``keyed``: every job has a dedupe key and taken keys are skipped (``on_conflict="skip"``),
    the work our bulk API's idempotency keys do; without keys is pgqueuer at its best, the
    contender row. A fresh database each call, starting just after a ``CHECKPOINT``, as our
    enqueue rows start (``bench.db.truncate``). Raises if a job is missing afterwards.
    """
    url = _fresh_database(admin_url, DATABASE)
    subprocess.run(_pgq(url, "install"), check=True, capture_output=True, text=True, timeout=120)
    with psycopg.connect(url, autocommit=True) as conn:
        checkpoint(conn)
    seconds = asyncio.run(_enqueue_timed(url, jobs, per_call, keyed))
    with psycopg.connect(url) as conn:
        queued = conn.execute(f"SELECT count(*) FROM {db_settings().queue_table}").fetchone()[0]
    if queued != jobs + 1:  # and the warm-up job
        raise RuntimeError(f"pgqueuer queued {queued} jobs, expected {jobs + 1}")
    return jobs / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.contenders", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs to drain")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before giving up")
    parser.add_argument("--driver", choices=sorted(FACTORIES), default="asyncpg")
    args = parser.parse_args(argv)
    rate = pgqueuer_throughput(server_url(), jobs=args.jobs, timeout=args.timeout, driver=args.driver)
    print(
        f"pgqueuer {pgqueuer.__version__}, {args.driver} driver, default configuration, 1 consumer:"
        f" {rate:,.0f} jobs/s"
    )
    for per_call, keyed in ((1, False), (ENQUEUE_CHUNK, False), (ENQUEUE_CHUNK, True)):
        rate = pgqueuer_enqueue_rate(server_url(), jobs=args.jobs, per_call=per_call, keyed=keyed)
        keys = ", dedupe keys" if keyed else ""
        print(f"pgqueuer enqueue, asyncpg, {per_call:,} per call{keys}: {rate:,.0f} jobs/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
