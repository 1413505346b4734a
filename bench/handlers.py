"""``bench.noop``: a job that does nothing, so the benchmark measures the queue itself.

Loaded into workers with ``JOB_HANDLER_MODULES=bench.handlers``.
"""

from dashboard.runtime.handlers import handler


@handler("bench.noop")
def noop(context: object) -> None:
    return None
