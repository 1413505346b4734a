"""A handler's renewals and progress survive a broken worker connection.

The job context writes on the worker thread's own connection. When that connection is cut
under a running handler (a reset, a failover: here ``pg_terminate_backend`` of its server
process, or a proxy that cuts it with an RST), its next write connects again and is retried
while the lease lasts, so the attempt goes on; a database error is the handler's failure only
when the handler's own code raised it.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from flask import Flask
from sqlalchemy import Connection

from dashboard.config import WorkerSettings
from dashboard.runtime.handlers import Handler, JobContext, get_handler
from dashboard.runtime.one_job import OneJobLoop
from dashboard.runtime.progress import Flusher
from dashboard.runtime.runner import End
from dashboard.store import connection, values
from dashboard.store.lifecycle import create as enqueue
from tests.support.netproxy import proxied_app
from tests.support.worker_loop import SETTINGS, event_types, events, job, one_job_loop, wait_until

WORKER_ID = "testhost:1:thread-1:0ff1ce00"


def make_loop(
    app: Flask, handlers: dict[str, Handler], flusher: Flusher | None = None, **settings: Any
) -> OneJobLoop:
    def lookup(job_type: str) -> Handler | None:
        return handlers.get(job_type) or get_handler(job_type)

    worker = WorkerSettings(**{**SETTINGS.__dict__, **settings})
    return one_job_loop(app, worker, WORKER_ID, lookup=lookup, flusher=flusher)


def backend_pid(conn: Connection) -> int:
    return connection.raw_connection(conn).info.backend_pid


def cut(libpq_url: str, conn: Connection) -> int:
    """End the server process behind ``conn`` (the client learns it at its next statement)."""
    pid = backend_pid(conn)
    with psycopg.connect(libpq_url, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone() == (True,)
    return pid


def renewal_due(ctx: JobContext) -> None:
    """Less than half of the lease left, as if the handler had worked that long."""
    ctx.locked_until = values.utcnow() + timedelta(seconds=10)


def test_a_renewal_after_the_worker_connection_was_cut_connects_again(app, libpq_url):
    seen: dict[str, Any] = {}

    def long_job(ctx: JobContext) -> str:
        seen["cut"] = cut(libpq_url, loop.runtime.connection)
        renewal_due(ctx)
        seen["renewed"] = ctx.renew()
        return "done"

    created = enqueue.create_job(enqueue.JobSpec("test.long")).job
    loop = make_loop(app, {"test.long": long_job})
    assert loop.step() is True
    assert seen["renewed"] is True
    finished = job(created.id)
    assert finished.status == "succeeded" and finished.attempts == 1
    assert event_types(created.id) == ["created", "claimed", "lease_renewed", "succeeded"]


def test_a_progress_report_whose_flush_met_a_cut_connection_is_written_later(app, libpq_url, flusher):
    def reporting_job(ctx: JobContext) -> str:
        cut(libpq_url, loop.runtime.connection)
        ctx.progress(50, "half")  # the flusher's first try meets the dead connection
        wait_until(
            lambda: "progress" in event_types(ctx.job_id), 15, "the report, written on a new connection"
        )
        return "done"

    created = enqueue.create_job(enqueue.JobSpec("test.report")).job
    loop = make_loop(app, {"test.report": reporting_job}, flusher, progress_flush_ms=0)
    assert loop.step() is True
    assert job(created.id).status == "succeeded"
    timeline = events(created.id)
    assert [e.type for e in timeline] == ["created", "claimed", "progress", "succeeded"]
    assert timeline[2].data == {"percent": 50}


def test_the_handlers_own_database_error_still_fails_the_attempt(app, libpq_url):
    """Only the context's writes are retried for the handler: its own database use is its own."""

    def own_query(ctx: JobContext) -> None:
        with connection.connect() as mine:
            cut(libpq_url, mine)
            mine.exec_driver_sql("SELECT 1")

    created = enqueue.create_job(enqueue.JobSpec("test.own")).job
    loop = make_loop(app, {"test.own": own_query})
    assert loop.step() is True
    failed = job(created.id)
    assert failed.status == "queued" and failed.attempts == 1
    assert failed.last_error.startswith("OperationalError")
    assert event_types(created.id) == ["created", "claimed", "retry_scheduled"]


