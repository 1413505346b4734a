"""The writer behind cached stats: recounts ``jobs_finished_counts``.

Reads never write; when :mod:`read_stats` finds the cached finished totals older than the
policy allows, it calls the policy's ``on_stale`` hook, which the web process points at a
background recount of its own (``ops/recount.py``: the thread lives there, since the store
runs no threads). Retention (``retention.py``) and the benchmarks call the recount directly.
"""

from __future__ import annotations

from ...extensions import engine
from ..sql import query

REFRESH_LOCK_KEY = 0x6A6F6273  # one refresh at a time across every process
TRY_LOCK = query("recount_try_lock")
# A utility command, not a statement of the .sql files (those begin WITH or SELECT).
REFRESH = "REFRESH MATERIALIZED VIEW CONCURRENTLY jobs_finished_counts"


def refresh_finished_counts() -> bool:
    """Recount finished jobs into ``jobs_finished_counts``; False if a refresh was running.
    Needs an application context.

    Concurrent refresh: readers keep the old figures until the new ones are in. A
    transaction-level try-lock keeps several processes from counting at the same time; it is
    released by the commit, so it also works through a transaction pooler, where a session lock
    would stay on a server connection.
    """
    with engine().begin() as conn:
        if not conn.execute(TRY_LOCK, {"key": REFRESH_LOCK_KEY}).scalar():
            return False
        conn.exec_driver_sql(REFRESH)
        return True
