"""Drain throughput and idle pickup latency of a real ``flask worker`` process."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from flask import Flask

from dashboard.store import connection, enqueue

from .db import ROOT, seed_queued, truncate


@contextmanager
def worker(url: str, *, threads: int, **env: str) -> Iterator[subprocess.Popen]:
    """A ``flask --app wsgi worker`` process on the benchmark database, stopped on exit."""
    environ = {
        **os.environ,
        "DATABASE_URL": url,
        "DEBUG": "false",
        "ENABLE_DEBUG_TOOLBAR": "false",
        "JOB_DEMO_HANDLERS": "true",  # demo types are off by default with DEBUG=false
        "AUTO_MIGRATE": "false",
        "JOB_HANDLER_MODULES": "bench.handlers",
        "JOB_WORKER_LOG_LEVEL": "WARNING",
        "JOB_WORKER_THREADS": str(threads),  # the pool is sized from it
        "JOB_RETENTION_SUCCEEDED": "0",  # a worker's retention pass must not prune seeded data
        "JOB_RETENTION_FAILED": "0",
        **env,
    }
    logs = ROOT / "bench" / "results"
    logs.mkdir(exist_ok=True)
    log = open(logs / "worker.log", "a")  # noqa: SIM115 (closed below); never an unread pipe
    proc = subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", "wsgi", "worker"],
        cwd=ROOT,
        env=environ,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


# The seeded jobs, not the runs a declared schedule enqueues meanwhile (drain beside schedules).
SEEDED = "(idempotency_key IS NULL OR idempotency_key NOT LIKE 'schedule:%')"
WITH_SCHEDULES = {"JOB_HANDLER_MODULES": "bench.handlers,bench.schedules"}


def _wait_drained(url: str, jobs: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            done = conn.execute(
                f"SELECT count(*) FROM jobs_job WHERE status IN ('succeeded', 'failed') AND {SEEDED}"
            ).fetchone()[0]
            if done >= jobs:
                return
            time.sleep(0.05)
    raise TimeoutError(f"{jobs} jobs not drained within {timeout} s")


DEMO_SUCCESS = ("demo.success", '{"sleep_seconds": 0}')  # one progress report per job, no sleep


def throughput(
    url: str,
    *,
    jobs: int,
    threads: int,
    timeout: float = 600,
    job: tuple[str, str] = ("bench.noop", "{}"),
    **env: str,
) -> float:
    """Jobs per second from the first claim to the last completion (start-up excluded).

    ``job``: the type and JSON payload of the queued jobs.
    """
    truncate(url)
    seed_queued(url, jobs, job_type=job[0], payload=job[1])
    with worker(url, threads=threads, **env):
        _wait_drained(url, jobs, timeout)
    with psycopg.connect(url) as conn:
        first, last = conn.execute(
            "SELECT (SELECT min(created_at) FROM jobs_jobevent WHERE type = 'claimed'),"
            f" (SELECT max(finished_at) FROM jobs_job WHERE {SEEDED})"
        ).fetchone()
        failed = conn.execute(
            f"SELECT count(*) FROM jobs_job WHERE status <> 'succeeded' AND {SEEDED}"
        ).fetchone()[0]
    if failed:
        raise RuntimeError(f"{failed} benchmark jobs did not succeed")
    return jobs / max((last - first).total_seconds(), 1e-6)


def pickup_latency(app: Flask, url: str, *, samples: int, **env: str) -> tuple[float, float]:
    """p50/p95 ms from a job's creation to its claim by an idle worker."""
    truncate(url)
    latencies: list[float] = []
    with (
        worker(url, threads=4, **env),
        app.app_context(),
        psycopg.connect(url, autocommit=True) as conn,
        connection.connect() as client,  # the producer holds its connection, as a script would
    ):
        time.sleep(2.0)  # let the worker start and go idle; this is setup, not synchronisation
        for i in range(samples):
            job = enqueue.create_job("bench.noop", {"i": i}, conn=client).job
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT created_at FROM jobs_jobevent WHERE job_id = %s AND type = 'claimed'",
                    (job.id,),
                ).fetchone()
                if row:
                    latencies.append((row[0] - job.created_at).total_seconds() * 1000)
                    break
                time.sleep(0.001)
            time.sleep(0.05 + (i % 5) * 0.03)  # spread arrivals over the poll cycle
    latencies.sort()
    return statistics.median(latencies), latencies[max(0, int(len(latencies) * 0.95) - 1)]
