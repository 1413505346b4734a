"""One every-minute schedule, declared by a worker subprocess through ``JOB_HANDLER_MODULES``."""

from __future__ import annotations

from dashboard.runtime.schedules import schedule

schedule("one", cron="* * * * *", type="sample.nothing", missed="all")
