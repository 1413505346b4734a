"""The replica the pages may read (``DATABASE_REPLICA_URL``): its engine, one per app.

:func:`replica_of` builds it on first use: a small pool of its own (the pages' reads only),
the app's TCP options, a two-second connect timeout (a dead replica must not hold a page up;
its reads then go to the primary, ``store/replica.py``), its suspect connections pinged like
the primary's but never replaced for being read-only. ``None`` without the setting: every
read goes to the primary, as it always did. :func:`close` disposes of it.
"""

from __future__ import annotations

import threading

from flask import Flask
from flask.sansio.app import App
from sqlalchemy import create_engine

from ..config import OpsSettings
from ..database import normalise_url, ping_when_suspect, pooled_connect_args, tcp_connect_args
from ..mount import EXTENSION as STATE
from ..store.replica import Replica

REPLICA_POOL_SIZE = 5
REPLICA_POOL_OVERFLOW = 10
REPLICA_CONNECT_TIMEOUT_SECONDS = 2
_building = threading.Lock()


def replica_of(app: Flask | App) -> Replica | None:
    """The app's :class:`Replica`, built on first use; ``None`` when none is configured."""
    state = app.extensions[STATE]  # the app's QueueState (dashboard/state.py)
    ops = state.settings.ops
    if ops.database_replica_url is None:
        return None
    built: Replica | None = state.replica
    if built is not None:
        return built
    with _building:
        if state.replica is None:
            state.replica = _built(ops.database_replica_url, ops)
        built = state.replica
    return built


def _built(url: str, ops: OpsSettings) -> Replica:
    engine = create_engine(
        normalise_url(url),
        pool_size=REPLICA_POOL_SIZE,
        max_overflow=REPLICA_POOL_OVERFLOW,
        pool_timeout=5,
        connect_args={
            "connect_timeout": REPLICA_CONNECT_TIMEOUT_SECONDS,
            **tcp_connect_args(ops),
            **pooled_connect_args(ops),
        },
    )
    ping_when_suspect(engine, writable=False)
    return Replica(engine, ops.database_replica_max_lag_seconds)


def close(app: Flask | App) -> None:
    """Dispose of the replica's pool, if one was built."""
    state = app.extensions[STATE]  # the app's QueueState (dashboard/state.py)
    if state.replica is not None:
        state.replica.engine.dispose()
        state.replica = None
