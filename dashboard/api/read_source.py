"""API reads that may go to the replica, and the headers that say where they went.

:func:`from_replica` wraps the endpoints that list, count and chart (``GET /jobs/``,
``/jobs/stats/``, ``/jobs/stats/detail/``, ``/job-events/``): their reads go to
``DATABASE_REPLICA_URL``'s replica while it keeps up (``store/replica.py``), and every answer
of theirs says where it was read, when a replica is configured:

- ``X-Read-From``: ``replica``, or ``primary; replica=behind`` / ``primary; replica=down``;
- ``X-Replica-Lag-Seconds``: the replica's lag as last measured (absent when unknown).

The OpenAPI document describes both on these endpoints' answers (:data:`HEADER_DOCS`).

A job's own endpoints, every write and everything else read the primary. An API client has no
session to remember its writes by: one that needs its own write reads the job's own endpoint.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from flask import Response, current_app

from ..ops.replica import replica_of
from ..store import reading
from ..store.replica import Source

F = TypeVar("F", bound=Callable[..., Any])

READ_FROM = "X-Read-From"
REPLICA_LAG = "X-Replica-Lag-Seconds"

# The views wrapped by :func:`from_replica`: the OpenAPI document gives their answers the
# headers below (``openapi.py``).
REPLICA_VIEWS: set[Callable[..., Any]] = set()

# The headers as the OpenAPI document describes them (a Header Object each).
HEADER_DOCS: dict[str, dict[str, Any]] = {
    READ_FROM: {
        "description": (
            "Sent only when DATABASE_REPLICA_URL is set: where this answer was read. `replica`; or "
            "`primary; replica=behind` (the replica further behind than "
            "DATABASE_REPLICA_MAX_LAG_SECONDS) or `primary; replica=down` (it did not answer)."
        ),
        "required": False,
        "schema": {"type": "string", "enum": ["replica", "primary; replica=behind", "primary; replica=down"]},
    },
    REPLICA_LAG: {
        "description": (
            "Sent with X-Read-From when the replica's lag is known: seconds behind the primary as "
            "last measured (at most once a second per web process), one decimal."
        ),
        "required": False,
        "schema": {"type": "string"},
        "example": "0.4",
    },
}


def from_replica(view: F) -> F:
    """Run ``view``'s reads on the replica while it keeps up; say where in its headers."""

    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with reading.replica_reads(replica_of(current_app)):
            response = view(*args, **kwargs)
            source = reading.read_source()
        if source is not None and isinstance(response, Response):
            response.headers.update(headers(source))
        return response

    REPLICA_VIEWS.add(wrapped)
    return cast(F, wrapped)


def headers(source: Source) -> dict[str, str]:
    """The headers that say where an answer was read."""
    where = "replica" if source.replica else f"primary; replica={source.why.value}"
    out = {READ_FROM: where}
    if source.lag_seconds is not None:
        out[REPLICA_LAG] = f"{source.lag_seconds:.1f}"
    return out
