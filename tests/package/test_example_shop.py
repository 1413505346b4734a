"""The package as a team installs it: a built wheel in a fresh virtual environment outside the
checkout, and the example shop (examples/shop) running on it.

The shop's own migrations and ``flask jobqueue upgrade``; an order placed (its receipt job
enqueued in the order's transaction) and one rolled back; the shop's worker runs the jobs;
the dashboard mounted at ``/ops/jobs`` behind the shop's sign-in shows, in Chromium, that
exactly one job ran.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.browser.conftest import CHROMIUM_ARGS, chromium_path
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.process, pytest.mark.slow]

CHECKOUT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with only the built wheel (and its dependencies) installed."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(CHECKOUT)],
        check=True,
        capture_output=True,
    )
    [wheel] = dist.glob("jobqueue_dashboard-*.whl")
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], check=True, capture_output=True)
    return venv


@pytest.fixture
def shop_database(database_url: str) -> Iterator[str]:
    url = make_url(database_url)
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"shop_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield url.set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Shop:
    """The example, copied outside the checkout, run with the fresh environment's ``flask``."""

    def __init__(self, venv: Path, folder: Path, database_url: str) -> None:
        self.flask = str(venv / "bin" / "flask")
        self.python = str(venv / "bin" / "python")
        self.folder = folder
        self.env = {
            "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
            "HOME": str(folder),
            "SHOP_DATABASE_URL": database_url,
            "JOB_WORKER_POLL_INTERVAL_MS": "50",
            "JOB_WORKER_THREADS": "2",
            "PYTHONUNBUFFERED": "1",
        }
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs: list[Any] = []

    def run(self, *args: str) -> str:
        done = subprocess.run(
            [self.flask, "--app", "shop", *args],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    def start(self, *args: str, log: str) -> subprocess.Popen[bytes]:
        out = open(self.folder / log, "wb")  # noqa: SIM115  (closed in stop_all)
        self.logs.append(out)
        process = subprocess.Popen(
            [self.flask, "--app", "shop", *args],
            cwd=self.folder,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        for out in self.logs:
            out.close()

    def log(self, name: str) -> str:
        return (self.folder / name).read_text(errors="replace")


def post(url: str, data: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=urllib.parse.urlencode(data).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        error.close()
        return int(error.code)


def reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except (urllib.error.URLError, ConnectionError):
        return False


def rows(database_url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(
        make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    ) as c:
        return c.execute(sql).fetchall()


def test_the_shop_runs_on_the_installed_package(fresh_venv: Path, shop_database: str, tmp_path: Path) -> None:
    chromium = chromium_path()
    if chromium is None:
        pytest.skip("Chromium is not installed (/usr/bin/chromium)")
    folder = tmp_path / "shop"
    shutil.copytree(CHECKOUT / "examples" / "shop", folder)
    shop = Shop(fresh_venv, folder, shop_database)
    try:
        where = subprocess.run(
            [
                shop.python,
                "-c",
                "import dashboard, dashboard.database as d; print(dashboard.__file__, d.TEMPLATES_DIR)",
            ],
            cwd=folder,
            env=shop.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert str(fresh_venv) in where and str(CHECKOUT) not in where  # the installed copy, not the checkout

        shop.run("db", "upgrade")  # the shop's own migrations
        assert "jobqueue_alembic_version" in shop.run("jobqueue", "upgrade")
        assert rows(shop_database, "SELECT version_num FROM alembic_version") == [("shop_0001",)]

        port = free_port()
        base = f"http://127.0.0.1:{port}"
        shop.start("run", "--port", str(port), log="web.log")
        wait_until(lambda: reachable(base + "/"), 30, "the shop answers")
        assert post(base + "/orders", {"item": "teapot"}) == 200  # 303 to the home page, followed
        assert post(base + "/orders?fail=1", {"item": "rolled back"}) == 409
        assert rows(shop_database, "SELECT item FROM shop_order") == [("teapot",)]
        assert rows(shop_database, "SELECT count(*) FROM jobs_job") == [(1,)]

        worker = shop.start("worker", log="worker.log")

        def receipt_sent() -> bool:
            if worker.poll() is not None:
                raise AssertionError(f"the worker exited ({worker.returncode}):\n{shop.log('worker.log')}")
            return rows(shop_database, "SELECT receipt_sent FROM shop_order") == [(True,)]

        wait_until(receipt_sent, 60, "the receipt job ran")
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0

        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            page = browser.new_page()
            try:
                assert page.goto(base + "/ops/jobs/").status == 403  # not signed in to the shop
                page.goto(base + "/login")
                page.fill("input[name=user]", "olga")
                page.click("button")
                page.goto(base + "/ops/jobs/jobs/")
                listed = page.locator("tr[data-job]")
                assert listed.count() == 1
                assert "shop.send_receipt" in listed.inner_text() and "succeeded" in listed.inner_text()
                page.goto(base + "/ops/jobs/jobs/?status=succeeded")
                assert page.locator("tr[data-job]").count() == 1
            finally:
                browser.close()
    finally:
        shop.stop_all()
