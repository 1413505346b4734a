"""Real ``flask worker`` processes firing schedules: several at once, one job per slot and none
missed; a worker killed while it holds a schedule's row leaves the slots to another;
``--no-schedules`` opts a worker out. The slots are in the past (``missed="all"``, the row's
next run set back): the database's clock cannot be moved and no test waits for a minute."""

from __future__ import annotations

import signal
from datetime import datetime, timedelta

import psycopg
import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.flow.schedules import Declaration, run_key, sync
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from tests.support.waiting import wait_until

from . import schedules_many

pytestmark = pytest.mark.process

MINUTE = timedelta(minutes=1)


def declaration(name: str, payload: dict) -> Declaration:
    """What the worker declares for ``name`` (schedules_*.py, defaults from the settings)."""
    return Declaration(name, "* * * * *", "UTC", "sample.nothing", payload, "default", 50, 3, "all")


def rewind(names: list[str], minutes: int) -> datetime:
    """Set the schedules' next run ``minutes`` back from the current minute (database clock)."""
    with db.engine.begin() as conn:
        start = conn.execute(
            text("SELECT date_trunc('minute', statement_timestamp()) - make_interval(mins => :m)"),
            {"m": minutes},
        ).scalar_one()
        conn.execute(
            text("UPDATE jobs_schedule SET next_run_at = :start WHERE name = ANY(:names)"),
            {"start": start, "names": names},
        )
    return start


def runs_by_schedule() -> dict[str, list[tuple[str, str]]]:
    """Each schedule's runs: (key, the worker that created it), in key order."""
    with db.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT j.idempotency_key, e.data->>'schedule' AS schedule, e.data->>'worker_id' AS worker "
                "FROM jobs_job j JOIN jobs_jobevent e ON e.job_id = j.id AND e.type = 'created' "
                "WHERE j.idempotency_key LIKE 'schedule:%' ORDER BY j.idempotency_key"
            )
        ).all()
    found: dict[str, list[tuple[str, str]]] = {}
    for key, schedule, worker in rows:
        found.setdefault(schedule, []).append((key, worker))
    return found


def fired_counts() -> dict[str, tuple[int, datetime]]:
    with db.engine.connect() as conn:
        rows = conn.execute(text("SELECT name, fired_count, next_run_at FROM jobs_schedule")).all()
    return {name: (count, next_run_at) for name, count, next_run_at in rows}


def test_several_workers_fire_every_missed_slot_once_and_miss_none(app, start_worker):
    names = [f"many-{n:02d}" for n in range(schedules_many.COUNT)]
    sync([declaration(name, {"n": n}) for n, name in enumerate(names)])
    env = {"JOB_HANDLER_MODULES": "tests.runtime.schedules_many", "JOB_WORKER_THREADS": "1"}
    workers = [start_worker(**env) for _ in range(3)]
    for worker in workers:
        worker.wait_for_output("started ")
    start = rewind(names, 30)  # 30 passed slots each, and the current minute's
    wait_until(
        lambda: all(next_run > start + 30 * MINUTE for _count, next_run in fired_counts().values()),
        30,
        "every schedule fired up to now",
    )
    runs = runs_by_schedule()
    counts = fired_counts()
    for name in names:
        keys = [key for key, _worker in runs[name]]
        last = counts[name][1] - MINUTE  # the newest slot fired
        expected = []
        slot = start
        while slot <= last:
            expected.append(run_key(name, slot))
            slot += MINUTE
        assert keys == expected, name  # one job per slot, in order, none missed
        assert counts[name][0] == len(expected)  # each created once
    pids = {worker.proc.pid for worker in workers}
    firing = {int(w.split(":")[1]) for name in names for _key, w in runs[name]}
    assert firing <= pids


def test_a_worker_killed_while_it_holds_the_row_leaves_the_slots_to_another(app, start_worker, libpq_url):
    sync([declaration("one", {})])
    start = rewind(["one"], 3)
    # An uncommitted job holding the oldest slot's key: the worker's insert of that run waits
    # for it, inside the transaction that locked the schedule's row.
    blocker = psycopg.connect(libpq_url)
    try:
        blocker.execute(
            "INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts, "
            "max_attempts, idempotency_key, last_error, created_at, updated_at) VALUES "
            "(gen_random_uuid(), 'sample.nothing', '{}', 'queued', 50, now(), 0, 3, %s, '', now(), now())",
            (run_key("one", start),),
        )
        env = {"JOB_HANDLER_MODULES": "tests.runtime.schedules_one", "JOB_WORKER_THREADS": "1"}
        first = start_worker(**env)

        def waiting_insert() -> list:
            with db.engine.connect() as conn:
                return conn.execute(
                    text(
                        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND query LIKE '%INSERT INTO jobs_job%'"
                    )
                ).all()

        wait_until(waiting_insert, 30, "the first worker's fire to wait, holding the row")
        # the row is locked: NOWAIT fails
        with db.engine.connect() as conn, pytest.raises(Exception, match="could not obtain lock"):
            conn.execute(text("SELECT 1 FROM jobs_schedule WHERE name = 'one' FOR UPDATE NOWAIT"))
        first.send(signal.SIGKILL)
        first.wait()
    finally:
        blocker.rollback()
        blocker.close()
    assert runs_by_schedule() == {}  # the killed fire committed nothing
    second = start_worker(**env)
    wait_until(lambda: fired_counts()["one"][1] > start + 3 * MINUTE, 30, "the second worker to fire")
    keys = [key for key, _worker in runs_by_schedule()["one"]]
    last = fired_counts()["one"][1] - MINUTE
    assert keys[0] == run_key("one", start)  # the slot the killed worker held
    assert len(keys) == int((last - start) / MINUTE) + 1 == len(set(keys))
    assert {int(w.split(":")[1]) for _key, w in runs_by_schedule()["one"]} == {second.proc.pid}


def test_a_worker_with_no_schedules_neither_syncs_nor_fires(app, start_worker):
    # Rows that differ from what the module declares: a sync would rewrite the payload of
    # "one" (the module's is {}) and retire "other" (the module does not declare it).
    sync([declaration("one", {"from": "test"}), declaration("other", {})])
    start = rewind(["one"], 3)
    job = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0})).job
    worker = start_worker("--no-schedules", JOB_HANDLER_MODULES="tests.runtime.schedules_one")
    wait_until(lambda: read_jobs.get_job(job.id).status == "succeeded", 30, "the worker to run a job")
    assert "JOB_WORKER_SCHEDULES=False" in worker.output
    assert runs_by_schedule() == {}
    assert fired_counts()["one"] == (0, start)
    with db.engine.connect() as conn:
        rows = dict(
            conn.execute(text("SELECT name, payload FROM jobs_schedule WHERE retired_at IS NULL")).all()
        )
    assert rows == {"one": {"from": "test"}, "other": {}}  # not synced: as the test wrote them


def test_a_bad_schedule_stops_the_worker_start_naming_it(app, start_worker):
    worker = start_worker(JOB_HANDLER_MODULES="tests.runtime.schedules_bad")
    assert worker.wait() != 0
    assert "schedule 'broken': cron:" in worker.output
    assert "started " not in worker.output  # the worker never reached its threads
