"""Every value rule the doors, the store and the handler registry share, defined once.

The API (``api/inputs.py``, ``api/fields.py``), the web forms and query parameters
(``web/forms.py``, ``web/params.py``), the handler registry and the templates (as the
``rules`` context value) all read these; each door words its own error messages.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

# Column sizes and ranges (the schema in store/models.py and the migrations).
TYPE_MAX_LENGTH = 120  # jobs_job.type varchar(120)
IDEMPOTENCY_KEY_MAX_LENGTH = 255
# Workflows: a job waits for at most this many parents; a workflow's id is 1 to 120 characters.
PARENTS_MAX = 100
WORKFLOW_MAX_LENGTH = 120
PARENT_FAILURE_POLICIES = ("cancel", "run", "wait")
# Uniqueness windows: a key of 1 to 255 characters (jobs_job.unique_key varchar(255)), the
# states it holds in, and windows in seconds (unique_for, debounce) of at most ten years.
UNIQUE_KEY_MAX_LENGTH = 255
UNIQUE_WHILE = ("queued", "active")
WINDOW_MAX_SECONDS = 10 * 365 * 86400.0
# A queue's name: 1 to 64 characters of A-Z a-z 0-9 _ . : - (jobs_job.queue varchar(64)), not
# made only of dots: a name sits in the pages' and the API's paths (/queues/{name}/pause/),
# where "." and ".." are path steps that a browser or a proxy resolves away.
QUEUE_NAME_MAX_LENGTH = 64
QUEUE_NAME_PATTERN = r"^(?!\.+$)[A-Za-z0-9_.:-]{1,64}$"
DEFAULT_QUEUE = "default"
CONCURRENCY_LIMIT_MAX = 10_000  # slot rows per queue: one per attempt it may run at once
RATE_COUNT_MAX = 10_000  # ring entries per queue: one per claim a window may hold
RATE_PERIOD_MAX_SECONDS = 86_400.0  # a rate window of at most a day
Q_MAX_LENGTH = 500  # a search text (``q``), page and API
PRIORITY_MIN, PRIORITY_MAX = -32768, 32767  # smallint
DEFAULT_PRIORITY = 50
INT_MAX = 2_147_483_647  # integer columns (max_attempts)
BIGINT_MAX = 2**63 - 1  # bigint columns (event ids, and so event cursors)

# Names of schedules: the queue's characters without ':' (a schedule's name sits between colons
# in its runs' idempotency keys, ``schedule:{name}:{slot}``, so a name never contains the
# separator and a key's prefix names exactly one schedule).
# Not made only of dots either (the schedules' page paths, /schedules/{name}/pause/).
NAME_MAX_LENGTH = 64
SCHEDULE_NAME_PATTERN = r"^(?!\.+$)[A-Za-z0-9_.-]{1,64}$"
MISSED_ALL_MAX = 100  # missed="all" enqueues at most this many missed slots at once

# JSON documents (payloads, results): nesting PostgreSQL and both parsers handle comfortably.
MAX_JSON_DEPTH = 100

# Instants a client may give (``available_at``, ``run_at``, ``delay``'s end): years FIRST_YEAR to
# LAST_YEAR, as written in the instant's own offset. Whatever the offset, the instant and its
# rendering in any time zone stay inside what Python's datetime and PostgreSQL's timestamptz
# can represent and read back (datetime.max with an offset of -14:00 is the year 10000 in UTC).
FIRST_YEAR, LAST_YEAR = 1900, 9998
# The instants those years span whatever the offset (RFC 3339's reach up to 23:59 either way):
# what the store accepts, so that a door's time converted to UTC still passes.
EARLIEST_INSTANT = datetime(FIRST_YEAR - 1, 12, 31, tzinfo=UTC)
LATEST_INSTANT = datetime(LAST_YEAR + 1, 1, 2, tzinfo=UTC)

# Page sizes: the default, and the largest a request may ask for (larger is reduced or refused
# by each door). The web job list and the API's job list share one pair, the event feeds another.
JOB_PAGE_SIZE, JOB_PAGE_MAX = 25, 100
EVENT_PAGE_SIZE, EVENT_PAGE_MAX = 50, 200
PREVIEW_CHARS = 200  # what the pages read of a payload or result in a list (as JSON text)
# Live figures on a large table are exact up to a cap, then shown as "more than N": an exact
# count of millions of rows would cost a page its time bound during a backlog.
LIVE_COUNT_CAP = 10_000  # ready / scheduled / retrying, list counts
TYPE_COUNT_CAP = 1_000  # per-type rows of the overview
QUEUE_COUNT_CAP = 1_000  # per-queue rows of the Queues page and /api/queues/ (one queue: LIVE_COUNT_CAP)
TYPES_SHOWN = 30  # job types in the overview's per-type table
JOB_OFFSET_MAX = 500  # the dashboard's list offers offsets up to this; deeper pages go by keyset
# A job's page and its live poll read at most this many of its events (the newest), so a job
# with 100,000 progress reports costs what one with 1,000 does; the API's full list stays whole.
TIMELINE_EVENTS_MAX = 1000
# The overview's hour charts read at most the newest this many of the hour's claims and
# outcomes (no other kind of event), as does the Queues page's claims of the last hour.
CHART_EVENTS_MAX = 10_000


# Characters a job type or an idempotency key may not hold: control characters (Cc: NUL,
# newlines, escapes, U+007F to U+009F), format characters (Cf: bidi marks and overrides such as
# U+200E, U+202E and U+2066 to U+2069, zero-width spaces and joiners) and line or paragraph
# separators (Zl, Zp), each within the Basic Multilingual Plane. Both are keys shown on pages,
# in logs and searched for by what an operator types or copies: these would make one look like
# another, or break a line.
TYPE_FORBIDDEN_CATEGORIES = ("Cc", "Cf", "Zl", "Zp")


def _forbidden_ranges() -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for code in range(0x10000):
        if unicodedata.category(chr(code)) in TYPE_FORBIDDEN_CATEGORIES:
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return ranges


_TYPE_FORBIDDEN_RANGES = _forbidden_ranges()
# The same rule as a JSON Schema pattern (published with the API's `type` and
# `idempotency_key` fields).
TYPE_PATTERN = (
    "^[^"
    + "".join(f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in _TYPE_FORBIDDEN_RANGES)
    + "]*$"
)


def queue_problem(value: object) -> str | None:
    """Why ``value`` cannot be a queue's name (:data:`QUEUE_NAME_PATTERN`), or None."""
    if not isinstance(value, str):
        return "must be a string"
    if not re.fullmatch(QUEUE_NAME_PATTERN, value):
        if value and len(value) <= QUEUE_NAME_MAX_LENGTH and not value.strip("."):
            return "must not be made only of dots (. and .. are steps in a path)"
        return f"must be 1 to {QUEUE_NAME_MAX_LENGTH} characters of A-Z a-z 0-9 _ . : -"
    return None


