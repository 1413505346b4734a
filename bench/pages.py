"""Latency of every dashboard page, polled fragment and API endpoint on a large table.

Routes come from ``app.url_map`` (every GET route but static files), so a new page is measured
without editing this file. Dashboard routes are measured twice: as a full page and as the
HTMX fragment (``HX-Request: true``). Requests go through the Flask test client, in process:
this measures the application and its queries, not the network.
"""

from __future__ import annotations

import re
import statistics
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import psycopg
from flask import Flask

KEYSET_DEPTH = 10_000  # the dashboard's Older link this many rows down: as deep as the API's offset


def _sample_ids(url: str) -> dict[str, str]:
    """A failed job's id (the job pages), and the dashboard's keyset position
    :data:`KEYSET_DEPTH` rows down the newest-first list (inside the backlog's burst, when
    there is one: jobs that share one ``created_at``)."""
    with psycopg.connect(url) as conn:
        job_id = conn.execute(
            "SELECT id FROM jobs_job WHERE status = 'failed' ORDER BY created_at DESC LIMIT 1"
        ).fetchone()
        if job_id is None:
            job_id = conn.execute("SELECT id FROM jobs_job LIMIT 1").fetchone()
        deep = conn.execute(
            "SELECT created_at, id FROM jobs_job ORDER BY created_at DESC, id DESC OFFSET %s LIMIT 1",
            (KEYSET_DEPTH,),
        ).fetchone()
    found = {"id": str(job_id[0])} if job_id else {}
    if deep:
        found["before"] = f"{deep[0].isoformat()}_{deep[1]}"
    return found


LONG_JOB_TYPE = "bench.long"


def long_job(url: str, events: int) -> str:
    """A running job with ``events`` progress reports (a long handler's page: the timeline's
    worst case), made once in the database and kept with it."""
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute("SELECT id FROM jobs_job WHERE type = %s LIMIT 1", (LONG_JOB_TYPE,)).fetchone()
        if found:
            return str(found[0])
        (job_id,) = conn.execute(
            """
            INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                                  max_attempts, locked_by, locked_until, last_error, created_at,
                                  updated_at)
            VALUES (gen_random_uuid(), %s, '{}', 'running', 50, now(), 1, 3, 'bench:1:thread-1:long',
                    now() + interval '100 years', '', now(), now())
            RETURNING id
            """,
            (LONG_JOB_TYPE,),
        ).fetchone()
        conn.execute(
            """
            INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
            SELECT %s, CASE WHEN g = 0 THEN 'claimed' ELSE 'progress' END, 1, 'bench:1:thread-1:long',
                   'step', jsonb_build_object('percent', g %% 100), now()
            FROM generate_series(0, %s) AS g
            """,
            (job_id, events),
        )
        conn.execute("ANALYZE jobs_jobevent")
    return str(job_id)


SCHEDULES = 10
SCHEDULE_RUNS = 100  # runs of each schedule, among the seeded jobs


def seed_schedules(app: Flask) -> None:
    """Ten every-minute schedules, each with :data:`SCHEDULE_RUNS` runs enqueued (its missed
    slots of the last hours, fired with ``missed="all"``), so /schedules/ reads real runs."""
    from dashboard.store.flow.schedules import Declaration, fire_due, sync
    from dashboard.store.values import utcnow

    start = utcnow() - timedelta(minutes=SCHEDULE_RUNS)
    with app.app_context():
        declared = [
            Declaration(f"bench-{n}", "* * * * *", "UTC", "bench.noop", {"n": n}, "default", 50, 3, "all")
            for n in range(SCHEDULES)
        ]
        sync(declared, now=start)
        while fire_due(now=start + timedelta(minutes=SCHEDULE_RUNS)):
            pass


BIG_WORKFLOW = "bench-pages-fan-in"  # 10,000 members, 100 joins, one callback: summarised
SMALL_WORKFLOW = "bench-pages-chain"  # 40 jobs in a chain: drawn
BACKLOG_WORKFLOW = "bench-pages-waiting"  # one parent not yet due, and its waiting children
BACKLOG_CHUNK = 10_000  # children created per call


def seed_workflows(app: Flask, url: str, members: int = 10_000, waiting: int = 0) -> str:
    """Three workflows, made once in the database and kept with it: a fan-in of ``members``
    (the page summarises it), a chain of 40 (the page draws it) and ``waiting`` jobs waiting
    for one parent due in a year (the waiting backlog every count and list passes over), then
    ANALYZE (as autovacuum would after so many rows); the id of a job of the chain's that
    waits (the job page's parents and why)."""
    from dashboard.store.lifecycle import create as enqueue
    from dashboard.store.lifecycle.create import JobSpec
    from dashboard.store.reads import workflows as read_workflows

    from .workflows import chain_specs, fan_in_specs

    with app.app_context():
        made = False
        for name, specs in ((BIG_WORKFLOW, fan_in_specs(members)), (SMALL_WORKFLOW, chain_specs(40))):
            if read_workflows.counts(name, cap=1).total == 0:
                made = True
                enqueue.create_jobs(
                    [spec._replace(workflow=name) if spec.workflow else spec for spec in specs]
                )
        if waiting and read_workflows.counts(BACKLOG_WORKFLOW, cap=1).total == 0:
            made = True
            later = datetime.now(UTC) + timedelta(days=365)
            parent = enqueue.create_job(
                JobSpec("bench.noop", available_at=later, workflow=BACKLOG_WORKFLOW)
            ).job
            for start in range(0, waiting, BACKLOG_CHUNK):
                count = min(BACKLOG_CHUNK, waiting - start)
                enqueue.create_jobs([JobSpec("bench.noop", depends_on=(parent.id,))] * count)
        chain = read_workflows.workflow(SMALL_WORKFLOW, cap=2)
    if made:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE jobs_job")
    waiting_jobs = [job for job in chain.jobs if job.waiting] if chain is not None else []
    return str(waiting_jobs[0].id) if waiting_jobs else ""


