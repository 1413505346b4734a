"""Named queues in the store: served queues, pause, concurrency slots and the rate ring."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store import connection, lifecycle
from dashboard.store.flow import queues
from dashboard.store.lifecycle import claim_form
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from dashboard.store.reads import queues as read_queues
from tests.store.helpers import LEASE, T0, at, cleanup, event_types, record_statements

KNOWN = claim_form.DEFAULT  # what the claims and settles without forms= know of the limits


def make(queue: str | None, n: int = 1, now=T0, **fields) -> list:
    return [
        enqueue.create_job(JobSpec("demo.success", {"i": i}, queue=queue, **fields), now=now).job
        for i in range(n)
    ]


def claim(worker: str = "w", *, now=T0, limit: int = 1, served=None) -> list:
    return lifecycle.claim_jobs(worker, lease_seconds=LEASE, limit=limit, now=now, queues=served)


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
        enqueue.create_job(JobSpec("demo.success", queue=bad))
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


def test_within_a_queue_the_order_is_the_reference_order(app):
    old_low = make("a", now=T0, priority=10)[0]
    newer = make("a", now=at(2))[0]
    new_high = make("b", now=at(1), priority=90)[0]
    older = make("b", now=T0)[0]
    got = [job.id for _ in range(4) for job in claim(now=at(3))]
    assert sorted(got) == sorted([old_low.id, newer.id, new_high.id, older.id])
    assert [i for i in got if i in (newer.id, old_low.id)] == [newer.id, old_low.id]
    assert [i for i in got if i in (new_high.id, older.id)] == [new_high.id, older.id]


def test_between_queues_each_claim_visits_them_in_a_random_order(app):
    """A quiet queue's one job, of the lowest priority and the newest, is not held behind an
    older backlog of the highest priority in another queue: each claim gives it an even chance
    (the chance it is still queued after 40 claims is 2**-40); and over 60 claims between two
    busy queues both are served (fewer than 5 of either: a chance below 1e-11)."""
    make("backlog", 100, now=T0, priority=100)
    quiet = make("quiet", now=at(5), priority=0)[0]
    got = [job.id for _ in range(40) for job in claim(now=at(6))]
    assert quiet.id in got
    make("other", 100, now=at(7))
    queues_claimed = [job.queue for _ in range(60) for job in claim(now=at(8))]
    assert min(queues_claimed.count("backlog"), queues_claimed.count("other")) >= 5


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
    failed = lifecycle.fail_job(
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
    lifecycle.complete_job(first[0].id, "w", 1, now=at(2))
    assert held("lim") == 1
    # A stale late settle of the same attempt matches no job row and frees nothing.
    assert lifecycle.complete_job(first[0].id, "w", 1, now=at(2)) is None
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
    assert lifecycle.complete_job(job.id, "w", 1, now=at(LEASE + 3)) is None
    assert held("lim") == 1


def test_a_handed_back_attempt_frees_its_slot_once(app):
    queues.set_limits("lim", concurrency_limit=1, now=T0)
    make("lim")
    job = claim(now=at(1))[0]
    back = lifecycle.fail_job(job.id, "w", 1, "WorkerStopped", backoff_base_seconds=0, backoff_max_seconds=0)
    assert back is not None and held("lim") == 0
    assert lifecycle.fail_job(job.id, "w", 1, "again", backoff_base_seconds=0, backoff_max_seconds=0) is None
    assert held("lim") == 0


def test_complete_many_and_complete_and_claim_free_their_slots(app):
    queues.set_limits("lim", concurrency_limit=2, now=T0)
    make("lim", 4)
    a, b = claim(limit=2, now=at(1))
    done = lifecycle.complete_jobs([(a.id, "w", 1, None)], now=at(2))
    assert done == {a.id} and held("lim") == 1
    completed, nxt = lifecycle.complete_and_claim(b.id, "w", 1, lease_seconds=LEASE, now=at(3))
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
        lifecycle.complete_job(job.id, "w", 1, now=at(6))
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
    assert sorted(j.queue for j in got) == ["fast", "fast", "fast", "slow"]
    assert {j.id for j in got if j.queue == "fast"} == {j.id for j in fast}
    assert held("slow") == 1


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


def test_a_queue_count_past_its_cap_reads_as_more_and_one_at_the_cap_as_exact(app):
    make("c", 3, available_at=at(100))  # scheduled: past a cap of 2
    make("c", 2)  # ready: exactly at the cap
    for info in (read_queues.get_queue("c", now=at(1), cap=2), read_queues.list_queues(now=at(1), cap=2)[0]):
        assert info.scheduled == 3 and info.scheduled > info.cap  # "more than 2"
        assert info.ready == 2 and info.ready <= info.cap  # exactly 2


def _claim_rows(name: str, ids=("w",), *, now=None, served=None) -> tuple[bool, list]:
    from dashboard.store.connection import autocommit, fetch_rows
    from dashboard.store.sql import query

    params = {
        "worker_ids": list(ids),
        "now": now or at(1),
        "lease_seconds": LEASE,
        "avoid_expired": False,
        "queues": served,
    }
    with autocommit(None) as conn:
        rows = fetch_rows(conn, query(name), params)
    claimed = [row["queue"] for row in rows if row.get("id") is not None]
    return rows[0].get("limits_open"), claimed


@pytest.mark.parametrize("form", ["claim_one_no_limits", "claim_no_limits"])
def test_a_claim_says_whether_a_limited_queue_could_give_a_job(app, form):
    """`limits_open`: a served queue with a limit has room in each limit and a job due. The
    no-limits forms never take a limited queue's job."""
    ids = ("w",) if "one" in form else ("w", "w")
    make("fast", 8)
    queues.set_limits("slow", concurrency_limit=1, now=T0)
    queues.set_limits("rated", rate_limit={"count": 1, "period_seconds": 60}, now=T0)
    assert _claim_rows(form, ids)[0] is False  # limits, but nothing due in them
    make("slow", 1, available_at=at(100))
    assert _claim_rows(form, ids)[0] is False  # a job, not due
    make("slow", 2)
    open_, got = _claim_rows(form, ids)
    assert open_ is True and set(got) == {"fast"}
    assert _claim_rows(form, ids, served=["slow"]) == (True, [])  # never a limited queue's job
    assert _claim_rows("claim", ("w", "w"), served=["slow"])[1] == ["slow"]  # its one slot taken
    assert _claim_rows(form, ids)[0] is False  # full: no room
    make("rated", 2)
    assert _claim_rows(form, ids)[0] is True  # a free ring entry and a job due
    assert _claim_rows("claim_one", served=["rated"])[1] == ["rated"]  # the entry taken for 60 s
    assert _claim_rows(form, ids)[0] is False
    assert _claim_rows(form, ids, now=at(62))[0] is True  # the window has moved on
    queues.pause("rated")
    assert _claim_rows(form, ids, now=at(62))[0] is False  # paused: not served


