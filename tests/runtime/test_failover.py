"""A worker on a multi-host URL through a planned switchover, and through a read-only server.

- Switchover: a primary and its synchronous standby (``bench/replication.py``), the worker on
  libpq's multi-host URL with ``target_session_attrs=read-write``. The primary is stopped
  cleanly, the standby promoted, the old primary started again as a standby of the new one
  (read-only): the worker goes on with the new primary without a restart, its LISTEN
  connection back, and nothing is written to the old one.
- Read-only: the server answers ``cannot execute … in a read-only transaction`` (SQLSTATE
  25006, here through ``default_transaction_read_only``, as a name or pooler still pointing at
  a demoted primary would): a connection fault, logged as the database being unavailable; the
  claim waits, the end of a running attempt is retried, and no attempt is charged.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from flask import Flask

from bench.replication import Pair
from dashboard import create_app, upgrade_database
from dashboard.extensions import db
from dashboard.store.lifecycle import create as enqueue
from tests.support.open_access import OPEN_ACCESS
from tests.support.waiting import wait_until
from tests.support.worker_loop import job, wait_for_status

pytestmark = [pytest.mark.process, pytest.mark.slow]

DATABASE = "failover"


@pytest.fixture
def pair() -> Iterator[Pair]:
    built = Pair.build(synchronous=True)
    try:
        built.create_database(DATABASE)
        yield built
    finally:
        built.close()


def app_on(url: str) -> Flask:
    app = create_app(
        {
            "TESTING": True,
            "DEBUG": "false",
            "ENABLE_DEBUG_TOOLBAR": "false",
            **OPEN_ACCESS,
            "DATABASE_URL": url,
            "AUTO_MIGRATE": "false",
        }
    )
    upgrade_database(app)
    return app


@pytest.fixture
def multi_host_app(pair: Pair) -> Iterator[Flask]:
    app = app_on(pair.url(DATABASE))
    yield app
    with app.app_context():
        db.engine.dispose()


def create(app: Flask, **payload: object) -> uuid.UUID:
    with app.app_context():
        return enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0, **payload})).job.id


def test_a_planned_switchover_moves_the_worker_to_the_new_primary(pair, multi_host_app, start_worker):
    worker = start_worker(database_url=pair.url(DATABASE), JOB_WORKER_LEASE_SECONDS="5")
    with multi_host_app.app_context():
        before = create(multi_host_app)
        wait_for_status(before, "succeeded")
    worker.wait_for_output("listening for new jobs")

    pair.primary.stop("fast")  # every session ended, the shutdown checkpoint sent to the standby
    pair.standby.promote()
    pair.primary.follow(pair.standby)  # the old primary back, read-only, listed first in the URL
    assert pair.primary.in_recovery() and not pair.standby.in_recovery()

    with multi_host_app.app_context():
        after = [create(multi_host_app) for _ in range(5)]
        for job_id in after:
            assert wait_for_status(job_id, "succeeded", "failed", timeout=30).status == "succeeded"
            assert job(job_id).attempts == 1
        assert job(before).status == "succeeded"
    # the listener found the new primary too (it logs each time LISTEN is in force)
    worker.wait_for_output("listening for new jobs", count=2, timeout=30)
    assert worker.proc.poll() is None, worker.output
    assert "unexpected error" not in worker.output
    # nothing of ours stays on the old primary (libpq leaves a read-only server at once)
    count = f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{DATABASE}'"
    wait_until(lambda: pair.primary.execute(count)[0][0] == 0, 10, "no session on the old primary")


@pytest.fixture
def single_app(pair: Pair) -> Iterator[Flask]:
    app = app_on(pair.primary.url(DATABASE))
    yield app
    with app.app_context():
        db.engine.dispose()


def read_only(pair: Pair, app: Flask, on: bool) -> None:
    """New sessions of the test database read-only (or not), and the open ones ended (the
    test's own pool emptied too)."""
    setting = "SET default_transaction_read_only = on" if on else "RESET default_transaction_read_only"
    pair.primary.execute(f'ALTER DATABASE "{DATABASE}" {setting}')
    pair.primary.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        f" WHERE datname = '{DATABASE}' AND pid <> pg_backend_pid()"
    )
    with app.app_context():
        db.engine.dispose()


def test_a_read_only_server_is_a_connection_fault_and_charges_no_attempt(pair, single_app, start_worker):
    worker = start_worker(
        database_url=pair.primary.url(DATABASE),
        JOB_WORKER_LEASE_SECONDS="30",
        JOB_WORKER_BACKOFF_MAX_SECONDS="0.5",
    )
    with single_app.app_context():
        slow = enqueue.create_job(enqueue.JobSpec("demo.slow", {"sleep_seconds": 2})).job.id
        wait_for_status(slow, "running")

    read_only(pair, single_app, True)
    # the running attempt cannot record its end; the idle threads cannot claim: both retry
    worker.wait_for_output("read-only transaction", count=2, timeout=30)
    output = worker.output
    assert "database unavailable" in output
    assert "unexpected error" not in output
    with single_app.app_context():
        wait_until(lambda: "cannot record the end of job" in worker.output, 30, "the settle retried")
        assert job(slow).status == "running"  # its end not recorded yet, and not charged

    read_only(pair, single_app, False)
    with single_app.app_context():
        done = wait_for_status(slow, "succeeded", "failed", timeout=30)
        assert done.status == "succeeded" and done.attempts == 1
        later = create(single_app)
        assert wait_for_status(later, "succeeded", timeout=30).attempts == 1
    assert worker.proc.poll() is None, worker.output


def test_the_web_answers_503_until_a_standby_is_promoted_then_goes_on(pair, multi_host_app):
    client = multi_host_app.test_client()
    assert client.get("/jobs/").status_code == 200
    pair.primary.kill()  # no primary: the standby alone is left, read-only

    page = client.get("/jobs/")
    assert page.status_code == 503 and "Database unavailable" in page.get_data(as_text=True)
    api = client.get("/api/jobs/stats/")
    assert api.status_code == 503 and api.get_json()["detail"] == "Database unavailable."
    refused = client.post("/api/jobs/", json={"type": "demo.success", "idempotency_key": "across"})
    assert refused.status_code == 503

    pair.standby.promote()
    created = client.post("/api/jobs/", json={"type": "demo.success", "idempotency_key": "across"})
    assert created.status_code == 201  # nothing was created by the refused try
    assert client.get("/jobs/").status_code == 200
    assert client.get("/api/jobs/stats/").get_json()["by_status"]["queued"] == 1
