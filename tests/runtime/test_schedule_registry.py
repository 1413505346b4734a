"""Declaring schedules in code: each argument checked where it is declared, the error naming
the schedule and the argument; defaults resolved from the settings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dashboard.runtime import schedules
from dashboard.runtime.schedules import declarations, schedule


@pytest.fixture(autouse=True)
def empty_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(schedules, "_registry", {})
    yield


@pytest.mark.parametrize(
    ("arguments", "error", "says"),
    [
        ({"name": "has:colon"}, ValueError, "schedule name 'has:colon' must be 1 to 64"),
        ({"name": ""}, ValueError, "schedule name '' must be"),
        ({"name": 7}, TypeError, "schedule name must be a string"),
        ({"cron": "61 * * * *"}, ValueError, "schedule 'nightly': cron: .*Bad minute"),
        ({"cron": "* * *"}, ValueError, "schedule 'nightly': cron: .*five fields"),
        ({"cron": None}, TypeError, "schedule 'nightly': cron must be a string"),
        ({"timezone": "Mars/Olympus"}, ValueError, "schedule 'nightly': timezone: unknown time zone"),
        ({"type": ""}, ValueError, "schedule 'nightly': type must be 1 to 120"),
        ({"type": "a\u202eb"}, ValueError, "schedule 'nightly': type must not contain"),
        ({"payload": {"x": object()}}, TypeError, "schedule 'nightly': payload must be JSON"),
        ({"payload": {"x": float("nan")}}, TypeError, "schedule 'nightly': payload must be JSON"),
        ({"queue": "a b"}, ValueError, "schedule 'nightly': queue must be"),
        ({"priority": "high"}, TypeError, "schedule 'nightly': priority must be an integer"),
        ({"priority": 40000}, ValueError, "schedule 'nightly': priority must be between"),
        ({"max_attempts": 0}, ValueError, "schedule 'nightly': max_attempts must be between"),
        ({"max_attempts": True}, TypeError, "schedule 'nightly': max_attempts must be an integer"),
        ({"missed": "some"}, ValueError, "schedule 'nightly': missed must be 'latest' or 'all'"),
    ],
)
def test_a_bad_argument_is_refused_naming_the_schedule_and_the_argument(arguments, error, says):
    good = {"name": "nightly", "cron": "0 6 * * *", "type": "reports.nightly"}
    with pytest.raises(error, match=says):
        schedule(**{**good, **arguments})
    assert schedules.declared() == []  # nothing registered


def test_the_payload_is_copied_and_one_nested_too_deep_is_refused():
    payload = {"ids": [1, 2]}
    declared = schedule("nightly", cron="0 6 * * *", type="reports.nightly", payload=payload)
    payload["ids"].append(3)
    assert declared.payload == {"ids": [1, 2]}
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ValueError, match="schedule 'deep': payload is nested too deeply"):
        schedule("deep", cron="0 6 * * *", type="reports.nightly", payload=deep)


def test_declaring_the_same_schedule_twice_is_one_and_with_other_arguments_an_error():
    first = schedule("nightly", cron="0 6 * * *", type="reports.nightly")
    assert schedule("nightly", cron="0 6 * * *", type="reports.nightly") == first
    with pytest.raises(ValueError, match="'nightly' is already declared with other arguments"):
        schedule("nightly", cron="0 7 * * *", type="reports.nightly")
    assert schedules.declared() == [first]


def test_declarations_fill_the_defaults_from_the_settings():
    schedule("nightly", cron="0 6 * * *", type="reports.nightly")
    schedule(
        "sync",
        cron="*/5 * * * *",
        type="crm.sync",
        payload={"full": False},
        queue="crm",
        priority=80,
        max_attempts=5,
        timezone="Europe/Berlin",
        missed="all",
    )
    nightly, sync = declarations("America/New_York", 3)
    assert (nightly.timezone, nightly.queue, nightly.priority, nightly.max_attempts, nightly.payload) == (
        "America/New_York",
        "default",
        50,
        3,
        {},
    )
    assert (sync.timezone, sync.queue, sync.priority, sync.max_attempts, sync.missed) == (
        "Europe/Berlin",
        "crm",
        80,
        5,
        "all",
    )
