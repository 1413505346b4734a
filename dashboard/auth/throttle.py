"""The sign-in throttle: bounded password guesses per user name and per client address, without
handing anyone a way to lock a user out.

The rules, within the last ``SIGNIN_WINDOW_SECONDS`` (W):

- **per user name from one address**: at most ``SIGNIN_MAX_FAILURES_PER_USER`` (P) failures;
  then that address gets 429 for that name, and only that address;
- **per user name from everywhere**: once the name has ``SIGNIN_SLOW_AFTER_FAILURES_PER_USER``
  (N) failures from all addresses together, each address gets one failure for it per window
  instead of P: the guessing slows down, nobody is refused who has not failed;
- **per address**: failures for at most ``SIGNIN_MAX_FAILURES_PER_ADDRESS`` (A) distinct user
  names; then the address gets 429 for any other name (a spray of names), while the names it
  already failed keep their own allowance.

So a correct password from an address that has not failed for that name within the window is
always checked, unless that address itself has sprayed A other names. What an attacker gets,
per window: P guesses at a name from one address; P x A from one address in all; N + K at one
name from K addresses. With the defaults (5, 20, 20, 300 s): 60 guesses an hour at one name
from one address, 1,200 an hour from one address over at most 240 names, and 12 x (20 + K) an
hour at one name from K addresses. IPv6 addresses count per /64 (what one host can change at
will), IPv4 addresses each.

Contract:

- :meth:`Throttle.admit` is the check and the record in one step: in one transaction holding
  advisory locks on the name and the address, it reads the counts and, when the attempt may
  go ahead, records it at once as a failure. Concurrent attempts therefore never check more
  passwords than the limits allow. A refused attempt checks no password (a flood costs a few
  indexed reads per request, not a scrypt) and is not recorded.
- :meth:`Throttle.succeeded` turns an admitted attempt's provisional failure into nothing: it
  deletes that address's failures for that name (other addresses' failures keep counting).
  An admitted attempt that fails needs no call: it is already counted.
- Recording deletes a bounded batch of rows older than the window, so the table holds about
  one window of failures.

The store is the database (``auth_signin_failure``), so the limits hold across gunicorn
workers and hosts; the clock is the database's. Rows hold SHA-256 digests of ``user:<name>``
and ``address:<addr>``: what someone typed as a user name (sometimes a password) is never
stored. :func:`client_address` says which address a request counts under.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Column, DateTime, Identity, Index, Table, Text, func, text

from ..extensions import db, engine

signin_failures = Table(
    "auth_signin_failure",
    db.metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("key", Text, nullable=False),  # the user name's digest
    Column("address", Text, nullable=False, server_default=""),  # the address's digest
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("auth_signin_failure_key_idx", "key", "created_at"),
    Index("auth_signin_failure_address_idx", "address", "key", "created_at"),
    Index("auth_signin_failure_created_idx", "created_at"),
)

CLEANUP_BATCH = 200  # old rows deleted per recorded attempt at most
LOCK_CLASS = 0x5349  # the first key of the throttle's two-key advisory locks ("SI")

# Advisory locks, in the order given (always ascending, so two attempts never deadlock).
_LOCK = text("SELECT pg_advisory_xact_lock(:class, :key)")

# The counts one attempt is judged by, each read bounded. Indexes: the pair's and the address's
# rows through auth_signin_failure_address_idx, the name's through auth_signin_failure_key_idx.
_COUNTS = text(
    """
    WITH since AS (SELECT clock_timestamp() - make_interval(secs => :window) AS t),
    pair AS (
        SELECT created_at FROM auth_signin_failure
        WHERE address = :address AND key = :key AND created_at > (SELECT t FROM since)
        ORDER BY created_at DESC LIMIT :per_pair
    ), name AS (
        SELECT 1 FROM auth_signin_failure
        WHERE key = :key AND created_at > (SELECT t FROM since) LIMIT :slow_after
    ), names AS (
        SELECT key, max(created_at) AS latest FROM auth_signin_failure
        WHERE address = :address AND created_at > (SELECT t FROM since)
        GROUP BY key ORDER BY latest DESC LIMIT :per_address
    )
    SELECT ARRAY(SELECT created_at FROM pair ORDER BY created_at DESC) AS pair,
           (SELECT count(*) FROM name) AS name_failures,
           ARRAY(SELECT latest FROM names ORDER BY latest DESC) AS names,
           (SELECT :key IN (SELECT key FROM names)) AS name_seen,
           clock_timestamp() AS now
    """
)
_RECORD = text(
    """
    WITH ins AS (
        INSERT INTO auth_signin_failure (key, address, created_at)
        VALUES (:key, :address, clock_timestamp())
        RETURNING id
    ), old AS (
        SELECT id FROM auth_signin_failure
        WHERE created_at < clock_timestamp() - make_interval(secs => :window)
        ORDER BY created_at LIMIT :batch
        FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM auth_signin_failure WHERE id IN (SELECT id FROM old)
    )
    SELECT id FROM ins
    """
)
_FORGET_PAIR = text("DELETE FROM auth_signin_failure WHERE address = :address AND key = :key")


def throttle_key(kind: str, value: str) -> str:
    """The stored key: a digest, so no typed user name ends up in the database."""
    return hashlib.sha256(f"{kind}:{value}".encode("utf-8", "surrogatepass")).hexdigest()


def _lock_id(digest: str) -> int:
    """A signed 32-bit advisory-lock key from a hex digest."""
    return int.from_bytes(bytes.fromhex(digest[:8]), "big", signed=True)


def address_bucket(address: str) -> str:
    """What one client is counted as: an IPv4 address itself, an IPv6 address by its /64 (a
    host picks any address inside its /64 at will), anything else (a socket path) as given."""
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def parse_trusted(value: str) -> tuple[Any, ...] | None:
    """``FORWARDED_ALLOW_IPS`` as networks; ``None`` for ``*`` (every peer is a proxy)."""
    entries = [item.strip() for item in value.split(",") if item.strip()]
    if "*" in entries:
        return None
    return tuple(ipaddress.ip_network(item, strict=False) for item in entries)


def client_address(remote_addr: str | None, forwarded_for: str | None, trusted: Sequence[Any] | None) -> str:
    """The address a sign-in counts under.

    A request from a trusted proxy (``FORWARDED_ALLOW_IPS``, as gunicorn trusts it for
    ``X-Forwarded-Proto``; a peer without an IP, a Unix socket, counts as one) is counted
    under the last ``X-Forwarded-For`` entry: the one that proxy appended, which a client
    cannot forge. Any other request under the peer's own address.
    """
    peer = (remote_addr or "").strip()
    if forwarded_for and _is_trusted(peer, trusted):
        last = forwarded_for.split(",")[-1].strip()
        if last:
            peer = last
    return address_bucket(peer)


def _is_trusted(peer: str, trusted: Sequence[Any] | None) -> bool:
    if trusted is None:
        return True
    try:
        ip = ipaddress.ip_address(peer)
    except ValueError:
        return True  # no IP: a Unix socket, which only a local proxy reaches
    return any(ip in network for network in trusted)


@dataclass(frozen=True)
class Admission:
    """The throttle's answer: ``retry_after`` seconds (refused), or an admitted attempt."""

    key: str
    address: str
    retry_after: int | None = None

    @property
    def admitted(self) -> bool:
        return self.retry_after is None


