"""``GET /metrics`` on the web process: queue gauges in the Prometheus exposition format.

Cost at 10M jobs: every figure is read through a partial index and bounded.

- queued jobs: one walk of ``job_claim_idx`` (queued rows only, in claim order), at most
  :data:`COUNT_CAP` entries, grouped by type into ready now / scheduled later / oldest ready;
- running jobs: one walk of ``job_timeout_idx`` (running rows only), at most
  :data:`COUNT_CAP`, grouped by type into running / overdue (lease expired);
- succeeded and failed totals: the one-row ``jobs_finished_counts`` view, recounted in the
  background (``store.stats_refresh.refresh_finished_counts``) once older than ``STATS_REFRESH_SECONDS``;
- worker processes alive: the recent rows of the small ``jobs_worker`` heartbeat table (issue 17).

When a walk reaches the cap, its figures are lower bounds taken over the first jobs in claim
(or lease) order, and ``jobqueue_queue_capped{status}`` is 1. One snapshot is cached for
:data:`CACHE_SECONDS` and shared by every thread of the process, so a scrape every 5 s costs
the database a few index walks per 5 s whatever the number of scrapers.

Access (:func:`allowed`): open while sign-in is off (development); otherwise
``Authorization: Bearer`` with ``METRICS_TOKEN`` or any ``API_TOKENS`` token (viewer or
operator). Refusals answer 401 and log the path, never a token.
"""

from __future__ import annotations

import hmac
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from flask import Flask, Response, current_app, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from sqlalchemy import text

from ..config import settings_of
from ..store.read_overview import RUNNING_SQL

COUNT_CAP = 100_000
CACHE_SECONDS = 5.0

# Index: job_claim_idx (partial, status = 'queued'), walked in its own order, at most :cap.
QUEUED_SQL = text(
    """
    SELECT type,
           count(*) FILTER (WHERE available_at <= :now) AS ready,
           count(*) FILTER (WHERE available_at > :now) AS scheduled,
           min(available_at) FILTER (WHERE available_at <= :now) AS oldest_ready
    FROM (SELECT type, available_at FROM jobs_job WHERE status = 'queued'
          ORDER BY priority DESC, available_at, created_at, id LIMIT :cap) AS q
    GROUP BY type
    """
)
# Index: job_timeout_idx (partial, status = 'running'), at most :cap.
# failed: failed for good; cancelled: failed because an operator cancelled them (apart, so a
# failure alert never counts a cancel).
FINISHED_SQL = text("SELECT succeeded, failed, cancelled, counted_at FROM jobs_finished_counts")


@dataclass
class Snapshot:
    taken_at: datetime
    by_type: dict[str, dict[str, float]] = field(default_factory=dict)
    capped: dict[str, bool] = field(default_factory=dict)
    finished: dict[str, int] = field(default_factory=dict)
    finished_counted_at: datetime | None = None
    workers_alive: int | None = None

    def total(self, figure: str) -> float:
        return sum(row.get(figure, 0) for row in self.by_type.values())


def read_snapshot(now: datetime | None = None, cap: int = COUNT_CAP) -> Snapshot:
    """Read the figures now (app context needed); see the module's notes on cost."""
    from ..extensions import db
    from ..store import stats_refresh, workers

    now = now or datetime.now(UTC)
    snap = Snapshot(taken_at=now)
    with db.engine.connect() as conn:
        queued_total = running_total = 0
        for row in conn.execute(QUEUED_SQL, {"now": now, "cap": cap}).mappings():
            figures = snap.by_type.setdefault(row["type"], {})
            figures.update(ready=row["ready"], scheduled=row["scheduled"])
            if row["oldest_ready"] is not None:
                figures["oldest_ready_age"] = max(0.0, (now - row["oldest_ready"]).total_seconds())
            queued_total += row["ready"] + row["scheduled"]
        for row in conn.execute(RUNNING_SQL, {"now": now, "cap": cap}).mappings():
            figures = snap.by_type.setdefault(row["type"], {})
            figures.update(running=row["running"], overdue=row["overdue"])
            running_total += row["running"]
        snap.capped = {"queued": queued_total >= cap, "running": running_total >= cap}
        finished = conn.execute(FINISHED_SQL).mappings().one_or_none()
    if finished is not None:
        snap.finished = {
            "succeeded": finished["succeeded"],
            "failed": finished["failed"],
            "cancelled": finished["cancelled"],
        }
        snap.finished_counted_at = finished["counted_at"]
        refresh_after = settings_of(current_app).stats_refresh_seconds
        if (now - finished["counted_at"]).total_seconds() > refresh_after:
            stats_refresh.refresh_finished_counts(wait=False)
    snap.workers_alive, _types = workers.live_job_types(now)
    return snap


