-- What the live workers can take on, from their heartbeat rows (capacity.py).

-- name: live_workers
-- The rows of the processes not stopped that were seen since :since: types, queues, threads, activity.
SELECT job_types, queues, interval_seconds, last_seen, stopped_at, threads, busy, activity
FROM jobs_worker WHERE stopped_at IS NULL AND last_seen > :since

-- name: worker_of_pid
-- The newest row of the process :pid on :host (a pid can come back after a restart).
SELECT * FROM jobs_worker WHERE host = :host AND pid = :pid ORDER BY started_at DESC LIMIT 1
