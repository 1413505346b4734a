"""Retention under load: prune finished jobs while a ``flask worker`` drains at full speed.

``run(total=10_000_000, prune=1_000_000, queue=...)`` seeds its own database with ``total``
finished jobs over 30 days (3 events each, 9 in 10 succeeded; ``db.seed_finished``), picks the
cutoff that makes the oldest ``prune`` succeeded jobs expire, and measures one worker process
(4 threads, one-job mode, bench.noop jobs):

1. **without pruning**: ``queue`` queued jobs drained; jobs/s from first claim to last finish;
2. **while pruning**: ``queue`` more jobs queued, the worker started, then ``retention.prune``
   (the same code as the workers' retention pass and ``flask prune``) runs in this process;
   jobs/s over the prune's window (cut where the queue ran dry, if it did);

and the claim p95 of each phase, estimated from the worker's own
``jobqueue_worker_claim_seconds`` histogram (``--metrics-port``; bucket resolution). The
worker's own retention is off (``JOB_RETENTION_*=0``) so only the measured prune deletes.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import psycopg
from sqlalchemy.engine import make_url

from dashboard import upgrade_database
from dashboard.store.lifecycle import retention

from .db import fresh_database, make_app, seed_finished, seed_queued, server_url
from .drain import worker

THREADS = 4


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _claim_buckets(port: int) -> dict[float, float]:
    """Cumulative claim-latency buckets (upper bound -> count), summed over claim kinds."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "jobqueue_worker_claim_seconds_bucket":
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return buckets


def p95_ms(before: dict[float, float], after: dict[float, float]) -> float:
    """The 95th percentile of the claims between two scrapes, interpolated within its bucket."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0
    if not total:
        return float("nan")
    target, lower, below = 0.95 * total, 0.0, 0.0
    for bound, cumulative in zip(bounds, counts, strict=True):
        if cumulative >= target:
            if bound == float("inf"):
                return lower * 1000
            share = (target - below) / max(cumulative - below, 1e-9)
            return (lower + (bound - lower) * share) * 1000
        lower, below = bound, cumulative
    return lower * 1000


def _done(conn: psycopg.Connection) -> int:
    return conn.execute(
        "SELECT count(*) FROM jobs_job WHERE type = 'bench.noop' AND status = 'succeeded'"
    ).fetchone()[0]


def _drain(url: str, queue: int, *, during=None, timeout: float = 3600) -> dict[str, float]:
    """Drain ``queue`` fresh jobs with one worker; ``during()`` runs once the worker claims."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM jobs_job WHERE type = 'bench.noop'")
    seed_queued(url, queue)
    port = _free_port()
    env = {"JOB_WORKER_METRICS_PORT": str(port), "JOB_RETENTION_SUCCEEDED": "0", "JOB_RETENTION_FAILED": "0"}
    result: dict[str, float] = {}
    with worker(url, threads=THREADS, **env), psycopg.connect(url, autocommit=True) as conn:
        deadline = time.monotonic() + timeout
        while _done(conn) == 0:
            if time.monotonic() > deadline:
                raise TimeoutError("the worker claimed nothing")
            time.sleep(0.05)
        before = _claim_buckets(port)
        started, done_before = time.monotonic(), _done(conn)
        if during is not None:
            during()
        else:
            while _done(conn) < queue and time.monotonic() < deadline:
                time.sleep(0.05)
        window = time.monotonic() - started
        done = _done(conn) - done_before
        result["claim_p95_ms"] = p95_ms(before, _claim_buckets(port))
        result["jobs_per_second"] = done / max(window, 1e-6)
        result["window_seconds"] = window
        result["queue_ran_dry"] = float(_done(conn) >= queue)
    return result


def _copy_of_large(total: int) -> str | None:
    """A file-level copy (``CREATE DATABASE ... TEMPLATE``) of the pages section's large database
    of ``total`` finished jobs, when it exists: minutes instead of the seeding's quarter hour, and
    the large database itself is never pruned. ``None`` when there is none to copy."""
    admin = server_url()
    source, name = f"jobqueue_bench_{total}", f"jobqueue_bench_prune_{total}"
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (source,)).fetchone():
            return None
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (source,))
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
    url = make_url(admin).set(database=name).render_as_string(False)
    upgrade_database(make_app(url))
    return url


def run(*, total: int, prune: int, queue: int) -> dict[str, object]:
    """Seed (or copy the large database), drain without and while pruning; returns the figures
    (see the module notes)."""
    seeded_at = time.monotonic()
    url = _copy_of_large(total)
    if url is None:
        url = fresh_database(f"jobqueue_bench_prune_{total}")
        seed_finished(url, total, events_per_job=3)
    seeding = time.monotonic() - seeded_at
    app = make_app(url)
    with psycopg.connect(url) as conn:
        cutoff = conn.execute(
            "SELECT finished_at FROM jobs_job WHERE status = 'succeeded'"
            " ORDER BY finished_at OFFSET %s LIMIT 1",
            (max(prune - 1, 0),),
        ).fetchone()[0] + timedelta(microseconds=1)
        events = conn.execute(
            "SELECT count(*) FROM jobs_jobevent e JOIN jobs_job j ON j.id = e.job_id"
            " WHERE j.status = 'succeeded' AND j.finished_at < %s",
            (cutoff,),
        ).fetchone()[0]
    baseline = _drain(url, queue)
    removed: list[retention.Removed] = []
    prune_seconds: list[float] = []

    def prune_now() -> None:
        started = time.monotonic()
        with app.app_context():
            removed.append(retention.prune({"succeeded": cutoff}))
        prune_seconds.append(time.monotonic() - started)

    during = _drain(url, queue, during=prune_now)
    out = removed[0]
    return {
        "total": total,
        "seeding_seconds": seeding,
        "pruned_jobs": out.jobs.get("succeeded", 0),
        "pruned_events": out.events.get("succeeded", 0),
        "expected_events": events,
        "prune_seconds": prune_seconds[0],
        "batches": out.batches,
        "drain_without": baseline,
        "drain_during": during,
        "cutoff": cutoff.astimezone(UTC).isoformat(),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
