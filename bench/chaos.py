"""Chaos run: workers SIGKILLed at random and PostgreSQL restarted, then proof nothing was lost.

``python -m bench.chaos`` enqueues 10,000 jobs (``demo.success``, ``demo.flaky``,
``demo.fail``, and ``demo.slow`` that renews past its lease), runs 3 ``flask worker``
processes of 8 threads, SIGKILLs a random worker every few seconds and starts a new one,
restarts PostgreSQL once mid-run, waits until every job is terminal, then checks the database
and prints a table. It exits 1 when any check fails. ``--small`` (CI): a few hundred jobs, two
kills, one restart. ``--workflows``: the jobs are workflows instead, fan-ins (four members, one
callback, one "finally" step under ``on_parent_failure="run"``) and chains of five, 1,000 of
them (40 with ``--small``), some with a member that fails for good; the checks add that every
waiting job was released at most once, never claimed before each of its parents succeeded,
and cancelled exactly when a parent failed.

It runs its own embedded PostgreSQL in a temporary folder, so the restart hurts nobody else.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from dashboard.store.models import ATTEMPTS_SQL, STATUS_SHAPE_SQL

from .db import ROOT, embedded_server, fresh_database, libpq, make_app

SETTINGS = {
    "JOB_WORKER_THREADS": "8",
    "JOB_WORKER_LEASE_SECONDS": "2",
    "JOB_WORKER_CLEANUP_INTERVAL_SECONDS": "0.5",
    "JOB_WORKER_POLL_INTERVAL_MS": "50",
    "JOB_WORKER_BACKOFF_BASE_SECONDS": "0.2",
    "JOB_WORKER_BACKOFF_MAX_SECONDS": "2",
    "JOB_WORKER_LOG_LEVEL": "INFO",
}
LEASE = float(SETTINGS["JOB_WORKER_LEASE_SECONDS"])
CLEANUP = float(SETTINGS["JOB_WORKER_CLEANUP_INTERVAL_SECONDS"])


@dataclass
class Plan:
    jobs: int
    workers: int
    kills: int | None  # None: keep killing until the queue drains
    kill_every: tuple[float, float]
    timeout: float


FULL = Plan(jobs=10_000, workers=3, kills=None, kill_every=(2.0, 5.0), timeout=1800)
SMALL = Plan(jobs=300, workers=3, kills=2, kill_every=(1.5, 3.0), timeout=300)


def job_mix(count: int, rng: random.Random) -> list[JobSpec]:
    """Mostly quick successes; flaky, failing and slow (lease-renewing) jobs mixed in."""
    specs = []
    for i in range(count):
        roll = rng.random()
        if roll < 0.62:
            specs.append(JobSpec("demo.success", {"sleep_seconds": rng.choice([0, 0.01, 0.02])}))
        elif roll < 0.82:
            specs.append(JobSpec("demo.flaky", {"fail_until_attempt": rng.choice([2, 3])}, max_attempts=3))
        elif roll < 0.95:
            specs.append(JobSpec("demo.fail", {"error": f"planned failure {i}"}, max_attempts=2))
        else:
            specs.append(
                JobSpec("demo.slow", {"sleep_seconds": round(rng.uniform(2.5, 4.0), 2)}, max_attempts=5)
            )
    return specs


def workflow_mix(count: int, rng: random.Random) -> list[JobSpec]:
    """``count`` workflows, each fan-in or chain, as one create_jobs call's specs (parents
    named by index); one member in ten fails for good, cancelling what waits for it."""
    specs: list[JobSpec] = []

    def member(name: str) -> JobSpec:
        roll = rng.random()
        if roll < 0.1:
            return JobSpec("demo.fail", {"error": "planned"}, max_attempts=1, workflow=name)
        if roll < 0.3:
            return JobSpec("demo.flaky", {"fail_until_attempt": 2}, max_attempts=3, workflow=name)
        return JobSpec("demo.success", {"sleep_seconds": rng.choice([0, 0.01, 0.02])}, workflow=name)

    for n in range(count):
        name, first = f"chaos-{n}", len(specs)
        if n % 2 == 0:  # a fan-in: four members, their callback, and a "finally" after all five
            specs += [member(name) for _ in range(4)]
            specs.append(JobSpec("demo.success", {}, depends_on=tuple(range(first, first + 4))))
            specs.append(
                JobSpec(
                    "demo.success", {}, depends_on=tuple(range(first, first + 5)), on_parent_failure="run"
                )
            )
        else:  # a chain of five
            specs.append(member(name))
            specs += [JobSpec("demo.success", {}, depends_on=(first + k,)) for k in range(4)]
    return specs


@dataclass
class Workers:
    url: str
    logs: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    killed: dict[int, float] = field(default_factory=dict)  # pid -> wall-clock time of SIGKILL
    started: int = 0

    def start(self) -> None:
        self.started += 1
        log = open(self.logs / f"worker-{self.started}.log", "w")  # noqa: SIM115 (lives with the process)
        env = {
            **os.environ,
            **SETTINGS,
            "DATABASE_URL": self.url,
            "DEBUG": "false",
            "ENABLE_DEBUG_TOOLBAR": "false",
            "JOB_DEMO_HANDLERS": "true",  # demo types are off by default with DEBUG=false
            "AUTO_MIGRATE": "false",
        }
        self.procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "flask", "--app", "wsgi", "worker"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )

    def kill_one(self, rng: random.Random, busy_pids: set[int]) -> int | None:
        """SIGKILL a worker that holds running jobs right now (so there is something to recover)."""
        candidates = [p for p in self.procs if p.poll() is None and p.pid in busy_pids]
        if not candidates:
            return None
        proc = rng.choice(candidates)
        proc.send_signal(signal.SIGKILL)
        self.killed[proc.pid] = time.time()
        proc.wait()
        self.procs.remove(proc)
        return proc.pid

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


def _pg_ctl(pgdata: Path, *args: str) -> None:
    from pgserver._commands import pg_ctl

    user = "pgserver" if os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", *args], pgdata=pgdata, user=user, timeout=60)


def restart_postgres(pgdata: Path) -> None:
    """A fast restart: every connection of every worker breaks at once."""
    _pg_ctl(pgdata, "restart")


def stop_postgres(pgdata: Path) -> None:
    """Stop the server before pgserver's cleanup deletes its data: after a restart, pgserver's
    handle still names the first postmaster, which is gone, so its cleanup would not stop the
    new one (that one would linger until it noticed its data directory was deleted)."""
    with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
        _pg_ctl(pgdata, "stop")


def live_count(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM jobs_job WHERE status IN ('queued', 'running')").fetchone()
    return row[0]


def busy_pids(url: str) -> set[int]:
    """Process ids of the workers holding a running job (worker ids are host:pid:thread:rand)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT DISTINCT split_part(locked_by, ':', 2) FROM jobs_job WHERE status = 'running'"
        )
        return {int(pid) for (pid,) in rows if pid.isdigit()}


