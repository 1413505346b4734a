-- The rescue: running jobs whose lease expired go back to the queue, or fail.

-- name: rescue_expired
-- Requeue (after backoff) or fail up to :batch running jobs whose lease expired, oldest first.
-- last_error, and the `timeout_requeued` or `failed` event, say which lease expired and
-- whose it was; last_error starts with :lease_expired_prefix, which the claim's avoid-expired
-- rule reads (claim.sql). Their events take ids in expiry order (one INSERT ... ORDER BY, as
-- every statement that writes events for several jobs). :delays[n] is the backoff after
-- attempt n (its snoozes not counted: snooze.sql), :max_delay past the table's end. Index: job_timeout_idx (locked_until) WHERE
-- status = 'running'. SKIP LOCKED: a row whose owner is completing or renewing it right now
-- is left alone; if the owner's statement wins, the lease is no longer expired or the job is
-- no longer running. The time is the database's clock unless :now is given (claim.sql).
WITH expired AS (
    SELECT id, locked_by AS expired_worker, locked_until AS expired_at
    FROM jobs_job
    WHERE status = 'running' AND locked_until < {{clock}}
    ORDER BY locked_until
    LIMIT CAST(:batch AS integer)
    FOR UPDATE SKIP LOCKED
), recovered AS (
    UPDATE jobs_job AS j
    SET status = CASE WHEN j.attempts < j.max_attempts THEN 'queued' ELSE 'failed' END,
        available_at = CASE WHEN j.attempts < j.max_attempts
            THEN {{clock}} + make_interval(
                secs => COALESCE((CAST(:delays AS float8[]))[j.attempts - j.snoozes], CAST(:max_delay AS float8)))
            ELSE j.available_at END,
        finished_at = CASE WHEN j.attempts < j.max_attempts
                           THEN NULL ELSE {{clock}} END,
        locked_by = NULL, locked_until = NULL,
        last_error = :lease_expired_prefix
            || to_char(expired.expired_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
            || ' (worker ' || expired.expired_worker || ', attempt ' || j.attempts || ')',
        updated_at = {{clock}}
    FROM expired WHERE j.id = expired.id
    RETURNING j.id, j.status, j.attempts, j.available_at, j.last_error,
              expired.expired_worker, expired.expired_at
), freed AS (
    UPDATE jobs_queue_slot AS slot SET job_id = NULL, attempt = NULL
    FROM recovered WHERE slot.job_id = recovered.id AND slot.attempt = recovered.attempts
    RETURNING pg_notify(:notify_channel, slot.queue)
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, CASE WHEN status = 'queued' THEN 'timeout_requeued' ELSE 'failed' END,
           attempts, :worker_id, last_error,
           jsonb_build_object('error', last_error, 'expired_worker_id', expired_worker,
                              'locked_until', expired_at)
           || CASE WHEN status = 'queued'
                   THEN jsonb_build_object('retry_at', available_at)
                   ELSE '{}'::jsonb END,
           {{clock}}
    FROM recovered
    ORDER BY expired_at, id
)
SELECT id, status FROM recovered
