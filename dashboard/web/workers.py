"""The Workers page (issue 17): worker processes from their heartbeats (``store/workers.py``)."""

from __future__ import annotations

from typing import Any

from flask import current_app

from ..config import settings_of
from ..store import read_timeout, workers
from .blueprint import bp
from .rendering import now, page_or_fragment


def worker_board() -> workers.WorkerBoard | None:
    """The board under the dashboard's query time limit; None if it ran past it."""
    try:
        with read_timeout.time_limit(settings_of(current_app).dashboard_query_timeout_ms):
            return workers.board(now())
    except read_timeout.QueryTimeout:
        return None


def workers_context() -> dict[str, Any]:
    return {"board": worker_board(), "stale_after": workers.STALE_AFTER_BEATS}


@bp.get("/workers/")
def workers_page() -> str:
    return page_or_fragment("workers.html", "fragments/workers.html", **workers_context())
