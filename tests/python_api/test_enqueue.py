"""dashboard.jobs: enqueue and enqueue_many, on their own and in the caller's transaction."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from flask import Flask
from sqlalchemy import text
from sqlalchemy.orm import Session

from dashboard import jobs
from dashboard.extensions import db
from dashboard.store.sql import NOTIFY_CHANNEL
from dashboard.store.values import utcnow


def counts(libpq_url: str) -> tuple[int, int]:
    """Jobs and events as another connection sees them (committed rows only)."""
    with psycopg.connect(libpq_url, autocommit=True) as conn:
        row = conn.execute("SELECT (SELECT count(*) FROM jobs_job), (SELECT count(*) FROM jobs_jobevent)")
        found = row.fetchone()
        assert found is not None
        return int(found[0]), int(found[1])


@pytest.fixture
def listener(libpq_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection that LISTENs on the workers' wake-up channel, as runtime/wakeup.py does."""
    conn = psycopg.connect(libpq_url, autocommit=True)
    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
    yield conn
    conn.close()


def notified(listener: psycopg.Connection[Any], timeout: float) -> int:
    return len(list(listener.notifies(timeout=timeout, stop_after=1)))


def test_without_connection_the_job_commits_at_once(app: Flask, libpq_url: str) -> None:
    with app.app_context():
        job = jobs.enqueue("demo.success", {"n": 1}, priority=7, max_attempts=2)
    assert job.created and job.status == "queued" and isinstance(job.id, uuid.UUID)
    assert (job.priority, job.max_attempts, job.queue) == (7, 2, "default")
    assert counts(libpq_url) == (1, 1)
    with psycopg.connect(libpq_url) as conn:
        data = conn.execute("SELECT data FROM jobs_jobevent WHERE job_id = %s", (job.id,)).fetchone()
    assert data is not None and data[0]["source"] == "python"


def test_in_a_connection_the_job_exists_only_at_commit(
    app: Flask, libpq_url: str, listener: psycopg.Connection[Any]
) -> None:
    with app.app_context(), db.engine.connect() as conn:
        conn.execute(text("SELECT 1"))  # the caller's transaction is open
        job = jobs.enqueue("demo.success", {"order": 42}, connection=conn)
        assert job.created
        # Before the commit: no other connection sees the job, and no worker is woken.
        assert counts(libpq_url) == (0, 0)
        assert notified(listener, 0.3) == 0
        conn.commit()
        assert notified(listener, 10) == 1
    assert counts(libpq_url) == (1, 1)


def test_a_rollback_leaves_no_job_no_event_and_no_wakeup(
    app: Flask, libpq_url: str, listener: psycopg.Connection[Any]
) -> None:
    with app.app_context(), db.engine.connect() as conn:
        jobs.enqueue("demo.success", connection=conn)
        jobs.enqueue_many([{"type": "demo.success"}, {"type": "demo.fail"}], connection=conn)
        conn.rollback()
    assert counts(libpq_url) == (0, 0)
    assert notified(listener, 0.3) == 0


def test_an_orm_session_and_flask_sqlalchemy_session_join_their_transaction(
    app: Flask, libpq_url: str
) -> None:
    with app.app_context():
        with Session(db.engine) as session:
            jobs.enqueue("demo.success", {"via": "session"}, connection=session)
            assert counts(libpq_url) == (0, 0)
            session.commit()
        assert counts(libpq_url) == (1, 1)
        jobs.enqueue("demo.success", {"via": "db.session"}, connection=db.session)
        assert counts(libpq_url) == (1, 1)
        db.session.rollback()
        assert counts(libpq_url) == (1, 1)
        jobs.enqueue("demo.success", {"via": "db.session"}, connection=db.session)
        db.session.commit()
    assert counts(libpq_url) == (2, 2)


def test_enqueue_many_returns_the_jobs_in_order_in_one_transaction(app: Flask, libpq_url: str) -> None:
    items = [{"type": "demo.success", "payload": {"n": n}, "idempotency_key": f"k{n % 3}"} for n in range(5)]
    with app.app_context(), db.engine.connect() as conn:
        made = jobs.enqueue_many(items, connection=conn)
        assert counts(libpq_url) == (0, 0)
        conn.commit()
    assert [job.created for job in made] == [True, True, True, False, False]
    assert made[3].id == made[0].id and made[4].id == made[1].id
    assert counts(libpq_url) == (3, 3)
    with app.app_context():
        again = jobs.enqueue_many(items[:1])
    assert again[0].id == made[0].id and not again[0].created


