"""The overview's detailed figures (``/api/jobs/stats/detail/``): the queued split into ready,
scheduled and retrying, the wait of the oldest ready job, a per-type table, and per-minute
charts of failures, waits and run times.

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

from sqlalchemy import Connection, text

from ...limits import CHART_EVENTS_MAX, LIVE_COUNT_CAP, TYPE_COUNT_CAP, TYPES_SHOWN
from ..reading import in_index_order, reading
from ..states import CHART_EVENTS
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


# ``least(attempts, 1)``: 0 for a job never run, 1 for one that failed before (a retry).
# Each capped count walks its index range in order (ORDER BY available_at), so it stops at
# the cap: a bitmap scan would read the whole range first (500,000 entries for a burst). Ready
# jobs are two ranges (first runs, due retries) counted as one: the second is read only while
# the first held fewer than the cap (an Append under the outer LIMIT).
READY_COUNT = """
      (SELECT count(*) FROM (
          (SELECT 1 FROM jobs_job WHERE status = 'queued' {type}
              AND least(attempts, 1) = 0 AND available_at <= :now ORDER BY available_at LIMIT :cap)
          UNION ALL
          (SELECT 1 FROM jobs_job WHERE status = 'queued' {type}
              AND least(attempts, 1) = 1 AND available_at <= :now ORDER BY available_at LIMIT :cap)
          LIMIT :cap) AS r) AS ready"""
QUEUED_SPLIT_SQL = (
    "SELECT"
    + READY_COUNT
    + """,
      (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' {type}
          AND least(attempts, 1) = 0 AND available_at > :now
          ORDER BY available_at LIMIT :cap) AS r) AS scheduled,
      (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' {type}
          AND least(attempts, 1) = 1 AND available_at > :now
          ORDER BY available_at LIMIT :cap) AS r) AS retrying,
      LEAST(
        (SELECT min(available_at) FROM jobs_job WHERE status = 'queued' {type}
            AND least(attempts, 1) = 0 AND available_at <= :now),
        (SELECT min(available_at) FROM jobs_job WHERE status = 'queued' {type}
            AND least(attempts, 1) = 1 AND available_at <= :now)) AS oldest_ready_at
