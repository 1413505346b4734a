"""The settle statements: how a worker records the end of an attempt (split out of ``sql.py``
when issue 20 added their progress variants; ``sql.py`` keeps claim, renewal, progress,
cleanup and retry).

Each settle is fenced by ``sql.OWNED`` and writes the job and its events in one statement.
With pending progress reports (``runtime/progress.py`` coalesces a handler's reports instead
of committing each), the same INSERT writes them first: a jsonb array of
``{message, data, created_at}`` per settled job, inserted only for rows the fenced UPDATE
matched, so a lost attempt writes no progress either. Each statement exists without
(``COMPLETE``) and with (``COMPLETE_PROGRESS``) the reports.

Events of one statement come out of ONE ``INSERT ... SELECT ... ORDER BY``, so ids follow the
causal order (two sibling INSERT CTEs run in no defined order): per job, its progress reports,
then its terminal event; in settle-and-claim, then the next job's ``claimed``, stamped 1 µs
after the statement's time (``sql.NOW``: the database's clock, or ``:now`` when a test passes
one). A report's ``created_at`` is its own time, never later than the statement's, so
created_at is non-decreasing in the same order.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, Text, TextClause, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from .sql import CLAIM_FACTS, CLAIM_ROWS, NOW, OWNED, run_facts

# What a success writes: COMPLETE and COMPLETE_AND_CLAIM (COMPLETE_MANY, the same per row).
SUCCEED = (
    "status = 'succeeded', result = :result, locked_by = NULL, locked_until = NULL, "
    f"finished_at = {NOW}, updated_at = {NOW}"
)
# Every outcome's data carries the job's type and the attempt's run time (issue 18, the
# overview's charts): sql.run_facts over the settled row ``s``, so its RETURNING has id,
# attempts and type.
# ``:started_at`` (the attempt's start, NULL when the caller does not know it) spares the
# read of the attempt's ``claimed`` event.
_RUN = run_facts("s", "CAST(:started_at AS timestamptz)")
_SUCCEEDED = f"'succeeded', 'Job succeeded', {_RUN}"
_SUCCEEDED_MANY = f"'succeeded', 'Job succeeded', {run_facts('s', 's.started_at')}"
_SUCCEEDED_WITH = f"'succeeded', 'Job succeeded', CAST(:event_data AS jsonb) || {_RUN}"
_FAILED = f"""CASE WHEN s.status = 'queued' THEN 'retry_scheduled' ELSE 'failed' END, :error,
               CASE WHEN s.status = 'queued'
                    THEN :event_data || jsonb_build_object(
                        'retry_at', s.available_at, 'retry_in_seconds', :delay)
                    ELSE :event_data END || {_RUN}"""
_COLUMNS = "(job_id, type, attempt, worker_id, message, data, created_at)"


def _settle_events(rows: str, worker: str, terminal: str, progress: str | None, order: str = "") -> str:
    """Rows of (key, part, n, job_id, type, message, data, attempt, worker_id, created_at) for every
    row ``s`` of ``rows``: its progress reports (``progress``, a jsonb array expression, or
    none), then its terminal event (``terminal``: type, message, data). ``order`` is the
    settled rows' own order key (COMPLETE_MANY: the submission order)."""
    key = order or "0"
    terminal_row = (
        f"SELECT {key} AS key, 1 AS part, 0 AS n, s.id, {terminal}, s.attempts, CAST({worker} AS text), "
        f"{NOW} FROM {rows} AS s"
    )
    if progress is None:
        return terminal_row
    return f"""SELECT {key}, 0, p.n, s.id, 'progress', p.e->>'message', p.e->'data', s.attempts,
               CAST({worker} AS text),
               LEAST(CAST(p.e->>'created_at' AS timestamptz), {NOW})
        FROM {rows} AS s CROSS JOIN LATERAL jsonb_array_elements({progress}) WITH ORDINALITY AS p(e, n)
        UNION ALL
        {terminal_row}"""


def _insert(selects: str) -> str:
    return f"""INSERT INTO jobs_jobevent {_COLUMNS}
        SELECT job_id, type, attempt, worker_id, message, data, created_at FROM (
        {selects}
        ) AS e(key, part, n, job_id, type, message, data, attempt, worker_id, created_at)
        ORDER BY key, part, n"""


def _jsonb(*names: str) -> list[Any]:
    return [bindparam(name, type_=JSONB) for name in names]


def _complete(progress: bool) -> TextClause:
    events = _settle_events("done", ":worker_id", _SUCCEEDED_WITH, ":progress" if progress else None)
    return text(
        f"""
    WITH done AS (
        UPDATE jobs_job SET {SUCCEED}
        WHERE {OWNED}
        RETURNING *
    ), ev AS (
        {_insert(events)}
    )
    SELECT * FROM done
    """
    ).bindparams(*_jsonb("result", "event_data", *(["progress"] if progress else [])))


