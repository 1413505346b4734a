"""Named queues and limits: the claim across many queues, and a limited queue beside a busy one.

- ``claim_across``: the claim's p50/p95 (``lifecycle.claim_next_job``, every queue served) with
  ``small`` and with ``large`` jobs queued, spread evenly over ``queues`` named queues.
- ``beside_limited``: the drain rate of an unlimited queue alone, then with a queue at its
  concurrency limit beside it (its jobs sleep, so the limit stays reached), runs alternating:
  a full queue must cost the others nothing.

``python -m bench --only queues`` runs both; ``python -m bench.flow`` too, on its own database.
"""

from __future__ import annotations

import statistics
import time

import psycopg
from flask import Flask

from dashboard.store import connection, lifecycle

from . import claim, drain
from .db import truncate

QUEUES = 20


def seed_spread(url: str, count: int, queues: int = QUEUES, *, prefix: str = "q") -> None:
    """``count`` queued jobs available now, ``queues`` named queues in turn, with their rows."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs_queue (name) SELECT %(p)s || g FROM generate_series(0, %(n)s - 1) AS g "
            "ON CONFLICT DO NOTHING",
            {"p": prefix, "n": queues},
        )
        conn.execute(
            """
            INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                                  max_attempts, last_error, created_at, updated_at, queue)
            SELECT gen_random_uuid(), 'bench.noop', '{}', 'queued', (g %% 5) * 10,
                   now() - interval '1 hour' + g * interval '1 microsecond', 0, 3, '',
                   now() - interval '1 hour', now() - interval '1 hour', %(p)s || (g %% %(n)s)
            FROM generate_series(1, %(count)s) AS g
            """,
            {"p": prefix, "n": queues, "count": count},
        )
        conn.execute("ANALYZE jobs_job")


def claim_ms(app: Flask, samples: int, served: list[str]) -> tuple[float, float]:
    """p50 and p95 (ms) of a one-job claim for the queues ``served``,
    on one held connection with generic plans, as a one-job worker thread claims."""
    times: list[float] = []
    with app.app_context():
        conn = connection.connect_worker()
        for _ in range(6):  # psycopg prepares a statement on its fifth execution
            lifecycle.claim_next_job("bench:claim", lease_seconds=30, conn=conn, queues=served)
        for _ in range(samples):
            start = time.perf_counter()
            job = lifecycle.claim_next_job("bench:claim", lease_seconds=30, conn=conn, queues=served)
            times.append((time.perf_counter() - start) * 1000)
            assert job is not None, "the queues ran dry during the claim benchmark"
        connection.release_worker(conn)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def claim_across(app: Flask, url: str, *, small: int, large: int, queues: int = QUEUES) -> dict[str, tuple]:
    """Claim p50/p95 (ms) at ``small`` and ``large`` queued over ``queues`` queues: a worker
    serving every queue, and one naming them all (the same claim, in its form without limits:
    none of the queues has one)."""
    results = {}
    names = [f"q{n}" for n in range(queues)]
    for queued in (small, large):
        truncate(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM jobs_queue")
        seed_spread(url, queued, queues)
        samples = min(200, queued // 8)
        results[f"{queued:,} queued over {queues} queues, every queue served"] = claim.claim_ms(app, samples)
        results[f"{queued:,} queued over {queues} queues, the {queues} named"] = claim_ms(app, samples, names)
    truncate(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM jobs_queue")
        conn.execute("VACUUM ANALYZE jobs_job")
    return results


def _queue_rate(url: str, queue: str, jobs: int, timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            done = conn.execute(
                "SELECT count(*) FROM jobs_job WHERE queue = %s AND status = 'succeeded'", (queue,)
            ).fetchone()[0]
            if done >= jobs:
                break
            time.sleep(0.05)
        else:
            raise TimeoutError(f"{jobs} jobs of {queue} not drained within {timeout} s")
        first, last = conn.execute(
            "SELECT (SELECT min(e.created_at) FROM jobs_jobevent AS e JOIN jobs_job AS j ON j.id = e.job_id "
            "        WHERE j.queue = %(q)s AND e.type = 'claimed'),"
            " (SELECT max(finished_at) FROM jobs_job WHERE queue = %(q)s)",
            {"q": queue},
        ).fetchone()
    return jobs / max((last - first).total_seconds(), 1e-6)


def one_drain(url: str, *, jobs: int, threads: int, limited: bool, idle: bool = False, **env: str) -> float:
    """The ``fast`` queue's jobs/s, alone or beside ``slow`` held at its concurrency limit of 1
    (its jobs sleep 5 s, so one thread of the worker is always in one of them); ``idle``: the
    limit set, but ``slow`` has no job (a limit on a queue that is quiet)."""
    truncate(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM jobs_queue")
        conn.execute("INSERT INTO jobs_queue (name) VALUES ('fast') ON CONFLICT DO NOTHING")
    seed_spread(url, jobs, 1, prefix="fast")  # queue "fast0"
    if limited or idle:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO jobs_queue (name, concurrency_limit) VALUES ('slow', 1) "
                "ON CONFLICT (name) DO UPDATE SET concurrency_limit = 1"
            )
            conn.execute("INSERT INTO jobs_queue_slot (queue, n) VALUES ('slow', 1)")
    if limited:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts, "
                "max_attempts, last_error, created_at, updated_at, queue) "
                "SELECT gen_random_uuid(), 'demo.success', '{\"sleep_seconds\": 5}', 'queued', 90, "
                "now() - interval '2 hours', 0, 3, '', now() - interval '2 hours', now(), 'slow' "
                "FROM generate_series(1, %(n)s)",
                {"n": jobs},
            )
    with drain.worker(url, threads=threads, **env):
        rate = _queue_rate(url, "fast0", jobs)
    return rate


def beside_limited(url: str, *, jobs: int, threads: int, runs: int = 3, **env: str) -> dict[str, float]:
    """Median jobs/s of the unlimited queue alone, beside the full one and beside an idle
    limited one (alternating), and the ratios to alone."""
    solo, beside, idle = [], [], []
    for _ in range(runs):
        solo.append(one_drain(url, jobs=jobs, threads=threads, limited=False, **env))
        beside.append(one_drain(url, jobs=jobs, threads=threads, limited=True, **env))
        idle.append(one_drain(url, jobs=jobs, threads=threads, limited=False, idle=True, **env))
    a, b, c = statistics.median(solo), statistics.median(beside), statistics.median(idle)
    return {
        "solo": a,
        "beside_full": b,
        "ratio": b / a,
        "beside_idle": c,
        "idle_ratio": c / a,
        "solo_runs": solo,
        "beside_runs": beside,
        "idle_runs": idle,
    }


def main() -> int:
    import json

    from .db import fresh_database, make_app

    url = fresh_database("jobqueue_bench_flow")
    app = make_app(url)
    out = {
        "claim": claim_across(app, url, small=10_000, large=1_000_000),
        "beside_one_job": beside_limited(url, jobs=10_000, threads=16),
        "beside_batch": beside_limited(url, jobs=10_000, threads=16, JOB_WORKER_BATCH_SIZE="16"),
    }
    print(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
