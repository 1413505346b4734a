"""Uniqueness windows and debounce in the store: one holder per key, whatever the race; the
states and the window judged by the create; debounce on a queued holder only."""

from __future__ import annotations

import threading

import pytest
from flask import Flask

from dashboard.extensions import engine
from dashboard.store import lifecycle
from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from dashboard.store.reads import lists as find_jobs
from dashboard.store.records import CreateResult

from .helpers import T0, at, claim, event_types, fail, fresh


def spec(key: str = "report:42", payload: dict | None = None, **options) -> JobSpec:
    return JobSpec("demo.success", payload or {}, unique_key=key, **options)


def count() -> int:
    return find_jobs.list_jobs(limit=100, offset=0).count


def test_a_live_holder_is_returned_unchanged(app):
    first = enqueue.create_job(spec(payload={"v": 1}), now=T0)
    second = enqueue.create_job(spec(payload={"v": 2}), now=at(5))
    assert first.created is True and second.created is False
    assert second.job == first.job and second.job.payload == {"v": 1}
    assert (first.job.unique_key, first.job.unique_for, first.job.unique_while) == (
        "report:42",
        None,
        "active",
    )
    assert count() == 1 and event_types(first.job.id) == ["created"]


def test_active_scope_blocks_while_running_and_frees_the_key_when_finished(app):
    first = enqueue.create_job(spec(), now=T0).job
    running = claim("w1", now=at(1))
    assert running is not None and running.id == first.id
    assert enqueue.create_job(spec(), now=at(2)).job.id == first.id
    lifecycle.complete_job(first.id, "w1", running.attempts, {"ok": True}, now=at(3))
    after = enqueue.create_job(spec(), now=at(4))
    assert after.created is True and after.job.id != first.id
    assert fresh(first.id).status == "succeeded"
    assert enqueue.create_job(spec(), now=at(5)).job.id == after.job.id


def test_queued_scope_lets_a_new_job_in_once_the_holder_runs(app):
    first = enqueue.create_job(spec(unique_while="queued"), now=T0).job
    assert enqueue.create_job(spec(unique_while="queued"), now=at(1)).created is False
    running = claim("w1", now=at(2))
    assert running is not None and running.id == first.id
    second = enqueue.create_job(spec(unique_while="queued"), now=at(3))
    assert second.created is True and second.job.unique_while == "queued"
    # The first, failed and retried, runs again without the key: the second holds it.
    fail(running, "w1", now=at(4))
    assert fresh(first.id).status == "queued"
    assert enqueue.create_job(spec(unique_while="queued"), now=at(5)).job.id == second.job.id


def test_a_failed_holder_does_not_block_and_its_retry_meets_no_conflict(app):
    first = enqueue.create_job(spec(max_attempts=1), now=T0).job
    running = claim("w1", now=at(1))
    assert running is not None
    fail(running, "w1", now=at(2))
    second = enqueue.create_job(spec(), now=at(3))
    assert second.created is True
    assert actions.run_one("retry", first.id, now=at(4)).changed == 1
    assert fresh(first.id).status == "queued"
    assert enqueue.create_job(spec(), now=at(5)).job.id == second.job.id


def test_the_window_counts_from_the_holders_created_at(app):
    first = enqueue.create_job(spec(unique_for=60), now=T0).job
    assert first.unique_for == 60.0
    assert enqueue.create_job(spec(unique_for=60), now=at(59.9)).job.id == first.id
    later = enqueue.create_job(spec(unique_for=60), now=at(60))
    assert later.created is True and later.job.id != first.id
    assert fresh(first.id).status == "queued"  # outside the window, still queued: not changed
    assert enqueue.create_job(spec(unique_for=60), now=at(119)).job.id == later.job.id
    assert count() == 2


def test_a_key_without_window_blocks_for_as_long_as_the_holder_is_live(app):
    first = enqueue.create_job(spec(), now=T0).job
    assert enqueue.create_job(spec(), now=at(10**7)).job.id == first.id


def test_threads_racing_on_one_key_leave_one_job(app: Flask):
    threads = 12
    barrier = threading.Barrier(threads)
    results: list[CreateResult] = []
    lock = threading.Lock()

    def run(n: int) -> None:
        with app.app_context():
            barrier.wait()
            result = enqueue.create_job(spec("race", payload={"n": n}, unique_for=3600))
            with lock:
                results.append(result)

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert len(results) == threads
    assert sum(r.created for r in results) == 1
    assert len({r.job.id for r in results}) == 1
    assert count() == 1


def test_racing_creates_retiring_an_expired_holder_leave_one_new_job(app: Flask):
    old = enqueue.create_job(spec("race", unique_for=1), now=T0).job
    threads = 10
    barrier = threading.Barrier(threads)
    results: list[CreateResult] = []
    lock = threading.Lock()

    def run() -> None:
        with app.app_context():
            barrier.wait()
            result = enqueue.create_job(spec("race", unique_for=1), now=at(30))
            with lock:
                results.append(result)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert sum(r.created for r in results) == 1
    assert len({r.job.id for r in results}) == 1 and results[0].job.id != old.id
    assert count() == 2


