"""The overview's detailed figures: the queued split, the oldest ready wait, per-type rows,
the waits and run times the events record, and the index each figure reads."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store import lifecycle, values
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import overview as read_overview
from dashboard.store.reads import stats as read_stats
from dashboard.store.reads.overview import Capped
from tests.support.factories import make_job, seed_analysed_backlog


def test_queued_splits_into_ready_scheduled_and_retrying_and_the_wait_is_the_oldest_ready(app):
    now = values.utcnow()
    make_job("queued", now=now, available_at=now - timedelta(seconds=90))  # ready 90 s
    make_job("queued", now=now, available_at=now - timedelta(seconds=30), attempts=1)  # due retry: ready
    make_job("queued", now=now - timedelta(days=2), available_at=now + timedelta(hours=24))  # scheduled
    make_job("queued", now=now, available_at=now + timedelta(seconds=40), attempts=2, type="mail.send")
    make_job("running", now=now, type="mail.send")
    make_job("failed", now=now, type="mail.send", finished_at=now - timedelta(hours=1))
    make_job("failed", now=now, type="mail.send", finished_at=now - timedelta(hours=30))

    detail = read_overview.queue_detail(now)
    assert (detail.ready.value, detail.scheduled.value, detail.retrying.value) == (2, 1, 1)
    assert detail.running.value == 1 and detail.oldest_ready_wait_seconds == 90
    rows = {row.type: row for row in detail.types}
    assert rows["demo.success"].ready.value == 2 and rows["demo.success"].wait_seconds == 90
    assert rows["mail.send"].retrying.value == 1 and rows["mail.send"].running == 1
    assert rows["mail.send"].failed_24h.value == 1 and rows["mail.send"].wait_seconds is None


def test_a_capped_count_says_more_than():
    assert str(Capped(10, 10)) == "10" and Capped(10, 10).exact
    assert str(Capped(11, 10)) == "more than 10" and Capped(11, 10).as_dict() == {"count": 10, "exact": False}


def test_claims_record_the_wait_and_outcomes_the_run_time(app):
    now = values.utcnow()
    job = enqueue.create_job(enqueue.JobSpec("demo.success", {}, available_at=now - timedelta(seconds=2))).job
    claimed = lifecycle.claim_next_job("w1", lease_seconds=30, now=now + timedelta(seconds=1))
    assert claimed is not None and claimed.id == job.id
    lifecycle.complete_job(job.id, "w1", claimed.attempts, {"ok": True}, now=now + timedelta(seconds=4))
    events = {e.type: e for e in read_jobs.job_events(job.id)}
    assert events["claimed"].data["wait_ms"] >= 3000
    assert events["succeeded"].data == {"type": "demo.success", "run_ms": 3000}

    figures = read_overview.figures(now - timedelta(minutes=5), now + timedelta(minutes=5))
    minutes, runs = figures.minutes, figures.run_times
    assert sum(m.succeeded for m in minutes.items) == 1 and not minutes.sampled
    assert any(m.wait_p50_ms and m.wait_p50_ms >= 3000 for m in minutes.items)
    assert [(r.type, r.runs, r.p50_ms) for r in runs.items] == [("demo.success", 1, 3000)]
    assert not runs.sampled


def test_the_charts_read_at_most_the_newest_cap_claims_and_outcomes_and_say_so(app):
    """Three jobs run at t, t+1 min, t+2 min (2 chart events each: claimed, succeeded; their
    created events are not read). A cap of 3 reads only the newest: the last job's claim and
    success and the previous job's success, which stops the read inside minute t+1: that
    minute is left out rather than shown in part, and the figures say they were sampled."""
    start = values.utcnow().replace(second=0, microsecond=0) - timedelta(minutes=10)
    for i in range(3):
        at = start + timedelta(minutes=i)
        job = enqueue.create_job(enqueue.JobSpec("demo.success", {}), now=at).job
        claimed = lifecycle.claim_next_job("w1", lease_seconds=30, now=at + timedelta(seconds=1))
        assert claimed is not None and claimed.id == job.id
        lifecycle.complete_job(job.id, "w1", 1, {}, now=at + timedelta(seconds=3))
    since, until = start - timedelta(minutes=1), start + timedelta(minutes=5)

    whole = read_overview.figures(since, until)
    assert [m.succeeded for m in whole.minutes.items] == [1, 1, 1] and not whole.minutes.sampled
    assert whole.minutes.counted_from is None
    exactly = read_overview.figures(since, until, cap=6)  # exactly the cap: said too
    assert exactly.minutes.sampled and exactly.run_times.sampled
    assert not read_overview.figures(since, until, cap=7).minutes.sampled

    newest = read_overview.figures(since, until, cap=3)
    assert newest.minutes.sampled and newest.minutes.cap == 3
    assert newest.minutes.counted_from == start + timedelta(minutes=2)
    assert [(m.minute, m.succeeded, m.wait_p50_ms) for m in newest.minutes.items] == [
        (start + timedelta(minutes=2), 1, 1000.0)
    ]
    runs = newest.run_times
    assert runs.sampled and [(r.type, r.runs) for r in runs.items] == [("demo.success", 2)]
    nothing = read_overview.figures(since, until, cap=1)  # the newest event only: a success
    assert nothing.run_times.sampled and [r.runs for r in nothing.run_times.items] == [1]
    assert nothing.minutes.items == []  # its minute was not read whole


def test_the_chart_queries_stop_at_the_cap(app):
    """The hour's claims and outcomes are read once, through the created_at index (which holds
    only them: no type filter left to apply) under a Limit, never whole."""
    now = values.utcnow()
    since = now - timedelta(hours=1)
    params = {"since": since, "until": now, "minutes_since": since, "cap": 5, "types": 30}
    with db.engine.begin() as conn:
        plan = "\n".join(conn.execute(text("EXPLAIN " + str(read_overview.FIGURES_SQL)), params).scalars())
    limit, scan, cond, after = plan.split("CTE recent")[1].splitlines()[1:5]
    assert limit.strip().startswith("->  Limit"), plan
    assert "Index Scan Backward using jobs_jobevent_created_at_idx" in scan, plan
    assert "Index Cond" in cond and "Filter" not in after, plan
    assert plan.count("jobs_jobevent_created_at_idx") == 1 and plan.count("CTE recent") == 1, plan


BURST = 50_000


def _settle(at, *, fail: bool = False) -> None:
    job = enqueue.create_job(
        enqueue.JobSpec("demo.fail" if fail else "demo.success", {}, max_attempts=1), now=at
    ).job
    claimed = lifecycle.claim_next_job("w1", lease_seconds=30, now=at)
    assert claimed is not None and claimed.id == job.id
    if fail:
        lifecycle.fail_job(job.id, "w1", 1, "boom", backoff_base_seconds=1, backoff_max_seconds=1, now=at)
    else:
        lifecycle.complete_job(job.id, "w1", 1, {}, now=at)


# Finished jobs per minute of a window, from the table itself (every outcome here is final: no
# retries, nothing cancelled).
FINISHED_SQL = """
    SELECT date_trunc('minute', finished_at) AS minute,
           count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE status = 'failed') AS failed
    FROM jobs_job WHERE status IN ('succeeded', 'failed') AND finished_at >= :since AND finished_at < :until
    GROUP BY 1 ORDER BY 1
