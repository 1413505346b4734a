"""A schedule with a bad expression: a worker that imports this module must not start."""

from __future__ import annotations

from dashboard.runtime.schedules import schedule

schedule("broken", cron="61 * * * *", type="sample.nothing")
