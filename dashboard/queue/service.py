"""Every job state transition, each one transaction that writes its event.

The API, the dashboard, the worker and the tests all call these functions; nothing else writes
job state. They take explicit inputs (ids, worker id, attempt, ``now``) and return plain
records. A worker-side call whose ownership guard matches no row returns ``None``: that is a
stale worker being fenced off, a normal outcome, not an error.

They need an application context (for the engine) and nothing else: no request, no session
cookie, no template.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy import Connection, Engine, TextClause
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql

from ..extensions import db
from . import sql
from .backoff import delay_table, retry_delay
from .records import CleanupResult, CreateResult, JobRecord, RetryResult
from .states import Status

TYPE_MAX_LENGTH = 120
IDEMPOTENCY_KEY_MAX_LENGTH = 255
PRIORITY_MIN, PRIORITY_MAX = -32768, 32767
INT_MAX = 2_147_483_647
DEFAULT_PRIORITY = 50


def utcnow() -> datetime:
    return datetime.now(UTC)


_autocommit_engines: weakref.WeakKeyDictionary[Engine, Engine] = weakref.WeakKeyDictionary()


def _autocommit_engine() -> Engine:
    engine = db.engine
    autocommit = _autocommit_engines.get(engine)
    if autocommit is None:
        autocommit = _autocommit_engines[engine] = engine.execution_options(isolation_level="AUTOCOMMIT")
    return autocommit


def connect() -> Connection:
    """A connection for many engine calls in a row (a worker thread keeps one).

    Every transition is a single statement (``sql.py``), atomic on its own, so it runs in
    autocommit mode: one round trip, with no BEGIN and no COMMIT around it. Holding the
    connection also saves the pool checkout and its pre-ping on every call.
    """
    return _autocommit_engine().connect()


def connect_worker() -> Connection:
    """:func:`connect` for a one-job mode worker thread: its statements get the generic plan.

    Such a thread runs a few statements thousands of times with new values: mostly
    ``COMPLETE_AND_CLAIM`` and ``CLAIM_ONE`` (``LIMIT 1`` spelled out), the other transitions
    keyed by job id, and the cleanup tick through the small partial ``job_timeout_idx``.
    psycopg prepares them, but PostgreSQL re-planned them on every execution, and planning the
    claim costs more as the table grows: at 10M jobs a claim took about 1.9 ms with custom plans
    and 1.1-1.4 ms with the generic one in one run, 1.0-1.1 and 0.8-1.1 ms in another; the
    generic plan walks ``job_claim_idx`` in order all the same (``docs/benchmarks.md``). Not
    for batch mode's statements: with a limit or a row set known only at run time, a generic
    plan may sort or hash where a custom one walks an index. Give the connection back with
    :func:`release_worker`, so the setting does not outlive the thread.
    """
    conn = connect()
    try:
        _raw(conn).execute(sql.GENERIC_PLANS)
    except BaseException:
        conn.close()
        raise
    return conn


def release_worker(conn: Connection) -> None:
    """Give a worker thread's connection back to the pool (or, if it broke, discard it),
    undoing :func:`connect_worker`'s setting; on a connection from :func:`connect` the reset
    changes nothing, so every worker connection goes back the same way."""
    try:
        _raw(conn).execute(sql.DEFAULT_PLANS)
    except psycopg.Error:
        conn.invalidate()
    finally:
        conn.close()


def _raw(conn: Connection) -> psycopg.Connection[Any]:
    return conn.connection.driver_connection


@contextmanager
def _connection(conn: Connection | None) -> Iterator[Connection]:
    if conn is None:
        with connect() as fresh:
            yield fresh
        return
    if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
        raise ValueError("pass a connection from service.connect(): statements must autocommit")
    yield conn


def _aware(value: datetime, name: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware")
    return value


def pg_safe(value: Any) -> Any:
    """Replace NUL characters, which PostgreSQL text and jsonb cannot store.

    Error messages and tracebacks come from arbitrary handler code; they must never make the
    failure itself unrecordable.
    """
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {pg_safe(str(k)): pg_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [pg_safe(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str  # psycopg's %(name)s placeholders
    jsonb: frozenset[str]  # parameters to send as jsonb


_compiled: dict[int, _Compiled] = {}
_PSYCOPG = postgresql.psycopg.dialect()


def _compile(statement: TextClause) -> _Compiled:
    compiled = _compiled.get(id(statement))
    if compiled is None:
        jsonb = frozenset(
            name for name, bind in statement._bindparams.items() if isinstance(bind.type, postgresql.JSONB)
        )
        compiled = _compiled[id(statement)] = _Compiled(str(statement.compile(dialect=_PSYCOPG)), jsonb)
    return compiled


def _dict_rows(cursor: psycopg.Cursor[Any]) -> Callable[[Sequence[Any]], dict[str, Any]]:
    """psycopg's ``dict_row`` without ``cursor.description``: that builds a ``Column`` object
    per column on every statement, a tenth of a worker's Python time per job."""
    result = cursor.pgresult
    names = [result.fname(i).decode() for i in range(result.nfields)] if result is not None else []

    def make(values: Sequence[Any]) -> dict[str, Any]:
        return dict(zip(names, values, strict=True))

    return make


