"""Recurring jobs: declarations synced into ``jobs_schedule``, due slots fired exactly once,
and the operator's pause, resume and run now.

A run is an ordinary job created by ``create`` (create.sql: its ``created`` event, the
idempotency key, the wake-up), keyed ``schedule:{name}:{slot}`` (:func:`run_key`). Firing
(:func:`fire_due`) is one transaction: lock the due rows ``FOR UPDATE SKIP LOCKED``, create
each due slot's run, advance ``next_run_at``. So any number of worker processes may fire with
no leader: a row is fired by one transaction at a time, a committed fire leaves the row not
due, and a fire that dies before it commits (a worker killed mid-tick) leaves the row as it was
for the next worker. The key makes a slot's run unique even past that: a slot whose run exists
(its key is taken) is not created again.

"Due" is judged by the database's clock (``schedule_lock_due`` reads it), never the host's:
worker hosts' clocks drift. The slots are cron.py's. Tests pass ``now=`` to move the clock.
"""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection

from ...config.rules import MISSED_ALL_MAX, SCHEDULE_NAME_PATTERN
from .. import planner_stats
from ..connection import autocommit, fetch_job, fetch_rows, transaction
from ..lifecycle import unique
from ..lifecycle.spec import JobSpec, new_record, row_params
from ..records import JobRecord
from ..sql import query
from ..values import aware
from . import cron

CLOCK, DECLARE = query("schedule_clock"), query("schedule_declare")
RETIRE_OTHERS = query("schedule_retire_others")
LOCK_DUE, ADVANCE = query("schedule_lock_due"), query("schedule_advance")
NEXT_DUE = query("schedule_next_due")
LOCK_ONE, SET_PAUSED = query("schedule_lock_one"), query("schedule_set_paused")
CREATE, FIND_BY_KEY = query("create"), query("find_by_idempotency_key")

KEY_PREFIX = "schedule:"
_NAME = re.compile(SCHEDULE_NAME_PATTERN)


def is_name(name: str) -> bool:
    """Whether ``name`` can be a schedule's (limits.SCHEDULE_NAME_PATTERN): any other text,
    one with NUL included, names no schedule and is never sent to the database."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


FIRE_BATCH = 10  # schedules locked per fire transaction


def run_key(name: str, slot: datetime) -> str:
    """The idempotency key of the run of ``name`` at ``slot``: ``schedule:{name}:{slot}``."""
    return f"{KEY_PREFIX}{name}:{cron.slot_text(slot)}"


def run_now_key(name: str, now: datetime) -> str:
    """The key of a run now, outside the slots: its schedule's prefix, then the time it was
    asked for (so it sorts among the slots' runs by time) and a random tail (two in one
    microsecond stay two): ``schedule:{name}:2026-12-01T21:40:24.123456Z:now:1a2b3c4d``."""
    when = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{KEY_PREFIX}{name}:{when}:now:{secrets.token_hex(4)}"


def schedule_of_key(key: str | None) -> str | None:
    """The schedule a run's idempotency key names, or ``None`` for any other key."""
    if not key or not key.startswith(KEY_PREFIX):
        return None
    name, sep, _rest = key[len(KEY_PREFIX) :].partition(":")
    return name if sep and name else None


@dataclass(frozen=True)
class Declaration:
    """A schedule as the code declares it, its defaults resolved (zone, attempts, queue)."""

    name: str
    cron: str
    timezone: str
    job_type: str
    payload: Any
    queue: str
    priority: int
    max_attempts: int
    missed: str = "latest"
    # The unique options each run carries (lifecycle/unique.py); None: none.
    unique_key: str | None = None
    unique_for: float | None = None
    unique_while: str | None = None


@dataclass(frozen=True)
class SyncResult:
    declared: list[str]
    retired: list[str]  # rows this sync retired (declared before, not any more)


