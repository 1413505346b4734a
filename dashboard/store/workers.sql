-- The worker processes' heartbeat rows, jobs_worker (workers.py). A small table: one row per
-- process start, forgotten a day after it stopped or went silent.

-- name: worker_beat
-- Upsert a process's row: its busy threads (:busy, or counted from the jobs it holds), jobs done, last seen, activity.
-- Without :busy: the running jobs whose locked_by is LIKE :prefix (the process's host:pid:,
-- escaped), at most :threads.
WITH beat AS (
    INSERT INTO jobs_worker AS w (id, host, pid, started_at, mode, threads, busy, jobs_done,
                                  last_seen, stopped_at, version, interval_seconds, job_types,
                                  activity, queues)
    VALUES (:id, :host, :pid, :started_at, :mode, :threads,
            COALESCE(:busy, LEAST(:threads, (SELECT count(*) FROM jobs_job
                                             WHERE status = 'running' AND locked_by LIKE :prefix))),
            :jobs_done, :now, NULL, :version, :interval, CAST(:job_types AS text[]),
            CAST(:activity AS jsonb), CAST(:queues AS text[]))
    ON CONFLICT (id) DO UPDATE
    SET busy = EXCLUDED.busy, jobs_done = EXCLUDED.jobs_done, last_seen = EXCLUDED.last_seen,
        job_types = EXCLUDED.job_types, activity = EXCLUDED.activity, queues = EXCLUDED.queues
    RETURNING id
)
SELECT id FROM beat

-- name: worker_forget
-- Delete the rows stopped or silent since before :before.
WITH forgotten AS (
    DELETE FROM jobs_worker WHERE COALESCE(stopped_at, last_seen) < :before AND last_seen < :before
    RETURNING id
)
SELECT id FROM forgotten

-- name: worker_stop
-- Mark a process's row stopped at :now (a clean exit), with its last count of jobs done.
WITH stopped AS (
    UPDATE jobs_worker SET stopped_at = :now, last_seen = :now, busy = 0, jobs_done = :jobs_done,
                           activity = NULL
    WHERE id = :id
    RETURNING id
)
SELECT id FROM stopped

-- name: worker_remove
-- Delete a gone or stopped process's row, with its jobs_audit row (who, and what was removed).
-- Gone: silent for :gone_seconds, or for :gone_windows of its stale windows (:stale_beats
-- intervals each) if that is longer; an alive or only stale row is left (no row returned).
WITH removed AS (
    DELETE FROM jobs_worker
    WHERE id = :id AND (stopped_at IS NOT NULL OR last_seen < :now - greatest(
        make_interval(secs => :gone_seconds),
        make_interval(secs => interval_seconds * :stale_beats * :gone_windows)))
    RETURNING id, host, pid, started_at, last_seen, stopped_at
)
INSERT INTO jobs_audit (created_at, action, actor, worker_id, data)
SELECT :now, 'worker_removed', COALESCE(CAST(:event_data AS jsonb) ->> 'actor', ''), id,
       CAST(:event_data AS jsonb) || jsonb_build_object('host', host, 'pid', pid,
                                                        'started_at', started_at,
                                                        'last_seen', last_seen,
                                                        'stopped_at', stopped_at)
FROM removed
RETURNING worker_id

-- name: worker_rows
-- The newest 200 process rows (the Workers page).
SELECT * FROM jobs_worker ORDER BY started_at DESC LIMIT 200

-- name: running_jobs
-- Every running job's owner and lease, the oldest leases first, at most 5,000.
-- Index: job_timeout_idx (locked_until) WHERE status = 'running', in its own order.
SELECT id, type, locked_by, locked_until FROM jobs_job WHERE status = 'running'
ORDER BY locked_until LIMIT 5000

-- name: worker_live_types
-- The job types of the processes not stopped that were seen since :since.
SELECT job_types, interval_seconds, last_seen, stopped_at FROM jobs_worker
WHERE stopped_at IS NULL AND last_seen > :since
