"""The worker's named parts, in-process: one list of services started and stopped by the
``Worker``, one runner per thread, and the success-recording strategies (completers)."""

from __future__ import annotations

import dataclasses
import queue
import socket
import threading
import urllib.request
from typing import Any

import psycopg
from sqlalchemy import text

from dashboard.config import WorkerSettings, settings_of
from dashboard.extensions import db
from dashboard.runtime.completers import BatchCompleter, CarryingCompleter, InlineCompleter
from dashboard.runtime.handlers import JobContext
from dashboard.runtime.runner import End, Runner
from dashboard.runtime.threads import ThreadRuntime
from dashboard.runtime.worker import Worker
from dashboard.store import lifecycle
from dashboard.store.lifecycle import claim_form
from dashboard.store.lifecycle import create as enqueue
from tests.support.worker_loop import SETTINGS, event_types, events, job, one_job_loop, wait_until

SERVICE_THREADS = ("progress-flusher", "listener", "thread-0", "scheduler", "retention", "heartbeat")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def alive(names: tuple[str, ...]) -> set[str]:
    return {t.name for t in threading.enumerate() if t.name in names and t.is_alive()}


def heartbeat_rows(app: Any) -> list[dict[str, Any]]:
    with app.app_context(), db.engine.connect() as conn:
        return [dict(r) for r in conn.execute(text("SELECT * FROM jobs_worker")).mappings()]


def test_the_worker_starts_and_stops_every_service_in_one_place(app):
    """Flusher, metrics server, listener, rescuer, scheduler, pruner and heartbeat: one list, started
    before the claiming threads and stopped, the last first, once they are done."""
    wait_until(lambda: not alive(SERVICE_THREADS), 15, "services of earlier tests to end")
    port = free_port()
    settings = WorkerSettings(**{**SETTINGS.__dict__, "threads": 2, "heartbeat_seconds": 0.2})
    ops = dataclasses.replace(
        settings_of(app).ops, worker_metrics_port=port, retention_succeeded_days=7, retention_failed_days=30
    )
    worker = Worker(app, settings, ops=ops)
    assert [part.name for part in worker.services] == [
        "progress-flusher",
        "metrics",
        "listener",
        "rescuer",
        "scheduler",
        "retention",
        "heartbeat",
    ]
    created = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0})).job
    worker.start()
    try:
        assert alive(SERVICE_THREADS) == set(SERVICE_THREADS)
        wait_until(lambda: job(created.id).status == "succeeded", 15, "the job to run")
        wait_until(lambda: worker.listening(), 15, "the LISTEN connection")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            body = response.read().decode()
        assert "jobqueue_worker_threads 2.0" in body and "jobqueue_worker_listen_connected 1.0" in body
        assert wait_until(lambda: heartbeat_rows(app), 15, "a heartbeat")[0]["stopped_at"] is None
    finally:
        worker.stop()
        assert worker.join(timeout=30)
    wait_until(lambda: not alive(SERVICE_THREADS), 15, "every service thread to end")
    assert heartbeat_rows(app)[0]["stopped_at"] is not None  # the heartbeat's last act
    with socket.socket() as probe:  # the metrics endpoint is closed
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    worker.stop_services()  # a second stop does nothing


def test_each_thread_runs_its_attempts_with_one_runner_and_a_completer_of_its_mode(app):
    one_job = Worker(app, WorkerSettings(**{**SETTINGS.__dict__, "threads": 2}))
    assert all(isinstance(loop.runner.completer, CarryingCompleter) for loop in one_job.loops)
    batch = Worker(app, WorkerSettings(**{**SETTINGS.__dict__, "threads": 2, "batch_size": 4}))
    assert batch.completer is not None
    assert all(loop.runner.completer is batch.completer for loop in batch.loops)
    assert isinstance(batch.completer.runner.completer, InlineCompleter)  # its one-by-one fallback
    assert one_job.runners == [loop.runner for loop in one_job.loops]  # what hand_back reads


def test_a_worker_owns_the_claim_forms_its_claiming_threads_share(app):
    """Which form a claim takes is known per process: every thread that claims (the one-job
    loops, batch mode's dispatcher) reads and writes the worker's one ClaimForms, not the
    store's default one."""
    one_job = Worker(app, WorkerSettings(**{**SETTINGS.__dict__, "threads": 2}))
    assert isinstance(one_job.claim_forms, claim_form.ClaimForms)
    assert one_job.claim_forms is not claim_form.DEFAULT
    assert all(loop.runtime.claim_forms is one_job.claim_forms for loop in one_job.loops)
    batch = Worker(app, WorkerSettings(**{**SETTINGS.__dict__, "threads": 2, "batch_size": 4}))
    assert batch.dispatcher is not None and batch.dispatcher.runtime.claim_forms is batch.claim_forms
    assert batch.claim_forms is not one_job.claim_forms


def test_an_attempts_end_is_an_enum_the_metrics_count_by_its_value(app):
    def boom(ctx: JobContext) -> None:
        raise RuntimeError("boom")

    failing = enqueue.create_job(enqueue.JobSpec("test.boom", max_attempts=2)).job
    loop = one_job_loop(app, SETTINGS, "testhost:1:thread-1:e0de0001", lookup={"test.boom": boom}.get)
    claimed = loop.claim()
    assert [c.id for c in claimed] == [failing.id]
    retried = loop.runner.run(claimed[0])
    assert retried is not None and retried.end is End.RETRIED and retried.error == "RuntimeError: boom"
    assert End.RETRIED == "retried" and {end.value for end in End} == {
        "succeeded",
        "retried",
        "failed",
        "snoozed",
        "lost",
        "abandoned",
    }


