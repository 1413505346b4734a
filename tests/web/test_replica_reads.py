"""The pages' lists, counts and feeds read a real streaming replica while it keeps up.

A primary and an asynchronous streaming standby of it run on this machine
(``bench/replication.py``); the app's ``DATABASE_REPLICA_URL`` is the standby. Replay is paused
on the standby (``pg_wal_replay_pause()``) to make it fall behind on purpose: a job created on
the primary then is missing from what the replica serves, which proves where a page read.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.replication import Pair
from dashboard import create_app, upgrade_database
from dashboard.extensions import db
from dashboard.ops.replica import close as close_replica
from dashboard.ops.replica import replica_of
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.replica import Replica
from tests.support.forms import csrf_token
from tests.support.open_access import OPEN_ACCESS
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow]

DATABASE = "replica_reads"


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    built = Pair.build(synchronous=False)
    try:
        built.create_database(DATABASE)
        yield built
    finally:
        built.close()


@pytest.fixture(scope="module")
def replica_app(pair: Pair) -> Iterator[Flask]:
    app = create_app(
        {
            "TESTING": True,
            "DEBUG": "false",
            "ENABLE_DEBUG_TOOLBAR": "false",
            **OPEN_ACCESS,
            "DATABASE_URL": pair.primary.url(DATABASE),
            "DATABASE_REPLICA_URL": pair.standby.url(DATABASE),
            "AUTO_MIGRATE": "false",
        }
    )
    upgrade_database(app)
    yield app
    close_replica(app)
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def replica(replica_app: Flask, pair: Pair) -> Iterator[Replica]:
    """The app's replica, replaying and caught up, its lag measured afresh at the next read;
    replay resumed and the standby running again after the test."""
    if not pair.standby.running():
        pair.standby.start()
    pair.standby.execute("SELECT pg_wal_replay_resume()")
    pair.wait_replayed()
    found = replica_of(replica_app)
    assert found is not None
    found.max_lag_seconds = 30.0
    found.forget()
    yield found
    if not pair.standby.running():
        pair.standby.start()
    pair.standby.execute("SELECT pg_wal_replay_resume()")


def create(app: Flask, name: str) -> uuid.UUID:
    with app.app_context():
        return enqueue.create_job(enqueue.JobSpec("demo.success", {"name": name})).job.id


def paused_with_a_new_job(pair: Pair, app: Flask, replica: Replica) -> tuple[uuid.UUID, uuid.UUID]:
    """A job the replica has, replay paused, then a job only the primary has."""
    seen = create(app, "on-both")
    pair.wait_replayed()
    pair.standby.execute("SELECT pg_wal_replay_pause()")
    wait_until(
        lambda: pair.standby.execute("SELECT pg_get_wal_replay_pause_state()")[0][0] == "paused",
        10,
        "replay paused",
    )
    unseen = create(app, "primary-only")
    replica.forget()
    return seen, unseen


def source_of(html: str) -> dict[str, str]:
    match = re.search(r'<p class="[^"]*read-source"([^>]*)>', html)
    assert match, "the page says nothing of where it read"
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', match.group(1)))


def page(client: FlaskClient, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    return response.get_data(as_text=True)


def test_the_lists_read_the_replica_and_say_how_far_behind_it_is(pair, replica_app, replica):
    seen, unseen = paused_with_a_new_job(pair, replica_app, replica)
    client = replica_app.test_client()

    listed = page(client, "/jobs/")
    assert str(seen) in listed and str(unseen) not in listed  # the replica's view: replay is paused
    where = source_of(listed)
    assert where["read-source"] == "replica"
    assert 0.0 <= float(where["lag"]) <= 30.0
    assert "Read from the replica" in listed

    for path in ("/", "/events/"):
        assert source_of(page(client, path))["read-source"] == "replica"

    # a job's own page reads the primary: the job the replica lacks is there
    assert client.get(f"/jobs/{unseen}/").status_code == 200

    api = client.get("/api/jobs/")
    assert api.headers["X-Read-From"] == "replica"
    assert float(api.headers["X-Replica-Lag-Seconds"]) >= 0.0
    ids = {job["id"] for job in api.get_json()["results"]}
    assert str(seen) in ids and str(unseen) not in ids
    assert client.get(f"/api/jobs/{unseen}/").status_code == 200  # one job: the primary
    assert "X-Read-From" not in client.get(f"/api/jobs/{unseen}/").headers
    assert client.get("/api/jobs/stats/").headers["X-Read-From"] == "replica"


def test_a_replica_further_behind_than_allowed_sends_the_reads_to_the_primary(pair, replica_app, replica):
    seen, unseen = paused_with_a_new_job(pair, replica_app, replica)
    replica.max_lag_seconds = 0.5
    client = replica_app.test_client()
    wait_until(lambda: replica.forget() or replica.measure().lag_seconds > 0.5, 10, "the lag past 0.5 s")

    listed = page(client, "/jobs/")
    assert str(seen) in listed and str(unseen) in listed
    where = source_of(listed)
    assert where["read-source"] == "primary" and where["why"] == "behind"
    assert float(where["lag"]) >= 0.5
    assert "more than the 0.5 s allowed" in listed
    api = client.get("/api/jobs/")
    assert api.headers["X-Read-From"] == "primary; replica=behind"
    assert str(unseen) in {job["id"] for job in api.get_json()["results"]}

    # replay resumed: back on the replica, which now has the job too
    pair.standby.execute("SELECT pg_wal_replay_resume()")
    pair.wait_replayed()
    replica.forget()
    listed = page(client, "/jobs/")
    assert source_of(listed)["read-source"] == "replica" and str(unseen) in listed


def test_after_an_action_the_next_page_reads_the_primary_and_shows_it(pair, replica_app, replica):
    seen, unseen = paused_with_a_new_job(pair, replica_app, replica)
    client = replica_app.test_client()
    token = csrf_token(client)
    assert source_of(page(client, "/jobs/?status=queued"))["read-source"] == "replica"

    # cancel a job the replica has: the page after the action must show it cancelled
    done = client.post(f"/jobs/{seen}/cancel/", data={"csrf_token": token})
    assert done.status_code == 303
    listed = page(client, "/jobs/?status=queued")
    where = source_of(listed)
    assert where["read-source"] == "primary" and where["why"] == "own_write"
    assert str(seen) not in listed and str(unseen) in listed

    # another browser, which changed nothing, still reads the replica (where it is still queued)
    other = replica_app.test_client()
    elsewhere = page(other, "/jobs/?status=queued")
    assert source_of(elsewhere)["read-source"] == "replica"
    assert str(seen) in elsewhere and str(unseen) not in elsewhere


def test_a_stopped_replica_sends_the_reads_to_the_primary_and_nothing_fails(
    pair, replica_app, replica, monkeypatch
):
    unseen = create(replica_app, "while-down")
    pair.standby.stop()
    replica.forget()
    client = replica_app.test_client()

    for path in ("/", "/jobs/", "/events/"):
        html = page(client, path)
        where = source_of(html)
        assert where["read-source"] == "primary" and where["why"] == "down"
    assert str(unseen) in page(client, "/jobs/")
    assert "the replica does not answer" in page(client, "/jobs/")
    stats = client.get("/api/jobs/stats/")
    assert stats.status_code == 200 and stats.headers["X-Read-From"] == "primary; replica=down"
    assert "X-Replica-Lag-Seconds" not in stats.headers

    # a replica measured up a moment ago that fails to connect: that read goes to the primary
    pair.standby.start()
    pair.wait_replayed()
    replica.forget()
    assert replica.measure().lag_seconds is not None
    monkeypatch.setattr("dashboard.store.replica.CHECK_SECONDS", 600.0)  # the "up" measure is kept
    pair.standby.stop()
    replica.engine.dispose()  # no pooled connection left to it
    html = page(client, "/jobs/")
    assert source_of(html)["why"] == "down" and str(unseen) in html
    assert replica.measure().lag_seconds is None  # and the next reads too, until it answers


def test_without_a_replica_nothing_is_said_and_everything_reads_the_primary(app, client):
    assert replica_of(app) is None
    html = client.get("/jobs/").get_data(as_text=True)
    assert "read-source" not in html
    assert "X-Read-From" not in client.get("/api/jobs/").headers
