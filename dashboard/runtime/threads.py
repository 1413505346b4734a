"""What every worker thread has, whatever it does: a worker id, an application context, one
database connection kept for its life, and a capped backoff for database outages.

:class:`ThreadRuntime` is that state. The one-job loops, the batch executors, the dispatcher,
the completer and the rescuer each own one; none borrows another's. The one exception is the
progress flusher (``progress.py``), which writes a running attempt's report on the connection
of the thread that runs it: so the connection is opened and dropped under a lock.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from flask import Flask
from sqlalchemy import Connection

from ..config import WorkerSettings
from ..store import connection
from ..store.flow import queues
from ..store.lifecycle import claim_form
from .attempts import PROCESS, RunningAttempts
from .failures import first_line, is_connection_error

log = logging.getLogger(__name__)

RECONNECT_BASE_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 10.0


def make_worker_id(thread_number: int, *, hostname: str | None = None, pid: int | None = None) -> str:
    """``hostname:pid:thread-N:shortrandom`` (the contract's format): unique per thread, or per
    batch mode lane, and per process start."""
    host = hostname or socket.gethostname()
    return f"{host}:{pid or os.getpid()}:thread-{thread_number}:{secrets.token_hex(4)}"


class Backoff:
    """Capped exponential wait between attempts to reach the database again."""

    def __init__(self, base: float = RECONNECT_BASE_SECONDS, cap: float = RECONNECT_MAX_SECONDS) -> None:
        self.base, self.cap, self.failures = base, cap, 0

    def next(self) -> float:
        delay = min(self.base * 2.0 ** min(self.failures, 32), self.cap)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0


# An idle loop that waits for a rate window wakes this much after it opens (the claim's clock
# and the wait's are the database's, read by different statements), and waits at most this long.
# Once its queues were found to have no rate limit, it reads the windows again only after
# RATES_UNSEEN_SECONDS (a limit set meanwhile is waited for by polls until then, as before).
WINDOW_MARGIN_SECONDS = 0.005
WINDOW_WAIT_MAX_SECONDS = 30.0
RATES_UNSEEN_SECONDS = 5.0


class ThreadRuntime:
    """One worker thread's id, settings, connection and outage backoff, and what it shares
    with the process's other threads: the running attempts and the claim's forms."""

    def __init__(
        self,
        app: Flask,
        settings: WorkerSettings,
        worker_id: str,
        stopping: threading.Event,
        *,
        reconnect: Backoff | None = None,
        generic_plans: bool = False,
        attempts: RunningAttempts | None = None,
        listening: Callable[[], bool] | None = None,
        claim_forms: claim_form.ClaimForms | None = None,
    ) -> None:
        self.app = app
        self.attempts = attempts or PROCESS  # this process's running attempts (anti-capture)
        # What the process knows of its queues' limits (which form its claims take): the
        # worker's, one for all its threads; none given, the store's default one.
        self.claim_forms = claim_form.DEFAULT if claim_forms is None else claim_forms
        self.settings = settings
        self.worker_id = worker_id
        self.stopping = stopping
        self.backoff = reconnect or Backoff()
        self.generic_plans = generic_plans  # one-job mode's threads: connection.connect_worker
        self.listening = listening or (lambda: False)  # whether the worker's LISTEN is up
        self._rates_unseen_until = 0.0  # monotonic: no rate limit among the queues until then
        self.holding = False  # inside holding_connection(): keep the connection between calls
        self._conn: Connection | None = None
        self._conn_lock = threading.Lock()  # the progress flusher may use the connection too

    @property
    def connection(self) -> Connection:
        """This thread's own autocommit connection: one round trip per transition."""
        with self._conn_lock:
            if self._conn is None:
                self._conn = connection.connect_worker() if self.generic_plans else connection.connect()
            return self._conn

    def close(self) -> None:
        """Return the connection to the pool (the runtime opens another if it is used again)."""
        with self._conn_lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            connection.release_worker(conn)

    def drop_connection(self, broken: Connection | None = None) -> None:
        """Forget the connection after an error; the next call opens a fresh one.

        ``broken``: the connection the error came from; if it was replaced meanwhile (another
        caller dropped it first), the fresh one is kept."""
        with self._conn_lock:
            if broken is not None and broken is not self._conn:
                return
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:  # a broken connection may fail to close; it is gone either way
                log.debug("%s: closing a broken connection failed", self.worker_id, exc_info=True)

    @contextmanager
    def holding_connection(self) -> Iterator[None]:
        """A thread's whole life: an app context, and the connection kept from one call to the
        next (closed at the end) instead of given back after every step."""
        self.holding = True
        with self.app.app_context():
            try:
                yield
            finally:
                self.holding = False
                self.close()

    def idle_seconds(self) -> float:
        """How long an idle claim loop waits (on the doorbell) after a claim that found nothing.

        The poll interval, unless a served queue's rate window is full
        (``queues.rate_window``): then until that window opens if it opens sooner, so a
        rate-limited queue is claimed from as soon as its window allows. When every served
        queue waits for its window, nothing is claimable before the earliest opens, so the loop
        waits for it even past the poll interval while the worker's LISTEN is up (at most
        :data:`WINDOW_WAIT_MAX_SECONDS`: a limit changed or a queue resumed meanwhile wakes it
        by NOTIFY, and a lost notification costs no more); without LISTEN, no longer than a
        poll. The windows are not read while stopping, nor for :data:`RATES_UNSEEN_SECONDS`
        after the served queues were found without a rate limit. A failed read waits the poll
        interval; the next claim reports the error.
        """
        poll = self.settings.poll_interval_ms / 1000
        if self.stopping.is_set() or time.monotonic() < self._rates_unseen_until:
            return poll
        try:
            window = queues.rate_window(self.settings.queues, conn=self.connection)
        except Exception:
            log.debug("%s: could not read the rate windows", self.worker_id, exc_info=True)
            return poll
        if window is None:
            self._rates_unseen_until = time.monotonic() + RATES_UNSEEN_SECONDS
            return poll
        if window.opens_in is None:
            return poll
        opens = window.opens_in + WINDOW_MARGIN_SECONDS
        if window.all_closed and self.listening():
            return min(max(poll, opens), WINDOW_WAIT_MAX_SECONDS)
        return min(poll, opens)

    def back_off(self, error: Exception) -> None:
        """After an error: forget the (maybe broken) connection and wait, capped exponentially."""
        self.drop_connection()
        delay = self.backoff.next()
        if is_connection_error(error):
            log.warning(
                "%s: database unavailable (%s: %s); retrying in %gs",
                self.worker_id,
                type(error).__name__,
                first_line(error),
                delay,
            )
        else:
            log.exception("%s: unexpected error in the worker loop; retrying in %gs", self.worker_id, delay)
        self.stopping.wait(delay)


class PeriodicService:
    """A worker service that runs :meth:`step` on a thread of its own, on its own
    :class:`ThreadRuntime` (worker id, connection, outage backoff).

    ``step()`` returns how long to sleep before the next one (0: at once). A step that raises
    is retried after the runtime's outage backoff (``back_off``); one that returns resets it.
    The loop ends with ``runtime.stopping`` (the worker's stop signal); :meth:`stop` sets it
    and waits a second for the step under way, which is bounded by its statements.
    """

    name = "service"
    thread_name = "service"

    def __init__(self, runtime: ThreadRuntime) -> None:
        self.runtime = runtime
        self.thread: threading.Thread | None = None

    def step(self) -> float:  # pragma: no cover - every service defines its own
        raise NotImplementedError

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name=self.thread_name, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.runtime.stopping.set()
        if self.thread is not None:
            self.thread.join(1.0)

    def run(self) -> None:
        runtime = self.runtime
        stopping = runtime.stopping
        with runtime.holding_connection():
            while not stopping.is_set():
                try:
                    seconds = self.step()
                    runtime.backoff.reset()
                except Exception as error:
                    runtime.back_off(error)
                    continue
                if seconds > 0:
                    stopping.wait(seconds)
