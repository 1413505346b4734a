"""Claiming: queued -> running, ``attempts + 1``, a lease, and a ``claimed`` event, in one
statement (``claim.sql``) per call, in one of the forms :mod:`.claim_form` chooses.

A claim takes explicit inputs (the worker ids, the lease, ``now``, the served queues) and
returns the claimed jobs as plain records; an empty list is no job due, not an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection

import dashboard.store.lifecycle.claim_form as claim_form

from ...config.rules import queue_problem
from ..connection import autocommit, fetch_rows
from ..records import JobRecord
from ..sql import query
from .fencing import given_now

CLAIM, CLAIM_ONE = query("claim"), query("claim_one")
CLAIM_NO_LIMITS, CLAIM_ONE_NO_LIMITS = query("claim_no_limits"), query("claim_one_no_limits")


def claim_jobs(
    worker_id: str,
    *,
    lease_seconds: float,
    limit: int = 1,
    now: datetime | None = None,
    conn: Connection | None = None,
    avoid_expired: bool = False,
    queues: Sequence[str] | None = None,
    forms: claim_form.ClaimForms | None = None,
) -> list[JobRecord]:
    """Claim up to ``limit`` eligible jobs for ``worker_id``: within a queue the highest
    priority first, the queues in a random order (:func:`claim_batch`).

    ``now``: the claim's time; unset, the database's clock when the statement runs (claim.sql),
    which is also what the lease is measured from (as for every worker-side call below).
    ``queues`` and ``forms``: as :func:`claim_batch`."""
    return claim_batch(
        [worker_id] * limit,
        lease_seconds=lease_seconds,
        now=now,
        conn=conn,
        avoid_expired=avoid_expired,
        queues=queues,
        forms=forms,
    )


def claim_batch(
    worker_ids: Sequence[str],
    *,
    lease_seconds: float,
    now: datetime | None = None,
    conn: Connection | None = None,
    avoid_expired: bool = False,
    queues: Sequence[str] | None = None,
    forms: claim_form.ClaimForms | None = None,
) -> list[JobRecord]:
    """Claim up to one job per id in ``worker_ids`` in one statement.

    ``queues``: the named queues served (``None``: every queue); a paused queue, or one whose
    concurrency or rate limit is reached, gives nothing. Within a queue, jobs come in claim
    order (priority, then the oldest due); the queues are visited in a random order, each
    claim anew (claim.sql).
    The n-th claimed job is locked by the n-th id: a worker process claims for all its idle
    threads at once, and each job still belongs to the thread that will run it.
    ``avoid_expired``: skip jobs whose last attempt's lease expired (a worker process passes
    it while one of its threads runs an attempt past its lease, see ``runtime.attempts``).
    ``forms``: what the process knows of its queues' limits, which picks the claim's form
    (:class:`.claim_form.ClaimForms`, one per worker process); ``None``: ``claim_form.DEFAULT``.
    """
    if not worker_ids:
        return []
    params = {
        "worker_ids": list(worker_ids),
        "now": given_now(now),
        "lease_seconds": float(lease_seconds),
        "avoid_expired": avoid_expired,
        "queues": served_queues(queues),
    }
    served = claim_form.served_key(queues)
    if forms is None:
        forms = claim_form.DEFAULT
    one = len(worker_ids) == 1
    with autocommit(conn) as conn:
        if forms.current(conn, served, params, recheck_closed=False):
            rows = fetch_rows(conn, CLAIM_ONE if one else CLAIM, params)
            return [JobRecord.from_row(row) for row in rows]
        statement = CLAIM_ONE_NO_LIMITS if one else CLAIM_NO_LIMITS
        rows = forms.claim_without_limits(conn, served, statement, params)
        jobs = [JobRecord.from_row(row) for row in rows if row["id"] is not None]
        rest = list(worker_ids[len(jobs) :])
        if rest and forms.is_open(served):
            # A queue with a limit could give a job and this claim skipped it: the rest of
            # the ids claim again, once, with the limits.
            more = fetch_rows(conn, CLAIM_ONE if len(rest) == 1 else CLAIM, {**params, "worker_ids": rest})
            jobs += [JobRecord.from_row(row) for row in more]
    return jobs


def claim_next_job(
    worker_id: str,
    *,
    lease_seconds: float,
    now: datetime | None = None,
    conn: Connection | None = None,
    queues: Sequence[str] | None = None,
    forms: claim_form.ClaimForms | None = None,
) -> JobRecord | None:
    """Claim the next eligible job: queued -> running, ``attempts + 1``, lease set."""
    jobs = claim_jobs(
        worker_id, lease_seconds=lease_seconds, limit=1, now=now, conn=conn, queues=queues, forms=forms
    )
    return jobs[0] if jobs else None


def served_queues(queues: Sequence[str] | None) -> list[str] | None:
    """The claim's ``:queues``: the names, checked, or ``None`` for every queue."""
    if queues is None:
        return None
    if isinstance(queues, str) or not queues:
        raise ValueError("queues must be a non-empty list of queue names, or None for every queue")
    for name in queues:
        if problem := queue_problem(name):
            raise ValueError(f"queues: {name!r} {problem}")
    return list(queues)