def _rows(conn: Connection, statement: TextClause, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Run one of ``sql.py``'s statements on the psycopg connection under ``conn``.

    The transitions are the hot path of every worker thread: SQLAlchemy's result machinery
    (column metadata rebuilt on every call for a text statement) cost a third of a job's time,
    so they go to the driver directly, compiled once. Errors come back as SQLAlchemy's
    exception classes, so callers tell an outage from a refusal the same way everywhere.
    """
    compiled = _compile(statement)
    args = {k: Jsonb(v) if k in compiled.jsonb else v for k, v in params.items()}
    raw = _raw(conn)
    if not raw.autocommit:  # a statement outside autocommit would hold a transaction open
        raise RuntimeError("engine statements run on autocommit connections (service.connect())")
    try:
        with raw.cursor(row_factory=_dict_rows) as cursor:
            cursor.execute(compiled.sql, args)
            result = cursor.pgresult
            return cursor.fetchall() if result is not None and result.nfields else []
    except psycopg.Error as error:
        raise sa_exc.DBAPIError.instance(compiled.sql, args, error, psycopg.Error) from error


def _job(conn: Connection, statement: TextClause, params: dict[str, Any]) -> JobRecord | None:
    rows = _rows(conn, statement, params)
    row = rows[0] if rows else None
    return JobRecord.from_row(row) if row is not None else None


def create_job(
    type: str,
    payload: Any = None,
    *,
    priority: int = DEFAULT_PRIORITY,
    available_at: datetime | None = None,
    max_attempts: int = 3,
    idempotency_key: str | None = None,
    event_data: dict[str, Any] | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> CreateResult:
    """Queue a job, or return the job that already holds ``idempotency_key``.

    ``available_at`` defaults to ``now``. ``event_data`` is merged into the ``created``
    event (who created it, through which door).
    """
    now = _aware(now or utcnow(), "now")
    _check(JobSpec(type, payload, priority, available_at, max_attempts, idempotency_key))
    params = {
        "id": uuid.uuid4(),
        "type": type,
        "payload": {} if payload is None else payload,
        "priority": priority,
        "available_at": available_at or now,
        "max_attempts": max_attempts,
        "idempotency_key": idempotency_key,
        "event_data": {"type": type, **(event_data or {})},
        "now": now,
    }
    with _connection(conn) as conn:
        job = _job(conn, sql.CREATE, params)
        if job is not None:
            return CreateResult(job=job, created=True)
        existing = _job(conn, sql.FIND_BY_IDEMPOTENCY_KEY, {"idempotency_key": idempotency_key})
    if existing is None:  # the conflicting row vanished between the two statements
        raise RuntimeError("idempotency key conflict with a job that no longer exists")
    return CreateResult(job=existing, created=False)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job of a bulk create; the fields and defaults of :func:`create_job`."""

    type: str
    payload: Any = None
    priority: int = DEFAULT_PRIORITY
    available_at: datetime | None = None
    max_attempts: int = 3
    idempotency_key: str | None = None


def _check(spec: JobSpec) -> None:
    if not spec.type or len(spec.type) > TYPE_MAX_LENGTH:
        raise ValueError(f"type must be 1 to {TYPE_MAX_LENGTH} characters")
    if not PRIORITY_MIN <= spec.priority <= PRIORITY_MAX:
        raise ValueError(f"priority must be between {PRIORITY_MIN} and {PRIORITY_MAX}")
    if not 1 <= spec.max_attempts <= INT_MAX:
        raise ValueError(f"max_attempts must be between 1 and {INT_MAX}")
    key = spec.idempotency_key
    if key is not None and not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX_LENGTH:
        raise ValueError(f"idempotency_key must be 1 to {IDEMPOTENCY_KEY_MAX_LENGTH} characters")
    if spec.available_at is not None:
        _aware(spec.available_at, "available_at")


def create_jobs(
    specs: Sequence[JobSpec],
    *,
    event_data: dict[str, Any] | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> list[CreateResult]:
    """Queue many jobs in one statement; all are checked before any is written.

    Idempotency keys are honoured per job: a key that exists, or that an earlier job of the
    same batch holds, returns that job with ``created=False``. Results follow ``specs``' order.
    A new job's record is built from its spec, which is what its row was written from (the
    database returns only the ids it inserted): reading every new row back, and decoding its
    payload, cost more than the insert itself. Its ``payload`` is the spec's own object.
    """
    now = _aware(now or utcnow(), "now").astimezone(UTC)
    for index, spec in enumerate(specs):
        try:
            _check(spec)
        except ValueError as exc:
            raise ValueError(f"job {index}: {exc}") from None
    if not specs:
        return []
    new = [_new_record(uuid.uuid4(), spec, now) for spec in specs]
    rows = [
        {
            "n": n,
            "id": str(job.id),
            "type": job.type,
            "payload": job.payload,
            "priority": job.priority,
            "available_at": job.available_at.isoformat(),
            "max_attempts": job.max_attempts,
            "idempotency_key": job.idempotency_key,
        }
        for n, job in enumerate(new)
    ]
    with _connection(conn) as conn:
        params = {"rows": rows, "now": now, "event_data": event_data or {}}
        inserted = {row["id"] for row in _rows(conn, sql.CREATE_MANY, params)}
        missing = {job.idempotency_key for job in new if job.id not in inserted}
        existing = {}
        if missing:
            found = _rows(conn, sql.FIND_BY_IDEMPOTENCY_KEYS, {"keys": sorted(missing)})
            existing = {row["idempotency_key"]: JobRecord.from_row(row) for row in found}
    return [
        CreateResult(job=job, created=True)
        if job.id in inserted
        else CreateResult(job=existing[job.idempotency_key], created=False)
        for job in new
    ]


def _new_record(job_id: uuid.UUID, spec: JobSpec, now: datetime) -> JobRecord:
    """The row ``sql.CREATE_MANY`` writes for ``spec``, as a record."""
    return JobRecord(
        id=job_id,
        type=spec.type,
        payload={} if spec.payload is None else spec.payload,
        status=Status.QUEUED.value,
        priority=spec.priority,
        available_at=now if spec.available_at is None else spec.available_at.astimezone(UTC),
        attempts=0,
        max_attempts=spec.max_attempts,
        idempotency_key=spec.idempotency_key,
        locked_by=None,
        locked_until=None,
        last_error="",
        result=None,
        created_at=now,
        updated_at=now,
        finished_at=None,
    )


def claim_jobs(
    worker_id: str,
    *,
    lease_seconds: float,
    limit: int = 1,
    now: datetime | None = None,
    conn: Connection | None = None,
    avoid_expired: bool = False,
) -> list[JobRecord]:
    """Claim up to ``limit`` eligible jobs for ``worker_id``, highest priority first."""
    return claim_batch(
        [worker_id] * limit, lease_seconds=lease_seconds, now=now, conn=conn, avoid_expired=avoid_expired
    )


def claim_batch(
    worker_ids: Sequence[str],
    *,
    lease_seconds: float,
    now: datetime | None = None,
    conn: Connection | None = None,
    avoid_expired: bool = False,
) -> list[JobRecord]:
    """Claim up to one job per id in ``worker_ids`` in one statement.

    The n-th claimed job is locked by the n-th id: a worker process claims for all its idle
    threads at once, and each job still belongs to the thread that will run it.
    ``avoid_expired``: skip jobs whose last attempt's lease expired (a worker process passes
    it while one of its threads runs an attempt past its lease, see ``worker.RunningAttempts``).
    """
    now = _aware(now or utcnow(), "now")
    if not worker_ids:
        return []
    params = {
        "worker_ids": list(worker_ids),
        "now": now,
        "locked_until": now + timedelta(seconds=lease_seconds),
        "avoid_expired": avoid_expired,
    }
    statement = sql.CLAIM_ONE if len(worker_ids) == 1 else sql.CLAIM
    with _connection(conn) as conn:
        rows = _rows(conn, statement, params)
    return [JobRecord.from_row(row) for row in rows]


def claim_next_job(
    worker_id: str, *, lease_seconds: float, now: datetime | None = None, conn: Connection | None = None
) -> JobRecord | None:
    """Claim the next eligible job: queued -> running, ``attempts + 1``, lease set."""
    jobs = claim_jobs(worker_id, lease_seconds=lease_seconds, limit=1, now=now, conn=conn)
    return jobs[0] if jobs else None


def _owner(job_id: uuid.UUID, worker_id: str, attempt: int) -> dict[str, Any]:
    return {"id": job_id, "worker_id": worker_id, "attempt": attempt}


def renew_lease(
    job_id: uuid.UUID,
    worker_id: str,
    attempt: int,
    *,
    lease_seconds: float,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> datetime | None:
    """Extend the lease; return the new ``locked_until``, or ``None`` if ownership is lost."""
    now = _aware(now or utcnow(), "now")
    params = {
        **_owner(job_id, worker_id, attempt),
        "now": now,
        "locked_until": now + timedelta(seconds=lease_seconds),
    }
    with _connection(conn) as conn:
        found = _rows(conn, sql.RENEW, params)
        return found[0]["locked_until"] if found else None


def record_progress(
    job_id: uuid.UUID,
    worker_id: str,
    attempt: int,
    *,
    message: str = "",
    data: dict[str, Any] | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> int | None:
    """Append a ``progress`` event; return its id, or ``None`` if ownership is lost."""
    params = {
        **_owner(job_id, worker_id, attempt),
        "now": _aware(now or utcnow(), "now"),
        "message": pg_safe(message),
        "data": pg_safe(data or {}),
    }
    with _connection(conn) as conn:
        found = _rows(conn, sql.PROGRESS, params)
        return found[0]["id"] if found else None


def complete_job(
    job_id: uuid.UUID,
    worker_id: str,
    attempt: int,
    result: Any = None,
    *,
    event_data: dict[str, Any] | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> JobRecord | None:
    """running -> succeeded, only for the owner of this attempt; else ``None``."""
    params = {
        **_owner(job_id, worker_id, attempt),
        "now": _aware(now or utcnow(), "now"),
        "result": result,
        "event_data": event_data or {},
    }
    with _connection(conn) as conn:
        return _job(conn, sql.COMPLETE, params)


def complete_and_claim(
    job_id: uuid.UUID,
    worker_id: str,
    attempt: int,
    result: Any = None,
    *,
    lease_seconds: float,
    now: datetime | None = None,
    conn: Connection | None = None,
    avoid_expired: bool = False,
) -> tuple[bool, JobRecord | None]:
    """:func:`complete_job` and :func:`claim_next_job` for the same worker, in one statement.

    Returns whether the success was recorded (``False``: the attempt was no longer ours) and
    the next job claimed, if any. The two are independent: a fenced-off completion still
    claims, and an empty queue still completes. ``avoid_expired`` as :func:`claim_batch`.
    """
    now = _aware(now or utcnow(), "now")
    params = {
        **_owner(job_id, worker_id, attempt),
        "worker_ids": [worker_id],
        "now": now,
        "locked_until": now + timedelta(seconds=lease_seconds),
        "result": result,
        "avoid_expired": avoid_expired,
    }
    with _connection(conn) as conn:
        row = _rows(conn, sql.COMPLETE_AND_CLAIM, params)[0]
    claimed = JobRecord.from_row(row) if row["id"] is not None else None
    return bool(row["completed"]), claimed


def complete_jobs(
    completions: Sequence[tuple[uuid.UUID, str, int, Any]],
    *,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> set[uuid.UUID]:
    """Record many successes ``(job_id, worker_id, attempt, result)`` in one statement.

    Each is fenced on its own, exactly as :func:`complete_job`; returns the ids recorded (the
    others were no longer owned by that worker and attempt).
    """
    if not completions:
        return set()
    rows = [
        {"id": str(job_id), "worker_id": worker_id, "attempt": attempt, "result": result}
        for job_id, worker_id, attempt, result in completions
    ]
    with _connection(conn) as conn:
        found = _rows(conn, sql.COMPLETE_MANY, {"rows": rows, "now": _aware(now or utcnow(), "now")})
        return {row["id"] for row in found}


def fail_job(
    job_id: uuid.UUID,
    worker_id: str,
    attempt: int,
    error: str,
    *,
    backoff_base_seconds: float,
    backoff_max_seconds: float,
    event_data: dict[str, Any] | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> JobRecord | None:
    """Record a failed attempt: requeue after the backoff while attempts remain, else fail.

    Returns the job in its new state (``queued`` or ``failed``), or ``None`` if this worker
    no longer owns the attempt.
    """
    now = _aware(now or utcnow(), "now")
    delay = retry_delay(max(attempt, 1), backoff_base_seconds, backoff_max_seconds)
    error = pg_safe(error)
    params = {
        **_owner(job_id, worker_id, attempt),
        "now": now,
        "retry_at": now + timedelta(seconds=delay),
        "delay": delay,
        "error": error,
        "event_data": {"error": error, **pg_safe(event_data or {})},
    }
    with _connection(conn) as conn:
        return _job(conn, sql.FAIL, params)


def cleanup_expired_jobs(
    worker_id: str | None,
    *,
    batch_size: int,
    backoff_base_seconds: float,
    backoff_max_seconds: float,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> CleanupResult:
    """Recover up to ``batch_size`` running jobs whose lease has expired.

    Each is requeued after its backoff (event ``timeout_requeued``) or, with no attempts
    left, failed (event ``failed``). ``last_error`` says which lease expired and whose it was.
    """
    params = {
        "worker_id": worker_id,
        "now": _aware(now or utcnow(), "now"),
        "batch": batch_size,
        "delays": delay_table(backoff_base_seconds, backoff_max_seconds),
        "max_delay": float(backoff_max_seconds),
    }
    with _connection(conn) as conn:
        rows = _rows(conn, sql.CLEANUP_EXPIRED, params)
    return CleanupResult(
        requeued=[row["id"] for row in rows if row["status"] == "queued"],
        failed=[row["id"] for row in rows if row["status"] == "failed"],
    )


def retry_job(
    job_id: uuid.UUID,
    *,
    event_data: dict[str, Any] | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> RetryResult:
    """failed -> queued with a fresh set of attempts, available now."""
    params = {
        "id": job_id,
        "now": _aware(now or utcnow(), "now"),
        "event_data": event_data or {},
    }
    with _connection(conn) as conn:
        job = _job(conn, sql.RETRY, params)
        if job is not None:
            return RetryResult(job=job)
        found = _rows(conn, sql.JOB_STATUS, {"id": job_id})
        status = found[0]["status"] if found else None
    if status is None:
        return RetryResult(job=None, reason="not_found")
    return RetryResult(job=None, reason="not_failed", status=status)
