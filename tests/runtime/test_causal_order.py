"""Events read in causal order: a worker thread's history never shows two jobs at once.

One-job mode records a success and claims the thread's next job in one statement
(``complete_and_claim`` in ``store/lifecycle/settle.sql``). Both events must come out of it in
causal order: the success
first, in id and in ``created_at``. Batch mode records successes in the completer's statements
and claims in the dispatcher's, for lanes (worker ids each holding one attempt): a lane asks
for its next job only once its last success is written, so its history reads the same way.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.lifecycle import create as enqueue
from tests.support.worker_loop import wait_until

pytestmark = pytest.mark.process

JOBS = 1000
SETTLED = {"succeeded", "failed", "retry_scheduled"}  # the owner's own end of an attempt
DURING = {"progress", "lease_renewed"}


@pytest.mark.parametrize("batch_size", ["1", "4", "64"], ids=["one-job", "batch", "batch-64"])
def test_each_worker_threads_events_alternate_claim_then_settle(app, start_worker, batch_size):
    enqueue.create_jobs([enqueue.JobSpec("demo.success", {"sleep_seconds": 0}) for _ in range(JOBS)])
    # Each mode whatever TEST_WORKER_BATCH_SIZE says; 64: 136 lanes per process, most claiming ahead.
    workers = [start_worker(JOB_WORKER_THREADS="8", JOB_WORKER_BATCH_SIZE=batch_size) for _ in range(2)]

    def drained() -> bool:
        with app.app_context(), db.engine.connect() as conn:
            left = conn.execute(text("SELECT count(*) FROM jobs_job WHERE status <> 'succeeded'")).scalar()
        return left == 0

    wait_until(drained, 120, f"{JOBS} jobs to succeed")
    for worker in workers:
        worker.kill()

    with app.app_context(), db.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT id, job_id, type, worker_id, created_at FROM jobs_jobevent "
                "WHERE worker_id IS NOT NULL ORDER BY id"
            )
        ).all()
    by_worker: dict[str, list] = defaultdict(list)
    for row in rows:
        by_worker[row.worker_id].append(row)
    claimers = {w for w, evs in by_worker.items() if any(e.type == "claimed" for e in evs)}
    assert len(claimers) >= 2  # both processes took part
    assert sum(1 for row in rows if row.type == "claimed") >= JOBS
    chained = 0
    for worker_id in claimers:
        holding = None
        previous = None
        for event in by_worker[worker_id]:
            where = f"{worker_id} event {event.id} ({event.type})"
            if previous is not None:
                assert event.created_at >= previous.created_at, where
                if event.type == "claimed" and previous.type in SETTLED:
                    chained += event.created_at > previous.created_at  # strictly after, in created_at
            if event.type == "claimed":
                assert holding is None, f"{where}: claimed while still holding job {holding}"
                holding = event.job_id
            elif event.type in DURING | SETTLED:
                assert event.job_id == holding, f"{where}: for job {event.job_id}, holding {holding}"
                if event.type in SETTLED:
                    holding = None
            previous = event
        assert holding is None, f"{worker_id} ended holding job {holding}"
    if batch_size == "1":
        assert chained > 0  # settle-and-claim ran, and its claim is stamped after the success
