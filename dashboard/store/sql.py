"""The statements that move a job, read whole from the ``*.sql`` files beside this module.

Each file holds statements under a header, the first comment line below it their one-line
description (required)::

    -- name: claim
    -- Claim one eligible job per id in :worker_ids, the n-th job locked by the n-th id.
    -- (more comment lines: the index it relies on, why it is written so)
    WITH picked AS (...)

A statement runs to the next header. Its full-line comments are for the reader and are not
sent. :func:`query` gives a statement by name, as a SQLAlchemy ``TextClause`` that
``connection.fetch_rows`` compiles once (and ``Connection.execute`` runs as any other);
modules take theirs at import, so an unknown name fails at once, and
``tests/store/test_statements.py`` checks that every statement is used.

Parameters are bound by these rules, read from the statement itself:

- ``:x`` written ``CAST(:x AS jsonb)`` anywhere in it is sent as jsonb (a dict or a list goes
  as its JSON, ``None`` as JSON null); every other parameter goes as Python gives it, with a
  ``CAST`` in the statement where the server could not tell its type;
- ``:notify_channel`` and ``:lease_expired_prefix`` are the store's constants
  (:data:`NOTIFY_CHANNEL`, :data:`LEASE_EXPIRED_PREFIX`), bound here, never by a caller.

The clock is written once, here: a statement says ``{{clock}}`` wherever it means "now", and
the file is read with :data:`CLOCK` in its place, the caller's ``:now`` (a test that moves the
clock) or else the server's ``statement_timestamp()``. It is not a SQL function: the planner
inlines a SQL function's body by parsing it again at every plan, and these statements are
planned at every run (custom plans), which cost the drain 5-6 % (docs/benchmarks.md).
``{{waiting}}`` is read the same way as :data:`WAITING`, a waiting job's ``available_at``.

One spelling each: the channel and the prefix here, the event columns in
``records.EventRecord``; a statement that inserts events with another column list is refused
when the files are read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from types import MappingProxyType

from sqlalchemy import TextClause, bindparam, text
from sqlalchemy.dialects.postgresql import JSONB

from .records import EVENT_FIELDS
from .states import WAITING_AT

# Workers LISTEN on this channel (runtime/wakeup.py); statements that make a job claimable now
# notify it, so idle workers wake at once. Polling stays the fallback: a lost notification
# costs at most one poll interval.
NOTIFY_CHANNEL = "jobqueue_jobs"

# How the rescue's last_error begins (rescue_expired in rescue.sql): the contract
# says last_error records an expired lease, and the claim's avoid-expired rule tells such a job
# by it (claim.sql). No worker-written error can begin so: the runtime writes errors as
# ``ExceptionType: message``.
LEASE_EXPIRED_PREFIX = "Lease expired at "

# "Now" in every statement: the caller's :now when a test moves the clock, else the server's.
CLOCK = "COALESCE(CAST(:now AS timestamptz), statement_timestamp())"
_CLOCK_MARK = "{{clock}}"
# A waiting job's available_at (states.WAITING_AT), written {{waiting}} in a statement.
WAITING = "CAST('" + WAITING_AT.isoformat() + "' AS timestamptz)"
_WAITING_MARK = "{{waiting}}"

FIXED = MappingProxyType({"notify_channel": NOTIFY_CHANNEL, "lease_expired_prefix": LEASE_EXPIRED_PREFIX})
EVENT_COLUMNS = tuple(name for name in EVENT_FIELDS if name != "id")

_HEADER = re.compile(r"^--\s*name:\s*(\S+)\s*$")
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_COMMENT = re.compile(r"^\s*--")
_JSONB = re.compile(r"CAST\(\s*:(\w+)\s+AS\s+jsonb\s*\)", re.IGNORECASE)
_EVENT_INSERT = re.compile(r"INSERT\s+INTO\s+jobs_jobevent\b\s*(\(([^)]*)\))?", re.IGNORECASE)


class StatementError(ValueError):
    """A ``.sql`` file that does not follow the rules above; the message says where."""


@dataclass(frozen=True)
class Statement:
    name: str
    description: str
    source: str  # the file it was read from
    sql: str  # as sent: the statement without its comment lines
    clause: TextClause
    jsonb: frozenset[str]  # the parameters bound as jsonb


def _statement(name: str, lines: list[str], source: str) -> Statement:
    where = f"{source}, statement {name!r}"
    if not _NAME.fullmatch(name):
        raise StatementError(f"{where}: a name is lower case letters, digits and underscores")
    if not lines or not _COMMENT.match(lines[0]) or not lines[0].strip().lstrip("-").strip():
        raise StatementError(f"{where}: the line under the name must describe the statement")
    description = lines[0].strip().lstrip("-").strip()
    body = "\n".join(line for line in lines[1:] if not _COMMENT.match(line)).strip().removesuffix(";")
    if CLOCK in body:
        raise StatementError(f"{where}: the clock is written {_CLOCK_MARK}")
    body = body.replace(_CLOCK_MARK, CLOCK).replace(_WAITING_MARK, WAITING)
    if not body:
        raise StatementError(f"{where}: no SQL under the description")
    for insert in _EVENT_INSERT.finditer(body):
        columns = tuple(c.strip() for c in (insert.group(2) or "").split(",") if c.strip())
        if columns != EVENT_COLUMNS:
            raise StatementError(f"{where}: events are inserted as ({', '.join(EVENT_COLUMNS)})")
    jsonb = frozenset(_JSONB.findall(body))
    clause = text(body)
    present = clause._bindparams
    binds = [bindparam(n, type_=JSONB) for n in sorted(jsonb)]
    binds += [bindparam(n, value=v) for n, v in FIXED.items() if n in present]
    return Statement(name, description, source, body, clause.bindparams(*binds), jsonb)


def parse(sql_text: str, source: str) -> list[Statement]:
    """The statements of one file's text, in order (comments above the first header are the
    file's own and belong to no statement)."""
    statements: list[Statement] = []
    name: str | None = None
    lines: list[str] = []
    for line in [*sql_text.splitlines(), "-- name: <end>"]:
        header = _HEADER.match(line)
        if header is None:
            lines.append(line)
            continue
        if name is not None:
            statements.append(_statement(name, lines, source))
        elif any(text.strip() and not _COMMENT.match(text) for text in lines):
            raise StatementError(f"{source}: SQL before the first '-- name:' header")
        name, lines = header.group(1), []
    return statements


