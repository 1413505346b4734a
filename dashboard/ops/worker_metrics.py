"""A ``flask worker`` process's own metrics, served on ``JOB_WORKER_METRICS_PORT``.

The worker's runtime calls four hooks (``runtime/runner.py``, the claims of ``one_job.py``,
``completers.py`` and ``dispatcher.py``, and ``rescuer.py``):

- :func:`attempt` around running one claimed job: ``jobqueue_worker_jobs_started_total``,
  the busy-threads gauge, and the log context of the attempt (``logs.job_scope``);
- :func:`finished` when an attempt's end is known: succeeded / retried / failed / lost
  (a stale write refused) / abandoned (left to the rescuer), per type, and the attempt's
  duration (handler and recording its end) in ``jobqueue_worker_job_duration_seconds``;
- :func:`claimed` with the round trip of each claim statement, and :func:`rescued` with the
  expired leases each rescue pass gave back (``jobqueue_worker_leases_recovered_total``).

The ``type`` label is the job's type when this worker has a handler for it, else ``other``
(:data:`OTHER`): the registered types are bounded by the deployed code, while the types a client
may send (which such a worker only fails) are not.

:class:`MetricsServer` is the worker service that serves them (prometheus_client's HTTP
endpoint, on a daemon thread), with the gauges read at scrape time: the LISTEN connection's
state and the configured threads. Metrics live in this module's :data:`REGISTRY` (one per
process), not the global default.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from .logs import job_scope

log = logging.getLogger(__name__)

REGISTRY = CollectorRegistry(auto_describe=True)
OTHER = "other"  # the type label of a job type this worker has no handler for

STARTED = Counter("jobqueue_worker_jobs_started_total", "Attempts started", ["type"], registry=REGISTRY)
SUCCEEDED = Counter("jobqueue_worker_jobs_succeeded_total", "Attempts succeeded", ["type"], registry=REGISTRY)
FAILED = Counter("jobqueue_worker_jobs_failed_total", "Attempts failed for good", ["type"], registry=REGISTRY)
RETRIED = Counter(
    "jobqueue_worker_jobs_retried_total", "Attempts failed, retry scheduled", ["type"], registry=REGISTRY
)
SNOOZED = Counter(
    "jobqueue_worker_jobs_snoozed_total", "Attempts snoozed, not counted", ["type"], registry=REGISTRY
)
LOST = Counter(
    "jobqueue_worker_jobs_lost_total",
    "Attempts whose end was refused: the lease had been recovered (stale write)",
    ["type"],
    registry=REGISTRY,
)
ABANDONED = Counter(
    "jobqueue_worker_jobs_abandoned_total",
    "Attempts whose end could not be recorded before the lease ran out (left to the rescue)",
    ["type"],
    registry=REGISTRY,
)
DURATION = Histogram(
    "jobqueue_worker_job_duration_seconds",
    "Attempt duration: handler and recording its end",
    ["type"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
    registry=REGISTRY,
)
CLAIM = Histogram(
    "jobqueue_worker_claim_seconds",
    "Round trip of a claim statement (one-job claim, batch claim, or success-and-claim)",
    ["kind"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
    registry=REGISTRY,
)
BUSY = Gauge("jobqueue_worker_busy_threads", "Threads running a job now", registry=REGISTRY)
RESCUED = Counter(
    "jobqueue_worker_leases_recovered_total",
    "Expired leases this process rescued, by what became of the job",
    ["outcome"],
    registry=REGISTRY,
)
# An attempt's end (the runtime's ``End`` values) -> its counter.
_COUNTERS = {
    "succeeded": SUCCEEDED,
    "retried": RETRIED,
    "failed": FAILED,
    "snoozed": SNOOZED,
    "lost": LOST,
    "abandoned": ABANDONED,
}


_children: dict[tuple[int, str], Any] = {}  # (id of a metric, its label) -> the labelled child


def _child(metric: Counter | Histogram, label: str) -> Any:
    """``metric.labels(label)``, looked up once per process: every attempt records three or four
    of them, and ``labels()`` validates, locks and builds a key on each call. The children are
    the metrics' own, never removed, so a cached one is the one ``labels()`` would return."""
    child = _children.get((id(metric), label))
    if child is None:
        child = _children[(id(metric), label)] = metric.labels(label)
    return child


def type_label(job_type: str, handled: bool) -> str:
    """The ``type`` label of a job: its type if this worker has its handler, else ``other``."""
    return job_type if handled else OTHER


@contextmanager
def attempt(job: Any, worker_id: str, label: str | None = None) -> Iterator[None]:
    """Wraps one claimed job's run and settle: counts it started and busy, sets the log ids.
    ``label``: its ``type`` label (:func:`type_label`; the job's type when not given)."""
    _child(STARTED, label or job.type).inc()
    BUSY.inc()
    try:
        with job_scope(job.id, job.type, job.attempts, job.locked_by or worker_id):
            yield
    finally:
        BUSY.dec()


def finished(job_type: str, end: str, seconds: float) -> None:
    """An attempt ended as ``end`` (``succeeded``, ``retried``, ``failed``, ``snoozed``, ``lost`` or
    ``abandoned``: the runtime's ``End``) after ``seconds``; ``job_type`` is its ``type``
    label (:func:`type_label`)."""
    counter = _COUNTERS.get(end)
    if counter is not None:
        _child(counter, job_type).inc()
        _child(DURATION, job_type).observe(seconds)


def claimed(kind: str, started: float) -> None:
    """A claim statement of ``kind`` that began at ``started`` (``time.monotonic()``) returned."""
    _child(CLAIM, kind).observe(time.monotonic() - started)


def rescued(result: Any) -> None:
    """A rescue pass's :class:`RescueResult`."""
    if result.requeued:
        RESCUED.labels("requeued").inc(len(result.requeued))
    if result.failed:
        RESCUED.labels("failed").inc(len(result.failed))


class MetricsServer:
    """A worker service: :data:`REGISTRY` over HTTP on ``host:port``, with the worker's
    scrape-time gauges (``listening()``: whether the LISTEN connection is up; ``threads``)."""

    name = "metrics"

    def __init__(self, port: int, host: str, *, listening: Callable[[], bool], threads: int) -> None:
        self.port, self.host, self.listening, self.threads = port, host, listening, threads
        self._server: WSGIServer | None = None
        self._gauges: list[Gauge] = []

    def start(self) -> None:
        listening = Gauge(
            "jobqueue_worker_listen_connected",
            "1 while the LISTEN connection is up; 0 while polling (lost, off, or behind a pooler)",
            registry=REGISTRY,
        )
        listening.set_function(lambda: float(self.listening()))
        threads = Gauge("jobqueue_worker_threads", "Worker threads configured", registry=REGISTRY)
        threads.set(self.threads)
        self._gauges = [listening, threads]
        self._server, _thread = start_http_server(self.port, addr=self.host, registry=REGISTRY)
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    def stop(self) -> None:
        """Close the endpoint and take the scrape-time gauges out of the registry."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for gauge in self._gauges:
            REGISTRY.unregister(gauge)
        self._gauges = []
