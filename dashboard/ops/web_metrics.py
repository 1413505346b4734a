"""``GET /metrics`` on the web process: queue gauges in the Prometheus exposition format.

Cost at 10M jobs: every figure is read through a partial index and bounded.

- queued jobs: one walk of ``job_claim_idx`` (queued rows only, in claim order), at most
  :data:`COUNT_CAP` entries, grouped by type into ready now / scheduled later / oldest ready;
- running jobs: one walk of ``job_timeout_idx`` (running rows only), at most
  :data:`COUNT_CAP`, grouped by type into running / overdue (lease expired);
- succeeded and failed totals, by the stats' policy (:func:`finished_totals`): counted exactly
  below ``STATS_EXACT_BELOW_ROWS``; above it, the one-row ``jobs_finished_counts`` view,
  recounted in the background (``store.stats_refresh.refresh_finished_counts``) once older than
  ``STATS_REFRESH_SECONDS``, and left out of a scrape once older than twice that: a scrape
  never publishes a figure it has not computed (a view last counted before an idle spell
  would say 0 finished jobs);
- worker processes alive: the recent rows of the small ``jobs_worker`` heartbeat table (issue 17).

When a walk reaches the cap, its figures are lower bounds taken over the first jobs in claim
(or lease) order, and ``jobqueue_queue_capped{status}`` is 1. The per-type gauges keep the
``METRICS_TYPE_LABELS`` types with the most live jobs under their own ``type`` label and sum the
rest (and a type actually named ``other``) under ``type="other"`` (:func:`capped_types`), so
the number of series stays bounded whatever types clients send. One snapshot is cached for
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
from sqlalchemy import Connection, text

from ..config import settings_of
from ..store.read_overview import RUNNING_SQL
from ..store.read_stats import StatsPolicy, is_large

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
# A small table (below the stats' exact-count size): its finished jobs counted now.
FINISHED_EXACT_SQL = text(
    "SELECT count(*) FILTER (WHERE status = 'succeeded') AS succeeded, "
    "count(*) FILTER (WHERE status = 'failed' AND cancelled_at IS NULL) AS failed, "
    "count(*) FILTER (WHERE status = 'failed' AND cancelled_at IS NOT NULL) AS cancelled FROM jobs_job"
)
FINISHED = ("succeeded", "failed", "cancelled")
OTHER = "other"  # the type label of the types past METRICS_TYPE_LABELS


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
        policy = stats_refresh.policy_of(settings_of(current_app))
        snap.finished, snap.finished_counted_at = finished_totals(conn, now, policy)
    snap.workers_alive, _types = workers.live_job_types(now)
    return snap


def finished_totals(
    conn: Connection, now: datetime, policy: StatsPolicy
) -> tuple[dict[str, int], datetime | None]:
    """The succeeded, failed and cancelled totals a scrape may publish, and when they were counted.

    Below ``policy.exact_below_rows`` (the planner's estimate, as for the stats): counted now.
    Above: the cached ``jobs_finished_counts``; once older than ``policy.refresh_seconds`` a
    recount starts in the background (``policy.on_stale``), and once older than twice that they
    are not returned (an empty dict): such a scrape leaves those series out instead of
    publishing what was counted before an idle spell. The time is returned either way, so the
    age gauge says how old the cached totals are.
    """
    if not is_large(conn, policy):
        row = conn.execute(FINISHED_EXACT_SQL).mappings().one()
        return {status: row[status] for status in FINISHED}, now
    cached = conn.execute(FINISHED_SQL).mappings().one_or_none()
    if cached is None:
        return {}, None
    age = (now - cached["counted_at"]).total_seconds()
    if age > policy.refresh_seconds and policy.on_stale is not None:
        policy.on_stale()
    if age > 2 * policy.refresh_seconds:
        return {}, cached["counted_at"]
    return {status: cached[status] for status in FINISHED}, cached["counted_at"]


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
