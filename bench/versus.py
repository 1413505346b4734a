"""``python -m bench.versus OTHER_CHECKOUT [--jobs N] [--runs N] [--threads N] [--modes M ...]``: this
checkout's drain against another checkout's, in the same run.

Both workers drain the same database (this checkout's benchmark server, migrated by this
checkout; the other checkout must read the same schema), one after the other, in one-job mode
and in batch mode (16): each run drains once with each checkout, the order alternating between
runs, so a machine that drifts moves both. Prints each drain, then per mode the median of each
checkout's drains, their ratio, and the median and range of the runs' ratios. Use it for a
change that must not cost the drain anything: on a shared machine a ratio is worth far more
than a rate.

Each drain also reports the CPU it took per job, the worker's and the database server's
(``drain.throughput``'s ``cpu``; the server's only when it runs on this machine), and each
mode their medians. ``python -m bench --versus OTHER_CHECKOUT`` runs the same comparison
(:func:`compare`) as rows of its drain section.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import drain
from .db import ROOT, fresh_database, server_url

MODES = {"one-job": {}, "batch": {"JOB_WORKER_BATCH_SIZE": "16"}}


@dataclass
class Comparison:
    """One mode's drains of both checkouts: the rates (jobs/s) and CPU per job of each, by
    checkout (``this``, ``other``), in run order, and each run's ratio this ÷ other."""

    rates: dict[str, list[float]] = field(default_factory=lambda: {"this": [], "other": []})
    cpus: dict[str, list[dict[str, float]]] = field(default_factory=lambda: {"this": [], "other": []})
    ratios: list[float] = field(default_factory=list)

    def median(self, checkout: str) -> float:
        return statistics.median(self.rates[checkout])

    def ratio(self) -> float:
        """The medians' ratio, this ÷ other."""
        return self.median("this") / self.median("other")

    def summary(self, mode: str) -> list[str]:
        pairs = self.ratios
        lines = [
            f"{mode}: this {self.median('this'):,.0f}, other {self.median('other'):,.0f} jobs/s "
            f"(medians of {len(pairs)}): {self.ratio():.2f}x; runs' ratios median "
            f"{statistics.median(pairs):.2f} ({min(pairs):.2f}-{max(pairs):.2f})"
        ]
        this_cpu, other_cpu = (drain.median_cpu(self.cpus[name]) for name in ("this", "other"))
        if "total" in this_cpu and "total" in other_cpu:
            lines += [
                f"{mode} CPU per job, medians: this {drain.describe_cpu(this_cpu)}",
                f"{mode} CPU per job, medians: other {drain.describe_cpu(other_cpu)}",
                f"{mode} CPU per job: this ÷ other {this_cpu['total'] / other_cpu['total']:.2f}x",
            ]
        return lines


def compare(
    url: str,
    other: Path,
    *,
    modes: Sequence[str],
    jobs: int,
    runs: int,
    threads: int,
    other_url: str | None = None,
) -> dict[str, Comparison]:
    """Drain ``jobs`` no-op jobs ``runs`` times per mode with this checkout's worker and with
    ``other``'s, on ``url`` (migrated by this checkout; ``other_url``: the other's database, if
    it has one of its own), the order alternating between runs; prints each drain as it ends."""
    checkouts = {"this": ROOT, "other": other.resolve()}
    urls = {"this": url, "other": other_url or url}
    compared = {mode: Comparison() for mode in modes}
    try:
        for run in range(runs):
            for mode in modes:
                order = ["this", "other"] if run % 2 == 0 else ["other", "this"]
                got = {}
                for name in order:
                    drain.ROOT = checkouts[name]  # the worker process runs from that checkout
                    cpu: dict[str, float] = {}
                    got[name] = drain.throughput(
                        urls[name], jobs=jobs, threads=threads, cpu=cpu, **MODES[mode]
                    )
                    compared[mode].rates[name].append(got[name])
                    compared[mode].cpus[name].append(cpu)
                    print(
                        f"run {run + 1}, {mode}, {name}: {got[name]:,.0f} jobs/s; {drain.describe_cpu(cpu)}",
                        flush=True,
                    )
                compared[mode].ratios.append(got["this"] / got["other"])
    finally:
        drain.ROOT = ROOT
    return compared


def own_database(other: Path) -> str:
    """A database on this benchmark server, migrated by ``other``'s own code (its schema)."""
    script = "from bench.db import fresh_database; print(fresh_database('jobqueue_versus_other'))"
    env = {**os.environ, "BENCH_DATABASE_URL": server_url()}
    python = other / ".venv" / "bin" / "python"
    found = subprocess.run(
        [str(python), "-c", script], cwd=other, env=env, check=True, capture_output=True, text=True
    )
    return found.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.versus", description=__doc__)
    parser.add_argument("other", type=Path, help="the other checkout (a git worktree)")
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain")
    parser.add_argument("--runs", type=int, default=3, help="drains per checkout and mode")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES), help="modes to drain")
    parser.add_argument(
        "--other-schema",
        action="store_true",
        help="the other checkout's schema differs: give it a database of its own on the same server, "
        "migrated by its own migrations",
    )
    args = parser.parse_args(argv)
    url = fresh_database("jobqueue_versus")
    other_url = own_database(args.other) if args.other_schema else None
    compared = compare(
        url,
        args.other,
        modes=args.modes,
        jobs=args.jobs,
        runs=args.runs,
        threads=args.threads,
        other_url=other_url,
    )
    for mode, comparison in compared.items():
        for line in comparison.summary(mode):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
