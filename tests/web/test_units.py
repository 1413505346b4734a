"""Pure pieces of the dashboard: time wording, the chart layout, query parsing, payload parsing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from dashboard.store.reads.overview import MinuteFigures, hour_window
from dashboard.web import timefmt
from dashboard.web.chart import HEIGHT, MINUTES, build_chart
from dashboard.web.forms import parse_available_at, parse_payload
from dashboard.web.params import event_filters, job_filters
from dashboard.web.rendering import safe_next

NOW = datetime(2026, 6, 1, 12, 0, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(0), "just now"),
        (timedelta(seconds=42), "42 s ago"),
        (timedelta(minutes=3, seconds=10), "3 min ago"),
        (timedelta(hours=5, minutes=2), "5 h 2 min ago"),
        (timedelta(days=2, hours=4), "2 d 4 h ago"),
        (timedelta(seconds=-20), "in 20 s"),
    ],
)
def test_relative_times(delta, text):
    assert timefmt.relative(NOW - delta, NOW) == text


def test_absolute_time_is_in_the_configured_zone():
    assert timefmt.absolute(NOW, ZoneInfo("Asia/Tehran")) == "2026-06-01 15:30:30 +0330"
    assert timefmt.absolute(NOW, UTC) == "2026-06-01 12:00:30 UTC"


def test_chart_window_and_stacked_bars():
    start, until = hour_window(NOW)
    assert until - start == timedelta(minutes=MINUTES)
    assert start <= NOW < until
    counts = [
        MinuteFigures(start, succeeded=3, failed=1, wait_p50_ms=None, wait_p95_ms=None),
        MinuteFigures(start + timedelta(minutes=59), succeeded=1, failed=0, wait_p50_ms=5, wait_p95_ms=9),
        MinuteFigures(
            start - timedelta(minutes=1), succeeded=99, failed=99, wait_p50_ms=1, wait_p95_ms=1
        ),  # outside
    ]
    chart = build_chart(counts, start)
    assert len(chart.bars) == MINUTES
    assert (chart.peak, chart.succeeded, chart.failed) == (4, 4, 1)
    first = chart.bars[0]
    assert first.succeeded_height == HEIGHT * 3 / 4 and first.failed_height == HEIGHT / 4
    assert first.failed_y + first.failed_height == first.succeeded_y  # failed stacked on top
    assert chart.bars[1].succeeded == chart.bars[1].failed == 0
    assert build_chart([], start).peak == 1  # an empty hour still draws an axis


def test_query_filters_collect_errors_instead_of_raising():
    assert job_filters({"status": "failed", "limit": "500"}).limit == 100
    assert job_filters({"status": "nope"}).errors.keys() == {"status"}
    assert job_filters({"offset": "1.5"}).errors.keys() == {"offset"}
    feed = event_filters({"type": "failed", "before": "10", "limit": "1000"})
    assert (feed.types, feed.before, feed.limit, feed.errors) == (("failed",), 10, 200, {})
    from werkzeug.datastructures import MultiDict

    several = event_filters(MultiDict([("type", "failed"), ("type", "claimed"), ("quiet", "1")]))
    assert (several.types, several.exclude) == (("failed", "claimed"), ())  # ticked types: as asked
    assert several.query() == {"type": ["failed", "claimed"]}
    bare = event_filters(MultiDict())
    assert bare.exclude == ("progress", "lease_renewed") and not bare.filtered  # the default
    chatty = event_filters(MultiDict([("chatter", "1")]))
    assert chatty.exclude == () and chatty.query() == {"chatter": 1}
    assert event_filters(MultiDict([("type", "failed"), ("type", "nope")])).errors.keys() == {"type"}
    assert event_filters({"job_id": "x", "after": "-1"}).errors.keys() == {"job_id", "after"}
    assert job_filters({"status": "queued", "type": "a", "offset": "0"}).query(offset=25) == {
        "status": "queued",
        "type": "a",
        "offset": 25,
    }


def test_payload_parsing():
    assert parse_payload('{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
    for bad in ["", "{", "[]", '"x"', '{"a": Infinity}', '{"a": 1e400}', '{"\\u0000": 1}']:
        with pytest.raises(ValueError):
            parse_payload(bad)


def test_available_at_parsing():
    tz = ZoneInfo("Asia/Tehran")
    assert parse_available_at("2026-06-01T15:30", tz) == NOW.replace(second=0)
    assert parse_available_at("2026-06-01T12:00:30Z", tz) == NOW
    with pytest.raises(ValueError):
        parse_available_at("June 1st", tz)


def test_safe_next_only_allows_local_paths():
    assert safe_next("/jobs/?status=failed") == "/jobs/?status=failed"
    for bad in [None, "", "jobs/", "//evil.example", "https://evil.example/", "/\\evil.example"]:
        assert safe_next(bad) is None
