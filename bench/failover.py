"""Failover run: the primary SIGKILLed under load, its synchronous standby promoted, and proof
that nothing was lost, nothing ran twice and the pipeline moved again.

``python -m bench.failover`` builds a primary and a synchronous streaming standby on this
machine (``bench/replication.py``: pgserver's binaries, ``pg_basebackup``), queues 10,000 jobs
(the chaos run's mix: quick successes, flaky, failing and slow lease-renewing jobs), starts 2
``flask worker`` processes of 8 threads and gunicorn (``wsgi:app``), all on one multi-host URL in
libpq's form (``postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/failover?target_session_attrs=read-write``;
``--url-form sqlalchemy``: ``?host=…&host=…``). A client enqueues through the web process all
along (``POST /api/jobs/``, each job with an idempotency key, retried with the same key until
acknowledged) and reads the stats and the job list. Once 30 % of the queue has drained, the
primary is SIGKILLed and the standby promoted at once (as an orchestrator would, minus its
detection time). Then it waits until every job is terminal and checks, on the new primary:

- every job terminal, and every enqueue the web acknowledged present (none lost);
- no job with two ``succeeded`` events, no success but by the final attempt's claimer, no
  row or event sequence breaking the state machine (none doubled: ``bench.chaos``'s checks);
- no attempt charged to the fault (no retry or failure recorded with a connection error);
- the workers and the web process alive, none restarted;
- a job succeeded, and the web answered a read and an enqueue, within :data:`BOUND_SECONDS`
  of the promotion.

It prints a table and the timings, writes ``bench/results/failover[-small].json`` and exits 1
when a check fails. ``--small`` (CI): 300 jobs, about 30 s.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from dashboard.store.lifecycle import create as enqueue

from .chaos import Workers, job_mix, live_count, verify
from .db import ROOT, fresh_database, libpq, make_app
from .replication import Pair, free_port

BOUND_SECONDS = 15.0  # promotion -> first success, first web read, first acknowledged enqueue


@dataclass
class Plan:
    jobs: int
    workers: int
    timeout: float


FULL = Plan(jobs=10_000, workers=2, timeout=900)
SMALL = Plan(jobs=300, workers=2, timeout=120)

# Errors that would mean a connection fault was charged to a job (its retry or failure message).
FAULT_WORDS = ("read-only", "connection", "terminat", "server closed", "OperationalError", "recovery")


@dataclass
class Client:
    """The web's users: one thread enqueues (idempotent, retried until acknowledged), one reads."""

    port: int
    stop: threading.Event = field(default_factory=threading.Event)
    acknowledged: list[str] = field(default_factory=list)
    enqueue_ok: list[float] = field(default_factory=list)  # wall-clock times of 2xx answers
    read_ok: list[float] = field(default_factory=list)
    failures: int = 0  # answers other than 2xx (503 during the switch) and broken connections
    server_errors: int = 0  # 500s: none expected, ever

    def start(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self.produce, daemon=True),
            threading.Thread(target=self.read, daemon=True),
        ]
        for thread in threads:
            thread.start()
        return threads

    def _ask(self, conn: http.client.HTTPConnection, method: str, path: str, body: object = None) -> int:
        payload = None if body is None else json.dumps(body)
        conn.request(method, path, payload, {"Content-Type": "application/json"} if payload else {})
        response = conn.getresponse()
        response.read()
        if response.status >= 500:
            self.failures += 1
            self.server_errors += response.status == 500
        return response.status

    def produce(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        n = 0
        while not self.stop.is_set():
            key = f"failover-{n}"
            try:
                status = self._ask(
                    conn,
                    "POST",
                    "/api/jobs/",
                    {"type": "demo.success", "payload": {"sleep_seconds": 0}, "idempotency_key": key},
                )
            except (OSError, http.client.HTTPException):
                self.failures += 1
                conn.close()
                status = 0
            if status in (200, 201):
                self.acknowledged.append(key)
                self.enqueue_ok.append(time.time())
                n += 1
            self.stop.wait(0.05 if status in (200, 201) else 0.2)
        conn.close()

    def read(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        paths = ("/api/jobs/stats/", "/jobs/?status=queued", "/api/jobs/?limit=20")
        n = 0
        while not self.stop.is_set():
            try:
                status = self._ask(conn, "GET", paths[n % len(paths)])
            except (OSError, http.client.HTTPException):
                self.failures += 1
                conn.close()
                status = 0
            if status == 200:
                self.read_ok.append(time.time())
            n += 1
            self.stop.wait(0.25)
        conn.close()


def start_web(url: str, logs: Path, *, name: str = "web", **extra: str) -> tuple[subprocess.Popen, int]:
    """gunicorn (``wsgi:app``, one process of four threads) on ``url``, its health answered;
    ``extra``: more settings (``DATABASE_REPLICA_URL``); its log is ``logs/{name}.log``."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "PORT": str(port),
        "WEB_HOST": "127.0.0.1",
        "WEB_CONCURRENCY": "1",
        "DEBUG": "false",
        "ENABLE_DEBUG_TOOLBAR": "false",
        "AUTO_MIGRATE": "false",
        "AUTH_DISABLED": "true",
        "ALLOWED_HOSTS": "*",
        "SECRET_KEY": "bench-only-secret-key-0123456789abcdef",
        "JOB_DEMO_HANDLERS": "true",
        **extra,
    }
    log = open(logs / f"{name}.log", "w")  # noqa: SIM115 (lives with the process)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--access-logfile", "/dev/null", "wsgi:app"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/api/health/")
            conn.getresponse().read()
            conn.close()
            return proc, port
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()  # never left running behind the error
                proc.wait()
                raise RuntimeError(f"gunicorn did not start (see {logs / name}.log)") from None
            time.sleep(0.2)


def backlog_live(url: str) -> int:
    """Jobs of the queued backlog (not the web's enqueues) not yet terminal."""
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT count(*) FROM jobs_job WHERE idempotency_key IS NULL AND status IN ('queued', 'running')"
        ).fetchone()
    return int(row[0])


def workers_up(url: str) -> int:
    """Worker processes registered and not stopped (each writes its row as it starts)."""
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute("SELECT count(*) FROM jobs_worker WHERE stopped_at IS NULL").fetchone()
    return int(row[0])


def first_after(moments: list[float], moment: float) -> float | None:
    later = [m for m in moments if m >= moment]
    return min(later) - moment if later else None


def fault_checks(url: str, acknowledged: list[str]) -> list[tuple[str, str, bool]]:
    """Enqueues acknowledged but missing, and attempts charged to the fault."""
    with psycopg.connect(url) as conn:
        stored = {
            key
            for (key,) in conn.execute(
                "SELECT idempotency_key FROM jobs_job WHERE idempotency_key = ANY(%s)", (acknowledged,)
            )
        }
        pattern = "|".join(FAULT_WORDS).lower()
        charged = conn.execute(
            "SELECT count(*) FROM jobs_jobevent WHERE type IN ('retry_scheduled', 'failed')"
            " AND lower(message) ~ %s",
            (pattern,),
        ).fetchone()[0]
        rescued = conn.execute(
            "SELECT count(*) FROM jobs_jobevent WHERE type = 'timeout_requeued'"
        ).fetchone()[0]
    missing = len(set(acknowledged) - stored)
    return [
        ("enqueues acknowledged by the web", str(len(acknowledged)), len(acknowledged) > 0),
        ("acknowledged enqueues missing after the failover", str(missing), missing == 0),
        ("retries or failures recorded with a connection error", str(charged), charged == 0),
        ("attempts recovered by their lease (requeued, none lost)", str(rescued), True),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__)
    parser.add_argument("--small", action="store_true", help="300 jobs (CI)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--url-form", choices=("libpq", "sqlalchemy"), default="libpq")
    args = parser.parse_args(argv)
    plan = SMALL if args.small else FULL
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)
    logs = ROOT / "bench" / "results" / "failover-logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    started = time.monotonic()
    pair = Pair.build(synchronous=True)
    workers: Workers | None = None
    web: subprocess.Popen | None = None
    client: Client | None = None
    timings: dict[str, float | None] = {}
    rows: list[tuple[str, str, bool]] = []
    try:
        fresh_database("failover", admin=pair.primary.url())
        url = pair.url("failover", form=args.url_form)  # what the processes are given
        raw = libpq(url)  # the same hosts as libpq reads them, for this script's own checks
        app = make_app(url)
        with app.app_context():
            for i in range(0, plan.jobs, 1000):
                enqueue.create_jobs(job_mix(min(1000, plan.jobs - i), rng))
        print(f"seed {seed}: {plan.jobs} jobs queued on {url}", flush=True)
        web, port = start_web(url, logs)
        client = Client(port)
        client.start()
        workers = Workers(url=url, logs=logs)
        for _ in range(plan.workers):
            workers.start()
        deadline = time.monotonic() + plan.timeout
        promoted_at: float | None = None
        drained_at: float | None = None
        while time.monotonic() < deadline:
            try:
                live = backlog_live(raw)
            except psycopg.OperationalError:
                live = None  # between the kill and the promotion
            if (
                promoted_at is None
                and live is not None
                and live <= plan.jobs * 0.7
                and workers_up(raw) >= plan.workers
            ):
                print(f"SIGKILL the primary ({live} jobs live), promote the standby", flush=True)
                killed_at = time.time()
                pair.primary.kill()
                pair.standby.promote()
                promoted_at = time.time()
                timings["kill to promoted, s"] = round(promoted_at - killed_at, 2)
            if promoted_at is not None and live == 0:
                drained_at = drained_at or time.time()
                heard = first_after(client.enqueue_ok, promoted_at) and first_after(
                    client.read_ok, promoted_at
                )
                if heard or time.time() > promoted_at + BOUND_SECONDS:
                    break
            time.sleep(0.2)
        client.stop.set()
        # the web's last acknowledged enqueues run too before the count
        drain_deadline = time.monotonic() + 30
        while live_count(raw) and time.monotonic() < drain_deadline:
            time.sleep(0.2)
        alive = [proc.poll() is None for proc in workers.procs] + [web.poll() is None]
        workers.stop()
        if promoted_at is not None:
            with psycopg.connect(raw) as conn:
                first = conn.execute(
                    "SELECT extract(epoch FROM min(created_at)) FROM jobs_jobevent"
                    " WHERE type = 'succeeded' AND created_at > to_timestamp(%s)",
                    (promoted_at,),
                ).fetchone()[0]
            timings["promotion to first success, s"] = (
                None if first is None else round(float(first) - promoted_at, 2)
            )
            timings["promotion to first web read, s"] = _rounded(first_after(client.read_ok, promoted_at))
            timings["promotion to first acknowledged enqueue, s"] = _rounded(
                first_after(client.enqueue_ok, promoted_at)
            )
            timings["promotion to drained, s"] = (
                None if drained_at is None else round(drained_at - promoted_at, 2)
            )
        rows = [row for row in verify(raw, {}) if not row[0].startswith("longest wait")]
        rows += fault_checks(raw, client.acknowledged)
        rows.insert(
            0,
            ("primary killed and standby promoted", "yes" if promoted_at else "no", promoted_at is not None),
        )
        rows.append(("workers and web alive throughout", f"{sum(alive)}/{len(alive)}", all(alive)))
        rows.append(("web answers 500", str(client.server_errors), client.server_errors == 0))
        for what in ("first success", "first web read", "first acknowledged enqueue"):
            value = timings.get(f"promotion to {what}, s")
            rows.append(
                (
                    f"promotion to {what} (bound {BOUND_SECONDS:.0f} s)",
                    "never" if value is None else f"{value:.2f} s",
                    value is not None and value <= BOUND_SECONDS,
                )
            )
        rows.append(("queue drained (not stuck)", "yes" if drained_at else "no", drained_at is not None))
    finally:
        if client is not None:
            client.stop.set()
        if workers is not None:
            for proc in workers.procs:
                if proc.poll() is None:
                    proc.kill()
        if web is not None and web.poll() is None:
            web.terminate()
            try:
                web.wait(timeout=30)
            except subprocess.TimeoutExpired:
                web.kill()
        pair.close()
    elapsed = time.monotonic() - started
    width = max(len(what) for what, _, _ in rows)
    print(f"\n{'check':<{width}}  {'figure':<32} result")
    for what, figure, ok in rows:
        print(f"{what:<{width}}  {figure:<32} {'ok' if ok else 'FAIL'}")
    print()
    for what, value in timings.items():
        print(f"{what:<45} {value}")
    passed = bool(rows) and all(ok for _, _, ok in rows)
    summary = {
        "seed": seed,
        "jobs": plan.jobs,
        "url_form": args.url_form,
        "enqueued_through_the_web": len(client.acknowledged) if client else 0,
        "web_failures_during_the_switch": client.failures if client else 0,
        "seconds": round(elapsed, 1),
        "timings": timings,
        "passed": passed,
        "at": datetime.now(UTC).isoformat(),
        "checks": [list(r) for r in rows],
    }
    name = "failover-small" if args.small else "failover"
    (ROOT / "bench" / "results" / f"{name}.json").write_text(json.dumps(summary, indent=2))
    print(f"\n{'PASSED' if passed else 'FAILED'} in {elapsed:.0f} s (seed {seed}, logs in {logs})")
    return 0 if passed else 1


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


if __name__ == "__main__":
    sys.exit(main())