def test_the_limits_open_statement_answers_as_the_no_limits_claims(app):
    """The answer alone, for the claims that do not give it: the same states, nothing claimed."""
    make("fast", 4)
    queues.set_limits("slow", concurrency_limit=1, now=T0)
    assert _claim_rows("limits_open") == (False, [])  # nothing due in the limited queue
    make("slow", 1)
    assert _claim_rows("limits_open") == (True, [])
    assert _claim_rows("claim_one", served=["slow"])[1] == ["slow"]  # its one slot taken
    assert _claim_rows("limits_open") == (False, [])  # full
    assert _claim_rows("limits_open", served=["fast"]) == (False, [])  # not served


def test_a_claim_without_limits_that_comes_back_short_claims_the_rest_with_them(app):
    """A process that has seen no limit runs the no-limits form first; when that skipped a
    limited queue that could give jobs, the same call claims the rest with the limits."""
    KNOWN.forget()
    queues.set_limits("slow", concurrency_limit=2, now=T0)
    make("slow", 3)
    got = claim(limit=3, now=at(1))
    assert [job.queue for job in got] == ["slow", "slow"]
    assert held("slow") == 2
    assert KNOWN.is_open(None)


def test_a_settle_that_frees_a_slot_turns_the_next_claims_to_the_limits(app, monkeypatch):
    """A one-job thread's settle-and-claim does not read `limits_open` on every job: it reads
    it again after RECHECK_SECONDS, and a settle that freed a slot turns it on at once."""
    KNOWN.forget()
    monkeypatch.setattr(KNOWN, "recheck_seconds", 3600.0)  # only what the statements say
    queues.set_limits("slow", concurrency_limit=1, now=T0)
    make("slow", 2)
    make("fast", 3)
    (running,) = claim(served=["slow"], now=at(1))  # its one slot
    done, nxt = lifecycle.complete_and_claim(
        running.id, "w", running.attempts, {}, lease_seconds=LEASE, now=at(2)
    )  # read first (no answer yet): slot held, so closed; the claim is the no-limits one's
    assert done and nxt is not None and nxt.queue == "fast"
    assert held("slow") == 0 and KNOWN.is_open(None)  # it freed the slot
    monkeypatch.setattr(KNOWN, "recheck_seconds", 0.0)  # read again at every settle
    claimed, current = [], nxt
    while current is not None and current.queue != "slow":  # fast's two others, then slow's
        done, current = lifecycle.complete_and_claim(
            current.id, "w", current.attempts, {}, lease_seconds=LEASE, now=at(3)
        )
        assert done and KNOWN.is_open(None)  # read before each: a slot free, a job due
        claimed.append(current)
    assert current is not None and held("slow") == 1  # taken with its slot, by the limits' form
    with connection.connect() as conn:
        assert KNOWN.current(conn, None, {"queues": None, "now": at(4)}) is False  # full again