"""
)
GLOBAL_SPLIT = text(QUEUED_SPLIT_SQL.format(type=""))
# One row per job type of :types, in their order, in one statement (planned once, one round
# trip): ready (first runs and retries), retrying, the oldest ready job, failures of the last
# 24 hours (cancels left out). job_queued_type_idx and job_failure_type_idx, one bounded range each.
TYPE_ROWS_SQL = text(
    "SELECT t.type,"
    + READY_COUNT.format(type="AND type = t.type")
    + """,
      (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' AND type = t.type
          AND least(attempts, 1) = 1 AND available_at > :now
          ORDER BY available_at LIMIT :cap) AS r) AS retrying,
      LEAST(
        (SELECT min(available_at) FROM jobs_job WHERE status = 'queued' AND type = t.type
            AND least(attempts, 1) = 0 AND available_at <= :now),
        (SELECT min(available_at) FROM jobs_job WHERE status = 'queued' AND type = t.type
            AND least(attempts, 1) = 1 AND available_at <= :now)) AS oldest_ready_at,
      (SELECT count(*) FROM (SELECT 1 FROM jobs_job
          WHERE status = 'failed' AND cancelled_at IS NULL AND type = t.type
            AND finished_at >= :since LIMIT :cap) AS f) AS failed
    FROM unnest(CAST(:types AS text[])) WITH ORDINALITY AS t(type, n)
    ORDER BY t.n
    """
)
# The planner's estimates of the global figures, asked only for a figure past its cap.
_QUEUED = "SELECT 1 FROM jobs_job WHERE status = 'queued'"
SPLIT_ESTIMATES = {
    "queued": _QUEUED,
    "ready": _QUEUED + " AND available_at <= now()",
    "scheduled": _QUEUED + " AND least(attempts, 1) = 0 AND available_at > now()",
    "retrying": _QUEUED + " AND least(attempts, 1) = 1 AND available_at > now()",
}
# Running and overdue per type, at most :cap running rows, the oldest leases first (so the
# overdue ones are always among them): job_timeout_idx in order. Also /metrics' (reads/metrics.py).
RUNNING_SQL = text(
    """
    SELECT type, count(*) AS running, count(*) FILTER (WHERE locked_until < :now) AS overdue
    FROM (SELECT type, locked_until FROM jobs_job WHERE status = 'running'
          ORDER BY locked_until LIMIT :cap) AS r
    GROUP BY type
    """
)


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
    queued: Capped | None = None  # ready + scheduled + retrying


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


# One read of the window's newest :cap claims and outcomes (states.CHART_EVENTS), newest first:
# jobs_jobevent_created_at_idx, which holds those kinds only (migration 0017), read backwards and
# stopped by the LIMIT, so a busy hour costs at most :cap index entries and rows, and no other
# kind of event (a bulk enqueue's `created` events, progress reports) is read or can crowd them
# out (the type filters after the limit only split them). The kinds are written into the
# statement, not bound, so every plan can prove the index's predicate. Two figures come out of
# it: per minute from :minutes_since, the outcomes and the waits the claims recorded (claim.sql:
# ``wait_ms``); per job type, the run times the outcomes recorded (settle.sql: ``run_ms`` and
# ``type``). Each row is one or the other (``minute`` or ``run_type`` set); ``events_read`` and
# ``oldest_read`` come back on every row, and alone when nothing matched.
FIGURES_SQL = text(
    """
    WITH recent AS MATERIALIZED (
        SELECT created_at, type, data FROM jobs_jobevent
        WHERE type IN ({kinds}) AND created_at >= :since AND created_at < :until
        ORDER BY created_at DESC
        LIMIT :cap
    ), minutes AS (
        SELECT date_trunc('minute', created_at) AS minute,
               count(*) FILTER (WHERE type = 'succeeded') AS succeeded,
               count(*) FILTER (WHERE type = 'failed') AS failed,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY (data->>'wait_ms')::float8)
                   FILTER (WHERE type = 'claimed') AS wait_p50,
               percentile_cont(0.95) WITHIN GROUP (ORDER BY (data->>'wait_ms')::float8)
                   FILTER (WHERE type = 'claimed') AS wait_p95
        FROM recent
        WHERE created_at >= :minutes_since AND type IN ('succeeded', 'failed', 'claimed')
        GROUP BY 1
    ), runs AS (
        SELECT data->>'type' AS run_type, count(*) AS runs,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY (data->>'run_ms')::float8) AS p50,
               percentile_cont(0.95) WITHIN GROUP (ORDER BY (data->>'run_ms')::float8) AS p95
        FROM recent
        WHERE type IN ('succeeded', 'failed', 'retry_scheduled')
          AND jsonb_typeof(data->'run_ms') = 'number' AND jsonb_typeof(data->'type') = 'string'
        GROUP BY 1 ORDER BY 1
        LIMIT :types
    ), figures AS (
        SELECT minute, NULL AS run_type, succeeded, failed, wait_p50 AS p50, wait_p95 AS p95,
               NULL::bigint AS runs
        FROM minutes
        UNION ALL
        SELECT NULL, run_type, NULL, NULL, p50, p95, runs FROM runs
    )
    SELECT (SELECT count(*) FROM recent) AS events_read,
           (SELECT min(created_at) FROM recent) AS oldest_read,
           figures.*
    FROM (VALUES (1)) AS one LEFT JOIN figures ON true
    ORDER BY figures.minute, figures.run_type
    """.format(kinds=", ".join(f"'{kind}'" for kind in CHART_EVENTS))
)

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
