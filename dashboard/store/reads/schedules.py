"""What the pages, the API and ``flask schedules`` read of schedules: the rows, their next
slots (computed, not stored), and each one's newest runs by key prefix.

Bounded: the table holds one row per schedule the code declares (or once did), read up to
:data:`LIST_MAX`; the runs are at most ``runs`` per schedule, each one backward range of
``job_schedule_key_idx`` (``schedule_runs``), however many runs and jobs exist.

Two conditions of an active schedule need an operator (:func:`needing_attention`, the
Schedules page and the overview): *late*, its next run over :data:`LATE_AFTER` past and not
fired (no worker fires schedules: none alive, or all started with ``--no-schedules``; the
``JobQueueScheduleLate`` alert's test), and *failing*, every one of its newest finished runs
failed.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..flow import cron
from ..flow.schedules import is_name
from ..reading import reading
from ..sql import query

LIST, ONE, RUNS = query("schedule_list"), query("schedule_one"), query("schedule_runs")
LIST_MAX = 500
RUNS_SHOWN = 5
NEXT_SHOWN = 5
LATE_AFTER = timedelta(minutes=2)  # a worker fires a due schedule within a second


@dataclass(frozen=True)
class RunRow:
    """One run of a schedule: the job and how it went."""

    id: uuid.UUID
    type: str
    status: str
    attempts: int
    max_attempts: int
    idempotency_key: str
    created_at: datetime
    finished_at: datetime | None
    cancelled_at: datetime | None
    last_error: str

    @property
    def run_now(self) -> bool:
        """Enqueued by an operator's run now, not by a slot."""
        return ":now:" in self.idempotency_key


@dataclass(frozen=True)
class ScheduleRow:
    """A schedule row, with its last run's job status and (when read with them) its next
    slots and newest runs."""

    name: str
    cron: str
    timezone: str
    job_type: str
    payload: Any
    queue: str
    priority: int
    max_attempts: int
    missed: str
    paused: bool
    paused_by: str | None
    paused_at: datetime | None
    retired_at: datetime | None
    next_run_at: datetime | None
    last_run_at: datetime | None
    last_fired_at: datetime | None
    last_job_id: uuid.UUID | None
    last_job_status: str | None
    fired_count: int
    skipped_count: int
    declared_at: datetime
    updated_at: datetime
    # The unique options each run carries (``schedule(..., unique_key=...)``); None: none.
    # While a run holding the key is live (``unique_while``: ``queued``, or ``active`` for
    # queued or running; within ``unique_for`` seconds of its creation, None: no limit), a
    # due slot enqueues nothing.
    unique_key: str | None
    unique_for: float | None
    unique_while: str | None
    upcoming: list[datetime] = field(default_factory=list)
    runs: list[RunRow] = field(default_factory=list)

    @property
    def retired(self) -> bool:
        return self.retired_at is not None

    @property
    def state(self) -> str:
        """``retired``, ``paused`` or ``active``."""
        return "retired" if self.retired else "paused" if self.paused else "active"

    @property
    def words(self) -> str:
        """The expression in words with its zone (``At 06:00 every day (Europe/Berlin)``)."""
        return cron.describe(self.cron, self.timezone)

    @property
    def key_prefix(self) -> str:
        """What every run's idempotency key starts with: the search for its jobs."""
        return f"schedule:{self.name}:"

    def late(self, now: datetime) -> bool:
        """Active, and its next run more than :data:`LATE_AFTER` before ``now``, not fired."""
        return self.state == "active" and self.next_run_at is not None and now - self.next_run_at > LATE_AFTER

    @property
    def failed_runs(self) -> int:
        """How many of its newest finished runs (those read, ``runs``) failed in a row, when
        every one of them failed by its attempts (cancelled runs left out); else 0."""
        finished = [r for r in self.runs if r.status in ("succeeded", "failed") and r.cancelled_at is None]
        return len(finished) if finished and all(r.status == "failed" for r in finished) else 0

    @property
    def failing(self) -> bool:
        """Active, and every one of its newest finished runs failed (read with its ``runs``)."""
        return self.state == "active" and self.failed_runs > 0

    def health(self, now: datetime) -> str | None:
        """``late``, ``failing`` (late first: no run is made at all) or ``None``."""
        return "late" if self.late(now) else "failing" if self.failing else None


_ROW_FIELDS = [name for name in ScheduleRow.__dataclass_fields__ if name not in ("upcoming", "runs")]


def _row(values: Any, *, upcoming: int, runs: list[RunRow] | None = None) -> ScheduleRow:
    data = {name: values[name] for name in _ROW_FIELDS}
    row = ScheduleRow(**data, runs=runs or [])
    if upcoming and not row.retired and row.next_run_at is not None:
        try:
            first = row.next_run_at
            rest = cron.upcoming(row.cron, row.timezone, first, upcoming - 1)
            row.upcoming.extend([first, *rest])
        except cron.CronError:
            pass
    return row


def list_schedules(*, upcoming: int = NEXT_SHOWN, runs: int = 0) -> list[ScheduleRow]:
    """Every schedule by name, the retired ones last; with ``upcoming`` next slots each and its
    newest ``runs`` runs."""
    with reading() as conn:
        rows = list(conn.execute(LIST, {"limit": LIST_MAX}).mappings())
        found = _runs(conn, [row["name"] for row in rows], runs) if runs else {}
    return [_row(row, upcoming=upcoming, runs=found.get(row["name"])) for row in rows]


def needing_attention(now: datetime) -> list[ScheduleRow]:
    """The active schedules that are late or failing at ``now``, by name (each read with its
    newest :data:`RUNS_SHOWN` runs): what the overview's notice lists."""
    rows = list_schedules(upcoming=0, runs=RUNS_SHOWN)
    return [row for row in rows if row.health(now) is not None]


def get_schedule(name: str, *, upcoming: int = NEXT_SHOWN, runs: int = 0) -> ScheduleRow | None:
    """One schedule by name, or ``None`` (also for text that cannot be a name)."""
    if not is_name(name):
        return None
    with reading() as conn:
        row = conn.execute(ONE, {"name": name}).mappings().one_or_none()
        if row is None:
            return None
        found = _runs(conn, [name], runs) if runs else {}
    return _row(row, upcoming=upcoming, runs=found.get(name))


def _runs(conn: Any, names: Sequence[str], limit: int) -> dict[str, list[RunRow]]:
    found: dict[str, list[RunRow]] = {}
    if not names:
        return found
    for row in conn.execute(RUNS, {"names": list(names), "limit": limit}).mappings():
        values = {name: row[name] for name in RunRow.__dataclass_fields__}
        found.setdefault(row["schedule"], []).append(RunRow(**values))
    return found
