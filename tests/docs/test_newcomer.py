"""A newcomer's path, scripted from the getting-started page alone.

The test takes the page's own code blocks (``myjobs.py``, ``shop.py`` and the rollback snippet),
writes them into an empty folder as a newcomer would, points ``shop.py`` at a database of its
own, creates the queue's tables with ``flask --app shop jobqueue upgrade``, starts a real
``flask --app shop worker``, signs one customer up (the job enqueued inside the Flask-SQLAlchemy
transaction), rolls a second enqueue back, and then sees exactly one job, succeeded, in the
dashboard mounted in ``shop``: on its pages (through the page's ``authorize``) and over its JSON
API with the token the page has the newcomer make (``flask --app shop jobqueue new-token``, its
entry in ``API_TOKENS``), the one way a mounted API answers. The checkout is on ``PYTHONPATH``,
as ``pip install`` of it would put the ``dashboard`` package. If the page's code or commands
change, this test runs the new ones.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import URL, make_url

from tests.support.stack import free_port
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.process, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started.md"
PAGE_DATABASE = "postgresql+psycopg://shop@localhost/shop"  # the page's placeholder for "your database"
PREFIX = "/ops/jobs"


def page_blocks(language: str = "python") -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


def page_command(prefix: str) -> str:
    """The page's one shell line that starts with ``prefix`` (in any ``sh`` block)."""
    found = {
        line.strip()
        for text in page_blocks("sh")
        for line in text.splitlines()
        if line.strip().startswith(prefix)
    }
    assert len(found) == 1, f"getting-started.md: expected one command starting {prefix!r}, got {found}"
    return found.pop()


def block(starting: str | None = None, containing: str | None = None) -> str:
    """The page's one Python block that starts with ``starting`` or contains ``containing``."""
    found = [
        text
        for text in page_blocks()
        if (starting is None or text.startswith(starting)) and (containing is None or containing in text)
    ]
    assert len(found) == 1, f"getting-started.md: expected one block for {starting or containing!r}"
    return found[0]