def test_idempotency_key_in_a_transaction_returns_the_committed_job(app: Flask) -> None:
    with app.app_context():
        first = jobs.enqueue("demo.success", idempotency_key="order-7")
        with db.engine.connect() as conn:
            second = jobs.enqueue("demo.success", idempotency_key="order-7", connection=conn)
            conn.commit()
    assert second.id == first.id and not second.created


def test_delay_and_run_at_set_when_it_may_run(app: Flask) -> None:
    later = datetime(2031, 5, 4, 3, 2, 1, tzinfo=UTC)
    with app.app_context():
        before = utcnow()
        delayed = jobs.enqueue("demo.success", delay=timedelta(minutes=10))
        seconds = jobs.enqueue("demo.success", delay=90)
        scheduled = jobs.enqueue("demo.success", run_at=later)
    assert delayed.available_at >= before + timedelta(minutes=10)
    assert delayed.available_at < before + timedelta(minutes=11)
    assert before + timedelta(seconds=90) <= seconds.available_at < before + timedelta(seconds=150)
    assert scheduled.available_at == later


@pytest.fixture
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Types registered by a test are gone after it (the API and pages list the registry)."""
    from dashboard.runtime import handlers

    monkeypatch.setattr(handlers, "_registry", dict(handlers._registry))
    monkeypatch.setattr(handlers, "_defaults", dict(handlers._defaults))


@pytest.mark.usefixtures("own_registry")
def test_handler_defaults_apply_and_an_enqueue_s_own_values_win(app: Flask) -> None:
    @jobs.handler("pyapi.defaults", priority=80, max_attempts=9)
    def defaults(ctx: jobs.JobContext) -> None:
        return None

    with app.app_context():
        plain = jobs.enqueue("pyapi.defaults")
        own = jobs.enqueue("pyapi.defaults", priority=-3, max_attempts=1)
        listed = jobs.enqueue_many([{"type": "pyapi.defaults"}])[0]
    assert (plain.priority, plain.max_attempts) == (80, 9)
    assert (own.priority, own.max_attempts) == (-3, 1)
    assert (listed.priority, listed.max_attempts) == (80, 9)


BAD_ARGUMENTS = [
    ({"type": 5}, TypeError, "type must be a string"),
    ({"type": ""}, ValueError, "type must be 1 to"),
    ({"type": "x" * 121}, ValueError, "type must be 1 to 120"),
    ({"type": "a\nb"}, ValueError, "type"),
    ({"type": "t", "payload": {"when": datetime(2030, 1, 1)}}, TypeError, "payload at when must be JSON"),
    ({"type": "t", "payload": {1: "x"}}, TypeError, "payload must have string keys"),
    ({"type": "t", "payload": {"a": float("nan")}}, ValueError, "payload at a holds NaN"),
    ({"type": "t", "payload": "a\x00b"}, ValueError, "payload holds a NUL"),
    ({"type": "t", "queue": ""}, ValueError, "queue must be 1 to 64"),
    ({"type": "t", "queue": "a b"}, ValueError, "queue must be"),
    ({"type": "t", "queue": "q" * 65}, ValueError, "queue must be"),
    ({"type": "t", "queue": 3}, TypeError, "queue must be a string"),
    ({"type": "t", "priority": "high"}, TypeError, "priority must be an integer"),
    ({"type": "t", "priority": True}, TypeError, "priority must be an integer"),
    ({"type": "t", "priority": 40_000}, ValueError, "priority must be between"),
    ({"type": "t", "max_attempts": 0}, ValueError, "max_attempts must be between 1"),
    ({"type": "t", "max_attempts": 2.5}, TypeError, "max_attempts must be an integer"),
    ({"type": "t", "idempotency_key": ""}, ValueError, "idempotency_key must be 1 to"),
    ({"type": "t", "idempotency_key": 12}, TypeError, "idempotency_key must be a string"),
    ({"type": "t", "run_at": datetime(2030, 1, 1)}, ValueError, "run_at must be timezone-aware"),
    ({"type": "t", "run_at": "2030-01-01"}, TypeError, "run_at must be a datetime"),
    ({"type": "t", "delay": -1}, ValueError, "delay must be zero or more"),
    ({"type": "t", "delay": "5m"}, TypeError, "delay must be seconds or a timedelta"),
    ({"type": "t", "delay": 10**12}, ValueError, "delay is too long"),
    ({"type": "t", "delay": 5, "run_at": datetime(2030, 1, 1, tzinfo=UTC)}, ValueError, "run_at or delay"),
    ({"type": "t", "connection": "postgresql://"}, TypeError, "connection must be a SQLAlchemy Connection"),
]


@pytest.mark.parametrize(("arguments", "error", "says"), BAD_ARGUMENTS)
def test_bad_arguments_name_the_argument_and_write_nothing(
    app: Flask, libpq_url: str, arguments: dict[str, Any], error: type[Exception], says: str
) -> None:
    arguments = dict(arguments)
    job_type = arguments.pop("type")
    with app.app_context(), pytest.raises(error, match=says):
        jobs.enqueue(job_type, **arguments)
    assert counts(libpq_url) == (0, 0)


def test_enqueue_many_names_the_bad_item_and_writes_none(app: Flask, libpq_url: str) -> None:
    good = {"type": "demo.success"}
    with app.app_context():
        with pytest.raises(ValueError, match=r"jobs\[1\]: priority must be between"):
            jobs.enqueue_many([good, {"type": "t", "priority": 10**6}, good])
        with pytest.raises(TypeError, match=r"jobs\[0\]: unknown argument 'prio'"):
            jobs.enqueue_many([{"type": "t", "prio": 1}])
        with pytest.raises(TypeError, match=r"jobs\[0\]: type is required"):
            jobs.enqueue_many([{"payload": {}}])
        with pytest.raises(TypeError, match=r"jobs\[2\] must be a dict"):
            jobs.enqueue_many([good, good, "demo.success"])
        with pytest.raises(TypeError, match="jobs must be a list"):
            jobs.enqueue_many({"type": "demo.success"})
    assert counts(libpq_url) == (0, 0)


def test_outside_an_app_context_the_error_says_what_to_do() -> None:
    with pytest.raises(RuntimeError, match=r"application context.*app\.app_context\(\).*create_app"):
        jobs.enqueue("demo.success")


def test_an_app_without_the_queue_is_named(app: Flask) -> None:
    bare = Flask("bare_host")
    with bare.app_context(), pytest.raises(RuntimeError, match=r"bare_host.* has no job queue.*JobQueue"):
        jobs.enqueue("demo.success")


def test_an_autocommit_connection_is_refused_before_writing(app: Flask, libpq_url: str) -> None:
    with app.app_context(), db.engine.connect() as conn:
        auto = conn.execution_options(isolation_level="AUTOCOMMIT")
        with pytest.raises(ValueError, match="autocommit"):
            jobs.enqueue("demo.success", connection=auto)
    assert counts(libpq_url) == (0, 0)


def test_handler_declarations_are_checked_at_import() -> None:
    with pytest.raises(ValueError, match="timeout must be a positive"):
        jobs.handler("pyapi.bad", timeout=0)
    with pytest.raises(TypeError, match="timeout must be a number"):
        jobs.handler("pyapi.bad", timeout="5s")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="queue must be"):
        jobs.handler("pyapi.bad", queue="no spaces")
    with pytest.raises(ValueError, match="priority must be between"):
        jobs.handler("pyapi.bad", priority=10**6)
    with pytest.raises(TypeError, match="type must be a string"):
        jobs.handler(None)  # type: ignore[arg-type]


def test_the_public_names_are_importable() -> None:
    from dashboard.jobs import JobContext, enqueue, enqueue_many, handler, schedule

    assert all(callable(name) for name in (JobContext, enqueue, enqueue_many, handler, schedule))


def test_a_queue_is_checked_and_passed_on(app: Flask) -> None:
    with app.app_context():
        assert jobs.enqueue("demo.success", queue="default").queue == "default"
        assert jobs.enqueue("demo.success", queue="mail").queue == "mail"
        [first, second] = jobs.enqueue_many(
            [{"type": "demo.success", "queue": "reports"}, {"type": "demo.success"}]
        )
        assert (first.queue, second.queue) == ("reports", "default")
        with pytest.raises(ValueError, match="queue"):
            jobs.enqueue("demo.success", queue="no spaces")
