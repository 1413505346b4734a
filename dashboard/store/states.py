"""The four job statuses and the event types, with who moves a job in and out of each.

::

    queued  -> running     claim_next_job            (event: claimed)
    running -> succeeded   complete_job              (event: succeeded)
    running -> queued      fail_job, attempts left   (event: retry_scheduled)
    running -> queued      rescue_expired_jobs      (event: timeout_requeued)
    running -> failed      fail_job / rescue, none left (event: failed)
    failed  -> queued      retry_job / bulk retry    (event: manual_retry)
    queued  -> failed      cancel (operator)         (event: cancelled)
    queued  -> queued      run now (operator)        (event: rescheduled)
    running -> queued      snooze_job                (event: snoozed; failed past the cap)
    queued  -> queued      its last parent settles   (event: released; a waiting job, below)
    queued  -> failed      a parent failed, cancel   (event: cancelled)
    queued  -> queued      a create with debounce    (event: debounced; payload, start moved)

A job that waits for parents (``depends_on``) is ``queued`` with ``available_at`` =
:data:`WAITING_AT`, after any instant a client may give, so no claim picks it; the release
trigger (migration 0018) moves it to the release time in the statement that settles its last
parent.

Events ``created``, ``progress`` and ``lease_renewed`` record facts without a status change.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

# A waiting job's available_at (migration 0018 writes the same instant): never due.
WAITING_AT = datetime(9999, 12, 31, tzinfo=UTC)


class Status(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED})
LIVE = frozenset({Status.QUEUED, Status.RUNNING})


class EventType(StrEnum):
    CREATED = "created"
    CLAIMED = "claimed"
    PROGRESS = "progress"
    LEASE_RENEWED = "lease_renewed"
    SUCCEEDED = "succeeded"
    RETRY_SCHEDULED = "retry_scheduled"
    FAILED = "failed"
    TIMEOUT_REQUEUED = "timeout_requeued"
    MANUAL_RETRY = "manual_retry"
    # The operator's actions, beside the nine of the lifecycle above:
    CANCELLED = "cancelled"  # queued -> failed, "Cancelled by <actor>"
    RESCHEDULED = "rescheduled"  # queued, available_at moved to now ("run now")
    # Workflows: a waiting job's last parent is done (written by the release trigger).
    RELEASED = "released"
    # Uniqueness windows: a create with debounce replaced a queued job's payload and start.
    DEBOUNCED = "debounced"
    # A handler raised Snooze(seconds): queued again, the attempt not counted (settle.sql).
    SNOOZED = "snoozed"


STATUSES: tuple[str, ...] = tuple(s.value for s in Status)
EVENT_TYPES: tuple[str, ...] = tuple(e.value for e in EventType)
# An attempt's activity: folded on the job page's timeline, left out by the event feed's
# "hide progress and renewals", linked from the live header.
ACTIVITY_EVENTS: tuple[str, ...] = (EventType.PROGRESS.value, EventType.LEASE_RENEWED.value)
# The events the overview's charts read (claims, outcomes): the only ones in
# jobs_jobevent_created_at_idx (migration 0017), so no other kind can crowd them out of a read.
CHART_EVENTS: tuple[str, ...] = (
    EventType.CLAIMED.value,
    EventType.SUCCEEDED.value,
    EventType.FAILED.value,
    EventType.RETRY_SCHEDULED.value,
)
