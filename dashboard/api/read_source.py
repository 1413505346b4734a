"""API reads that may go to the replica, and the headers that say where they went.

:func:`from_replica` wraps the endpoints that list, count and chart (``GET /jobs/``,
``/jobs/stats/``, ``/jobs/stats/detail/``, ``/job-events/``): their reads go to
``DATABASE_REPLICA_URL``'s replica while it keeps up (``store/replica.py``), and every answer
of theirs says where it was read, when a replica is configured:

- ``X-Read-From``: ``replica``, or ``primary; replica=behind`` / ``primary; replica=down``;
- ``X-Replica-Lag-Seconds``: the replica's lag as last measured (absent when unknown).

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

    return cast(F, wrapped)


def headers(source: Source) -> dict[str, str]:
    """The headers that say where an answer was read."""
    where = "replica" if source.replica else f"primary; replica={source.why.value}"
    out = {READ_FROM: where}
    if source.lag_seconds is not None:
        out[REPLICA_LAG] = f"{source.lag_seconds:.1f}"
    return out
