"""Jobs that wait for other jobs: created waiting, released exactly once by the settle of their
last parent, the three failure policies, and the workflow actions."""

from __future__ import annotations

import itertools
import threading
import uuid

import psycopg
import pytest

from dashboard.extensions import db
from dashboard.store import lifecycle
from dashboard.store.lifecycle import actions, dependents, retention
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from dashboard.store.records import JobRecord
from dashboard.store.states import WAITING_AT
from tests.support.waiting import wait_until

from .helpers import BACKOFF, T0, at, claim, event_types, fresh

ORDER = itertools.count()


def make(*parents: uuid.UUID, policy: str | None = None, workflow: str | None = None, **kw) -> JobRecord:
    """A job with these parents; each one made claims before the next (a lower priority)."""
    priority = 1000 - next(ORDER) % 1000
    spec = JobSpec(
        "demo.success",
        depends_on=parents,
        on_parent_failure=policy,
        workflow=workflow,
        priority=priority,
        **kw,
    )
    return enqueue.create_job(spec, now=T0).job


def run(job: JobRecord, *, ok: bool = True, worker: str = "w1", now=T0) -> None:
    """Claim ``job`` (the only one due) and settle it."""
    claimed = claim(worker, now=now)
    assert claimed is not None and claimed.id == job.id
    if ok:
        assert lifecycle.complete_job(claimed.id, worker, claimed.attempts, {"from": str(job.id)}, now=now)
    else:
        lifecycle.fail_job(claimed.id, worker, claimed.attempts, "boom", now=now, **BACKOFF)


def test_a_waiting_job_is_queued_never_claimed_and_released_by_its_last_parent(app):
    a, b = make(), make()
    child = make(a.id, b.id)
    assert (child.status, child.available_at, child.waiting_on) == ("queued", WAITING_AT, 2)
    assert child.depends_on == [a.id, b.id] and child.on_parent_failure == "cancel"
    assert child.workflow == str(a.id) and fresh(a.id).workflow == str(a.id)
    run(a)
    assert fresh(child.id).waiting_on == 1 and fresh(child.id).available_at == WAITING_AT
    run(b, now=at(1))
    released = fresh(child.id)
    assert (released.status, released.available_at, released.waiting_on) == ("queued", at(1), 0)
    assert event_types(child.id) == ["created", "released"]
    assert claim("w1", now=at(2)).id == child.id


def test_a_parent_done_already_counts_and_an_unknown_one_is_refused(app):
    a = make()
    run(a)
    child = make(a.id)
    assert (child.waiting_on, child.available_at) == (0, T0)
    missing = uuid.uuid4()
    with pytest.raises(ValueError, match=f"depends_on: no job {missing}"):
        make(a.id, missing)
    with pytest.raises(ValueError, match="at most 100"):
        make(*[uuid.uuid4() for _ in range(101)])


def test_cancel_flows_down_the_graph_and_names_the_parent(app):
    a = make(max_attempts=1)
    b = make(a.id)
    c = make(b.id)
    runs_anyway = make(b.id, policy="run")
    run(a, ok=False)
    for job in (b, c):
        gone = fresh(job.id)
        assert (gone.status, gone.cancelled) == ("failed", True)
        assert event_types(job.id) == ["created", "cancelled"]
    assert fresh(b.id).last_error == f"Cancelled: parent {a.id} failed"
    assert fresh(c.id).last_error == f"Cancelled: parent {b.id} failed"
    assert fresh(runs_anyway.id).available_at == T0  # its parent ended: a "finally" step runs
    born_cancelled = make(a.id)
    assert (born_cancelled.status, born_cancelled.last_error) == (
        "failed",
        f"Cancelled: parent {a.id} failed",
    )
    assert event_types(born_cancelled.id) == ["created", "cancelled"]


def test_wait_keeps_the_job_until_a_retried_parent_succeeds(app):
    a = make(max_attempts=1)
    child = make(a.id, policy="wait")
    run(a, ok=False)
    assert fresh(child.id).available_at == WAITING_AT
    assert actions.run_one("retry", a.id, event_data={}, now=at(1)).changed == 1
    run(a, now=at(2))
    assert fresh(child.id).available_at == at(2)


