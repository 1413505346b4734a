"""Batch mode's queue of jobs claimed ahead (``runtime/dispatcher.Ready``), on its own: no
process, no database."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from dashboard.runtime.dispatcher import CLAIM_AHEAD, Ready, lane_ids
from dashboard.store.records import JobRecord
from tests.support.factories import record
from tests.support.worker_loop import SETTINGS

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def claimed(job_id: uuid.UUID, attempt: int, until: datetime) -> JobRecord:
    lane = f"host:1:thread-{attempt + 10}:abcd"
    return record("running", now=T0, id=job_id, attempts=attempt, locked_by=lane, locked_until=until)


def test_a_job_claimed_again_while_its_old_attempt_waits_is_a_second_entry():
    """Recovered while it waited and claimed again by the same process: each attempt keeps
    its own lease, and taking the old one does not take the new one's."""
    ready = Ready()
    job_id = uuid.uuid4()
    first, second = (
        claimed(job_id, 1, T0 + timedelta(seconds=30)),
        claimed(job_id, 2, T0 + timedelta(seconds=90)),
    )
    ready.put(first)
    ready.put(second)
    assert len(ready) == 2 and {j.attempts for j in ready.waiting()} == {1, 2}
    ready.renewed(second, T0 + timedelta(seconds=120))
    taken = ready.take()
    assert taken is not None and (taken.attempts, taken.locked_until) == (1, first.locked_until)
    taken = ready.take()
    assert taken is not None and (taken.attempts, taken.locked_until) == (2, T0 + timedelta(seconds=120))
    assert len(ready) == 0


def test_a_lease_found_lost_is_not_renewed_again_and_a_kept_one_is_started_with():
    ready = Ready()
    kept, lost = (
        claimed(uuid.uuid4(), 1, T0 + timedelta(seconds=10)),
        claimed(uuid.uuid4(), 1, T0 + timedelta(seconds=10)),
    )
    ready.put(kept)
    ready.put(lost)
    horizon = T0 + timedelta(seconds=20)
    assert {j.id for j in ready.expiring(horizon)} == {kept.id, lost.id}
    ready.renewed(kept, T0 + timedelta(seconds=40))
    ready.renewed(lost, None)
    assert ready.expiring(horizon) == []  # kept is renewed past the horizon, lost is never again
    assert ready.take() == replace(kept, locked_until=T0 + timedelta(seconds=40))
    assert ready.take() == lost


def test_a_process_has_its_threads_and_two_batches_of_lanes():
    """One attempt per lane bounds what a process holds: threads + 2 x batch size, of which at
    most 2 x batch size wait claimed ahead while every thread is busy."""
    ids = lane_ids(replace(SETTINGS, threads=3, batch_size=4))
    assert CLAIM_AHEAD == 2 and len(ids) == 3 + 2 * 4 == len(set(ids))
    numbers = [int(lane.split(":")[2].removeprefix("thread-")) for lane in ids]
    assert numbers == list(range(3 + 3, 3 + 3 + 11))  # after the rescuer, threads, dispatcher, completer
