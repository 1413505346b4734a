"""Slots of cron expressions in a time zone, across both daylight-saving changes.

The rule (store/flow/cron.py, Debian cron's, as cronsim implements it): a fixed time of day runs once
a day, a time the spring change skips at the next valid minute, a time the autumn change repeats
at its first occurrence; an expression with ``*`` in its minute or hour keeps its interval in
real time.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from dashboard.store.flow import cron

BERLIN = ZoneInfo("Europe/Berlin")
SPRING = datetime(2026, 3, 29, tzinfo=BERLIN)  # 02:00 CET -> 03:00 CEST
AUTUMN = datetime(2026, 10, 25, tzinfo=BERLIN)  # 03:00 CEST -> 02:00 CET


def day_slots(expression: str, day: datetime) -> list[datetime]:
    start, end = day.astimezone(UTC), (day + timedelta(days=1)).astimezone(UTC)
    found = []
    for slot in cron.slots_after(expression, "Europe/Berlin", start - timedelta(microseconds=1)):
        if slot >= end:
            return found
        found.append(slot)
    return found


def test_a_daily_time_the_spring_change_skips_runs_once_at_the_next_valid_minute():
    assert day_slots("30 2 * * *", SPRING) == [datetime(2026, 3, 29, 1, 0, tzinfo=UTC)]  # 03:00 CEST
    assert day_slots("30 2 * * *", SPRING - timedelta(days=1)) == [datetime(2026, 3, 28, 1, 30, tzinfo=UTC)]
    assert day_slots("30 2 * * *", SPRING + timedelta(days=1)) == [datetime(2026, 3, 30, 0, 30, tzinfo=UTC)]


def test_a_daily_time_the_autumn_change_repeats_runs_once_at_its_first_occurrence():
    assert day_slots("30 2 * * *", AUTUMN) == [datetime(2026, 10, 25, 0, 30, tzinfo=UTC)]  # 02:30 CEST
    assert day_slots("30 2 * * *", AUTUMN + timedelta(days=1)) == [datetime(2026, 10, 26, 1, 30, tzinfo=UTC)]


@pytest.mark.parametrize(("day", "hours"), [(SPRING, 23), (AUTUMN, 25)], ids=["spring", "autumn"])
def test_hourly_and_every_minute_keep_their_interval_in_real_time(day, hours):
    hourly = day_slots("0 * * * *", day)
    assert len(hourly) == hours
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(hourly))
    minutes = day_slots("* * * * *", day)
    assert len(minutes) == hours * 60
    assert all(b - a == timedelta(minutes=1) for a, b in itertools.pairwise(minutes))


def test_slots_after_an_instant_in_the_repeated_hour_never_go_back():
    second_pass = datetime(2026, 10, 25, 1, 20, tzinfo=UTC)  # 02:20 CET, after 02:30 CEST ran
    after = cron.next_slot("30 2 * * *", "Europe/Berlin", second_pass)
    assert after == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)


def test_due_latest_takes_the_newest_and_all_takes_each_bounded():
    first = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    now = first + timedelta(minutes=9, seconds=30)
    latest = cron.due("* * * * *", "UTC", first, now, "latest", 100)
    assert latest.slots == [first + timedelta(minutes=9)]
    assert latest.skipped == 9 and latest.next_run_at == first + timedelta(minutes=10)
    every = cron.due("* * * * *", "UTC", first, now, "all", 100)
    assert every.slots == [first + timedelta(minutes=n) for n in range(10)] and every.skipped == 0
    bounded = cron.due("* * * * *", "UTC", first, first + timedelta(minutes=149), "all", 100)
    assert bounded.slots[0] == first + timedelta(minutes=50) and len(bounded.slots) == 100
    assert bounded.skipped == 50 and not bounded.skipped_at_least


def test_due_far_behind_still_takes_the_newest_slots():
    first = datetime(2026, 1, 1, tzinfo=UTC)
    now = first + timedelta(days=30, seconds=5)  # 43,200 missed minutes, past the scan limit
    far = cron.due("* * * * *", "UTC", first, now, "all", 100)
    assert far.slots == [now - timedelta(seconds=5) - timedelta(minutes=99 - n) for n in range(100)]
    assert far.skipped_at_least and far.skipped >= cron.SCAN_MAX
    latest = cron.due("* * * * *", "UTC", first, now, "latest", 100)
    assert latest.slots == [now - timedelta(seconds=5)]


@pytest.mark.parametrize(
    ("expression", "zone", "says"),
    [
        ("61 * * * *", "UTC", "Bad minute"),
        ("* * * *", "UTC", "five fields"),
        ("* * * * * *", "UTC", "five fields"),
        ("0 0 30 2 *", "UTC", "day-of-month"),
        ("0 6 * * *", "Mars/Olympus", "unknown time zone"),
        ("0 6 * * *", "", "unknown time zone"),
    ],
)
def test_a_bad_expression_or_zone_is_refused_with_its_reason(expression, zone, says):
    with pytest.raises(cron.CronError, match=says):
        cron.check(expression, zone)


def test_expressions_in_words():
    assert cron.describe("0 6 * * *", "Europe/Berlin") == "At 06:00 every day (Europe/Berlin)"
    assert cron.describe("*/5 * * * *", "UTC") == "Every fifth minute of every hour (UTC)"
