"""Named queues in the store: served queues, pause, concurrency slots and the rate ring."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store import enqueue, queues, read_queues, service
from dashboard.store.enqueue import JobSpec
from tests.store.helpers import LEASE, T0, at, cleanup


def make(queue: str | None, n: int = 1, now=T0, **fields) -> list:
    return [
        enqueue.create_job("demo.success", {"i": i}, queue=queue, now=now, **fields).job for i in range(n)
    ]


def claim(worker: str = "w", *, now=T0, limit: int = 1, served=None) -> list:
    return service.claim_jobs(worker, lease_seconds=LEASE, limit=limit, now=now, queues=served)


def slots(name: str) -> list[tuple]:
    with db.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT n, job_id, attempt FROM jobs_queue_slot WHERE queue = :q ORDER BY n"), {"q": name}
        )
        return [tuple(r) for r in rows]


def held(name: str) -> int:
    return sum(1 for _, job_id, _ in slots(name) if job_id is not None)


def audit_actions() -> list[tuple[str, str, str]]:
    with db.engine.connect() as conn:
        rows = conn.execute(text("SELECT action, actor, data->>'queue' FROM jobs_audit ORDER BY id"))
        return [tuple(r) for r in rows]


def test_a_job_is_in_default_unless_it_names_a_queue(app):
    plain, named = make(None)[0], make("mail")[0]
    assert (plain.queue, named.queue) == ("default", "mail")
    assert {q.name for q in read_queues.list_queues(now=T0)} == {"default", "mail"}


@pytest.mark.parametrize("bad", ["", "a b", "x" * 65, "é", "a/b", "\x00"])
def test_an_invalid_queue_name_is_refused_naming_queue_and_writes_nothing(app, bad):
    with pytest.raises(ValueError, match="queue"):
        enqueue.create_job("demo.success", queue=bad)
    with pytest.raises(ValueError, match="queue"):
        enqueue.create_jobs([JobSpec("demo.success")], queue=bad)
    with pytest.raises(ValueError, match="queue"):
        enqueue.create_jobs([JobSpec("demo.success", queue=bad)])
    with db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM jobs_job")).scalar_one() == 0


def test_bulk_create_takes_the_call_queue_unless_a_spec_names_its_own(app):
    results = enqueue.create_jobs(
        [JobSpec("demo.success"), JobSpec("demo.success", queue="own")], queue="bulk"
    )
    assert [r.job.queue for r in results] == ["bulk", "own"]
    assert {q.name for q in read_queues.list_queues(now=T0)} >= {"bulk", "own"}


def test_a_worker_claims_only_from_the_queues_it_serves(app):
    make("reports", 3)
    mail = make("mail")[0]
    assert [j.id for j in claim(served=["mail"], now=at(1))] == [mail.id]
    assert claim(served=["mail"], now=at(1)) == []
    assert len(claim(served=["reports", "mail"], limit=5, now=at(1))) == 3


def test_the_order_between_queues_is_the_reference_order_over_all_served_queues(app):
    old_low = make("a", now=T0, priority=10)[0]
    new_high = make("b", now=at(1), priority=90)[0]
    older = make("b", now=T0)[0]
    newer = make("a", now=at(2))[0]
    got = claim(limit=4, now=at(3))
    assert [j.id for j in got] == [new_high.id, older.id, newer.id, old_low.id]


def test_unset_queues_serves_a_queue_that_first_appears_later(app):
    assert claim(now=at(1)) == []
    late = make("brand-new", now=at(1))[0]
    assert [j.id for j in claim(now=at(2))] == [late.id]


def test_a_paused_queue_is_not_claimed_and_resume_brings_it_back(app):
    job = make("mail")[0]
    make("other")
    assert queues.pause("mail", actor="alice", now=T0) is True
    assert queues.pause("mail", actor="bob", now=T0) is False  # twice: a no-op
    got = claim(limit=5, now=at(1))
    assert [j.queue for j in got] == ["other"]
    assert queues.resume("mail", actor="carol", now=at(2)) is True
    assert [j.id for j in claim(now=at(3))] == [job.id]
    assert audit_actions() == [("queue_paused", "alice", "mail"), ("queue_resumed", "carol", "mail")]
    info = read_queues.get_queue("mail", now=at(3))
    assert info is not None and not info.paused and info.paused_by == "carol"


def test_a_running_attempt_of_a_paused_queue_settles_and_its_retry_waits_in_the_queue(app):
    make("mail")
    job = claim(now=at(1))[0]
    queues.pause("mail", now=at(2))
    failed = service.fail_job(
        job.id, "w", 1, "boom", backoff_base_seconds=0, backoff_max_seconds=0, now=at(3)
    )
    assert failed is not None and failed.status == "queued"
    assert claim(now=at(4)) == []
    queues.resume("mail", now=at(5))
    assert [j.id for j in claim(now=at(6))] == [job.id]


def test_pause_and_limits_take_a_name_with_no_jobs_yet(app):
    queues.pause("future", now=T0)
    queues.set_limits("later", concurrency_limit=2, rate_limit={"count": 5, "period_seconds": 60}, now=T0)
    info = read_queues.get_queue("later", now=T0)
    assert info is not None and info.concurrency_limit == 2 and info.rate_limit == queues.RateLimit(5, 60.0)
    assert read_queues.get_queue("future", now=T0).paused
    assert read_queues.get_queue("nothing-here", now=T0) is None


def test_a_concurrency_limit_holds_and_each_end_frees_exactly_one_slot(app):
    queues.set_limits("lim", concurrency_limit=2, now=T0)
    make("lim", 5)
    first = claim(limit=5, now=at(1))
    assert len(first) == 2 and held("lim") == 2
    assert claim(limit=5, now=at(1)) == []
    service.complete_job(first[0].id, "w", 1, now=at(2))
    assert held("lim") == 1
    # A stale late settle of the same attempt matches no job row and frees nothing.
    assert service.complete_job(first[0].id, "w", 1, now=at(2)) is None
    assert held("lim") == 1
    again = claim(limit=5, now=at(3))
    assert len(again) == 1 and held("lim") == 2


def test_lease_recovery_frees_the_slot_once_and_the_late_settle_frees_nothing(app):
    queues.set_limits("lim", concurrency_limit=1, now=T0)
    make("lim", 2)
    job = claim(now=at(1))[0]
    assert held("lim") == 1
    result = cleanup(at(1) + timedelta(seconds=LEASE + 1))
    assert result.count == 1 and held("lim") == 0
    second = claim(now=at(LEASE + 2))
    assert len(second) == 1 and held("lim") == 1
    # The first attempt's worker comes back: fenced off, and the slot of the new attempt stays.
    assert service.complete_job(job.id, "w", 1, now=at(LEASE + 3)) is None
    assert held("lim") == 1


def test_a_handed_back_attempt_frees_its_slot_once(app):
    queues.set_limits("lim", concurrency_limit=1, now=T0)
    make("lim")
    job = claim(now=at(1))[0]
    back = service.fail_job(job.id, "w", 1, "WorkerStopped", backoff_base_seconds=0, backoff_max_seconds=0)
    assert back is not None and held("lim") == 0
    assert service.fail_job(job.id, "w", 1, "again", backoff_base_seconds=0, backoff_max_seconds=0) is None
    assert held("lim") == 0


def test_complete_many_and_complete_and_claim_free_their_slots(app):
    queues.set_limits("lim", concurrency_limit=2, now=T0)
    make("lim", 4)
    a, b = claim(limit=2, now=at(1))
    done = service.complete_jobs([(a.id, "w", 1, None)], now=at(2))
    assert done == {a.id} and held("lim") == 1
    completed, nxt = service.complete_and_claim(b.id, "w", 1, lease_seconds=LEASE, now=at(3))
    assert completed and nxt is not None and held("lim") == 1  # b's slot freed, the one a freed taken


def test_setting_a_limit_seats_the_running_attempts_and_lowering_drops_free_slots(app):
    make("q", 4)
    running = claim(limit=3, now=at(1))
    queues.set_limits("q", concurrency_limit=2, now=at(2))
    assert held("q") == 2 and len(slots("q")) == 2
    assert claim(now=at(3)) == []
    queues.set_limits("q", concurrency_limit=5, now=at(4))
    assert len(slots("q")) == 5
    assert len(claim(limit=5, now=at(5))) == 1  # the one job left
    for job in running:
        service.complete_job(job.id, "w", 1, now=at(6))
    queues.set_limits("q", concurrency_limit=1, now=at(7))
    assert len(slots("q")) == 1 and held("q") == 1  # the held slot kept, free ones dropped
    queues.set_limits("q", concurrency_limit=None, now=at(8))
    assert slots("q") == []


def test_a_stale_slot_is_freed_by_the_rescuer_pass(app):
    queues.set_limits("q", concurrency_limit=1, now=T0)
    make("q")
    job = claim(now=at(1))[0]
    with db.engine.begin() as conn:  # a settle that could not see the slot: the job ends, the slot stays
        conn.execute(
            text(
                "UPDATE jobs_job SET status = 'succeeded', locked_by = NULL, locked_until = NULL, "
                "finished_at = now() WHERE id = :id"
            ),
            {"id": job.id},
        )
    assert held("q") == 1
    assert queues.free_stale_slots() == 1 and held("q") == 0


def test_a_rate_limit_allows_count_claims_per_period(app):
    queues.set_limits("r", rate_limit={"count": 2, "period_seconds": 10}, now=T0)
    make("r", 5)
    assert len(claim(limit=5, now=at(1))) == 2
    assert claim(limit=5, now=at(5)) == []
    info = read_queues.get_queue("r", now=at(5))
    assert info.rate_limited and info.rate_free_at == at(11)
    assert len(claim(limit=5, now=at(11))) == 2
    assert claim(limit=5, now=at(12)) == []


def test_the_rate_window_says_when_a_full_ring_frees_and_whether_nothing_else_is_open(app):
    queues.set_limits("r", rate_limit={"count": 2, "period_seconds": 10}, now=T0)
    make("r", 3)
    assert queues.rate_window(["other"], now=at(1)) is None  # no rate limit among the queues
    assert queues.rate_window(["r"], now=at(1)) == queues.Window(None, all_closed=False)  # room
    assert len(claim(limit=3, now=at(1), served=["r"])) == 2
    assert queues.rate_window(["r"], now=at(5)) == queues.Window(6.0, all_closed=True)
    assert queues.rate_window(None, now=at(5)) == queues.Window(6.0, all_closed=False)  # default is open
    assert queues.rate_window(["r", "other"], now=at(5)) == queues.Window(6.0, all_closed=False)
    assert queues.rate_window(["r"], now=at(11)) == queues.Window(None, all_closed=False)  # it opened
    queues.pause("r", now=at(5))
    assert queues.rate_window(["r"], now=at(5)) is None  # a paused queue waits for its resume


def test_a_full_queue_does_not_hold_back_another(app):
    queues.set_limits("slow", concurrency_limit=1, now=T0)
    make("slow", 3, now=T0)
    fast = make("fast", 3, now=at(1))
    got = claim(limit=4, now=at(2))
    assert [j.queue for j in got] == ["slow", "fast", "fast", "fast"]
    assert {j.id for j in got[1:]} == {j.id for j in fast}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("concurrency_limit", 0),
        ("concurrency_limit", -1),
        ("concurrency_limit", True),
        ("concurrency_limit", 10_001),
        ("rate_limit", {"count": 0, "period_seconds": 1}),
        ("rate_limit", {"count": 1, "period_seconds": 0}),
        ("rate_limit", {"count": 1, "period_seconds": float("inf")}),
        ("rate_limit", {"count": 1}),
    ],
)
def test_an_out_of_range_limit_is_refused_naming_it_and_changes_nothing(app, field, value):
    with pytest.raises(ValueError, match=field):
        queues.set_limits("q", **{field: value})
    assert read_queues.get_queue("q", now=T0) is None


def test_the_figures_of_a_queue(app):
    make("f", 2, now=T0)
    make("f", 1, now=T0, available_at=at(100))
    claim(now=at(10))
    info = read_queues.get_queue("f", now=at(10))
    assert (info.ready, info.scheduled, info.retrying, info.running) == (1, 1, 0, 1)
    assert info.oldest_ready_wait_seconds == pytest.approx(10.0)


def test_the_reference_claim_holds_back_while_a_paused_or_limited_queue_has_a_ready_job(app):
    """A worker serving every queue tries the reference's claim first (service.claim_batch);
    its guard must hold it back while any paused or limited queue has a job due, whatever queue
    the claimable job is in, and say so (`held_back`), so the per-queue claim decides. A setting
    on a queue with nothing due (or only later jobs) cannot change what the claim takes, and
    does not hold it back; an empty answer not held back is final."""
    from dashboard.store.connection import autocommit, fetch_rows

    def reference(ids=("w",)) -> tuple[bool, list]:
        sql = service.CLAIM_ONE_ALL if len(ids) == 1 else service.CLAIM_ALL
        with autocommit(None) as conn:
            rows = fetch_rows(conn, sql, {**params, "worker_ids": list(ids)})
        return rows[0]["held_back"], [row["id"] for row in rows if row["id"] is not None]

    params = {"now": at(1), "lease_seconds": LEASE, "avoid_expired": False}
    assert reference() == (False, [])  # nothing queued: final
    mail = make("mail", 3)
    queues.pause("elsewhere")
    queues.set_limits("limited", concurrency_limit=1, now=T0)
    make("limited", 1, available_at=at(60))  # due later: nothing of it can be claimed now
    held, got = reference()
    assert not held and len(got) == 1 and got[0] in {job.id for job in mail}
    make("elsewhere", 1)  # a paused queue's job, due now
    assert reference() == (True, [])
    assert reference(("w", "w")) == (True, [])
    queues.resume("elsewhere")
    held, got = reference()
    assert not held and len(got) == 1
    make("limited", 1)  # a limited queue's job, due now (its slot free)
    assert reference() == (True, [])
    assert len(claim(now=at(1))) == 1  # the per-queue claim takes it, with its slot


def test_a_queue_count_past_its_cap_reads_as_more_and_one_at_the_cap_as_exact(app):
    make("c", 3, available_at=at(100))  # scheduled: past a cap of 2
    make("c", 2)  # ready: exactly at the cap
    for info in (read_queues.get_queue("c", now=at(1), cap=2), read_queues.list_queues(now=at(1), cap=2)[0]):
        assert info.scheduled == 3 and info.scheduled > info.cap  # "more than 2"
        assert info.ready == 2 and info.ready <= info.cap  # exactly 2
