"""The workflow pages in Chromium at both sizes, light and dark: the list, a drawn graph, the
summary of a large workflow, a dry run and a waiting job's page fit the screen (the graph
scrolls in its own frame) and axe finds nothing; the graph follows the jobs live and stops
polling once all ended; an operator cancels a workflow after its dry run on a phone."""

from __future__ import annotations

from typing import Any

import pytest

from dashboard.store import lifecycle
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from dashboard.store.records import JobRecord

from .conftest import ARTIFACTS
from .test_pages import _check, every_view

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _claim(expected: JobRecord) -> None:
    claimed = lifecycle.claim_jobs("seed-worker", lease_seconds=3600)
    assert [job.id for job in claimed] == [expected.id]


def seed_workflow() -> list[JobRecord]:
    """nightly-etl: fetch succeeded; three transforms (running, failed for good, ready); load
    cancelled by the failure; a report waiting on two; a cleanup released under ``run``."""
    specs = [
        JobSpec("etl.fetch", workflow="nightly-etl", priority=100),
        JobSpec("etl.transform.orders_and_their_lines", depends_on=(0,), priority=90),
        JobSpec("etl.transform.customers", depends_on=(0,), priority=80, max_attempts=1),
        JobSpec("etl.transform.products", depends_on=(0,), priority=70),
        JobSpec("etl.load", depends_on=(1, 2, 3)),
        JobSpec("etl.report", depends_on=(1, 3), on_parent_failure="run"),
        JobSpec("etl.cleanup", depends_on=(4,), on_parent_failure="run"),
    ]
    jobs = [result.job for result in enqueue.create_jobs(specs)]
    _claim(jobs[0])
    assert lifecycle.complete_job(jobs[0].id, "seed-worker", 1, {"rows": 12})
    _claim(jobs[1])  # stays running
    _claim(jobs[2])
    failed = lifecycle.fail_job(
        jobs[2].id, "seed-worker", 1, "ValueError: bad row", backoff_base_seconds=1, backoff_max_seconds=1
    )
    assert failed is not None and failed.status == "failed"
    return jobs


def seed_fan_out(children: int = 200) -> None:
    specs = [JobSpec("mail.batch", workflow="newsletter")]
    specs += [JobSpec("mail.send", depends_on=(0,)) for _ in range(children)]
    enqueue.create_jobs(specs)


def test_the_workflow_pages_fit_and_pass_axe_light_and_dark(
    app: Any, dashboard_server: str, chromium: str
) -> None:
    jobs = seed_workflow()
    seed_fan_out()
    pages = {
        "workflows": "/workflows/",
        "workflow-graph": "/workflows/nightly-etl/",
        "workflow-summary": "/workflows/newsletter/",
        "workflow-cancel-dry-run": "/workflows/nightly-etl/?action=cancel",
        "workflow-retry-dry-run": "/workflows/nightly-etl/?action=retry",
        "job-waiting": f"/jobs/{jobs[5].id}/",
        "job-cancelled-by-parent": f"/jobs/{jobs[4].id}/",
        "new-job": "/jobs/new/",
    }
    problems: list[str] = []
    for size, scheme, page in every_view(chromium, timeout_ms=20_000):
        for name, path in pages.items():
            response = page.goto(dashboard_server + path)
            assert response is not None and response.status == 200, (name, response)
            _check(page, f"{name}-{size}-{scheme}", problems)
        page.goto(dashboard_server + "/workflows/nightly-etl/")
        page.screenshot(path=str(ARTIFACTS / f"workflow-{size}-{scheme}.png"), full_page=True)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(
    "size", [pytest.param((1440, 900), id="desktop"), pytest.param((390, 844), id="phone")]
)
def test_the_graph_follows_the_jobs_live_and_an_operator_cancels_the_rest(
    app: Any, dashboard_server: str, browser_page: Any, size: tuple[int, int]
) -> None:
    from playwright.sync_api import expect

    jobs = seed_workflow()
    page = browser_page
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.goto(dashboard_server + "/workflows/")
    page.get_by_role("link", name="nightly-etl").click()
    graph = page.locator("svg.wf-graph")
    expect(graph.locator(f'[data-job="{jobs[1].id}"]')).to_have_attribute("data-state", "running")
    expect(graph.locator(f'[data-job="{jobs[4].id}"]')).to_have_attribute("data-state", "cancelled")
    expect(graph.locator(f'[data-job="{jobs[5].id}"]')).to_have_attribute("data-state", "waiting")
    assert lifecycle.complete_job(jobs[1].id, "seed-worker", 1, {"rows": 3})  # the poll shows it
    expect(graph.locator(f'[data-job="{jobs[1].id}"]')).to_have_attribute("data-state", "succeeded")
    page.locator("[data-action=cancel]").click()
    expect(page.locator("[data-dry-run-count]")).to_have_attribute("data-dry-run-count", "3")
    page.locator("[data-confirm-workflow=cancel]").click()
    expect(page.locator(".notice-success")).to_contain_text("Cancelled 3 jobs of the workflow.")
    expect(page.locator("#workflow")).to_have_attribute("data-live", "false")  # every job ended
    expect(graph.locator(f'[data-job="{jobs[5].id}"]')).to_have_attribute("data-state", "cancelled")
    graph.locator(f'[data-job="{jobs[5].id}"]').click()
    expect(page).to_have_url(f"{dashboard_server}/jobs/{jobs[5].id}/")
    assert page.console_errors == []