def year_problem(value: datetime) -> str | None:
    """Why ``value`` is not a time a client may give (:data:`FIRST_YEAR` to :data:`LAST_YEAR`,
    in its own offset), or None."""
    if not FIRST_YEAR <= value.year <= LAST_YEAR:
        return f"must be in the years {FIRST_YEAR} to {LAST_YEAR}"
    return None


def instant_problem(value: datetime) -> str | None:
    """Why the aware ``value`` is not an instant the store accepts (:data:`EARLIEST_INSTANT` to
    :data:`LATEST_INSTANT`: any time :func:`year_problem` passes, in any offset), or None."""
    if not EARLIEST_INSTANT <= value <= LATEST_INSTANT:
        return f"must be in the years {FIRST_YEAR} to {LAST_YEAR}"
    return None


def type_problem(value: str) -> str | None:
    """Why ``value`` cannot be a job type or an idempotency key besides its length
    (:data:`TYPE_FORBIDDEN_CATEGORIES`), naming the first such character, or None."""
    if value.isascii() and value.isprintable():  # the usual key or type: no Cc, Cf, Zl or Zp in it
        return None
    for position, char in enumerate(value):
        if ord(char) < 0x10000 and unicodedata.category(char) in TYPE_FORBIDDEN_CATEGORIES:
            name = unicodedata.name(char, "a control character")
            return (
                f"must not contain control or invisible formatting characters (U+{ord(char):04X} {name} "
                f"at position {position})"
            )
    return None


