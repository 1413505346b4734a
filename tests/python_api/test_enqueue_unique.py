"""dashboard.jobs: unique_key, unique_for, unique_while and debounce on enqueue, enqueue_many
and as @handler defaults."""

from __future__ import annotations

from datetime import timedelta

import pytest
from flask import Flask

from dashboard import arguments, jobs
from dashboard.store.values import utcnow


@pytest.fixture
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard.runtime import handlers

    monkeypatch.setattr(handlers, "_registry", dict(handlers._registry))
    monkeypatch.setattr(handlers, "_defaults", dict(handlers._defaults))
    monkeypatch.setattr(arguments, "UNIQUE_DEFAULTS", dict(arguments.UNIQUE_DEFAULTS))
    monkeypatch.setattr(jobs, "UNIQUE_DEFAULTS", arguments.UNIQUE_DEFAULTS)


def test_enqueue_with_a_live_key_returns_the_job(app: Flask) -> None:
    with app.app_context():
        first = jobs.enqueue("demo.success", {"v": 1}, unique_key="mail:7", unique_for=timedelta(hours=1))
        again = jobs.enqueue("demo.success", {"v": 2}, unique_key="mail:7", unique_for=3600)
        other = jobs.enqueue("demo.success", unique_key="mail:8", unique_while="queued")
    assert first.created and not again.created and again.id == first.id
    assert first.unique_key == "mail:7" and other.created and other.id != first.id


def test_enqueue_many_dedupes_keys_in_one_call(app: Flask) -> None:
    with app.app_context():
        made = jobs.enqueue_many(
            [
                {"type": "demo.success", "unique_key": "k"},
                {"type": "demo.success", "unique_key": "k", "payload": {"x": 1}},
                {"type": "demo.success"},
            ]
        )
    assert [job.created for job in made] == [True, False, True]
    assert made[1].id == made[0].id


def test_debounce_keeps_one_job_that_starts_after_the_burst(app: Flask) -> None:
    with app.app_context():
        before = utcnow()
        burst = [
            jobs.enqueue("demo.success", {"n": n}, unique_key="reindex:42", debounce=30) for n in range(5)
        ]
    assert [job.created for job in burst] == [True, False, False, False, False]
    assert len({job.id for job in burst}) == 1
    assert burst[-1].available_at >= before + timedelta(seconds=30)
    assert burst[-1].available_at > burst[0].available_at


@pytest.mark.usefixtures("own_registry")
def test_handler_unique_defaults_apply_and_a_function_builds_the_key(app: Flask) -> None:
    @jobs.handler(
        "pyapi.reindex", unique_key=lambda p: f"reindex:{p['customer']}", debounce=timedelta(seconds=20)
    )
    def reindex(ctx: jobs.JobContext) -> None:
        return None

    with app.app_context():
        first = jobs.enqueue("pyapi.reindex", {"customer": 1, "v": 1})
        second = jobs.enqueue("pyapi.reindex", {"customer": 1, "v": 2})
        other = jobs.enqueue("pyapi.reindex", {"customer": 2})
        own_start = jobs.enqueue("pyapi.reindex", {"customer": 3}, delay=0)
    assert first.unique_key == "reindex:1" and first.created and not second.created
    assert second.id == first.id and other.id != first.id and other.unique_key == "reindex:2"
    assert own_start.available_at <= utcnow()  # its own start wins over the type's debounce


@pytest.mark.usefixtures("own_registry")
@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"unique_for": -1}, ValueError, "unique_for"),
        ({"unique_while": "done"}, ValueError, "unique_while"),
        ({"unique_key": 5}, TypeError, "unique_key"),
        ({"debounce": "soon"}, TypeError, "debounce"),
        ({"unique_while": "active", "debounce": 3}, ValueError, "debounce"),
    ],
)
def test_bad_handler_options_fail_at_declaration(options, error, named) -> None:
    with pytest.raises(error, match=named):
        jobs.handler("pyapi.bad", **options)


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"unique_key": ""}, ValueError, "unique_key"),
        ({"unique_key": "k" * 256}, ValueError, "unique_key"),
        ({"unique_key": 7}, TypeError, "unique_key"),
        ({"unique_key": "k", "unique_for": -5}, ValueError, "unique_for"),
        ({"unique_key": "k", "unique_for": "1h"}, TypeError, "unique_for"),
        ({"unique_key": "k", "unique_for": 0}, ValueError, "unique_for"),
        ({"unique_key": "k", "unique_while": "running"}, ValueError, "unique_while"),
        ({"unique_key": "k", "unique_while": 1}, TypeError, "unique_while"),
        ({"debounce": 5}, ValueError, "debounce"),
        ({"unique_key": "k", "debounce": -1}, ValueError, "debounce"),
        ({"unique_key": "k", "debounce": 5, "delay": 1}, ValueError, "debounce"),
    ],
)
def test_bad_options_name_the_argument_and_write_nothing(app: Flask, options, error, named) -> None:
    with app.app_context():
        with pytest.raises(error, match=named):
            jobs.enqueue("demo.success", **options)
        with pytest.raises(error, match=rf"jobs\[1\]: .*{named}"):
            jobs.enqueue_many([{"type": "demo.success"}, {"type": "demo.success", **options}])
        assert jobs.enqueue("demo.success", unique_key="k").created  # nothing held the key
