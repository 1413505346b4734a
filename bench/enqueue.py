"""Enqueue rate from one client: one job per call, and the bulk path when the engine has it."""

from __future__ import annotations

import time

from flask import Flask

from dashboard.store import connection
from dashboard.store.lifecycle import create as enqueue

from .db import truncate


def single(app: Flask, url: str, *, jobs: int, held: bool = False) -> float:
    """Jobs per second through ``enqueue.create_job``, one transaction each.

    ``held``: on one connection from ``connection.connect()`` kept for the whole run, as a script
    that enqueues in a loop would (and as pgqueuer's client does); otherwise every call checks
    a connection out of the pool, with its pre-ping.
    """
    truncate(url)
    with app.app_context(), connection.connect() as conn:
        client = conn if held else None
        enqueue.create_job(
            enqueue.JobSpec("bench.noop"), conn=client
        )  # warm the pool and the prepared statement
        start = time.perf_counter()
        for _ in range(jobs):
            enqueue.create_job(enqueue.JobSpec("bench.noop", {}), conn=client)
        return jobs / (time.perf_counter() - start)


def bulk(app: Flask, url: str, *, jobs: int, chunk: int = 1000) -> float:
    """Jobs per second through ``enqueue.create_jobs``, ``chunk`` jobs per call."""
    truncate(url)
    specs = [enqueue.JobSpec("bench.noop", {"i": i}) for i in range(jobs)]
    with app.app_context():
        start = time.perf_counter()
        for i in range(0, jobs, chunk):
            enqueue.create_jobs(specs[i : i + chunk])
        return jobs / (time.perf_counter() - start)
