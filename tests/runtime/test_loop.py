"""One step of the worker loop, in-process: claim and run, settle, rescue pass, context."""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask

from dashboard import create_app
from dashboard.config import WorkerSettings
from dashboard.extensions import db
from dashboard.runtime.failures import ResultNotSerialisable, check_result, describe
from dashboard.runtime.handlers import Handler, JobContext, get_handler
from dashboard.runtime.one_job import OneJobLoop
from dashboard.runtime.runner import End
from dashboard.runtime.threads import Backoff, make_worker_id
from dashboard.runtime.worker import Worker
from dashboard.store import lifecycle, values
from dashboard.store.lifecycle import create as enqueue
from tests.support.factories import make_job
from tests.support.open_access import OPEN_ACCESS
from tests.support.worker_loop import (
    SETTINGS,
    event_types,
    events,
    job,
    lose_to_another_worker,
    one_job_loop,
    wait_for_status,
    wait_until,
)

WORKER_ID = "testhost:1:thread-1:0badcafe"


def make_loop(app: Flask, handlers: dict[str, Handler] | None = None, **settings: Any) -> OneJobLoop:
    """A loop whose extra handlers live only in this loop, not in the global registry."""
    extra = handlers or {}

    def lookup(job_type: str) -> Handler | None:
        return extra.get(job_type) or get_handler(job_type)

    return one_job_loop(app, WorkerSettings(**{**SETTINGS.__dict__, **settings}), WORKER_ID, lookup=lookup)


def run_one(app: Flask, job_type: str, payload: Any = None, handlers=None, **create: Any):
    created = enqueue.create_job(enqueue.JobSpec(job_type, payload, **create)).job
    loop = make_loop(app, handlers)
    assert loop.step() is True
    return job(created.id), loop


def test_worker_id_is_host_pid_thread_and_a_short_random_part():
    first, second = make_worker_id(3, hostname="box", pid=42), make_worker_id(3, hostname="box", pid=42)
    assert re.fullmatch(r"box:42:thread-3:[0-9a-f]{8}", first)
    assert first != second


def test_step_with_nothing_claimable_returns_false(app):
    assert make_loop(app).step() is False


def test_step_claims_runs_and_completes_one_job(app):
    done, _ = run_one(app, "demo.success", {"sleep_seconds": 0})
    assert done.status == "succeeded" and done.result == {"ok": True, "slept_seconds": 0.0, "attempt": 1}
    assert [e.worker_id for e in events(done.id)][1:] == [WORKER_ID] * 3


def test_unknown_job_type_fails_the_attempt_and_the_loop_goes_on(app):
    failed, loop = run_one(app, "no.such.type")
    assert failed.status == "queued" and failed.attempts == 1
    assert (
        failed.last_error
        == "UnknownJobType: job type 'no.such.type': no handler is registered in this worker"
    )
    assert event_types(failed.id) == ["created", "claimed", "retry_scheduled"]
    following = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0})).job
    assert loop.step() is True
    assert job(following.id).status == "succeeded"


def test_handler_exception_records_type_message_and_traceback(app):
    def explode(ctx: JobContext) -> None:
        raise KeyError("missing thing")

    failed, _ = run_one(app, "test.explode", handlers={"test.explode": explode}, max_attempts=1)
    assert failed.status == "failed" and failed.last_error == "KeyError: 'missing thing'"
    event = events(failed.id)[-1]
    assert event.type == "failed" and event.data["exception_type"] == "KeyError"
    assert 'raise KeyError("missing thing")' in event.data["traceback"]


def test_handler_calling_sys_exit_fails_the_attempt_not_the_thread(app):
    failed, _ = run_one(app, "test.exit", handlers={"test.exit": lambda ctx: sys.exit(3)}, max_attempts=1)
    assert failed.status == "failed" and failed.last_error == "SystemExit: 3"


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        (object(), "not JSON-serialisable"),
        ({"ratio": float("nan")}, "not JSON-serialisable"),
        ([float("inf")], "not JSON-serialisable"),
        ({"text": "a\x00b"}, "NUL character"),
        ({"a\x00": 1}, "NUL character"),
    ],
)
def test_results_jsonb_cannot_hold_fail_the_attempt(app, result, reason):
    failed, _ = run_one(app, "test.result", handlers={"test.result": lambda ctx: result}, max_attempts=1)
    assert failed.status == "failed" and failed.result is None
    assert failed.last_error.startswith("ResultNotSerialisable: ")
    assert reason in failed.last_error


