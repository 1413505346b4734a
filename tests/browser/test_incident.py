"""The incident an operator opens the console for, with real ``flask worker`` processes: handlers
that hang past their lease, and a worker killed with SIGKILL. The Workers page, the overview and
a job's page must say so (at both sizes), not "all is well"."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import pytest

from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs

from .conftest import ARTIFACTS, Process, _env, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.process, pytest.mark.slow]
VIEWPORTS = [pytest.param((1440, 900), id="desktop"), pytest.param((390, 844), id="phone")]


def _worker(name: str, libpq_url: str, tmp_path: Any, **env: str) -> Process:
    settings = {**_env(libpq_url), "JOB_WORKER_HEARTBEAT_SECONDS": "0.3", **env}
    return Process(name, [sys.executable, "-m", "flask", "--app", "wsgi", "worker"], settings, tmp_path)


@pytest.mark.parametrize("size", VIEWPORTS)
def test_hung_handlers_and_a_killed_worker_are_told_plainly(
    app: Any, dashboard_server: str, browser_page: Any, libpq_url: str, tmp_path: Any, size
) -> None:
    from playwright.sync_api import expect

    page = browser_page
    page.set_viewport_size({"width": size[0], "height": size[1]})
    # Worker A: two threads, each stuck in a handler that sleeps a minute past a 3 s lease.
    hung = [enqueue.create_job(enqueue.JobSpec("demo.timeout", {"sleep_seconds": 60})).job for _ in range(2)]
    stuck = _worker("stuck-worker", libpq_url, tmp_path)
    # Worker B: runs a long job that renews its lease (20 s), then is killed.
    slow_env = {"JOB_WORKER_LEASE_SECONDS": "20", "JOB_WORKER_THREADS": "1"}
    killed = None
    try:
        wait_until(
            lambda: stuck.alive() and all(read_jobs.get_job(j.id).status == "running" for j in hung),
            30,
            "worker A to take both hanging jobs",
        )
        killed = _worker("killed-worker", libpq_url, tmp_path, **slow_env)
        slow = enqueue.create_job(enqueue.JobSpec("demo.slow", {"sleep_seconds": 240})).job
        wait_until(
            lambda: (
                killed.alive()
                and (read_jobs.get_job(slow.id).locked_by or "").split(":")[1:2] == [str(killed.proc.pid)]
            ),
            30,
            "worker B to take the long job",
        )
        ready = enqueue.create_job(enqueue.JobSpec("demo.success", {})).job  # nobody free to run it

        # The Workers page: busy 2/2, each thread named with its job, stuck past its lease.
        page.goto(dashboard_server + "/workers/")
        row = page.locator(f"tr[data-worker$=':{stuck.proc.pid}']")
        expect(row.locator("[data-field=busy]")).to_contain_text("2/2", timeout=20_000)
        expect(row.locator("[data-field=stuck]")).to_contain_text("2 stuck", timeout=20_000)
        threads = page.locator(f"tr[data-thread^='{row.get_attribute('data-worker')}:'][data-past-lease]")
        expect(threads).to_have_count(2)
        for job in hung:
            expect(page.locator(f"tr[data-past-lease] a[href='/jobs/{job.id}/']")).to_have_count(1)
        expect(row.locator("[data-field=last-seen]")).to_be_visible()  # on a phone too

        # The overview: the stuck threads, not "Running 1".
        page.goto(dashboard_server + "/")
        expect(page.locator("[data-stat=stuck_threads]")).to_have_text("2", timeout=20_000)
        expect(page.locator("[data-stuck]")).to_contain_text("2 threads stuck in handlers past their lease")

        # A ready job's page: its type's threads are busy, stuck ones counted and named as such.
        page.goto(f"{dashboard_server}/jobs/{ready.id}/")
        expect(page.locator("li[data-why=waiting] [data-field=stuck]")).to_contain_text(
            "2 of them stuck in a handler past its lease", timeout=20_000
        )

        # Kill worker B: its job's page says the owner stopped reporting, and when recovery comes.
        os.kill(killed.proc.pid, signal.SIGKILL)
        killed.proc.wait(10)
        page.goto(f"{dashboard_server}/jobs/{slow.id}/")
        owner = page.locator("[data-field=owner-state]")
        expect(owner).to_have_attribute("data-owner-state", "stale", timeout=20_000)
        expect(owner).to_contain_text("stopped sending heartbeats at")
        expect(owner).to_contain_text("Lease recovery will requeue it at about")
        recover_at = page.locator("[data-field=recover-at]").get_attribute("datetime")
        assert recover_at is not None and read_jobs.get_job(slow.id).status == "running"
        page.goto(dashboard_server + "/workers/")
        expect(page.locator(f"tr[data-worker$=':{killed.proc.pid}']")).to_have_attribute(
            "data-state", "stale", timeout=20_000
        )
        page.screenshot(path=str(ARTIFACTS / f"incident-workers-{size[0]}.png"), full_page=True)
        assert page.console_errors == []
    finally:
        if killed is not None:
            killed.stop()
        stuck.proc.send_signal(signal.SIGKILL)  # its handlers sleep a minute: no clean stop to wait for
        stuck.stop()
