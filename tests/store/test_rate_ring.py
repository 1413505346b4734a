"""Resizing a queue's rate ring: linear in the ring, and the new count holds at once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import text

from dashboard.config.rules import RATE_COUNT_MAX
from dashboard.extensions import db
from dashboard.store import lifecycle
from dashboard.store.flow import queues
from dashboard.store.lifecycle import create as enqueue
from tests.store.helpers import LEASE, T0, at

PERIOD = 60.0


def ring(name: str) -> list[tuple]:
    with db.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT n, CASE WHEN taken_at > '-infinity' THEN taken_at END FROM jobs_queue_rate "
                "WHERE queue = :q ORDER BY n"
            ),
            {"q": name},
        )
        return [tuple(r) for r in rows]  # taken_at None: a free entry (never taken)


def claim(now, limit: int = 5) -> list:
    return lifecycle.claim_jobs("w", lease_seconds=LEASE, limit=limit, now=now, queues=["r"])


def used_ring(count: int) -> None:
    """Queue ``r`` with a rate limit of ``count`` whose every entry was taken in the last
    second before ``at(10)``, the newest by entry ``count`` (as ``count`` claims would leave it)."""
    queues.set_limits("r", rate_limit={"count": count, "period_seconds": PERIOD}, now=T0)
    with db.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE jobs_queue_rate SET taken_at = CAST(:t AS timestamptz) "
                "+ n * interval '50 microseconds' WHERE queue = 'r'"
            ),
            {"t": at(9)},
        )


def test_shrinking_a_used_ring_of_the_largest_count_to_one_is_quick_and_holds_at_once(app):
    used_ring(RATE_COUNT_MAX)
    newest = max(ring("r"), key=lambda entry: entry[1])
    started = time.monotonic()
    queues.set_limits("r", rate_limit={"count": 1, "period_seconds": PERIOD}, now=at(10))
    assert time.monotonic() - started < 2.0
    assert ring("r") == [newest]  # the newest claim of the window stays counted

    for i in range(3):
        enqueue.create_job(enqueue.JobSpec("demo.success", {"i": i}, queue="r"), now=T0)
    assert claim(at(11)) == []  # the window's one claim is taken
    free_at = newest[1] + timedelta(seconds=PERIOD)
    assert len(claim(free_at)) == 1
    assert claim(free_at + timedelta(seconds=PERIOD / 2)) == []
    assert len(claim(free_at + timedelta(seconds=PERIOD))) == 1


@pytest.mark.parametrize(("count", "to", "kept"), [(5, 2, [4, 5]), (3, 3, [1, 2, 3]), (2, 4, [1, 2, 3, 4])])
def test_a_resize_keeps_the_newest_taken_entries_and_adds_free_ones(app, count, to, kept):
    used_ring(count)
    queues.set_limits("r", rate_limit={"count": to, "period_seconds": PERIOD}, now=at(10))
    assert [n for n, _ in ring("r")] == kept
    assert sum(1 for _, taken in ring("r") if taken is not None) == min(count, to)  # new entries are free


def test_removing_the_rate_limit_drops_the_ring(app):
    used_ring(4)
    queues.set_limits("r", rate_limit=None, now=at(10))
    assert ring("r") == []


def _nodes(plan: dict) -> Iterator[dict]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def test_the_resize_visits_each_entry_a_bounded_number_of_times_whatever_the_plan(app):
    """With hash and merge joins, memoize and index scans off (a planner that believes the
    ring small may choose so), the statement still visits each entry a few times: no join of
    the ring with itself."""
    used_ring(RATE_COUNT_MAX)
    with db.engine.begin() as conn:
        for setting in ("enable_hashjoin", "enable_mergejoin", "enable_memoize", "enable_indexscan"):
            conn.execute(text(f"SET LOCAL {setting} = off"))
        explained = conn.execute(
            text("EXPLAIN (ANALYZE, FORMAT JSON) " + queues.RESIZE_RING.text), {"name": "r", "count": 1}
        ).scalar_one()
        conn.rollback()
    plan = (explained if isinstance(explained, list) else json.loads(explained))[0]["Plan"]
    visits = sum(
        node["Actual Loops"]
        * (
            node["Actual Rows"]
            + node.get("Rows Removed by Filter", 0)
            + node.get("Rows Removed by Join Filter", 0)
        )
        for node in _nodes(plan)
    )
    assert visits < 10 * RATE_COUNT_MAX
