"""Schedules a worker subprocess declares through ``JOB_HANDLER_MODULES`` (the test process
never imports this module): many every-minute schedules that enqueue every missed slot."""

from __future__ import annotations

from dashboard.runtime.schedules import schedule

COUNT = 25

for n in range(COUNT):
    schedule(f"many-{n:02d}", cron="* * * * *", type="sample.nothing", payload={"n": n}, missed="all")
