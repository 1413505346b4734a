"""Firing schedules in the store: one job per slot, missed runs by policy, daylight saving,
retirement, pause and run now. The clock moves by ``now=``; nothing waits for a minute."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.flow import schedules
from dashboard.store.flow.schedules import Declaration, fire_due, run_key, sync
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists as find_jobs
from dashboard.store.reads import schedules as read_schedules
from dashboard.store.reads import search
from tests.support.factories import insert_series, seed_analysed_backlog
from tests.support.waiting import wait_until

T0 = datetime(2026, 6, 1, 12, 0, 30, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def every_minute(name: str = "tick", missed: str = "latest", **changes) -> Declaration:
    fields = dict(
        name=name,
        cron="* * * * *",
        timezone="UTC",
        job_type="demo.success",
        payload={"sleep_seconds": 0},
        queue="default",
        priority=50,
        max_attempts=3,
        missed=missed,
    )
    return Declaration(**{**fields, **changes})


def schedule_jobs(name: str) -> list:
    with db.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT * FROM jobs_job WHERE idempotency_key LIKE :p ORDER BY idempotency_key"),
            {"p": f"schedule:{name}:%"},
        ).mappings()
        return list(rows)


def row(name: str) -> read_schedules.ScheduleRow:
    found = read_schedules.get_schedule(name)
    assert found is not None
    return found


def test_a_new_schedule_starts_at_its_first_slot_after_now_and_fires_it_once(app):
    sync([every_minute()], now=T0)
    assert row("tick").next_run_at == datetime(2026, 6, 1, 12, 1, tzinfo=UTC)
    assert fire_due(now=T0) == []  # not due yet
    slot = datetime(2026, 6, 1, 12, 1, tzinfo=UTC)
    fired = fire_due(now=slot + timedelta(seconds=2), worker_id="w1")
    assert [(f.name, [r.slot for r in f.runs]) for f in fired] == [("tick", [slot])]
    assert fire_due(now=slot + timedelta(seconds=3)) == []  # advanced: the same slot is not fired again
    jobs = schedule_jobs("tick")
    assert [j["idempotency_key"] for j in jobs] == ["schedule:tick:2026-06-01T12:01:00Z"]
    job = jobs[0]
    assert (job["type"], job["payload"], job["status"], job["max_attempts"]) == (
        "demo.success",
        {"sleep_seconds": 0},
        "queued",
        3,
    )
    [created] = read_jobs.job_events(job["id"])
    assert created.type == "created"
    assert created.data["schedule"] == "tick" and created.data["slot"] == "2026-06-01T12:01:00Z"
    state = row("tick")
    assert state.next_run_at == slot + MINUTE and state.last_run_at == slot
    assert state.last_job_id == job["id"] and state.last_job_status == "queued"
    assert (state.fired_count, state.skipped_count) == (1, 0)


def test_missed_latest_enqueues_only_the_newest_slot_and_counts_the_rest(app):
    sync([every_minute()], now=T0)
    fired = fire_due(now=T0 + 10 * MINUTE)  # slots 12:01 .. 12:10 passed
    assert [r.slot for r in fired[0].runs] == [datetime(2026, 6, 1, 12, 10, tzinfo=UTC)]
    assert fired[0].skipped == 9
    state = row("tick")
    assert state.next_run_at == datetime(2026, 6, 1, 12, 11, tzinfo=UTC)
    assert (state.fired_count, state.skipped_count) == (1, 9)
    assert len(schedule_jobs("tick")) == 1


def test_missed_all_enqueues_each_slot_at_most_a_hundred(app):
    sync([every_minute(missed="all")], now=T0)
    fire_due(now=T0 + 10 * MINUTE)
    keys = [j["idempotency_key"] for j in schedule_jobs("tick")]
    assert keys == [f"schedule:tick:2026-06-01T12:{m:02d}:00Z" for m in range(1, 11)]
    sync([every_minute(missed="all")], now=T0 + 10 * MINUTE)  # a restart keeps next_run_at
    fired = fire_due(now=T0 + 10 * MINUTE + 150 * MINUTE)  # 150 more slots passed
    assert len(fired[0].runs) == 100 and fired[0].skipped == 50
    assert fired[0].runs[0].slot == datetime(2026, 6, 1, 13, 1, tzinfo=UTC)  # the newest 100
    assert len(schedule_jobs("tick")) == 110


def test_a_slot_whose_run_exists_is_not_enqueued_again(app):
    sync([every_minute()], now=T0)
    slot = datetime(2026, 6, 1, 12, 1, tzinfo=UTC)
    existing = enqueue.create_job(
        enqueue.JobSpec("demo.success", {}, idempotency_key=run_key("tick", slot)), now=T0
    ).job
    fired = fire_due(now=slot)
    assert [(r.job_id, r.created) for r in fired[0].runs] == [(existing.id, False)]
    assert len(schedule_jobs("tick")) == 1
    assert row("tick").next_run_at == slot + MINUTE and row("tick").fired_count == 0


@pytest.mark.parametrize(
    ("day", "slot"),
    [
        (datetime(2026, 3, 28, 22, 0, tzinfo=UTC), datetime(2026, 3, 29, 1, 0, tzinfo=UTC)),  # 03:00 CEST
        (datetime(2026, 10, 24, 21, 0, tzinfo=UTC), datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),  # 02:30 CEST
    ],
    ids=["spring forward", "fall back"],
)
def test_berlin_half_past_two_fires_once_on_both_change_days(app, day, slot):
    """The clock walks the change day in five-minute steps, a fire at each: one run."""
    nightly = every_minute("nightly", cron="30 2 * * *", timezone="Europe/Berlin")
    sync([nightly], now=day)
    now = day
    while now < day + timedelta(hours=26):
        fire_due(now=now)
        now += timedelta(minutes=5)
    keys = [j["idempotency_key"] for j in schedule_jobs("nightly")]
    assert keys[0] == run_key("nightly", slot)
    assert len([k for k in keys if k <= run_key("nightly", slot + timedelta(hours=12))]) == 1


def test_a_schedule_no_longer_declared_is_retired_keeps_its_runs_and_comes_back_fresh(app):
    sync([every_minute("a"), every_minute("b")], now=T0)
    fire_due(now=T0 + MINUTE)
    result = sync([every_minute("a")], now=T0 + MINUTE)
    assert result.retired == ["b"]
    assert row("b").retired and row("b").state == "retired"
    assert len(schedule_jobs("b")) == 1  # its history stays
    fired = fire_due(now=T0 + 5 * MINUTE)
    assert [f.name for f in fired] == ["a"]  # a retired schedule does not fire
    sync([every_minute("a"), every_minute("b")], now=T0 + 5 * MINUTE)
    assert not row("b").retired
    assert row("b").next_run_at == datetime(2026, 6, 1, 12, 6, tzinfo=UTC)  # from now, not the retired time


def test_a_changed_expression_starts_from_now_and_an_unchanged_one_keeps_its_missed_slots(app):
    sync([every_minute()], now=T0)
    sync([every_minute(payload={"v": 2})], now=T0 + 10 * MINUTE)
    assert row("tick").next_run_at == datetime(2026, 6, 1, 12, 1, tzinfo=UTC)  # missed slots kept
    assert row("tick").payload == {"v": 2}
    sync([every_minute(cron="0 * * * *")], now=T0 + 10 * MINUTE)
    assert row("tick").next_run_at == datetime(2026, 6, 1, 13, 0, tzinfo=UTC)


def test_a_bad_expression_is_refused_by_sync_naming_the_schedule_and_writes_nothing(app):
    with pytest.raises(ValueError, match=r"schedule 'broken'.*Bad minute"):
        sync([every_minute(), every_minute("broken", cron="99 * * * *")], now=T0)
    assert read_schedules.list_schedules() == []


def test_pause_stops_firing_and_resume_starts_from_the_next_slot(app):
    sync([every_minute()], now=T0)
    assert schedules.set_paused("tick", True, actor="olga", now=T0)
    assert fire_due(now=T0 + 10 * MINUTE) == []
    paused = row("tick")
    assert paused.paused and paused.paused_by == "olga" and paused.state == "paused"
    assert schedules.set_paused("tick", False, actor="olga", now=T0 + 10 * MINUTE)
    # the slots that passed while paused are not fired
    assert row("tick").next_run_at == datetime(2026, 6, 1, 12, 11, tzinfo=UTC)
    assert not schedules.set_paused("nope", True, actor="olga")


def test_run_now_enqueues_a_job_linked_to_its_schedule_outside_the_slots(app):
    sync([every_minute()], now=T0)
    job = schedules.run_now("tick", event_data={"actor": "olga"}, now=T0)
    assert job is not None and job.idempotency_key.startswith("schedule:tick:2026-06-01T12:00:30.")
    assert ":now:" in job.idempotency_key
    assert schedules.schedule_of_key(job.idempotency_key) == "tick"
    assert row("tick").next_run_at == datetime(2026, 6, 1, 12, 1, tzinfo=UTC)  # slots untouched
    assert schedules.run_now("nope") is None
    sync([], now=T0)
    with pytest.raises(schedules.ScheduleRetired):
        schedules.run_now("tick")


def test_the_runs_read_newest_first_by_key_prefix_with_no_other_schedule_mixed_in(app):
    sync([every_minute("tick", missed="all"), every_minute("tick2", missed="all")], now=T0)
    fire_due(now=T0 + 7 * MINUTE)
    schedules.run_now("tick", now=T0 + 7 * MINUTE)
    enqueue.create_job(
        enqueue.JobSpec("demo.success", {}, idempotency_key="schedule:tick"), now=T0
    )  # not a run
    found = read_schedules.get_schedule("tick", runs=5)
    assert found is not None
    keys = [r.idempotency_key for r in found.runs]
    assert keys[0].startswith("schedule:tick:2026-06-01T12:07:30.") and found.runs[0].run_now
    assert keys[1:] == [f"schedule:tick:2026-06-01T12:{m:02d}:00Z" for m in (7, 6, 5, 4)]
    assert len(found.upcoming) == 5 and found.upcoming[0] == datetime(2026, 6, 1, 12, 8, tzinfo=UTC)


def test_the_runs_read_and_the_search_are_one_index_range_per_schedule(app):
    """job_schedule_key_idx serves the prefix range whatever the database's collation: planned
    on an analysed backlog of 20,000 jobs with a schedule's runs among them (rolled back)."""
    statement = read_schedules.RUNS
    explain = text("EXPLAIN " + statement.text).bindparams(*statement._bindparams.values())
    terms = search.parse_q("schedule:tick")
    arm = find_jobs.matching(terms, [], status=None, types=None)
    with db.engine.connect() as conn, conn.begin() as transaction:
        seed_analysed_backlog(conn, T0)
        insert_series(conn, 200, key="'schedule:tick:' || g", at=":t", params={"t": T0})
        conn.exec_driver_sql("ANALYZE jobs_job")
        plan = "\n".join(r[0] for r in conn.execute(explain, {"names": ["tick"], "limit": 5}))
        searched = "\n".join(
            r[0]
            for r in conn.execute(text("EXPLAIN " + str(arm.compile(compile_kwargs={"literal_binds": True}))))
        )
        transaction.rollback()
    assert "job_schedule_key_idx" in plan and "Sort" not in plan, plan
    assert "job_schedule_key_idx" in searched and "Seq Scan" not in searched, searched


