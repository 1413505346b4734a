"""Running it for real: metrics, structured logs, readiness, retention, the pooler.

- :mod:`.logs`: ``LOG_FORMAT`` text/json, request ids, the running attempt's ids on log lines;
- :mod:`.web_metrics`: the web process's queue gauges (served at ``GET /metrics`` by the door
  ``web/metrics.py``; their SQL is ``store/reads/metrics.py``);
- :mod:`.recount`: the web process's background recount of the cached finished totals;
- :mod:`.worker_metrics`: a worker process's counters, and the service that serves them on
  ``JOB_WORKER_METRICS_PORT``;
- :mod:`.schema`: is the database at this code's migration head (``/api/ready/``, worker start);
- :mod:`.pooling`: what changes behind PgBouncer in transaction mode (``DATABASE_DIRECT_URL``);
- :mod:`.commands`: ``flask prune``; the retention itself is ``store/lifecycle/retention.py`` (its
  service in a worker process: ``runtime/pruner.py``).

The app factory's hook is :func:`.setup.init_app`. This package's ``__init__`` imports
nothing, so ``from ..ops import worker_metrics`` costs nothing and makes no cycle. Arrows
point down: the doors and ``runtime`` import ``ops``; ``ops`` imports the store and the base
modules, never ``runtime``, ``auth`` or a door.
"""
