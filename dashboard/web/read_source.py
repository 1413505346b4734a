"""Pages whose lists, counts and charts may read the replica, and the note that says so.

:func:`from_replica` wraps such a view (the overview, the job list, the event feed): its reads
go to ``DATABASE_REPLICA_URL``'s replica while it keeps up (``store/replica.py``), and the
page's note (``fragments/read_source.html``, through :func:`read_source`) says which server
answered and how far behind the replica was. Every other view, every action and a job's own
page read the primary.

Read your own write: after a request that changed something (any method but GET and HEAD,
answered below 400) the session remembers when, and the replica serves this browser's pages
only once it has replayed past that moment; until then they read the primary and say so.
Without a replica nothing is remembered and nothing changes.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from flask import current_app, request, session
from werkzeug.wrappers import Response

from ..ops.replica import replica_of
from ..store import reading
from ..store.replica import Source
from .blueprint import bp

F = TypeVar("F", bound=Callable[..., Any])

WROTE_AT = "jobqueue_wrote_at"  # session key: time.time() of this browser's last change
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def from_replica(view: F) -> F:
    """Run ``view``'s reads on the replica while it keeps up (see the module)."""

    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        wrote_at = session.get(WROTE_AT)
        with reading.replica_reads(
            replica_of(current_app), wrote_at if isinstance(wrote_at, int | float) else None
        ):
            return view(*args, **kwargs)

    return cast(F, wrapped)


@bp.app_template_global("read_source")
def read_source() -> Source | None:
    """Where this page's figures were read (``None``: the primary, no replica configured)."""
    return reading.read_source()


@bp.after_request
def remember_writes(response: Response) -> Response:
    """Note the time of a change this browser made, when the pages may read a replica."""
    if request.method not in READ_METHODS and response.status_code < 400 and replica_of(current_app):
        session[WROTE_AT] = time.time()
    return response
