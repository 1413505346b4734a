"""``python -m bench.bulk_drain [--failed N] [--queued M]``: drain rate of a real worker without,
then during, a bulk retry of N failed jobs (the figure the target names is N = 100,000).

The queue holds M ready ``bench.noop`` jobs and N failed ones. A worker drains; the drain rate
(jobs succeeded per second) is measured over a window without the bulk action, then over the
time the bulk retry takes (``actions.run``: chunks of 500 per transaction, SKIP LOCKED).
M must be large enough that the worker never runs dry during both windows.
"""

from __future__ import annotations

import argparse
import threading
import time

import psycopg

from dashboard.store.lifecycle import actions

from .db import fresh_database, make_app, seed_queued
from .drain import worker

BASELINE_SECONDS = 10.0


def _succeeded(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT count(*) FROM jobs_job WHERE status = 'succeeded'").fetchone()[0]


def run(url: str, *, failed: int, queued: int, threads: int = 4) -> dict[str, float]:
    app = make_app(url)
    seed_queued(url, failed + queued)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE jobs_job SET status = 'failed', finished_at = now(), last_error = 'bench' "
            "WHERE id IN (SELECT id FROM jobs_job ORDER BY created_at DESC LIMIT %s)",
            (failed,),
        )
        with worker(url, threads=threads):
            deadline = time.monotonic() + 60
            while _succeeded(conn) == 0 and time.monotonic() < deadline:
                time.sleep(0.05)  # the worker has started draining
            before = _succeeded(conn)
            time.sleep(BASELINE_SECONDS)
            baseline = (_succeeded(conn) - before) / BASELINE_SECONDS
            changed: list[int] = []

            def bulk() -> None:
                with app.app_context():
                    selection = actions.Selection()
                    changed.append(actions.run("retry", selection, event_data={"actor": "bench"}).changed)

            start, before = time.monotonic(), _succeeded(conn)
            thread = threading.Thread(target=bulk)
            thread.start()
            thread.join()
            seconds = time.monotonic() - start
            during = (_succeeded(conn) - before) / seconds
            left = conn.execute("SELECT count(*) FROM jobs_job WHERE status = 'queued'").fetchone()[0]
    if left == 0:
        raise RuntimeError("the worker ran dry during the measurement: raise --queued")
    return {
        "failed_retried": changed[0],
        "bulk_seconds": seconds,
        "retried_per_second": changed[0] / seconds,
        "drain_without_per_second": baseline,
        "drain_during_per_second": during,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--failed", type=int, default=100_000)
    parser.add_argument("--queued", type=int, default=200_000)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    url = fresh_database("jobqueue_bench_bulk")
    for name, value in run(url, failed=args.failed, queued=args.queued, threads=args.threads).items():
        print(f"{name}: {value:,.1f}")


if __name__ == "__main__":
    main()
