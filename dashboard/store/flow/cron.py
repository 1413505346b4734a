"""A schedule's slots: the instants its cron expression names in its time zone, in UTC.

The expression has five fields (minute, hour, day of month, month, day of week) and is read by
``cronsim`` (pinned), never by hand. Its rule for daylight saving is Debian cron's, and so ours:

- an expression with a fixed minute and hour (neither field starts with ``*``: ``30 2 * * *``,
  ``0 6,18 * * *``, ``0 0-23/6 * * *``) is a time of day on the wall clock: a time that does
  not exist (the hour skipped when clocks go forward) runs at the next valid minute (``02:30``
  runs at ``03:00``), and a time that occurs twice (the hour repeated when clocks go back) runs
  once, at its first occurrence;
- an expression whose minute or hour field starts with ``*`` (``* * * * *``, ``*/5 * * * *``,
  ``0 * * * *``, ``0 */6 * * *``) is an interval: it runs at each real instant whose wall-clock
  time matches, so an hourly schedule runs in both passes of a repeated hour and has no run in a
  skipped one.
  Its interval holds in real time; it never stops for an hour.

Every slot is turned into UTC here, and a slot is never earlier than or equal to the one before
it (:func:`slots_after` drops what the wall clock would repeat). Slots are named by
:func:`slot_text` (ISO 8601 UTC), which is the ``{slot}`` of a run's idempotency key.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

FIELDS = 5
# A catch-up walks at most this many slots forward from the first missed one; past it, the
# slots to enqueue are found backwards from now and the skipped ones are counted up to here.
SCAN_MAX = 10_000
MISSED_POLICIES = ("latest", "all")


class CronError(ValueError):
    """An expression or a time zone that cannot name slots; the message says why."""


UNKNOWN_ZONE = "unknown time zone {!r}: use an IANA name such as 'Europe/Berlin' or 'UTC'"


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; :class:`CronError` for an unknown one."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise CronError(UNKNOWN_ZONE.format(name))
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(UNKNOWN_ZONE.format(name)) from None


def check(expression: str, timezone: str) -> None:
    """:class:`CronError` unless ``expression`` is five cron fields that name at least one
    slot in ``timezone``, a known zone."""
    tz = zone(timezone)
    if not isinstance(expression, str) or len(expression.split()) != FIELDS or "\x00" in expression:
        raise CronError(
            f"cron expression {expression!r} must have five fields: minute hour day month weekday"
        )
    try:
        next(iter(CronSim(expression, datetime(2000, 1, 1, tzinfo=tz))))
    except CronSimError as problem:
        raise CronError(f"cron expression {expression!r}: {problem}") from None
    except StopIteration:
        raise CronError(f"cron expression {expression!r} names no time at all") from None


def slot_text(slot: datetime) -> str:
    """A slot's name, ISO 8601 in UTC: ``2026-10-25T00:30:00Z``."""
    return slot.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def slots_after(expression: str, timezone: str, after: datetime) -> Iterator[datetime]:
    """Every slot strictly after ``after`` (aware), in UTC, increasing (infinite, unless the
    expression stops naming times within 50 years)."""
    tz = zone(timezone)
    last = after.astimezone(UTC)
    # Started an hour early: a fixed-time expression is evaluated on the wall clock, and
    # ``after`` in the second pass of a repeated hour reads as the first pass there.
    try:
        for candidate in CronSim(expression, (last - timedelta(hours=1)).astimezone(tz)):
            slot = candidate.astimezone(UTC)
            if slot > last:
                last = slot
                yield slot
    except CronSimError as problem:
        raise CronError(f"cron expression {expression!r}: {problem}") from None


def next_slot(expression: str, timezone: str, after: datetime) -> datetime | None:
    """The first slot strictly after ``after``; ``None`` if there is none within 50 years."""
    return next(slots_after(expression, timezone, after), None)


def upcoming(expression: str, timezone: str, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` slots after ``after``."""
    return list(islice(slots_after(expression, timezone, after), count))


@dataclass(frozen=True)
class Due:
    """What a catch-up enqueues: ``slots`` (oldest first), the due slots it leaves out
    (``skipped``; ``skipped_at_least``: counting stopped at :data:`SCAN_MAX`), and the first
    slot after now (``next_run_at``; ``None``: no more slots)."""

    slots: list[datetime]
    skipped: int
    skipped_at_least: bool
    next_run_at: datetime | None


def due(expression: str, timezone: str, first: datetime, now: datetime, missed: str, limit: int) -> Due:
    """The slots from ``first`` (the earliest slot not fired yet, inclusive) to ``now``
    (inclusive) that a catch-up enqueues: the newest one (``missed="latest"``) or the newest
    ``limit`` (``"all"``), and the next slot after ``now``."""
    if missed not in MISSED_POLICIES:
        raise ValueError(f"missed must be one of {', '.join(MISSED_POLICIES)}, not {missed!r}")
    keep = 1 if missed == "latest" else limit
    newest: deque[datetime] = deque(maxlen=keep)
    seen = 0
    walked_all = False
    for slot in slots_after(expression, timezone, first - timedelta(microseconds=1)):
        if slot > now:
            walked_all = True
            break
        newest.append(slot)
        seen += 1
        if seen >= SCAN_MAX:
            break
    else:
        walked_all = True  # no slot after first within 50 years
    if walked_all:
        return Due(list(newest), seen - len(newest), False, next_slot(expression, timezone, now))
    # Far behind: the newest slots up to now, found backwards, each re-read forwards (the
    # forward walk names the slots, so a key is the same whichever way it was found).
    tz = zone(timezone)
    back_from = (now + timedelta(seconds=1)).astimezone(tz)
    backwards = list(islice(CronSim(expression, back_from, reverse=True), keep))
    start = min(backwards).astimezone(UTC) - timedelta(microseconds=1) if backwards else now
    start = max(start, first - timedelta(microseconds=1))
    newest.clear()
    for slot in slots_after(expression, timezone, start):
        if slot > now:
            break
        newest.append(slot)
    return Due(list(newest), seen, True, next_slot(expression, timezone, now))


def describe(expression: str, timezone: str) -> str:
    """The expression in words, with its zone: ``At 06:00 every day (Europe/Berlin)``; the
    expression itself when it cannot be put in words."""
    try:
        words = CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC)).explain()
    except Exception:  # explain() covers the common shapes; the expression always reads
        words = expression
    return f"{words} ({timezone})"
