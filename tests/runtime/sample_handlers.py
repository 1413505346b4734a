"""An application's own job types, loaded by the worker through ``JOB_HANDLER_MODULES``.

Only the worker subprocess imports this module, so the test process's registry (which the
API and dashboard tests read) keeps the built-in types only.
"""

from __future__ import annotations

import os
from typing import Any

from dashboard.runtime.handlers import JobContext, handler


@handler("sample.echo")
def echo(ctx: JobContext) -> dict[str, Any]:
    ctx.progress(100, "echoing")
    return {"echo": ctx.payload, "attempt": ctx.attempt, "worker_id": ctx.worker_id, "pid": os.getpid()}


@handler("sample.gather")
def gather(ctx: JobContext) -> dict[str, Any]:
    """A workflow step: its payload's ``n`` plus every parent's ``sum``, and whose results it saw."""
    parents = ctx.parent_results
    total = ctx.payload.get("n", 0) + sum((result or {}).get("sum", 0) for result in parents.values())
    return {"sum": total, "parents": sorted(parents)}