"""


def test_a_bulk_enqueue_leaves_the_charts_true(app):
    """50,000 jobs enqueued in one bulk create (50,000 `created` events at one instant, more
    than the charts read) between successes and failures of the same minute and the next:
    every minute's finished counts and failure rate are the table's, none read in part (the
    read of the newest events once found only the burst, or the minute's failure without its
    successes: a failure rate of 100 %)."""
    minute = values.utcnow().replace(second=0, microsecond=0) - timedelta(minutes=5)
    for second in (5, 10, 15):
        _settle(minute + timedelta(seconds=second))
    later = minute + timedelta(days=1)  # the burst waits: the claims below take the settled jobs
    enqueue.create_jobs(
        [enqueue.JobSpec("demo.success", available_at=later)] * BURST, now=minute + timedelta(seconds=20)
    )
    _settle(minute + timedelta(seconds=40), fail=True)
    _settle(minute + timedelta(minutes=1, seconds=5))
    _settle(minute + timedelta(minutes=1, seconds=6), fail=True)

    now = minute + timedelta(minutes=3)
    hour = read_overview.hour_figures(now)
    start, until = read_overview.hour_window(now)
    with db.engine.connect() as conn:
        table = [tuple(r) for r in conn.execute(text(FINISHED_SQL), {"since": start, "until": until})]
    assert table == [(minute, 3, 1), (minute + timedelta(minutes=1), 1, 1)]
    assert [(m.minute, m.succeeded, m.failed) for m in hour.minutes.items] == table
    assert [m.failure_rate for m in hour.minutes.items] == [0.25, 0.5]
    assert not hour.minutes.sampled and not hour.run_times.sampled
    assert {r.type: r.runs for r in hour.run_times.items} == {"demo.fail": 2, "demo.success": 4}


# Failed jobs of seven types, finished over the last two days, beside the backlog.
FAILED_ROWS_SQL = """
    INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                          max_attempts, last_error, created_at, updated_at, finished_at)
    SELECT gen_random_uuid(), 'demo.t' || (g % 7), '{}', 'failed', 0, :now, 3, 3, 'boom',
           :now, :now, CAST(:now AS timestamptz) - (g % 2880) * interval '1 minute'
    FROM generate_series(1, 5000) AS g
