"""The job page's timeline, folded: lifecycle events one per line, runs of ``progress`` and
``lease_renewed`` events as one line each; and the live poll that sends only what changed
(the header and the events after the last one shown)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..store.records import EventRecord, JobRecord
from ..store.states import ACTIVITY_EVENTS, Status

NOISE = frozenset(ACTIVITY_EVENTS)


def progress_percent(event: EventRecord | None) -> float | None:
    """A ``progress`` event's percent, clamped to 0-100; ``None`` when it has none."""
    if event is None or not isinstance(event.data, dict):
        return None
    value = event.data.get("percent")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return max(0.0, min(100.0, float(value)))


def current_progress(job: JobRecord, events: Sequence[EventRecord]) -> float | None:
    """The running attempt's progress: the percent of the newest ``progress`` event of the
    job's current attempt among ``events`` (oldest first); ``None`` when the job is not
    running or has none. The job page and its live poll both show this, each from the events
    it read (the poll's: every event after the last lifecycle event shown, so the attempt's)."""
    if job.status != Status.RUNNING:
        return None
    for event in reversed(events):
        if event.type == "progress" and event.attempt == job.attempts:
            return progress_percent(event)
    return None


@dataclass
class Fold:
    """A run of progress / renewal events between two lifecycle events."""

    progress: int = 0
    renewals: int = 0
    latest_percent: float | None = None
    first_id: int = 0
    last_id: int = 0

    def add(self, event: EventRecord) -> None:
        self.first_id = self.first_id or event.id
        self.last_id = event.id
        if event.type == "progress":
            self.progress += 1
            percent = progress_percent(event)
            if percent is not None:
                self.latest_percent = percent
        else:
            self.renewals += 1


@dataclass
class Folded:
    items: list[EventRecord | Fold] = field(default_factory=list)  # lifecycle events and folds
    tail: Fold | None = None  # noise after the last lifecycle event: it still grows
    last_id: int = 0  # the newest lifecycle event shown (the poll asks for what follows)


def fold(events: list[EventRecord], after: int = 0) -> Folded:
    folded = Folded(last_id=after)
    current: Fold | None = None
    for event in events:
        if event.type in NOISE:
            current = current or Fold()
            current.add(event)
            continue
        if current is not None:
            folded.items.append(current)
            current = None
        folded.items.append(event)
        folded.last_id = event.id
    folded.tail = current
    return folded


def timeline_context(events: list[EventRecord], after: int = 0) -> dict[str, Any]:
    """The page's folded timeline; ``after``: the poll's start when no lifecycle event is shown."""
    folded = fold(events, after)
    return {"timeline": folded.items, "tail": folded.tail, "last_event_id": folded.last_id}
