"""The pgbench ceiling: what PostgreSQL itself sustains for the queue's two transactions.

Each pgbench client claims one job (``FOR UPDATE SKIP LOCKED`` through ``job_claim_idx``) in
one transaction and completes it in a second, with no Python and no handler in between. Two
variants: ``bare`` (the two updates only, as peers measure it) and ``events`` (plus the
``claimed`` and ``succeeded`` event inserts this project writes). Ratios in the report are
taken against ``bare``, the stricter of the two.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from .db import pg_bin, seed_queued, truncate

CLAIM = """
WITH next AS (
    SELECT id FROM jobs_job
    WHERE status = 'queued' AND available_at <= now() AND attempts < max_attempts
    ORDER BY priority DESC, available_at, created_at, id
    LIMIT {batch} FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE jobs_job AS j SET status = 'running', attempts = j.attempts + 1, locked_by = 'pgbench',
        locked_until = now() + interval '30 seconds', updated_at = now()
    FROM next WHERE j.id = next.id RETURNING j.id, j.attempts
){claim_event}
SELECT array_agg(id)::text AS job_ids FROM claimed
"""
CLAIM_EVENT = """, ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'claimed', attempts, 'pgbench', '', '{{}}'::jsonb, now() FROM claimed
)"""
COMPLETE = """
WITH done AS (
    UPDATE jobs_job SET status = 'succeeded', locked_by = NULL, locked_until = NULL,
        finished_at = now(), updated_at = now()
    WHERE id = ANY(CAST(:job_ids AS uuid[])) AND status = 'running' AND locked_by = 'pgbench'
    RETURNING id, attempts
){complete_event}
SELECT count(*) FROM done
"""
COMPLETE_EVENT = """, ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'succeeded', attempts, 'pgbench', '', '{{}}'::jsonb, now() FROM done
)"""


def script(*, events: bool, batch: int = 1) -> str:
    claim = CLAIM.format(batch=batch, claim_event=CLAIM_EVENT.format() if events else "")
    complete = COMPLETE.format(complete_event=COMPLETE_EVENT.format() if events else "")
    one_line = lambda sql: " ".join(sql.split())  # noqa: E731  (pgbench wants one line each)
    return f"{one_line(claim)} \\gset\n{one_line(complete)};\n"


def run(url: str, *, jobs: int, clients: int = 8, events: bool = False, batch: int = 1) -> float:
    """Drain ``jobs`` seeded jobs with pgbench; return jobs per second."""
    truncate(url)
    per_client = max(1, jobs // (clients * batch))
    seed_queued(url, per_client * clients * batch)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script(events=events, batch=batch))
        path = Path(f.name)
    try:
        out = subprocess.run(
            [
                pg_bin("pgbench"),
                "-n",
                "-M",
                "prepared",
                "-c",
                str(clients),
                "-j",
                "2",
                "-t",
                str(per_client),
                "-f",
                str(path),
                url,
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        ).stdout
    finally:
        path.unlink()
    tps = float(re.search(r"tps = ([\d.]+)", out).group(1))
    return tps * batch  # one script run = one claim + one completion of `batch` jobs
