"""Reads from a streaming replica, while it keeps up: where a read goes, and how far behind.

The pages' lists, counts, charts and feeds may read a replica (``DATABASE_REPLICA_URL``) to
spare the primary. :class:`Replica` measures the replica's lag (``replica.sql``), at most once
per :data:`CHECK_SECONDS` (a failed check is kept :data:`DOWN_SECONDS`, so a dead host costs
one connect timeout per interval, not one per request), and :meth:`Replica.choose` says
where a read goes: the replica while it answers and is no further behind than its
``max_lag_seconds`` and holds the reader's own last write; the primary otherwise, saying why.
Inside :func:`reading.replica_reads` the store's reads (``reading.reading``) run on it.

No thread and no lock: a request measures when the last measure is stale, and while one
measures the others use the last figure (two that look at the same instant may both measure:
one query more, nothing wrong).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum

from sqlalchemy import Engine
from sqlalchemy import exc as sa_exc

from .sql import query

LAG = query("replica_lag")

CHECK_SECONDS = 1.0
DOWN_SECONDS = 5.0
# A write is counted as not yet on the replica until it has replayed this long past it: a lag
# of 0 says the replica replayed all it received, and an asynchronous one may not have
# received a commit made a moment before the check.
OWN_WRITE_MARGIN_SECONDS = 1.0


class Why(Enum):
    """Where a read went, and why: on the replica, or on the primary because it is down,
    behind, or has not replayed the reader's own write yet."""

    REPLICA = "replica"
    DOWN = "down"
    BEHIND = "behind"
    OWN_WRITE = "own_write"


@dataclass(frozen=True, slots=True)
class Source:
    """Which server the reads of a request went to (``why``), and the replica's lag as last
    measured (``None``: it did not answer, or has replayed nothing yet)."""

    why: Why
    lag_seconds: float | None
    max_lag_seconds: float

    @property
    def replica(self) -> bool:
        return self.why is Why.REPLICA


@dataclass(frozen=True, slots=True)
class Measure:
    lag_seconds: float | None  # None: down (or nothing replayed)
    at: float  # wall clock (time.time()) when the check began
    checked: float  # monotonic, for the cache
    error: str | None = None


class Replica:
    """A replica's engine, its lag rule and its last lag check."""

    def __init__(self, engine: Engine, max_lag_seconds: float) -> None:
        if max_lag_seconds < 0:
            raise ValueError(f"max_lag_seconds must be >= 0, got {max_lag_seconds!r}")
        self.engine = engine
        self.max_lag_seconds = max_lag_seconds
        self._measure: Measure | None = None
        self._measuring = False

    def measure(self) -> Measure:
        """The lag, measured now unless the last measure is fresh (or one is under way)."""
        last = self._measure
        if last is not None and (self._measuring or time.monotonic() - last.checked < _kept(last)):
            return last
        self._measuring = True
        try:
            self._measure = _measured(self.engine)
            return self._measure
        finally:
            self._measuring = False

    def forget(self) -> None:
        """Drop the last measure: the next read measures the lag afresh."""
        self._measure = None

    def failed(self, error: BaseException) -> None:
        """A read on the replica failed to connect: reads go to the primary for a while."""
        self._measure = Measure(None, time.time(), time.monotonic(), type(error).__name__)

    def choose(self, wrote_at: float | None = None) -> Source:
        """Where a read goes now. ``wrote_at``: when (``time.time()``) the reader last wrote,
        if lately; the replica serves it only once it replayed everything committed before
        (everything up to ``at - lag`` has been replayed)."""
        measure = self.measure()
        lag = measure.lag_seconds
        if lag is None:
            return Source(Why.DOWN, None, self.max_lag_seconds)
        if lag > self.max_lag_seconds:
            return Source(Why.BEHIND, lag, self.max_lag_seconds)
        if wrote_at is not None and measure.at - lag <= wrote_at + OWN_WRITE_MARGIN_SECONDS:
            return Source(Why.OWN_WRITE, lag, self.max_lag_seconds)
        return Source(Why.REPLICA, lag, self.max_lag_seconds)


def _kept(measure: Measure) -> float:
    return DOWN_SECONDS if measure.error is not None else CHECK_SECONDS


def _measured(engine: Engine) -> Measure:
    at, checked = time.time(), time.monotonic()
    try:
        with engine.connect() as conn:
            lag = conn.execute(LAG).scalar()
    except sa_exc.SQLAlchemyError as error:
        return Measure(None, at, checked, type(error).__name__)
    return Measure(None if lag is None else max(0.0, float(lag)), at, checked)
