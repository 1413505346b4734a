"""dashboard.jobs: the values enqueue refuses or converts, each named, before anything is written.

A payload that contains itself, a value that is not JSON, a time at the edges of ``datetime``
or past what PostgreSQL reads back, a delay that ends there, an idempotency key with control
or bidi characters, a queue named only with dots: a ``ValueError`` (or ``TypeError``) naming the
argument, never a loop for ever or a database error. A ``uuid.UUID`` is stored as its text.
"""

from __future__ import annotations

import decimal
import uuid
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from flask import Flask

from dashboard import jobs

from .test_enqueue import counts


def cyclic_dict() -> dict[str, Any]:
    d: dict[str, Any] = {}
    d["a"] = d
    return d


def cyclic_list() -> dict[str, Any]:
    items: list[Any] = [1]
    items.append({"back": items})
    return {"items": items}


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("payload", "where"),
    [
        (cyclic_dict(), "payload at a contains itself"),
        (cyclic_list(), r"payload at items\[1\]\.back contains"),
    ],
)
def test_a_payload_that_contains_itself_is_a_value_error_naming_payload(
    app: Flask, libpq_url: str, payload: Any, where: str
) -> None:
    with app.app_context():
        with pytest.raises(ValueError, match=where):
            jobs.enqueue("demo.success", payload)
        with pytest.raises(ValueError, match=rf"jobs\[1\]: {where}"):
            jobs.enqueue_many([{"type": "demo.success"}, {"type": "demo.success", "payload": payload}])
    assert counts(libpq_url) == (0, 0)


def test_the_same_object_twice_is_no_cycle(app: Flask) -> None:
    shared = {"x": 1}
    with app.app_context():
        assert jobs.enqueue("demo.success", {"a": shared, "b": [shared, shared]}).created


def stored_payload(libpq_url: str, job_id: uuid.UUID) -> Any:
    with psycopg.connect(libpq_url) as conn:
        row = conn.execute("SELECT payload FROM jobs_job WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row[0]


def test_a_uuid_is_stored_as_its_text_and_the_caller_s_payload_is_left_alone(
    app: Flask, libpq_url: str
) -> None:
    parent, other = uuid.uuid4(), uuid.uuid4()
    payload = {"parent": parent, "ids": (parent, other), "deep": [{"id": other}], "n": 1}
    with app.app_context():
        job = jobs.enqueue("demo.success", payload)
        [many] = jobs.enqueue_many([{"type": "demo.success", "payload": {"parent": parent}}])
        top = jobs.enqueue("demo.success", [parent])
    assert stored_payload(libpq_url, job.id) == {
        "parent": str(parent),
        "ids": [str(parent), str(other)],
        "deep": [{"id": str(other)}],
        "n": 1,
    }
    assert stored_payload(libpq_url, many.id) == {"parent": str(parent)}
    assert stored_payload(libpq_url, top.id) == [str(parent)]
    assert payload["parent"] is parent and payload["ids"] == (parent, other)  # unchanged
    assert payload["deep"] == [{"id": other}]


@pytest.mark.parametrize(
    ("payload", "where", "kind"),
    [
        ({"order": {"when": datetime(2030, 1, 1, tzinfo=UTC)}}, "payload at order.when", "datetime"),
        ({"day": date(2030, 1, 1)}, "payload at day", "date"),
        ({"tags": {"a", "b"}}, "payload at tags", "set"),
        ({"price": decimal.Decimal("1.5")}, "payload at price", "Decimal"),
        ({"rows": [1, b"raw"]}, r"payload at rows\[1\]", "bytes"),
        ({"o": object()}, "payload at o", "object"),
        (datetime(2030, 1, 1, tzinfo=UTC), "payload", "datetime"),
    ],
)
def test_a_value_that_is_not_json_is_refused_with_its_place(
    app: Flask, libpq_url: str, payload: Any, where: str, kind: str
) -> None:
    with app.app_context():
        for error in (ValueError, TypeError):  # either except catches it
            with pytest.raises(error, match=rf"^{where} must be JSON .* got {kind}"):
                jobs.enqueue("demo.success", payload)
        with pytest.raises(jobs.PayloadNotJSON, match=rf"^jobs\[0\]: {where} must be JSON"):
            jobs.enqueue_many([{"type": "demo.success", "payload": payload}])
    assert counts(libpq_url) == (0, 0)


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"a": {"b": 10**5000}}, "payload at a.b holds an integer of more than 4,000 digits"),
        ({"a": [float("inf")]}, r"payload at a\[0\] holds NaN or Infinity"),
        ({"a": "x\ud800"}, "payload at a holds a lone surrogate"),
        ({"a": {"k\x00": 1}}, "payload at a has a key that holds a NUL"),
    ],
)
def test_other_unstorable_values_are_named_where_they_are(
    app: Flask, libpq_url: str, payload: Any, says: str
) -> None:
    with app.app_context(), pytest.raises(ValueError, match=says):
        jobs.enqueue("demo.success", payload)
    assert counts(libpq_url) == (0, 0)