@pytest.fixture
def newcomer_database(database_url: str, libpq_url: str) -> Iterator[URL]:
    """A database of the newcomer's own on the test server, with their ``customers`` table."""
    name = f"newcomer_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(libpq_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(database_url).set(drivername="postgresql+psycopg", database=name)
    with psycopg.connect(_libpq(url), autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (email text NOT NULL)")
    try:
        yield url
    finally:
        with psycopg.connect(libpq_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _libpq(url: URL) -> str:
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def _env(folder: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("JOB_", "POSTGRES_", "DATABASE_", "FLASK_", "API_", "DASHBOARD_"))
    }
    env.update(
        PYTHONPATH=os.pathsep.join([str(folder), str(ROOT)]),
        PYTHONUNBUFFERED="1",
        JOB_WORKER_POLL_INTERVAL_MS="50",
        JOB_WORKER_THREADS="2",
    )
    return env


def _flask(folder: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "flask", "--app", "shop", *args]


def _get(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def _new_token(folder: Path, env: dict[str, str]) -> tuple[str, str]:
    """Run the page's ``new-token`` line; the token and the ``API_TOKENS`` entry it printed."""
    command = page_command("flask --app shop jobqueue new-token").split()
    assert command[:3] == ["flask", "--app", "shop"]
    made = subprocess.run(
        _flask(folder, *command[3:]), cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stdout + made.stderr
    token = re.search(r"^token \(give it to the script, shown once\): (\S+)$", made.stdout, re.M)
    entry = re.search(r"^API_TOKENS entry: (\S+)$", made.stdout, re.M)
    assert token and entry, made.stdout
    return token.group(1), entry.group(1)


def test_the_getting_started_page_runs_one_job_and_rolls_one_back(
    app: Any, newcomer_database: URL, tmp_path: Path
) -> None:
    folder = tmp_path / "newcomer"
    folder.mkdir()
    (folder / "myjobs.py").write_text(block(starting="# myjobs.py"))
    shop = block(starting="# shop.py")
    assert PAGE_DATABASE in shop
    (folder / "shop.py").write_text(
        shop.replace(PAGE_DATABASE, newcomer_database.render_as_string(hide_password=False))
    )
    signup = block(containing='sign_up("ada@example.com")')
    rollback = block(containing="db.session.rollback()")
    # The commands this test runs are the page's own.
    assert page_command("flask --app shop jobqueue upgrade") == "flask --app shop jobqueue upgrade"
    assert page_command("flask --app shop worker") == "flask --app shop worker"
    assert page_command("flask --app shop run") == "flask --app shop run"
    export = page_command("export API_TOKENS=")
    assert re.fullmatch(r"export API_TOKENS='laptop:viewer:sha256:<its digest>'", export), export
    curl = page_command('curl -H "Authorization: Bearer <the token>"')
    api_path = curl.rsplit(" ", 1)[1].removeprefix("localhost:5000")
    assert api_path == f"{PREFIX}/api/jobs/", curl
    env = _env(folder)

    upgrade = subprocess.run(
        _flask(folder, "jobqueue", "upgrade"),
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr

    token, entry = _new_token(folder, env)
    assert entry.startswith("laptop:viewer:sha256:") and token not in entry

    logs = {name: open(tmp_path / f"{name}.log", "wb") for name in ("worker", "web")}  # noqa: SIM115
    port = free_port()
    worker = subprocess.Popen(
        _flask(folder, "worker"), cwd=folder, env=env, stdout=logs["worker"], stderr=subprocess.STDOUT
    )
    web = subprocess.Popen(
        _flask(folder, "run", "--port", str(port)),
        cwd=folder,
        env={**env, "API_TOKENS": entry},  # the page's export, with the entry new-token printed
        stdout=logs["web"],
        stderr=subprocess.STDOUT,
    )
    try:
        script = "\n".join(
            [
                "from shop import *  # the newcomer's app, as the page wrote it",
                signup,
                rollback,
            ]
        )
        run = subprocess.run(
            [sys.executable, "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0, run.stdout + run.stderr

        api = f"http://127.0.0.1:{port}{api_path}"

        def succeeded() -> dict[str, Any] | None:
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            assert web.poll() is None, (tmp_path / "web.log").read_text()
            status, body = _get(api, token)
            if status == 0:
                return None  # the web process is not listening yet
            assert status == 200, (status, body)
            page = json.loads(body)
            done = [job for job in page["results"] if job["status"] == "succeeded"]
            return page if done else None

        page = wait_until(succeeded, 60, "the welcome job to succeed")
        assert page["count"] == 1, page  # the rolled-back enqueue left nothing
        (job,) = page["results"]
        assert job["type"] == "emails.welcome"
        assert job["payload"] == {"to": "ada@example.com"}
        assert job["result"] == {"sent_to": "ada@example.com"}
        # The token is what opens the mounted API: without one it refuses, whatever authorize says.
        assert _get(api)[0] == 401

        # The pages, through the page's authorize: one row in Jobs, the job's own page succeeded.
        status, html = _get(f"http://127.0.0.1:{port}{PREFIX}/jobs/")
        assert status == 200, html
        assert re.findall(r'<tr data-job="([^"]+)"', html) == [job["id"]], html
        text = html.replace("<wbr>", "")  # long type names may break at their dots
        assert "emails.welcome" in text and "status-succeeded" in text, html
        status, html = _get(f"http://127.0.0.1:{port}{PREFIX}/jobs/{job['id']}/")
        assert status == 200, html
        text = html.replace("<wbr>", "")
        assert "emails.welcome" in text and "succeeded" in text and "ada@example.com" in text, html
        with psycopg.connect(_libpq(newcomer_database)) as conn:
            customers = [row[0] for row in conn.execute("SELECT email FROM customers")]
        assert customers == ["ada@example.com"]
    finally:
        for process in (web, worker):
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        for log in logs.values():
            log.close()
