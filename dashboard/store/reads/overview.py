"""The overview's detailed figures (``/api/jobs/stats/detail/``): the queued split into ready,
scheduled, retrying and waiting (for parents: queued at ``states.WAITING_AT``), the wait of
the oldest ready job, a per-type table, and per-minute charts of failures, waits and run times.

Every live count is bounded: it reads at most ``cap + 1`` index entries and past that says
"more than ``cap``" (:class:`Capped`). Indexes (migration 0008): job_queued_idx
``(least(attempts, 1), available_at) WHERE status = 'queued'``, job_queued_type_idx (the same
led by type), job_failure_type_idx ``(type, finished_at) WHERE status = 'failed' AND
cancelled_at IS NULL`` (migration 0010: a cancel is not a failure), job_timeout_idx for running,
jobs_jobevent_created_at_idx for the charts' hour: the claims and outcomes it holds (migration
0017), at most the newest :data:`~dashboard.limits.CHART_EVENTS_MAX` of them (:class:`Sampled`),
so no burst of another kind of event (a bulk enqueue's ``created`` events) can hide them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection

from ...config.rules import CHART_EVENTS_MAX, LIVE_COUNT_CAP, TYPE_COUNT_CAP, TYPES_SHOWN
from ..reading import in_index_order, reading
from ..sql import query
from .stats import JOB_TYPES_SQL, estimate


@dataclass(frozen=True)
class Capped:
    """A count read up to ``cap``: exact when ``value <= cap``, else "more than ``cap``", or,
    with the planner's ``estimate`` of the whole (when it is past the cap), "about N"."""

    value: int
    cap: int
    estimate: int | None = None

    @property
    def exact(self) -> bool:
        return self.value <= self.cap

    def __str__(self) -> str:
        if self.exact:
            return f"{self.value:,}"
        if self.estimate is not None and self.estimate > self.cap:
            return f"about {self.estimate:,}"
        return f"more than {self.cap:,}"

    def as_dict(self) -> dict[str, Any]:
        return {"count": min(self.value, self.cap), "exact": self.exact}


def _capped(count: int, cap: int) -> Capped:
    return Capped(min(count, cap + 1), cap)


GLOBAL_SPLIT = query("queued_split")
TYPE_ROWS_SQL = query("type_rows")
RUNNING_SQL = query("running_by_type")  # also /metrics' (reads/metrics.py)
# The planner's estimates of the global figures, asked only for a figure past its cap.
SPLIT_ESTIMATES = {
    "queued": query("estimate_queued"),
    "ready": query("estimate_ready"),
    "scheduled": query("estimate_scheduled"),
    "retrying": query("estimate_retrying"),
    "waiting": query("estimate_waiting"),
}


@dataclass(frozen=True)
class TypeRow:
    type: str
    ready: Capped
    running: int
    retrying: Capped
    failed_24h: Capped
    oldest_ready_at: datetime | None
    wait_seconds: float | None


@dataclass(frozen=True)
class QueueDetail:
    ready: Capped
    scheduled: Capped
    retrying: Capped
    running: Capped
    overdue_running: int
    oldest_ready_at: datetime | None
    oldest_ready_wait_seconds: float | None
    types: list[TypeRow] = field(default_factory=list)
    types_truncated: bool = False
    queued: Capped | None = None  # ready + scheduled + retrying + waiting
    # queued for parents (depends_on), never due until released
    waiting: Capped = field(default_factory=lambda: Capped(0, LIVE_COUNT_CAP))


def _split(conn: Connection, statement: Any, now: datetime, cap: int, **params: Any) -> dict[str, Any]:
    row = conn.execute(statement, {"now": now, "cap": cap + 1, **params}).mappings().one()
    return dict(row)


def _wait(now: datetime, at: datetime | None) -> float | None:
    return max(0.0, (now - at).total_seconds()) if at is not None else None


def queue_detail(
    now: datetime, *, cap: int = LIVE_COUNT_CAP, type_cap: int = TYPE_COUNT_CAP, estimates: bool = False
) -> QueueDetail:
    """The queued split, running, the oldest ready job and one row per type: each global
    count read up to ``cap``, each per-type count up to ``type_cap``. ``estimates``: a global
    figure past its cap also carries the planner's estimate of it (one EXPLAIN each, no rows
    read), and :attr:`QueueDetail.queued` is counted too."""
    with reading() as conn:
        split = _split(conn, GLOBAL_SPLIT, now, cap)
        running_rows = conn.execute(RUNNING_SQL, {"now": now, "cap": cap + 1}).mappings().all()
        running_by_type = {r["type"]: r["running"] for r in running_rows}
        names = list(conn.execute(JOB_TYPES_SQL).scalars())
        truncated = len(names) > TYPES_SHOWN
        rows = _type_rows(conn, names[:TYPES_SHOWN], now, type_cap, running_by_type)
        counts = {
            "ready": split["ready"],
            "scheduled": split["scheduled"],
            "retrying": split["retrying"],
            "waiting": split["waiting"],
        }
        counts["queued"] = sum(counts.values())
        guesses = {
            name: estimate(conn, SPLIT_ESTIMATES[name])
            for name, value in counts.items()
            if estimates and value > cap
        }
    figures = {name: Capped(min(value, cap + 1), cap, guesses.get(name)) for name, value in counts.items()}
    return QueueDetail(
        ready=figures["ready"],
        scheduled=figures["scheduled"],
        retrying=figures["retrying"],
        running=_capped(sum(running_by_type.values()), cap),
        overdue_running=sum(r["overdue"] for r in running_rows),
        oldest_ready_at=split["oldest_ready_at"],
        oldest_ready_wait_seconds=_wait(now, split["oldest_ready_at"]),
        types=rows,
        types_truncated=truncated,
        queued=figures["queued"],
        waiting=figures["waiting"],
    )