def test_the_batch_completer_records_many_successes_in_one_statement_and_hands_the_lanes_back(
    app, database_url
):
    first, second = (enqueue.create_job(enqueue.JobSpec("test.batch")).job for _ in range(2))
    lanes = ["testhost:1:thread-9:aaaa0001", "testhost:1:thread-10:aaaa0002"]
    claimed = lifecycle.claim_batch(lanes, lease_seconds=30)
    assert {c.id for c in claimed} == {first.id, second.id}
    wants: queue.SimpleQueue[str] = queue.SimpleQueue()
    own = ThreadRuntime(app, SETTINGS, "testhost:1:thread-4:cccc0001", threading.Event())
    completer = BatchCompleter(Runner(own, InlineCompleter()), executors=1, lanes=wants)
    thread = ThreadRuntime(app, SETTINGS, "testhost:1:thread-1:eeee0001", threading.Event())
    executor = Runner(thread, completer)
    with app.app_context():
        for job_record in claimed:
            ctx = JobContext(job_record, worker_id=job_record.locked_by or "", lease_seconds=30)
            assert completer.complete(executor, ctx, {"n": str(job_record.id)}, 0.0) is None  # queued
    assert wants.empty()  # no lane back before its outcome is written
    completer.executor_done()
    completer.run()  # records what is queued, then ends: the last executor is done
    assert sorted(wants.get_nowait() for _ in range(2)) == sorted(lanes)
    for created in (first, second):
        assert job(created.id).status == "succeeded" and event_types(created.id)[-1] == "succeeded"
    written = {events(c.id)[-1].id for c in (first, second)}
    url = database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as conn:
        xmins = conn.execute(
            "SELECT DISTINCT xmin::text FROM jobs_jobevent WHERE id = ANY(%s)", (list(written),)
        ).fetchall()
    assert len(xmins) == 1  # one statement, one transaction, for both


def test_a_carried_claim_waits_in_its_completer_until_the_loop_takes_it(app):
    first = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0}, priority=90)).job
    second = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0}, priority=10)).job
    loop = one_job_loop(app, SETTINGS, "testhost:1:thread-1:ca551ed0")
    with app.app_context(), loop.runtime.holding_connection():
        outcome = loop.runner.run(loop.claim()[0])  # inside the loop's life: settle and claim
        assert outcome is not None and outcome.end is End.SUCCEEDED and outcome.job_id == first.id
        carried = loop.carry.carried
        assert carried is not None and carried.id == second.id
        assert loop.carry.take() is carried and loop.carry.take() is None
    assert job(second.id).status == "running" and job(second.id).locked_by == loop.worker_id


def test_a_listen_connection_closed_while_the_worker_stops_is_no_warning(app, caplog):
    """At Ctrl-C the embedded database may stop with the worker: the LISTEN connection's end
    is then expected, logged at DEBUG, and the listener ends instead of polling for it."""
    from dashboard.runtime.wakeup import Doorbell, Listener

    stopping = threading.Event()
    listener = Listener(db.engine.url, Doorbell(), stopping)
    thread = threading.Thread(target=listener.run, daemon=True)
    caplog.set_level("DEBUG", logger="dashboard.runtime.wakeup")
    thread.start()
    wait_until(listener.connected.is_set, timeout=10)
    with db.engine.connect() as conn:
        stopping.set()  # then its connection ends under it, while it waits for notifications
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %'"
            )
        )
    thread.join(5)
    assert not thread.is_alive()
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "dashboard.runtime.wakeup"]
    assert not [m for level, m in said if level == "WARNING"], said


def test_a_ring_wakes_one_idle_loop_and_a_loop_woken_into_work_wakes_the_next():
    """The doorbell: one ring, one waiter woken (the others sleep on); ``pass_on`` wakes the
    next; ``ring_all`` (stopping, a listener back) wakes every one."""
    from dashboard.runtime.wakeup import Doorbell

    bell = Doorbell()
    woken: list[int] = []
    lock = threading.Lock()

    def idle(n: int) -> None:
        if bell.wait(bell.rings, 30):
            with lock:
                woken.append(n)

    def start(count: int) -> list[threading.Thread]:
        threads = [threading.Thread(target=idle, args=(n,), daemon=True) for n in range(count)]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(bell._cond._waiters) == count, timeout=10)  # type: ignore[attr-defined]
        return threads

    threads = start(4)
    bell.ring()
    wait_until(lambda: len(woken) == 1, timeout=10)
    assert len(bell._cond._waiters) == 3  # type: ignore[attr-defined]  # the others still wait
    bell.pass_on()
    wait_until(lambda: len(woken) == 2, timeout=10)
    assert len(bell._cond._waiters) == 2  # type: ignore[attr-defined]
    bell.ring_all()
    for thread in threads:
        thread.join(10)
    assert sorted(woken) == [0, 1, 2, 3]