"""


def test_the_live_figures_read_the_queued_and_failed_indexes(app):
    """Planned on an analysed table (a backlog and failed jobs, rolled back): on statistics an
    earlier ANALYZE left behind (say, of a table of queued jobs only, now truncated), another
    index can win on a table this small."""
    now = values.utcnow()
    with db.engine.connect() as conn, conn.begin() as transaction:
        conn.execute(text(FAILED_ROWS_SQL), {"now": now})
        seed_analysed_backlog(conn, now)
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        params = {"now": now, "since": now - timedelta(hours=24), "cap": 11, "types": ["demo.t1", "demo.t2"]}
        plan = "\n".join(conn.execute(text("EXPLAIN " + str(read_overview.TYPE_ROWS_SQL)), params).scalars())
        transaction.rollback()
    assert "job_queued_type_idx" in plan, plan
    assert "job_failure_type_idx" in plan, plan  # failures of the last 24 h, cancels left out
    assert "Seq Scan" not in plan, plan


def test_the_latest_failures_read_the_failed_jobs_by_finish_time_not_the_events(app):
    """The newest failures are the last entries of job_finished_idx's failed range: no walk
    through the events written since the last failure (a healthy queue writes nothing but
    claims and successes), and a bounded one through cancels."""
    now = values.utcnow()
    with db.engine.connect() as conn, conn.begin() as transaction:
        conn.execute(text(FAILED_ROWS_SQL), {"now": now})
        seed_analysed_backlog(conn, now)
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        params = {"limit": 10, "scan": 1000, "preview": 10}
        explain = text("EXPLAIN " + str(read_stats.LATEST_FAILURES_SQL))
        plan = "\n".join(conn.execute(explain, params).scalars())
        transaction.rollback()
    assert "Index Scan Backward using job_finished_idx" in plan, plan
    assert "Sort" not in plan, plan
    assert "jobs_jobevent" not in plan, plan


# A backlog a third drained: the succeeded jobs are the oldest, the statistics (as autovacuum's
# ANALYZE leaves them during the drain) say most of the type's rows are queued.
HALF_DRAINED_SQL = """
    INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                          max_attempts, last_error, created_at, updated_at, finished_at)
    SELECT gen_random_uuid(), 'bench.noop', '{}', CASE WHEN g <= 6000 THEN 'succeeded' ELSE 'queued' END,
           50, at, CASE WHEN g <= 6000 THEN 1 ELSE 0 END, 3, '', at, at,
           CASE WHEN g <= 6000 THEN at END
    FROM generate_series(1, 20000) AS g,
         LATERAL (SELECT CAST(:now AS timestamptz) - (20000 - g) * interval '1 ms' AS at) AS t