def test_run_after_a_failure_is_not_released_twice_by_a_retry(app):
    a, b = make(max_attempts=1), make()
    child = make(a.id, b.id, policy="run")
    run(a, ok=False)
    actions.run_one("retry", a.id, event_data={}, now=at(1))
    run(a, now=at(2))  # a second end of the same parent must not stand in for b
    assert fresh(child.id).available_at == WAITING_AT
    run(b, now=at(3))
    assert fresh(child.id).available_at == at(3)
    assert event_types(child.id).count("released") == 1


def test_retrying_a_workflow_reruns_the_failed_chain_in_order(app):
    a = make(max_attempts=1, workflow="wf")
    b = make(a.id)
    c = make(b.id)
    assert b.workflow == c.workflow == "wf"
    run(a, ok=False)
    assert dependents.retry_workflow("wf", event_data={}, now=at(1)) == 3
    assert fresh(a.id).available_at == at(1)
    assert fresh(b.id).available_at == WAITING_AT and fresh(c.id).available_at == WAITING_AT
    run(a, now=at(2))
    run(b, now=at(3))
    run(c, now=at(4))
    assert {fresh(job.id).status for job in (a, b, c)} == {"succeeded"}


def test_cancelling_a_workflow_cancels_its_queued_jobs_and_their_dependents_outside_it(app):
    a = make(workflow="wf")
    b = make(a.id)
    outside = make(b.id, workflow="other")
    assert dependents.cancel_workflow("wf", event_data={}, message="Cancelled by ops", now=at(1)) == 2
    assert fresh(outside.id).status == "failed"
    assert fresh(outside.id).last_error == f"Cancelled: parent {b.id} failed"


def test_run_now_does_not_release_a_waiting_job(app):
    a = make()
    child = make(a.id)
    assert actions.run_one("run_now", child.id, event_data={}, now=at(1)).changed == 0
    assert fresh(child.id).available_at == WAITING_AT


