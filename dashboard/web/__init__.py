"""Dashboard blueprint: server-rendered pages for operators, with HTMX fragments.

Every page works as plain HTML links and forms; a request htmx makes (``request.htmx``, from
htmx-flask) gets only the fragment that changes (polling and in-place swaps). The views read
through ``store.read_jobs`` / ``store.read_stats`` and change state only through
``store.service``. ``GET /metrics`` (:mod:`.metrics`) is registered on the app itself, at the
root, by the app factory.
"""

# The view modules register their routes on ``bp`` when imported.
from . import (  # noqa: F401  # noqa: F401
    alarm,
    audit,
    bulk,
    errors,
    events,
    guards,
    jobs,
    metrics,
    overview,
    queues,
    rendering,
    schedules,
    signin,
    timeline,
    workers,
)
from .blueprint import bp

__all__ = ["bp", "metrics"]
