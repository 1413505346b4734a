"""The project's real processes for start-up and shutdown tests: gunicorn, ``flask worker``,
honcho, on an embedded database in an instance folder of the test's own, or on ``DATABASE_URL``.

Everything is polled with deadlines; whatever a test leaves running is killed at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stack_env(**overrides: str) -> dict[str, str]:
    """A new user's environment: no database settings (embedded, auto-migrated), development
    mode, fast worker polling. ``overrides`` win."""
    drop = ("JOB_", "POSTGRES_", "DATABASE_URL", "AUTO_MIGRATE", "INSTANCE_PATH", "PORT")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        PYTHONUNBUFFERED="1",
        ENABLE_DEBUG_TOOLBAR="false",
        JOB_WORKER_THREADS="2",
        JOB_WORKER_POLL_INTERVAL_MS="100",
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    )
    env.update(overrides)
    return env


def http(method: str, url: str, body: Any = None, timeout: float = 5.0) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, None
    except (OSError, ValueError):
        return 0, None


def healthy(base: str) -> bool:
    return http("GET", f"{base}/api/health/", timeout=2)[0] == 200


def run_job(base: str, job_type: str, payload: dict[str, Any], until: tuple[str, ...], timeout: float) -> Any:
    """Create a job through the API and wait until its status is one of ``until``."""
    status, job = http("POST", f"{base}/api/jobs/", {"type": job_type, "payload": payload})
    assert status == 201, (status, job)

    def reached() -> dict | None:
        code, found = http("GET", f"{base}/api/jobs/{job['id']}/")
        return found if code == 200 and found["status"] in until else None

    return wait_until(reached, timeout, f"job {job['id']} ({job_type}) to be {' or '.join(until)}")


class Started:
    """A process group the test started, its output in a file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = open(log, "ab")  # noqa: SIM115  (closed in stop())
        self.proc = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            tail = self.output[-3000:]
            raise AssertionError(f"{self.proc.args} still running after {timeout}s:\n{tail}") from None

    def stop(self) -> None:
        """SIGKILL the group if it still runs (teardown only)."""
        if self.proc.poll() is None:
            self.signal_group(signal.SIGKILL)
            self.proc.wait(10)
        self._out.close()


def gunicorn(port: int, env: dict[str, str], log: Path, workers: int = 2) -> Started:
    args = [str(BIN / "gunicorn"), "-w", str(workers), "-b", f"127.0.0.1:{port}", "wsgi:app"]
    return Started(args, env, log)


def flask_worker(env: dict[str, str], log: Path) -> Started:
    return Started([str(BIN / "flask"), "--app", "wsgi", "worker"], env, log)


def project_processes(instance: Path) -> list[psutil.Process]:
    """Every process of this instance folder: the ones started with ``INSTANCE_PATH`` set to
    it (gunicorn, the worker, honcho's shells) and the PostgreSQL serving its ``pgdata``."""
    found = []
    pgdata = str((instance / "pgdata").resolve())
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmdline = " ".join(proc.info["cmdline"] or [])
            if pgdata in cmdline or proc.environ().get("INSTANCE_PATH") == str(instance):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def postmaster_running(instance: Path) -> bool:
    pid_file = instance / "pgdata" / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return False
    return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


def nothing_left(instance: Path, timeout: float) -> None:
    """Wait until no process of ``instance`` runs, failing with the survivors' command lines."""
    try:
        wait_until(
            lambda: not project_processes(instance) and not postmaster_running(instance),
            timeout,
            "every process of the instance to exit",
        )
    except AssertionError:
        described = []
        for proc in project_processes(instance):
            try:
                described.append(f"{proc.pid}: {' '.join(proc.cmdline())}")
            except psutil.Error:
                continue
        raise AssertionError(f"still running {timeout}s after the stop: {described}") from None


def kill_leftovers(instance: Path) -> None:
    """Teardown: SIGKILL whatever of ``instance`` still runs (only this test's processes)."""
    for proc in project_processes(instance):
        try:
            proc.kill()
        except psutil.Error:
            continue
