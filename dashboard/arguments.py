"""The checks of :mod:`dashboard.jobs`' arguments: each one's kind (``TypeError``) and range
(``ValueError``), the argument named, before anything is written; the store's spec built
from them with the type's ``@handler`` defaults."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from .config.rules import (
    IDEMPOTENCY_KEY_MAX_LENGTH,
    INT_MAX,
    LAST_YEAR,
    MAX_JSON_DEPTH,
    PRIORITY_MAX,
    PRIORITY_MIN,
    TYPE_MAX_LENGTH,
    key_problem,
    queue_problem,
    text_kind,
    type_problem,
    year_problem,
)
from .runtime import handlers as _handlers
from .store.lifecycle import create as _store
from .store.lifecycle import dependents as _dependents
from .store.lifecycle import unique as _unique
from .store.values import utcnow


def _spec(args: dict[str, Any], index: int | None = None) -> _store.JobSpec:
    """The store's spec of one job, every argument checked, the type's defaults applied (its
    ``queue`` ``None``: the store's default). ``index``: its place in an enqueue_many call."""
    job_type = args["type"]
    _check_type(job_type)
    defaults = _handlers.defaults_of(job_type)
    payload = args["payload"]
    if payload is not None:
        payload = _json_payload(payload)
    job_queue = args["queue"] if args["queue"] is not None else defaults.queue
    if job_queue is not None:
        _check_queue(job_queue)
    priority = args["priority"] if args["priority"] is not None else defaults.priority
    if priority is not None:
        _check_int("priority", priority, PRIORITY_MIN, PRIORITY_MAX)
    attempts = args["max_attempts"] if args["max_attempts"] is not None else defaults.max_attempts
    if attempts is not None:
        _check_int("max_attempts", attempts, 1, INT_MAX)
    key = args["idempotency_key"]
    if key is not None:
        if not isinstance(key, str):
            raise TypeError(f"idempotency_key must be a string, got {_kind(key)}")
        if not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX_LENGTH:
            raise ValueError(f"idempotency_key must be 1 to {IDEMPOTENCY_KEY_MAX_LENGTH} characters")
        if problem := key_problem(key) or _text_problem(key):  # control and bidi characters, NUL too
            raise ValueError(f"idempotency_key {problem}")
    available_at = _available_at(args["run_at"], args["delay"])
    parents = _parents(args["depends_on"], index)
    for name in ("on_parent_failure", "workflow"):
        if args[name] is not None and not isinstance(args[name], str):
            raise TypeError(f"{name} must be a string, got {_kind(args[name])}")
    unique = _unique_of(job_type, args, payload)
    if unique["debounce"] is not None and available_at is not None:
        if args.get("debounce") is not None:
            raise ValueError("pass debounce or run_at/delay, not both: debounce sets when it starts")
        unique["debounce"] = None  # the enqueue's own start wins over the type's debounce
    spec = _store.JobSpec(
        **unique,
        type=job_type,
        payload=payload,
        available_at=available_at,
        idempotency_key=key,
        queue=job_queue,
        depends_on=parents,
        on_parent_failure=args["on_parent_failure"],
        workflow=args["workflow"],
    )
    if priority is not None:
        spec = spec._replace(priority=priority)
    if attempts is not None:
        spec = spec._replace(max_attempts=attempts)
    _dependents.check(spec, index)
    _unique.check(spec)
    return spec


@dataclass(frozen=True)
class UniqueDefaults:
    """A type's unique options from ``@handler``: its key (text, or a function of the payload
    that returns it) and the window, states and debounce a keyed enqueue of it gets."""

    unique_key: str | Callable[[Any], str] | None = None
    unique_for: float | None = None
    unique_while: str | None = None
    debounce: float | None = None


UNIQUE_DEFAULTS: dict[str, UniqueDefaults] = {}  # by type, set by dashboard.jobs.handler


def unique_defaults(
    unique_key: Any, unique_for: Any, unique_while: Any, debounce: Any
) -> UniqueDefaults | None:
    """``@handler``'s unique options checked (the argument named), or ``None`` if none is given."""
    if unique_key is None and unique_for is None and unique_while is None and debounce is None:
        return None
    if unique_key is not None and not (isinstance(unique_key, str) or callable(unique_key)):
        raise TypeError(f"unique_key must be a string or a function of the payload, got {_kind(unique_key)}")
    given = UniqueDefaults(
        unique_key, _seconds("unique_for", unique_for), _state(unique_while), _seconds("debounce", debounce)
    )
    probe = _store.JobSpec("probe", unique_key=unique_key if isinstance(unique_key, str) else "probe")
    _unique.check(
        probe._replace(unique_for=given.unique_for, unique_while=given.unique_while, debounce=given.debounce)
    )
    return given


def _unique_of(job_type: str, args: dict[str, Any], payload: Any) -> dict[str, Any]:
    """The unique options of one enqueue, each checked for its kind: its own, else the type's
    ``@handler`` defaults (those only where the type has a handler in this process)."""
    found = UNIQUE_DEFAULTS.get(job_type) if _handlers.get_handler(job_type) is not None else None
    defaults = found or UniqueDefaults()
    key = args.get("unique_key")
    if key is None and defaults.unique_key is not None:
        key = defaults.unique_key if isinstance(defaults.unique_key, str) else defaults.unique_key(payload)
        if not isinstance(key, str):
            raise TypeError(f"unique_key: the handler's function returned {_kind(key)}, not a string")
    elif key is not None and not isinstance(key, str):
        raise TypeError(f"unique_key must be a string, got {_kind(key)}")
    options: dict[str, Any] = {"unique_key": key}
    for name, check in (("unique_for", _seconds), ("debounce", _seconds)):
        own = check(name, args.get(name))
        options[name] = own if own is not None or key is None else getattr(defaults, name)
    own_state = _state(args.get("unique_while"))
    options["unique_while"] = own_state if own_state is not None or key is None else defaults.unique_while
    return options


def _seconds(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be seconds or a timedelta, got {_kind(value)}")
    return float(value)


def _state(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"unique_while must be a string (queued or active), got {_kind(value)}")
    return value


def _parents(value: Any, index: int | None) -> tuple[uuid.UUID | int, ...]:
    """``depends_on`` as the store takes it: job ids, and in enqueue_many earlier items' indexes."""
    if value is None:
        return ()
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise TypeError(f"depends_on must be a list of job ids, got {_kind(value)}")
    parents: list[uuid.UUID | int] = []
    for item in value:
        if isinstance(getattr(item, "id", None), uuid.UUID):  # an EnqueuedJob
            item = item.id
        if (isinstance(item, int) and not isinstance(item, bool) and index is not None) or isinstance(
            item, uuid.UUID
        ):
            parents.append(item)
        elif isinstance(item, str):
            try:
                parents.append(uuid.UUID(item))
            except ValueError:
                raise ValueError(f"depends_on: {item!r} is not a job id") from None
        else:
            raise TypeError(f"depends_on must hold job ids, got {_kind(item)}")
    return tuple(parents)


def _check_type(job_type: Any) -> None:
    if not isinstance(job_type, str):
        raise TypeError(f"type must be a string, got {_kind(job_type)}")
    if not job_type or len(job_type) > TYPE_MAX_LENGTH:
        raise ValueError(f"type must be 1 to {TYPE_MAX_LENGTH} characters")
    if problem := type_problem(job_type) or _text_problem(job_type):
        raise ValueError(f"type {problem}")


def _check_queue(value: Any) -> None:
    if not isinstance(value, str):
        raise TypeError(f"queue must be a string, got {_kind(value)}")
    if problem := queue_problem(value):
        raise ValueError(f"queue {problem}, got {value!r}")


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {_kind(value)}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}, got {value}")


class PayloadNotJSON(TypeError, ValueError):
    """A value in a payload that is not JSON (a ``datetime``, a ``set``, an object): a
    ``TypeError`` (a value of the wrong kind), and a ``ValueError`` as every other payload
    problem is, so that either ``except`` catches it."""


_TEXT_PROBLEMS = {
    "nul": "holds a NUL character",
    "surrogate": "holds a lone surrogate (text PostgreSQL cannot store)",
}
_BIGGEST = 10**4000  # an integer of more digits is no JSON number Python writes (int_max_str_digits)


def _text_problem(text: str) -> str | None:
    kind = text_kind(text)
    return None if kind is None else _TEXT_PROBLEMS[kind]


def _json_payload(payload: Any) -> Any:
    """``payload`` as it is stored, or the first problem, its place named (``payload at a.b[2]``):
    a value that is not JSON (:class:`PayloadNotJSON`), a key that is not a string
    (``TypeError``), a document that contains itself, nests deeper than ``MAX_JSON_DEPTH``,
    holds NUL, a lone surrogate, NaN, Infinity or an integer of over 4,000 digits
    (``ValueError``). A ``uuid.UUID`` (such as ``ctx.job_id``, passed on to the next job) is
    stored as its text and a tuple as a list, in a copy of the containers that hold one; the
    caller's own objects are never changed."""
    inside: set[int] = set()  # the containers on the way down: one met again is a cycle

    def at(where: str) -> str:
        return f"payload at {where}" if where else "payload"

    def walk(node: Any, where: str, depth: int) -> Any:
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"{at(where)} is nested too deep (more than {MAX_JSON_DEPTH} levels)")
        if node is None or isinstance(node, bool):
            return node
        if isinstance(node, str):
            if problem := _text_problem(node):
                raise ValueError(f"{at(where)} {problem}")
            return node
        if isinstance(node, int):
            if not -_BIGGEST < node < _BIGGEST:
                raise ValueError(f"{at(where)} holds an integer of more than 4,000 digits")
            return node
        if isinstance(node, float):
            if not math.isfinite(node):
                raise ValueError(f"{at(where)} holds NaN or Infinity")
            return node
        if isinstance(node, uuid.UUID):
            return str(node)
        if not isinstance(node, dict | list | tuple):
            raise PayloadNotJSON(
                f"{at(where)} must be JSON (dicts, lists, strings, numbers, booleans, None; a UUID is "
                f"stored as its text), got {_kind(node)}"
                + (": pass value.isoformat()" if isinstance(node, date | time) else "")
            )
        if id(node) in inside:
            raise ValueError(f"{at(where)} contains itself (a cycle): JSON cannot hold one")
        inside.add(id(node))
        try:
            if isinstance(node, dict):
                copy = {}
                for key, child in node.items():
                    if not isinstance(key, str):
                        raise TypeError(f"{at(where)} must have string keys, got {_kind(key)}")
                    if problem := _text_problem(key):
                        raise ValueError(f"{at(where)} has a key that {problem}")
                    copy[key] = walk(child, f"{where}.{key}" if where else key, depth + 1)
                changed = any(copy[key] is not child for key, child in node.items())
                return copy if changed else node
            items = [walk(child, f"{where}[{n}]", depth + 1) for n, child in enumerate(node)]
            changed = isinstance(node, tuple) or any(a is not b for a, b in zip(items, node, strict=True))
            return items if changed else node
        finally:
            inside.discard(id(node))

    return walk(payload, "", 1)


def _available_at(run_at: Any, delay: Any) -> datetime | None:
    if run_at is not None and delay is not None:
        raise ValueError("pass run_at or delay, not both")
    if run_at is not None:
        if not isinstance(run_at, datetime):
            raise TypeError(f"run_at must be a datetime, got {_kind(run_at)}")
        if run_at.tzinfo is None or run_at.utcoffset() is None:
            raise ValueError("run_at must be timezone-aware (datetime.now(UTC) + ..., not datetime.now())")
        if problem := year_problem(run_at):
            raise ValueError(f"run_at {problem}, got {run_at.isoformat()}")
        return run_at
    if delay is None:
        return None
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, int | float) and not isinstance(delay, bool):
        seconds = float(delay)
    else:
        raise TypeError(f"delay must be seconds or a timedelta, got {_kind(delay)}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"delay must be zero or more seconds, got {delay!r}")
    try:
        available_at = utcnow() + timedelta(seconds=seconds)
    except OverflowError:
        available_at = None
    if available_at is None or year_problem(available_at):
        raise ValueError(f"delay is too long (past the year {LAST_YEAR}): {delay!r}")
    return available_at


def _kind(value: Any) -> str:
    return type(value).__name__
