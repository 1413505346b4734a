"""Dashboard blueprint: server-rendered pages for operators, with HTMX fragments.

Every page works as plain HTML links and forms; a request htmx makes (``request.htmx``, from
htmx-flask) gets only the fragment that changes (polling and in-place swaps). The views read
through the store's read modules and change state only through its transitions
(``store.enqueue``, ``store.actions``, ``store.workers.remove``).
"""

# The view modules register their routes on ``bp`` when imported.
from . import alarm, audit, bulk, errors, events, guards, jobs, overview, rendering, signin, timeline, workers  # noqa: F401
from .blueprint import bp

__all__ = ["bp"]
