"""The web process's queue gauges: a cached snapshot turned into Prometheus metric families.

:class:`QueueCollector` reads a snapshot of the queue (``store/reads/metrics.py``: every figure
through a partial index and bounded, see there for the cost at 10M jobs) at most once per
:data:`CACHE_SECONDS`, shared by every thread of the process, so a scrape every 5 s costs the
database a few index walks per 5 s whatever the number of scrapers. When a walk reaches its
cap, its figures are lower bounds and ``jobqueue_queue_capped{status}`` is 1. The per-type
gauges keep the ``METRICS_TYPE_LABELS`` types with the most live jobs under their own ``type``
label and sum the rest (and a type actually named ``other``) under ``type="other"``
(:func:`capped_types`), so the number of series stays bounded whatever types clients send.
The per-queue gauges (``jobqueue_queue_jobs_ready{queue}``, ``..._scheduled``, ``..._running``,
``jobqueue_queue_paused{queue}``) are capped the same way by ``METRICS_QUEUE_LABELS``.

The HTTP view, ``GET /metrics`` with its access rule, is a door: ``web/metrics.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from flask import Flask
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..config import settings_of
from ..mount import EXTENSION as STATE
from ..store.reads.metrics import COUNT_CAP, FINISHED, Snapshot, read_snapshot
from . import recount

CACHE_SECONDS = 5.0
OTHER = "other"  # the type label of the types past METRICS_TYPE_LABELS


def capped_types(by_type: dict[str, dict[str, float]], keep: int) -> dict[str, dict[str, float]]:
    """``by_type`` with at most ``keep`` types of their own: those with the most live jobs
    (ready, scheduled and running; ties by name), and every other one summed into
    :data:`OTHER` (counts added, the oldest ready age the largest). A type named ``other``
    is summed there too, so no label value is used twice."""

    def live(item: tuple[str, dict[str, float]]) -> tuple[float, str]:
        figures = item[1]
        return (-(figures.get("ready", 0) + figures.get("scheduled", 0) + figures.get("running", 0)), item[0])

    ranked = sorted((item for item in by_type.items() if item[0] != OTHER), key=live)
    kept = dict(ranked[:keep])
    rest = [figures for job_type, figures in by_type.items() if job_type not in kept]
    if rest:
        other: dict[str, float] = {}
        for figures in rest:
            for name, figure in figures.items():
                if name == "oldest_ready_age":
                    other[name] = max(other.get(name, 0.0), figure)
                else:
                    other[name] = other.get(name, 0) + figure
        kept[OTHER] = other
    return kept


class QueueCollector:
    """Turns the cached :class:`Snapshot` into metric families at each scrape, in a registry
    of its own (one per app)."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._read_at = 0.0
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def snapshot(self) -> Snapshot:
        """The cached snapshot, read again once older than :data:`CACHE_SECONDS`."""
        with self._lock:  # one reader at a time; the others wait for its answer
            if self._snapshot is None or time.monotonic() - self._read_at >= CACHE_SECONDS:
                with self.app.app_context():
                    self._snapshot = read_snapshot(recount.policy_of(settings_of(self.app)))
                self._read_at = time.monotonic()
            return self._snapshot

    def clear(self) -> None:
        """Forget the cached snapshot: the next scrape reads the database."""
        with self._lock:
            self._snapshot = None

    def exposition(self) -> bytes:
        """Every metric in the Prometheus text format (reads a snapshot if the cache is old)."""
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot()
        by_type = capped_types(snap.by_type, settings_of(self.app).ops.metrics_type_labels)
        jobs = GaugeMetricFamily(
            "jobqueue_jobs",
            "Jobs by status, cancelled apart from failed (live ones capped)",
            labels=["status"],
        )
        jobs.add_metric(["queued"], snap.total("ready") + snap.total("scheduled"))
        jobs.add_metric(["running"], snap.total("running"))
        for status in FINISHED:
            if status in snap.finished:
                jobs.add_metric([status], snap.finished[status])
        yield jobs
        live = {
            "ready": ("jobqueue_jobs_ready", "Queued jobs eligible now, by type"),
            "scheduled": ("jobqueue_jobs_scheduled", "Queued jobs due later (delays, backoff), by type"),
            "waiting": (
                "jobqueue_jobs_waiting",
                "Queued jobs waiting for their parents (depends_on), by type; also within scheduled",
            ),
            "running": ("jobqueue_jobs_running", "Running jobs, by type"),
            "overdue": ("jobqueue_jobs_overdue", "Running jobs whose lease has expired, by type"),
        }
        for figure, (name, doc) in live.items():
            family = GaugeMetricFamily(name, doc, labels=["type"])
            for job_type, figures in sorted(by_type.items()):
                family.add_metric([job_type], figures.get(figure, 0))
            yield family
        age = GaugeMetricFamily(
            "jobqueue_oldest_ready_age_seconds",
            "Seconds since the longest-waiting eligible job became eligible, by type (absent: none)",
            labels=["type"],
        )
        for job_type, figures in sorted(by_type.items()):
            if "oldest_ready_age" in figures:
                age.add_metric([job_type], figures["oldest_ready_age"])
        yield age
        ages = [f["oldest_ready_age"] for f in snap.by_type.values() if "oldest_ready_age" in f]
        yield GaugeMetricFamily(
            "jobqueue_queue_oldest_ready_age_seconds",
            "Seconds since the longest-waiting eligible job of any type became eligible (0: none)",
            value=max(ages, default=0.0),
        )
        capped = GaugeMetricFamily(
            "jobqueue_queue_capped", f"1 when a live count reached its cap of {COUNT_CAP}", labels=["status"]
        )
        for status, hit in sorted(snap.capped.items()):
            capped.add_metric([status], 1.0 if hit else 0.0)
        yield capped
        by_queue = capped_types(snap.by_queue, settings_of(self.app).ops.metrics_queue_labels)
        per_queue = {
            "ready": ("jobqueue_queue_jobs_ready", "Queued jobs eligible now, by queue"),
            "scheduled": ("jobqueue_queue_jobs_scheduled", "Queued jobs due later, by queue"),
            "running": ("jobqueue_queue_jobs_running", "Running jobs, by queue"),
            "paused": ("jobqueue_queue_paused", "1 for a paused queue (other: how many of them are paused)"),
        }
        for figure, (name, doc) in per_queue.items():
            family = GaugeMetricFamily(name, doc, labels=["queue"])
            for queue, figures in sorted(by_queue.items()):
                family.add_metric([queue], figures.get(figure, 0))
            yield family
        if snap.workers_alive is not None:
            yield GaugeMetricFamily(
                "jobqueue_workers_alive",
                "Worker processes whose heartbeat (jobs_worker) is recent",
                value=snap.workers_alive,
            )
        yield from schedule_families(snap)
        if snap.finished_counted_at is not None:
            yield GaugeMetricFamily(
                "jobqueue_finished_counted_age_seconds",
                "Age of the succeeded/failed totals (jobs_finished_counts)",
                value=max(0.0, (snap.taken_at - snap.finished_counted_at).total_seconds()),
            )


