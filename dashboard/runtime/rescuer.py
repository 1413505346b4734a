"""The rescuer: recovers expired leases on schedule, whatever the worker threads are doing.

Each worker thread also runs the cleanup tick between jobs (the reference's behaviour), but a
thread inside a long handler ticks nothing; if every thread of every worker is busy, expired
leases would wait for a free thread. One rescuer thread per process runs the tick every
``cleanup_interval_seconds`` regardless, so a dead worker's job is recovered within about
lease + cleanup interval. ``SKIP LOCKED`` keeps it and the threads from stepping on each other.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .worker import WorkerLoop


class Rescuer:
    def __init__(self, loop: WorkerLoop, stopping: threading.Event) -> None:
        self.loop = loop  # its worker id, connection, logging and outage backoff
        self.stopping = stopping

    def run(self) -> None:
        loop = self.loop
        with loop.holding_connection():
            while not self.stopping.is_set():
                try:
                    loop.cleanup()
                    loop.backoff.reset()
                except Exception as error:
                    loop.recover(error)
                    continue
                self.stopping.wait(loop.settings.cleanup_interval_seconds)
