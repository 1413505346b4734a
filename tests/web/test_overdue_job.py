"""A running job whose lease expired while its attempt still runs: its page says so."""

from __future__ import annotations

import re
from datetime import timedelta

from dashboard.store import workers
from dashboard.store.values import utcnow
from tests.support.factories import make_job
from tests.support.forms import HX


def _beat(pid: int, activity: dict) -> None:
    now = utcnow()
    me = workers.Identity(f"h:{pid}:x", "h", pid, now, "one-job", 2, "1", 5.0, ("demo.success",))
    workers.beat(me, jobs_done=0, now=now, activity=activity)


def _notice(html: str) -> str:
    match = re.search(
        r'<div class="notice notice-warning" data-field="lease" data-overdue="\d+">(.*?)</div>', html, re.S
    )
    assert match, "the overdue notice"
    return " ".join(match.group(1).split())


def test_a_hung_attempt_says_it_runs_past_its_lease_and_when_recovery_takes_it(app, client):
    expired = utcnow() - timedelta(seconds=130)
    job = make_job("running", locked_by="h:8:thread-1:ab", locked_until=expired)
    since = expired - timedelta(seconds=30)
    thread = {"thread": "thread-1", "job_id": str(job.id), "type": job.type, "attempt": 1,
              "since": since.isoformat(), "lease_until": expired.isoformat()}  # fmt: skip
    _beat(8, {"threads": [thread], "cleanup_interval_seconds": 5})

    html = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    notice = _notice(html)
    assert "Its attempt is still running 2 min past its lease." in notice
    assert "Lease expired 2 min ago" in notice
    assert "its worker process is alive, so the handler may be hung" in notice
    assert "Lease recovery will requeue it at about" in notice and 'data-field="recover-at"' in notice
    assert 'data-owner-state="stuck"' in html  # and which thread holds it
    assert html.count('data-field="recover-at"') == 1  # said once

    live = client.get(f"/jobs/{job.id}/live/?status=running", headers=HX).get_data(as_text=True)
    assert "Its attempt is still running 2 min past its lease." in _notice(live)  # the poll says it too


def test_an_overdue_attempt_of_its_last_try_with_no_heartbeat_says_it_will_fail(app, client):
    job = make_job("running", attempts=3, max_attempts=3, locked_by="gone:9:thread-1:ab",
                   locked_until=utcnow() - timedelta(seconds=20))  # fmt: skip
    notice = _notice(client.get(f"/jobs/{job.id}/").get_data(as_text=True))
    assert re.search(r"Its attempt is still running (19|20) s past its lease\.", notice)
    assert "the handler may be hung, or its worker gone" in notice
    assert "fail it (this is its last attempt)" in notice


def test_a_running_job_within_its_lease_has_no_overdue_notice(app, client):
    job = make_job("running", locked_until=utcnow() + timedelta(seconds=20))
    html = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert "data-overdue" not in html and "past its lease" not in html
    assert re.search(r"Lease expires in <strong>\d+ s</strong>", html)
