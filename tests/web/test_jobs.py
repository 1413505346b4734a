"""The job list and the job detail page, full and as htmx fragments."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

from dashboard.config.rules import JOB_OFFSET_MAX
from dashboard.store import lifecycle
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.values import utcnow
from tests.support.factories import make_job
from tests.support.forms import HX


def _rows(html: str) -> list[str]:
    return re.findall(r'<td[^>]*><a class="mono" href="/jobs/([0-9a-f-]{36})/"', html)


def test_job_list_page_newest_first(app, client):
    old = make_job("queued", created_at=utcnow() - timedelta(minutes=5))
    new = make_job("succeeded")
    response = client.get("/jobs/")
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and "<html" in html
    assert _rows(html) == [str(new.id), str(old.id)]
    assert "2 jobs" in html


def test_job_list_fragment_polls_with_its_filters(app, client):
    make_job("failed", type="mail.send")
    html = client.get("/jobs/?status=failed&type=mail", headers=HX).get_data(as_text=True)
    assert "<html" not in html and html.lstrip().startswith('<div id="job-list"')
    assert 'hx-get="/jobs/?status=failed&amp;type=mail&amp;top=' in html  # the page holds its rows
    assert len(_rows(html)) == 1


def test_status_and_type_filters(app, client):
    queued = make_job("queued", type="mail.send")
    make_job("failed", type="mail.send")
    make_job("queued", type="demo.success")
    html = client.get("/jobs/?status=queued&type=MAIL").get_data(as_text=True)
    assert _rows(html) == [str(queued.id)]
    # the filter form keeps the values
    assert '<option value="queued" selected>' in html
    assert 'name="type" value="MAIL"' in html


def _link(html: str, rel: str) -> str:
    found = re.search(rf'rel="{rel}" href="([^"]+)"', html)
    assert found, rel
    return found.group(1).replace("&amp;", "&")


def test_keyset_pagination_keeps_filters_and_offsets_are_capped(app, client):
    base = utcnow()
    ids = [make_job("queued", created_at=base - timedelta(seconds=i)).id for i in range(5)]
    make_job("failed")
    html = client.get("/jobs/?status=queued&limit=2").get_data(as_text=True)
    assert _rows(html) == [str(i) for i in ids[:2]]
    assert 'rel="prev"' not in html
    older = _link(html, "next")  # a (created_at, id) position, not an offset
    assert "before=" in older and "offset" not in older and "status=queued" in older
    page2 = client.get(older).get_data(as_text=True)
    assert _rows(page2) == [str(i) for i in ids[2:4]]
    page3 = client.get(_link(page2, "next")).get_data(as_text=True)
    assert _rows(page3) == [str(ids[4])]
    assert 'rel="next"' not in page3
    back = client.get(_link(page3, "prev")).get_data(as_text=True)
    assert _rows(back) == [str(i) for i in ids[2:4]]
    top = client.get(_link(back, "prev")).get_data(as_text=True)
    assert _rows(top) == [str(i) for i in ids[:2]]
    # an offset still works up to the cap; past it, a message (never a deep scan, never a 500)
    assert _rows(client.get("/jobs/?status=queued&limit=2&offset=4").get_data(as_text=True)) == [str(ids[4])]
    deep = client.get(f"/jobs/?offset={JOB_OFFSET_MAX + 1}")
    assert deep.status_code == 400 and 'data-param="offset"' in deep.get_data(as_text=True)
    for bad in ("x", "2024-01-01T00:00:00_abc", "2024-01-01T00:00:00_" + str(ids[0])):
        answer = client.get(f"/jobs/?before={bad}")
        assert answer.status_code == 400 and 'data-param="before"' in answer.get_data(as_text=True)


def test_a_search_pages_by_keyset_and_next_to_run_by_offset(app, client):
    """Search and claim order with keyset paging: a search keeps its q in the keyset
    links; claim order has no (created_at, id) position, so it pages by offset."""
    base = utcnow()
    ids = [make_job("queued", created_at=base - timedelta(seconds=i), payload={"k": 1}).id for i in range(3)]
    make_job("queued", payload={"k": 2})
    html = client.get("/jobs/?q=k%3D1&limit=2").get_data(as_text=True)
    assert _rows(html) == [str(i) for i in ids[:2]]
    older = _link(html, "next")
    assert "before=" in older and "q=k" in older
    page2 = client.get(older).get_data(as_text=True)
    assert _rows(page2) == [str(ids[2])] and 'rel="next"' not in page2
    assert _rows(client.get(_link(page2, "prev")).get_data(as_text=True)) == [str(i) for i in ids[:2]]
    claim_order = client.get("/jobs/?order=next&limit=2").get_data(as_text=True)
    later = _link(claim_order, "next")
    assert "offset=2" in later and "before=" not in later
    ignored = client.get(
        "/jobs/", query_string={"order": "next", "limit": 2, "before": f"{base.isoformat()}_{ids[0]}"}
    )
    assert _rows(ignored.get_data(as_text=True)) == _rows(claim_order)


def test_limit_above_maximum_is_clamped(app, client):
    for _ in range(3):
        make_job("queued")
    html = client.get("/jobs/?limit=100000").get_data(as_text=True)
    assert len(_rows(html)) == 3


def test_bad_list_parameters_show_inline_errors_not_500(app, client):
    make_job("queued")
    for query, param in [
        ("status=bogus", "status"),
        ("limit=abc", "limit"),
        ("limit=0", "limit"),
        ("offset=-1", "offset"),
        ("offset=99999999999999999999999", "offset"),
        ("type=" + "x" * 121, "type"),
        ("type=%00", "type"),
    ]:
        response = client.get(f"/jobs/?{query}")
        html = response.get_data(as_text=True)
        assert response.status_code == 400, query
        assert f'data-param="{param}"' in html, query
        assert _rows(html) == [], query
        assert client.get(f"/jobs/?{query}", headers={"HX-Request": "true"}).status_code == 200


def test_a_long_error_without_spaces_is_cut_at_160_characters_in_the_failed_list(app, client):
    make_job("failed", last_error="DemoError:\n" + "x" * 300, finished_at=utcnow())
    html = client.get("/jobs/?status=failed").get_data(as_text=True)
    cell = re.search(r'data-field="error">([^<]*)<', html).group(1)
    assert cell.startswith("DemoError:\nxxx") and cell.endswith("...") and len(cell) == 160


def test_an_offset_past_the_limit_says_how_to_go_deeper_in_each_order(app, client):
    newest = client.get("/jobs/?offset=1000000").get_data(as_text=True)
    assert "Deeper pages: follow the Older link." in newest
    following = client.get("/jobs/?order=next&offset=1000000").get_data(as_text=True)
    assert "filter by type to see others" in following and "Older link" not in following


def test_a_refused_filter_field_is_marked_and_points_at_its_message(app, client):
    for query, field in [("status=bogus", "status"), ("type=%00", "type"), ("order=sideways", "order")]:
        html = client.get(f"/jobs/?{query}").get_data(as_text=True)
        marked = f'aria-invalid="true" aria-describedby="filter-error-{field}"'
        assert f'id="{field}" name="{field}" {marked}' in html
        assert f'<p class="error" id="filter-error-{field}" data-param="{field}">' in html
    html = client.get("/jobs/?status=failed").get_data(as_text=True)
    assert "aria-invalid" not in html


def test_times_are_relative_with_the_absolute_time_in_time_zone(app, client):
    make_job("queued", created_at=utcnow() - timedelta(minutes=3, seconds=10))
    html = client.get("/jobs/").get_data(as_text=True)
    assert re.search(
        r'<time datetime="[^"]+" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC">3 min ago</time>', html
    )


def test_job_type_is_escaped_in_the_list(app, client):
    make_job("queued", type="<b>bold</b>")
    html = client.get("/jobs/").get_data(as_text=True)
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html


# --- detail ---------------------------------------------------------------------------------


def test_detail_shows_fields_payload_result_and_timeline(app, client):
    job = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 1}, idempotency_key="k-1")).job
    claimed = lifecycle.claim_next_job("w:1:thread-1:aaaa", lease_seconds=30)
    assert claimed is not None
    lifecycle.complete_job(job.id, "w:1:thread-1:aaaa", 1, {"answer": 42})
    response = client.get(f"/jobs/{job.id}/")
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and "<html" in html
    assert str(job.id) in html and "k-1" in html
    assert "{\n  &#34;sleep_seconds&#34;: 1\n}" in html
    assert "{\n  &#34;answer&#34;: 42\n}" in html
    assert re.findall(r'data-event-type="(\w+)"', html) == ["created", "claimed", "succeeded"]
    # a finished job does not poll
    assert "hx-trigger" not in html[html.index('id="job-detail"') :]


def test_detail_of_a_running_job_shows_owner_lease_and_progress_and_polls(app, client):
    job = enqueue.create_job(enqueue.JobSpec("demo.slow")).job
    claimed = lifecycle.claim_next_job("w:1:thread-2:bbbb", lease_seconds=30)
    assert claimed is not None
    lifecycle.record_progress(job.id, "w:1:thread-2:bbbb", 1, message="halfway", data={"percent": 40})
    lifecycle.record_progress(job.id, "w:1:thread-2:bbbb", 1, data={"percent": 65.4})
    html = client.get(f"/jobs/{job.id}/", headers=HX).get_data(as_text=True)
    assert "<html" not in html
    assert html.lstrip().startswith('<article id="job-detail"')
    claimed_id = next(e.id for e in read_jobs.job_events(job.id) if e.type == "claimed")
    live = f"/jobs/{job.id}/live/?after={claimed_id}&amp;status=running"
    assert f'hx-get="{live}" hx-trigger="every 2s, poll-now"' in html
    assert re.search(r'data-field="owner">w:1:thread-2:bbbb<', html)
    lease = int(re.search(r"Lease expires in <strong>(\d+) s</strong>", html).group(1))
    assert 0 < lease <= 30
    assert '<progress max="100" value="65.4">' in html
    assert "+ 2 progress, latest 65 % so far" in html  # folded, not one line each


def test_an_expired_lease_says_so(app, client):
    job = make_job("running", locked_until=utcnow() - timedelta(seconds=90))
    html = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert "Lease expired 1 min ago" in html


def test_a_queued_job_polls_and_a_failed_one_offers_retry(app, client):
    queued = make_job("queued")
    failed = make_job("failed", last_error="Traceback: <boom>")
    assert 'hx-trigger="every 2s' in client.get(f"/jobs/{queued.id}/").get_data(as_text=True)
    html = client.get(f"/jobs/{failed.id}/").get_data(as_text=True)
    assert 'hx-trigger="every 2s' not in html
    assert f'action="/jobs/{failed.id}/retry/"' in html
    assert "Traceback: &lt;boom&gt;" in html


def test_payload_with_script_is_shown_as_text(app, client):
    job = enqueue.create_job(enqueue.JobSpec("demo.success", {"html": "<script>alert(1)</script>"})).job
    html = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_unknown_and_malformed_job_ids_are_404_pages(app, client):
    for path in [f"/jobs/{uuid.uuid4()}/", "/jobs/not-a-uuid/", "/jobs/%3Cscript%3E/"]:
        response = client.get(path)
        html = response.get_data(as_text=True)
        assert response.status_code == 404, path
        assert "No job has that id." in html and "<html" in html
        assert "<script>" not in html
    fragment = client.get("/jobs/nope/", headers=HX)
    assert fragment.status_code == 404 and "<html" not in fragment.get_data(as_text=True)
