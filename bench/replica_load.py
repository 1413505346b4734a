"""What replica reads buy: a backlog's drain rate with no dashboard load, with a reader of
:data:`RATE` pages a second on a web process reading the primary, and on one reading a replica.

``python -m bench.replica_load`` builds a primary and a synchronous streaming standby
(``bench/replication.py``), migrates a database on the primary, seeds queued ``bench.noop`` jobs
set-based (1,000,000; ``--small``: 40,000), starts one ``flask worker`` of 16 threads (one-job
mode) and two gunicorn processes (as ``bench.failover`` does), one with ``DATABASE_REPLICA_URL``
naming the standby. Then, in rounds whose order turns (``none, primary, replica``, then
``primary, replica, none``, ...), each condition has a warm-up and a measured window: the jobs
that succeeded inside it (``finished_at``), the pages' latencies and reads a second, where each
answer was read (``X-Read-From`` in the API, the ``data-read-source`` note on a page;
``/queues/`` always reads the primary) and the CPU seconds of both servers' processes by role
(:class:`CpuByRole`). The reader cycles through :data:`PAGES`, what an on-call engineer keeps
open. It writes ``bench/results/replica-load[-small].json`` and exits 1 when a page answered
5xx, the backlog ran dry inside a window, or a process it started outlived it. ``--small``
(CI): one round of 4 s windows, about 30 s.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psutil
import psycopg

from .db import ROOT, fresh_database, seed_queued
from .drain import _cpu, _server_cpu, _stat, _wait_first_claim, worker
from .failover import start_web
from .replication import Pair, Server, pair

DATABASE = "replica_load"
RATE = 20.0  # page reads a second
READERS = 4  # threads sharing the reader's schedule (a slow page must not slow the rate)
THREADS = 16  # the worker's
CONDITIONS = ("none", "primary", "replica")
HX = {"HX-Request": "true"}
PAGES: tuple[tuple[str, dict[str, str]], ...] = (
    ("/", {}),
    ("/", HX),  # the overview's poll
    ("/jobs/", {}),
    ("/jobs/?status=queued", {}),
    ("/jobs/?status=queued", HX),
    ("/api/jobs/stats/", {}),
    ("/api/jobs/stats/detail/", {}),  # the overview's charts and figures
    ("/queues/", {}),
    ("/events/", {}),
    ("/api/job-events/?limit=50", {}),
    ("/api/jobs/?status=queued&limit=50", {}),
)
_NOTE = re.compile(rb'data-read-source="(\w+)"(?: data-why="\w+")?(?: data-lag="([\d.]+)")?')


@dataclass
class Plan:
    jobs: int
    rounds: int
    warmup: float  # seconds of each condition before its window (the reader already running)
    window: float


FULL = Plan(jobs=1_000_000, rounds=3, warmup=5.0, window=45.0)
SMALL = Plan(jobs=40_000, rounds=1, warmup=1.0, window=4.0)


@dataclass
class Read:
    page: str
    at: float  # wall-clock time the request was sent
    ms: float
    status: int
    source: str  # "replica", "primary", or "" (no replica configured, or a page that never says)
    lag: float | None


@dataclass
class Reader:
    """:data:`RATE` reads a second, request ``i`` due at ``start + i / RATE`` (late ones go at
    once), shared by :data:`READERS` threads, each with its own keep-alive connection."""

    port: int
    stop: threading.Event = field(default_factory=threading.Event)
    reads: list[Read] = field(default_factory=list)
    errors: int = 0  # broken connections
    _next: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Reader:
        self.started = time.monotonic()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(READERS)]
        for thread in self._threads:
            thread.start()
        return self

    def finish(self) -> list[Read]:
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        return self.reads

    def _run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        while not self.stop.is_set():
            with self._lock:
                i, self._next = self._next, self._next + 1
            delay = self.started + i / RATE - time.monotonic()
            if delay > 0 and self.stop.wait(delay):
                break
            path, headers = PAGES[i % len(PAGES)]
            try:
                self.reads.append(ask(conn, path, headers))
            except (OSError, http.client.HTTPException):
                self.errors += 1
                conn.close()
        conn.close()


def ask(conn: http.client.HTTPConnection, path: str, headers: dict[str, str]) -> Read:
    at = time.time()
    start = time.perf_counter()
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    body = response.read()
    ms = (time.perf_counter() - start) * 1000
    where = response.getheader("X-Read-From")
    lag_header = response.getheader("X-Replica-Lag-Seconds")
    source, lag = "", None
    if where is not None:
        source = "replica" if where == "replica" else "primary"
        lag = float(lag_header) if lag_header else None
    elif (note := _NOTE.search(body)) is not None:
        source = note.group(1).decode()
        lag = float(note.group(2)) if note.group(2) else None
    label = path + (" [fragment]" if headers else "")
    return Read(label, at, ms, response.status, source, lag)


ROLES = ("worker", "web", "other")
SAMPLE_SECONDS = 0.5


@dataclass
class CpuByRole:
    """CPU seconds of a server's processes over a window, by role: its backends' ``application_name``
    (``bench-worker``, ``bench-web``), else ``other`` (walsender, autovacuum, checkpointer, WAL
    replay, this script's own reads). Each process is read from ``/proc`` every
    :data:`SAMPLE_SECONDS` (a backend that ends, one of the pools' overflow connections, keeps
    the time seen last); what no sample saw (the last moments of those) is ``other``."""

    server: Server
    seen: dict[int, list] = field(default_factory=dict)  # pid -> [role, baseline, latest]
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> CpuByRole:
        self.postmaster = self.server.pid()
        if self.postmaster is None or not Path("/proc").exists():
            return self
        self.conn = psycopg.connect(self.server.url(DATABASE), autocommit=True)
        self.total = _server_cpu(self.postmaster)
        self._sample(first=True)
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self

    def finish(self) -> dict[str, float]:
        if self.postmaster is None or not Path("/proc").exists():
            return {}
        self.stop.set()
        self.thread.join(timeout=10)
        self._sample(first=False)
        total = _server_cpu(self.postmaster) - self.total
        self.conn.close()
        roles = dict.fromkeys(ROLES, 0.0)
        for role, baseline, latest in self.seen.values():
            roles[role] += latest - baseline
        roles["other"] += total - sum(roles.values())
        return {role: round(seconds, 2) for role, seconds in roles.items()}

    def _loop(self) -> None:
        while not self.stop.wait(SAMPLE_SECONDS):
            self._sample(first=False)

    def _sample(self, *, first: bool) -> None:
        names = dict(self.conn.execute("SELECT pid, application_name FROM pg_stat_activity").fetchall())
        for child in psutil.Process(self.postmaster).children():
            try:
                seconds = _cpu(_stat(child.pid))
            except OSError:  # ended meanwhile
                continue
            role = str(names.get(child.pid, "")).removeprefix("bench-")
            role = role if role in ROLES else "other"
            if child.pid not in self.seen:  # a process started inside the window counts from 0
                self.seen[child.pid] = [role, seconds if first else 0.0, seconds]
            else:
                self.seen[child.pid][1:] = [self.seen[child.pid][1], seconds]
                if role != "other":
                    self.seen[child.pid][0] = role


def succeeded_between(url: str, since: float, until: float) -> tuple[int, int]:
    """Jobs that succeeded inside the window, and jobs still queued now."""
    with psycopg.connect(url, autocommit=True) as conn:
        done, queued = conn.execute(
            "SELECT (SELECT count(*) FROM jobs_job WHERE status = 'succeeded'"
            "        AND finished_at >= to_timestamp(%s) AND finished_at < to_timestamp(%s)),"
            " (SELECT count(*) FROM jobs_job WHERE status = 'queued')",
            (since, until),
        ).fetchone()
    return int(done), int(queued)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * share + 0.5) - 1)] if ordered else 0.0


@dataclass
class Window:
    """One condition's measured window."""

    jobs_per_s: float
    queued_after: int
    reads_per_s: float
    p50_ms: float
    p95_ms: float
    replica_share: float  # of all the reads (``/queues/`` never reads the replica)
    lag_max_s: float | None
    server_errors: int
    not_ok: int  # answers other than 200, and broken connections
    primary_cpu_s: dict[str, float]
    standby_cpu_s: dict[str, float]
    pages: dict[str, list[float]]  # page -> its latencies, ms
    failures: dict[str, dict[int, int]]  # page -> status -> answers, for those other than 200


def window(plan: Plan, url: str, servers: Pair, port: int | None) -> Window:
    """One condition's warm-up and measured window (``port``: the reader's web process)."""
    reader = Reader(port).start() if port is not None else None
    time.sleep(plan.warmup)
    since = time.time()
    on_primary, on_standby = CpuByRole(servers.primary).start(), CpuByRole(servers.standby).start()
    time.sleep(plan.window)
    until = time.time()
    primary_cpu, standby_cpu = on_primary.finish(), on_standby.finish()
    reads = [r for r in reader.finish() if since <= r.at < until] if reader is not None else []
    done, queued = succeeded_between(url, since, until)
    times = [r.ms for r in reads]
    lags = [r.lag for r in reads if r.lag is not None]
    labels = [r.page for r in reads]
    failures: dict[str, dict[int, int]] = {}
    for r in reads:
        if r.status != 200:
            failures.setdefault(r.page, {})[r.status] = failures.get(r.page, {}).get(r.status, 0) + 1
    return Window(
        jobs_per_s=done / (until - since),
        queued_after=queued,
        reads_per_s=len(reads) / (until - since),
        p50_ms=statistics.median(times) if times else 0.0,
        p95_ms=percentile(times, 0.95),
        replica_share=sum(r.source == "replica" for r in reads) / len(reads) if reads else 0.0,
        lag_max_s=max(lags) if lags else None,
        server_errors=sum(r.status >= 500 for r in reads),
        not_ok=sum(r.status != 200 for r in reads) + (reader.errors if reader is not None else 0),
        primary_cpu_s=primary_cpu,
        standby_cpu_s=standby_cpu,
        pages={page: [round(r.ms, 1) for r in reads if r.page == page] for page in dict.fromkeys(labels)},
        failures=failures,
    )


def measure(plan: Plan, logs: Path) -> dict[str, list[Window]]:
    results: dict[str, list[Window]] = {name: [] for name in CONDITIONS}
    with pair(synchronous=True) as servers:
        url = fresh_database(DATABASE, admin=servers.primary.url())
        started = time.monotonic()
        seed_queued(url, plan.jobs)
        servers.wait_replayed(timeout=600)
        print(f"{plan.jobs:,} jobs queued and replayed in {time.monotonic() - started:.0f} s", flush=True)
        named = f"{url}?application_name=bench-"
        webs: list[subprocess.Popen] = []
        try:
            proc, on_primary = start_web(named + "web", logs, name="web-primary")
            webs.append(proc)
            standby = servers.standby.url(DATABASE) + "?application_name=bench-web"
            proc, on_replica = start_web(
                named + "web", logs, name="web-replica", DATABASE_REPLICA_URL=standby
            )
            webs.append(proc)
            ports = {"none": None, "primary": on_primary, "replica": on_replica}
            with worker(named + "worker", threads=THREADS):
                _wait_first_claim(url, 120)
                time.sleep(plan.warmup)
                for n in range(plan.rounds):
                    order = CONDITIONS[n % 3 :] + CONDITIONS[: n % 3]
                    for name in order:
                        result = window(plan, url, servers, ports[name])
                        results[name].append(result)
                        print(
                            f"round {n + 1} {name:<8} {result.jobs_per_s:>7.0f} jobs/s"
                            f"  {result.reads_per_s:>5.1f} reads/s  p50 {result.p50_ms:>6.1f} ms"
                            f"  p95 {result.p95_ms:>6.1f} ms  replica {result.replica_share:.0%}"
                            f"  {result.queued_after:,} queued",
                            flush=True,
                        )
        finally:
            for proc in webs:
                proc.terminate()
            for proc in webs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    return results


def spread(values: list[float], digits: int = 0) -> str:
    """``median (min-max)``."""
    if not values:
        return "-"
    shown = [f"{v:,.{digits}f}" for v in (statistics.median(values), min(values), max(values))]
    return f"{shown[0]} ({shown[1]}-{shown[2]})"


def summary(results: dict[str, list[Window]]) -> list[dict[str, str]]:
    """Per condition, medians of the rounds (min-max); the ratio to ``none`` of the same round."""
    rows = []
    for name, runs in results.items():
        ratios = [run.jobs_per_s / base.jobs_per_s for run, base in zip(runs, results["none"], strict=True)]
        rows.append(
            {
                "condition": name,
                "jobs/s": spread([run.jobs_per_s for run in runs]),
                "vs none": spread(ratios, 2),
                "reads/s": spread([run.reads_per_s for run in runs], 1),
                "p50 ms": spread([run.p50_ms for run in runs], 1),
                "p95 ms": spread([run.p95_ms for run in runs], 1),
                "from replica %": spread([100 * run.replica_share for run in runs]),
                "primary web CPU s": spread([run.primary_cpu_s.get("web", 0.0) for run in runs], 1),
                "primary other CPU s": spread([run.primary_cpu_s.get("other", 0.0) for run in runs], 1),
                "standby web CPU s": spread([run.standby_cpu_s.get("web", 0.0) for run in runs], 1),
            }
        )
    return rows


def leftovers() -> list[psutil.Process]:
    """Processes this script started that are still running."""
    return [p for p in psutil.Process().children(recursive=True) if p.is_running()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replica_load", description=__doc__)
    parser.add_argument("--small", action="store_true", help="40,000 jobs, one round of 4 s windows (CI)")
    args = parser.parse_args(argv)
    plan = SMALL if args.small else FULL
    logs = ROOT / "bench" / "results" / "replica-load-logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    started = time.monotonic()
    results = measure(plan, logs)
    left = leftovers()
    for proc in left:
        proc.kill()
    rows = summary(results)
    print()
    for row in rows:
        print("  ".join(f"{key}: {value}" for key, value in row.items()))
    runs = [run for runs in results.values() for run in runs]
    server_errors = sum(run.server_errors for run in runs)
    dry = sum(run.queued_after == 0 for run in runs)
    passed = server_errors == 0 and dry == 0 and not left
    elapsed = time.monotonic() - started
    out = {
        "plan": plan.__dict__,
        "rate": RATE,
        "seconds": round(elapsed, 1),
        "at": datetime.now(UTC).isoformat(),
        "summary": rows,
        "server_errors": server_errors,
        "windows_that_ran_dry": dry,
        "processes_left_behind": [p.pid for p in left],
        "passed": passed,
        "runs": {name: [asdict(run) for run in runs] for name, runs in results.items()},
    }
    name = "replica-load-small" if args.small else "replica-load"
    (ROOT / "bench" / "results" / f"{name}.json").write_text(json.dumps(out, indent=1))
    for name, runs in results.items():
        for n, run in enumerate(runs):
            if run.failures:
                print(f"{name} (window {n + 1}): answers other than 200 by page: {run.failures}")
    print(f"\n5xx answers {server_errors}, windows that ran dry {dry}, processes left behind {len(left)}")
    print(f"{'PASSED' if passed else 'FAILED'} in {elapsed:.0f} s (logs in {logs})")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
