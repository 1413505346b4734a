"""The benchmark database: its own PostgreSQL, migrated, and set-based seeding.

``BENCH_DATABASE_URL`` names a server to use; otherwise an embedded server (pgserver) runs
from ``bench/.data``. Seeding is one INSERT ... SELECT generate_series per table, never a
Python loop, so ten million rows take minutes, not hours.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import psycopg
from flask import Flask
from sqlalchemy.engine import make_url

from dashboard import create_app, upgrade_database
from dashboard.database import ensure_runtime_dir, normalise_url

ROOT = Path(__file__).resolve().parent.parent


def libpq(url: str) -> str:
    return make_url(normalise_url(url)).set(drivername="postgresql").render_as_string(False)


def embedded_server(pgdata: Path, *, cleanup_mode: str = "stop"):  # -> pgserver.PostgresServer
    """Start (or attach to) an embedded server with its data in ``pgdata``."""
    os.environ.setdefault("XDG_RUNTIME_DIR", ensure_runtime_dir())
    import pgserver

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    return pgserver.get_server(pgdata, cleanup_mode=cleanup_mode)


def server_url() -> str:
    """A libpq URL of the benchmark server's ``postgres`` database."""
    configured = os.environ.get("BENCH_DATABASE_URL")
    if configured:
        return libpq(configured)
    return libpq(embedded_server(ROOT / "bench" / ".data" / "pg").get_uri())


def pg_bin(name: str) -> str:
    """Path of a PostgreSQL client program (pgbench, psql), pgserver's own first."""
    try:
        from pgserver._commands import POSTGRES_BIN_PATH

        candidate = Path(POSTGRES_BIN_PATH) / name
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    return name


def fresh_database(name: str = "jobqueue_bench", admin: str | None = None) -> str:
    """Drop and recreate ``name`` (on ``admin``'s server), migrate it, return its libpq URL."""
    admin = admin or server_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(admin).set(database=name).render_as_string(False)
    app = make_app(url)
    upgrade_database(app)
    return url


def make_app(url: str, **config: str) -> Flask:
    return create_app(
        {
            "DATABASE_URL": url,
            "DEBUG": "false",
            "ENABLE_DEBUG_TOOLBAR": "false",
            "JOB_DEMO_HANDLERS": "true",  # demo types are off by default with DEBUG=false
            "AUTO_MIGRATE": "false",
            "SECRET_KEY": "bench-only-secret-key-0123456789abcdef",
            "AUTH_DISABLED": "true",  # the benchmark measures the pages, not sign-in
            "ALLOWED_HOSTS": "*",
            **config,
        }
    )


def _empty(conn: psycopg.Connection) -> None:
    """TRUNCATE the jobs, their events and, where this schema has them, the workflow edges and
    waiting counts (a schema of an older commit, ``bench.versus --other-schema``, may not)."""
    optional = ("jobs_job_dependency", "jobs_job_waiting")
    (present,) = conn.execute(
        "SELECT array_agg(t) FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NOT NULL", (list(optional),)
    ).fetchone()
    tables = ", ".join(["jobs_jobevent", "jobs_job", *(present or [])])
    conn.execute(f"TRUNCATE {tables} RESTART IDENTITY")


def truncate(url: str) -> None:
    """Empty both tables, then :func:`checkpoint`: an enqueue run starts like a drain, just
    after one (a run of the bulk row once stalled for about 10 s right after the drains)."""
    with psycopg.connect(url, autocommit=True) as conn:
        _empty(conn)
        checkpoint(conn)


def truncate_analyzed(url: str) -> None:
    """Empty both tables, then ``VACUUM ANALYZE`` them: planner statistics that say the queue
    tables are empty (a new installation, one that retention emptied), then :func:`checkpoint`."""
    with psycopg.connect(url, autocommit=True) as conn:
        _empty(conn)
        conn.execute("VACUUM ANALYZE jobs_job, jobs_jobevent")
        checkpoint(conn)