def test_result_the_database_refuses_fails_the_attempt(app):
    lone_surrogate = "\ud800"  # valid for json.dumps, refused by PostgreSQL's jsonb
    failed, _ = run_one(
        app, "test.surrogate", handlers={"test.surrogate": lambda ctx: [lone_surrogate]}, max_attempts=1
    )
    assert failed.status == "failed" and failed.result is None
    assert failed.last_error.startswith("ResultRejected: the database refused the result: ")


def test_check_result_accepts_plain_json():
    check_result({"a": [1, 2.5, None, True, "x"], "b": {}})
    check_result(None)
    with pytest.raises(ResultNotSerialisable):
        check_result({1j})


def test_describe_is_type_and_message():
    assert describe(ValueError("bad value")) == "ValueError: bad value"
    assert describe(RuntimeError()) == "RuntimeError"
    assert len(describe(ValueError("x" * 10_000))) == 4000


@pytest.mark.parametrize(
    ("job_type", "payload", "error"),
    [
        (
            "demo.success",
            {"sleep_seconds": -1},
            "PayloadError: sleep_seconds must be between 0 and 3600, got -1",
        ),
        ("demo.slow", {"sleep_seconds": "abc"}, "PayloadError: sleep_seconds must be a number, got 'abc'"),
        ("demo.timeout", {"sleep_seconds": True}, "PayloadError: sleep_seconds must be a number, got True"),
        ("demo.success", [1, 2], "PayloadError: payload must be a JSON object, got list"),
        ("demo.flaky", {"fail_until_attempt": 0}, "PayloadError: fail_until_attempt must be a whole number"),
        (
            "demo.flaky",
            {"fail_until_attempt": 1.5},
            "PayloadError: fail_until_attempt must be a whole number",
        ),
        ("demo.fail", {"error": 42}, "PayloadError: error must be a string, got 42"),
        ("demo.fail", {}, "DemoError: Intentional demo failure"),
    ],
)
def test_demo_payloads_are_validated(app, job_type, payload, error):
    failed, _ = run_one(app, job_type, payload, max_attempts=1)
    assert failed.status == "failed"
    assert failed.last_error.startswith(error)


def test_flaky_succeeds_on_its_attempt_and_fails_before(app):
    first, loop = run_one(app, "demo.flaky", {"fail_until_attempt": 2})
    assert first.status == "queued" and first.attempts == 1
    # the retry waits for its backoff: claim it at the time it becomes available
    second = lifecycle.claim_next_job(WORKER_ID, lease_seconds=30, now=first.available_at)
    assert second is not None
    outcome = loop.runner.run(second)
    assert outcome is not None and outcome.end is End.SUCCEEDED
    assert job(first.id).result == {"ok": True, "attempt": 2}


def test_context_reports_progress_and_renews_while_it_owns_the_attempt(app):
    seen: dict[str, Any] = {}

    def work(ctx: JobContext) -> str:
        before = ctx.locked_until
        seen["renewed"] = ctx.renew()
        seen["extended"] = ctx.locked_until is not None and before is not None and ctx.locked_until >= before
        seen["progress"] = ctx.progress(40, "step", {"n": 1})
        seen["identity"] = (ctx.attempt, ctx.worker_id, ctx.payload, ctx.job_type, ctx.lost, ctx.stopping)
        return "ok"

    done, _ = run_one(app, "test.ctx", {"p": 1}, handlers={"test.ctx": work})
    assert done.status == "succeeded" and done.result == "ok"
    assert seen == {
        "renewed": True,
        "extended": True,
        "progress": True,
        "identity": (1, WORKER_ID, {"p": 1}, "test.ctx", False, False),
    }
    progress = [e for e in events(done.id) if e.type == "progress"]
    assert [(e.message, e.data) for e in progress] == [("step", {"n": 1, "percent": 40})]


def test_context_refuses_a_percent_outside_0_to_100(app):
    def bad(ctx: JobContext) -> None:
        ctx.progress(150)

    failed, _ = run_one(app, "test.pct", handlers={"test.pct": bad}, max_attempts=1)
    assert failed.last_error == "ValueError: percent must be a number from 0 to 100, got 150"