key_problem = type_problem  # an idempotency key: the same characters refused as in a type


def job_type_problem(value: str) -> str | None:
    """Why ``value`` cannot be a job type: 1 to :data:`TYPE_MAX_LENGTH` characters, none that
    :func:`type_problem` refuses; or None. The one rule of a type's name, for every place that
    declares or enqueues one (``@handler``, ``schedule``, the Python API, the store)."""
    if not value or len(value) > TYPE_MAX_LENGTH:
        return f"must be 1 to {TYPE_MAX_LENGTH} characters"
    return type_problem(value)


class NonFiniteNumber(ValueError):
    """A JSON number that overflows to infinity: ``jsonb`` cannot store it."""

    def __init__(self, text: str) -> None:
        super().__init__("number out of range")
        self.text = text


def finite_float(text: str) -> float:
    """``json.loads(parse_float=...)``: a finite float, else :class:`NonFiniteNumber`."""
    value = float(text)
    if not math.isfinite(value):
        raise NonFiniteNumber(text)
    return value


def reject_constant(name: str) -> Any:
    """``json.loads(parse_constant=...)``: ``NaN`` and ``Infinity`` are not JSON."""
    raise ValueError(f"{name} is not valid JSON")


def text_kind(value: str) -> str | None:
    """Why PostgreSQL could not store ``value`` as text: ``"nul"``, ``"surrogate"``, or None."""
    if "\x00" in value:
        return "nul"
    if value.isascii():  # a flag CPython keeps: no surrogate, and no copy to encode
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "surrogate"
    return None


@dataclass(frozen=True, slots=True)
class JsonProblem:
    """The first part of a document that ``jsonb`` would refuse."""

    kind: str  # "depth" | "nul" | "surrogate" | "number"
    where: str  # a path like ``a.b[2]``; "" for the top level
    key: str | None = None  # set when the problem is in an object key


def json_problem(value: Any) -> JsonProblem | None:
    """Walk the document (iteratively: depth is one of the things checked): nesting deeper than
    :data:`MAX_JSON_DEPTH`, text with NUL or a lone surrogate (in values or keys), non-finite
    numbers. None if PostgreSQL can store it."""
    if _storable(value):
        return None
    return _first_problem(value)


def _storable(value: Any) -> bool:
    """:func:`json_problem` is None, without building the path of every node: the check of
    every API payload, nearly always a pass (1,000 of them in a bulk create)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return False
        if isinstance(node, dict):
            for key, child in node.items():
                if text_kind(key):
                    return False
                if isinstance(child, (dict, list)):
                    stack.append((child, depth + 1))
                elif not _storable_scalar(child) or depth + 1 > MAX_JSON_DEPTH:
                    return False
        elif isinstance(node, list):
            for child in node:
                if isinstance(child, (dict, list)):
                    stack.append((child, depth + 1))
                elif not _storable_scalar(child) or depth + 1 > MAX_JSON_DEPTH:
                    return False
        elif not _storable_scalar(node):
            return False
    return True


def _storable_scalar(value: Any) -> bool:
    if isinstance(value, str):
        return text_kind(value) is None
    return not (isinstance(value, float) and not math.isfinite(value))


def _first_problem(value: Any) -> JsonProblem | None:
    """The first problem :func:`json_problem` reports, with its path."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        node, depth, where = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return JsonProblem("depth", where)
        if isinstance(node, dict):
            for key, child in node.items():
                kind = text_kind(key)
                if kind:
                    return JsonProblem(kind, where, key=key)
                stack.append((child, depth + 1, f"{where}.{key}" if where else key))
        elif isinstance(node, list):
            stack.extend((child, depth + 1, f"{where}[{i}]") for i, child in enumerate(node))
        elif isinstance(node, str):
            kind = text_kind(node)
            if kind:
                return JsonProblem(kind, where)
        elif isinstance(node, float) and not math.isfinite(node):
            return JsonProblem("number", where)
    return None
