"""The sign-in throttle: too many failed sign-ins for one user name, or from one client
address, within a window, and further attempts answer 429 without checking any password.

Contract:

- :meth:`Throttle.retry_after` is called before the password is checked. It reads the
  failures of both keys in the last ``SIGNIN_WINDOW_SECONDS``; once a key has
  ``SIGNIN_MAX_FAILURES_PER_USER`` (user name) or ``SIGNIN_MAX_FAILURES_PER_ADDRESS`` (client
  address) of them, it returns the whole seconds until the oldest of those leaves the window,
  and the caller answers 429 with ``Retry-After``: no password hash is computed, so a flood
  costs one indexed read per request, not a scrypt.
- :meth:`Throttle.record_failure` stores one row per key, and deletes a bounded batch of rows
  older than the window, so the table holds about one window of failures.
- :meth:`Throttle.forget_user` clears a user name's failures after a successful sign-in (the
  address's stay: another name tried from there still counts).

The store is the database (``auth_signin_failure``), so the limits hold across gunicorn
workers and hosts; the clock is the database's. Keys are SHA-256 digests of ``user:<name>``
and ``address:<addr>``: what someone typed as a user name (sometimes a password) is never
stored. The address is the WSGI ``REMOTE_ADDR``: behind a reverse proxy that is the proxy's,
unless the server in front rewrites it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from sqlalchemy import BigInteger, Column, DateTime, Identity, Index, Table, Text, func, text

from ..extensions import db

signin_failures = Table(
    "auth_signin_failure",
    db.metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("key", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("auth_signin_failure_key_idx", "key", "created_at"),
    Index("auth_signin_failure_created_idx", "created_at"),
)

CLEANUP_BATCH = 200  # old rows deleted per recorded failure at most (two are inserted)

# Seconds until the key's limit-th newest failure in the window leaves it (NULL: not limited).
# Index: auth_signin_failure_key_idx, read backwards from the newest row of the key.
_BLOCKED_FOR = text(
    """
    SELECT EXTRACT(EPOCH FROM (created_at + make_interval(secs => :window) - clock_timestamp()))
    FROM auth_signin_failure
    WHERE key = :key AND created_at > clock_timestamp() - make_interval(secs => :window)
    ORDER BY created_at DESC
    OFFSET :limit - 1 LIMIT 1
    """
)
_RECORD = text(
    """
    WITH ins AS (
        INSERT INTO auth_signin_failure (key, created_at)
        SELECT unnest(CAST(:keys AS text[])), clock_timestamp()
    ), old AS (
        SELECT id FROM auth_signin_failure
        WHERE created_at < clock_timestamp() - make_interval(secs => :window)
        ORDER BY created_at LIMIT :batch
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM auth_signin_failure WHERE id IN (SELECT id FROM old)
    """
)
_FORGET = text("DELETE FROM auth_signin_failure WHERE key = :key")


def throttle_key(kind: str, value: str) -> str:
    """The stored key: a digest, so no typed user name ends up in the database."""
    return hashlib.sha256(f"{kind}:{value}".encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Throttle:
    """Limits (failures per window) for user names and client addresses."""

    max_per_user: int
    max_per_address: int
    window_seconds: float

    def _keys(self, name: str, address: str) -> list[tuple[str, int]]:
        return [
            (throttle_key("user", name), self.max_per_user),
            (throttle_key("address", address), self.max_per_address),
        ]

    def retry_after(self, name: str, address: str) -> int | None:
        """Whole seconds to wait before trying ``name`` from ``address`` again (at least 1), or
        ``None`` when neither key has reached its limit."""
        wait = 0.0
        with db.engine.connect() as conn:
            for key, limit in self._keys(name, address):
                params = {"key": key, "limit": limit, "window": self.window_seconds}
                seconds = conn.execute(_BLOCKED_FOR, params).scalar()
                if seconds is not None:
                    wait = max(wait, float(seconds))
        return max(1, math.ceil(wait)) if wait > 0 else None

    def record_failure(self, name: str, address: str) -> None:
        """Count a failed sign-in against both keys; delete a batch of expired rows."""
        keys = [key for key, _ in self._keys(name, address)]
        with db.engine.begin() as conn:
            conn.execute(_RECORD, {"keys": keys, "window": self.window_seconds, "batch": CLEANUP_BATCH})

    def forget_user(self, name: str) -> None:
        """A successful sign-in: the user name's failures no longer count."""
        with db.engine.begin() as conn:
            conn.execute(_FORGET, {"key": throttle_key("user", name)})