def _type_rows(
    conn: Connection, names: list[str], now: datetime, cap: int, running: dict[str, int]
) -> list[TypeRow]:
    if not names:
        return []
    params = {"types": names, "now": now, "since": now - timedelta(hours=24), "cap": cap + 1}
    with in_index_order(conn):
        rows = list(conn.execute(TYPE_ROWS_SQL, params).mappings())
    return [
        TypeRow(
            type=row["type"],
            ready=_capped(row["ready"], cap),
            running=running.get(row["type"], 0),
            retrying=_capped(row["retrying"], cap),
            failed_24h=_capped(row["failed"], cap),
            oldest_ready_at=row["oldest_ready_at"],
            wait_seconds=_wait(now, row["oldest_ready_at"]),
        )
        for row in rows
    ]


@dataclass(frozen=True)
class MinuteFigures:
    minute: datetime
    succeeded: int
    failed: int
    wait_p50_ms: float | None
    wait_p95_ms: float | None

    @property
    def failure_rate(self) -> float | None:
        done = self.succeeded + self.failed
        return self.failed / done if done else None


@dataclass(frozen=True)
class RunTime:
    type: str
    runs: int
    p50_ms: float
    p95_ms: float


T = TypeVar("T")


@dataclass(frozen=True)
class Sampled(Generic[T]):
    """A chart's figures, read from at most the newest ``cap`` claims and outcomes of its window.

    ``sampled``: the window held ``cap`` of them or more, so older ones were not read and the
    figures describe the newest only (the page and the API say so). ``counted_from``: per
    minute figures, the first minute that read covered whole; the ones before it are left out,
    never shown in part."""

    items: list[T]
    sampled: bool
    cap: int
    counted_from: datetime | None = None


FIGURES_SQL = query("hour_figures")

MINUTES = 60  # the overview's charts: the last hour, minute by minute


@dataclass(frozen=True)
class Figures:
    """The charts' figures of a window, from one read of its newest claims and outcomes: per
    minute (``minutes``), and the run times per job type (``run_times``)."""

    minutes: Sampled[MinuteFigures]
    run_times: Sampled[RunTime]


def hour_window(now: datetime) -> tuple[datetime, datetime]:
    """The ``MINUTES`` whole minutes ending with the current (partial) one: the range every
    hour chart reads (the overview and ``/api/jobs/stats/detail/`` alike)."""
    current = now.replace(second=0, microsecond=0)
    return current - timedelta(minutes=MINUTES - 1), current + timedelta(minutes=1)


def hour_figures(now: datetime, *, cap: int | None = None) -> Figures:
    """The hour's charts (the overview and ``/api/jobs/stats/detail/`` alike): per minute over
    :func:`hour_window`, and the run times of the attempts that ended in the hour before
    ``now``, up to the end of that window."""
    start, until = hour_window(now)
    return figures(now - timedelta(minutes=MINUTES), until, minutes_since=start, cap=cap)


def figures(
    since: datetime, until: datetime, *, minutes_since: datetime | None = None, cap: int | None = None
) -> Figures:
    """From at most the newest ``cap`` claims and outcomes (default
    :data:`~dashboard.limits.CHART_EVENTS_MAX`) of ``[since, until)``, in one statement:
    finished, failed and claim waits per minute from ``minutes_since`` (default ``since``;
    empty minutes absent), and run time p50 / p95 per job type of the attempts that ended in
    the window. Events of other kinds are not read. Past the cap, only the minutes the read
    covered whole (:attr:`Sampled.counted_from`)."""
    cap = CHART_EVENTS_MAX if cap is None else cap
    first = since if minutes_since is None else max(since, minutes_since)
    params = {"since": since, "until": until, "minutes_since": first, "types": TYPES_SHOWN, "cap": cap}
    with reading() as conn:
        rows = conn.execute(FIGURES_SQL, params).mappings().all()
    read: int = rows[0]["events_read"] if rows else 0
    oldest: datetime | None = rows[0]["oldest_read"] if rows else None
    counted_from = None
    if read >= cap and oldest is not None:  # the read stopped inside that minute: from the next
        counted_from = oldest.replace(second=0, microsecond=0) + timedelta(minutes=1)
    minutes = [
        MinuteFigures(r["minute"], r["succeeded"], r["failed"], r["p50"], r["p95"])
        for r in rows
        if r["minute"] is not None and (counted_from is None or r["minute"] >= counted_from)
    ]
    runs = [RunTime(r["run_type"], r["runs"], r["p50"], r["p95"]) for r in rows if r["run_type"] is not None]
    return Figures(
        minutes=Sampled(minutes, counted_from is not None and counted_from > first, cap, counted_from),
        run_times=Sampled(runs, read >= cap, cap),
    )