def schedule_families(snap: Snapshot) -> Iterator[Metric]:
    """Per active schedule: its next run and last fire (Unix time; absent: never fired), paused,
    and the runs enqueued and the missed slots skipped (``outcome``), counted in the table by
    every worker that fired it."""
    next_run = GaugeMetricFamily(
        "jobqueue_schedule_next_run_timestamp_seconds",
        "When the schedule's next slot is due (Unix time): past by more than a tick means no worker fires it",
        labels=["schedule"],
    )
    last_fire = GaugeMetricFamily(
        "jobqueue_schedule_last_fire_timestamp_seconds",
        "When a worker last enqueued a run of the schedule (Unix time, database clock)",
        labels=["schedule"],
    )
    paused = GaugeMetricFamily(
        "jobqueue_schedule_paused", "1 while an operator has paused the schedule", labels=["schedule"]
    )
    runs = CounterMetricFamily(
        "jobqueue_schedule_runs",
        "Slots of the schedule: enqueued (fired) or left out by its missed-run policy (skipped)",
        labels=["schedule", "outcome"],
    )
    for row in snap.schedules:
        name = str(row["name"])
        if row["next_run_at"] is not None:
            next_run.add_metric([name], row["next_run_at"].timestamp())  # type: ignore[attr-defined]
        if row["last_fired_at"] is not None:
            last_fire.add_metric([name], row["last_fired_at"].timestamp())  # type: ignore[attr-defined]
        paused.add_metric([name], 1.0 if row["paused"] else 0.0)
        runs.add_metric([name, "fired"], float(row["fired_count"]))  # type: ignore[arg-type]
        runs.add_metric([name, "skipped"], float(row["skipped_count"]))  # type: ignore[arg-type]
    yield from (next_run, last_fire, paused, runs)


def init_app(app: Flask) -> None:
    """Give the app its collector (one registry and one cache per app)."""
    app.extensions[STATE].metrics = QueueCollector(app)


def collector_of(app: Flask) -> QueueCollector:
    collector: QueueCollector = app.extensions[STATE].metrics
    return collector
