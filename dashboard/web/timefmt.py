"""How times read on the pages: relative to now, with the absolute time in ``TIME_ZONE``.

Pure functions, so the wording is tested without a request.
"""

from __future__ import annotations

from datetime import datetime, tzinfo


def duration(seconds: float) -> str:
    """A short human duration: ``42 s``, ``3 min``, ``5 h 2 min``, ``2 d 4 h``."""
    s = int(abs(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        hours, minutes = divmod(s // 60, 60)
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(s // 3600, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def relative(moment: datetime, now: datetime) -> str:
    """``3 min ago`` for the past, ``in 20 s`` for the future, ``just now`` within a second."""
    seconds = (now - moment).total_seconds()
    if abs(seconds) < 1:
        return "just now"
    text = duration(seconds)
    return f"{text} ago" if seconds > 0 else f"in {text}"


def absolute(moment: datetime, tz: tzinfo) -> str:
    """The full time in the dashboard's time zone, to the second, with the zone's name."""
    return moment.astimezone(tz).strftime("%Y-%m-%d %H:%M:%S %Z")
