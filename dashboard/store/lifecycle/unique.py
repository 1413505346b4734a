"""Uniqueness windows and debounce: a create that carries a ``unique_key`` returns the job
holding that key instead of a new one, while the holder is in the create's states and window.

The options (each checked by :func:`check`, ``ValueError`` naming the argument):

- ``unique_key``: 1 to 255 characters;
- ``unique_for``: seconds (> 0, at most ``WINDOW_MAX_SECONDS``), counted from the holder's
  ``created_at``; ``None``: no time limit;
- ``unique_while``: ``queued`` (the holder blocks while it waits) or ``active`` (while queued or
  running); ``None``: ``active``, or ``queued`` with ``debounce``;
- ``debounce``: seconds (0 or more): a create that finds the queued holder replaces its payload
  and moves its ``available_at`` to now + debounce (event ``debounced``); without a holder the
  job is created to start at now + debounce. Needs ``unique_key``; a queued holder only.

**Why a unique index and a retire, not a lock and a read.** A lock and a SELECT is the
pattern whose races others document: the check and the insert are apart. Here the database
decides: ``job_unique_key_idx`` (migration 0019) is unique over the key among the jobs that
hold it, so two creates can never both insert a holder, whatever each read. A holder stays in
that index until a later create takes the key: the create's statement (``create_unique`` in
unique.sql) retires (``unique_retired_at``) a holder that is out of the create's states or
window, then inserts with ``ON CONFLICT DO NOTHING``, both in one statement. Nothing else ever
touches the columns: the claim, the settles and the retries, the drain path, write no entry and
check nothing, and a job going back to ``queued`` (a retry) can never meet a conflict. The
cost: the index holds one entry per key still held, finished holders included, until the next
create of the key retires them or retention deletes them; a key's states are judged when a
create comes, by that create's options. A retired job that is retried runs without holding its
key (a job that took the key meanwhile holds it).

Creates that race on one key: each statement either inserts the holder or meets the one that
did (the index's insert waits for the other transaction to end), and then reads it
(``find_unique_holder``): one 201, the rest 200 with that job. With debounce, a create that
meets a new holder debounces it in turn. The steps repeat at most :data:`TRIES` times (a
holder deleted or retired in between), then ``RuntimeError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection

from ...config.rules import (
    UNIQUE_KEY_MAX_LENGTH,
    UNIQUE_WHILE,
    WINDOW_MAX_SECONDS,
    key_problem,
)
from .. import planner_stats
from ..connection import autocommit, fetch_rows, fetch_rows_within
from ..records import CreateResult, JobRecord
from ..sql import query
from .spec import JobSpec, row_params

CREATE_UNIQUE, DEBOUNCE, FIND_HOLDER = (
    query("create_unique"),
    query("debounce_unique"),
    query("find_unique_holder"),
)
FIND_BY_IDEMPOTENCY_KEY = query("find_by_idempotency_key")
TRIES = 5

Run = Callable[[Any, dict[str, Any]], list[dict[str, Any]]]


def check(spec: JobSpec) -> None:
    """``ValueError`` naming the first unique option of ``spec`` out of its range, or used
    without ``unique_key``, or with what it cannot go with (``depends_on``; ``debounce`` with
    ``available_at`` or ``unique_while="active"``)."""
    key = spec.unique_key
    if key is None:
        for name in ("unique_for", "unique_while", "debounce"):
            if getattr(spec, name) is not None:
                raise ValueError(f"{name} needs a unique_key")
        return
    if not isinstance(key, str) or not 1 <= len(key) <= UNIQUE_KEY_MAX_LENGTH:
        raise ValueError(f"unique_key must be 1 to {UNIQUE_KEY_MAX_LENGTH} characters")
    if problem := key_problem(key):
        raise ValueError(f"unique_key {problem}")
    if spec.unique_for is not None and not _seconds(spec.unique_for, positive=True):
        raise ValueError(f"unique_for must be a number of seconds above 0, at most {WINDOW_MAX_SECONDS:.0f}")
    if spec.unique_while is not None and spec.unique_while not in UNIQUE_WHILE:
        raise ValueError(f"unique_while must be one of {', '.join(UNIQUE_WHILE)}, got {spec.unique_while!r}")
    if spec.depends_on:
        raise ValueError("unique_key cannot be given with depends_on")
    if spec.debounce is not None:
        if not _seconds(spec.debounce, positive=False):
            raise ValueError(f"debounce must be a number of seconds from 0 to {WINDOW_MAX_SECONDS:.0f}")
        if spec.available_at is not None:
            raise ValueError("debounce sets the start: give debounce or available_at, not both")
        if spec.unique_while == "active":
            raise ValueError("debounce matches a queued job only: leave unique_while out or set it to queued")


def _seconds(value: Any, *, positive: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return False
    return (value > 0 if positive else value >= 0) and value <= WINDOW_MAX_SECONDS


def states_of(spec: JobSpec) -> str:
    """The states in which a holder blocks ``spec``'s create: its ``unique_while``, by default
    ``active``, or ``queued`` with ``debounce``."""
    return spec.unique_while or ("queued" if spec.debounce is not None else "active")


def create(
    spec: JobSpec,
    *,
    event_data: dict[str, Any],
    now: datetime,
    conn: Connection | None = None,
    within: Connection | None = None,
) -> CreateResult:
    """Queue the job ``spec`` (checked, with a ``unique_key``) describes, or return the job
    that holds its key (``created=False``; with ``debounce``, that job debounced), or the
    job that holds its idempotency key. ``conn``: an autocommit connection, each statement
    committed as it runs (each is whole on its own); ``within``: the caller's transaction."""
    params = {
        **row_params(spec, event_data, now),
        "unique_key": spec.unique_key,
        "unique_for": None if spec.unique_for is None else float(spec.unique_for),
        "unique_while": states_of(spec),
    }
    if spec.debounce is not None:
        params["available_at"] = now + timedelta(seconds=spec.debounce)
        params["event_data"] = {**params["event_data"], "debounce": spec.debounce}
    if within is not None:
        return _create(lambda statement, p: fetch_rows_within(within, statement, p), spec, params, None)
    with autocommit(conn) as conn:
        return _create(lambda statement, p: fetch_rows(conn, statement, p), spec, params, conn)


def _create(run: Run, spec: JobSpec, params: dict[str, Any], conn: Connection | None) -> CreateResult:
    key = {"unique_key": spec.unique_key}
    for _ in range(TRIES):
        if spec.debounce is not None:
            moved = run(DEBOUNCE, params)
            if moved:
                return CreateResult(job=JobRecord.from_row(moved[0]), created=False)
        rows = run(CREATE_UNIQUE, params)
        if rows:
            planner_stats.after_insert(1, conn)
            return CreateResult(job=JobRecord.from_row(rows[0]), created=True)
        if spec.idempotency_key is not None:
            found = run(FIND_BY_IDEMPOTENCY_KEY, {"idempotency_key": spec.idempotency_key})
            if found:
                return CreateResult(job=JobRecord.from_row(found[0]), created=False)
        if spec.debounce is None and (holder := run(FIND_HOLDER, key)):
            return CreateResult(job=JobRecord.from_row(holder[0]), created=False)
    raise RuntimeError(f"unique_key {spec.unique_key!r}: its holder kept changing; try the create again")
