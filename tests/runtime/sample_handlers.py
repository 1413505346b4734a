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
