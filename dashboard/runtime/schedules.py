"""The schedule registry: recurring jobs declared in code with :func:`schedule`, beside the
handler registry (``handlers.py``).

Declare them in a module that ``JOB_HANDLER_MODULES`` names (imported at start, in the web
process too, so the pages know them)::

    from dashboard.jobs import schedule

    schedule("nightly-report", cron="0 6 * * *", type="reports.nightly", timezone="Europe/Berlin")

Each argument is checked where it is declared: a bad one raises ``ValueError`` or ``TypeError``
naming the schedule and the argument, so a worker (and the web app) with a bad expression or
an unknown time zone does not start. A worker syncs the declarations into ``jobs_schedule``
at its start (:func:`declarations`, ``store/schedules.sync``): what the code no longer
declares is retired there, not deleted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..config.rules import (
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    INT_MAX,
    PRIORITY_MAX,
    PRIORITY_MIN,
    SCHEDULE_NAME_PATTERN,
    job_type_problem,
    json_problem,
    queue_problem,
)
from ..store.flow import cron as slots
from ..store.flow.schedules import Declaration
from ..store.lifecycle import unique
from ..store.lifecycle.spec import JobSpec
from .handlers import defaults_of

_NAME = re.compile(SCHEDULE_NAME_PATTERN)


@dataclass(frozen=True)
class Declared:
    """A schedule as declared: ``None`` where the declaration left a default (``timezone``:
    ``TIME_ZONE``; ``queue``, ``priority``, ``max_attempts``: its type's ``@handler(...)``
    defaults, else ``default``, 50 and ``JOB_WORKER_MAX_ATTEMPTS_DEFAULT``)."""

    name: str
    cron: str
    type: str
    payload: Any = None
    queue: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    timezone: str | None = None
    missed: str = "latest"
    unique_key: str | None = None
    unique_for: float | None = None
    unique_while: str | None = None


_registry: dict[str, Declared] = {}


def _integer(name: str, argument: str, value: Any, low: int, high: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"schedule {name!r}: {argument} must be an integer, not {value.__class__.__name__}")
    if not low <= value <= high:
        raise ValueError(f"schedule {name!r}: {argument} must be between {low} and {high}, not {value}")


def _text(name: str, argument: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"schedule {name!r}: {argument} must be a string, not {value.__class__.__name__}")
    return value


def schedule(
    name: str,
    cron: str,
    type: str,
    payload: Any = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    timezone: str | None = None,
    missed: str = "latest",
    unique_key: str | None = None,
    unique_for: float | None = None,
    unique_while: str | None = None,
) -> Declared:
    """Declare the recurring job ``name``: a job of ``type`` with ``payload`` at every slot of
    the five-field ``cron`` expression in ``timezone``; returns the declaration.

    ``missed``: for the slots that passed while no worker fired, ``"latest"`` enqueues only
    the newest, ``"all"`` each of them (at most 100). ``unique_key``, ``unique_for`` and
    ``unique_while`` (as :func:`dashboard.jobs.enqueue` takes them): while a run holding the key
    is live, a due slot enqueues nothing and that run stands for it (no overlapping runs).
    Declaring one name again with the same
    arguments changes nothing; with other arguments it is a ``ValueError``.
    """
    if not isinstance(name, str):
        raise TypeError(f"schedule name must be a string, not {name.__class__.__name__}")
    if not _NAME.fullmatch(name):
        raise ValueError(f"schedule name {name!r} must be 1 to 64 characters of A-Z a-z 0-9 _ . -")
    expression = _text(name, "cron", cron)
    job_type = _text(name, "type", type)
    if problem := job_type_problem(job_type):
        raise ValueError(f"schedule {name!r}: type {problem}")
    try:
        payload = json.loads(json.dumps(payload, allow_nan=False))  # a copy: the caller's stays theirs
    except (TypeError, ValueError) as error:
        raise TypeError(f"schedule {name!r}: payload must be JSON-serialisable ({error})") from None
    except RecursionError:
        raise ValueError(f"schedule {name!r}: payload is nested too deeply to store") from None
    if payload is not None and (problem_json := json_problem(payload)) is not None:
        where = problem_json.where or "the top level"
        raise ValueError(f"schedule {name!r}: payload cannot be stored ({problem_json.kind} at {where})")
    if queue is not None and (problem := queue_problem(_text(name, "queue", queue))):
        raise ValueError(f"schedule {name!r}: queue {problem}")
    _integer(name, "priority", priority, PRIORITY_MIN, PRIORITY_MAX)
    _integer(name, "max_attempts", max_attempts, 1, INT_MAX)
    if missed not in slots.MISSED_POLICIES:
        raise ValueError(f"schedule {name!r}: missed must be 'latest' or 'all', not {missed!r}")
    if timezone is not None:
        _text(name, "timezone", timezone)
        try:
            slots.zone(timezone)
        except slots.CronError as problem:
            raise ValueError(f"schedule {name!r}: timezone: {problem}") from None
    try:
        slots.check(expression, timezone or "UTC")
    except slots.CronError as problem:
        raise ValueError(f"schedule {name!r}: cron: {problem}") from None
    probe = JobSpec(job_type, unique_key=unique_key, unique_for=unique_for, unique_while=unique_while)
    try:
        unique.check(probe)
    except (TypeError, ValueError) as problem:
        raise ValueError(f"schedule {name!r}: {problem}") from None
    window = None if unique_for is None else float(unique_for)
    declared = Declared(
        name,
        expression,
        job_type,
        payload,
        queue,
        priority,
        max_attempts,
        timezone,
        missed,
        unique_key,
        window,
        unique_while or ("active" if unique_key is not None else None),
    )
    existing = _registry.get(name)
    if existing is not None and existing != declared:
        raise ValueError(f"schedule {name!r} is already declared with other arguments")
    _registry[name] = declared
    return declared


def declared() -> list[Declared]:
    """Every declared schedule, by name."""
    return [_registry[name] for name in sorted(_registry)]


def forget(name: str) -> None:
    """Remove a declaration (tests, and code that declares schedules conditionally)."""
    _registry.pop(name, None)


def declarations(default_timezone: str, default_max_attempts: int) -> list[Declaration]:
    """The declarations with their defaults filled in, as ``store/schedules.sync`` takes them;
    a ``ValueError`` naming the schedule whose zone (the default, ``TIME_ZONE``) is unknown.

    The job's ``queue``, ``priority`` and ``max_attempts`` are resolved as ``enqueue`` resolves
    them: the schedule's own value, else its type's ``@handler(...)`` default
    (``handlers.defaults_of``), else ``default``, 50 and ``default_max_attempts``."""
    resolved = []
    for d in declared():
        zone_name = d.timezone or default_timezone
        try:
            slots.check(d.cron, zone_name)
        except slots.CronError as problem:
            raise ValueError(f"schedule {d.name!r}: {problem}") from None
        by_type = defaults_of(d.type)
        priority = d.priority if d.priority is not None else by_type.priority
        resolved.append(
            Declaration(
                name=d.name,
                cron=d.cron,
                timezone=zone_name,
                job_type=d.type,
                payload={} if d.payload is None else d.payload,
                queue=d.queue or by_type.queue or DEFAULT_QUEUE,
                priority=DEFAULT_PRIORITY if priority is None else priority,
                max_attempts=d.max_attempts or by_type.max_attempts or default_max_attempts,
                missed=d.missed,
                unique_key=d.unique_key,
                unique_for=d.unique_for,
                unique_while=d.unique_while,
            )
        )
    return resolved
