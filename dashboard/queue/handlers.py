"""The job-type registry: ``@handler("type")`` maps a job type to the code that runs it.

Applications register their own types in an importable module and name it in
``JOB_HANDLER_MODULES``; :func:`load_handler_modules` imports those (and the built-in demo
handlers) at start, in the web process too, so ``/api/config/`` and the create form list
exactly the types a worker will run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any

Handler = Callable[[Any], Any]  # called with the job's context; returns a JSON-able result

_registry: dict[str, Handler] = {}

BUILTIN_MODULES = ("dashboard.queue.demo",)


def handler(job_type: str) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler of ``job_type`` (the last registration wins)."""
    if not job_type or len(job_type) > 120:
        raise ValueError("a job type is 1 to 120 characters")

    def register(fn: Handler) -> Handler:
        _registry[job_type] = fn
        return fn

    return register


def get_handler(job_type: str) -> Handler | None:
    return _registry.get(job_type)


def registered_types() -> list[str]:
    """Every registered job type, sorted."""
    return sorted(_registry)


def load_handler_modules(modules: Iterable[str] = ()) -> None:
    """Import the built-in demo handlers and the application's handler modules."""
    for name in (*BUILTIN_MODULES, *modules):
        importlib.import_module(name)
