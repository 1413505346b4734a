"""Log lines: ``LOG_FORMAT=text`` (default) or ``json`` (one object per line), and the ids
that tie a line to its request or job.

Every line carries, when known: ``request_id`` (web: the request's id, see
:func:`request_id`), and ``job_id``, ``job_type``, ``attempt``, ``worker_id`` (worker: the
attempt the thread is running, see :func:`job_scope`). JSON lines also carry ``time``
(ISO 8601, UTC), ``level``, ``logger`` and ``message``. Secrets are never added here.

Request ids: an ``X-Request-ID`` header of 1-128 characters from ``[A-Za-z0-9._:-]`` is kept;
anything else (absent, too long, odd characters) is replaced by a fresh random id. The id is
sent back in the response's ``X-Request-ID`` and recorded in the data of every event the
request writes (:func:`event_fields`).
"""

from __future__ import annotations

import logging
import re
import secrets
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from flask import Flask, Response, g, has_request_context, request
from pythonjsonlogger.json import JsonFormatter

from ..logsafe import SafeFormatter

REQUEST_ID_HEADER = "X-Request-ID"
_SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
TEXT_FORMAT = "%(asctime)s %(levelname)-7s [%(threadName)s] %(name)s: %(message)s"
CONTEXT_FIELDS = ("request_id", "job_id", "job_type", "attempt", "worker_id")

_job = threading.local()


class ContextFilter(logging.Filter):
    """Adds the request's and the running attempt's ids to every record that lacks them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if has_request_context() and not hasattr(record, "request_id"):
            record.request_id = g.get("request_id")
        for name, value in getattr(_job, "fields", {}).items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class JsonLines(JsonFormatter):
    """``time``, ``level``, ``logger``, ``message``, the context ids that are set, and extras."""

    def __init__(self) -> None:
        super().__init__(
            "%(message)s",
            rename_fields={"levelname": "level", "name": "logger"},
            reserved_attrs=[*_RESERVED, "taskName"],
        )

    def add_fields(
        self, log_record: dict[str, Any], record: logging.LogRecord, message: dict[str, Any]
    ) -> None:
        log_record["time"] = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        log_record["level"] = record.levelname
        log_record["logger"] = record.name
        super().add_fields(log_record, record, message)
        log_record.pop("levelname", None)
        log_record.pop("name", None)
        for name in CONTEXT_FIELDS:
            if log_record.get(name) is None:
                log_record.pop(name, None)


_RESERVED = [
    "args", "asctime", "created", "exc_text", "filename", "funcName", "levelno", "lineno",
    "module", "msecs", "msg", "pathname", "process", "processName", "relativeCreated",
    "stack_info", "thread", "threadName", "levelname", "name", "message", "exc_info",
]  # fmt: skip


OURS = "jobqueue_handler"  # attribute that marks the handlers made here
MIGRATION_LOGGERS = ("alembic", "flask_migrate")


def make_handler(log_format: str) -> logging.Handler:
    """A stderr handler in ``log_format`` (``text`` or ``json``) that adds the context ids."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if log_format == "json" else SafeFormatter(TEXT_FORMAT))
    handler.addFilter(ContextFilter())
    setattr(handler, OURS, True)
    return handler


def route_migration_logs() -> None:
    """Alembic's and Flask-Migrate's lines at INFO, through the process's own logging.

    ``migrations/env.py`` calls this instead of Alembic's ``fileConfig``, which replaced the
    root logger's handlers of whatever process migrated: a web process migrating at start
    (embedded database, ``AUTO_MIGRATE``) then wrote its JSON lines as text, and in text mode
    every warning twice. The root logger is never touched here. When it has the handler made
    here (``LOG_FORMAT=json``, a worker), the migration lines go to it; otherwise (text mode,
    where the app logs through Flask's handler, or a host app's own set-up) they get one text
    handler of their own, added once however often migrations run.
    """
    routed = any(getattr(handler, OURS, False) for handler in logging.getLogger().handlers)
    for name in MIGRATION_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
        own = [handler for handler in logger.handlers if getattr(handler, OURS, False)]
        if routed:
            for handler in own:
                logger.removeHandler(handler)
            logger.propagate = True
        elif not own:
            logger.addHandler(make_handler("text"))
            logger.propagate = False


def install(log_format: str, *, project_level: str | int | None = None) -> None:
    """Route every log line through one stderr handler in ``log_format`` (replaces the root's)."""
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(make_handler(log_format))
    project = logging.getLogger("dashboard")
    from flask.logging import default_handler

    project.removeHandler(default_handler)  # would log every line twice
    if project_level is not None:
        project.setLevel(project_level)
    elif project.level == logging.NOTSET:
        project.setLevel(logging.INFO)


def init_app(app: Flask, log_format: str, *, blueprints: Sequence[str] | None = None) -> None:
    """Request ids on every request (``blueprints``: on those blueprints' requests only, in a
    host's app); JSON lines when asked (text stays Flask's handler). Either way the project's
    loggers write INFO and above (a successful sign-in is an INFO line)."""
    for scope in blueprints or (None,):
        app.before_request_funcs.setdefault(scope, []).append(_assign_request_id)
        app.after_request_funcs.setdefault(scope, []).append(_send_request_id)
    if log_format == "json":
        install("json")
    else:
        app.logger.addFilter(ContextFilter())
        project = logging.getLogger("dashboard")
        if project.level == logging.NOTSET:
            project.setLevel(logging.INFO)


def sane_request_id(value: str | None) -> str | None:
    return value if value is not None and _SANE_ID.fullmatch(value) else None


def _assign_request_id() -> None:
    g.request_id = sane_request_id(request.headers.get(REQUEST_ID_HEADER)) or secrets.token_hex(16)


def _send_request_id(response: Response) -> Response:
    rid = g.get("request_id")
    if rid:
        response.headers[REQUEST_ID_HEADER] = rid
    return response


def request_id() -> str | None:
    """This request's id, or ``None`` outside a request."""
    return g.get("request_id") if has_request_context() else None


def event_fields() -> dict[str, str]:
    """What an event written by this request records about it: ``{"request_id": ...}``."""
    rid = request_id()
    return {"request_id": rid} if rid else {}


@contextmanager
def job_scope(job_id: object, job_type: str, attempt: int, worker_id: str) -> Iterator[None]:
    """Log lines of this thread inside the block name the attempt it runs."""
    previous = getattr(_job, "fields", {})
    _job.fields = {"job_id": str(job_id), "job_type": job_type, "attempt": attempt, "worker_id": worker_id}
    try:
        yield
    finally:
        _job.fields = previous
