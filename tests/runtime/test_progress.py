"""Coalesced progress and skipped renewals (``JobContext``, ``runtime/progress.py``).

A handler's ``progress()`` writes nothing at once: its latest report goes into the attempt's
settle statement (before the terminal event, fenced like it), or the flusher writes it if the
handler is still running after ``progress_flush_ms``. A renewal with more than half the lease
left is not sent. No timing thresholds: the slow cases poll with a deadline.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from flask import Flask

from dashboard.config import WorkerSettings
from dashboard.runtime.handlers import Handler, JobContext, get_handler
from dashboard.runtime.one_job import OneJobLoop
from dashboard.runtime.progress import Flusher
from dashboard.store import lifecycle, values
from dashboard.store.lifecycle import claim_form
from dashboard.store.lifecycle import create as enqueue
from tests.support.worker_loop import (
    SETTINGS,
    event_types,
    events,
    job,
    lose_to_another_worker,
    one_job_loop,
    wait_until,
)

WORKER_ID = "testhost:1:thread-1:feedface"


def make_loop(app: Flask, handlers: dict[str, Handler], flusher: Flusher, **settings: Any) -> OneJobLoop:
    def lookup(job_type: str) -> Handler | None:
        return handlers.get(job_type) or get_handler(job_type)

    worker = WorkerSettings(**{**SETTINGS.__dict__, **settings})
    return one_job_loop(app, worker, WORKER_ID, lookup=lookup, flusher=flusher)


def transaction_ids(database_url: str, job_id: uuid.UUID) -> dict[int, str]:
    """Event id -> the id of the transaction that wrote it (``xmin``)."""
    url = database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT id, xmin::text FROM jobs_jobevent WHERE job_id = %s", (job_id,)
        ).fetchall()
    return dict(rows)


def test_fast_handler_reports_are_coalesced_into_the_settle_statement(app, database_url, flusher):
    def chatty(ctx: JobContext) -> str:
        assert all(ctx.progress(percent, f"step {percent}") for percent in range(0, 101, 10))
        return "done"

    created = enqueue.create_job(enqueue.JobSpec("test.chatty")).job
    loop = make_loop(app, {"test.chatty": chatty}, flusher, progress_flush_ms=60_000)
    assert loop.step() is True

    assert job(created.id).status == "succeeded"
    timeline = events(created.id)
    assert [e.type for e in timeline] == ["created", "claimed", "progress", "succeeded"]
    progress, succeeded = timeline[2], timeline[3]
    assert progress.data == {"percent": 100} and progress.message == "step 100"  # the latest report
    assert progress.id < succeeded.id and progress.created_at <= succeeded.created_at
    written_by = transaction_ids(database_url, created.id)
    assert written_by[progress.id] == written_by[succeeded.id]  # one statement, one transaction


def test_the_settle_takes_the_context_back_from_the_flusher(app, flusher):
    seen: dict[str, JobContext] = {}

    def report(ctx: JobContext) -> str:
        ctx.progress(50, "half")
        assert flusher.is_waiting(ctx)  # due in a minute, unless the settle takes it first
        seen["ctx"] = ctx
        return "done"

    created = enqueue.create_job(enqueue.JobSpec("test.report")).job
    loop = make_loop(app, {"test.report": report}, flusher, progress_flush_ms=60_000)
    assert loop.step() is True
    assert not flusher.is_waiting(seen["ctx"])  # settled: the flusher holds nothing of it
    assert event_types(created.id) == ["created", "claimed", "progress", "succeeded"]


@pytest.mark.parametrize("queue_known", [False, True], ids=["visit", "only queue"])
def test_settle_and_claim_and_batch_completion_write_pending_progress_first(app, queue_known):
    claim_form.DEFAULT.forget()
    first = enqueue.create_job(enqueue.JobSpec("test.one")).job
    second = enqueue.create_job(enqueue.JobSpec("test.two")).job
    claimed = lifecycle.claim_next_job("w1", lease_seconds=30)  # answers: `default` is the only queue
    assert claimed is not None and claimed.id == first.id
    report = lifecycle.progress_report("half", {"percent": 50})
    known = "default" if queue_known else None
    completed, nxt = lifecycle.complete_and_claim(
        first.id, "w1", 1, "ok", lease_seconds=30, progress=[report], job_queue=known
    )
    assert completed and nxt is not None and nxt.id == second.id
    assert event_types(first.id) == ["created", "claimed", "progress", "succeeded"]
    # One statement, causal order: the finished job's progress, its success,
    # then the next job's claim, in id and in created_at (the claim 1 µs after the success).
    written = [e for e in events(first.id) if e.type in ("progress", "succeeded")] + events(second.id)[1:2]
    assert [e.type for e in written] == ["progress", "succeeded", "claimed"]
    assert [e.id for e in written] == sorted(e.id for e in written)
    assert written[0].created_at <= written[1].created_at < written[2].created_at

    report = lifecycle.progress_report("almost", {"percent": 90})
    done = lifecycle.complete_jobs([(second.id, "w1", 1, "ok")], progress={second.id: [report]})
    assert done == {second.id}
    timeline = events(second.id)
    assert [e.type for e in timeline] == ["created", "claimed", "progress", "succeeded"]
    assert timeline[2].message == "almost" and timeline[2].worker_id == "w1" and timeline[2].attempt == 1


def test_failure_writes_pending_progress_before_the_retry(app, flusher):
    def half_then_fail(ctx: JobContext) -> None:
        ctx.progress(50, "half")
        raise RuntimeError("boom")

    created = enqueue.create_job(enqueue.JobSpec("test.half")).job
    loop = make_loop(app, {"test.half": half_then_fail}, flusher, progress_flush_ms=60_000)
    assert loop.step() is True
    timeline = events(created.id)
    assert [e.type for e in timeline] == ["created", "claimed", "progress", "retry_scheduled"]
    assert timeline[2].data == {"percent": 50}


def test_slow_handler_report_is_flushed_on_the_timer(app, flusher):
    seen: dict[str, Any] = {}

    def slow(ctx: JobContext) -> str:
        ctx.progress(25, "quarter")
        # The handler is still running: the flusher must write the report on its own.
        seen["event"] = wait_until(
            lambda: [e for e in events(ctx.job_id) if e.type == "progress"], 15, "the progress flush"
        )[0]
        return "done"

    created = enqueue.create_job(enqueue.JobSpec("test.slow")).job
    loop = make_loop(app, {"test.slow": slow}, flusher, progress_flush_ms=20)
    assert loop.step() is True
    assert seen["event"].data == {"percent": 25} and seen["event"].message == "quarter"
    # written once: the settle did not write it again
    assert event_types(created.id) == ["created", "claimed", "progress", "succeeded"]


def test_reports_after_a_flush_are_flushed_again_in_order(app, flusher):
    def two_reports(ctx: JobContext) -> str:
        ctx.progress(25, "first")
        wait_until(lambda: "progress" in event_types(ctx.job_id), 15, "the first flush")
        ctx.progress(75, "second")  # the flusher took the context: it must take it again
        wait_until(lambda: event_types(ctx.job_id).count("progress") == 2, 15, "the second flush")
        return "done"

    created = enqueue.create_job(enqueue.JobSpec("test.twice")).job
    loop = make_loop(app, {"test.twice": two_reports}, flusher, progress_flush_ms=20)
    assert loop.step() is True
    timeline = events(created.id)
    assert [e.type for e in timeline] == ["created", "claimed", "progress", "progress", "succeeded"]
    assert [e.message for e in timeline[2:4]] == ["first", "second"]


def test_a_report_due_sooner_wakes_the_flusher_sleeping_on_a_later_one(app, flusher):
    """A context due in a minute puts the flusher to sleep for a minute; one due at once
    must still be written without waiting for it."""
    first = enqueue.create_job(enqueue.JobSpec("test.later")).job
    second = enqueue.create_job(enqueue.JobSpec("test.sooner")).job
    later = lifecycle.claim_next_job(WORKER_ID, lease_seconds=30)
    sooner = lifecycle.claim_next_job(WORKER_ID, lease_seconds=30)
    assert later is not None and sooner is not None and {later.id, sooner.id} == {first.id, second.id}
    slow = JobContext(later, worker_id=WORKER_ID, lease_seconds=30, progress_flush_ms=60_000, flusher=flusher)
    fast = JobContext(sooner, worker_id=WORKER_ID, lease_seconds=30, progress_flush_ms=0, flusher=flusher)
    slow.progress(10, "in a minute")
    fast.progress(90, "now")
    written = wait_until(
        lambda: [e for e in events(sooner.id) if e.type == "progress"], 15, "the sooner report"
    )
    assert written[0].message == "now"
    assert "progress" not in event_types(later.id)  # still pending: not due yet
    assert slow.settle_progress()[0]["message"] == "in a minute" and not flusher.is_waiting(slow)


def test_a_lost_attempt_writes_no_progress_at_settle(app, flusher):
    outcome: dict[str, Any] = {}

    def report_then_lose(ctx: JobContext) -> str:
        outcome["progress"] = ctx.progress(40, "pending")
        outcome["other"] = lose_to_another_worker(ctx)
        return "stale"

    created = enqueue.create_job(enqueue.JobSpec("test.lose")).job
    loop = make_loop(app, {"test.lose": report_then_lose}, flusher, progress_flush_ms=60_000)
    assert loop.step() is True
    assert outcome["progress"] is True  # nothing was known lost when it was called
    assert outcome["other"].id == created.id
    assert "progress" not in event_types(created.id)
    assert job(created.id).locked_by == "other-worker"


def test_a_lost_attempt_writes_no_progress_on_the_timer_and_learns_it(app, flusher):
    outcome: dict[str, Any] = {}

    def lose_then_report(ctx: JobContext) -> str:
        lose_to_another_worker(ctx)
        ctx.progress(10, "too late")
        wait_until(lambda: ctx.lost, 15, "the flush to find the attempt lost")
        outcome["progress"] = ctx.progress(20)
        return "stale"

    created = enqueue.create_job(enqueue.JobSpec("test.late")).job
    loop = make_loop(app, {"test.late": lose_then_report}, flusher, progress_flush_ms=20)
    assert loop.step() is True
    assert outcome["progress"] is False
    assert "progress" not in event_types(created.id)


def test_renewal_is_sent_only_with_half_the_lease_or_less_left(app):
    created = enqueue.create_job(enqueue.JobSpec("test.renew")).job
    claimed = lifecycle.claim_next_job(WORKER_ID, lease_seconds=30)
    assert claimed is not None and claimed.id == created.id
    ctx = JobContext(claimed, worker_id=WORKER_ID, lease_seconds=30)

    assert ctx.renew() is True  # a fresh lease: nothing sent
    assert ctx.locked_until == claimed.locked_until
    assert "lease_renewed" not in event_types(created.id)

    ctx.locked_until = values.utcnow() + timedelta(seconds=14)  # less than half of 30 s left
    assert ctx.renew() is True
    assert ctx.locked_until > claimed.locked_until
    assert event_types(created.id) == ["created", "claimed", "lease_renewed"]


def test_a_sent_renewal_writes_the_pending_report_first(app):
    created = enqueue.create_job(enqueue.JobSpec("test.order")).job
    claimed = lifecycle.claim_next_job(WORKER_ID, lease_seconds=30)
    assert claimed is not None
    ctx = JobContext(claimed, worker_id=WORKER_ID, lease_seconds=30, progress_flush_ms=60_000)
    ctx.progress(30)
    ctx.locked_until = values.utcnow()
    assert ctx.renew() is True
    timeline = events(created.id)
    assert [e.type for e in timeline] == ["created", "claimed", "progress", "lease_renewed"]
    assert timeline[2].created_at <= timeline[3].created_at
    assert ctx.settle_progress() == []  # nothing left for the settle
