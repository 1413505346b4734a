"""The overview's failed card and its "All failed jobs" link count the same jobs."""

from __future__ import annotations

import re

from dashboard.store import lifecycle
from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue

WORKER = "host:1:thread-1:abcd"


def _fail() -> None:
    job = enqueue.create_job(enqueue.JobSpec("demo.fail", max_attempts=1)).job
    claimed = lifecycle.claim_next_job(WORKER, lease_seconds=30)
    assert claimed is not None and claimed.id == job.id
    lifecycle.fail_job(job.id, WORKER, 1, "boom", backoff_base_seconds=1, backoff_max_seconds=1)


def _cancel() -> None:
    job = enqueue.create_job(enqueue.JobSpec("demo.success")).job
    assert actions.run_one("cancel", job.id).changed == 1


def _list_count(client, href: str) -> int:
    html = client.get(href.replace("&amp;", "&")).get_data(as_text=True)
    match = re.search(r'<p class="summary">\s*([\d,]+) jobs?', html)
    assert match, href
    return int(match.group(1).replace(",", ""))


def test_the_failed_card_and_the_all_failed_link_say_and_list_the_same_jobs(app, client):
    for _ in range(2):
        _fail()
    for _ in range(3):
        _cancel()
    html = client.get("/").get_data(as_text=True)

    card = re.search(r'<a href="([^"]+)">\s*<span class="card-value" data-status="failed">(\d+)<', html)
    assert card and card.group(2) == "2"
    link = re.search(r'<p data-all-failed><a href="([^"]+)">All ([\d,]+) failed jobs</a>', html)
    assert link, "the link under the latest failures says its count"
    assert link.group(1) == card.group(1) == "/jobs/?status=failed&amp;cancelled=false"
    assert link.group(2) == card.group(2)
    assert _list_count(client, link.group(1)) == 2  # what the list then shows

    cancelled = re.search(r'<a href="([^"]+)">([\d,]+) cancelled</a>, stored as failed', html)
    assert cancelled and cancelled.group(2) == "3"
    assert _list_count(client, cancelled.group(1)) == 3
    assert _list_count(client, "/jobs/?status=failed") == 5  # both, as the old link listed
