"""A partition probe: two real workers, each behind its own TCP proxy, one partitioned, one reset.

A few hundred jobs (short ones and lease-renewing ``demo.slow`` ones) run on two ``flask
worker`` processes. Worker A's proxy is black-holed (nothing passes, nothing is refused: no
RST) for longer than a lease, while worker B's connections are cut with an RST twice under
running handlers; then A heals. Afterwards:

- nothing is lost: every job succeeded;
- no double success: one ``succeeded`` event per job;
- no stale success: every success was recorded by the worker that claimed that attempt;
- no attempt failed by a reset (or by anything: these handlers never fail);
- no claim that A sent during the partition was taken back by the rescue once it arrived
  (its lease runs from when it reached the database, not from when A sent it);
- A resumed after the heal: it claimed and finished jobs again.
"""

from __future__ import annotations

import socket
from collections import Counter
from typing import Any

import psycopg
import pytest

from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from tests.support.netproxy import proxied_url, proxy_to
from tests.support.worker_loop import wait_until

pytestmark = pytest.mark.process

JOBS = 300
SLOW_EVERY = 3  # every third job is a demo.slow that renews its lease (lease 2 s, 1.5 s of work)
SETTINGS = {
    "JOB_WORKER_THREADS": "4",
    "JOB_WORKER_LEASE_SECONDS": "2",
    "JOB_WORKER_PROGRESS_FLUSH_MS": "200",  # reports written by the flusher during the handlers
}


def specs() -> list[JobSpec]:
    return [
        JobSpec("demo.slow", {"sleep_seconds": 1.5}, max_attempts=5)
        if n % SLOW_EVERY == 0
        else JobSpec("demo.success", {"sleep_seconds": 0.05, "n": n}, max_attempts=5)
        for n in range(JOBS)
    ]


def rows(conn: psycopg.Connection[Any], sql: str, *args: Any) -> list[tuple[Any, ...]]:
    return conn.execute(sql, args).fetchall()


def scalar(conn: psycopg.Connection[Any], sql: str, *args: Any) -> Any:
    return conn.execute(sql, args).fetchone()[0]


