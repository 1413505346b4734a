"""Ten every-minute schedules of ``bench.noop``, for the drain beside schedules.

Loaded into workers with ``JOB_HANDLER_MODULES=bench.handlers,bench.schedules``.
"""

from dashboard.runtime.schedules import schedule

for n in range(10):
    schedule(f"bench-{n}", cron="* * * * *", type="bench.noop", payload={"n": n})