# One-job mode's settle-and-claim: a thread that has just run a job records its success and
# claims its next job in one statement, so a job costs one round trip and one commit instead
# of two. The two halves are independent: the completion is fenced exactly as COMPLETE (a lost
# attempt records nothing, and the claim still happens), and the claim is CLAIM_ONE's own
# steps (the job just completed is no longer queued, so it cannot be picked again).
# Always one row: ``completed`` (0 or 1) and the claimed job's columns, NULL when the queue
# had nothing eligible.
# Events in causal order (issue 14), one INSERT ... ORDER BY: the finished job's progress
# reports, its success, then the next job's ``claimed``, stamped 1 µs after the statement's time
# (sql.NOW) so created_at orders them the same way; the job row's own times (updated_at,
# locked_until) keep the statement's time.
# Index: job_claim_idx, as CLAIM.
def _complete_and_claim(progress: bool) -> TextClause:
    events = _settle_events("done", "CAST(:worker_id AS text)", _SUCCEEDED, ":progress" if progress else None)
    claimed = (
        "\n        UNION ALL\n        SELECT 1, 0, 0, id, 'claimed', 'Claimed by worker', "
        f"{CLAIM_FACTS}, attempts, locked_by, "
        f"{NOW} + interval '1 microsecond' FROM claimed"
    )
    return text(
        f"""
    WITH done AS (
        UPDATE jobs_job SET {SUCCEED}
        WHERE {OWNED}
        RETURNING id, attempts, type
    ), {CLAIM_ROWS.format(limit="1")}, ev AS (
        {_insert(events + claimed)}
    )
    SELECT (SELECT count(*) FROM done) AS completed, claimed.*
    FROM (VALUES (1)) AS one LEFT JOIN claimed ON true
    """
    ).bindparams(
        bindparam("worker_ids", type_=ARRAY(Text)), *_jsonb("result", *(["progress"] if progress else []))
    )


# Batch mode's completer: many successes in one statement, each row still fenced by its own
# owner and attempt. RETURNING lists the jobs that were still ours; the others were lost.
# A row's ``started_at`` (the attempt's start, when the caller knows it) gives ``run_ms`` without
# reading the attempt's ``claimed`` event (sql.run_facts).
# Events get their ids in the order the successes were submitted (n), each job's progress first.
def _complete_many(progress: bool) -> TextClause:
    extra = ", progress jsonb" if progress else ""
    progress_column = ", input.progress" if progress else ""
    events = _settle_events("done", "s.worker_id", _SUCCEEDED_MANY, "s.progress" if progress else None, "s.n")
    return text(
        f"""
    WITH input AS (
        SELECT r.*, row_number() OVER () AS n
        FROM jsonb_to_recordset(:rows) AS r(id uuid, worker_id text, attempt integer, result jsonb,
                                            started_at timestamptz{extra})
    ), done AS (
        UPDATE jobs_job AS j
        SET status = 'succeeded', result = input.result, locked_by = NULL, locked_until = NULL,
            finished_at = {NOW}, updated_at = {NOW}
        FROM input
        WHERE j.id = input.id AND j.status = 'running' AND j.locked_by = input.worker_id
          AND j.attempts = input.attempt
        RETURNING j.id, j.attempts, j.type, input.worker_id, input.n, input.started_at{progress_column}
    ), ev AS (
        {_insert(events)}
    )
    SELECT id FROM done
    """
    ).bindparams(*_jsonb("rows"))


# Requeue with backoff while attempts remain, else fail for good.
def _fail(progress: bool) -> TextClause:
    events = _settle_events("failed", ":worker_id", _FAILED, ":progress" if progress else None)
    return text(
        f"""
    WITH failed AS (
        UPDATE jobs_job
        SET status = CASE WHEN attempts < max_attempts THEN 'queued' ELSE 'failed' END,
            available_at = CASE WHEN attempts < max_attempts
                                THEN {NOW} + make_interval(secs => CAST(:delay AS float8))
                                ELSE available_at END,
            finished_at = CASE WHEN attempts < max_attempts THEN NULL ELSE {NOW} END,
            locked_by = NULL, locked_until = NULL, last_error = :error, updated_at = {NOW}
        WHERE {OWNED}
        RETURNING *
    ), ev AS (
        {_insert(events)}
    )
    SELECT * FROM failed
    """
    ).bindparams(bindparam("delay", type_=Float), *_jsonb("event_data", *(["progress"] if progress else [])))


# Each settle with (…_PROGRESS) and without pending progress reports.
COMPLETE, COMPLETE_PROGRESS = _complete(False), _complete(True)
COMPLETE_AND_CLAIM, COMPLETE_AND_CLAIM_PROGRESS = _complete_and_claim(False), _complete_and_claim(True)
COMPLETE_MANY, COMPLETE_MANY_PROGRESS = _complete_many(False), _complete_many(True)
FAIL, FAIL_PROGRESS = _fail(False), _fail(True)
