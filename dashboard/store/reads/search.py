"""The search language: the ``q`` of the job list, the header box and ``/api/jobs/?q=``.

:func:`parse_q` reads what an operator typed into :class:`Terms`; ``find_jobs.matching`` turns
those into a set of job ids that every caller shares (the list, the API, the bulk actions), so a
bulk dry run counts exactly the jobs the list shows. Each kind is an index lookup:

- a full id, or 4 to 32 hex digits of one (the 8-character short id the lists show): a range
  on the primary key, the prefix padded with ``0`` and with ``f``;
- an idempotency key, exactly: ``job_idempotency_key_unique``;
- a schedule's key prefix, ``schedule:{name}`` or ``schedule:{name}:``: the runs of that
  schedule (keys ``schedule:{name}:...``), one range of ``job_schedule_key_idx`` in byte order;
- words or fragments of any job's ``last_error`` (:func:`error_query`): every word present,
  and what an operator copies out of an error (a host name, a dotted name, a path) as the run
  of its parts, the last a prefix: ``smtp.example.com`` finds ``... to smtp.example.com:25``,
  ``example`` and ``billing.inv`` find theirs, ``/var/data`` finds ``/var/data/x.csv``. Read
  newest first through ``job_error_created_idx`` while the newest errors hold enough matches,
  else through ``job_error_fts_idx`` (``error_search.ERROR_VECTOR``), a GIN over the error with
  its ASCII punctuation turned into separators; both partial on ``last_error <> ''``: jobs that
  never failed (the whole drain path: creates, claims, successes) have no entry;
- a payload match, ``key=value`` (``a.b=1`` nests) or a JSON object the payload contains:
  there is no index on ``payload`` (a GIN there would be written by every claim and every
  success). It reads the newest :data:`PAYLOAD_SCAN_ROWS` jobs of the status and type filter
  and says so (:attr:`Search.payload_scan`).

Any text that is not payload syntax is tried as an id prefix (when it is hex), an idempotency
key and error words at once; the matches are the union. Each arm stops at
``find_jobs.ARM_CAP``.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from ...config.rules import MAX_JSON_DEPTH, Q_MAX_LENGTH, json_problem

ID_PREFIX_MIN = 4
PAYLOAD_SCAN_ROWS = 10_000  # a payload search reads the newest this many jobs of its filter
MAX_WORDS = 8
_HEX = re.compile(r"[0-9a-f]+")
_KEY_VALUE = re.compile(r"^([A-Za-z_][\w.-]*)=(.*)$", re.DOTALL)
_SCHEDULE = re.compile(r"^schedule:([A-Za-z0-9_.-]{1,64}):?$")  # limits.SCHEDULE_NAME_PATTERN
_PIECE = re.compile(r"[^\W_]+")  # a run of letters and digits: what the error's index holds
MAX_PIECES = 16  # parts of the words of an error search, all together


class SearchError(ValueError):
    """``q`` cannot be read; the message says what would be."""


class UnstorableSearch(SearchError):
    """A payload search for a value no job can hold (``jsonb`` refuses it): NaN, Infinity, a
    number out of range, an unpaired surrogate, NUL, or nesting past the limit. Refused by every
    door, the API included (it searches any other text as text)."""


_UNSTORABLE = {
    "number": (
        "A payload search holds finite numbers only: NaN, Infinity and numbers out of range (like "
        "1e999) cannot be in any job's payload (jsonb refuses them)."
    ),
    "surrogate": (
        "A payload search must be valid Unicode: an unpaired surrogate (like \\ud800) cannot be in "
        "any job's payload."
    ),
    "nul": "A payload search cannot contain the NUL character.",
    "depth": f"A payload search is nested at most {MAX_JSON_DEPTH} levels deep.",
}


def _storable(value: dict[str, Any]) -> dict[str, Any]:
    problem = json_problem(value)
    if problem is not None:
        raise UnstorableSearch(_UNSTORABLE[problem.kind])
    return value


@dataclass(frozen=True)
class Terms:
    """What ``q`` asks for; empty fields are kinds that do not apply."""

    text: str
    id_range: tuple[uuid.UUID, uuid.UUID] | None = None
    idempotency_key: str | None = None
    error_query: str | None = None  # a to_tsquery('simple', ...) text built from word parts only
    payload: dict[str, Any] | None = None
    key_prefix: str | None = None  # a schedule's runs: keys starting with it
    kinds: tuple[str, ...] = field(default=())


def _id_range(text: str) -> tuple[uuid.UUID, uuid.UUID] | None:
    digits = text.lower().replace("-", "")
    if not ID_PREFIX_MIN <= len(digits) <= 32 or not _HEX.fullmatch(digits):
        return None
    return uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))


def _payload(text: str) -> dict[str, Any] | None:
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            raise SearchError('A payload search is a JSON object, like {"user": 42}, or key=value.') from None
        if not isinstance(value, dict) or not value:
            raise SearchError('A payload search is a non-empty JSON object, like {"user": 42}.')
        return _storable(value)
    match = _KEY_VALUE.match(text)
    if match is None:
        return None
    key, raw = match.groups()
    nested: Any
    try:
        nested = json.loads(raw)
    except (ValueError, RecursionError):
        nested = raw  # a bare word is a string
    for part in reversed(key.split(".")):
        if not part:
            raise SearchError("A payload key has no empty parts: use a.b=1.")
        nested = {part: nested}
    return _storable(nested)


def parse_q(raw: str) -> Terms:
    """``q`` as :class:`Terms`; :class:`SearchError` with a message for text that cannot be a search."""
    text = raw.strip()
    if not text:
        raise SearchError("Type something to search for.")
    if len(text) > Q_MAX_LENGTH or "\x00" in text:
        raise SearchError(f"A search is at most {Q_MAX_LENGTH} characters, without NUL.")
    payload = _payload(text)
    if payload is not None:
        return Terms(text=text, payload=payload, kinds=("payload",))
    return _text_terms(text)


def error_parts(text: str) -> list[list[str]]:
    """The words of an error search, each as its parts (letters and digits, lower case):
    ``"refused smtp.example.com"`` is ``[["refused"], ["smtp", "example", "com"]]``. At most
    :data:`MAX_WORDS` words and :data:`MAX_PIECES` parts."""
    words: list[list[str]] = []
    budget = MAX_PIECES
    for chunk in text.split()[:MAX_WORDS]:
        parts = [part.lower() for part in _PIECE.findall(chunk)][:budget]
        if parts:
            words.append(parts)
            budget -= len(parts)
        if budget <= 0:
            break
    return words


def error_query(text: str) -> str | None:
    """A ``to_tsquery('simple', ...)`` text: every word present, each the run of its parts in
    order (``<->``), the last part a prefix (it may be cut where the operator stopped
    copying). Only letters and digits reach it, so no operator or quote of tsquery syntax."""
    words = error_parts(text)
    if not words:
        return None
    return " & ".join("(" + " <-> ".join([*parts[:-1], f"{parts[-1]}:*"]) + ")" for parts in words)


def _text_terms(text: str) -> Terms:
    id_range = _id_range(text)
    query = error_query(text)
    schedule = _SCHEDULE.match(text)
    prefix = f"schedule:{schedule.group(1)}:" if schedule else None
    kinds = (("id",) if id_range else ()) + ("idempotency key",) + (("schedule runs",) if prefix else ())
    kinds += ("error text",) if query else ()
    return Terms(
        text=text,
        id_range=id_range,
        idempotency_key=text[:255],
        error_query=query,
        key_prefix=prefix,
        kinds=kinds,
    )


def parse_api_q(raw: str) -> Terms | None:
    """``q`` as the API reads it: any text its schema allows is a search. Blank is no search;
    text that looks like payload syntax but is not a valid payload search is searched as
    text (id, idempotency key, error words) instead of refused, unless it asks for a value no
    payload can hold (:class:`UnstorableSearch`, raised). The pages use :func:`parse_q`, which
    says what is wrong, for a person typing."""
    if not raw.strip():
        return None
    try:
        return parse_q(raw)
    except UnstorableSearch:
        raise
    except SearchError:
        return _text_terms(raw.strip())


@dataclass(frozen=True)
class Search:
    """What a search found: its kinds, and whether the payload scan bounded it."""

    terms: Terms
    payload_scan: int | None = None  # the newest this many jobs were scanned (payload search)


def describe(terms: Terms) -> Search:
    return Search(terms=terms, payload_scan=PAYLOAD_SCAN_ROWS if terms.payload is not None else None)


@dataclass(frozen=True)
class ErrorExcerpt:
    """The part of an error that a search matched, with some text either side."""

    before: str
    match: str
    after: str


def error_excerpt(error: str, terms: Terms, *, before: int = 60, after: int = 100) -> ErrorExcerpt | None:
    """Where an error search (``terms.error_query``) matched ``error``: the earliest of its
    words, as the run of its parts the index matched, with up to ``before`` / ``after``
    characters around it (``...`` where cut). ``None``: no error search, or no word found (the
    job was found by its id or key)."""
    if terms.error_query is None or not error:
        return None
    found: re.Match[str] | None = None
    for parts in error_parts(terms.text):
        pattern = r"[\W_]+".join(re.escape(part) for part in parts) + r"[^\W_]*"
        match = re.search(r"(?<![^\W_])" + pattern, error, re.IGNORECASE)
        if match is not None and (found is None or match.start() < found.start()):
            found = match
    if found is None:
        return None
    start, end = max(0, found.start() - before), min(len(error), found.end() + after)
    return ErrorExcerpt(
        before=("..." if start else "") + error[start : found.start()],
        match=found.group(0),
        after=error[found.end() : end] + ("..." if end < len(error) else ""),
    )
