"""``/api/jobs/stats/detail/``'s body, assembled from the store's overview reads."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from ..store.reads import overview as read_overview


def detail(now: datetime) -> dict[str, Any]:
    queue = read_overview.queue_detail(now)
    hour = read_overview.hour_figures(now)  # the overview's own hour, in one read
    minutes, runs = hour.minutes, hour.run_times
    return {
        "ready": queue.ready.as_dict(),
        "scheduled": queue.scheduled.as_dict(),
        "retrying": queue.retrying.as_dict(),
        "waiting": queue.waiting.as_dict(),
        "running": queue.running.as_dict(),
        "overdue_running": queue.overdue_running,
        "oldest_ready_at": queue.oldest_ready_at,
        "oldest_ready_wait_seconds": queue.oldest_ready_wait_seconds,
        "types": [
            {
                "type": row.type,
                "ready": row.ready.as_dict(),
                "running": row.running,
                "retrying": row.retrying.as_dict(),
                "failed_24h": row.failed_24h.as_dict(),
                "oldest_ready_wait_seconds": row.wait_seconds,
            }
            for row in queue.types
        ],
        "minutes": [{**asdict(m), "failure_rate": m.failure_rate} for m in minutes.items],
        "run_times": [asdict(r) for r in runs.items],
        "sampled": minutes.sampled or runs.sampled,
        "sampled_events": minutes.cap,
    }
