"""Built-in demo job types: what each does with its payload.

| type           | payload (all optional)                  | behaviour                                  |
| -------------- | --------------------------------------- | ------------------------------------------ |
| `demo.success` | `sleep_seconds` (1)                     | sleeps briefly, renews, reports, succeeds  |
| `demo.fail`    | `error` ("Intentional demo failure")    | reports progress, then raises              |
| `demo.slow`    | `sleep_seconds` (10)                    | sleeps longer, renewing its lease          |
| `demo.timeout` | `sleep_seconds` (twice the lease)       | sleeps without renewing: the lease expires |
| `demo.flaky`   | `fail_until_attempt` (2)                | fails every attempt before that one        |

They exist only where ``JOB_DEMO_HANDLERS`` is on (by default in development, ``DEBUG=true``;
off with ``DEBUG=false``): a production web process does not offer them and a production worker
does not run them (such a job fails with ``UnknownJobType``).

Payload values are validated: a bad one fails the attempt with a :class:`PayloadError` that
says which field and why, instead of some ``TypeError`` from deep inside ``time.sleep``.
"""

from __future__ import annotations

import math
import time
from typing import Any

from .handlers import JobContext, handler

MAX_SLEEP_SECONDS = 3600.0
DEFAULT_ERROR = "Intentional demo failure"


class DemoError(RuntimeError):
    """The intentional failure of ``demo.fail`` and ``demo.flaky``."""


class PayloadError(ValueError):
    """A demo payload field has a value the handler cannot use."""


def _payload(ctx: JobContext) -> dict[str, Any]:
    payload = ctx.payload
    if payload is None:
        return {}
    if not isinstance(payload, dict):
        raise PayloadError(f"payload must be a JSON object, got {type(payload).__name__}")
    return payload


def sleep_seconds(ctx: JobContext, default: float) -> float:
    """``payload.sleep_seconds``: a finite number from 0 to ``MAX_SLEEP_SECONDS``."""
    value = _payload(ctx).get("sleep_seconds", default)
    if value is None:
        return default
    # An int is always finite (math.isfinite would overflow converting a huge one to float).
    if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
        raise PayloadError(f"sleep_seconds must be a number, got {value!r}")
    if not 0 <= value <= MAX_SLEEP_SECONDS:
        raise PayloadError(f"sleep_seconds must be between 0 and {MAX_SLEEP_SECONDS:g}, got {value!r}")
    return float(value)


def _finite(value: int | float) -> bool:
    return isinstance(value, int) or math.isfinite(value)


def _error_text(ctx: JobContext) -> str:
    value = _payload(ctx).get("error", DEFAULT_ERROR)
    if value is None or value == "":
        return DEFAULT_ERROR
    if not isinstance(value, str):
        raise PayloadError(f"error must be a string, got {value!r}")
    return value


def _fail_until_attempt(ctx: JobContext) -> int:
    value = _payload(ctx).get("fail_until_attempt", 2)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PayloadError(f"fail_until_attempt must be a whole number >= 1, got {value!r}")
    return value


def work(ctx: JobContext, seconds: float, *, renew: bool) -> bool:
    """Sleep ``seconds`` in steps, reporting progress (and renewing) after each.

    Steps are a third of the lease (at most one second), so a renewing handler is never
    close to expiry. Returns ``False`` as soon as ownership is lost.
    """
    step = max(0.05, min(1.0, ctx.lease_seconds / 3))
    if not ctx.progress(0, "started", {"sleep_seconds": seconds}):
        return False
    deadline = time.monotonic() + seconds
    while (remaining := deadline - time.monotonic()) > 0:
        time.sleep(min(step, remaining))
        if renew and not ctx.renew():
            return False
        done = 100 * (1 - max(0.0, deadline - time.monotonic()) / seconds)
        if not ctx.progress(round(done, 1), "working"):
            return False
    return True


@handler("demo.success", demo=True)
def demo_success(ctx: JobContext) -> dict[str, Any]:
    seconds = sleep_seconds(ctx, 1.0)
    completed = work(ctx, seconds, renew=True)
    return {"ok": completed, "slept_seconds": seconds, "attempt": ctx.attempt}


@handler("demo.slow", demo=True)
def demo_slow(ctx: JobContext) -> dict[str, Any]:
    seconds = sleep_seconds(ctx, 10.0)
    completed = work(ctx, seconds, renew=True)
    return {"ok": completed, "slept_seconds": seconds, "attempt": ctx.attempt}


@handler("demo.timeout", demo=True)
def demo_timeout(ctx: JobContext) -> dict[str, Any]:
    """Sleep past the lease without renewing, so the rescuer requeues the job.

    One progress event, then a single sleep: the handler cannot learn that it lost the job
    until the worker tries to complete it, which is exactly the stale-worker case.
    """
    seconds = sleep_seconds(ctx, min(2 * ctx.lease_seconds, MAX_SLEEP_SECONDS))
    ctx.progress(0, "sleeping without renewing the lease", {"sleep_seconds": seconds})
    time.sleep(seconds)
    return {"ok": True, "slept_seconds": seconds, "attempt": ctx.attempt}


@handler("demo.fail", demo=True)
def demo_fail(ctx: JobContext) -> None:
    error = _error_text(ctx)
    ctx.progress(50, "about to fail")
    raise DemoError(error)


@handler("demo.flaky", demo=True)
def demo_flaky(ctx: JobContext) -> dict[str, Any]:
    succeed_on = _fail_until_attempt(ctx)
    if ctx.attempt < succeed_on:
        ctx.progress(50, f"attempt {ctx.attempt} will fail")
        raise DemoError(f"Flaky failure on attempt {ctx.attempt}; succeeds on attempt {succeed_on}")
    ctx.progress(100, f"attempt {ctx.attempt} succeeds")
    return {"ok": True, "attempt": ctx.attempt}