def test_a_schedule_locked_by_another_fire_is_skipped_not_waited_for(app, libpq_url):
    sync([every_minute()], now=T0)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(libpq_url) as conn:
            conn.execute("SELECT 1 FROM jobs_schedule WHERE name = 'tick' FOR UPDATE")
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        wait_until(holding.is_set, timeout=10)
        assert fire_due(now=T0 + MINUTE) == []  # SKIP LOCKED: returns at once
    finally:
        release.set()
        holder.join()
    assert [f.name for f in fire_due(now=T0 + MINUTE)] == ["tick"]


def test_a_fire_that_fails_before_commit_leaves_no_run_and_the_slot_due(app, monkeypatch):
    sync([every_minute()], now=T0)
    calls = []
    original = schedules._fire_one

    def fire_then_fail(conn, row_, worker_id):
        calls.append(original(conn, row_, worker_id))
        raise RuntimeError("killed mid-tick")

    monkeypatch.setattr(schedules, "_fire_one", fire_then_fail)
    with pytest.raises(RuntimeError):
        fire_due(now=T0 + MINUTE)
    assert calls and calls[0].runs  # the run was created inside the transaction ...
    assert schedule_jobs("tick") == []  # ... and rolled back with it
    monkeypatch.undo()
    assert row("tick").next_run_at == datetime(2026, 6, 1, 12, 1, tzinfo=UTC)
    assert [len(f.runs) for f in fire_due(now=T0 + MINUTE)] == [1]


def test_a_schedule_with_more_runs_than_the_search_cap_is_searched_newest_first(app):
    """``schedule:tick`` past ``ARM_CAP`` runs keeps the newest slots (a backward range of
    job_schedule_key_idx), so its first page is the latest runs, not the first ones."""
    over = find_jobs.ARM_CAP + 500
    with db.engine.begin() as conn:
        key = """'schedule:tick:' || to_char(t.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')"""
        insert_series(conn, over, key=key, at=":t + make_interval(mins => g)", params={"t": T0})
    page = find_jobs.search_jobs(search.parse_q("schedule:tick"), limit=2, offset=0)
    newest = T0 + timedelta(minutes=over)
    assert [job.idempotency_key for job in page.results] == [
        run_key("tick", newest),
        run_key("tick", newest - timedelta(minutes=1)),
    ]
    assert page.count == find_jobs.ARM_CAP and not page.count_exact
