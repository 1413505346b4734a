"""Which form of the claim a process runs for a set of served queues (claim.sql).

The claim has two forms: one that takes slots and ring entries (`claim`, `claim_one`, the
claim half of `complete_and_claim`), and one without the limit tables (`..._no_limits`),
which skips the queues that have a limit and costs what a claim cost before queues had
limits. A process runs the first while a served queue with a limit *could give a job*
(`limits_open`: room in each of its limits, and a job due) and the second otherwise. The
choice never changes what a claim may take, only which queues it looks at.

How the process knows, per set of served queues (a worker's ``--queues``): a
:class:`ClaimForms` keeps the answers, one per worker process, which the worker creates and
hands to every claim and settle-and-claim of its threads (``forms=``); a caller that passes
none (a test, a script) shares :data:`DEFAULT`.

- a no-limits claim (:meth:`ClaimForms.claim_without_limits`) answers `limits_open` at
  statement time, so an idle worker's polls see a limited queue open at once, in the same
  statement;
- the other claims do not compute it (on the one-job settle-and-claim, the hot path, it cost
  the drain a measurable part of its rate: docs/benchmarks.md): :meth:`ClaimForms.current`
  reads it with the `limits_open` statement when the last answer is older than
  ``recheck_seconds`` (:data:`RECHECK_SECONDS`);
- a settle that freed a slot (:meth:`ClaimForms.freed_a_slot`) turns to the limits at once,
  and an answer asked for before that does not turn back, so a queue held at its concurrency
  limit is claimed from again by the process's next settle-and-claim after a slot frees.

So a limited queue that opens while every thread is busy elsewhere (a job of it becomes due,
its rate window opens, its limit is raised) waits at most ``recheck_seconds`` for a claim;
an idle worker's own claims see it at once. The knowledge is the process's, kept in memory.

The same answers say which served queue is the only one without a limit, if one is
(:meth:`ClaimForms.only_queue`): a one-job thread's settle-and-claim of a job of that queue
then reads that queue's range directly (``complete_and_claim_only_queue``). A queue that
appears beside it (a job enqueued into a new one, a paused one resumed) is visited by the busy
threads' claims from the next answer, at most ``recheck_seconds`` later, and by an idle
thread's claim at once; a pause or a limit of the only queue holds from its commit, since that
statement reads both. That statement frees no slot: it settles nothing when the queue has a
concurrency limit by then (:meth:`ClaimForms.limit_found`), and the job is settled again by a
form that frees its slot.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, TextClause

from ..connection import fetch_rows
from ..sql import query

LIMITS_OPEN = query("limits_open")
RECHECK_SECONDS = 0.1  # a ClaimForms' default recheck_seconds

Served = tuple[str, ...] | None  # a worker's --queues, or None for every queue


@dataclass
class _Seen:
    open: bool = False
    at: float = float("-inf")  # time.monotonic() when the answer was asked for
    only: str | None = None  # the one served queue without a limit, if there is exactly one


def served_key(queues: Sequence[str] | None) -> Served:
    return tuple(queues) if queues is not None else None


class ClaimForms:
    """What one process knows of its served queues' limits, per set of served queues: the
    last `limits_open` answer, when it was asked for, and the only served queue without a
    limit. One per worker process, shared by its threads: one thread's answer, or its settle
    that freed a slot, is every thread's. ``recheck_seconds``: how old an answer
    :meth:`current` reads again."""

    def __init__(self, recheck_seconds: float = RECHECK_SECONDS) -> None:
        self.recheck_seconds = recheck_seconds
        self._seen: dict[Served, _Seen] = {}

    def is_open(self, served: Served) -> bool:
        """What the last answer said (closed until one came)."""
        seen = self._seen.get(served)
        return seen.open if seen is not None else False

    def only_queue(self, served: Served) -> str | None:
        """What the last answer said of the served queues without a limit: their name when
        there is exactly one, else ``None`` (and ``None`` until an answer came)."""
        seen = self._seen.get(served)
        return seen.only if seen is not None else None

    def _keep(self, served: Served, row: dict[str, Any], asked: float) -> None:
        """An answer (a row with ``limits_open`` and ``only_queue``) asked for at ``asked``. Its
        ``limits_open`` is kept unless a slot was freed after that (which the statement's
        snapshot cannot have seen); its ``only_queue`` always."""
        seen = self._seen.get(served)
        if seen is None or seen.at <= asked:
            self._seen[served] = _Seen(bool(row["limits_open"]), asked, row["only_queue"])
        else:
            seen.only = row["only_queue"]

    def claim_without_limits(
        self, conn: Connection, served: Served, statement: TextClause, params: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """Run a no-limits claim (``claim_no_limits`` or ``claim_one_no_limits``) and keep its
        answer; its rows, the answer's row among them (``id`` NULL when it claimed nothing)."""
        asked = time.monotonic()
        rows = fetch_rows(conn, statement, params)
        self._keep(served, rows[0], asked)
        return rows

    def freed_a_slot(self, served: Served) -> None:
        """A settle freed a concurrency slot: the next claim takes the limits into account."""
        self._seen[served] = _Seen(True, time.monotonic(), self.only_queue(served))

    def limit_found(self, served: Served) -> None:
        """A statement found a concurrency limit on the queue the last answer named the only
        one without (``complete_and_claim_only_queue``'s ``limited``): until the next answer,
        the claims take the limits into account and none reads that queue alone."""
        self._seen[served] = _Seen(True, time.monotonic(), None)

    def current(
        self, conn: Connection, served: Served, params: dict[str, Any], *, recheck_closed: bool = True
    ) -> bool:
        """:meth:`is_open`, asked again with the `limits_open` statement (``params``: its
        ``queues`` and ``now``) when the last answer is older than :attr:`recheck_seconds`.
        ``recheck_closed=False``: a closed answer stands (the caller's no-limits claim answers
        it). One thread asks for the process: the others go on with the last answer meanwhile."""
        seen = self._seen.setdefault(served, _Seen())
        asked = time.monotonic()
        if asked - seen.at < self.recheck_seconds or not (seen.open or recheck_closed):
            return seen.open
        seen.at = asked  # claimed: a concurrent thread sees a fresh answer and goes on
        rows = fetch_rows(conn, LIMITS_OPEN, {"queues": params["queues"], "now": params["now"]})
        self._keep(served, rows[0], asked)
        return self.is_open(served)

    def forget(self) -> None:
        """Every answer (a fresh start)."""
        self._seen.clear()


DEFAULT = ClaimForms()  # for the callers that pass no forms: tests, scripts
