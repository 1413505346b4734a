"""Canary: data committed by one test is gone in the next (``clean_tables``)."""

from dashboard.store import read, service


def test_isolation_first_writes(app):
    service.create_job("demo.success", idempotency_key="isolation-canary")
    assert read.list_jobs(limit=10, offset=0).count == 1


def test_isolation_second_sees_nothing(app):
    assert read.list_jobs(limit=10, offset=0).count == 0
    assert read.list_events(limit=10).results == []
