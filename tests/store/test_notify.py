"""Jobs that become claimable now are announced on the workers' channel; later ones are not."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest

from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import CREATE_CHUNK, JobSpec
from dashboard.store.sql import NOTIFY_CHANNEL
from dashboard.store.values import utcnow

from .helpers import claim, fail


@pytest.fixture
def listener(app, libpq_url) -> Iterator[psycopg.Connection]:
    with psycopg.connect(libpq_url, autocommit=True) as conn:
        conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        yield conn


def received(conn: psycopg.Connection) -> int:
    """Notifications already delivered (a short wait: they are sent at commit, before we ask)."""
    return sum(1 for _ in conn.notifies(timeout=0.5))


def test_create_announces_a_job_available_now(listener):
    enqueue.create_job(enqueue.JobSpec("demo.success"))
    assert received(listener) == 1


def test_a_delayed_job_is_not_announced(listener):
    enqueue.create_job(enqueue.JobSpec("demo.success", available_at=utcnow() + timedelta(hours=1)))
    assert received(listener) == 0


@pytest.mark.parametrize("count", [50, 2 * CREATE_CHUNK + 1])  # one chunk, three chunks
def test_bulk_create_announces_once(listener, count):
    enqueue.create_jobs([JobSpec("demo.success") for _ in range(count)])
    assert received(listener) == 1


def test_idempotent_repeat_announces_nothing(listener):
    enqueue.create_job(enqueue.JobSpec("demo.success", idempotency_key="k"))
    assert received(listener) == 1
    enqueue.create_job(enqueue.JobSpec("demo.success", idempotency_key="k"))
    assert received(listener) == 0


def test_manual_retry_announces_and_backoff_requeue_does_not(listener):
    now = utcnow()
    enqueue.create_job(enqueue.JobSpec("demo.fail", max_attempts=2), now=now)
    assert received(listener) == 1
    job = claim("w", now=now)
    fail(job, "w", now=now)  # requeued 5 s later: nothing to wake for yet
    assert received(listener) == 0
    job = claim("w", now=now + timedelta(seconds=10))
    fail(job, "w", now=now + timedelta(seconds=10))  # no attempts left: failed
    actions.run_one("retry", job.id)
    assert received(listener) == 1