def test_stale_attempt_learns_it_lost_the_job_and_changes_nothing(app):
    """The reference's stale-worker scenario, driven through the worker's own context."""
    outcome: dict[str, Any] = {}

    def hang_then_finish(ctx: JobContext) -> str:
        # While "hung", the lease expires, cleanup requeues and another worker claims.
        outcome["other"] = lose_to_another_worker(ctx)
        # The hang is simulated with ``now``: on the wall clock the lease is fresh, and a
        # renewal with more than half the lease left is not sent. Say the lease is over.
        ctx.locked_until = values.utcnow()
        outcome["renewed"] = ctx.renew()
        outcome["progress"] = ctx.progress(99)
        outcome["lost"] = ctx.lost
        return "stale result"

    created = enqueue.create_job(enqueue.JobSpec("test.stale")).job
    loop = make_loop(app, {"test.stale": hang_then_finish})
    claimed = loop.claim()[0]
    result = loop.runner.run(claimed)

    assert result is not None and result.end is End.LOST
    assert outcome["renewed"] is False and outcome["progress"] is False and outcome["lost"] is True
    now = job(created.id)
    assert now.status == "running" and now.attempts == 2 and now.locked_by == "other-worker"
    assert now.result is None
    assert event_types(created.id) == ["created", "claimed", "timeout_requeued", "claimed"]


def test_cleanup_tick_recovers_expired_leases_once_per_interval(app):
    past = values.utcnow() - timedelta(minutes=5)
    first = make_job("running", locked_until=past)
    loop = make_loop(app)

    assert loop.step() is False  # recovered, but its retry waits for the backoff
    recovered = job(first.id)
    assert recovered.status == "queued" and recovered.last_error.startswith("Lease expired at ")
    assert events(first.id)[-1].worker_id == WORKER_ID

    second = make_job("running", locked_until=past)
    loop.step()  # the next tick is cleanup_interval_seconds (60 s) away
    assert job(second.id).status == "running"


def test_a_stopping_loop_claims_nothing(app):
    created = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0})).job
    loop = make_loop(app)
    loop.runtime.stopping.set()
    assert loop.step() is False
    assert job(created.id).status == "queued"


def test_backoff_doubles_up_to_its_cap():
    backoff = Backoff(0.5, 3)
    assert [backoff.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    backoff.reset()
    assert backoff.next() == 0.5


def test_worker_threads_share_the_queue_and_stop_on_request(app):
    jobs = [enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0})).job for _ in range(12)]
    worker = Worker(app, WorkerSettings(**{**SETTINGS.__dict__, "threads": 3}))
    assert len({loop.worker_id for loop in worker.loops}) == 3
    worker.start()
    try:
        for created in jobs:
            wait_for_status(created.id, "succeeded")
    finally:
        worker.stop()
        assert worker.join(timeout=30)
    assert all(event_types(c.id) == ["created", "claimed", "progress", "succeeded"] for c in jobs)


@pytest.fixture
def unreachable_app(tmp_path) -> Iterator[Flask]:
    app = create_app(
        {
            "TESTING": True,
            "DEBUG": "false",
            "ENABLE_DEBUG_TOOLBAR": "false",
            "JOB_DEMO_HANDLERS": "true",  # demo types are off by default with DEBUG=false
            **OPEN_ACCESS,
            "DATABASE_URL": f"postgresql://nobody@/nothing?host={tmp_path}",
            "AUTO_MIGRATE": "false",
        }
    )
    yield app
    with app.app_context():
        db.engine.dispose()


