"""Drain throughput and idle pickup latency of a real ``flask worker`` process."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from flask import Flask

from dashboard.store import connection
from dashboard.store.lifecycle import create as enqueue

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


def _wait_for(url: str, query: str, timeout: float, interval: float, what: str) -> None:
    """Poll ``query`` (one boolean) every ``interval`` seconds until it is true; ``TimeoutError``
    saying ``what`` did not happen within ``timeout``."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            if conn.execute(query).fetchone()[0]:
                return
            time.sleep(interval)
    raise TimeoutError(f"{what} within {timeout} s")


def _wait_drained(url: str, jobs: int, timeout: float) -> None:
    query = (
        f"SELECT count(*) >= {int(jobs)} FROM jobs_job WHERE status IN ('succeeded', 'failed') AND {SEEDED}"
    )
    _wait_for(url, query, timeout, 0.05, f"{jobs} jobs not drained")


def _wait_first_claim(url: str, timeout: float) -> None:
    query = "SELECT EXISTS (SELECT FROM jobs_jobevent WHERE type = 'claimed')"
    _wait_for(url, query, timeout, 0.005, "no job claimed")


_TICK = 1 / os.sysconf("SC_CLK_TCK")
_PROC = Path("/proc/self/stat")  # Linux's process table, where the CPU figures come from


def _stat(pid: int) -> list[str]:
    """``/proc/PID/stat``'s fields after the command name: [0] is the state (field 3)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _cpu(fields: list[str], *, reaped: bool = False) -> float:
    """CPU seconds of a process from its ``_stat`` fields: user + system, all its threads, and
    with ``reaped`` its ended children's as well."""
    return sum(int(fields[i]) for i in ((11, 12, 13, 14) if reaped else (11, 12))) * _TICK


def _worker_cpu(pid: int) -> float:
    """CPU seconds of a ``flask worker``: its own, and with ``--processes`` its live children's
    (a supervisor's own is next to nothing; its children run through the drain)."""
    total = _cpu(_stat(pid))
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            child = _stat(int(entry))
        except OSError:
            continue
        if int(child[1]) == pid:
            total += _cpu(child)
    return total


def _server_cpu(postmaster: int) -> float:
    """CPU seconds of a local PostgreSQL: the postmaster's own and its reaped children's, plus
    every live child's. A backend that ends between two readings moves its time from the
    second term to the first, so a difference of two readings counts it once."""
    total = _cpu(_stat(postmaster), reaped=True)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            child = _stat(int(entry))
        except OSError:  # ended meanwhile: its time is the postmaster's now
            continue
        if int(child[1]) == postmaster:
            total += _cpu(child)
    return total


def _postmaster(url: str) -> int | None:
    """The server's postmaster pid when the server runs on this machine, else ``None``."""
    with psycopg.connect(url, autocommit=True) as conn:  # open: a closed backend may be gone
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        try:
            parent = int(_stat(backend)[1])
            return parent if "postgres" in Path(f"/proc/{parent}/cmdline").read_text() else None
        except OSError:  # another machine's pid
            return None


def describe_cpu(cpu: dict[str, float]) -> str:
    """``worker 480, server 1,050, total 1,530 µs/job``, from :func:`throughput`'s ``cpu`` (its
    ``total`` if it has one, as a median of totals does, else the sum of the parts)."""
    parts = [f"{part} {cpu[part]:,.0f}" for part in ("worker", "server") if part in cpu]
    if not parts:
        return "not measured (no /proc)"
    if "server" in cpu:
        parts.append(f"total {cpu.get('total', cpu['worker'] + cpu['server']):,.0f}")
    return ", ".join(parts) + " µs/job"


def median_cpu(runs: list[dict[str, float]]) -> dict[str, float]:
    """:func:`throughput`'s ``cpu`` of several drains: per part, the median over the runs that
    have it in every run; ``total``, the median of the runs' totals, where all have both."""
    median = {
        part: statistics.median(run[part] for run in runs)
        for part in ("worker", "server")
        if runs and all(part in run for run in runs)
    }
    if "server" in median:
        median["total"] = statistics.median(run["worker"] + run["server"] for run in runs)
    return median


DEMO_SUCCESS = ("demo.success", '{"sleep_seconds": 0}')  # one progress report per job, no sleep
CPU_5MS = ("bench.cpu", '{"ms": 5}')  # a CPU-bound handler: 5 ms of Python per job
SLEEP_20MS = ("demo.success", '{"sleep_seconds": 0.02}')  # an I/O-bound one: waits 20 ms


def throughput(
    url: str,
    *,
    jobs: int,
    threads: int,
    timeout: float = 600,
    job: tuple[str, str] = ("bench.noop", "{}"),
    cpu: dict[str, float] | None = None,
    seed: Callable[[str], None] | None = None,
    **env: str,
) -> float:
    """Jobs per second from the first claim to the last completion (start-up excluded).

    ``job``: the type and JSON payload of the queued jobs. ``cpu``: filled with the CPU
    microseconds per job, from the first claim seen to the drain's end, of the worker process
    (``worker``; with ``JOB_WORKER_PROCESSES``, its children's too) and of the database server
    (``server``, every process of it, the benchmark's own polling included; only when the
    server runs on this machine), both read from ``/proc`` (left empty without one). On a
    machine whose CPU is the limit they are what a rate comes from; they rise with the
    machine's contention as well. ``seed(url)``: queue the ``jobs`` some other way (a
    workflow's graph) instead of as independent jobs of ``job``.
    """
    truncate(url)
    if seed is not None:
        seed(url)
    else:
        seed_queued(url, jobs, job_type=job[0], payload=job[1])
    with worker(url, threads=threads, **env) as proc:
        if cpu is None or not _PROC.exists():
            _wait_drained(url, jobs, timeout)
        else:
            postmaster = _postmaster(url)
            _wait_first_claim(url, timeout)
            start = _worker_cpu(proc.pid), _server_cpu(postmaster) if postmaster else 0.0
            _wait_drained(url, jobs, timeout)
            cpu["worker"] = (_worker_cpu(proc.pid) - start[0]) / jobs * 1e6
            if postmaster:
                cpu["server"] = (_server_cpu(postmaster) - start[1]) / jobs * 1e6
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
            job = enqueue.create_job(enqueue.JobSpec("bench.noop", {"i": i}), conn=client).job
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
