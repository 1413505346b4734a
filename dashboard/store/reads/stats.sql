-- What the overview and /api/jobs/stats/ read (stats.py): status counts, the finished totals,
-- the job types, the latest failures; and the planner's estimates past a count's cap.

-- name: stats_exact
-- Every figure of the stats, exact, in one pass over jobs_job: cheap on a small table, O(rows) on a large one.
SELECT
    count(*) AS total,
    count(*) FILTER (WHERE status = 'queued') AS queued,
    count(*) FILTER (WHERE status = 'running') AS running,
    count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
    count(*) FILTER (WHERE status = 'failed') AS failed,
    count(*) FILTER (WHERE status = 'failed' AND cancelled_at IS NOT NULL) AS cancelled,
    count(*) FILTER (WHERE status = 'running' AND locked_until < :now) AS overdue_running,
    count(*) FILTER (WHERE status = 'queued' AND attempts > 0) AS retries_pending,
    count(*) FILTER (WHERE status = 'queued' AND available_at = {{waiting}}) AS waiting,
    min(created_at) FILTER (WHERE status = 'queued') AS oldest_queued_at
FROM jobs_job

-- name: job_types
-- The distinct job types, by a skip scan of job_type_created_idx.
-- One index descent per type instead of reading every row (cost: docs/benchmarks.md); the
-- statements that need the types start with the same `types` CTE.
WITH RECURSIVE types AS (
    (SELECT type FROM jobs_job ORDER BY type LIMIT 1)
    UNION ALL
    SELECT (SELECT j.type FROM jobs_job j WHERE j.type > types.type ORDER BY j.type LIMIT 1)
    FROM types WHERE types.type IS NOT NULL
)
SELECT type FROM types WHERE type IS NOT NULL

-- name: live_stats
-- A large table's stats: live figures counted up to :cap, finished totals from jobs_finished_counts.
-- Indexes: job_claim_idx (queued), job_queued_idx (`least(attempts, 1) = 1`: retries),
-- job_timeout_idx (running, overdue), and job_oldest_queued_idx's first live entry for the
-- oldest queued job (any other index, the list order's (created_at, id) above all, would walk
-- the finished jobs older than it; `max_attempts >= 1`, true of every row, is its predicate's
-- mark, which no other statement writes). Waiting jobs (queued for their parents, at
-- {{waiting}}: states.WAITING_AT) are the point at that instant of job_queued_idx's two
-- ranges, as the overview's queued_split counts them (overview.sql); they stay in queued.
-- Each capped count walks its index in the index's own order, so it stops at the cap: a
-- bitmap scan would first read every entry of the range, then up to the cap's heap pages
-- (queued rows spread through a large table: many times the cost of the walk in order,
-- docs/benchmarks.md).
SELECT
    (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued'
        ORDER BY priority DESC, available_at, created_at, id LIMIT :cap) AS q) AS queued,
    (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'running'
        ORDER BY locked_until LIMIT :cap) AS r) AS running,
    (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'running' AND locked_until < :now
        ORDER BY locked_until LIMIT :cap) AS o) AS overdue_running,
    (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued'
        AND least(attempts, 1) = 1 ORDER BY available_at LIMIT :cap) AS p) AS retries_pending,
    (SELECT count(*) FROM (
        (SELECT 1 FROM jobs_job WHERE status = 'queued'
            AND least(attempts, 1) = 0 AND available_at = {{waiting}} LIMIT :cap)
        UNION ALL
        (SELECT 1 FROM jobs_job WHERE status = 'queued'
            AND least(attempts, 1) = 1 AND available_at = {{waiting}} LIMIT :cap)
        LIMIT :cap) AS w) AS waiting,
    (SELECT min(created_at) FROM jobs_job
        WHERE status = 'queued' AND max_attempts >= 1) AS oldest_queued_at,
    f.succeeded, f.failed + f.cancelled AS failed, f.cancelled, f.counted_at
FROM jobs_finished_counts AS f

-- name: estimated_rows
-- The planner's row estimate of jobs_job (kept by autovacuum's ANALYZE): free, and plenty to choose by.
SELECT reltuples::bigint FROM pg_class WHERE oid = 'jobs_job'::regclass

-- name: finished_exact
-- The finished totals of a small table, counted now: one pass over the finished rows.
-- failed: failed for good; cancelled: failed because an operator cancelled them (apart, so a
-- failure alert never counts a cancel). Index: job_finished_idx (status, finished_at)
-- WHERE status IN ('succeeded', 'failed').
SELECT count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE status = 'failed' AND cancelled_at IS NULL) AS failed,
       count(*) FILTER (WHERE status = 'failed' AND cancelled_at IS NOT NULL) AS cancelled
FROM jobs_job WHERE status IN ('succeeded', 'failed')

-- name: finished_cached
-- The finished totals of a large table: the one row of jobs_finished_counts, and when it was counted.
SELECT succeeded, failed, cancelled, counted_at FROM jobs_finished_counts

-- name: database_ok
-- A trivial query: the database answers.
SELECT 1

-- name: latest_failures
-- The :limit jobs that failed most recently and are still failed and not cancelled, newest failure first.
-- Payload and result as their first :preview characters of JSON text; a job failed when it
-- finished. Index: job_finished_idx's failed range read backwards, so the claims, successes
-- and creates since the last failure are never read; at most :scan entries, so a mass cancel
-- (cancelled jobs are failed too) buries the older failures instead of making the read long.
SELECT id, type, left(payload::text, :preview) AS payload, status, priority, available_at,
       attempts, max_attempts, idempotency_key, locked_by, locked_until, last_error,
       left(result::text, :preview) AS result, created_at, updated_at, finished_at,
       finished_at AS failed_at
FROM (
    SELECT * FROM jobs_job WHERE status = 'failed'
    ORDER BY finished_at DESC
    LIMIT :scan
) AS failed
WHERE cancelled_at IS NULL
ORDER BY finished_at DESC
LIMIT :limit

-- name: estimate_queued
-- Probe: the queued jobs.
-- The probes are never run: the planner's estimate of the rows each would return is asked with
-- EXPLAIN (stats.estimate), from the column statistics, when a count is past its cap.
SELECT 1 FROM jobs_job WHERE status = 'queued'

-- name: estimate_running
-- Probe: the running jobs.
SELECT 1 FROM jobs_job WHERE status = 'running'

-- name: estimate_overdue_running
-- Probe: the running jobs whose lease has ended.
SELECT 1 FROM jobs_job WHERE status = 'running' AND locked_until < now()

-- name: estimate_retries_pending
-- Probe: the queued jobs that failed before (retries).
SELECT 1 FROM jobs_job WHERE status = 'queued' AND least(attempts, 1) = 1
