"""The background writer behind cached stats: recounts ``jobs_finished_counts``.

Reads never write; when :mod:`read_stats` finds the cached finished totals older than the
policy allows, it calls the policy's ``on_stale`` hook, which :func:`policy_of` points here.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from flask import current_app
from sqlalchemy import text

from ..extensions import db
from .read_stats import StatsPolicy

if TYPE_CHECKING:
    from ..config import Settings

REFRESH_LOCK_KEY = 0x6A6F6273  # one refresh at a time across every process
_refreshing = threading.Lock()  # and one at a time in this process


def refresh_finished_counts(*, wait: bool = True) -> bool:
    """Recount finished jobs into ``jobs_finished_counts``; False if a refresh was running.
    Needs an application context.

    ``wait=False`` starts it on a background thread and returns at once. Concurrent refresh:
    readers keep the old figures until the new ones are in. An advisory lock keeps several
    dashboard processes from counting at the same time.
    """
    if not _refreshing.acquire(blocking=False):
        return False
    app = current_app._get_current_object()  # type: ignore[attr-defined]

    def refresh() -> bool:
        try:
            # A transaction-level try-lock (issue 19): released by the commit, so it also works
            # through a transaction pooler, where a session lock would stay on a server connection.
            with app.app_context(), db.engine.begin() as conn:
                if not conn.execute(
                    text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": REFRESH_LOCK_KEY}
                ).scalar():
                    return False
                conn.execute(text("REFRESH MATERIALIZED VIEW CONCURRENTLY jobs_finished_counts"))
                return True
        finally:
            _refreshing.release()

    if wait:
        return refresh()
    threading.Thread(target=refresh, name="stats-refresh", daemon=True).start()
    return True


def refresh_in_background() -> None:
    """Start a recount on its own thread unless one is running (the ``on_stale`` hook)."""
    refresh_finished_counts(wait=False)


def policy_of(settings: Settings) -> StatsPolicy:
    """The stats policy of these settings, with stale totals recounted in the background."""
    return StatsPolicy.from_settings(settings, on_stale=refresh_in_background)
