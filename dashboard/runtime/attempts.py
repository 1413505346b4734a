"""The attempts a worker process is running, and whether one has run past its lease.

A handler that sleeps past its lease without renewing (``demo.timeout``, a hung call) keeps its
thread while the rescuer requeues its job; the next claim would hand that job to another
thread, which hangs the same way, until every thread of every worker is captured. So:

**While any thread of a process runs an attempt past its lease, that process claims no job
whose last attempt's lease expired** (``store/sql.py _CLAIM_ROWS``, ``avoid_expired``). A job whose
attempts keep expiring then holds at most one thread per worker process; other jobs keep
flowing on the rest. Jobs rescued for other reasons (a crashed worker) are
still claimed by processes without an overdue thread, and by this one once its overdue
attempt ends.

The lease end is each attempt's ``JobContext.locked_until`` (moved by every renewal, set by the
database's clock), compared with the worker's clock: the two are assumed to agree closely.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from ..store.values import utcnow
from .handlers import JobContext


class RunningAttempts:
    """Thread-safe set of the attempts this process runs (their contexts), each with the worker
    id of the thread that runs it (in batch mode a job's ``locked_by`` is its lane's, not its
    thread's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, tuple[str | None, JobContext]] = {}

    @contextmanager
    def running(self, ctx: JobContext, thread: str | None = None) -> Iterator[None]:
        """Count ``ctx`` as running on ``thread`` (a worker id) for the duration of the block
        (handler and settle)."""
        with self._lock:
            self._running[id(ctx)] = (thread, ctx)
        try:
            yield
        finally:
            with self._lock:
                self._running.pop(id(ctx), None)

    def by_thread(self) -> list[tuple[str | None, JobContext]]:
        """What each thread runs now: (its worker id, the attempt's context)."""
        with self._lock:
            return list(self._running.values())

    def any_overdue(self, now: datetime | None = None) -> bool:
        """Whether an attempt of this process is running past its lease."""
        now = now or utcnow()
        with self._lock:  # a plain loop: asked before every claim, so kept cheap
            for _thread, ctx in self._running.values():
                end = ctx.locked_until
                if end is not None and end < now:
                    return True
        return False


PROCESS = RunningAttempts()  # one per worker process: every runner and the dispatcher share it
