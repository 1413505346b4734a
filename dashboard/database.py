"""Where the SQLAlchemy engine points: ``DATABASE_URL``, the ``POSTGRES_*`` variables, or embedded.

Without either, the app runs on an embedded PostgreSQL (the ``pgserver`` package) whose data
lives under the Flask instance folder. pgserver starts the server on first use and attaches to
it when it already runs, under an inter-process lock, so the web and worker processes share
one server. It is a real PostgreSQL 16: SKIP LOCKED, partial indexes and check constraints
behave exactly as on a production server.
"""

from __future__ import annotations

import atexit
import logging
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import psycopg
from sqlalchemy import Engine, event
from sqlalchemy import exc as sa_exc

from .config import PROJECT_ROOT, OpsSettings, Settings, database_urls

log = logging.getLogger(__name__)

# One migration at a time, whichever process starts first (web or worker).
MIGRATION_LOCK_KEY = 0x6A6F6271  # "jobq"


def _data_dir(name: str) -> str:
    """A data folder of the project: inside the installed package (a wheel puts
    ``templates/``, ``static/`` and ``migrations/`` under ``dashboard/``), else the checkout's
    top-level folder."""
    installed = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    return installed if os.path.isdir(installed) else os.path.join(PROJECT_ROOT, name)


MIGRATIONS_DIR = _data_dir("migrations")
TEMPLATES_DIR = _data_dir("templates")
STATIC_DIR = _data_dir("static")


def normalise_url(url: str) -> str:
    """Accept ``postgresql://``/``postgres://`` and point SQLAlchemy at psycopg 3; a URL naming
    several hosts (libpq's ``h1:p1,h2:p2`` or SQLAlchemy's ``?host=h1:p1&host=h2:p2``) becomes
    ``?host=h1,h2&port=p1,p2``, which SQLAlchemy and libpq both read
    (``config/database_urls.py``; ``DatabaseUrlError`` for a malformed list)."""
    return database_urls.normalise(url)


def postgres_url(settings: Settings) -> str:
    user = quote(settings.postgres_user, safe="")
    password = quote(settings.postgres_password, safe="")
    return (
        f"postgresql+psycopg://{user}:{password}@{settings.postgres_host}:"
        f"{settings.postgres_port}/{quote(settings.postgres_db, safe='')}"
    )


