"""The banner on top of every page when ready work has nobody to run it.

Jobs are due in a queue that is not paused, and either no worker process has sent a heartbeat
within its window, or none of the live ones serves that queue (``--queues``), or none has a
handler for the type of some due job (``store/read_health.unserved``). Every full
page reads it once (under the dashboard's query time limit; an outage or a timeout shows no
banner rather than an error), puts it first in the page and prefixes the page title; the
banner's own element polls ``/alarm/`` so it appears and clears on an open page too (app.js
updates the title from it).
"""

from __future__ import annotations

import logging
from typing import Any

from flask import current_app, render_template, request
from sqlalchemy.exc import SQLAlchemyError

from ..config import settings_of
from ..store import reading
from ..store.reads import health as read_health
from .blueprint import bp
from .rendering import now

log = logging.getLogger(__name__)

TITLE = {"no_worker": "No live worker", "no_queue_worker": "Queue not served", "no_handler": "No handler"}


KEY = "jobqueue.alarm"  # the request's own reading, kept in its WSGI environ


def current_alarm() -> read_health.Unserved | None:
    """This request's reading (once per request), or None if it could not be read."""
    if KEY not in request.environ:
        try:
            with reading.time_limit(settings_of(current_app).dashboard_query_timeout_ms):
                request.environ[KEY] = read_health.unserved(now())
        except (reading.QueryTimeout, SQLAlchemyError):
            log.warning("the no-worker banner could not be read", exc_info=True)
            request.environ[KEY] = None
    alarm: read_health.Unserved | None = request.environ[KEY]
    return alarm


def alarm_title(alarm: read_health.Unserved | None) -> str:
    """What the page title starts with while the banner shows (empty otherwise)."""
    return f"⚠ {TITLE[alarm.kind]} · " if alarm is not None else ""


@bp.context_processor
def inject_alarm() -> dict[str, Any]:
    return {"worker_alarm": current_alarm, "alarm_title": alarm_title}


@bp.get("/alarm/")
def alarm() -> str:
    """The banner's polled element (a fragment only: it is a part of every page)."""
    return render_template("jobqueue/fragments/alarm.html", alarm=current_alarm())
