"""What each worker thread is doing, from the heartbeat: busy and stuck threads, gone workers
and their removal, the owner of a running job, and "why is it not running" counting stuck
threads as busy."""

from __future__ import annotations

import threading
from datetime import timedelta

from dashboard.config import WorkerSettings
from dashboard.runtime.attempts import RunningAttempts
from dashboard.runtime.handlers import JobContext
from dashboard.runtime.heartbeat import activity
from dashboard.store import audit, values, workers
from dashboard.store.reads import capacity, why
from tests.support.factories import make_job, record

NOW = values.utcnow()


def _identity(pid: int, threads: int = 2, types: tuple[str, ...] = ("demo.timeout", "demo.success")):
    return workers.Identity(f"h:{pid}:x", "h", pid, NOW, "one-job", threads, "1", 5.0, types)


def _thread(name: str, job_id: str, lease_until, since=None) -> dict:
    since = since or NOW - timedelta(seconds=75)
    return {
        "thread": name,
        "job_id": job_id,
        "type": "demo.timeout",
        "attempt": 1,
        "since": since.isoformat(),
        "lease_until": lease_until.isoformat(),
    }


def test_the_heartbeat_reports_each_thread_from_the_running_attempts_not_the_database():
    """A thread in a hung handler is busy whatever the database says about its job."""
    settings = WorkerSettings(threads=3)
    attempts = RunningAttempts()
    job = record("running", locked_by="h:1:thread-2:aa", locked_until=NOW - timedelta(seconds=40))
    ctx = JobContext(job, worker_id="h:1:thread-2:aa", lease_seconds=30, stopping=threading.Event())
    with attempts.running(ctx, "h:1:thread-2:aa"):
        doing = activity(settings, attempts)
    assert [t["thread"] for t in doing["threads"]] == ["thread-1", "thread-2", "thread-3"]
    busy = doing["threads"][1]
    assert (busy["job_id"], busy["attempt"], busy["lease_until"]) == (
        str(job.id),
        1,
        job.locked_until.isoformat(),
    )
    assert busy["past_lease"] is True  # by the worker's own clock: lost, still in its handler
    assert "job_id" not in doing["threads"][0]
    assert doing["cleanup_interval_seconds"] == settings.cleanup_interval_seconds


def test_busy_and_stuck_threads_come_from_the_heartbeat(app):
    past, ahead = NOW - timedelta(seconds=45), NOW + timedelta(seconds=20)
    doing = {"threads": [_thread("thread-1", "a" * 8, past), _thread("thread-2", "b" * 8, ahead)]}
    workers.beat(_identity(11), jobs_done=0, now=NOW, activity=doing)
    (view,) = workers.board(NOW).workers
    assert view.busy == 2 and [t.thread for t in view.stuck] == ["thread-1"]
    assert workers.board(NOW).stuck_threads == 1
    live = capacity.capacity(NOW, "demo.timeout")
    assert (live.alive, live.threads, live.busy, live.stuck) == (1, 2, 2, 1)
    idle = {"threads": [{"thread": "thread-1"}, {"thread": "thread-2"}]}
    workers.beat(_identity(11), jobs_done=0, now=NOW, activity=idle)
    assert workers.board(NOW).workers[0].busy == 0  # from the threads, not the jobs it holds


def test_why_counts_stuck_threads_as_busy_and_says_so(app):
    doing = {
        "threads": [
            _thread("thread-1", "a" * 8, NOW - timedelta(seconds=45)),
            _thread("thread-2", "b" * 8, NOW - timedelta(seconds=45)),
        ]
    }
    workers.beat(_identity(12), jobs_done=0, now=NOW, activity=doing)
    job = make_job("queued", type="demo.success", now=NOW - timedelta(seconds=5))
    (reason,) = why.why_not_running(job, NOW)
    assert reason.kind == "waiting"
    assert (reason.values["threads"], reason.values["busy"], reason.values["stuck"]) == (2, 2, 2)


def test_states_go_stale_then_gone_and_sort_alive_stale_gone_stopped(app):
    for pid, seen in ((1, NOW - timedelta(hours=2)), (2, NOW), (3, NOW - timedelta(seconds=60))):
        workers.beat(_identity(pid), jobs_done=0, now=seen)
    workers.beat(_identity(4), jobs_done=0, now=NOW)
    workers.mark_stopped(_identity(4), jobs_done=0, now=NOW)
    board = workers.board(NOW)
    assert [(w.pid, w.state) for w in board.workers] == [
        (2, "alive"),
        (3, "stale"),
        (1, "gone"),
        (4, "stopped"),
    ]
    assert workers.state_of(NOW - workers.GONE_AFTER, None, 5.0, NOW) == "stale"  # the boundary
    assert workers.state_of(NOW - workers.GONE_AFTER - timedelta(seconds=1), None, 5.0, NOW) == "gone"
    assert [w.removable for w in board.workers] == [False, False, True, True]


def test_only_a_gone_or_stopped_row_is_removed_and_the_audit_log_says_who(app):
    workers.beat(_identity(1), jobs_done=0, now=NOW - timedelta(hours=2))
    workers.beat(_identity(2), jobs_done=0, now=NOW - timedelta(seconds=60))  # stale: may come back
    actor = {"actor": "olga", "role": "operator"}
    assert workers.remove("h:2:x", event_data=actor, now=NOW) is False
    assert workers.remove("no-such", event_data=actor, now=NOW) is False
    assert workers.remove("h:1:x", event_data=actor, now=NOW) is True
    assert [w.pid for w in workers.board(NOW).workers] == [2]
    (entry,) = audit.page().entries
    assert (entry.action, entry.actor, entry.worker_id, entry.data["pid"]) == (
        "worker_removed",
        "olga",
        "h:1:x",
        1,
    )


def test_the_owner_of_a_running_job_and_when_it_is_recovered(app):
    lease_end = NOW + timedelta(seconds=8)
    workers.beat(_identity(7), jobs_done=0, now=NOW - timedelta(seconds=20))  # killed 20 s ago
    rescuer = {"threads": [], "cleanup_interval_seconds": 0.5}
    workers.beat(_identity(8), jobs_done=0, now=NOW, activity=rescuer)  # another, alive
    owner = capacity.owner_of("h:7:thread-1:aa", lease_end, "job", NOW)
    assert (owner.state, owner.last_seen, owner.live_workers) == ("stale", NOW - timedelta(seconds=20), 1)
    assert owner.recover_at == lease_end + timedelta(seconds=0.5)
    unknown = capacity.owner_of("elsewhere:99:thread-1:aa", lease_end, "job", NOW)
    assert unknown.state == "unknown" and unknown.recover_at is not None
    stuck = {"threads": [_thread("thread-1", "job", NOW - timedelta(seconds=3))]}
    workers.beat(_identity(7), jobs_done=0, now=NOW, activity=stuck)
    alive = capacity.owner_of("h:7:thread-1:aa", NOW - timedelta(seconds=3), "job", NOW)
    assert alive.state == "alive" and alive.thread is not None and alive.thread.past_lease


def test_malformed_activity_is_left_out(app):
    odd = {
        "threads": [{"thread": 5}, "x", {"thread": "thread-1", "lease_until": "not a time", "job_id": "j"}]
    }
    (view,) = workers.thread_views(odd, NOW)
    assert view.thread == "thread-1" and view.busy and not view.past_lease
    assert workers.thread_views(None, NOW) == [] and workers.thread_views({"threads": 3}, NOW) == []