def embedded_url(instance_path: str) -> str:
    """Start (or attach to) the embedded server under the instance folder; return its URL.

    Safe when several processes (gunicorn's workers, a ``flask worker``) start at the same
    moment on an empty instance folder: the folders are created race-free here (pgserver's own
    ``mkdir`` of the data folder fails in every process but one), and pgserver initialises and
    starts the server under its inter-process lock.
    """
    os.makedirs(instance_path, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", ensure_runtime_dir())
    from pgserver import postgres_server  # imported late: only the embedded mode needs it

    pgdata = (Path(instance_path) / "pgdata").resolve()
    pgdata.mkdir(exist_ok=True)
    forget_dead_processes(pgdata)
    # cleanup_mode="stop": pgserver counts the processes attached (web, worker, a flask
    # command) and the last one to exit stops the server; no orphan postgres is left behind.
    server = postgres_server.get_server(pgdata, cleanup_mode="stop")
    # Registered after pgserver's own exit handler, so it runs first (atexit is LIFO): a process
    # that was killed (SIGKILL) never removed itself from the count, and would keep the last
    # live process from stopping the server.
    atexit.register(forget_dead_processes, pgdata)
    exit_on_sigterm()
    uri = server.get_uri()  # postgresql://postgres:@/postgres?host=/socket/dir
    parts = urlsplit(uri)
    host = parse_qs(parts.query).get("host", [""])[0]
    log.info("embedded PostgreSQL at %s (socket %s)", pgdata, host)
    return f"postgresql+psycopg://postgres@/postgres?host={quote(host, safe='/')}"


def exit_on_sigterm() -> None:
    """Make SIGTERM end this process through its exit handlers, when nothing else handles it.

    A process attached to the embedded server must exit through ``atexit`` for pgserver to
    count it out, so that the last one stops the server. gunicorn and ``flask worker`` handle
    SIGTERM themselves; ``flask run`` and other ``flask`` commands do not, and SIGTERM's default
    action ends a process without its exit handlers, leaving PostgreSQL running. Only from the
    main thread, and only over the default action (an installed handler is kept).
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_now)


def _exit_now(signum: int, frame: object) -> None:
    sys.exit(128 + signum)


def forget_dead_processes(pgdata: Path) -> list[int]:
    """Drop the processes that no longer run from pgserver's list of attached processes.

    pgserver keeps the pids of the processes using the server in ``pgdata/.handle_pids.json``
    and stops the server when the last one exits. A process killed with SIGKILL (honcho does
    that 5 s after SIGTERM) never removes itself, and the server would then outlive every
    project process. Done under pgserver's inter-process lock; returns the pids kept.
    """
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import DiskList

    pids = DiskList(pgdata / ".handle_pids.json")
    with PostgresServer._lock:
        attached = pids.get()
        alive = [pid for pid in attached if pid == os.getpid() or _running(pid)]
        if alive != attached:
            gone = sorted(set(attached) - set(alive))
            log.info("embedded PostgreSQL: forgetting exited process(es) %s", gone)
            pids.put(alive)
    return alive


def _running(pid: int) -> bool:
    import psutil  # imported late, as pgserver is: only the embedded mode needs it

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def ensure_runtime_dir() -> str:
    """pgserver keeps its inter-process lock here; platformdirs wants it private (0700)."""
    path = f"/tmp/jobqueue-runtime-{os.getuid()}"
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def resolve_url(settings: Settings, instance_path: str) -> tuple[str, bool]:
    """Return ``(sqlalchemy_url, embedded)``: ``DATABASE_URL``, else the ``POSTGRES_*``
    variables when ``POSTGRES_HOST`` is set, else the embedded server
    (``Settings.embedded_database``)."""
    if settings.embedded_database:
        return embedded_url(instance_path), True
    if settings.database_url:
        return normalise_url(settings.database_url), False
    return postgres_url(settings), False


def engine_options(settings: Settings) -> dict[str, object]:
    """Pool options: room for every worker thread plus batch mode's dispatcher and completer.

    A worker thread keeps its connection for its whole life, so the pool must hold one per
    thread and a few more (dispatcher, completer, stats refresh, a spare); the overflow
    covers ``flask worker --threads`` above ``JOB_WORKER_THREADS`` (the command refuses more
    than the pool can serve). ``POSTGRES_CONN_MAX_AGE`` maps to ``pool_recycle``; 0 (the
    default) keeps connections until they fail. No ``pool_pre_ping`` on every checkout (a
    round trip per request, half a single enqueue's database time): :func:`ping_when_suspect`
    pings only a connection that may have gone stale.
    """
    options: dict[str, object] = {
        "pool_size": pool_size(settings),
        "max_overflow": POOL_OVERFLOW,
        "pool_timeout": 10,
        # A host that drops packets must not hang a health check or a worker for minutes.
        "connect_args": {
            "connect_timeout": CONNECT_TIMEOUT_SECONDS,
            **tcp_connect_args(settings.ops),
            **pooled_connect_args(settings.ops),  # behind a pooler: no server-side prepares
        },
    }
    if settings.conn_max_age > 0:
        options["pool_recycle"] = settings.conn_max_age
    return options


POOL_OVERFLOW = 32
CONNECT_TIMEOUT_SECONDS = 5


def tcp_connect_args(ops: OpsSettings) -> dict[str, object]:
    """libpq's TCP options for every connection of the app: the pool's, and the worker's LISTEN
    connection (``runtime/wakeup.py``), also through a pooler (they are the client's own socket
    options; PgBouncer's connections to PostgreSQL have its own ``tcp_keepalive`` settings).

    An idle connection is probed after ``DATABASE_KEEPALIVES_IDLE_SECONDS`` of silence, then
    every ``DATABASE_KEEPALIVES_INTERVAL_SECONDS``, and closed after
    ``DATABASE_KEEPALIVES_COUNT`` unanswered probes; data sent and not acknowledged for
    ``DATABASE_TCP_USER_TIMEOUT_SECONDS`` closes it too (which also caps the probes). With the
    defaults a dead connection is found within about 20 s (10 s idle, then the 20 s user
    timeout counted from the last answer; at most 25 s by the probe count alone). The thread
    waiting on it then gets a connection error: it logs it and connects again, and the leases
    of attempts it could not settle in time are recovered. Ignored for a Unix socket.
    """
    args: dict[str, object] = {
        "keepalives": 1,
        "keepalives_idle": ops.database_keepalives_idle_seconds,
        "keepalives_interval": ops.database_keepalives_interval_seconds,
        "keepalives_count": ops.database_keepalives_count,
    }
    if ops.database_tcp_user_timeout_seconds > 0:
        args["tcp_user_timeout"] = max(1, round(ops.database_tcp_user_timeout_seconds * 1000))
    return args


def pooled_connect_args(ops: OpsSettings) -> dict[str, object]:
    """Extra psycopg connect arguments behind a transaction pooler (``DATABASE_POOLED``, see
    ``ops/pooling.py``): psycopg's automatic server-side prepared statements off (PgBouncer
    1.18 does not track them); none when not pooled."""
    return {"prepare_threshold": None} if ops.database_pooled else {}


def pool_size(settings: Settings) -> int:
    """The connections the pool keeps: one per worker thread, and five more."""
    return max(5, settings.worker.threads + 5)


def pool_capacity(settings: Settings) -> int:
    """How many connections the pool can hand out at once."""
    return pool_size(settings) + POOL_OVERFLOW


# A pooled connection is pinged at checkout only when it may be stale: it sat idle longer than
# this, or some connection of the process failed (was invalidated) since it was checked in, as
# after a database restart. Otherwise a checkout costs no round trip.
PING_AFTER_IDLE_SECONDS = 10.0
_last_failure = [0.0]  # monotonic time of the latest invalidated connection in this process


# SQLSTATEs that say the server reached cannot take this session's writes, or is going away:
# read_only_sql_transaction (a standby, or a demoted primary behind a name or pooler that still
# points at it), admin_shutdown, crash_shutdown, cannot_connect_now (starting, or in recovery).
CONNECTION_FAULT_SQLSTATES = frozenset({"25006", "57P01", "57P02", "57P03"})


def is_connection_fault(error: BaseException) -> bool:
    """Whether ``error`` (SQLAlchemy's or psycopg's) means this connection cannot serve: the
    database was not reached, the connection closed, or the server is read-only (25006) or
    shutting down. Such an error is the connection's, never the statement's nor the job's: the
    connection is dropped, the statement retried where that is safe, no attempt charged."""
    if isinstance(error, sa_exc.DisconnectionError | sa_exc.TimeoutError):
        return True
    if isinstance(error, sa_exc.DBAPIError):
        if error.connection_invalidated or isinstance(error, sa_exc.OperationalError | sa_exc.InterfaceError):
            return True
        error = error.orig if error.orig is not None else error
    if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
        return True
    return isinstance(error, psycopg.Error) and error.sqlstate in CONNECTION_FAULT_SQLSTATES


def _fault_is_disconnect(context: Any) -> None:
    """``handle_error``: a read-only server's refusal (or a shutdown's) invalidates the
    connection like a lost one, so the pool opens a fresh one (libpq then finds the primary
    among the URL's hosts) instead of handing the read-only one out again."""
    original = context.original_exception
    if isinstance(original, psycopg.Error) and original.sqlstate in CONNECTION_FAULT_SQLSTATES:
        context.is_disconnect = True


def ping_when_suspect(engine: Engine, *, writable: bool = True) -> None:
    """Install the checks above on ``engine``'s pool (:func:`engine_options` has no pre-ping),
    and :func:`_fault_is_disconnect` on its errors. ``writable``: a suspect connection that
    finds its server read-only is replaced too (the primary's pool; not a replica's)."""
    event.listen(engine, "handle_error", _fault_is_disconnect)
    if not writable:
        event.listen(engine, "connect", _read_only_expected)
    event.listen(engine, "checkin", _checked_in)
    event.listen(engine, "invalidate", _failed)
    event.listen(engine, "soft_invalidate", _failed)
    event.listen(engine, "checkout", _check)


# The suspect connection's ping: whether the server takes this session's writes (a plain
# statement, no prepare, no session state: it works through a transaction pooler too).
PING = "SHOW transaction_read_only"


def _checked_in(dbapi_connection: Any, record: Any) -> None:
    record.info["idle_since"] = time.monotonic()


def _read_only_expected(dbapi_connection: Any, record: Any) -> None:
    record.info["writable"] = False


def _failed(dbapi_connection: Any, record: Any, exception: BaseException | None) -> None:
    _last_failure[0] = time.monotonic()


def _check(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """Raise ``DisconnectionError`` for a dead connection: the pool then opens a fresh one."""
    idle_since = record.info.get("idle_since")
    if idle_since is None:  # new: it has just connected
        return
    if dbapi_connection.closed or dbapi_connection.broken:
        raise sa_exc.DisconnectionError("connection closed")
    fresh = idle_since >= _last_failure[0] and time.monotonic() - idle_since < PING_AFTER_IDLE_SECONDS
    if fresh and not _has_input(dbapi_connection):
        return
    autocommit = dbapi_connection.autocommit
    try:
        dbapi_connection.autocommit = True
        row = dbapi_connection.execute(PING).fetchone()
        dbapi_connection.autocommit = autocommit
    except Exception as error:
        raise sa_exc.DisconnectionError(str(error)) from error
    if row is not None and row[0] == "on" and record.info.get("writable", True):
        # a failover left this connection on a server that now refuses writes
        raise sa_exc.DisconnectionError("the server is read-only (a standby, or a demoted primary)")


def _has_input(dbapi_connection: Any) -> bool:
    """Whether an idle connection's socket has something to read: a server that terminated
    the session (shutdown, restart, ``pg_terminate_backend``) said so or closed it. A system
    call, no round trip; then the connection is pinged like a suspect one.

    Through PgBouncer (``DATABASE_POOLED``) the socket is the pooler's: it turns
    readable when PgBouncer closes the client connection (restart, ``client_idle_timeout``),
    and then the ping finds it dead. A server session ended behind PgBouncer leaves the client
    connection healthy (the pooler takes another server connection for the next transaction),
    so nothing needs replacing. The ping is a plain ``SELECT 1`` in autocommit: no prepared
    statement, no session state, as transaction pooling requires."""
    try:
        readable, _, _ = select.select([dbapi_connection.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)