def sync(declarations: Sequence[Declaration], *, now: datetime | None = None) -> SyncResult:
    """Upsert every declaration and retire every other active schedule, in one transaction.

    A new schedule's first run is its first slot after now (the database's clock); an
    existing one keeps its next run unless its timing changed (see ``schedule_declare``).
    Checks each expression and zone first (:class:`cron.CronError`, naming the schedule)."""
    for d in declarations:
        try:
            cron.check(d.cron, d.timezone)
        except cron.CronError as problem:
            raise cron.CronError(f"schedule {d.name!r}: {problem}") from None
    with autocommit(None) as conn, transaction(conn):
        clock = fetch_rows(conn, CLOCK, {"now": now})[0]["now"]
        for d in sorted(declarations, key=lambda d: d.name):  # one lock order for racing syncs
            params = {
                "name": d.name,
                "cron": d.cron,
                "timezone": d.timezone,
                "job_type": d.job_type,
                "payload": {} if d.payload is None else d.payload,
                "queue": d.queue,
                "priority": d.priority,
                "max_attempts": d.max_attempts,
                "missed": d.missed,
                "unique_key": d.unique_key,
                "unique_for": d.unique_for,
                "unique_while": d.unique_while if d.unique_key is not None else None,
                "next_run_at": cron.next_slot(d.cron, d.timezone, clock),
                "now": clock,
            }
            fetch_rows(conn, DECLARE, params)
        names = [d.name for d in declarations]
        retired = fetch_rows(conn, RETIRE_OTHERS, {"names": names, "now": clock})
    return SyncResult(declared=sorted(names), retired=sorted(row["name"] for row in retired))


@dataclass(frozen=True)
class Run:
    """One slot a fire enqueued (``created``) or found enqueued already (its key was taken)."""

    slot: datetime
    job_id: uuid.UUID
    created: bool


@dataclass(frozen=True)
class Fired:
    """What one fire did to one schedule."""

    name: str
    runs: list[Run] = field(default_factory=list)
    skipped: int = 0  # due slots left out by the missed-run policy (a lower bound if capped)
    next_run_at: datetime | None = None
    error: str | None = None  # the row could not be fired (its expression); it was left as it was


