"""Workflows drained by a real worker, against the same number of independent jobs.

- a fan-in: ``members`` no-op jobs, one join per 100 of them (a job waits for at most 100
  parents), and one callback waiting for the joins, so ``members + members / 100 + 1`` jobs;
- a chain: ``length`` no-op jobs, each waiting for the one before.

Each drain is timed from its first claim to its last completion (``drain.throughput``) and
set beside a drain of as many independent no-op jobs in the same run, alternating which goes
first; the ratio is graph ÷ independent. A chain runs one job at a time by its nature: its
rate is one job per hop (settle, release, wake-up, claim), not the workers' parallel rate.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec

from . import drain
from .db import make_app

JOIN = 100  # parents per join: the most one job may wait for


def fan_in_specs(members: int) -> list[JobSpec]:
    specs = [JobSpec("bench.noop", workflow="bench-fan-in") for _ in range(members)]
    joins = range(0, members, JOIN)
    specs += [JobSpec("bench.noop", depends_on=tuple(range(k, min(k + JOIN, members)))) for k in joins]
    specs.append(JobSpec("bench.noop", depends_on=tuple(range(members, members + len(joins)))))
    return specs


def chain_specs(length: int) -> list[JobSpec]:
    return [JobSpec("bench.noop", workflow="bench-chain")] + [
        JobSpec("bench.noop", depends_on=(k,)) for k in range(length - 1)
    ]


def seeder(specs: list[JobSpec]) -> Callable[[str], None]:
    def seed(url: str) -> None:
        with make_app(url).app_context():
            enqueue.create_jobs(specs)

    return seed


def versus_independent(
    url: str, specs: list[JobSpec], *, threads: int, runs: int, **env: str
) -> dict[str, Any]:
    """Drain ``specs`` and as many independent jobs ``runs`` times each, alternating; the
    medians (jobs/s), every run's ratio, and their median; and the medians of each side's CPU
    per job (``graph_cpu``, ``plain_cpu``: the worker's and the server's, ``drain.throughput``),
    which say whether the worker or the database sets a graph's pace."""
    graph: list[float] = []
    plain: list[float] = []
    ratios: list[float] = []
    cpus: dict[str, list[dict[str, float]]] = {"graph": [], "plain": []}
    for run in range(runs):
        order = ("graph", "plain") if run % 2 == 0 else ("plain", "graph")
        got = {}
        for name in order:
            seed = seeder(specs) if name == "graph" else None
            cpu: dict[str, float] = {}
            got[name] = drain.throughput(url, jobs=len(specs), threads=threads, seed=seed, cpu=cpu, **env)
            cpus[name].append(cpu)
        graph.append(got["graph"])
        plain.append(got["plain"])
        ratios.append(got["graph"] / got["plain"])
    return {
        "graph": statistics.median(graph),
        "plain": statistics.median(plain),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        "graph_cpu": drain.median_cpu(cpus["graph"]),
        "plain_cpu": drain.median_cpu(cpus["plain"]),
    }
