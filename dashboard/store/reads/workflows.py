"""What the pages and the API read of workflows: one workflow's jobs and counts, the recent
workflows, and one job's parents and dependents. Every read is capped (a workflow of 10,000
jobs is summarised, not read whole), through the partial indexes of migration 0018.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func

from ..connection import fetch_tuples
from ..models import Job
from ..reading import reading
from ..records import WAITING_YEAR
from ..sql import query
from ..states import WAITING_AT
from .lists import capped_count, types_matching

WORKFLOW_JOBS_CAP = 500  # jobs a workflow's page and API read; more are summarised by state
WORKFLOW_COUNT_CAP = 100_000  # index entries each of a workflow's counts reads (the API)
PAGE_COUNT_CAP = 20_000  # the same on its page, read again at every poll while it runs
DEPENDENTS_CAP = 100  # dependents a job's page lists
RECENT_SCAN = 5_000  # newest workflow jobs read for the recent workflows
RECENT_MAX = 25
MEMBERS_CAP = 12_000  # jobs a summary of a workflow too large to draw reads (a fan-in of 10,000)

JOBS, COUNTS, RECENT = query("workflow_jobs"), query("workflow_counts"), query("recent_workflows")
PARENTS, DEPENDENTS = query("job_parents"), query("job_dependents")
MEMBERS = query("workflow_members")
jobs = Job.__table__


@dataclass(frozen=True, slots=True)
class Node:
    """One job of a workflow, or a parent or dependent of a job, as the pages draw it."""

    id: uuid.UUID
    type: str
    status: str
    available_at: datetime
    waiting_on: int
    cancelled: bool
    finished_at: datetime | None
    depends_on: tuple[uuid.UUID, ...] = ()
    on_parent_failure: str | None = None
    workflow: str | None = None

    @property
    def waiting(self) -> bool:
        return self.status == "queued" and self.available_at.year == WAITING_YEAR

    @property
    def state(self) -> str:
        """``waiting`` or ``cancelled`` apart; otherwise the status."""
        if self.waiting:
            return "waiting"
        return "cancelled" if self.cancelled else self.status


def _node(row: Any) -> Node:
    return Node(
        id=row["id"],
        type=row["type"],
        status=row["status"],
        available_at=row["available_at"],
        waiting_on=row["waiting_on"],
        cancelled=row["cancelled_at"] is not None,
        finished_at=row["finished_at"],
        depends_on=tuple(row.get("depends_on") or ()),
        on_parent_failure=row.get("on_parent_failure"),
        workflow=row.get("workflow"),
    )


@dataclass(frozen=True)
class Counts:
    """A workflow's jobs by state: queued (ready, scheduled or backing off), waiting (for
    parents), running, succeeded, failed, cancelled (apart from failed); each up to the cap."""

    queued: int
    waiting: int
    running: int
    succeeded: int
    failed: int
    cancelled: int
    capped: bool  # some count reached WORKFLOW_COUNT_CAP

    @property
    def total(self) -> int:
        return self.queued + self.waiting + self.running + self.succeeded + self.failed + self.cancelled

    @property
    def ended(self) -> int:
        return self.succeeded + self.failed + self.cancelled

    def as_dict(self) -> dict[str, int]:
        return {
            "queued": self.queued,
            "waiting": self.waiting,
            "running": self.running,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "cancelled": self.cancelled,
        }


@dataclass(frozen=True)
class Workflow:
    name: str
    counts: Counts
    jobs: list[Node]  # at most WORKFLOW_JOBS_CAP, oldest first

    @property
    def complete(self) -> bool:
        """Every job it has read is in it: the jobs are the whole workflow."""
        return len(self.jobs) == self.counts.total and not self.counts.capped


def counts(workflow: str, *, cap: int = WORKFLOW_COUNT_CAP) -> Counts:
    with reading() as conn:
        rows = {row.status: row for row in conn.execute(COUNTS, {"workflow": workflow, "cap": cap})}
    queued, failed = rows["queued"], rows["failed"]
    return Counts(
        queued=queued.n - queued.waiting,
        waiting=queued.waiting,
        running=rows["running"].n,
        succeeded=rows["succeeded"].n,
        failed=failed.n - failed.cancelled,
        cancelled=failed.cancelled,
        capped=any(row.n >= cap for row in rows.values()),
    )


def workflow(name: str, *, cap: int = WORKFLOW_JOBS_CAP) -> Workflow | None:
    """The workflow ``name``: its counts and up to ``cap`` of its jobs; ``None`` if it has none."""
    found = counts(name)
    if found.total == 0:
        return None
    with reading() as conn:
        rows = conn.execute(JOBS, {"workflow": name, "cap": cap}).mappings().all()
    return Workflow(name=name, counts=found, jobs=[_node(row) for row in rows])


def recent(*, limit: int = RECENT_MAX, scan: int = RECENT_SCAN) -> list[tuple[str, Counts]]:
    """The workflows of the newest workflow jobs (at most ``scan`` read), newest first, each
    with its counts."""
    with reading() as conn:
        names = [row.workflow for row in conn.execute(RECENT, {"scan": scan, "limit": limit})]
    return [(name, counts(name, cap=1_000)) for name in names]


def parents(ids: Sequence[uuid.UUID]) -> list[Node]:
    """The parents of a job (its ``depends_on``), in that order; one gone is left out."""
    if not ids:
        return []
    with reading() as conn:
        found = {row["id"]: _node(row) for row in conn.execute(PARENTS, {"ids": list(ids)}).mappings()}
    return [found[i] for i in ids if i in found]


def dependents(job_id: uuid.UUID, *, cap: int = DEPENDENTS_CAP) -> list[Node]:
    """Up to ``cap`` jobs that wait (or waited) for ``job_id``, oldest first."""
    with reading() as conn:
        rows = conn.execute(DEPENDENTS, {"id": job_id, "cap": cap}).mappings().all()
    return [_node(row) for row in rows]


# One job of a workflow as its summary counts it: its id as text (a summary only matches ids),
# type, state (waiting and cancelled apart, as Node.state) and parents' ids. A plain tuple: a
# summary reads thousands, and a named tuple's construction was a quarter of their cost.
Member = tuple[str, str, str, Sequence[str]]


def members(name: str, *, cap: int = MEMBERS_CAP) -> list[Member]:
    """Up to ``cap`` jobs of the workflow ``name``, in no order (job_workflow_idx), each as
    ``(id, type, state, parents)``."""
    with reading() as conn:
        rows = fetch_tuples(conn, MEMBERS, {"workflow": name, "cap": cap})
    return [(id, kind, state, parents.split(",") if parents else ()) for id, kind, state, parents in rows]


def count_waiting(*, type: str | None = None, queue: str | None = None, cap: int) -> int:
    """The queued jobs waiting for their parents, with the job list's ``type`` (a substring)
    and ``queue`` filters, counted up to ``cap`` (the point ``available_at = WAITING_AT`` of
    job_queued_idx's two ranges, or of job_queued_type_idx's / job_queued_queue_idx's)."""
    with reading() as conn:
        types = types_matching(conn, type) if type else None
        return capped_count(conn, waiting_filter(types, queue), cap)


def waiting_filter(types: list[str] | None, queue: str | None) -> list[ColumnElement[bool]]:
    """The waiting jobs (of these ``types``, in this ``queue``) as WHERE clauses: one point of
    each of the two ranges of job_queued_idx's ``(least(attempts, 1), available_at)``."""
    where = [
        jobs.c.status == "queued",
        func.least(jobs.c.attempts, 1).in_([0, 1]),
        jobs.c.available_at == WAITING_AT,
    ]
    if types is not None:
        where.append(jobs.c.type.in_(types))
    if queue:
        where.append(jobs.c.queue == queue)
    return where