def check_sequence(events: list[tuple], final_status: str, final_attempts: int) -> bool:
    """Replay one job's events through the state machine; False on any impossible step."""
    state, attempt = None, 0
    for etype, eattempt in events:
        if etype == "created":
            ok = state is None
            state = "queued"
        elif etype == "claimed":
            ok = state == "queued" and eattempt == attempt + 1
            state, attempt = "running", eattempt
        elif etype in ("progress", "lease_renewed"):
            ok = state == "running" and eattempt == attempt
        elif etype == "succeeded":
            ok = state == "running" and eattempt == attempt
            state = "succeeded"
        elif etype in ("retry_scheduled", "timeout_requeued"):
            ok = state == "running" and eattempt == attempt
            state = "queued"
        elif etype == "failed":
            ok = state == "running" and eattempt == attempt
            state = "failed"
        elif etype == "manual_retry":
            ok = state == "failed"
            state, attempt = "queued", 0
        elif etype == "released":  # a waiting job's parents are done
            ok = state == "queued"
        elif etype == "cancelled":  # a parent failed: cancelled while waiting
            ok = state == "queued"
            state = "failed"
        else:
            ok = False
        if not ok:
            return False
    return state == final_status and attempt == final_attempts


def verify(url: str, killed: dict[int, float]) -> list[tuple[str, str, bool]]:
    """The checks, as (what, figure, passed) rows."""
    with psycopg.connect(url) as conn:
        total, terminal = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE status IN ('succeeded', 'failed')) FROM jobs_job"
        ).fetchone()
        double = conn.execute(
            "SELECT count(*) FROM (SELECT job_id FROM jobs_jobevent WHERE type = 'succeeded'"
            " GROUP BY job_id HAVING count(*) > 1) AS d"
        ).fetchone()[0]
        bad_success = conn.execute(
            """
            SELECT count(*) FROM jobs_jobevent AS s JOIN jobs_job AS j ON j.id = s.job_id
            WHERE s.type = 'succeeded' AND (
                s.attempt <> j.attempts OR j.status <> 'succeeded' OR NOT EXISTS (
                    SELECT 1 FROM jobs_jobevent AS c WHERE c.job_id = s.job_id AND c.type = 'claimed'
                    AND c.attempt = s.attempt AND c.worker_id = s.worker_id))
            """
        ).fetchone()[0]
        bad_rows = conn.execute(
            f"SELECT count(*) FROM jobs_job WHERE NOT (({STATUS_SHAPE_SQL}) AND ({ATTEMPTS_SQL}))"
        ).fetchone()[0]
        jobs = {
            job_id: (status, attempts)
            for job_id, status, attempts in conn.execute("SELECT id, status, attempts FROM jobs_job")
        }
        events: dict = collections.defaultdict(list)
        for job_id, etype, attempt in conn.execute(
            "SELECT job_id, type, attempt FROM jobs_jobevent ORDER BY job_id, id"
        ):
            events[job_id].append((etype, attempt))
        out_of_order = sum(
            not check_sequence(events[job_id], status, attempts)
            for job_id, (status, attempts) in jobs.items()
        )
        recoveries = conn.execute(
            "SELECT data->>'expired_worker_id', created_at FROM jobs_jobevent"
            " WHERE type IN ('timeout_requeued', 'failed') AND data ? 'expired_worker_id'"
        ).fetchall()
    waits = []
    for worker_id, recovered_at in recoveries:
        pid = int(worker_id.split(":")[1])
        if pid in killed:
            waits.append(recovered_at.timestamp() - killed[pid])
    longest = max(waits, default=0.0)
    bound = LEASE + CLEANUP + 1.0  # one poll of slack for a thread busy with its own job
    return [
        ("jobs terminal", f"{terminal}/{total} ({100 * terminal / max(total, 1):.1f} %)", terminal == total),
        ("jobs with more than one succeeded event", str(double), double == 0),
        (
            "succeeded events not of the final attempt or not by its claimer",
            str(bad_success),
            bad_success == 0,
        ),
        ("rows breaking the shape or attempts rules", str(bad_rows), bad_rows == 0),
        ("jobs whose events break the state machine", str(out_of_order), out_of_order == 0),
        (
            f"longest wait of a killed worker's job for recovery (bound {bound:.1f} s)",
            f"{longest:.2f} s over {len(waits)} recoveries",
            longest <= bound,
        ),
    ]


