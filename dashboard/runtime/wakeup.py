"""Waking idle workers: a doorbell they wait on, rung by a LISTEN connection.

Statements that make a job claimable now send ``NOTIFY jobqueue_jobs`` at commit
(``sql.NOTIFY_CHANNEL``). One :class:`Listener` thread per worker process holds a LISTEN
connection and rings the :class:`Doorbell`; idle claim loops wait on the doorbell with the
poll interval as their timeout. Polling stays the fallback: a lost notification, or a
listener that is reconnecting after a database restart, costs at most one poll interval.

A ring wakes one idle loop, not all of them: a notification usually means one job (a create,
a release, a freed slot), and sixteen threads claiming for it cost fifteen empty claims. A
loop that claims a job after a wait rings again (:meth:`Doorbell.pass_on`), so a burst wakes
the idle loops one after another for as long as they find work.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Mapping
from typing import Any

import psycopg
from sqlalchemy.engine import URL

from ..store.sql import NOTIFY_CHANNEL

log = logging.getLogger(__name__)


class Doorbell:
    """Idle loops wait here; a ring wakes one of them, :meth:`ring_all` every one.

    A loop reads :attr:`rings` before it claims and waits only if nobody rang since, so a
    notification that arrives between an empty claim and the wait is not slept through.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.rings = 0

    def ring(self) -> None:
        """Wake one idle loop (a job may be there)."""
        with self._cond:
            self.rings += 1
            self._cond.notify()

    def pass_on(self) -> None:
        """A loop woken by a ring found a job: there may be more, wake the next idle loop."""
        self.ring()

    def ring_all(self) -> None:
        """Wake every idle loop: the worker stops, or notifications may have been missed."""
        with self._cond:
            self.rings += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a ring after ``seen``; True if there was one."""
        with self._cond:
            return self._cond.wait_for(lambda: self.rings != seen, timeout)


class Listener:
    """A worker service: LISTEN on the workers' channel and ring the doorbell for every
    notification, until ``stopping`` (the worker's stop signal: idle threads then stop anyway).

    ``connect_args``: libpq options of the connection (``database.tcp_connect_args``: TCP
    keepalives and ``tcp_user_timeout``, so that a partition that drops packets ends an idle
    LISTEN connection within a bounded time; the loss is logged, and polling covers the gap).

    ``queues``: the queues this worker serves (``None``: every one). A notification's payload
    names the queue it is about (a new job, a freed slot, a resume); one about a queue this
    worker does not serve rings nothing, and one without a name (an operator's retry) rings.
    """

    name = "listener"

    def __init__(
        self,
        url: URL,
        doorbell: Doorbell,
        stopping: threading.Event,
        connect_args: Mapping[str, Any] | None = None,
        queues: Collection[str] | None = None,
    ) -> None:
        self.queues = None if queues is None else frozenset(queues)
        self.conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.connect_args = {"connect_timeout": 5, **(connect_args or {})}
        self.doorbell = doorbell
        self.stopping = stopping
        self.connected = threading.Event()  # set while LISTEN is in force (for tests and logs)

    def start(self) -> None:
        threading.Thread(target=self.run, name=self.name, daemon=True).start()

    def stop(self) -> None:
        """Stop listening within half a second (its wait for a notification); not waited for:
        it holds nothing but its own connection, which its thread closes."""
        self.stopping.set()

    def run(self) -> None:
        delay = 0.5
        while not self.stopping.is_set():
            try:
                with self.connect() as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self.connected.set()
                    log.info("listening for new jobs on %s", NOTIFY_CHANNEL)
                    delay = 0.5
                    self.doorbell.ring_all()  # jobs may have arrived while we were not listening
                    while not self.stopping.is_set():
                        for notice in conn.notifies(timeout=0.5):
                            if self.concerns(notice.payload):
                                self.doorbell.ring()
            except psycopg.Error as error:
                self.connected.clear()
                if self.stopping.is_set():  # the worker stops (its database may stop with it): no loss
                    log.debug("LISTEN connection closed while stopping (%s)", str(error).strip() or error)
                    break
                log.warning(
                    "LISTEN connection lost (%s); polling until it is back", str(error).strip() or error
                )
                self.stopping.wait(delay)
                delay = min(delay * 2, 10.0)
        self.connected.clear()

    def concerns(self, payload: str) -> bool:
        """Whether a notification with ``payload`` (a queue's name, or empty) is for us."""
        return self.queues is None or not payload or payload in self.queues

    def connect(self) -> psycopg.Connection[Any]:
        """A new autocommit connection with :attr:`connect_args` (not yet listening)."""
        return psycopg.connect(self.conninfo, autocommit=True, **self.connect_args)