def routes(
    app: Flask, url: str, long_events: int = 100_000, waiting: int = 0
) -> list[tuple[str, dict[str, str]]]:
    """(path, headers) pairs to measure; ``waiting``: the waiting backlog seeded first."""
    ids = _sample_ids(url)
    seed_schedules(app)
    waiting_job = seed_workflows(app, url, waiting=waiting)
    found: list[tuple[str, dict[str, str]]] = []
    for rule in app.url_map.iter_rules():
        if "GET" not in (rule.methods or set()) or rule.endpoint == "static" or ".static" in rule.endpoint:
            continue
        path = rule.rule
        for name in rule.arguments:
            if "id" in name and ids:
                path = re.sub(rf"<(?:[a-z]+:)?{name}>", ids["id"], path)
        if "<" in path or "debugtoolbar" in path:
            continue
        found.append((path, {}))
        if not path.startswith("/api/"):
            found.append((path, {"HX-Request": "true"}))
    # The job list's filters: a type with millions of jobs, a rare combination, no match.
    for query in FILTERS:
        found += [(f"/api/jobs/?{query}", {}), (f"/jobs/?{query}", {"HX-Request": "true"})]
    if "before" in ids:  # the dashboard's keyset page as deep as the API's offset
        found.append((f"/jobs/?{urlencode({'before': ids['before']})}", {"HX-Request": "true"}))
    # Search by each kind, next-to-run order, the bulk dry runs (the Workers page, the audit log
    # and the banner's /alarm/ are GET routes without arguments, so they are measured above).
    short = ids.get("id", "00000000")[:8]
    for query in (
        f"q={short}",
        "q=no-such-key-42",
        "q=timeout&status=failed",
        # error text over every status: a word of every seeded error (1M failed jobs, and the
        # backlog's retried ones), and a host name that matches nothing
        "q=ValueError",
        "q=smtp.example.com",
        "q=n=1&type=mail",
        "order=next",
        "q=schedule:bench-0",  # a schedule's runs: job_schedule_key_idx
        "order=next&queue=backlog3",
    ):
        found += [(f"/api/jobs/?{query}", {}), (f"/jobs/?{query}", {"HX-Request": "true"})]
    # A job with a long timeline: its page and a poll far behind read a window of its events;
    # the API's full list is the reference's, so it is measured paged (limit).
    long = long_job(url, long_events)
    found += [
        (f"/jobs/{long}/", {}),
        (f"/jobs/{long}/live/?after=0&status=running", {"HX-Request": "true"}),
        (f"/api/jobs/{long}/events/?limit=50", {}),
    ]
    # The workflow pages: a fan-in of 10,101 (summarised), a chain of 40 (drawn) and the
    # waiting backlog (summarised), each as a page, as its poll, and with a dry run; a waiting
    # job's page (its parents, why).
    for name in (BIG_WORKFLOW, SMALL_WORKFLOW, BACKLOG_WORKFLOW):
        found += [(f"/workflows/{name}/", {}), (f"/workflows/{name}/", {"HX-Request": "true"})]
        found += [(f"/workflows/{name}/?action=cancel", {}), (f"/workflows/{name}/?action=retry", {})]
    if waiting_job:
        found.append((f"/jobs/{waiting_job}/", {}))
    found.append(("/jobs/?status=queued&type=bench", {"HX-Request": "true"}))  # with its waiting count
    found.append(("/api/schedules/bench-0/", {}))
    found += [("/api/queues/default/", {}), ("/api/queues/backlog1/", {})]  # 404 without the backlog
    for slug in ("retry", "cancel", "run-now", "delete"):
        # Unfiltered (every failed or queued job: the largest count) and by type.
        found += [(f"/jobs/bulk/{slug}/", {}), (f"/jobs/bulk/{slug}/?type=mail", {})]
    return found


FILTERS = (
    "type=mail",
    "status=failed&type=report.build",
    "type=no.such.type",
    "status=queued",
    "status=running",
    "offset=10000",  # the deepest the API serves (API_OFFSET_MAX); the dashboard pages by key
    "status=failed&cancelled=false",  # failures only: what the overview's failed card opens
    "cancelled=true",  # cancelled jobs: job_cancelled_idx
    "queue=backlog7",  # one named queue of the backlog: job_queue_created_idx
    "queue=no-such-queue",
    "queue=default&status=queued",
)


def measure(
    app: Flask, url: str, *, samples: int, long_events: int = 100_000, waiting: int = 0
) -> dict[str, tuple[float, float, int]]:
    """path (+ ' [fragment]') -> (p50 ms, p95 ms, status code)."""
    client = app.test_client()
    results = {}
    for path, headers in routes(app, url, long_events, waiting):
        client.get(path, headers=headers)  # warm up
        times = []
        status = 0
        for _ in range(samples):
            start = time.perf_counter()
            response = client.get(path, headers=headers)
            times.append((time.perf_counter() - start) * 1000)
            status = response.status_code
        times.sort()
        label = path + (" [fragment]" if headers else "")
        results[label] = (statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)], status)
    return results