def _only_queue(name: str, *, served=None) -> str | None:
    from dashboard.store.connection import autocommit, fetch_rows
    from dashboard.store.sql import query

    params = {
        "worker_ids": ["w"],
        "now": at(1),
        "lease_seconds": LEASE,
        "avoid_expired": False,
        "queues": served,
    }
    with autocommit(None) as conn:
        return fetch_rows(conn, query(name), params)[0]["only_queue"]


@pytest.mark.parametrize("form", ["limits_open", "claim_one_no_limits", "claim_no_limits"])
def test_the_answers_name_the_one_served_queue_without_a_limit(app, form):
    """`only_queue`: the served queue without a limit when it is the only one, else NULL."""
    assert _only_queue(form) == "default"  # every queue served: `default` alone, even without a row
    make("mail", 1, available_at=at(100))
    assert _only_queue(form) is None  # default and mail
    assert _only_queue(form, served=["mail"]) == "mail"
    queues.set_limits("mail", concurrency_limit=1, now=T0)
    assert _only_queue(form) == "default"  # mail has a limit
    assert _only_queue(form, served=["mail"]) is None
    queues.pause("default")
    assert _only_queue(form) is None  # paused: not served
    assert _only_queue(form, served=["nowhere"]) is None  # no such queue


def test_a_settle_and_claim_reads_the_only_queue_directly_and_its_pause_and_limits_at_once(app, monkeypatch):
    """While the answers say the served queues without a limit are one, a one-job thread's
    settle-and-claim of a job of that queue reads that queue's range alone; a pause or a limit
    given since holds from its commit all the same, and a second queue is visited from the
    next answer."""
    KNOWN.forget()
    monkeypatch.setattr(KNOWN, "recheck_seconds", 3600.0)  # only what the statements say
    sent = record_statements(monkeypatch)
    served = ["solo", "other"]
    make("solo", 4)
    (first,) = claim(served=served, now=at(1))  # no answer yet: the no-limits claim answers
    assert first.queue == "solo" and KNOWN.only_queue(("solo", "other")) == "solo"  # other: no row

    done, nxt = _settle(first, at(2), served)
    assert done and nxt is not None and nxt.queue == "solo"
    assert sent[-1] is lifecycle.settle.COMPLETE_AND_CLAIM_ONLY_QUEUE

    queues.pause("solo")
    done, after = _settle(nxt, at(3), served)
    assert done and after is None  # paused from its commit
    assert sent[-1] is lifecycle.settle.COMPLETE_AND_CLAIM_ONLY_QUEUE
    queues.resume("solo")
    queues.set_limits("solo", concurrency_limit=1, now=T0)
    (third,) = claim(served=served, now=at(4))  # the answer turns: a limited queue with room
    assert third.queue == "solo" and held("solo") == 1
    monkeypatch.setattr(KNOWN, "recheck_seconds", 0.0)
    with connection.connect() as conn:
        assert KNOWN.current(conn, ("solo", "other"), {"queues": served, "now": at(4)}) is False  # full
    assert KNOWN.only_queue(("solo", "other")) is None  # the one without a limit is gone
    make("other", 1)
    done, last = _settle(third, at(5), served)
    assert done and last is not None and last.queue == "other"  # the one without a limit
    assert KNOWN.only_queue(("solo", "other")) == "other"
    assert sent[-1] is lifecycle.settle.COMPLETE_AND_CLAIM_NO_LIMITS  # a job of solo: a form that frees slots
    assert held("solo") == 0  # and solo's slot freed


def test_the_only_queue_settle_leaves_a_job_that_may_hold_a_slot_to_a_form_that_frees_it(app, monkeypatch):
    """A concurrency limit given to the only queue while its job runs seats that job; the
    settle that reads the queue alone settles nothing then, and the job is settled again by a
    statement that frees its slot: the slot freed once, the job succeeded once, and the next
    claims take the limit into account."""
    KNOWN.forget()
    monkeypatch.setattr(KNOWN, "recheck_seconds", 3600.0)  # the answer stays "solo, no limit"
    sent = record_statements(monkeypatch)
    served = ["solo"]
    make("solo", 2)
    (job,) = claim(served=served, now=at(1))
    assert KNOWN.only_queue(("solo",)) == "solo"
    queues.set_limits("solo", concurrency_limit=1, now=T0)
    assert held("solo") == 1  # the running job took the new limit's slot

    done, nxt = _settle(job, at(2), served)
    assert sent[-2:] == [lifecycle.settle.COMPLETE_AND_CLAIM_ONLY_QUEUE, lifecycle.settle.COMPLETE_AND_CLAIM]
    assert done and nxt is None  # settled; the slot it frees is the next statement's
    assert held("solo") == 0
    assert KNOWN.is_open(("solo",)) and KNOWN.only_queue(("solo",)) is None  # the limits' forms
    (after,) = claim(served=served, now=at(3))
    assert after.queue == "solo" and held("solo") == 1
    assert event_types(job.id).count("succeeded") == 1


def _settle(job, now, served):
    return lifecycle.complete_and_claim(
        job.id, "w", job.attempts, {}, lease_seconds=LEASE, now=now, queues=served, job_queue=job.queue
    )