def test_transactions_racing_on_one_key_leave_one_job(app: Flask):
    """Two callers' transactions: the second's create waits for the first to commit, then
    returns its job; a rolled back holder leaves the key free."""
    with engine().connect() as conn:
        with conn.begin():
            first = enqueue.create_job(spec("tx"), now=T0, within=conn)
            assert first.created is True
            result: list[CreateResult] = []

            def other() -> None:
                with app.app_context():
                    result.append(enqueue.create_job(spec("tx"), now=at(1)))

            thread = threading.Thread(target=other)
            thread.start()
            thread.join(timeout=1)
            assert thread.is_alive()  # waits on the index for this transaction to end
        thread.join(timeout=30)
    assert result and result[0].created is False and result[0].job.id == first.job.id
    with engine().connect() as conn, conn.begin() as tx:
        enqueue.create_job(spec("rolled"), now=T0, within=conn)
        tx.rollback()
    assert enqueue.create_job(spec("rolled"), now=at(1)).created is True


def test_debounce_replaces_the_payload_and_pushes_the_start(app):
    first = enqueue.create_job(spec(payload={"v": 1}, debounce=30), now=T0)
    assert first.created is True and first.job.available_at == at(30)
    assert first.job.unique_while == "queued"
    for n in range(2, 6):
        again = enqueue.create_job(spec(payload={"v": n}, debounce=30), now=at(n))
        assert again.created is False and again.job.id == first.job.id
    job = fresh(first.job.id)
    assert job.payload == {"v": 5} and job.available_at == at(35) and job.updated_at == at(5)
    assert event_types(job.id) == ["created"] + ["debounced"] * 4
    assert count() == 1
    assert claim("w1", now=at(34)) is None
    claimed = claim("w1", now=at(35))
    assert claimed is not None and claimed.payload == {"v": 5}


def test_debounce_after_a_claim_creates_a_new_job_and_leaves_the_claimed_one(app):
    first = enqueue.create_job(spec(payload={"v": 1}, debounce=10), now=T0).job
    running = claim("w1", now=at(10))
    assert running is not None and running.id == first.id
    second = enqueue.create_job(spec(payload={"v": 2}, debounce=10), now=at(11))
    assert second.created is True and second.job.id != first.id
    assert second.job.available_at == at(21)
    job = fresh(first.id)
    assert job.payload == {"v": 1} and job.status == "running"
    assert event_types(first.id) == ["created", "claimed"]


def test_debounce_honours_the_window(app):
    first = enqueue.create_job(spec(debounce=5, unique_for=60), now=T0).job
    later = enqueue.create_job(spec(debounce=5, unique_for=60), now=at(61))
    assert later.created is True and later.job.id != first.id


def test_debounce_racing_leaves_one_job_with_one_of_the_payloads(app: Flask):
    threads = 10
    barrier = threading.Barrier(threads)
    results: list[CreateResult] = []
    lock = threading.Lock()

    def run(n: int) -> None:
        with app.app_context():
            barrier.wait()
            result = enqueue.create_job(spec("burst", payload={"n": n}, debounce=60))
            with lock:
                results.append(result)

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert sum(r.created for r in results) == 1
    assert len({r.job.id for r in results}) == 1 and count() == 1
    job = fresh(results[0].job.id)
    assert event_types(job.id).count("debounced") == threads - 1
    assert job.payload in [{"n": n} for n in range(threads)]


def test_bulk_create_with_keys_dedupes_within_and_across_requests(app):
    held = enqueue.create_job(spec("a"), now=T0).job
    results = enqueue.create_jobs(
        [spec("b"), JobSpec("demo.success"), spec("a"), spec("b"), spec("c", debounce=5)], now=at(1)
    )
    assert [r.created for r in results] == [True, True, False, False, True]
    assert results[2].job.id == held.id and results[3].job.id == results[0].job.id
    assert results[4].job.available_at == at(6)
    assert count() == 4


def test_an_idempotency_key_given_too_returns_its_holder(app):
    first = enqueue.create_job(JobSpec("demo.success", idempotency_key="i-1"), now=T0).job
    again = enqueue.create_job(spec("fresh-key", idempotency_key="i-1"), now=at(1))
    assert again.created is False and again.job.id == first.id


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"unique_key": ""}, "unique_key"),
        ({"unique_key": "x" * 256}, "unique_key"),
        ({"unique_key": "a\x00b"}, "unique_key"),
        ({"unique_key": "k", "unique_for": 0}, "unique_for"),
        ({"unique_key": "k", "unique_for": -5}, "unique_for"),
        ({"unique_key": "k", "unique_for": float("nan")}, "unique_for"),
        ({"unique_key": "k", "unique_for": "60"}, "unique_for"),
        ({"unique_key": "k", "unique_while": "running"}, "unique_while"),
        ({"unique_key": "k", "debounce": -1}, "debounce"),
        ({"debounce": 5}, "debounce"),
        ({"unique_for": 5}, "unique_for"),
        ({"unique_key": "k", "debounce": 5, "unique_while": "active"}, "debounce"),
        ({"unique_key": "k", "debounce": 5, "available_at": T0}, "debounce"),
    ],
)
def test_bad_options_are_refused_naming_the_argument(app, options, named):
    with pytest.raises(ValueError, match=named):
        enqueue.create_job(JobSpec("demo.success", **options), now=T0)
    with pytest.raises(ValueError, match=named):
        enqueue.create_jobs([JobSpec("demo.success"), JobSpec("demo.success", **options)], now=T0)
    assert count() == 0