def test_a_thread_survives_a_database_that_refuses_connections(unreachable_app, caplog):
    caplog.set_level(logging.WARNING, logger="dashboard.runtime")
    worker = Worker(unreachable_app, SETTINGS, reconnect_base_seconds=0.01, reconnect_max_seconds=0.04)
    worker.start()

    thread = worker.loops[0].worker_id  # each thread (and the rescuer) backs off on its own

    def unavailable() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if "database unavailable" in r.getMessage() and r.getMessage().startswith(thread)
        ]

    try:
        wait_until(lambda: len(unavailable()) >= 5, 15, "five failed reconnects")
        assert worker.alive()
    finally:
        worker.stop()
        assert worker.join(timeout=10)
    delays = [float(m.rsplit("retrying in ", 1)[1].rstrip("s")) for m in unavailable()[:5]]
    assert delays == [0.01, 0.02, 0.04, 0.04, 0.04]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threads", "0"], "Invalid value for '--threads'"),
        (["--lease-seconds", "nan"], "must be a finite number"),
        (["--poll-interval-ms", "inf"], "must be a finite number"),
        (["--log-level", "loud"], "Invalid value for '--log-level'"),
    ],
)
def test_bad_worker_options_are_refused_with_a_usage_error(app, args, message):
    result = app.test_cli_runner().invoke(args=["worker", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_running_loop_claims_its_next_job_with_each_success(app):
    first = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0}, priority=90)).job
    second = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0}, priority=10)).job
    loop = make_loop(app)
    thread = threading.Thread(target=loop.run)
    thread.start()
    try:
        wait_for_status(second.id, "succeeded")
    finally:
        loop.runtime.stopping.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    succeeded = next(e for e in events(first.id) if e.type == "succeeded")
    claimed = next(e for e in events(second.id) if e.type == "claimed")
    # one statement, in causal order: the success first, in id and in created_at (1 µs apart)
    assert claimed.id > succeeded.id
    assert claimed.created_at - succeeded.created_at == timedelta(microseconds=1)
    assert claimed.worker_id == succeeded.worker_id == WORKER_ID


def test_a_job_claimed_with_a_success_still_runs_when_the_worker_stops(app, monkeypatch):
    jobs = [
        enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0}, priority=priority)).job
        for priority in (90, 50, 10)
    ]
    loop = make_loop(app)
    original = lifecycle.complete_and_claim

    def then_stop(*args: Any, **kwargs: Any):
        settled = original(*args, **kwargs)
        loop.runtime.stopping.set()  # SIGTERM arrives just after the next job was claimed
        return settled

    monkeypatch.setattr(lifecycle, "complete_and_claim", then_stop)
    loop.run()  # returns once stopping and nothing claimed is left
    assert [job(j.id).status for j in jobs] == ["succeeded", "succeeded", "queued"]
    assert event_types(jobs[2].id) == ["created"]


def plan_cache_mode(raw) -> str:
    mode = raw.execute("SHOW plan_cache_mode").fetchone()[0]
    if not raw.autocommit:  # back in the pool: leave no transaction open behind the pool's back
        raw.rollback()
    return mode


def test_one_job_threads_plan_generically_and_give_the_setting_back(app):
    loop = make_loop(app)
    loop.runtime.generic_plans = True
    with app.app_context():
        raw = loop.runtime.connection.connection.driver_connection
        assert plan_cache_mode(raw) == "force_generic_plan"
        loop.runtime.close()
        assert plan_cache_mode(raw) == "auto"  # back in the pool as it came


def test_only_one_job_mode_threads_force_generic_plans(app):
    one_job = Worker(app, WorkerSettings(**{**SETTINGS.__dict__, "threads": 2}))
    assert [loop.runner.runtime.generic_plans for loop in one_job.loops] == [True, True]
    assert one_job.rescuer.runtime.generic_plans is False
    batch = Worker(app, WorkerSettings(**{**SETTINGS.__dict__, "threads": 2, "batch_size": 4}))
    assert [loop.runner.runtime.generic_plans for loop in batch.loops] == [False, False]
    assert batch.dispatcher is not None and batch.dispatcher.runtime.generic_plans is False
    assert batch.completer is not None and batch.completer.runner.runtime.generic_plans is False


def test_a_huge_traceback_is_capped_in_the_events_keeping_its_start_and_end(app):
    from dashboard.runtime.failures import MAX_TRACEBACK_LENGTH, cap_traceback

    def deep(ctx):
        raise RuntimeError("start " + "y" * 900_000 + " the innermost failure")  # a 900 KB traceback

    retried, _ = run_one(app, "deep", handlers={"deep": deep}, max_attempts=2)
    timeline = events(retried.id)
    scheduled = next(e for e in timeline if e.type == "retry_scheduled")
    text = scheduled.data["traceback"]
    assert len(text) <= MAX_TRACEBACK_LENGTH
    assert text.startswith("Traceback (most recent call last):")
    assert text.rstrip().endswith("y the innermost failure")
    assert "characters of the traceback cut" in text
    assert cap_traceback("short") == "short"
    capped = cap_traceback("a" * 20_000 + "END", limit=1000, head=100)
    assert len(capped) <= 1000 and capped.startswith("a" * 100) and capped.endswith("END")
