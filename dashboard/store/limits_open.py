"""Which form of the claim a process runs for a set of served queues (claim.sql).

The claim has two forms: one that takes slots and ring entries (`claim`, `claim_one`, the
claim half of `complete_and_claim`), and one without the limit tables (`..._no_limits`),
which skips the queues that have a limit and costs what a claim cost before queues had
limits. A process runs the first while a served queue with a limit *could give a job*
(`limits_open`: room in each of its limits, and a job due) and the second otherwise. The
choice never changes what a claim may take, only which queues it looks at.

How the process knows, per set of served queues (a worker's ``--queues``):

- each claim (:func:`service.claim_batch`, a thread's own claim) answers `limits_open` at
  statement time, and :func:`record` keeps it; a no-limits claim that comes back short while
  limits are open claims the rest with the limits at once;
- a one-job thread's settle-and-claim, the hot path, does not compute it on every job (it
  cost that drain a tenth of its rate): :func:`current` reads it with the `limits_open`
  statement at most every :data:`RECHECK_SECONDS`, and a settle that freed a slot
  (:func:`freed_a_slot`) switches to the limits at once (an answer asked for before it does
  not switch back), so a queue held at its concurrency limit is claimed from again by the
  process's next settle-and-claim after a slot frees.

So a limited queue that opens while every thread is busy elsewhere (a job of it becomes due,
its rate window opens, its limit is raised) waits at most :data:`RECHECK_SECONDS` for a claim;
an idle worker's own claims see it at once. The knowledge is per process, kept in memory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from .connection import fetch_rows
from .sql import query

LIMITS_OPEN = query("limits_open")
RECHECK_SECONDS = 0.1

Served = tuple[str, ...] | None  # a worker's --queues, or None for every queue


@dataclass
class _Seen:
    open: bool = False
    at: float = float("-inf")  # time.monotonic() when the answer was asked for


_seen: dict[Served, _Seen] = {}


def served_key(queues: Any) -> Served:
    return tuple(queues) if queues is not None else None


def is_open(served: Served) -> bool:
    """What the last answer said (closed until one came)."""
    seen = _seen.get(served)
    return seen.open if seen is not None else False


def record(served: Served, open_: Any, asked: float) -> None:
    """A statement's answer, asked for at ``asked`` (``time.monotonic()`` before it was sent):
    kept unless something newer came meanwhile (a slot freed after that statement's snapshot
    was taken, which the answer cannot have seen)."""
    seen = _seen.get(served)
    if seen is None or seen.at <= asked:
        _seen[served] = _Seen(bool(open_), asked)


def freed_a_slot(served: Served) -> None:
    """A settle freed a concurrency slot: the next claim takes the limits into account."""
    _seen[served] = _Seen(True, time.monotonic())


def current(conn: Connection, served: Served, params: dict[str, Any]) -> bool:
    """:func:`is_open`, read again with the `limits_open` statement (``params``: its
    ``queues`` and ``now``) if the last answer is older than :data:`RECHECK_SECONDS`. One
    thread reads it for the process: the others go on with the last answer meanwhile."""
    seen = _seen.setdefault(served, _Seen())
    asked = time.monotonic()
    if asked - seen.at < RECHECK_SECONDS:
        return seen.open
    seen.at = asked  # claimed: a concurrent thread sees a fresh answer and goes on
    rows = fetch_rows(conn, LIMITS_OPEN, {"queues": params["queues"], "now": params["now"]})
    record(served, rows[0]["limits_open"], asked)
    return is_open(served)


def forget() -> None:
    """Every answer (a test's fresh start)."""
    _seen.clear()