def _seconds_until(moment: datetime, window: float, now: datetime) -> float:
    return moment.timestamp() + window - now.timestamp()


@dataclass(frozen=True)
class Throttle:
    """Limits (failures per window) per user name and address, per name, per address."""

    max_per_user: int
    max_per_address: int
    window_seconds: float
    slow_after_per_user: int = 20

    def admit(self, name: str, address: str) -> Admission:
        """Check ``name`` from ``address`` against the limits and, when it may go ahead, record
        it as a failure, in one transaction (see the module's docstring)."""
        key, addr = throttle_key("user", name), throttle_key("address", address)
        params = {
            "key": key,
            "address": addr,
            "window": self.window_seconds,
            "per_pair": self.max_per_user,
            "slow_after": self.slow_after_per_user,
            "per_address": self.max_per_address,
        }
        with engine().begin() as conn:
            for lock in sorted({_lock_id(key), _lock_id(addr)}):
                conn.execute(_LOCK, {"class": LOCK_CLASS, "key": lock})
            row = conn.execute(_COUNTS, params).mappings().one()
            wait = self._wait(row)
            if wait is not None:
                return Admission(key, addr, retry_after=max(1, int(-(-wait // 1))))
            conn.execute(
                _RECORD, {"key": key, "address": addr, "window": self.window_seconds, "batch": CLEANUP_BATCH}
            )
        return Admission(key, addr)

    def _wait(self, row: Any) -> float | None:
        """Seconds until the attempt would be admitted, or ``None``: admitted now."""
        pair: list[datetime] = list(row["pair"])
        now, window = row["now"], self.window_seconds
        allowance = self.max_per_user if row["name_failures"] < self.slow_after_per_user else 1
        if len(pair) >= allowance:  # this address has had its guesses at this name
            return _seconds_until(pair[allowance - 1], window, now)
        names: list[datetime] = list(row["names"])
        if not row["name_seen"] and len(names) >= self.max_per_address:  # a spray of names
            return _seconds_until(names[self.max_per_address - 1], window, now)
        return None

    def succeeded(self, admission: Admission) -> None:
        """A correct password: this address's failures for this name (the attempt's own
        provisional one among them) no longer count."""
        with engine().begin() as conn:
            conn.execute(_FORGET_PAIR, {"key": admission.key, "address": admission.address})