def fire_due(
    *,
    worker_id: str | None = None,
    limit: int = FIRE_BATCH,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> list[Fired]:
    """Fire up to ``limit`` due schedules in one transaction; what each did.

    For each due row (locked ``FOR UPDATE SKIP LOCKED``: one another transaction holds is
    not waited for), its due slots from ``next_run_at`` to now by its missed-run policy
    (``latest``: the newest; ``all``: each, at most ``MISSED_ALL_MAX``, the older ones counted
    as skipped), each created as a job keyed by its slot, and the row advanced to its next
    slot after now, with the newest run's slot and job and the counters. All or nothing: if
    the transaction does not commit, no run exists and no row moved.
    """
    if now is not None:
        now = aware(now, "now")
    results: list[Fired] = []
    created = 0
    with autocommit(conn) as conn:
        with transaction(conn):
            for row in fetch_rows(conn, LOCK_DUE, {"now": now, "limit": limit}):
                fired = _fire_one(conn, row, worker_id)
                created += sum(1 for run in fired.runs if run.created)
                results.append(fired)
        if created:
            planner_stats.after_insert(created, conn)
    return results


def _fire_one(conn: Connection, row: dict[str, Any], worker_id: str | None) -> Fired:
    name, clock = row["name"], row["clock"]
    try:
        due = cron.due(row["cron"], row["timezone"], row["next_run_at"], clock, row["missed"], MISSED_ALL_MAX)
    except cron.CronError as problem:
        return Fired(name=name, error=str(problem), next_run_at=row["next_run_at"])
    runs = [_enqueue_run(conn, row, slot, clock, worker_id) for slot in due.slots]
    newest = runs[-1] if runs else None
    fetch_rows(
        conn,
        ADVANCE,
        {
            "name": name,
            "next_run_at": due.next_run_at,
            "last_run_at": newest.slot if newest else None,
            "last_job_id": newest.job_id if newest else None,
            "fired": sum(1 for run in runs if run.created),
            "skipped": due.skipped,
            "now": clock,
        },
    )
    return Fired(name=name, runs=runs, skipped=due.skipped, next_run_at=due.next_run_at)


def _run_spec(row: dict[str, Any], key: str) -> JobSpec:
    """The job one run of the schedule ``row`` creates, under the idempotency ``key``."""
    return JobSpec(
        type=row["job_type"],
        payload=row["payload"],
        priority=row["priority"],
        max_attempts=row["max_attempts"],
        idempotency_key=key,
        queue=row["queue"],
        unique_key=row["unique_key"],
        unique_for=row["unique_for"],
        unique_while=row["unique_while"],
    )


def _create(conn: Connection, spec: JobSpec, clock: datetime, data: dict[str, Any]) -> JobRecord | None:
    """Create ``spec`` due at ``clock`` with ``data`` in its ``created`` event (create.sql
    ``create``): its record, or ``None`` when another job holds its key."""
    params = row_params(spec, data, clock)
    return new_record(params["id"], spec, clock) if fetch_rows(conn, CREATE, params) else None


def _enqueue_run(
    conn: Connection, row: dict[str, Any], slot: datetime, clock: datetime, worker_id: str | None
) -> Run:
    key = run_key(row["name"], slot)
    slot_text = cron.slot_text(slot)
    data = {"schedule": row["name"], "source": "schedule", "slot": slot_text, "worker_id": worker_id}
    if row["unique_key"] is not None:  # a live run holding the key is this slot's run
        return Run(slot=slot, **_unique_run(conn, row, key, clock, data))
    job = _create(conn, _run_spec(row, key), clock, data)
    if job is not None:
        return Run(slot=slot, job_id=job.id, created=True)
    existing = fetch_job(conn, FIND_BY_KEY, {"idempotency_key": key})
    if existing is None:  # pragma: no cover - the key's holder vanished within the transaction
        raise RuntimeError(f"the run {key} conflicts with a job that no longer exists")
    return Run(slot=slot, job_id=existing.id, created=False)


def _unique_run(
    conn: Connection, row: dict[str, Any], key: str, clock: datetime, data: dict[str, Any]
) -> dict[str, Any]:
    """A run of a schedule with unique options, created as any keyed create (unique.create):
    the job that holds the key, if one is live in its states and window, stands for the slot."""
    result = unique.create(_run_spec(row, key), event_data=data, now=clock, conn=conn)
    return {"job_id": result.job.id, "created": result.created}


def seconds_until_due(*, now: datetime | None = None, conn: Connection | None = None) -> float | None:
    """Seconds until the earliest active schedule is due (0 or less: due now); ``None``: none."""
    with autocommit(conn) as conn:
        seconds = fetch_rows(conn, NEXT_DUE, {"now": now})[0]["seconds"]
    return None if seconds is None else float(seconds)


class ScheduleRetired(Exception):
    """The schedule is retired: the code no longer declares it, so it is not run."""


def set_paused(
    name: str,
    paused: bool,
    *,
    actor: str,
    event_data: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> bool:
    """Pause or resume ``name``, recording ``actor``; ``False`` for an unknown name.

    A change writes a ``schedule_paused`` or ``schedule_resumed`` audit row (who, when,
    ``event_data``: the door's audit data), as a queue's pause does. Pausing twice, or resuming
    a running schedule, changes only who and when, and writes none. A resume starts from the
    first slot after now: the slots that passed while paused are not fired."""
    if not is_name(name):
        return False
    with autocommit(None) as conn, transaction(conn):
        rows = fetch_rows(conn, LOCK_ONE, {"name": name, "now": now})
        if not rows:
            return False
        row = rows[0]
        next_run_at = row["next_run_at"]
        if not paused and row["paused"]:
            try:
                next_run_at = cron.next_slot(row["cron"], row["timezone"], row["clock"])
            except cron.CronError:
                next_run_at = row["next_run_at"]
        params = {
            "name": name,
            "paused": paused,
            "actor": actor,
            "now": row["clock"],
            "next_run_at": next_run_at,
            "audit": bool(row["paused"]) != paused,
            "event_data": {"actor": actor, **(event_data or {})},
        }
        fetch_rows(conn, SET_PAUSED, params)
    return True


def run_now(
    name: str, *, event_data: dict[str, Any] | None = None, now: datetime | None = None
) -> JobRecord | None:
    """Enqueue one run of ``name`` now, outside its slots (:func:`run_now_key`); ``None`` for an
    unknown name, :class:`ScheduleRetired` for a retired one. A paused schedule runs: the
    operator asked. Its slots and ``next_run_at`` are not touched."""
    if not is_name(name):
        return None
    with autocommit(None) as conn:
        with transaction(conn):
            rows = fetch_rows(conn, LOCK_ONE, {"name": name, "now": now})
            if not rows:
                return None
            row = rows[0]
            if row["retired_at"] is not None:
                raise ScheduleRetired(name)
            clock = row["clock"]
            data = {"schedule": name, "source": "schedule", "run_now": True, **(event_data or {})}
            job = _create(conn, _run_spec(row, run_now_key(name, clock)), clock, data)
        planner_stats.after_insert(1, conn)
    if job is None:  # pragma: no cover - a random key taken
        raise RuntimeError("the run's key was taken")
    return job