def verify_workflows(url: str) -> list[tuple[str, str, bool]]:
    """The workflow checks: each waiting job released at most once, only after every parent
    succeeded (or ended, under ``run``), never claimed before; cancelled iff a parent failed."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            """
            SELECT j.id, j.status, j.cancelled_at IS NOT NULL, j.on_parent_failure,
                   (SELECT count(*) FROM jobs_jobevent e WHERE e.job_id = j.id AND e.type = 'released'),
                   (SELECT min(e.id) FROM jobs_jobevent e WHERE e.job_id = j.id AND e.type = 'claimed'),
                   (SELECT bool_and(p.status = 'succeeded') FROM jobs_job p WHERE p.id = ANY(j.depends_on)),
                   (SELECT max(e.id) FROM jobs_jobevent e
                     WHERE e.job_id = ANY(j.depends_on) AND e.type IN ('succeeded', 'failed', 'cancelled'))
            FROM jobs_job j WHERE j.depends_on IS NOT NULL
            """
        ).fetchall()
    twice = sum(released > 1 for _, _, _, _, released, _, _, _ in rows)
    early = sum(
        claimed is not None and (last_end is None or claimed < last_end)
        for _, _, _, _, _, claimed, _, last_end in rows
    )
    wrong_cancel = sum(
        cancelled != (policy == "cancel" and not all_ok) for _, _, cancelled, policy, _, _, all_ok, _ in rows
    )
    never = sum(released == 0 and not cancelled for _, _, cancelled, _, released, _, _, _ in rows)
    return [
        ("waiting jobs (with parents)", str(len(rows)), len(rows) > 0),
        ("waiting jobs released more than once", str(twice), twice == 0),
        ("waiting jobs neither released nor cancelled", str(never), never == 0),
        ("waiting jobs claimed before their last parent ended", str(early), early == 0),
        ("waiting jobs cancelled but no parent failed, or the reverse", str(wrong_cancel), wrong_cancel == 0),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    parser.add_argument("--small", action="store_true", help="a few hundred jobs, two kills (CI)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--workflows", action="store_true", help="fan-ins and chains instead of lone jobs")
    args = parser.parse_args(argv)
    plan = SMALL if args.small else FULL
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix="jobqueue-chaos-"))
    logs = ROOT / "bench" / "results" / "chaos-logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    server = embedded_server(workdir / "pg", cleanup_mode="delete")
    started = time.monotonic()
    workers: Workers | None = None
    try:
        url = fresh_database("chaos", admin=libpq(server.get_uri()))
        app = make_app(url)
        with app.app_context():
            if args.workflows:
                graphs = 40 if args.small else 1_000
                for i in range(0, graphs, 100):
                    enqueue.create_jobs(workflow_mix(min(100, graphs - i), rng))
                plan = dataclasses.replace(plan, jobs=live_count(url))
            else:
                for i in range(0, plan.jobs, 1000):
                    enqueue.create_jobs(job_mix(min(1000, plan.jobs - i), rng))
        print(f"seed {seed}: {plan.jobs} jobs queued; {plan.workers} workers x 8 threads", flush=True)
        workers = Workers(url=url, logs=logs)
        for _ in range(plan.workers):
            workers.start()
        kills, restarted = 0, False
        deadline = time.monotonic() + plan.timeout
        next_kill = time.monotonic() + rng.uniform(*plan.kill_every)
        while time.monotonic() < deadline:
            live = live_count(url)
            if live == 0:
                break
            if not restarted and live <= plan.jobs * 0.6:
                print(f"restarting PostgreSQL ({live} jobs live)", flush=True)
                restart_postgres(server.pgdata)
                restarted = True
            if time.monotonic() >= next_kill and (plan.kills is None or kills < plan.kills):
                pid = workers.kill_one(rng, busy_pids(url))
                if pid is not None:
                    workers.start()
                    kills += 1
                    print(f"SIGKILL worker pid {pid} ({live} jobs live)", flush=True)
                    next_kill = time.monotonic() + rng.uniform(*plan.kill_every)
            time.sleep(0.2)
        workers.stop()
        rows = verify(url, workers.killed)
        if args.workflows:
            rows += verify_workflows(url)
        rows.insert(
            0,
            ("workers killed / PostgreSQL restarts", f"{kills} / {int(restarted)}", kills > 0 and restarted),
        )
    finally:
        if workers is not None:
            for proc in workers.procs:
                if proc.poll() is None:
                    proc.kill()
        stop_postgres(server.pgdata)
        server.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.monotonic() - started
    width = max(len(what) for what, _, _ in rows)
    print(f"\n{'check':<{width}}  {'figure':<32} result")
    for what, figure, ok in rows:
        print(f"{what:<{width}}  {figure:<32} {'ok' if ok else 'FAIL'}")
    passed = all(ok for _, _, ok in rows)
    summary = {
        "seed": seed,
        "jobs": plan.jobs,
        "seconds": round(elapsed, 1),
        "passed": passed,
        "at": datetime.now(UTC).isoformat(),
        "checks": [list(r) for r in rows],
    }
    name = ("chaos-small" if args.small else "chaos") + ("-workflows" if args.workflows else "")
    (ROOT / "bench" / "results" / f"{name}.json").write_text(json.dumps(summary, indent=2))
    print(f"\n{'PASSED' if passed else 'FAILED'} in {elapsed:.0f} s (seed {seed}, logs in {logs})")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
