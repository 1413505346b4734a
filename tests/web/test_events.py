"""The event feed: cursor pages, filters, the live "new events" notice."""

from __future__ import annotations

import re
import uuid

from dashboard.store import lifecycle
from dashboard.store.lifecycle import create as enqueue
from tests.support.forms import HX


def _ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-event-id="(\d+)">', html)]


def _jobs(n: int) -> list[uuid.UUID]:
    return [enqueue.create_job(enqueue.JobSpec("demo.success")).job.id for _ in range(n)]  # one event each


def test_feed_page_newest_first_with_cursor_links(app, client):
    _jobs(5)
    response = client.get("/events/?limit=2")
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and "<html" in html
    assert _ids(html) == [5, 4]
    assert 'rel="next" href="/events/?limit=2&amp;before=4"' in html
    assert 'rel="prev"' not in html
    older = client.get("/events/?limit=2&before=4").get_data(as_text=True)
    assert _ids(older) == [3, 2]
    assert 'rel="prev" href="/events/?limit=2&amp;after=3"' in older
    newer = client.get("/events/?limit=2&after=3").get_data(as_text=True)
    assert _ids(newer) == [5, 4]
    last = client.get("/events/?limit=2&before=2").get_data(as_text=True)
    assert _ids(last) == [1] and 'rel="next"' not in last


def test_feed_walk_is_stable_while_events_arrive(app, client):
    _jobs(4)
    first = client.get("/events/?limit=2").get_data(as_text=True)
    _jobs(3)  # new events must not shift the next page
    second = client.get("/events/?limit=2&before=3").get_data(as_text=True)
    assert _ids(first) + _ids(second) == [4, 3, 2, 1]


def test_feed_filters_by_type_and_job(app, client):
    _, b = _jobs(2)
    claimed = lifecycle.claim_next_job("w:1:thread-1:cccc", lease_seconds=30)
    assert claimed is not None
    html = client.get("/events/?type=claimed").get_data(as_text=True)
    assert _ids(html) == [3]
    assert '<input type="checkbox" name="type" value="claimed" checked>' in html
    # several types at once, and the toggle that hides progress and renewals
    both = client.get("/events/?type=claimed&type=created").get_data(as_text=True)
    assert _ids(both) == [3, 2, 1]
    assert "type=claimed&amp;type=created" in both  # the live notice keeps both
    lifecycle.record_progress(claimed.id, claimed.locked_by, 1, message="half")
    # by default the feed leaves a running job's chatter out; chatter=1 (or ticking it) shows it
    assert _ids(client.get("/events/").get_data(as_text=True)) == [3, 2, 1]
    assert _ids(client.get("/events/?quiet=1").get_data(as_text=True)) == [3, 2, 1]
    assert _ids(client.get("/events/?chatter=1").get_data(as_text=True)) == [4, 3, 2, 1]
    assert _ids(client.get("/events/?type=progress").get_data(as_text=True)) == [4]
    only_b = client.get(f"/events/?job_id={b}").get_data(as_text=True)
    assert set(re.findall(r'href="/jobs/([0-9a-f-]{36})/"', only_b)) == {str(b)}
    assert f'value="{b}"' in only_b


def test_feed_fragment(app, client):
    _jobs(1)
    html = client.get("/events/", headers=HX).get_data(as_text=True)
    assert "<html" not in html and html.lstrip().startswith('<div id="event-feed"')
    assert _ids(html) == [1]


def test_bad_feed_parameters_show_inline_errors(app, client):
    _jobs(1)
    for query, param in [
        ("type=bogus", "type"),
        ("job_id=not-a-uuid", "job_id"),
        ("before=x", "before"),
        ("before=0", "before"),
        ("after=-5", "after"),
        ("before=3&after=1", "after"),
        ("before=99999999999999999999", "before"),
        ("limit=-1", "limit"),
    ]:
        response = client.get(f"/events/?{query}")
        html = response.get_data(as_text=True)
        assert response.status_code == 400, query  # a browser's; htmx gets 200 (it swaps only 2xx)
        assert client.get(f"/events/?{query}", headers={"HX-Request": "true"}).status_code == 200
        assert f'data-param="{param}"' in html, query
        assert _ids(html) == [], query


def test_new_events_notice_counts_events_newer_than_the_page(app, client):
    _jobs(2)
    html = client.get("/events/").get_data(as_text=True)
    poll = re.search(r'hx-get="(/events/newer/\?[^"]*)" hx-trigger="every 3s, poll-now"', html)
    assert poll, "the top of the feed carries a polled notice"
    url = poll.group(1).replace("&amp;", "&")
    assert "after=2" in url
    assert "new event" not in client.get(url, headers=HX).get_data(as_text=True)
    _jobs(3)
    notice = client.get(url, headers=HX).get_data(as_text=True)
    assert "3 new events: show the newest" in notice
    assert 'hx-trigger="every 3s, poll-now"' in notice  # keeps polling from the same id


def test_new_events_notice_keeps_the_filters_and_caps_its_count(app, client):
    _jobs(1)
    assert "new event" not in client.get("/events/newer/?after=1&type=claimed").get_data(as_text=True)
    _jobs(2)
    assert "new event" not in client.get("/events/newer/?after=1&type=claimed").get_data(as_text=True)
    assert "2 new events" in client.get("/events/newer/?after=1&type=created").get_data(as_text=True)
    _jobs(120)
    assert "100+ new events" in client.get("/events/newer/?after=0").get_data(as_text=True)


def test_older_pages_have_no_live_notice(app, client):
    _jobs(3)
    html = client.get("/events/?limit=1&before=3").get_data(as_text=True)
    assert "/events/newer/" not in html


def test_event_data_is_escaped(app, client):
    enqueue.create_job(enqueue.JobSpec("<img src=x onerror=alert(1)>"))
    html = client.get("/events/").get_data(as_text=True)
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