def seed_queued(url: str, count: int, *, job_type: str = "bench.noop", payload: str = "{}") -> None:
    """``count`` queued jobs available now, spread over priorities, with a created event each."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """
            WITH jobs AS (
                INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                                      max_attempts, last_error, created_at, updated_at)
                SELECT gen_random_uuid(), %(type)s, %(payload)s::jsonb, 'queued', (g %% 5) * 10,
                       now() - interval '1 hour' + g * interval '1 microsecond', 0, 3, '',
                       now() - interval '1 hour', now() - interval '1 hour'
                FROM generate_series(1, %(count)s) AS g
                RETURNING id, created_at
            )
            INSERT INTO jobs_jobevent (job_id, type, attempt, message, data, created_at)
            SELECT id, 'created', 0, 'Job created', jsonb_build_object('type', %(type)s), created_at
            FROM jobs
            """,
            {"type": job_type, "count": count, "payload": payload},
        )
        conn.execute("ANALYZE jobs_job")
        checkpoint(conn)


def checkpoint(conn: psycopg.Connection) -> None:
    """Start the measured run just after a checkpoint, so that the full-page writes after it,
    and the chance of another one during the run, are alike from run to run (a checkpoint
    falling inside some runs and not others is one source of their spread). Needs a superuser
    or ``pg_checkpoint``; without either the run goes on as before."""
    with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
        conn.execute("CHECKPOINT")


def seed_finished(url: str, count: int, *, events_per_job: int = 3) -> None:
    """``count`` finished jobs (9 in 10 succeeded) over the last 30 days, with their events."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """
            INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                                  max_attempts, last_error, result, created_at, updated_at,
                                  finished_at)
            SELECT gen_random_uuid(),
                   (ARRAY['demo.success', 'demo.fail', 'mail.send', 'report.build'])[1 + g %% 4],
                   jsonb_build_object('n', g),
                   CASE WHEN g %% 10 = 0 THEN 'failed' ELSE 'succeeded' END,
                   50, ts, 1, 3,
                   CASE WHEN g %% 10 = 0 THEN 'ValueError: seeded failure' ELSE '' END,
                   CASE WHEN g %% 10 = 0 THEN NULL ELSE '{"ok": true}'::jsonb END,
                   ts, ts + interval '1 second', ts + interval '1 second'
            FROM generate_series(1, %(count)s) AS g,
                 LATERAL (SELECT now() - interval '30 days'
                                 + (g::float8 / %(count)s) * interval '30 days' AS ts) AS t
            """,
            {"count": count},
        )
        if events_per_job:
            kinds = ["created", "claimed", "succeeded", "progress", "lease_renewed"][:events_per_job]
            conn.execute(
                """
                INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
                SELECT j.id,
                       CASE WHEN k.kind = 'succeeded' AND j.status = 'failed' THEN 'failed' ELSE k.kind END,
                       CASE WHEN k.kind = 'created' THEN 0 ELSE 1 END,
                       CASE WHEN k.kind = 'created' THEN NULL ELSE 'bench:1:thread-1:seed' END,
                       '', '{}'::jsonb, j.created_at + k.n * interval '1 millisecond'
                FROM jobs_job AS j,
                     unnest(%(kinds)s::text[]) WITH ORDINALITY AS k(kind, n)
                WHERE j.status <> 'queued'
                ORDER BY j.created_at, k.n
                """,
                {"kinds": kinds},
            )
        conn.execute("VACUUM ANALYZE jobs_job")
        conn.execute("VACUUM ANALYZE jobs_jobevent")


BACKLOG_TYPES = ("bench.burst", "bench.retried", "bench.running")


BACKLOG_QUEUES = 20  # the backlog's named queues (the pages' figures at 1M queued over 20 queues)


def seed_backlog(url: str, queued: int, running: int) -> None:
    """A backlog on top of the finished jobs, since pages must stay bounded during one:
    ``queued`` jobs, half one recent burst (ready now, never run), half spread over the last
    30 days by creation time as retried jobs (``attempts > 0``, due now or backing off), and
    ``running`` jobs with live leases, the queued ones spread over :data:`BACKLOG_QUEUES` named
    queues. Added in place to the large database and removed again by :func:`remove_backlog`."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs_queue (name) SELECT 'backlog' || g FROM generate_series(0, %(n)s - 1) AS g "
            "ON CONFLICT DO NOTHING",
            {"n": BACKLOG_QUEUES},
        )
        conn.execute(
            """
            INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                                  max_attempts, last_error, created_at, updated_at, queue)
            SELECT gen_random_uuid(), 'bench.burst', '{}'::jsonb, 'queued', 50,
                   now() - interval '5 minutes', 0, 3, '', now() - interval '5 minutes',
                   now() - interval '5 minutes', 'backlog' || (g %% %(queues)s)
            FROM generate_series(1, %(half)s) AS g
            """,
            {"half": queued // 2, "queues": BACKLOG_QUEUES},
        )
        conn.execute(
            """
            INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                                  max_attempts, last_error, created_at, updated_at, queue)
            SELECT gen_random_uuid(), 'bench.retried', '{}'::jsonb, 'queued', 50,
                   now() + (CASE WHEN g %% 2 = 0 THEN 1 ELSE -1 END) * interval '10 minutes',
                   1 + g %% 2, 5, 'ValueError: seeded retry', ts, ts, 'backlog' || (g %% %(queues)s)
            FROM generate_series(1, %(half)s) AS g,
                 LATERAL (SELECT now() - interval '30 days'
                                 + (g::float8 / %(half)s) * interval '30 days' AS ts) AS t
            """,
            {"half": queued - queued // 2, "queues": BACKLOG_QUEUES},
        )
        conn.execute(
            """
            INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                                  max_attempts, locked_by, locked_until, last_error, created_at,
                                  updated_at)
            SELECT gen_random_uuid(), 'bench.running', '{}'::jsonb, 'running', 50, now(), 1, 3,
                   'bench:1:thread-' || g || ':seed', now() + interval '1 hour', '', now(), now()
            FROM generate_series(1, %(running)s) AS g
            """,
            {"running": running},
        )
        conn.execute("VACUUM ANALYZE jobs_job")


def remove_backlog(url: str) -> None:
    """Undo :func:`seed_backlog`: the large database is left as it was."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM jobs_job WHERE type = ANY(%s)", (list(BACKLOG_TYPES),))
        conn.execute("DELETE FROM jobs_queue WHERE name LIKE 'backlog%%'")
        conn.execute("VACUUM ANALYZE jobs_job")


SPREAD_TYPES = tuple(f"spread.t{n}" for n in range(8))


def seed_spread_backlog(url: str, total: int, queued: int, *, types: int = len(SPREAD_TYPES)) -> None:
    """``total`` jobs of which ``queued`` are queued, spread through the table: every
    ``total // queued``-th row inserted is a queued job (one of ``types`` job types in turn), the
    others finished (9 in 10 succeeded) over the last 30 days with 3 events each. A backlog that
    grew while work kept finishing: its queued rows sit on most heap pages, not in a block at the
    table's end. Queued jobs: 4 in 5 due now and never run, the rest retried (half due, half
    backing off). After the VACUUM the queued rows are touched once
    more (``updated_at``), as a live queue's rows are: their pages are no longer all-visible, so
    an index scan of them reads the heap, as it does in production."""
    step = max(1, total // max(queued, 1))
    names = list(SPREAD_TYPES[:types])
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """
            INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                                  max_attempts, last_error, result, created_at, updated_at,
                                  finished_at)
            SELECT gen_random_uuid(),
                   CASE WHEN q THEN (%(names)s::text[])[1 + (g / %(step)s) %% %(types)s]
                        ELSE (ARRAY['demo.success', 'demo.fail', 'mail.send', 'report.build'])[1 + g %% 4]
                   END,
                   jsonb_build_object('n', g),
                   CASE WHEN q THEN 'queued' WHEN g %% 10 = 0 THEN 'failed' ELSE 'succeeded' END,
                   50,
                   CASE WHEN NOT q THEN ts
                        WHEN (g / %(step)s) %% 10 = 9 THEN now() + interval '10 minutes'
                        ELSE ts END,
                   CASE WHEN NOT q THEN 1 WHEN (g / %(step)s) %% 10 >= 8 THEN 1 ELSE 0 END,
                   3,
                   CASE WHEN q AND (g / %(step)s) %% 10 >= 8 THEN 'ValueError: seeded retry'
                        WHEN NOT q AND g %% 10 = 0 THEN 'ValueError: seeded failure' ELSE '' END,
                   CASE WHEN NOT q AND g %% 10 <> 0 THEN '{"ok": true}'::jsonb END,
                   ts, ts + interval '1 second',
                   CASE WHEN NOT q THEN ts + interval '1 second' END
            FROM generate_series(1, %(total)s) AS g,
                 LATERAL (SELECT g %% %(step)s = 0 AS q,
                                 now() - interval '30 days'
                                 + (g::float8 / %(total)s) * interval '30 days' AS ts) AS t
            """,
            {"total": total, "step": step, "names": names, "types": len(names)},
        )
        conn.execute(
            """
            INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
            SELECT j.id, CASE WHEN k.kind = 'succeeded' AND j.status = 'failed' THEN 'failed' ELSE k.kind END,
                   CASE WHEN k.kind = 'created' THEN 0 ELSE 1 END,
                   CASE WHEN k.kind = 'created' THEN NULL ELSE 'bench:1:thread-1:seed' END,
                   '', '{}'::jsonb, j.created_at + k.n * interval '1 millisecond'
            FROM jobs_job AS j, unnest(ARRAY['created', 'claimed', 'succeeded']) WITH ORDINALITY AS k(kind, n)
            WHERE j.status <> 'queued' OR k.kind = 'created'
            ORDER BY j.created_at, k.n
            """
        )
        conn.execute("VACUUM ANALYZE jobs_job")
        conn.execute("VACUUM ANALYZE jobs_jobevent")
        conn.execute(
            "UPDATE jobs_job SET updated_at = updated_at + interval '1 microsecond' WHERE status = 'queued'"
        )
        conn.execute("ANALYZE jobs_job")


def spread_backlog_database(total: int, queued: int, *, reseed: bool) -> tuple[str, float]:
    """The database of the spread-backlog scenario, seeded once (:func:`seed_spread_backlog`)
    and kept between runs like the large one; returns its URL and the seconds seeding took."""
    name = f"jobqueue_bench_spread_{total}_{queued}"
    admin = server_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    if exists and not reseed:
        url = make_url(admin).set(database=name).render_as_string(False)
        upgrade_database(make_app(url))
        return url, 0.0
    started = time.monotonic()
    url = fresh_database(name)
    seed_spread_backlog(url, total, queued)
    return url, time.monotonic() - started
