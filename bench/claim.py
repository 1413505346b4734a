"""Claim cost as the queue grows: the same claim at 10k and at 1M queued, beside finished rows."""

from __future__ import annotations

import statistics
import time

import psycopg
from flask import Flask

from dashboard.store import connection, lifecycle

from .db import seed_queued


def claim_ms(app: Flask, samples: int = 200, *, generic: bool = True) -> tuple[float, float]:
    """p50 and p95 of ``lifecycle.claim_next_job`` in milliseconds (each claims a new job), on
    one held connection: with generic plans, as a one-job mode worker thread claims
    (``connection.connect_worker``), or with PostgreSQL's default choice of plans."""
    times: list[float] = []
    with app.app_context():
        conn = connection.connect_worker() if generic else connection.connect()
        for _ in range(6):  # psycopg prepares a statement on its fifth execution
            lifecycle.claim_next_job("bench:claim", lease_seconds=30, conn=conn)
        for _ in range(samples):
            start = time.perf_counter()
            job = lifecycle.claim_next_job("bench:claim", lease_seconds=30, conn=conn)
            times.append((time.perf_counter() - start) * 1000)
            assert job is not None, "the queue ran dry during the claim benchmark"
        connection.release_worker(conn)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def run(app: Flask, url: str, *, small: int, large: int) -> dict[str, tuple[float, float]]:
    """Claim p50/p95 with ``small`` and with ``large`` queued jobs beside the finished rows."""
    results = {}
    for queued in (small, large):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM jobs_job WHERE status IN ('queued', 'running')")
        seed_queued(url, queued)
        samples = min(200, queued // 4)
        results[f"{queued:,} queued"] = claim_ms(app, samples)
        results[f"{queued:,} queued (default plans)"] = claim_ms(app, samples, generic=False)
    with psycopg.connect(url, autocommit=True) as conn:  # leave the large database as seeded
        conn.execute("DELETE FROM jobs_job WHERE status IN ('queued', 'running')")
        # A million dead index entries would slow every later count until autovacuum came by,
        # and the deleted jobs' events (the newest ids) every read of the event feed: 1M dead
        # events are too few of 30M for autovacuum to come by at all.
        conn.execute("VACUUM ANALYZE jobs_job")
        conn.execute("VACUUM ANALYZE jobs_jobevent")
    return results
