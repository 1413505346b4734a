"""The web process's background work: recounting the cached finished totals off the request.

Reads never write. When a read finds the cached totals (``jobs_finished_counts``) older than
the stats policy allows, it calls the policy's ``on_stale`` hook; :func:`policy_of` points
that hook at :func:`recount_in_background`, which runs the store's recount
(``store.stats_refresh.refresh_finished_counts``) on a daemon thread of its own, one at a time
per process (and one at a time across processes, by the recount's own lock). The request
that found the totals stale answers at once with the figures it has.

Why here: the reads that find the totals stale are made by all three doors of a web process
(pages, the JSON API, ``/metrics``), which runs no worker and so no runtime; and the store
promises no threads. So the thread sits below the doors and above the store, in ``ops``,
beside the web process's other machinery (request ids, the metrics registry).
"""

from __future__ import annotations

import logging
import threading

from flask.globals import app_ctx

from ..config import Settings
from ..store.reads import stats_refresh
from ..store.reads.stats import StatsPolicy

log = logging.getLogger(__name__)

_running = threading.Lock()  # one recount thread at a time in this process


def recount_in_background() -> bool:
    """Start a recount on its own thread unless one runs in this process; whether one was
    started. Needs an application context (the thread gets one of the same app)."""
    if not _running.acquire(blocking=False):
        return False
    app = app_ctx.app  # the app itself, not the proxy: it is kept past this context

    def recount() -> None:
        try:
            with app.app_context():
                stats_refresh.refresh_finished_counts()
        except Exception as error:  # an outage: the next stale read starts another
            log.warning("could not recount the finished totals: %s", type(error).__name__)
        finally:
            _running.release()

    threading.Thread(target=recount, name="stats-refresh", daemon=True).start()
    return True


def policy_of(settings: Settings) -> StatsPolicy:
    """The stats policy of these settings, with stale totals recounted in the background."""
    return StatsPolicy.from_settings(settings, on_stale=recount_in_background)
