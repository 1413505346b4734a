"""The database restarted under a running worker: the worker waits, reconnects, goes on.

This test runs its own PostgreSQL (pgserver) so that restarting it cannot disturb the
session's shared test database; the schema is built by the real migrations.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from sqlalchemy.engine import make_url

from dashboard import create_app, upgrade_database
from dashboard.database import ensure_runtime_dir, normalise_url
from dashboard.extensions import db
from dashboard.store.lifecycle import create as enqueue
from tests.support.open_access import OPEN_ACCESS
from tests.support.worker_loop import job, wait_for_status

pytestmark = [pytest.mark.process, pytest.mark.slow]


class RestartableServer:
    """A private PostgreSQL that the test may stop and start again on the same socket."""

    def __init__(self, root: Path) -> None:
        os.environ.setdefault("XDG_RUNTIME_DIR", ensure_runtime_dir())
        import pgserver
        from pgserver._commands import pg_ctl

        self._pg_ctl = pg_ctl
        self.server = pgserver.get_server(root / "data", cleanup_mode="delete")
        self.socket_dir = self.server.get_postmaster_info().socket_dir
        url = make_url(normalise_url(self.server.get_uri()))
        self.sqlalchemy_url = url.render_as_string(hide_password=False)
        self.libpq_url = url.set(drivername="postgresql").render_as_string(hide_password=False)

    def ctl(self, *args: str) -> None:
        self._pg_ctl(list(args), pgdata=self.server.pgdata, user=self.server.system_user, timeout=30)

    def stop(self) -> None:
        self.ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        self.ctl("-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.server.log), "start")

    def close(self) -> None:
        # pgserver only stops the server process it started itself; stop ours first.
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            self.ctl("-w", "-m", "immediate", "stop")
        self.server.cleanup()


@pytest.fixture
def private_database(tmp_path: Path) -> Iterator[RestartableServer]:
    server = RestartableServer(tmp_path)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def private_app(private_database: RestartableServer) -> Iterator[Flask]:
    """An app on the private server, its schema built by the real migrations."""
    app = create_app(
        {
            "TESTING": True,
            "DEBUG": "false",
            "ENABLE_DEBUG_TOOLBAR": "false",
            "JOB_DEMO_HANDLERS": "true",  # demo types are off by default with DEBUG=false
            **OPEN_ACCESS,
            "DATABASE_URL": private_database.sqlalchemy_url,
            "AUTO_MIGRATE": "false",
        }
    )
    upgrade_database(app)
    yield app
    with app.app_context():
        db.engine.dispose()


def test_worker_survives_a_database_restart_and_finishes_the_queue(
    private_database, private_app, start_worker
):
    worker = start_worker(database_url=private_database.libpq_url, JOB_WORKER_LEASE_SECONDS="1")
    with private_app.app_context():
        before = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0})).job
        wait_for_status(before.id, "succeeded")
        # a job in the middle of its run when the database goes away
        slow = enqueue.create_job(enqueue.JobSpec("demo.slow", {"sleep_seconds": 3})).job
        wait_for_status(slow.id, "running")
        db.engine.dispose()

    private_database.stop()
    worker.wait_for_output("database unavailable", count=2)
    private_database.start()

    with private_app.app_context():
        after = [
            enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0.1})).job for _ in range(5)
        ]
        for created in after:
            assert wait_for_status(created.id, "succeeded", "failed", timeout=30).status == "succeeded"
        # at least once: the interrupted attempt is retried (or its result recorded after all)
        assert wait_for_status(slow.id, "succeeded", "failed", timeout=30).status == "succeeded"
        assert job(before.id).status == "succeeded"
    assert worker.proc.poll() is None, worker.output
