"""``bench.noop``: a job that does nothing, so the benchmark measures the queue itself;
``bench.cpu``: a job that computes for ``ms`` milliseconds of its thread's CPU time (a CPU-bound
handler, for the ``processes`` section).

Loaded into workers with ``JOB_HANDLER_MODULES=bench.handlers``.
"""

import time

from dashboard.runtime.handlers import JobContext, handler


@handler("bench.noop")
def noop(context: object) -> None:
    return None


@handler("bench.cpu")
def cpu(context: JobContext) -> None:
    """Python busy for ``payload["ms"]`` milliseconds of this thread's own CPU time: the same
    work whatever else the process runs (its other threads wait for the interpreter meanwhile)."""
    end = time.thread_time() + context.payload["ms"] / 1000
    n = 0
    while time.thread_time() < end:
        n += sum(range(100))
    return None
