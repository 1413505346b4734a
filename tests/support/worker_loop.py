"""Waiting on conditions (never on the clock), and reading a job's story."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from flask import Flask

from dashboard.config import WorkerSettings
from dashboard.runtime.handlers import Handler, get_handler
from dashboard.runtime.one_job import OneJobLoop
from dashboard.runtime.progress import Flusher
from dashboard.runtime.threads import ThreadRuntime
from dashboard.store import lifecycle
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.records import JobRecord
from tests.support.timelines import job  # one helper for both modules; re-exported here
from tests.support.timelines import timeline as events  # noqa: F401  (re-exported)
from tests.support.waiting import wait_until


def event_types(job_id: uuid.UUID) -> list[str]:
    return [e.type for e in read_jobs.job_events(job_id)]


def wait_for_status(job_id: uuid.UUID, *statuses: str, timeout: float = 15.0) -> JobRecord:
    return wait_until(
        lambda: (j := job(job_id)).status in statuses and j,
        timeout,
        f"job {job_id} to be {' or '.join(statuses)}",
    )


def instant(iso: str) -> datetime:
    """A timestamp PostgreSQL wrote into an event's jsonb data."""
    return datetime.fromisoformat(iso)


# In-process loop tests: one thread, a long lease and slow backoff, so nothing moves unless a
# test steps the loop.
SETTINGS = WorkerSettings(
    threads=1,
    poll_interval_ms=10,
    lease_seconds=30,
    cleanup_interval_seconds=60,
    cleanup_batch_size=10,
    backoff_base_seconds=10,
    backoff_max_seconds=60,
)


def one_job_loop(
    app: Flask,
    settings: WorkerSettings,
    worker_id: str,
    *,
    lookup: Callable[[str], Handler | None] = get_handler,
    flusher: Flusher | None = None,
) -> OneJobLoop:
    """A one-job loop of its own thread runtime (a stop signal of its own), as the worker
    makes them; ``flusher``: a started progress flusher, for tests of the timer."""
    runtime = ThreadRuntime(app, settings, worker_id, threading.Event())
    return OneJobLoop(runtime, lookup=lookup, flusher=flusher)


def lose_to_another_worker(ctx: Any) -> JobRecord | None:
    """Inside a handler: the lease runs out (simulated with ``now``), cleanup requeues the job
    and ``other-worker`` claims it. Returns that claim."""
    expired_at = ctx.locked_until + timedelta(seconds=1)
    lifecycle.rescue_expired_jobs(
        "cleaner", batch_size=10, backoff_base_seconds=0, backoff_max_seconds=0, now=expired_at
    )
    return lifecycle.claim_next_job("other-worker", lease_seconds=30, now=expired_at)
