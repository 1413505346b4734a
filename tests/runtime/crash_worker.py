"""Start the real ``flask --app wsgi worker`` with a SIGKILL planted at one point of an attempt.

``python -m tests.runtime.crash_worker POINT [worker options]``. The production code has
no test hooks: this script wraps the engine function at ``POINT`` in this process only, then
hands over to Flask's own command line, exactly as ``flask --app wsgi worker`` would run.

| point             | the process kills itself                                          |
| ----------------- | ----------------------------------------------------------------- |
| `after_claim`     | as soon as a claim has committed, before the handler is looked up |
| `in_handler`      | inside the handler, at its first lease renewal                    |
| `before_complete` | after the handler returned, before ``complete_*`` runs            |
| `before_fail`     | after the handler raised, before ``fail_job`` runs                |

The line ``crash point <POINT> reached`` is written to stderr just before the SIGKILL, so a
test can tell a planned death from an accident.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from flask.cli import main as flask_main

from dashboard.runtime import handlers
from dashboard.store import lifecycle

POINTS = ("after_claim", "in_handler", "before_complete", "before_fail")


def die(point: str) -> None:
    """SIGKILL this process: no cleanup, no ``finally``, no signal handler runs."""
    sys.stderr.write(f"crash point {point} reached: SIGKILL pid {os.getpid()}\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _die_before(point: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        die(point)
        return original(*args, **kwargs)  # never reached

    return wrapper


def _die_after_claim(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        jobs = original(*args, **kwargs)
        if jobs:
            die("after_claim")
        return jobs

    return wrapper


def _die_after_chained_claim(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        completed, job = original(*args, **kwargs)
        if job is not None:
            die("after_claim")
        return completed, job

    return wrapper


def plant(point: str) -> None:
    """Wrap the engine function at ``point`` so that reaching it kills the process."""
    if point == "after_claim":  # claim_batch, or a success that claims the next job with it
        # in its module too: claim_next_job calls it there
        lifecycle.claim_batch = lifecycle.claim.claim_batch = _die_after_claim(lifecycle.claim_batch)
        lifecycle.complete_and_claim = _die_after_chained_claim(lifecycle.complete_and_claim)
    elif point == "in_handler":
        handlers.JobContext.renew = _die_before(point, handlers.JobContext.renew)  # type: ignore[method-assign]
    elif point == "before_complete":  # one at a time (with or without the next claim), or batched
        lifecycle.complete_job = _die_before(point, lifecycle.complete_job)
        lifecycle.complete_and_claim = _die_before(point, lifecycle.complete_and_claim)
        lifecycle.complete_jobs = _die_before(point, lifecycle.complete_jobs)
    elif point == "before_fail":
        lifecycle.fail_job = _die_before(point, lifecycle.fail_job)
    else:
        raise SystemExit(f"unknown crash point {point!r}; one of {', '.join(POINTS)}")


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: python -m tests.runtime.crash_worker POINT [worker options]")
    plant(argv[0])
    sys.argv = ["flask", "--app", "wsgi", "worker", *argv[1:]]
    flask_main()


if __name__ == "__main__":
    main(sys.argv[1:])