def collect(files: Iterable[tuple[str, str]]) -> dict[str, Statement]:
    """The statements of ``(file name, text)`` pairs, by name: unique across the files."""
    found: dict[str, Statement] = {}
    for source, sql_text in files:
        for statement in parse(sql_text, source):
            if statement.name in found:
                first = found[statement.name].source
                raise StatementError(f"{source}: {statement.name!r} is already named in {first}")
            found[statement.name] = statement
    return found


def load() -> dict[str, Statement]:
    """Every statement of the ``*.sql`` files of this package and its folders (``lifecycle/``,
    ``reads/``, ``flow/``), by name; a file is named by its path in the store."""
    return collect(_sql_files(resources.files(__package__), ""))


def _sql_files(folder: Traversable, prefix: str) -> Iterable[tuple[str, str]]:
    for entry in sorted(folder.iterdir(), key=lambda entry: entry.name):
        if entry.is_dir() and not entry.name.startswith(("_", ".")):
            yield from _sql_files(entry, f"{prefix}{entry.name}/")
        elif entry.name.endswith(".sql"):
            yield f"{prefix}{entry.name}", entry.read_text(encoding="utf-8")


STATEMENTS = MappingProxyType(load())


def query(name: str) -> TextClause:
    """The statement called ``name`` in the ``*.sql`` files; ``KeyError`` naming it if none is."""
    try:
        return STATEMENTS[name].clause
    except KeyError:
        raise KeyError(f"no statement named {name!r} in dashboard/store/**/*.sql") from None
