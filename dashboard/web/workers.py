"""The Workers page: worker processes from their heartbeats (``store/workers.py``), each busy
thread with the attempt it runs, and the removal of a gone process's row (operators only, a
POST with the CSRF token, recorded in the audit log)."""

from __future__ import annotations

from typing import Any

from flask import flash, redirect, url_for
from werkzeug.wrappers import Response

from ..store import workers
from .blueprint import bp
from .forms import RetryForm
from .rendering import limited, now, page_or_fragment
from .signin import audit_data, operator_required
from .timefmt import duration


def worker_board() -> workers.WorkerBoard | None:
    """The board under the dashboard's query time limit; None if it ran past it."""
    at = now()
    return limited(lambda: workers.board(at))


def workers_context() -> dict[str, Any]:
    return {
        "board": worker_board(),
        "stale_after": workers.STALE_AFTER_BEATS,
        "gone_after": duration(workers.GONE_AFTER.total_seconds()),
        "remove_form": RetryForm(),  # the CSRF token of the remove buttons
    }


@bp.get("/workers/")
def workers_page() -> str:
    return page_or_fragment("jobqueue/workers.html", "jobqueue/fragments/workers.html", **workers_context())


@bp.post("/workers/<path:worker_id>/remove/")
@operator_required
def worker_remove(worker_id: str) -> Response:
    """Delete a gone (or stopped) process's row; an alive or stale one is kept, and says so."""
    if workers.remove(worker_id, event_data=audit_data()):
        flash("Worker row removed (the audit log records it).", "success")
    else:
        flash(
            "Nothing removed: that worker row is unknown, or it is alive or only stale (it may come back).",
            "warning",
        )
    return redirect(url_for("jobqueue_web.workers_page"), 303)
