"""Running behind a transaction pooler (PgBouncer ``pool_mode = transaction``).

With transaction pooling, consecutive transactions of one client connection may run on
different server connections. What still works: every statement the queue runs (each
transition is one autocommit statement; reads are one transaction). What does not:

- psycopg's automatic server-side prepared statements (PgBouncer 1.18 does not track them):
  ``database.pooled_connect_args`` turns them off (``prepare_threshold=None``) when pooled
  (in ``database.py``, which builds the SQLAlchemy engine's options and sits below ``ops``);
- ``LISTEN``: :func:`listen_url` gives the direct connection (``DATABASE_DIRECT_URL``), or
  ``None`` (the worker then polls and says so);
- session ``SET`` (the one-job worker's ``plan_cache_mode``): :func:`session_settings_ok` is
  false when pooled, and the worker keeps PostgreSQL's default planning;
- session advisory locks: the retention pass and the stats refresh take transaction-level
  locks (``pg_try_advisory_xact_lock``) that work through the pooler; the migration lock is
  taken by ``flask db upgrade`` with ``AUTO_MIGRATE`` (run it against the direct URL).

``DATABASE_POOLED`` (default: true when ``DATABASE_DIRECT_URL`` is set) says ``DATABASE_URL``
is such a pooler.
"""

from __future__ import annotations

import logging

from flask import Flask
from sqlalchemy.engine import URL, make_url

from ..config import OpsSettings, settings_of

log = logging.getLogger(__name__)


def _ops(app: Flask) -> OpsSettings:
    return settings_of(app).ops


def session_settings_ok(app: Flask) -> bool:
    """Whether a session-level ``SET`` on the app's engine stays with its connection."""
    return not _ops(app).database_pooled


def direct_url(app: Flask) -> URL | None:
    """A URL whose connections are real sessions: ``DATABASE_DIRECT_URL``, or the app's own
    when it is not pooled; ``None`` when pooled and no direct URL is configured."""
    from ..database import normalise_url
    from ..extensions import engine

    ops = _ops(app)
    if ops.database_direct_url:
        return make_url(normalise_url(ops.database_direct_url))
    if ops.database_pooled:
        return None
    with app.app_context():
        return engine().url


def listen_url(app: Flask) -> URL | None:
    """Where the worker's LISTEN connection goes; ``None`` (with a warning) means poll."""
    url = direct_url(app)
    if url is None:
        log.warning(
            "DATABASE_POOLED is on and DATABASE_DIRECT_URL is not set: LISTEN cannot work through a "
            "transaction pooler, so idle threads poll every JOB_WORKER_POLL_INTERVAL_MS instead"
        )
    return url
