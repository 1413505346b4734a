"""``python -m bench.versus OTHER_CHECKOUT [--jobs N] [--runs N] [--threads N] [--modes M ...]``: this
checkout's drain against another checkout's, in the same run.

Both workers drain the same database (this checkout's benchmark server, migrated by this
checkout; the other checkout must read the same schema), one after the other, in one-job mode
and in batch mode (16): each run drains once with each checkout, the order alternating between
runs, so a machine that drifts moves both. Prints each drain, then per mode the median of each
checkout's drains, their ratio, and the median and range of the runs' ratios. Use it for a
change that must not cost the drain anything: on a shared machine a ratio is worth far more
than a rate.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from . import drain
from .db import ROOT, fresh_database

MODES = {"one-job": {}, "batch": {"JOB_WORKER_BATCH_SIZE": "16"}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.versus", description=__doc__)
    parser.add_argument("other", type=Path, help="the other checkout (a git worktree)")
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain")
    parser.add_argument("--runs", type=int, default=3, help="drains per checkout and mode")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES), help="modes to drain")
    args = parser.parse_args(argv)
    modes = {mode: MODES[mode] for mode in args.modes}
    checkouts = {"this": ROOT, "other": args.other.resolve()}
    url = fresh_database("jobqueue_versus")
    rates: dict[tuple[str, str], list[float]] = {(c, m): [] for c in checkouts for m in modes}
    cpus: dict[tuple[str, str], list[dict[str, float]]] = {(c, m): [] for c in checkouts for m in modes}
    ratios: dict[str, list[float]] = {m: [] for m in modes}
    try:
        for run in range(args.runs):
            for mode, env in modes.items():
                order = ["this", "other"] if run % 2 == 0 else ["other", "this"]
                got = {}
                for name in order:
                    drain.ROOT = checkouts[name]  # the worker process runs from that checkout
                    cpu: dict[str, float] = {}
                    got[name] = drain.throughput(url, jobs=args.jobs, threads=args.threads, cpu=cpu, **env)
                    rates[(name, mode)].append(got[name])
                    cpus[(name, mode)].append(cpu)
                    print(
                        f"run {run + 1}, {mode}, {name}: {got[name]:,.0f} jobs/s; {drain.describe_cpu(cpu)}",
                        flush=True,
                    )
                ratios[mode].append(got["this"] / got["other"])
    finally:
        drain.ROOT = ROOT
    for mode in modes:
        this, other = statistics.median(rates[("this", mode)]), statistics.median(rates[("other", mode)])
        pairs = ratios[mode]
        print(
            f"{mode}: this {this:,.0f}, other {other:,.0f} jobs/s (medians of {args.runs}): "
            f"{this / other:.2f}x; runs' ratios median {statistics.median(pairs):.2f} "
            f"({min(pairs):.2f}-{max(pairs):.2f})",
            flush=True,
        )
        this_cpu, other_cpu = (_median_cpu(cpus[(name, mode)]) for name in ("this", "other"))
        if "total" in this_cpu and "total" in other_cpu:
            print(f"{mode} CPU per job, medians: this {drain.describe_cpu(this_cpu)}", flush=True)
            print(f"{mode} CPU per job, medians: other {drain.describe_cpu(other_cpu)}", flush=True)
            print(
                f"{mode} CPU per job: this ÷ other {this_cpu['total'] / other_cpu['total']:.2f}x", flush=True
            )
    return 0


def _median_cpu(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per part, the median over the runs; ``total`` only where every run has the server's."""
    median = {
        part: statistics.median(run[part] for run in runs)
        for part in ("worker", "server")
        if all(part in run for run in runs)
    }
    if "server" in median:
        median["total"] = statistics.median(run["worker"] + run["server"] for run in runs)
    return median


if __name__ == "__main__":
    raise SystemExit(main())
