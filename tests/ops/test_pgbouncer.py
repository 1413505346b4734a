"""The worker lifecycle through PgBouncer in transaction mode (``pool_mode = transaction``).

Web (the API, in this process) and a real ``flask worker`` both use ``DATABASE_URL`` = the
pooler with ``DATABASE_POOLED=true``: no server-side prepared statements, no session ``SET``.
With ``DATABASE_DIRECT_URL`` the worker's LISTEN goes straight to PostgreSQL; without it the
worker polls and says so. Each case runs the key lifecycle: create, claim by the worker,
success, failure and retry, the rescue, manual retry, then retention and readiness.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from flask import Flask

from dashboard import create_app
from dashboard.extensions import db
from dashboard.store.lifecycle import retention
from dashboard.store.reads import stats as read_stats
from dashboard.store.values import utcnow
from tests.conftest import TEST_CONFIG
from tests.support.factories import make_job
from tests.support.waiting import wait_until
from tests.support.worker_loop import event_types, wait_for_status

from .pgbouncer import pgbouncer

pytestmark = pytest.mark.process


def steps(job_id) -> list[str]:
    return [t for t in event_types(job_id) if t not in {"progress", "lease_renewed"}]


@pytest.fixture
def bouncer(app: Flask, libpq_url: str, tmp_path: Path) -> Iterator[str]:
    with pgbouncer(libpq_url, tmp_path / "pgbouncer") as url:
        yield url


@pytest.fixture
def pooled_app(bouncer: str) -> Iterator[Flask]:
    pooled = create_app(
        {**TEST_CONFIG, "DATABASE_URL": bouncer, "DATABASE_POOLED": "true", "AUTO_MIGRATE": "false"}
    )
    yield pooled
    with pooled.app_context():
        db.engine.dispose()


@pytest.mark.parametrize("direct", [True, False], ids=["direct-listen", "polling"])
def test_lifecycle_through_transaction_pooling(app, pooled_app, bouncer, libpq_url, start_worker, direct):
    env = {"DATABASE_POOLED": "true", "JOB_WORKER_POLL_INTERVAL_MS": "100"}
    if direct:
        env["DATABASE_DIRECT_URL"] = libpq_url
    worker = start_worker(database_url=bouncer, **env)
    if direct:
        worker.wait_for_output("listening for new jobs")
    else:
        worker.wait_for_output("LISTEN cannot work through a transaction pooler")
    client = pooled_app.test_client()
    assert client.get("/api/ready/").status_code == 200

    def create(body: dict) -> str:
        response = client.post("/api/jobs/", json=body)
        assert response.status_code == 201, response.get_json()
        return response.get_json()["id"]

    ok = create({"type": "demo.success", "payload": {"sleep_seconds": 0}})
    failing = create({"type": "demo.fail", "payload": {"error": "nope"}, "max_attempts": 2})
    with app.app_context():
        lost = make_job("running", locked_until=utcnow() - timedelta(seconds=5), payload={"sleep_seconds": 0})
    with pooled_app.app_context():
        assert wait_for_status(ok, "succeeded").attempts == 1
        assert steps(ok) == ["created", "claimed", "succeeded"]
        failed = wait_for_status(failing, "failed")
        assert failed.attempts == 2 and "nope" in failed.last_error
        assert steps(failing) == ["created", "claimed", "retry_scheduled", "claimed", "failed"]
        recovered = wait_for_status(lost.id, "succeeded")
        assert "timeout_requeued" in event_types(lost.id) and recovered.attempts == 2

    assert client.post(f"/api/jobs/{failing}/retry/").status_code == 200  # manual retry
    with pooled_app.app_context():
        wait_until(lambda: steps(failing)[-1] == "failed" and "manual_retry" in steps(failing), 20)
        after = steps(failing)[steps(failing).index("manual_retry") :]
        assert after[:2] == ["manual_retry", "claimed"] and after[-1] == "failed"
        # retention and the stats recount take transaction-level locks: fine through the pooler
        removed = retention.prune(retention.cutoffs({"succeeded": 1e-9, "failed": 1e-9}))
        assert not removed.busy and removed.total_jobs == 3
        assert read_stats.stats(utcnow()).total == 0
    assert "prepared statement" not in worker.output  # psycopg's prepared statements are off


def test_bulk_create_through_transaction_pooling(pooled_app):
    """The bulk create's statement goes out in pipeline mode (the records are built while it
    runs): through the pooler too, each request is one transaction with its events."""
    client = pooled_app.test_client()
    jobs = [{"type": "demo.success", "idempotency_key": f"bulk-{i}"} for i in range(5)]
    for _ in range(3):  # new, then replayed: the second statement (taken keys) as well
        first = client.post("/api/jobs/bulk/", json={"jobs": jobs[:3]})
        second = client.post("/api/jobs/bulk/", json={"jobs": jobs})
        assert first.status_code in (200, 201) and second.status_code in (200, 201)
    created = [r["job"] for r in second.get_json()["results"]]
    assert [r["created"] for r in second.get_json()["results"]] == [False] * 5
    assert [job["idempotency_key"] for job in created] == [f"bulk-{i}" for i in range(5)]
    with pooled_app.app_context():
        assert read_stats.stats(utcnow()).total == 5
        assert all(event_types(job["id"]) == ["created"] for job in created)
