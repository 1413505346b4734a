"""Canary: data committed by one test is gone in the next (``empty_tables_before_each_test``)."""

from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists as find_jobs


def test_isolation_first_writes(app):
    enqueue.create_job(enqueue.JobSpec("demo.success", idempotency_key="isolation-canary"))
    assert find_jobs.list_jobs(limit=10, offset=0).count == 1


def test_isolation_second_sees_nothing(app):
    assert find_jobs.list_jobs(limit=10, offset=0).count == 0
    assert read_jobs.list_events(limit=10).results == []
