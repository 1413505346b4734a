"""A PostgreSQL job queue with a Flask operations dashboard.

- :class:`JobQueue` (:mod:`.extension`): the queue as a Flask extension, mounted in any app;
- :func:`create_app` (:mod:`.app`): the standalone app, which mounts it at the root;
- :func:`enqueue`, :func:`enqueue_many`, :func:`handler`, :func:`schedule`, :class:`JobContext`
  (:mod:`.jobs`, the public Python API for application code).
"""

from . import api, cli, web  # noqa: F401  (the doors: each registers how it mounts, extension.door)
from .app import create_app
from .extension import JobQueue
from .jobs import JobContext, enqueue, enqueue_many, handler, schedule
from .migrating import upgrade_database

__all__ = [
    "JobContext",
    "JobQueue",
    "create_app",
    "enqueue",
    "enqueue_many",
    "handler",
    "schedule",
    "upgrade_database",
]
