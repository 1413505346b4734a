"""Job types with a per-attempt deadline, loaded only by the worker subprocess of the tests
(``JOB_HANDLER_MODULES``), so the test process's registry keeps the built-in types only."""

from __future__ import annotations

import time
from typing import Any

from dashboard.jobs import JobContext, handler


@handler("pyapi.overrun", max_attempts=1, timeout=1)
def overrun(ctx: JobContext) -> dict[str, Any]:
    """Runs past its deadline without looking at ``ctx``, then returns a result too late."""
    time.sleep(float(ctx.payload["sleep"]))
    return {"late": True}


@handler("pyapi.polite", max_attempts=2, timeout=1)
def polite(ctx: JobContext) -> dict[str, Any]:
    """Works in steps and stops as soon as ``ctx.lost`` says the attempt is no longer its own."""
    started = time.monotonic()
    while not ctx.lost and not ctx.stopping and time.monotonic() - started < 30:
        time.sleep(0.05)
    return {"stopped_after": round(time.monotonic() - started, 1)}