"""


QUEUED_OF_A_TYPE = (
    "EXPLAIN SELECT id FROM jobs_job WHERE status = 'queued' AND type = 'bench.noop' "
    "ORDER BY created_at DESC, id DESC LIMIT 25"
)


def test_the_oldest_queued_job_is_the_first_entry_of_its_index_during_a_drain(app):
    """The large table's stats take the oldest queued job from job_oldest_queued_idx, one entry,
    never by walking the list order's (created_at, id) past the finished jobs older than it:
    planned and run on a backlog a third drained, analysed (rolled back). No list of queued
    jobs is planned on that index."""
    now = values.utcnow()
    with db.engine.connect() as conn, conn.begin() as transaction:
        conn.execute(text(HALF_DRAINED_SQL), {"now": now})
        conn.exec_driver_sql("ANALYZE jobs_job")
        explain = text("EXPLAIN (ANALYZE, TIMING OFF, SUMMARY OFF) " + str(read_stats.LIVE_STATS_SQL))
        plan = "\n".join(conn.execute(explain, {"now": now, "cap": 100}).scalars())
        oldest = conn.execute(read_stats.LIVE_STATS_SQL, {"now": now, "cap": 100}).mappings().one()
        listed = "\n".join(conn.exec_driver_sql(QUEUED_OF_A_TYPE).scalars())
        transaction.rollback()
    assert "job_oldest_queued_idx" not in listed, listed  # the index is the stats' alone
    assert oldest["oldest_queued_at"] == now - timedelta(milliseconds=20000 - 6001)
    lines = plan.splitlines()
    walk = [line for line in lines if "job_oldest_queued_idx" in line]
    assert walk and all("actual rows=1 " in line for line in walk), plan
    assert "jobs_job_created_at_idx" not in plan, plan


def _claim(worker: str, at):
    return lifecycle.claim_next_job(worker, lease_seconds=30, now=at)


def test_every_settle_records_type_and_run_time_with_and_without_progress(app):
    """The charts' event data (type, run_ms, wait_ms) in each settle statement (store/lifecycle/settle.sql):
    complete, complete-and-claim (its success and the next job's claim), complete-many and
    fail (retry and for good), each with and without pending progress, progress first."""
    t0 = values.utcnow()
    later = [t0 + timedelta(seconds=s) for s in range(12)]
    ids = [
        enqueue.create_job(enqueue.JobSpec("demo.success", {}, available_at=t0, max_attempts=2)).job.id
        for _ in range(6)
    ]
    report = lifecycle.progress_report("half", {"percent": 50}, now=later[1])

    first = _claim("w1", later[1])
    assert first is not None and first.id == ids[0]
    lifecycle.complete_job(first.id, "w1", 1, None, progress=[report], now=later[2])  # COMPLETE_PROGRESS
    second = _claim("w1", later[2])
    done, third = lifecycle.complete_and_claim(  # COMPLETE_AND_CLAIM_PROGRESS
        second.id, "w1", 1, None, lease_seconds=30, progress=[report], now=later[3]
    )
    assert done and third is not None
    done, fourth = lifecycle.complete_and_claim(third.id, "w1", 1, None, lease_seconds=30, now=later[5])
    assert done and fourth is not None
    fifth = _claim("w2", later[5])
    recorded = lifecycle.complete_jobs(  # COMPLETE_MANY_PROGRESS
        [(fourth.id, "w1", 1, None), (fifth.id, "w2", 1, None)], progress={fourth.id: [report]}, now=later[6]
    )
    assert recorded == {fourth.id, fifth.id}
    sixth = _claim("w3", later[6])
    fail = {"backoff_base_seconds": 0, "backoff_max_seconds": 0}
    lifecycle.fail_job(sixth.id, "w3", 1, "boom", progress=[report], now=later[7], **fail)  # FAIL_PROGRESS
    again = _claim("w3", later[8])
    assert again is not None and again.id == sixth.id
    lifecycle.fail_job(again.id, "w3", 2, "boom", now=later[10], **fail)  # FAIL, for good

    expected_runs = {ids[0]: 1000, ids[1]: 1000, ids[2]: 2000, ids[3]: 1000, ids[4]: 1000}
    reports = {ids[0]: 1, ids[1]: 1, ids[2]: 0, ids[3]: 1, ids[4]: 0}  # which settles carried one
    for job_id, run_ms in expected_runs.items():
        events = read_jobs.job_events(job_id)
        outcome = [e for e in events if e.type == "succeeded"]
        assert [e.data.get("run_ms") for e in outcome] == [run_ms], job_id
        assert outcome[0].data["type"] == "demo.success"
        claimed = [e for e in events if e.type == "claimed"]
        assert claimed[0].data["type"] == "demo.success" and claimed[0].data["wait_ms"] >= 1000
        progress = [e.id for e in events if e.type == "progress"]
        assert len(progress) == reports[job_id], job_id
        assert all(p < outcome[0].id for p in progress)  # progress first
    events = read_jobs.job_events(ids[5])
    by_type = {e.type: e for e in events}
    assert by_type["retry_scheduled"].data["run_ms"] == 1000 and by_type["retry_scheduled"].data["type"]
    assert by_type["failed"].data["run_ms"] == 2000 and by_type["failed"].data["error"] == "boom"
    assert by_type["progress"].id < by_type["retry_scheduled"].id


def test_a_settle_given_the_start_computes_run_time_from_it(app):
    """Workers pass the attempt's start: the outcome's run_ms is computed from it,
    not read from the ``claimed`` event. Here it is given 1 s earlier than the event says, so
    each statement's figure shows which one it used."""
    t0 = values.utcnow()
    later = [t0 + timedelta(seconds=s) for s in range(12)]
    ids = [
        enqueue.create_job(enqueue.JobSpec("demo.success", {}, available_at=t0, max_attempts=1)).job.id
        for _ in range(4)
    ]
    first = _claim("w1", later[1])
    lifecycle.complete_job(first.id, "w1", 1, None, started_at=later[0], now=later[2])  # COMPLETE
    second = _claim("w1", later[2])
    done, third = lifecycle.complete_and_claim(  # COMPLETE_AND_CLAIM
        second.id, "w1", 1, None, lease_seconds=30, started_at=later[1], now=later[3]
    )
    assert done and third is not None
    lifecycle.complete_jobs([(third.id, "w1", 1, None)], started_at={third.id: later[2]}, now=later[4])
    fourth = _claim("w2", later[4])
    fail = {"backoff_base_seconds": 0, "backoff_max_seconds": 0}
    lifecycle.fail_job(fourth.id, "w2", 1, "boom", started_at=later[3], now=later[6], **fail)  # FAIL

    runs = {}
    for job_id in ids:
        [outcome] = [e for e in read_jobs.job_events(job_id) if e.type in {"succeeded", "failed"}]
        runs[job_id] = outcome.data["run_ms"]
    assert runs == {ids[0]: 2000, ids[1]: 2000, ids[2]: 2000, ids[3]: 3000}


def test_the_chart_read_names_exactly_the_kinds_the_index_holds():
    """``hour_figures`` writes the kinds out (so every plan can prove the partial index's
    predicate): they are states.CHART_EVENTS, no more and no less."""
    from dashboard.store.sql import STATEMENTS
    from dashboard.store.states import CHART_EVENTS

    sql = STATEMENTS["hour_figures"].sql
    written = sql.split("WHERE type IN (", 1)[1].split(")", 1)[0]
    assert [kind.strip().strip("'") for kind in written.split(",")] == list(CHART_EVENTS)
