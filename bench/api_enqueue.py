"""Enqueue through the HTTP API: ``gunicorn`` with the Procfile's settings, one keep-alive client.

``single``: ``POST /api/jobs/`` one job per request; ``bulk``: ``POST /api/jobs/bulk/`` with
``chunk`` jobs per request. The server is ``gunicorn wsgi:app`` as the Procfile starts it
(``gunicorn.conf.py``: 2 gthread workers of 4 threads), access log off so the terminal is not
the bottleneck; the client is one ``http.client`` connection kept alive for the whole run.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from .db import ROOT, truncate, truncate_analyzed


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def gunicorn(url: str, app: str = "wsgi:app") -> Iterator[http.client.HTTPConnection]:
    """The Procfile's web process on ``url``'s database; yields one keep-alive client.
    ``app``: another WSGI app served the same way (``bench.enqueue_ceiling``)."""
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "PORT": str(port),
        "DEBUG": "false",
        "ENABLE_DEBUG_TOOLBAR": "false",
        "AUTO_MIGRATE": "false",
        "AUTH_DISABLED": "true",  # the benchmark measures enqueueing, not token checks
        "ALLOWED_HOSTS": "*",
        "SECRET_KEY": "bench-only-secret-key-0123456789abcdef",
        "JOB_HANDLER_MODULES": "bench.handlers",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--access-logfile", "/dev/null", app],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                client.request("GET", "/api/health/")
                client.getresponse().read()
                break
            except OSError:
                client.close()
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("gunicorn did not start") from None
                time.sleep(0.2)
        client.server_pid = proc.pid  # type: ignore[attr-defined]  # for server_cpu
        yield client
    finally:
        client.close()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def server_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and its children so far (Linux ``/proc``:
    gunicorn's master and its workers); 0.0 where ``/proc`` cannot tell."""
    total = 0.0
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        for each in [str(pid), *children]:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    except OSError:
        return 0.0
    return total / os.sysconf("SC_CLK_TCK")


def _post(client: http.client.HTTPConnection, path: str, body: object) -> None:
    client.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    response = client.getresponse()
    response.read()
    if response.status != 201:
        raise RuntimeError(f"POST {path} answered {response.status}")


def single(url: str, *, jobs: int, app: str = "wsgi:app", cpu: list[float] | None = None) -> float:
    """Jobs per second through ``POST /api/jobs/``, one request at a time (of ``app``).
    ``cpu``: gets the web server's CPU per job, in µs (master and workers together)."""
    truncate(url)
    with gunicorn(url, app) as client:
        for _ in range(20):  # warm both gunicorn workers' pools and prepared statements
            _post(client, "/api/jobs/", {"type": "bench.noop"})
        used = server_cpu(client.server_pid)  # type: ignore[attr-defined]
        start = time.perf_counter()
        for i in range(jobs):
            _post(client, "/api/jobs/", {"type": "bench.noop", "payload": {"i": i}})
        rate = jobs / (time.perf_counter() - start)
        if cpu is not None:
            cpu.append((server_cpu(client.server_pid) - used) / jobs * 1e6)  # type: ignore[attr-defined]
        return rate


def bulk(url: str, *, jobs: int, chunk: int = 1000, clients: int = 1, cold: bool = False) -> float:
    """Jobs per second through ``POST /api/jobs/bulk/``, ``chunk`` jobs per request, each with
    an idempotency key (the keys are honoured: that is the point of the bulk path). With
    ``clients`` > 1, that many keep-alive connections post at once, each its share of the
    requests (a loader running several requests in parallel).

    ``cold``: the tables are emptied and then ``VACUUM ANALYZE``d before gunicorn starts, and no
    worker runs (none ever does here): the planner's statistics say the tables are empty while
    the first requests plan the events' job check, a new installation's first import."""
    (truncate_analyzed if cold else truncate)(url)
    with gunicorn(url) as client:
        _post(client, "/api/jobs/bulk/", {"jobs": [{"type": "bench.noop"}] * 10})
        bodies = [
            {
                "jobs": [
                    {"type": "bench.noop", "payload": {"i": i}, "idempotency_key": f"k{i}"}
                    for i in range(start, min(start + chunk, jobs))
                ]
            }
            for start in range(0, jobs, chunk)
        ]
        connections = [client] + [
            http.client.HTTPConnection(client.host, client.port, timeout=30) for _ in range(clients - 1)
        ]

        def post_share(n: int) -> None:
            for body in bodies[n::clients]:
                _post(connections[n], "/api/jobs/bulk/", body)

        try:
            for extra in connections[1:]:  # connected and warm before the clock starts
                _post(extra, "/api/jobs/bulk/", {"jobs": [{"type": "bench.noop"}]})
            started = time.perf_counter()
            with ThreadPoolExecutor(clients) as pool:
                list(pool.map(post_share, range(clients)))
            return jobs / (time.perf_counter() - started)
        finally:
            for extra in connections[1:]:
                extra.close()