MINUS_14, PLUS_14 = timezone(timedelta(hours=-14)), timezone(timedelta(hours=14))


@pytest.mark.parametrize(
    "run_at",
    [
        datetime.min.replace(tzinfo=UTC),
        datetime.max.replace(tzinfo=UTC),
        datetime.max.replace(
            tzinfo=MINUS_14
        ),  # the year 10000 in UTC: PostgreSQL stores it, psycopg cannot read it
        datetime.min.replace(tzinfo=PLUS_14),  # before the year 1 in UTC
        datetime(1899, 12, 31, 23, 59, tzinfo=UTC),
        datetime(9999, 1, 1, tzinfo=UTC),
    ],
)
def test_run_at_at_the_edges_of_datetime_is_a_value_error_naming_run_at(
    app: Flask, libpq_url: str, run_at: datetime
) -> None:
    with app.app_context():
        with pytest.raises(ValueError, match="run_at must be in the years 1900 to 9998"):
            jobs.enqueue("demo.success", run_at=run_at)
        with pytest.raises(ValueError, match=r"jobs\[0\]: run_at must be in the years"):
            jobs.enqueue_many([{"type": "demo.success", "run_at": run_at}])
    assert counts(libpq_url) == (0, 0)


def test_run_at_inside_the_years_is_kept_to_the_edges(app: Flask) -> None:
    first = datetime(1900, 1, 1, tzinfo=PLUS_14)
    last = datetime.max.replace(year=9998, tzinfo=MINUS_14)
    with app.app_context():
        assert jobs.enqueue("demo.success", run_at=first).available_at == first
        assert jobs.enqueue("demo.success", run_at=last).available_at == last


@pytest.mark.parametrize(
    "delay",
    [
        (
            datetime(9999, 6, 1, tzinfo=UTC) - datetime.now(UTC)
        ).total_seconds(),  # fits a datetime, not the years
        timedelta.max,
        1e300,
        10**30,
    ],
    ids=["past the years", "timedelta.max", "1e300", "10**30"],  # the first is computed: no id of its own
)
def test_a_delay_that_ends_past_the_years_is_a_value_error_naming_delay(
    app: Flask, libpq_url: str, delay: Any
) -> None:
    with app.app_context(), pytest.raises(ValueError, match="delay is too long"):
        jobs.enqueue("demo.success", delay=delay)
    assert counts(libpq_url) == (0, 0)


@pytest.mark.parametrize(
    "key",
    [
        "a\x00b",
        "tab\tkey",
        "a\x7fb",
        "a\x85b",
        "a\x9fb",
        "\u200eorder-1",
        "order\u200f",
        "\u202eorder",
        "a\u2066b\u2069",
    ],
)
def test_an_idempotency_key_with_control_or_bidi_characters_is_refused(
    app: Flask, libpq_url: str, key: str
) -> None:
    with app.app_context():
        with pytest.raises(ValueError, match=r"idempotency_key must not contain control or invisible .*U\+"):
            jobs.enqueue("demo.success", idempotency_key=key)
        with pytest.raises(ValueError, match=r"jobs\[0\]: idempotency_key must not contain"):
            jobs.enqueue_many([{"type": "demo.success", "idempotency_key": key}])
        with pytest.raises(ValueError, match="idempotency_key holds a lone surrogate"):
            jobs.enqueue("demo.success", idempotency_key="k\udc00")
        assert jobs.enqueue("demo.success", idempotency_key="ordre-été 7 ✓").created  # visible text is fine
    assert counts(libpq_url) == (1, 1)


@pytest.mark.parametrize("name", [".", "..", "..."])
def test_a_queue_named_only_with_dots_is_refused(app: Flask, libpq_url: str, name: str) -> None:
    with app.app_context():
        with pytest.raises(ValueError, match="queue must not be made only of dots"):
            jobs.enqueue("demo.success", queue=name)
        with pytest.raises(ValueError, match="queue must not be made only of dots"):
            jobs.handler("pyapi.dots", queue=name)
        assert (
            jobs.enqueue("demo.success", queue=".hidden.").queue == ".hidden."
        )  # dots among others are fine
    assert counts(libpq_url) == (1, 1)
