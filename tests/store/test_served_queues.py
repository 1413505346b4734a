"""Which queues the live workers serve, from their heartbeats: why a queued job waits, and the
banner's reading. A queue no live worker serves is named; a paused, full or rate-limited queue
is the only reason given; the banner leaves the paused queues' ready jobs out."""

from __future__ import annotations

from datetime import timedelta

from dashboard.store import lifecycle, values, workers
from dashboard.store.flow import queues
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import capacity, why
from dashboard.store.reads import health as read_health
from tests.support.factories import make_job

NOW = values.utcnow()
IDLE = {"threads": [{"thread": "thread-1"}, {"thread": "thread-2"}]}
WORKER = "h:1:thread-1:a"


def _identity(pid: int, queues: tuple[str, ...] | None, types: tuple[str, ...] = ("demo.success",)):
    return workers.Identity(f"h:{pid}:x", "h", pid, NOW, "one-job", 2, "1", 5.0, types, queues)


def _alive(pid: int, queues: tuple[str, ...] | None, types: tuple[str, ...] = ("demo.success",)) -> None:
    workers.beat(_identity(pid, queues, types), jobs_done=0, now=NOW, activity=IDLE)


def _kinds(job) -> list[str]:
    return [reason.kind for reason in why.why_not_running(job, NOW)]


def test_the_heartbeat_records_the_queues_and_capacity_says_which_are_served(app):
    _alive(1, ("mail", "reports"))
    (row,) = workers.board(NOW).workers
    assert row.queues == ["mail", "reports"]
    live = capacity.capacity(NOW)
    assert live.serves("mail") and not live.serves("default") and live.served == ["mail", "reports"]
    _alive(2, None)  # no --queues: every queue, one that appears later included
    live = capacity.capacity(NOW)
    assert live.serves("default") and live.serves("any.later") and live.served is None


def test_a_job_in_a_queue_no_live_worker_serves_says_so_not_waiting(app):
    _alive(1, ("mail",))
    job = make_job("queued", now=NOW - timedelta(seconds=5))  # default
    (reason,) = why.why_not_running(job, NOW)
    assert reason.kind == "no_queue_worker"
    assert reason.values == {"queue": "default", "served": ["mail"], "alive": 1}
    mail = make_job("queued", queue="mail", now=NOW - timedelta(seconds=5))
    assert _kinds(mail) == ["waiting"]
    _alive(2, ("default",), types=("other.type",))  # serves it, with no handler for its type
    assert _kinds(job) == ["no_handler"]
    assert why.why_not_running(job, NOW)[0].values["types"] == ["other.type"]  # of those serving it


def test_a_paused_full_or_rate_limited_queue_is_the_only_reason_given(app):
    _alive(1, None)
    paused = make_job("queued", queue="p", now=NOW - timedelta(seconds=5))
    queues.pause("p", actor="olga")
    assert _kinds(paused) == ["paused"]
    queues.set_limits("p", concurrency_limit=1)  # a paused queue is paused, whatever its limits
    assert _kinds(paused) == ["paused"]
    later = make_job("queued", queue="p", available_at=NOW + timedelta(hours=1))
    assert _kinds(later) == ["scheduled", "paused"]  # its own time, then its queue

    queues.set_limits("full", concurrency_limit=1)
    enqueue.create_job(enqueue.JobSpec("demo.success", queue="full"), now=NOW - timedelta(seconds=9))
    full = enqueue.create_job(
        enqueue.JobSpec("demo.success", queue="full"), now=NOW - timedelta(seconds=5)
    ).job
    assert len(lifecycle.claim_jobs(WORKER, lease_seconds=30, limit=2, queues=["full"], now=NOW)) == 1
    assert _kinds(full) == ["queue_full"]

    queues.set_limits("rated", rate_limit={"count": 1, "period_seconds": 3600})
    enqueue.create_job(enqueue.JobSpec("demo.success", queue="rated"), now=NOW - timedelta(seconds=9))
    rated = enqueue.create_job(
        enqueue.JobSpec("demo.success", queue="rated"), now=NOW - timedelta(seconds=5)
    ).job
    assert len(lifecycle.claim_jobs(WORKER, lease_seconds=30, limit=2, queues=["rated"], now=NOW)) == 1
    assert _kinds(rated) == ["rate_limited"]

    workers.mark_stopped(_identity(1, None), jobs_done=0, now=NOW)
    assert _kinds(paused) == ["paused"]  # not "no live worker" beside it either


def test_the_banner_leaves_paused_queues_out_and_names_a_queue_nobody_serves(app):
    make_job("queued", type="mail.send", queue="mail", now=NOW - timedelta(seconds=5))
    queues.pause("mail", actor="olga")
    assert read_health.unserved(NOW) is None  # no worker, but the only ready work is paused
    make_job("queued", type="report.build", queue="reports", now=NOW - timedelta(seconds=5))
    alarm = read_health.unserved(NOW)
    assert alarm is not None and alarm.kind == "no_worker"
    assert alarm.types == ["report.build"] and alarm.queues == ["reports"]  # mail.send is paused
    _alive(1, ("mail",), types=("mail.send", "report.build"))
    alarm = read_health.unserved(NOW)
    assert alarm is not None and alarm.kind == "no_queue_worker"
    assert (alarm.queues, alarm.served, alarm.types) == (["reports"], ["mail"], [])
    _alive(2, ("reports",), types=("report.build",))
    assert read_health.unserved(NOW) is None
    queues.resume("mail", actor="olga")
    alarm = read_health.unserved(NOW)  # mail.send is ready again: the mail worker runs it
    assert alarm is None
