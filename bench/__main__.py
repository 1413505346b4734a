"""``python -m bench [--smoke] [--only SECTION ...] [--runs N] [--versus CHECKOUT]``: run and print
the benchmarks.

Sections: ceiling, drain, processes (``flask worker --processes 2`` against one process with as
many threads in all: no-op, CPU-bound and I/O-bound handlers), workflows (a fan-in to one
callback and a chain, each against as many independent jobs), pickup, enqueue (with
``POST /api/jobs/`` beside the stack's own ceiling, ``bench/enqueue_ceiling.py``), claim, pages,
prune (retention while a worker drains; ``--prune-total``/``--prune-jobs``/``--prune-queue``
size it). Each throughput figure is also given
as a ratio to the pgbench ceiling measured on the same server in the same run, or to the peer
its row names (pgqueuer on its asyncpg driver: draining, and enqueueing one or 1,000 jobs per
call, when ``bench/requirements.txt`` is installed). The full run takes about half an hour on
2 cores (seeding 10M jobs and 30M events dominates); ``--smoke`` uses tiny sizes and one thread
count, and takes about two minutes: CI runs it so the benchmark keeps working. ``--versus``
names another checkout (a git worktree of the commit before a change): the drain section then
also drains with that checkout's worker, alternating with this one's, and gives the same-run
ratios (``bench.versus``). Every drain row also keeps the CPU per job it took, the worker's
and the local server's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from dashboard import upgrade_database
from dashboard.store.reads import stats_refresh

from . import api_enqueue, ceiling, claim, drain, enqueue, enqueue_ceiling, flow, pages, workflows
from .db import (
    ROOT,
    fresh_database,
    make_app,
    remove_backlog,
    seed_backlog,
    seed_finished,
    server_url,
    spread_backlog_database,
)
from .versus import compare as compare_checkouts


@dataclass(frozen=True)
class Sizes:
    drain_jobs: int
    ceiling_jobs: int
    threads: tuple[int, ...]
    pickup_samples: int
    enqueue_jobs: int
    claim_small: int
    claim_large: int
    page_jobs: int
    page_samples: int
    backlog_queued: int
    backlog_running: int
    spread_total: int  # the spread backlog: jobs in its own database
    spread_queued: int  # of them queued, one every total // queued rows, across 8 types
    fan_in: int = 10_000  # the workflows section: members of the fan-in to one callback
    chain: int = 1_000  # and the chain's length


FULL = Sizes(
    10_000,
    20_000,
    (1, 4, 8, 16),
    60,
    5_000,
    10_000,
    1_000_000,
    10_000_000,
    20,
    1_000_000,
    100,
    2_000_000,
    100_000,
)
SMOKE = Sizes(300, 400, (4,), 5, 200, 100, 1_000, 3_000, 3, 400, 10, 3_000, 150, 200, 20)
SECTIONS = (
    "ceiling",
    "drain",
    "processes",
    "workflows",
    "pickup",
    "enqueue",
    "claim",
    "queues",
    "pages",
    "prune",
)
# prune section: (finished jobs seeded, succeeded jobs pruned, queued jobs drained per phase)
PRUNE_FULL, PRUNE_SMOKE = (10_000_000, 1_000_000, 200_000), (3_000, 1_000, 300)
BATCH = {"JOB_WORKER_BATCH_SIZE": "16"}
BATCH_LARGE = {"JOB_WORKER_BATCH_SIZE": "64"}
ASYNC_COMMIT = "-c synchronous_commit=off"  # libpq's PGOPTIONS: for every session of the worker


def large_database(finished: int, *, reseed: bool) -> tuple[str, float]:
    """The database of the large sections: ``finished`` jobs and 3 events each, seeded once."""
    name = f"jobqueue_bench_{finished}"
    admin = server_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    if exists and not reseed:
        url = make_url(admin).set(database=name).render_as_string(False)
        upgrade_database(make_app(url))  # a database seeded by an older version gets new indexes
        return url, 0.0
    started = time.monotonic()
    url = fresh_database(name)
    seed_finished(url, finished, events_per_job=3)
    return url, time.monotonic() - started


class Figure(float):
    """A median of runs that remembers its spread (min and max of the runs)."""

    low: float
    high: float


def median_of(runs: int, measure) -> Figure:
    return figure_of([measure() for _ in range(runs)])


def figure_of(values: list[float]) -> Figure:
    """The median of ``values``, carrying their spread."""
    figure = Figure(statistics.median(values))
    figure.low, figure.high = min(values), max(values)
    return figure


def jobs_s(rate: float) -> str:
    """``1,234 jobs/s (1,100-1,300)``: the median and, over several runs, their spread."""
    spread = (
        f" ({rate.low:,.0f}-{rate.high:,.0f})" if isinstance(rate, Figure) and rate.low != rate.high else ""
    )
    return f"{rate:,.0f} jobs/s{spread}"


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    system = f"{platform.system()} {platform.release()}"
    return f"{os.cpu_count()} cores, {cpu}, {system}, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    parser.add_argument("--only", nargs="*", choices=SECTIONS, help="run only these sections")
    parser.add_argument("--runs", type=int, default=None, help="runs per throughput figure (median)")
    parser.add_argument("--reseed", action="store_true", help="rebuild the large database")
    parser.add_argument(
        "--versus",
        type=Path,
        metavar="CHECKOUT",
        help="drain section: also drain with another checkout's worker, alternating, for same-run ratios",
    )
    parser.add_argument("--prune-total", type=int, help="prune section: finished jobs seeded (10M)")
    parser.add_argument("--prune-jobs", type=int, help="prune section: succeeded jobs pruned (1M)")
    parser.add_argument("--prune-queue", type=int, help="prune section: jobs drained per phase (200k)")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    runs = args.runs or (1 if args.smoke else 3)
    wanted = set(args.only or SECTIONS)
    url = fresh_database()
    app = make_app(url)
    results: dict[str, object] = {"machine": machine(), "mode": "smoke" if args.smoke else "full"}
    rows: list[tuple[str, str, str]] = []

    def row(what: str, value: str, ratio: str = "") -> None:
        rows.append((what, value, ratio))
        print(f"{what:<84} {value:>28} {ratio:>6}", flush=True)

    started = time.monotonic()
    base = None
    if "ceiling" in wanted or "drain" in wanted:
        base = median_of(runs, lambda: ceiling.run(url, jobs=sizes.ceiling_jobs))
        with_events = median_of(runs, lambda: ceiling.run(url, jobs=sizes.ceiling_jobs, events=True))
        batched = median_of(runs, lambda: ceiling.run(url, jobs=sizes.ceiling_jobs, batch=10))
        results["ceiling"] = {"bare": base, "events": with_events, "batch10": batched}
        row("pgbench ceiling: claim txn + completion txn, 1 job", jobs_s(base), "1.00")
        row(
            "pgbench, same with the two event inserts",
            jobs_s(with_events),
            f"{with_events / base:.2f}",
        )
        row("pgbench, 10 jobs per claim and per completion", jobs_s(batched), f"{batched / base:.2f}")
    if "drain" in wanted:
        drained = {}
        cpu_per_job: dict[str, dict[str, float]] = {}  # µs of CPU per job, worker and server
        for mode, env in (("one-job", {}), ("batch", BATCH)):
            for threads in sizes.threads:
                cpus: list[dict[str, float]] = []

                def measure(t: int = threads, e: dict[str, str] = env, cpus: list = cpus) -> float:
                    cpus.append({})
                    return drain.throughput(url, jobs=sizes.drain_jobs, threads=t, cpu=cpus[-1], **e)

                rate = median_of(runs, measure)
                drained[f"{mode}/{threads}"] = rate
                cpu_per_job[f"{mode}/{threads}"] = drain.median_cpu(cpus)
                row(
                    f"flask worker, {mode} mode, {threads} threads",
                    jobs_s(rate),
                    f"{rate / base:.2f}",
                )
                print(
                    f"  CPU per job, medians: {drain.describe_cpu(cpu_per_job[f'{mode}/{threads}'])}",
                    flush=True,
                )
        # Not a default: what an operator who accepts losing the last transitions in a database
        # crash (docs/performance.md, "Asynchronous commit") gets from batch mode at the most threads.
        threads = max(sizes.threads)
        rate = median_of(
            runs,
            lambda: drain.throughput(
                url, jobs=sizes.drain_jobs, threads=threads, **BATCH, PGOPTIONS=ASYNC_COMMIT
            ),
        )
        drained[f"batch-async-commit/{threads}"] = rate
        row(
            f"flask worker, batch mode, {threads} threads, synchronous_commit off",
            jobs_s(rate),
            f"{rate / base:.2f}",
        )
        # A larger batch is also more jobs claimed ahead of the threads (runtime/dispatcher.py lanes).
        rate = median_of(
            runs, lambda: drain.throughput(url, jobs=sizes.drain_jobs, threads=threads, **BATCH_LARGE)
        )
        drained[f"batch-64/{threads}"] = rate
        row(f"flask worker, batch mode of 64, {threads} threads", jobs_s(rate), f"{rate / base:.2f}")
        try:
            from .contenders import pgqueuer_throughput
        except ImportError:  # bench/requirements.txt not installed (CI's smoke run)
            pgqueuer_throughput = None
        peer = None
        if pgqueuer_throughput is not None:
            for driver in ("asyncpg", "psycopg"):
                rate = median_of(
                    runs, lambda d=driver: pgqueuer_throughput(server_url(), jobs=sizes.drain_jobs, driver=d)
                )
                drained[f"pgqueuer-{driver}"] = rate
                peer = peer or rate  # asyncpg first: pgqueuer at its best is the contender
                row(
                    f"pgqueuer 1.6 defaults, {driver} driver, 1 process",
                    jobs_s(rate),
                    f"{rate / base:.2f}",
                )
        # The rows the targets are judged by, each with its same-run ratio.
        top = max(sizes.threads)
        noop_one = drained[f"one-job/{top}"]
        noop_batch = drained[f"batch/{top}"]
        # demo.success against a no-op drained just before it, pair by pair: the ratio of each
        # pair, then their median (a machine that drifts between the two rows moves both).
        pairs = [
            (
                drain.throughput(url, jobs=sizes.drain_jobs, threads=top),
                drain.throughput(url, jobs=sizes.drain_jobs, threads=top, job=drain.DEMO_SUCCESS),
            )
            for _ in range(runs)
        ]
        demo_one = figure_of([demo for _, demo in pairs])
        demo_ratio = figure_of([demo / noop for noop, demo in pairs])
        demo_batch = median_of(
            runs,
            lambda: drain.throughput(
                url, jobs=sizes.drain_jobs, threads=top, job=drain.DEMO_SUCCESS, **BATCH
            ),
        )
        drained[f"one-job-demo/{top}"], drained[f"batch-demo/{top}"] = demo_one, demo_batch
        drained[f"one-job-demo-ratio/{top}"] = demo_ratio
        versus = "pgqueuer asyncpg"
        row(
            f"one-job mode, {top} threads, no-op, vs pgbench ceiling",
            jobs_s(noop_one),
            f"{noop_one / base:.2f}",
        )
        if peer:
            row(
                f"batch mode, {top} threads, no-op, vs {versus}",
                jobs_s(noop_batch),
                f"{noop_batch / peer:.2f}",
            )
            large = drained[f"batch-64/{top}"]
            row(f"batch mode of 64, {top} threads, no-op, vs {versus}", jobs_s(large), f"{large / peer:.2f}")
        row(
            f"one-job mode, {top} threads, demo.success, vs a no-op drained beside it",
            jobs_s(demo_one),
            f"{demo_ratio:.2f}",
        )
        row("  (those pairs' ratios, lowest-highest)", f"{demo_ratio.low:.2f}-{demo_ratio.high:.2f}")
        if peer:
            row(
                f"batch mode, {top} threads, demo.success, vs {versus}",
                jobs_s(demo_batch),
                f"{demo_batch / peer:.2f}",
            )
        # Ten every-minute schedules declared (bench/schedules.py) against none, pair by pair:
        # the scheduler's due check each second and its fires must not slow the claims.
        schedule_pairs = [
            (
                drain.throughput(url, jobs=sizes.drain_jobs, threads=top),
                drain.throughput(url, jobs=sizes.drain_jobs, threads=top, **drain.WITH_SCHEDULES),
            )
            for _ in range(runs)
        ]
        scheduled = figure_of([rate for _, rate in schedule_pairs])
        scheduled_ratio = figure_of([rate / plain for plain, rate in schedule_pairs])
        drained[f"one-job-ten-schedules/{top}"] = scheduled
        drained[f"one-job-ten-schedules-ratio/{top}"] = scheduled_ratio
        row(
            f"one-job mode, {top} threads, no-op, ten schedules declared, vs none beside it",
            jobs_s(scheduled),
            f"{scheduled_ratio:.2f}",
        )
        row(
            "  (those pairs' ratios, lowest-highest)", f"{scheduled_ratio.low:.2f}-{scheduled_ratio.high:.2f}"
        )
        results["drain"] = drained
        results["drain_cpu_us_per_job"] = cpu_per_job
        if args.versus is not None:
            # The same drain with another checkout's worker (the commit before a change), in
            # the same run: the ratio a change that must not cost the drain is judged by.
            compared = compare_checkouts(
                url, args.versus, modes=("one-job", "batch"), jobs=sizes.drain_jobs, runs=runs, threads=top
            )
            results["versus"] = {"checkout": str(args.versus), **{m: asdict(c) for m, c in compared.items()}}
            for mode, comparison in compared.items():
                pairs = figure_of(comparison.ratios)
                row(
                    f"{mode} mode, {top} threads, no-op, vs {args.versus.name}'s worker (medians)",
                    f"{comparison.median('this'):,.0f} / {comparison.median('other'):,.0f} jobs/s",
                    f"{comparison.ratio():.2f}",
                )
                row(
                    "  (those pairs' ratios, lowest-highest; their median)",
                    f"{pairs.low:.2f}-{pairs.high:.2f}",
                    f"{pairs:.2f}",
                )
    if "processes" in wanted:
        # flask worker --processes 2 against one process with as many threads in all, pair by
        # pair (docs/scaling.md): the ratio of each pair, then their median.
        total = max(sizes.threads)
        compared: dict[str, dict[str, object]] = {}
        for name, job, jobs, threads in (
            ("no-op", ("bench.noop", "{}"), sizes.drain_jobs, total),
            ("CPU-bound, 5 ms of Python each", drain.CPU_5MS, max(100, sizes.drain_jobs // 10), 4),
            ("I/O-bound, waits 20 ms each", drain.SLEEP_20MS, max(100, sizes.drain_jobs // 5), total),
        ):
            pairs, cpus = [], {"one": [], "two": []}
            for _ in range(runs):
                cpus["one"].append({})
                cpus["two"].append({})
                pairs.append(
                    (
                        drain.throughput(url, jobs=jobs, threads=threads, job=job, cpu=cpus["one"][-1]),
                        drain.throughput(
                            url,
                            jobs=jobs,
                            threads=threads // 2,
                            job=job,
                            cpu=cpus["two"][-1],
                            JOB_WORKER_PROCESSES="2",
                        ),
                    )
                )
            one, two = figure_of([a for a, _ in pairs]), figure_of([b for _, b in pairs])
            ratio = figure_of([b / a for a, b in pairs])
            cpu = {key: drain.median_cpu(runs_cpu) for key, runs_cpu in cpus.items()}
            compared[name] = {"one": one, "two": two, "ratio": ratio, "cpu_us_per_job": cpu}
            row(f"{name}: 1 worker process of {threads} threads", jobs_s(one))
            print(f"  CPU per job, medians: {drain.describe_cpu(cpu['one'])}", flush=True)
            row(f"  2 processes of {threads // 2} threads, vs 1 beside it", jobs_s(two), f"{ratio:.2f}")
            print(f"  CPU per job, medians: {drain.describe_cpu(cpu['two'])}", flush=True)
            row("    (those pairs' ratios, lowest-highest)", f"{ratio.low:.2f}-{ratio.high:.2f}")
        results["processes"] = compared
    if "workflows" in wanted:
        # A fan-in (one join per 100 members, one callback over the joins) and a chain, each
        # against as many independent no-op jobs drained beside it (bench/workflows.py).
        top = max(sizes.threads)
        graphs: dict[str, object] = {}
        for name, specs in (
            (f"fan-in of {sizes.fan_in:,} to one callback", workflows.fan_in_specs(sizes.fan_in)),
            (f"chain of {sizes.chain:,}", workflows.chain_specs(sizes.chain)),
        ):
            for mode, env in (("one-job", {}), ("batch", BATCH)):
                got = workflows.versus_independent(url, specs, threads=top, runs=runs, **env)
                graphs[f"{name}/{mode}"] = got
                ratios = got["ratios"]
                assert isinstance(ratios, list)
                row(
                    f"{name} ({len(specs):,} jobs), {mode} mode, {top} threads, vs as many independent",
                    f"{got['graph']:,.0f} / {got['plain']:,.0f} jobs/s",
                    f"{got['ratio']:.2f}",
                )
                row("  (those pairs' ratios, lowest-highest)", f"{min(ratios):.2f}-{max(ratios):.2f}")
                for side, label in (("graph", "graph"), ("plain", "independent")):
                    cpu_of = drain.describe_cpu(got[f"{side}_cpu"])
                    print(f"  CPU per job, medians: {label} {cpu_of}", flush=True)
        results["workflows"] = graphs
    if "pickup" in wanted:
        p50, p95 = drain.pickup_latency(app, url, samples=sizes.pickup_samples)
        results["pickup_ms"] = {"p50": p50, "p95": p95}
        row("pickup latency into an idle worker, p50 / p95", f"{p50:.1f} / {p95:.1f} ms")
    if "enqueue" in wanted:
        single = median_of(runs, lambda: enqueue.single(app, url, jobs=sizes.enqueue_jobs))
        held = median_of(runs, lambda: enqueue.single(app, url, jobs=sizes.enqueue_jobs, held=True))
        bulk = median_of(runs, lambda: enqueue.bulk(app, url, jobs=sizes.enqueue_jobs * 10))
        api_single = median_of(runs, lambda: api_enqueue.single(url, jobs=sizes.enqueue_jobs))
        # The stack's own ceiling: a minimal Flask + psycopg app, same statement, same gunicorn
        # settings, alternating with POST /api/jobs/ run by run (bench/enqueue_ceiling.py).
        versus_minimal = enqueue_ceiling.compare(url, jobs=sizes.enqueue_jobs, runs=runs)
        api_bulk = median_of(runs, lambda: api_enqueue.bulk(url, jobs=sizes.enqueue_jobs * 10))
        api_bulk_two = median_of(runs, lambda: api_enqueue.bulk(url, jobs=sizes.enqueue_jobs * 10, clients=2))
        # The same into freshly emptied and analyzed tables, gunicorn alone: each run beside a
        # warm one, and the ratio of each pair (the rate must not depend on a worker's rescuer).
        cold_pairs = [
            (
                api_enqueue.bulk(url, jobs=sizes.enqueue_jobs * 4),
                api_enqueue.bulk(url, jobs=sizes.enqueue_jobs * 4, cold=True),
            )
            for _ in range(runs)
        ]
        api_bulk_cold = figure_of([cold for _, cold in cold_pairs])
        api_bulk_cold_ratio = figure_of([cold / warm for warm, cold in cold_pairs])
        results["enqueue"] = {
            "single": single,
            "single_held": held,
            "bulk": bulk,
            "api_single": api_single,
            "api_bulk": api_bulk,
            "api_bulk_two_clients": api_bulk_two,
            "api_bulk_cold": api_bulk_cold,
            "api_bulk_cold_ratio": api_bulk_cold_ratio,
            "api_single_vs_minimal": versus_minimal,
        }
        try:
            from .contenders import ENQUEUE_CHUNK, pgqueuer_enqueue_rate
        except ImportError:  # bench/requirements.txt not installed (CI's smoke run)
            pgqueuer_enqueue_rate = None
        # The contender rows: pgqueuer's own enqueue on its asyncpg driver, one held connection.
        one = many = None
        if pgqueuer_enqueue_rate is not None:
            one = median_of(
                runs, lambda: pgqueuer_enqueue_rate(server_url(), jobs=sizes.enqueue_jobs, per_call=1)
            )
            many = median_of(
                runs,
                lambda: pgqueuer_enqueue_rate(
                    server_url(), jobs=sizes.enqueue_jobs * 10, per_call=ENQUEUE_CHUNK
                ),
            )
            keyed = median_of(
                runs,
                lambda: pgqueuer_enqueue_rate(
                    server_url(), jobs=sizes.enqueue_jobs * 10, per_call=ENQUEUE_CHUNK, keyed=True
                ),
            )
            results["enqueue"].update(pgqueuer_single=one, pgqueuer_bulk=many, pgqueuer_bulk_keyed=keyed)

        def versus(rate: float, peer: float | None) -> str:
            return f"{rate / peer:.2f}" if peer else ""

        single_peer = " vs pgqueuer asyncpg, 1 per call" if one else ""
        bulk_peer = " vs pgqueuer asyncpg, 1,000 per call" if many else ""
        row(
            f"POST /api/jobs/, one keep-alive client, gunicorn (Procfile){single_peer}",
            jobs_s(api_single),
            versus(api_single, one),
        )
        paired = {key: figure_of(values) for key, values in versus_minimal.items()}
        row("  POST /api/jobs/ again, beside the minimal endpoint, alternating", jobs_s(paired["product"]))
        row("  minimal Flask + psycopg endpoint, same statement, same gunicorn", jobs_s(paired["minimal"]))
        row(
            "  POST /api/jobs/ vs the minimal endpoint, target >= 0.8 (pairs' lowest-highest)",
            f"{paired['ratios'].low:.2f}-{paired['ratios'].high:.2f}",
            f"{paired['ratios']:.2f}",
        )
        row(
            "  web server CPU per job, POST /api/jobs/ / minimal endpoint",
            f"{paired['product_cpu']:,.0f} / {paired['minimal_cpu']:,.0f} µs",
            f"{paired['product_cpu'] / paired['minimal_cpu']:.2f}",
        )
        row(f"enqueue.create_job, held connection{single_peer}", jobs_s(held), versus(held, one))
        row("enqueue.create_job, pooled connection", jobs_s(single), versus(single, one))
        row(
            f"POST /api/jobs/bulk/, 1,000 per call, idempotency keys{bulk_peer}",
            jobs_s(api_bulk),
            versus(api_bulk, many),
        )
        row("  the same, two clients posting at once", jobs_s(api_bulk_two), versus(api_bulk_two, many))
        row(
            f"  the same, {sizes.enqueue_jobs * 4:,} jobs into emptied, analyzed tables, gunicorn alone, "
            "vs a warm run beside it",
            jobs_s(api_bulk_cold),
            f"{api_bulk_cold_ratio:.2f}",
        )
        spread = f"{api_bulk_cold_ratio.low:.2f}-{api_bulk_cold_ratio.high:.2f}"
        row("    (those pairs' ratios, lowest-highest)", spread)
        row(f"enqueue.create_jobs, 1,000 per call{bulk_peer}", jobs_s(bulk), versus(bulk, many))
        if one and many:
            row("pgqueuer 1.6 enqueue, asyncpg, 1 per call, held connection", jobs_s(one), "1.00")
            row("pgqueuer 1.6 enqueue, asyncpg, 1,000 per call", jobs_s(many), "1.00")
            row("  the same with dedupe keys (on_conflict skip)", jobs_s(keyed), versus(keyed, many))
    if "claim" in wanted or "pages" in wanted:
        # The large sections share one database, seeded once and kept between runs.
        large_url, seeded = large_database(sizes.page_jobs, reseed=args.reseed)
        large_app = make_app(large_url)
        if seeded:
            row(f"seeding {sizes.page_jobs:,} finished jobs and their events", f"{seeded:.0f} s")
    if "claim" in wanted:
        claimed = claim.run(large_app, large_url, small=sizes.claim_small, large=sizes.claim_large)
        results["claim_ms"] = claimed
        for label, (p50, p95) in claimed.items():
            row(f"claim with {label}, {sizes.page_jobs:,} finished, p50 / p95", f"{p50:.2f} / {p95:.2f} ms")
    if "queues" in wanted:
        # Named queues: the claim over 20 queues at 10k and 1M queued (the drain database), and
        # an unlimited queue's drain beside a queue held at its concurrency limit, vs alone.
        flow_app = make_app(url)
        across = flow.claim_across(flow_app, url, small=sizes.claim_small, large=sizes.claim_large)
        results["claim_across_queues_ms"] = across
        for label, (p50, p95) in across.items():
            row(f"claim with {label}, p50 / p95", f"{p50:.2f} / {p95:.2f} ms")
        (small_all, _), (small_named, _), (large_all, _), (large_named, _) = across.values()
        row("  every queue served: the larger / the smaller (target <= 1.5)", f"{large_all / small_all:.2f}")
        row("  the 20 named: the larger / the smaller (target <= 1.5)", f"{large_named / small_named:.2f}")
        top = max(sizes.threads)
        for mode, env in (("one-job", {}), ("batch", BATCH)):
            beside = flow.beside_limited(url, jobs=sizes.drain_jobs, threads=top, runs=runs, **env)
            results[f"beside_limited/{mode}"] = beside
            row(
                f"{mode} mode, {top} threads: an unlimited queue beside one at its limit, vs alone",
                f"{beside['beside_full']:,.0f} / {beside['solo']:,.0f} jobs/s",
                f"{beside['ratio']:.2f}",
            )
            row(
                f"{mode} mode, {top} threads: the same beside a limited queue with nothing due",
                f"{beside['beside_idle']:,.0f} / {beside['solo']:,.0f} jobs/s",
                f"{beside['idle_ratio']:.2f}",
            )
    if "pages" in wanted:
        with large_app.app_context():
            stats_refresh.refresh_finished_counts()
        long_events = 1_000 if args.smoke else 100_000  # the long job's timeline (pages.long_job)
        waiting = 200 if args.smoke else 100_000  # jobs waiting for a parent (pages.seed_workflows)
        measured = pages.measure(
            large_app, large_url, samples=sizes.page_samples, long_events=long_events, waiting=waiting
        )
        results["pages_ms"] = measured
        for path, (p50, p95, status) in measured.items():
            row(f"GET {path} ({status}), p50 / p95", f"{p50:.1f} / {p95:.1f} ms")
        # The backlog scenario: the same pages with a queue that has fallen behind,
        # added to the large database in place and removed afterwards.
        seed_backlog(large_url, sizes.backlog_queued, sizes.backlog_running)
        try:
            backlog = pages.measure(large_app, large_url, samples=sizes.page_samples, long_events=long_events)
        finally:
            remove_backlog(large_url)
        results["pages_backlog_ms"] = backlog
        label = f"{sizes.backlog_queued:,} queued, {sizes.backlog_running} running"
        for path, (p50, p95, status) in backlog.items():
            row(f"backlog ({label}): GET {path} ({status}), p50 / p95", f"{p50:.1f} / {p95:.1f} ms")
        # A backlog spread through the table (db.seed_spread_backlog): its own database, where
        # the queued rows sit on most heap pages, as in a table that kept finishing work while
        # the queue grew, and those pages are not all-visible.
        spread_url, spread_seeded = spread_backlog_database(
            sizes.spread_total, sizes.spread_queued, reseed=args.reseed
        )
        if spread_seeded:
            row(f"seeding the spread backlog ({sizes.spread_total:,} jobs)", f"{spread_seeded:.0f} s")
        spread_app = make_app(spread_url)
        with spread_app.app_context():
            stats_refresh.refresh_finished_counts()
        spread = pages.measure(spread_app, spread_url, samples=sizes.page_samples)
        results["pages_spread_ms"] = spread
        label = f"{sizes.spread_total:,} jobs, {sizes.spread_queued:,} queued spread through the table"
        for path, (p50, p95, status) in spread.items():
            row(f"spread backlog ({label}): GET {path} ({status}), p50 / p95", f"{p50:.1f} / {p95:.1f} ms")
    if "prune" in wanted:
        from . import prune

        default = PRUNE_SMOKE if args.smoke else PRUNE_FULL
        total, pruned, queue = (
            args.prune_total or default[0],
            args.prune_jobs or default[1],
            args.prune_queue or default[2],
        )
        figures = prune.run(total=total, prune=min(pruned, total), queue=queue)
        results["prune"] = figures
        without, during = figures["drain_without"], figures["drain_during"]
        row(
            f"prune {figures['pruned_jobs']:,} succeeded jobs ({figures['pruned_events']:,} events) "
            f"of {total:,}",
            f"{figures['prune_seconds']:.1f} s",
        )
        row("drain without pruning, 4 threads", f"{without['jobs_per_second']:,.0f} jobs/s")
        row("drain while pruning, 4 threads", f"{during['jobs_per_second']:,.0f} jobs/s")
        row(
            "claim p95 without / while pruning (histogram estimate)",
            f"{without['claim_p95_ms']:.2f} / {during['claim_p95_ms']:.2f} ms",
        )
    results["seconds"] = time.monotonic() - started
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / f"{results['mode']}.json").write_text(json.dumps(results, indent=2, default=str))
    header = "| what | result | same-run ratio (to the ceiling, or the row's peer) |\n| --- | --- | --- |\n"
    table = header + "\n".join(f"| {w} | {v} | {r} |" for w, v, r in rows)
    (out / f"{results['mode']}.md").write_text(f"Machine: {results['machine']}\n\n{table}\n")
    print(f"\n{results['machine']}; {results['seconds']:.0f} s; tables in {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
