"""``Snooze``: a handler's way to say "run me again later", which is no failure.

``raise Snooze(300)`` (or ``Snooze(timedelta(minutes=5))``) ends the attempt: the worker puts
the job back to ``queued``, due that many seconds from now, with a ``snoozed`` event, and the
attempt does not count against ``max_attempts`` (``store/lifecycle/snooze.sql``). A job that
has snoozed ``JOB_MAX_SNOOZES`` times fails for good on its next snooze.
"""

from __future__ import annotations

import math
from datetime import timedelta

MAX_SNOOZE_SECONDS = 366 * 86_400  # a year and a day: later than that is a schedule's job


class Snooze(Exception):
    """Raised by a handler: run this job again in ``seconds`` (a number or a ``timedelta``),
    without spending an attempt. ``ValueError``/``TypeError`` naming ``seconds`` unless it is
    0 to :data:`MAX_SNOOZE_SECONDS`."""

    def __init__(self, seconds: float | timedelta) -> None:
        if isinstance(seconds, timedelta):
            seconds = seconds.total_seconds()
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise TypeError(f"seconds must be a number or a timedelta, got {type(seconds).__name__}")
        if not math.isfinite(seconds) or not 0 <= seconds <= MAX_SNOOZE_SECONDS:
            raise ValueError(f"seconds must be between 0 and {MAX_SNOOZE_SECONDS}, got {seconds!r}")
        self.seconds = float(seconds)
        super().__init__(f"snoozed for {self.seconds:g}s")


def cap_error(max_snoozes: int) -> str:
    """``last_error`` of a job that snoozed once more than ``JOB_MAX_SNOOZES`` allows."""
    return (
        f"Snooze: the job snoozed {max_snoozes} times, the most JOB_MAX_SNOOZES allows; "
        "it fails instead of snoozing again"
    )