class QueueCollector:
    """Turns the cached :class:`Snapshot` into metric families at each scrape."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._read_at = 0.0

    def snapshot(self) -> Snapshot:
        with self._lock:  # one reader at a time; the others wait for its answer
            if self._snapshot is None or time.monotonic() - self._read_at >= CACHE_SECONDS:
                with self.app.app_context():
                    self._snapshot = read_snapshot()
                self._read_at = time.monotonic()
            return self._snapshot

    def clear(self) -> None:
        with self._lock:
            self._snapshot = None

    def collect(self):
        snap = self.snapshot()
        jobs = GaugeMetricFamily(
            "jobqueue_jobs",
            "Jobs by status, cancelled apart from failed (live ones capped)",
            labels=["status"],
        )
        jobs.add_metric(["queued"], snap.total("ready") + snap.total("scheduled"))
        jobs.add_metric(["running"], snap.total("running"))
        for status in ("succeeded", "failed", "cancelled"):
            if status in snap.finished:
                jobs.add_metric([status], snap.finished[status])
        yield jobs
        live = {
            "ready": ("jobqueue_jobs_ready", "Queued jobs eligible now, by type"),
            "scheduled": ("jobqueue_jobs_scheduled", "Queued jobs due later (delays, backoff), by type"),
            "running": ("jobqueue_jobs_running", "Running jobs, by type"),
            "overdue": ("jobqueue_jobs_overdue", "Running jobs whose lease has expired, by type"),
        }
        for figure, (name, doc) in live.items():
            family = GaugeMetricFamily(name, doc, labels=["type"])
            for job_type, figures in sorted(snap.by_type.items()):
                family.add_metric([job_type], figures.get(figure, 0))
            yield family
        age = GaugeMetricFamily(
            "jobqueue_oldest_ready_age_seconds",
            "Seconds since the longest-waiting eligible job became eligible, by type (absent: none)",
            labels=["type"],
        )
        for job_type, figures in sorted(snap.by_type.items()):
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
        if snap.workers_alive is not None:
            yield GaugeMetricFamily(
                "jobqueue_workers_alive",
                "Worker processes whose heartbeat (jobs_worker) is recent",
                value=snap.workers_alive,
            )
        if snap.finished_counted_at is not None:
            yield GaugeMetricFamily(
                "jobqueue_finished_counted_age_seconds",
                "Age of the succeeded/failed totals (jobs_finished_counts)",
                value=max(0.0, (snap.taken_at - snap.finished_counted_at).total_seconds()),
            )


def allowed(app: Flask) -> bool:
    """The API's rule: open while sign-in is off; else METRICS_TOKEN or any API token."""
    from ..auth.session import directory_of

    settings = settings_of(app)
    if not settings.auth_required:
        return True
    scheme, _, token = (request.headers.get("Authorization") or "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return False
    expected = settings.ops.metrics_token
    if expected and hmac.compare_digest(token.encode(), expected.encode()):
        return True
    return directory_of(app).token_owner(token) is not None


def init_app(app: Flask) -> None:
    """Register ``/metrics`` with its own registry (one per app, one cache per process)."""
    registry = CollectorRegistry(auto_describe=False)
    collector = QueueCollector(app)
    registry.register(collector)
    app.extensions["jobqueue.metrics"] = collector

    def metrics() -> Response:
        if not allowed(app):
            app.logger.warning("metrics request refused: %s from %s", request.path, request.remote_addr)
            return Response(
                "Unauthorized: send Authorization: Bearer <METRICS_TOKEN or an API token>.\n",
                401,
                {"WWW-Authenticate": 'Bearer realm="job-queue"', "Content-Type": "text/plain"},
            )
        try:
            body = generate_latest(registry)
        except Exception as error:  # the database is down: say so, scrape fails as it should
            app.logger.warning("metrics unavailable: %s", type(error).__name__)
            return Response("metrics unavailable: database error\n", 503, {"Content-Type": "text/plain"})
        return Response(body, 200, {"Content-Type": CONTENT_TYPE_LATEST})

    app.add_url_rule("/metrics", "metrics", metrics, methods=["GET"])