def test_parents_settling_at_once_release_their_child_exactly_once(app):
    for round_ in range(5):
        parents = [make() for _ in range(4)]
        child = make(*(p.id for p in parents))
        claimed = [claim(f"w{n}", now=at(round_)) for n in range(4)]
        barrier = threading.Barrier(4)

        def settle(job: JobRecord, worker: str, barrier: threading.Barrier, moment) -> None:
            with app.app_context():
                barrier.wait()
                lifecycle.complete_job(job.id, worker, job.attempts, None, now=moment)

        threads = [
            threading.Thread(target=settle, args=(job, f"w{n}", barrier, at(round_)))
            for n, job in enumerate(claimed)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        done = fresh(child.id)
        assert (done.available_at, done.waiting_on) == (at(round_), 0)
        assert event_types(child.id).count("released") == 1
        assert claim("w1", now=at(round_)).id == child.id


def edges(parent: uuid.UUID) -> list[uuid.UUID]:
    """The dependents ``jobs_job_dependency`` names for ``parent``, in id order."""
    with db.engine.connect() as conn:
        found = conn.exec_driver_sql(
            "SELECT child_id FROM jobs_job_dependency WHERE parent_id = %(p)s ORDER BY child_id",
            {"p": parent},
        )
        return list(found.scalars())


def test_a_deleted_parent_takes_its_edges_and_still_counts_as_succeeded(app):
    a, b = make(), make()
    child, other = make(a.id, b.id), make(b.id)
    assert edges(a.id) == [child.id] and edges(b.id) == sorted([child.id, other.id])
    run(a)
    assert retention.prune(retention.cutoffs({"succeeded": 1})).total_jobs == 1  # a, done at T0
    assert edges(a.id) == [] and edges(b.id) == sorted([child.id, other.id])
    run(b, now=at(1))
    assert (fresh(child.id).available_at, fresh(child.id).waiting_on) == (at(1), 0)
    assert fresh(other.id).available_at == at(1)
    assert actions.run_one("delete", b.id).changed == 1
    assert edges(b.id) == []


def test_a_decrement_under_contention_takes_one_parent_each(app):
    """Parents settling at once, none the last: each takes one off, in its own statement."""
    parents = [make() for _ in range(6)]
    child = make(*(p.id for p in parents))
    claimed = [claim(f"w{n}") for n in range(4)]
    barrier = threading.Barrier(4)

    def settle(job: JobRecord, worker: str) -> None:
        with app.app_context():
            barrier.wait()
            lifecycle.complete_job(job.id, worker, job.attempts, None, now=T0)

    threads = [threading.Thread(target=settle, args=(job, f"w{n}")) for n, job in enumerate(claimed)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (fresh(child.id).waiting_on, fresh(child.id).available_at) == (2, WAITING_AT)
    assert event_types(child.id) == ["created"]


def test_a_graph_in_one_create_names_earlier_jobs_by_index(app):
    results = enqueue.create_jobs(
        [
            JobSpec("demo.success"),
            JobSpec("demo.success", depends_on=(0,)),
            JobSpec("demo.success", depends_on=(0, 1)),
        ],
        now=T0,
    )
    first, second, third = (r.job for r in results)
    assert second.depends_on == [first.id] and third.depends_on == [first.id, second.id]
    assert (second.waiting_on, third.waiting_on) == (1, 2)
    with pytest.raises(ValueError, match="job 1: depends_on: 1 is not an earlier job"):
        enqueue.create_jobs([JobSpec("demo.success"), JobSpec("demo.success", depends_on=(1,))], now=T0)


def test_a_workflow_reads_its_jobs_counts_and_each_jobs_parents_and_dependents(app):
    from dashboard.store.reads import workflows

    a = make(workflow="wf", max_attempts=1)
    b = make(a.id)
    c = make(a.id, b.id, policy="run")
    run(a, ok=False)
    found = workflows.workflow("wf")
    assert found is not None and found.complete
    states = {node.id: node.state for node in found.jobs}  # created at one instant: in id order
    assert states == {a.id: "failed", b.id: "cancelled", c.id: "queued"}  # c, a "finally": both ended
    assert found.counts.as_dict() == {
        "queued": 1,
        "waiting": 0,
        "running": 0,
        "succeeded": 0,
        "failed": 1,
        "cancelled": 1,
    }
    assert [node.id for node in workflows.parents([b.id, a.id])] == [b.id, a.id]
    assert {node.id for node in workflows.dependents(a.id)} == {b.id, c.id}
    assert workflows.workflow("nope") is None
    assert [name for name, _ in workflows.recent()] == ["wf"]


def kept(job_id: uuid.UUID) -> int | None:
    """The count ``jobs_job_waiting`` keeps apart for ``job_id`` (None: no row)."""
    with db.engine.connect() as conn:
        found = conn.exec_driver_sql(
            "SELECT waiting_on FROM jobs_job_waiting WHERE job_id = %(j)s", {"j": job_id}
        )
        return found.scalar()


def own_row(job_id: uuid.UUID) -> tuple[int, object]:
    """The job row's own ``waiting_on`` and ``updated_at``, as stored."""
    with db.engine.connect() as conn:
        found = conn.exec_driver_sql(
            "SELECT waiting_on, updated_at FROM jobs_job WHERE id = %(j)s", {"j": job_id}
        )
        return tuple(found.one())


def test_a_parent_but_the_last_takes_one_off_the_count_kept_apart_and_leaves_the_row_alone(app):
    from dashboard.store.reads import lists, workflows

    a, b, c = make(workflow="wide"), make(), make()
    child = make(a.id, b.id, c.id)
    assert kept(child.id) == 3 and own_row(child.id) == (3, T0)
    run(a, now=at(1))
    assert kept(child.id) == 2 and own_row(child.id) == (3, T0)  # the wide row not written
    assert fresh(child.id).waiting_on == 2  # every reader shows the count kept apart
    listed = {job.id: job.waiting_on for job in lists.list_jobs(limit=10, offset=0).results}
    assert listed[child.id] == 2
    drawn = workflows.workflow("wide")
    assert drawn is not None and {node.id: node.waiting_on for node in drawn.jobs}[child.id] == 2
    assert [node.waiting_on for node in workflows.dependents(a.id)] == [2]
    run(b, now=at(2))
    assert kept(child.id) == 1 and fresh(child.id).waiting_on == 1
    run(c, now=at(3))  # the last: the count folded back, then released as before
    assert kept(child.id) is None and own_row(child.id) == (0, at(3))
    assert (fresh(child.id).available_at, fresh(child.id).waiting_on) == (at(3), 0)
    assert event_types(child.id) == ["created", "released"]


def test_one_parent_leaves_no_count_apart(app):
    a = make()
    child = make(a.id)
    assert kept(child.id) is None and fresh(child.id).waiting_on == 1
    run(a)
    assert fresh(child.id).available_at == T0


def test_a_cancel_takes_the_count_apart_and_a_retried_job_waits_on_its_row(app):
    a, b = make(), make()
    child = make(a.id, b.id, workflow="wf")
    assert kept(child.id) == 2
    assert actions.run_one("cancel", child.id, event_data={}, now=at(1)).changed == 1
    assert kept(child.id) is None
    assert actions.run_one("retry", child.id, event_data={}, now=at(2)).changed == 1
    assert kept(child.id) is None and own_row(child.id)[0] == 2  # waits again, counted in its row
    run(a, now=at(3))
    assert fresh(child.id).waiting_on == 1 and fresh(child.id).available_at == WAITING_AT
    run(b, now=at(4))
    assert fresh(child.id).available_at == at(4)
    assert event_types(child.id).count("released") == 1
    other = make(a.id, make().id, make().id, workflow="wf2")
    assert kept(other.id) == 2  # a has succeeded: two to wait for
    assert dependents.cancel_workflow("wf2", event_data={}, message="Cancelled", now=at(5)) == 1
    assert kept(other.id) is None and fresh(other.id).cancelled


def test_a_failed_parent_under_wait_folds_the_count_back_and_the_rest_still_release(app):
    a, b, c = make(max_attempts=1), make(), make()
    child = make(a.id, b.id, c.id, policy="wait")
    run(a, ok=False, now=at(1))
    assert kept(child.id) is None and own_row(child.id)[0] == 3  # a failure does not count
    run(b, now=at(2))
    run(c, now=at(3))
    assert fresh(child.id).waiting_on == 1 and fresh(child.id).available_at == WAITING_AT
    actions.run_one("retry", a.id, event_data={}, now=at(4))
    run(a, now=at(5))
    assert fresh(child.id).available_at == at(5)
    assert event_types(child.id) == ["created", "released"]


def test_a_cancel_waits_behind_a_settle_holding_the_count_without_a_deadlock(app, libpq_url):
    """A transaction that took one off a dependent's count apart and then settles its last
    parent, while a cancel of that dependent waits: the cancel waits for the count's row before
    it locks the job's (the order of every path), so the settle goes on and both commit."""
    parents = [make() for _ in range(3)]
    child = make(*(p.id for p in parents))
    for n in range(3):
        claim(f"w{n}")
    done = (
        "UPDATE jobs_job SET status = 'succeeded', finished_at = %(t)s, locked_by = NULL,"
        " locked_until = NULL, updated_at = %(t)s WHERE id = ANY(%(ids)s)"
    )
    settler = psycopg.connect(libpq_url)
    outcome: list[object] = []
    try:
        settler.execute(done, {"t": at(1), "ids": [parents[0].id, parents[1].id]})  # two off: 3 -> 1
        assert settler.execute("SELECT waiting_on FROM jobs_job_waiting").fetchone() == (1,)

        def cancel() -> None:
            with app.app_context():
                outcome.append(actions.run_one("cancel", child.id, event_data={}, now=at(2)).changed)

        canceller = threading.Thread(target=cancel)
        canceller.start()
        with psycopg.connect(libpq_url, autocommit=True) as watcher:
            wait_until(
                lambda: watcher.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE '%DELETE FROM jobs_job_waiting%'"
                ).fetchone(),
                10,
                "the cancel waiting for the count's row",
            )
        settler.execute(done, {"t": at(1), "ids": [parents[2].id]})  # the last: locks the job
        settler.commit()
        canceller.join(10)
        assert not canceller.is_alive()
    finally:
        settler.close()
    assert outcome == [1]  # released by the settle, then cancelled: nothing deadlocked
    assert event_types(child.id) == ["created", "released", "cancelled"]
    assert kept(child.id) is None
