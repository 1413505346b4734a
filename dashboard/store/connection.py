"""The psycopg execution layer under the transitions: connections, compiled statements, rows.

- :func:`connect` / :func:`connect_worker` / :func:`release_worker`: autocommit connections,
  the autocommit SQLAlchemy engine cached per Flask-SQLAlchemy engine;
- :func:`fetch_rows` / :func:`fetch_job`: run a statement (``sql.query``) on the driver
  connection, compiled once, rows as plain dicts (:func:`fetch_rows_while`: one statement per
  parameter set in one pipelined transaction, with client work done while the server executes);
- :func:`fetch_rows_within`: the same statements on a caller's connection, inside the caller's
  transaction (an application enqueueing beside its own writes);
- errors come back as SQLAlchemy's exception classes (``DBAPIError.instance``), so callers tell
  an outage from a refusal the same way everywhere.

Needs an application context (for the SQLAlchemy engine) and nothing else.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy import Connection, Engine, TextClause, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql

from ..extensions import engine
from .records import JobRecord

T = TypeVar("T")

# A one-job mode worker thread's connection (connect_worker) plans its statements once,
# generically, instead of once per execution; reset when the connection goes back to the pool.
GENERIC_PLANS = "SET plan_cache_mode = force_generic_plan"
DEFAULT_PLANS = "RESET plan_cache_mode"

_autocommit_engines: weakref.WeakKeyDictionary[Engine, Engine] = weakref.WeakKeyDictionary()

# The execution option that marks the store's autocommit connections (:func:`connect`). Not
# SQLAlchemy's ``isolation_level="AUTOCOMMIT"``: that one sets the driver's mode on every
# checkout and resets it on every check-in through SQLAlchemy's characteristics, the largest
# single part of a pooled call's overhead (docs/benchmarks.md). The driver's flag is set here
# instead, and put back by :func:`_autocommit_off` at check-in.
AUTOCOMMIT_OPTION = "jobqueue_autocommit"


def autocommit_engine() -> Engine:
    """The current engine with :data:`AUTOCOMMIT_OPTION` set, cached per engine; the first call
    for an engine also installs :func:`_autocommit_off` on its pool."""
    current = engine()
    autocommit = _autocommit_engines.get(current)
    if autocommit is None:
        event.listen(current, "checkin", _autocommit_off)
        autocommit = _autocommit_engines[current] = current.execution_options(**{AUTOCOMMIT_OPTION: True})
    return autocommit


def _autocommit_off(dbapi_connection: Any, record: Any) -> None:
    """A connection goes back to the pool in the driver's default mode, whoever had it: the
    next one to check it out (a SQLAlchemy transaction, a host's session) expects it. One that
    cannot be switched is broken, and the next checkout replaces it (``database._check``)."""
    if dbapi_connection is not None and dbapi_connection.autocommit:
        with suppress(psycopg.Error):
            dbapi_connection.autocommit = False


def autocommits(conn: Connection) -> bool:
    """Whether ``conn`` commits each statement on its own: one of :func:`connect`'s, or one a
    caller set to SQLAlchemy's ``AUTOCOMMIT`` isolation level."""
    options = conn.get_execution_options()
    return bool(options.get(AUTOCOMMIT_OPTION)) or options.get("isolation_level") == "AUTOCOMMIT"


def connect() -> Connection:
    """A connection for many engine calls in a row (a worker thread keeps one).

    Every transition is a single statement (``store/*.sql``), atomic on its own, so it runs in
    autocommit mode: one round trip, with no BEGIN and no COMMIT around it (a bulk create's
    chunks, several statements, open their own transaction: :func:`fetch_rows_while`). Holding
    the connection also saves the pool checkout and its pre-ping on every call. A connection
    that fails the switch (it died in the pool, or just after the checkout) is discarded and the
    error comes back as SQLAlchemy's class, as every statement's does.
    """
    conn = autocommit_engine().connect()
    try:
        raw_connection(conn).autocommit = True
    except psycopg.Error as error:
        conn.invalidate()
        conn.close()
        raise _translated("SET autocommit", {}, error) from error
    except BaseException:
        conn.close()
        raise
    return conn


def connect_worker() -> Connection:
    """:func:`connect` for a one-job mode worker thread: its statements get the generic plan.

    Such a thread runs a few statements thousands of times with new values: mostly
    ``COMPLETE_AND_CLAIM_NO_LIMITS`` (``COMPLETE_AND_CLAIM_ONLY_QUEUE`` while the served queues
    without a limit are one) and ``CLAIM_ONE_NO_LIMITS``, or while a limited queue
    could give a job ``COMPLETE_AND_CLAIM`` and ``CLAIM_ONE``, all one range of
    ``job_queue_claim_idx`` per queue with ``LIMIT 1`` spelled out, and now and then
    ``LIMITS_OPEN`` (``store/lifecycle/claim_form.py``); the other transitions keyed by job id, and the
    rescue pass through the small partial ``job_timeout_idx``. psycopg
    prepares them; without this setting PostgreSQL re-plans them on every execution, and
    planning the claim costs more as the table grows. The generic plans walk those indexes in
    order all the same (figures: ``docs/benchmarks.md``). Not for batch mode's statements:
    with a limit or a row set known only at run time, a generic
    plan may sort or hash where a custom one walks an index. Give the connection back with
    :func:`release_worker`, so the setting does not outlive the thread.

    A connection that fails the setting (it died in the pool, or just after the checkout) is
    discarded, and the error comes back as SQLAlchemy's class, as every statement's does: a
    caller retrying through an outage must see the connection error as one.
    """
    conn = connect()
    try:
        raw_connection(conn).execute(GENERIC_PLANS)
    except psycopg.Error as error:
        conn.invalidate()
        conn.close()
        raise _translated(GENERIC_PLANS, {}, error) from error
    except BaseException:
        conn.close()
        raise
    return conn


def release_worker(conn: Connection) -> None:
    """Give a worker thread's connection back to the pool (or, if it broke, discard it),
    undoing :func:`connect_worker`'s setting; on a connection from :func:`connect` the reset
    changes nothing, so every worker connection goes back the same way."""
    try:
        raw_connection(conn).execute(DEFAULT_PLANS)
    except psycopg.Error:
        conn.invalidate()
    finally:
        conn.close()


def _translated(statement: str, params: Any, error: psycopg.Error) -> sa_exc.StatementError:
    """``error`` as SQLAlchemy's class for it (``OperationalError`` for a lost connection, and
    so on): every error of this module reaches its callers so."""
    return sa_exc.DBAPIError.instance(statement, params, error, psycopg.Error)


def raw_connection(conn: Connection) -> psycopg.Connection[Any]:
    """The psycopg connection under ``conn``; ``RuntimeError`` if ``conn`` was closed."""
    driver: psycopg.Connection[Any] | None = conn.connection.driver_connection
    if driver is None:
        raise RuntimeError("the connection is closed: no psycopg connection under it")
    return driver


@contextmanager
def autocommit(conn: Connection | None) -> Iterator[Connection]:
    if conn is None:
        with connect() as fresh:
            yield fresh
        return
    if not autocommits(conn):
        raise ValueError("pass a connection from connection.connect(): statements must autocommit")
    yield conn


@contextmanager
def transaction(conn: Connection) -> Iterator[Connection]:
    """One transaction of several statements on an autocommit connection (``fetch_rows`` in it
    runs inside it): committed when the block ends, rolled back if it raises. For a read-decide-
    write that must hold its row locks between statements (firing a schedule)."""
    raw = _driver(conn)
    try:
        with raw.transaction():
            yield conn
    except psycopg.Error as error:
        raise _translated("COMMIT", {}, error) from error


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str  # PostgreSQL's own $n placeholders, sent as it is (psycopg.RawCursor)
    names: tuple[str, ...]  # the parameter behind each $n, in order
    jsonb: frozenset[str]  # parameters to send as jsonb
    fixed: dict[str, Any]  # parameters the statement binds itself (sql.FIXED)


_compiled: dict[int, _Compiled] = {}
_PSYCOPG = postgresql.psycopg.dialect()  # type: ignore[no-untyped-call]  # SQLAlchemy's dialects are unannotated
# What SQLAlchemy's psycopg compiler writes: a named placeholder, or a literal % doubled.
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")


def _compile(statement: TextClause) -> _Compiled:
    """``statement`` with ``$n`` placeholders, converted once.

    psycopg converts a ``%(name)s`` query on every execution and caches that conversion only
    for queries of up to 4,096 characters; the claim-and-settle statements are longer, and
    converting them again cost a one-job worker interpreter time on every job (docs/benchmarks.md).
    A raw query is sent as it is, with its parameters in ``names``' order (:func:`_args`).
    """
    compiled = _compiled.get(id(statement))
    if compiled is None:
        binds = statement._bindparams
        jsonb = frozenset(name for name, bind in binds.items() if isinstance(bind.type, postgresql.JSONB))
        fixed = {name: bind.value for name, bind in binds.items() if bind.value is not None}
        names: list[str] = []

        def number(match: re.Match[str]) -> str:
            name = match.group(1)
            if name is None:
                return "%"
            if name not in names:
                names.append(name)
            return f"${names.index(name) + 1}"

        sql_text = _PLACEHOLDER.sub(number, str(statement.compile(dialect=_PSYCOPG)))
        compiled = _compiled[id(statement)] = _Compiled(sql_text, tuple(names), jsonb, fixed)
    return compiled


def _dict_rows(cursor: psycopg.Cursor[Any]) -> Callable[[Sequence[Any]], dict[str, Any]]:
    """psycopg's ``dict_row`` without ``cursor.description``: that builds a ``Column`` object
    per column on every statement, measurable on a worker's hot path (docs/benchmarks.md)."""
    result = cursor.pgresult
    names = [(result.fname(i) or b"").decode() for i in range(result.nfields)] if result is not None else []

    def make(values: Sequence[Any]) -> dict[str, Any]:
        return dict(zip(names, values, strict=True))

    return make


def _args(compiled: _Compiled, params: dict[str, Any]) -> list[Any]:
    """The parameters in ``$n`` order: the jsonb ones wrapped, the fixed ones added;
    ``KeyError`` naming a parameter the statement needs and ``params`` lacks."""
    args: list[Any] = []
    for name in compiled.names:
        if name in compiled.fixed:
            args.append(compiled.fixed[name])
        elif name not in params:
            raise KeyError(f"the statement needs the parameter {name!r}")
        else:
            args.append(Jsonb(params[name]) if name in compiled.jsonb else params[name])
    return args


def _driver(conn: Connection) -> psycopg.Connection[Any]:
    """The driver connection, which must autocommit: a statement outside autocommit would hold
    a transaction open."""
    raw = raw_connection(conn)
    if not raw.autocommit:
        raise RuntimeError("engine statements run on autocommit connections (connection.connect())")
    return raw


def fetch_rows(conn: Connection, statement: TextClause, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Run ``statement`` (one of ``sql.query``'s) on the psycopg connection under ``conn``.

    The transitions are the hot path of every worker thread: SQLAlchemy's result machinery
    (column metadata rebuilt on every call for a text statement) is too slow for that path,
    so they go to the driver directly, compiled once. Errors come back as SQLAlchemy's
    exception classes, so callers tell an outage from a refusal the same way everywhere.
    """
    compiled, raw = _compile(statement), _driver(conn)
    args = _args(compiled, params)
    cursor = _kept_cursor(conn, raw)
    try:
        cursor.execute(compiled.sql, args)
        return cursor.fetchall() if _has_rows(cursor) else []
    except psycopg.Error as error:
        raise _translated(compiled.sql, args, error) from error


_CURSOR = "jobqueue.cursor"  # the key of a connection's kept cursor in its pool record's info


def _kept_cursor(conn: Connection, raw: psycopg.Connection[Any]) -> psycopg.RawCursor[dict[str, Any]]:
    """The cursor :func:`fetch_rows` keeps for the psycopg connection ``raw`` under ``conn``.

    A cursor's adapters find each parameter's dumper and each column's loader once and keep
    them; a new cursor per statement looked them all up again on every job (a worker's
    claim-and-settle statement sends and returns dozens of values). Kept in the pool record's
    ``info``, which lives as long as the psycopg connection under it; one whose connection
    was replaced (a reconnect after a failure) is made again. A connection is used by one
    thread at a time, so its cursor is too.
    """
    cursor = conn.info.get(_CURSOR)
    if cursor is None or cursor.closed or cursor.connection is not raw:
        cursor = conn.info[_CURSOR] = psycopg.RawCursor(raw, row_factory=_dict_rows)
    return cursor


def fetch_tuples(conn: Connection, statement: TextClause, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Run ``statement`` (one of ``sql.query``'s) on the psycopg connection under ``conn``, in
    whatever transaction ``conn`` holds (a page's read, under its time limit), and return plain
    tuples: for a read of thousands of rows, where SQLAlchemy's rows cost more than the query.
    Errors come back as SQLAlchemy's exception classes, as :func:`fetch_rows`'s."""
    compiled, raw = _compile(statement), raw_connection(conn)
    args = _args(compiled, params)
    try:
        with psycopg.RawCursor(raw) as cursor:
            cursor.execute(compiled.sql, args)
            return cursor.fetchall() if _has_rows(cursor) else []
    except psycopg.Error as error:
        raise _translated(compiled.sql, args, error) from error


def fetch_rows_while(
    conn: Connection,
    statement: TextClause,
    param_sets: Iterable[dict[str, Any]],
    meanwhile: Callable[[], T],
    *,
    first: str | None = None,
) -> tuple[list[dict[str, Any]], T]:
    """``statement`` once per parameter set, in one transaction, with the client's own work
    overlapping the server's: the rows of every execution (in order) and ``meanwhile()``.

    The executions go out in pipeline mode, so the server starts on the first at once and works
    through them while the client builds the next set (``param_sets`` may be a generator that
    builds each set on demand: a bulk create's chunks) and then runs ``meanwhile()`` (work that
    does not depend on the answer: building the 1,000 records). All of it is one transaction,
    committed only after ``meanwhile()`` returns; an error on either side (a statement refused,
    or the client raising while a set is built or in ``meanwhile``) rolls everything back.
    ``first``: a statement of no parameters run before the others, in the same transaction and
    the same pipeline (no round trip of its own); its rows are not returned.
    """
    compiled, raw = _compile(statement), _driver(conn)
    cursors: list[psycopg.RawCursor[dict[str, Any]]] = []
    try:
        with raw.pipeline(), raw.transaction():
            if first is not None:
                raw.execute(first)
            for params in param_sets:
                cursor = psycopg.RawCursor(raw, row_factory=_dict_rows)
                cursors.append(cursor)
                cursor.execute(compiled.sql, _args(compiled, params))
            done = meanwhile()
        rows = [row for cursor in cursors if _has_rows(cursor) for row in cursor.fetchall()]
    except psycopg.Error as error:
        # Which execution the server refused is not known here (its answer may arrive while a
        # later one is sent), so no one set's parameters are named as the culprit.
        sent = {"executions sent": len(cursors)}
        raise _translated(compiled.sql, sent, error) from error
    finally:
        for cursor in cursors:
            cursor.close()
    return rows, done


def _has_rows(cursor: psycopg.Cursor[Any]) -> bool:
    result = cursor.pgresult
    return result is not None and bool(result.nfields)


def fetch_rows_within(
    conn: Connection, statement: TextClause, params: dict[str, Any]
) -> list[dict[str, Any]]:
    """Run ``statement`` on a caller's connection, in the caller's transaction: nothing is
    committed or rolled back here.

    SQLAlchemy executes it (not the driver directly, as :func:`fetch_rows` does), so the
    statement joins the transaction the caller began, or the one SQLAlchemy begins on first use
    and the caller commits; the jsonb and fixed parameters bind as the statement declares them
    (``sql.query``). Its effects, a ``pg_notify`` included, exist only once that transaction
    commits. Refuses an autocommit connection, which would commit each statement on its own.
    """
    if autocommits(conn):
        raise ValueError("a connection in the caller's transaction, not an autocommit one, is needed here")
    return [dict(row) for row in conn.execute(statement, params).mappings()]


def fetch_job(conn: Connection, statement: TextClause, params: dict[str, Any]) -> JobRecord | None:
    rows = fetch_rows(conn, statement, params)
    row = rows[0] if rows else None
    return JobRecord.from_row(row) if row is not None else None