@pytest.fixture
def refusing_lease_renewals(app) -> Any:
    """The events table refuses ``lease_renewed`` rows: a renewal the database refuses (never a
    connection error), for this test only."""
    with connection.connect() as conn:
        conn.exec_driver_sql(
            "ALTER TABLE jobs_jobevent ADD CONSTRAINT test_no_renewals "
            "CHECK (type <> 'lease_renewed') NOT VALID"
        )
    try:
        yield
    finally:
        with connection.connect() as conn:
            conn.exec_driver_sql("ALTER TABLE jobs_jobevent DROP CONSTRAINT test_no_renewals")


def test_a_refused_renewal_that_ends_the_handler_is_not_its_failure(app, refusing_lease_renewals):
    def renewing(ctx: JobContext) -> str:
        renewal_due(ctx)
        ctx.renew()  # raises the refusal; the handler lets it through
        return "unreachable"

    created = enqueue.create_job(enqueue.JobSpec("test.refused")).job
    loop = make_loop(app, {"test.refused": renewing})
    claimed = loop.claim()
    assert [j.id for j in claimed] == [created.id]
    outcome = loop.runner.run(claimed[0])
    assert outcome is not None and outcome.end is End.ABANDONED  # the rescuer's, not the handler's failure
    still = job(created.id)
    assert still.status == "running" and still.last_error == ""
    assert event_types(created.id) == ["created", "claimed"]


@pytest.fixture
def through_proxy(database_url: str) -> Any:
    """An app whose connections go through a TCP proxy the test can break."""
    with proxied_app(database_url) as both:
        yield both


def test_a_reset_connection_under_a_renewal_is_retried_through_the_proxy(app, through_proxy):
    """The same through a proxy that cuts every connection with an RST (a failover)."""
    proxied, proxy = through_proxy
    seen: dict[str, Any] = {}

    def long_job(ctx: JobContext) -> str:
        seen["cut"] = proxy.reset()
        renewal_due(ctx)
        seen["renewed"] = ctx.renew()
        return "done"

    created = enqueue.create_job(enqueue.JobSpec("test.reset")).job
    loop = make_loop(proxied, {"test.reset": long_job})
    with proxied.app_context():
        assert loop.step() is True
    assert seen["cut"] >= 1 and seen["renewed"] is True
    assert job(created.id).status == "succeeded"
    assert event_types(created.id) == ["created", "claimed", "lease_renewed", "succeeded"]


def test_a_renewal_that_cannot_reach_the_database_before_the_lease_ends_says_so(app, through_proxy, caplog):
    """The database stays unreachable (the proxy refuses new connections): ``renew()`` tries
    while the lease lasts, then returns False, raising nothing into the handler; the worker
    leaves the attempt to the rescue."""
    proxied, proxy = through_proxy
    seen: dict[str, Any] = {}

    def long_job(ctx: JobContext) -> str:
        proxy.refuse()
        proxy.reset()
        lease_end = values.utcnow() + timedelta(seconds=0.5)
        ctx.locked_until = lease_end
        seen["renewed"] = ctx.renew()
        return "done"

    created = enqueue.create_job(enqueue.JobSpec("test.unreachable")).job
    loop = make_loop(proxied, {"test.unreachable": long_job})
    caplog.set_level(logging.WARNING, logger="dashboard")
    with proxied.app_context():
        assert loop.step() is True
    assert seen["renewed"] is False
    messages = [r.getMessage() for r in caplog.records]
    assert any("cannot renew the lease" in m and "connecting again" in m for m in messages), messages
    assert any("cannot renew the lease" in m and "lease is over" in m for m in messages), messages
    still = job(created.id)
    assert still.status == "running" and still.attempts == 1  # nothing recorded: the rescue's
    assert event_types(created.id) == ["created", "claimed"]
    proxy.accept()