def test_a_partitioned_and_a_reset_worker_lose_nothing_and_fail_nothing(
    app, database_url, libpq_url, start_worker
):
    host = socket.gethostname()
    with (
        proxy_to(database_url) as proxy_a,
        proxy_to(database_url) as proxy_b,
        psycopg.connect(libpq_url, autocommit=True) as conn,
    ):
        worker_a = start_worker(
            database_url=proxied_url(database_url, proxy_a.port), PGAPPNAME="probe-a", **SETTINGS
        )
        worker_b = start_worker(
            database_url=proxied_url(database_url, proxy_b.port), PGAPPNAME="probe-b", **SETTINGS
        )
        a, b = f"{host}:{worker_a.proc.pid}:", f"{host}:{worker_b.proc.pid}:"
        enqueue.create_jobs(specs())

        def succeeded() -> int:
            return scalar(conn, "SELECT count(*) FROM jobs_job WHERE status = 'succeeded'")

        def running(prefix: str) -> int:
            return scalar(
                conn,
                "SELECT count(*) FROM jobs_job WHERE status = 'running' AND type = 'demo.slow' "
                "AND locked_by LIKE %s",
                prefix + "%",
            )

        wait_until(lambda: succeeded() >= 30 and running(a) and running(b), 60, "both workers busy")

        # The partition: A's statements wait in the proxy. Once A has nothing left running on
        # the server, every event with a larger id was written after A's traffic reached it again.
        proxy_a.black_hole()
        wait_until(
            lambda: (
                not scalar(
                    conn,
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE application_name = 'probe-a' AND state = 'active'",
                )
            ),
            10,
            "A's last statements before the partition to finish",
        )
        boundary = scalar(conn, "SELECT coalesce(max(id), 0) FROM jobs_jobevent")

        # Meanwhile B's connections are cut twice, each time under running lease-renewing handlers.
        for n in range(2):
            wait_until(
                lambda: running(b) and proxy_b.open_connections,
                30,
                f"B to run a demo.slow job before reset {n + 1}",
            )
            before = scalar(conn, "SELECT max(id) FROM jobs_jobevent")
            assert proxy_b.reset() >= 1
            wait_until(
                lambda after=before: scalar(
                    conn,
                    "SELECT count(*) FROM jobs_jobevent "
                    "WHERE id > %s AND type = 'succeeded' AND worker_id LIKE %s",
                    after,
                    b + "%",
                ),
                30,
                f"B to finish a job after reset {n + 1}",
            )

        # A's leases run out during the partition and B recovers them.
        wait_until(
            lambda: scalar(
                conn,
                "SELECT count(*) FROM jobs_jobevent WHERE type = 'timeout_requeued' "
                "AND data->>'expired_worker_id' LIKE %s",
                a + "%",
            ),
            30,
            "the rescue to take A's attempts",
        )
        proxy_a.heal()
        healed_at = scalar(conn, "SELECT max(id) FROM jobs_jobevent")

        wait_until(
            lambda: (
                scalar(conn, "SELECT count(*) FROM jobs_job WHERE status IN ('succeeded', 'failed')") == JOBS
            ),
            120,
            "every job to finish",
        )
        assert worker_a.proc.poll() is None and worker_b.proc.poll() is None

        # Nothing lost.
        assert dict(rows(conn, "SELECT status, count(*) FROM jobs_job GROUP BY status")) == {
            "succeeded": JOBS
        }
        # No double success.
        successes = Counter(
            job for (job,) in rows(conn, "SELECT job_id FROM jobs_jobevent WHERE type = 'succeeded'")
        )
        assert len(successes) == JOBS and set(successes.values()) == {1}
        # No stale success: recorded by the worker that claimed that attempt, the job's last.
        stale = rows(
            conn,
            """
            SELECT s.job_id FROM jobs_jobevent AS s JOIN jobs_job AS j ON j.id = s.job_id
            WHERE s.type = 'succeeded' AND (s.attempt <> j.attempts OR s.worker_id IS DISTINCT FROM (
                SELECT c.worker_id FROM jobs_jobevent AS c
                WHERE c.job_id = s.job_id AND c.type = 'claimed' AND c.attempt = s.attempt))
            """,
        )
        assert stale == []
        # No attempt failed, by a reset or otherwise.
        failures = rows(
            conn, "SELECT type, message FROM jobs_jobevent WHERE type IN ('retry_scheduled', 'failed')"
        )
        assert failures == []
        # A's claims that reached the database after the partition kept their leases.
        taken_back = rows(
            conn,
            """
            SELECT c.job_id, c.attempt FROM jobs_jobevent AS c
            WHERE c.type = 'claimed' AND c.id > %s AND c.worker_id LIKE %s
              AND EXISTS (SELECT 1 FROM jobs_jobevent AS t WHERE t.job_id = c.job_id
                          AND t.attempt = c.attempt AND t.type = 'timeout_requeued')
            """,
            boundary,
            a + "%",
        )
        assert taken_back == []
        # A resumed after the heal: it claimed jobs and finished them.
        assert scalar(
            conn,
            """
            SELECT count(*) FROM jobs_jobevent AS c
            WHERE c.type = 'claimed' AND c.id > %s AND c.worker_id LIKE %s
              AND EXISTS (SELECT 1 FROM jobs_jobevent AS s WHERE s.job_id = c.job_id
                          AND s.attempt = c.attempt AND s.type = 'succeeded' AND s.worker_id = c.worker_id)
            """,
            healed_at,
            a + "%",
        )
        # B said what the resets did to its connections.
        said = ("connecting again", "database unavailable", "LISTEN connection lost", "cannot record")
        assert any(line in worker_b.output for line in said), worker_b.output[-3000:]
