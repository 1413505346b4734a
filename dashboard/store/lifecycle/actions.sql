-- Operator actions, one statement each, for one job or a chunk of a bulk action
-- (actions.py): :ids are the jobs, each fenced by the status the action takes, so a job that
-- moved on meanwhile is left alone. Every statement returns the ids it changed. :now is the
-- operator's time; :event_data says who acted (and for a bulk action, that it was one);
-- :message is the event's message, "Cancelled by <actor>" or "Run now by <actor>".

-- name: retry
-- failed -> queued with a fresh set of attempts, available now (event `manual_retry`); the
-- snoozes go too, and the attempts they added to max_attempts with them (snooze.sql).
-- Clears what the failure (or a cancel) left: last_error, result, finished_at, cancelled_at.
-- Wakes idle workers: the jobs are due at once. A job with parents waits again (available_at
-- {{waiting}}) for those not done: a parent retried in the same action, or one (locked FOR
-- SHARE, its newest state) that has not succeeded (under `run`: not ended); the release
-- trigger lets it go when they are. A parent no longer there (retention) counts as done.
WITH target AS (
    SELECT id, depends_on, on_parent_failure FROM jobs_job
    WHERE id = ANY(CAST(:ids AS uuid[])) AND status = 'failed'
), parents AS (
    SELECT p.id, p.status FROM jobs_job AS p
    WHERE p.id IN (SELECT unnest(depends_on) FROM target WHERE depends_on IS NOT NULL)
      AND p.id NOT IN (SELECT id FROM target)
    FOR SHARE
), waits AS (
    SELECT t.id, count(*) AS n
    FROM target AS t
    CROSS JOIN LATERAL unnest(t.depends_on) AS d(parent)
    LEFT JOIN parents AS p ON p.id = d.parent
    WHERE d.parent IN (SELECT id FROM target)
       OR CASE WHEN t.on_parent_failure = 'run' THEN p.status IN ('queued', 'running')
               ELSE p.status <> 'succeeded' END
    GROUP BY t.id
), changed AS (
    UPDATE jobs_job AS j
    SET status = 'queued', attempts = 0, max_attempts = j.max_attempts - j.snoozes, snoozes = 0,
        available_at = CASE WHEN waits.n > 0 THEN {{waiting}} ELSE :now END,
        waiting_on = COALESCE(waits.n, 0), locked_by = NULL,
        locked_until = NULL, last_error = '', result = NULL, finished_at = NULL,
        cancelled_at = NULL, updated_at = :now
    FROM target LEFT JOIN waits ON waits.id = target.id
    WHERE j.id = target.id AND j.status = 'failed'
    RETURNING j.id
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'manual_retry', 0, NULL, 'Manual retry', CAST(:event_data AS jsonb), :now FROM changed
), wake AS (
    SELECT pg_notify(:notify_channel, '') WHERE EXISTS (SELECT 1 FROM changed)
)
SELECT changed.id FROM changed LEFT JOIN wake ON true

-- name: cancel
-- queued -> failed, marked cancelled (cancelled_at), last_error :message (event `cancelled`).
-- A waiting job's count kept apart (jobs_job_waiting) goes first: that row's lock, then the
-- job's, the order every path that decides about a waiting job takes (migration 0025). The
-- UPDATE's test of counts_apart is evaluated once, before it locks its first row, so every
-- DELETE is done by then.
WITH counts_apart AS (
    DELETE FROM jobs_job_waiting WHERE job_id = ANY(CAST(:ids AS uuid[]))
    RETURNING job_id
), changed AS (
    UPDATE jobs_job
    SET status = 'failed', finished_at = :now, cancelled_at = :now, last_error = :message,
        updated_at = :now
    WHERE id = ANY(CAST(:ids AS uuid[])) AND status = 'queued'
      AND (SELECT count(*) FROM counts_apart) >= 0
    RETURNING id, attempts
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'cancelled', attempts, NULL, :message, CAST(:event_data AS jsonb), :now FROM changed
)
SELECT id FROM changed

-- name: run_now
-- A queued job waiting for a later available_at becomes due now (event `rescheduled`).
-- The event's data keeps the time it was waiting for (`was_available_at`). The UPDATE repeats
-- the fence, so a job claimed between the read of `waiting` and the update is left alone.
-- A job waiting for its parents ({{waiting}}) is not moved: only its parents release it.
WITH waiting AS (
    SELECT id, available_at FROM jobs_job
    WHERE id = ANY(CAST(:ids AS uuid[])) AND status = 'queued' AND available_at > :now
      AND available_at < {{waiting}}
), changed AS (
    UPDATE jobs_job AS j SET available_at = :now, updated_at = :now
    FROM waiting
    WHERE j.id = waiting.id AND j.status = 'queued' AND j.available_at > :now
      AND j.available_at < {{waiting}}
    RETURNING j.id, j.attempts, waiting.available_at AS was
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'rescheduled', attempts, NULL, :message,
           CAST(:event_data AS jsonb) || jsonb_build_object('was_available_at', was), :now
    FROM changed
), wake AS (
    SELECT pg_notify(:notify_channel, '') WHERE EXISTS (SELECT 1 FROM changed)
)
SELECT changed.id FROM changed LEFT JOIN wake ON true

-- name: delete
-- A finished job (succeeded or failed) is deleted with its events, one `jobs_audit` row each.
-- The events go with the job (the jobs' delete trigger, migration 0024), its edges to its
-- dependents in this statement; the audit row, which names the actor from :event_data,
-- stays (audit.py).
WITH changed AS (
    DELETE FROM jobs_job
    WHERE id = ANY(CAST(:ids AS uuid[])) AND status IN ('succeeded', 'failed')
    RETURNING id, type, status, attempts, created_at, finished_at, cancelled_at, has_dependents
), deleted_edges AS (
    DELETE FROM jobs_job_dependency WHERE parent_id IN (SELECT id FROM changed WHERE has_dependents)
), audit AS (
    INSERT INTO jobs_audit (created_at, action, actor, job_id, job_type, job_status, data)
    SELECT :now, 'job_deleted', COALESCE(CAST(:event_data AS jsonb) ->> 'actor', ''), id, type, status,
           CAST(:event_data AS jsonb) || jsonb_build_object('attempts', attempts, 'created_at', created_at,
                                                            'finished_at', finished_at,
                                                            'cancelled', cancelled_at IS NOT NULL)
    FROM changed
)
SELECT id FROM changed

-- name: types_with_status
-- Of the job types :types, those that have jobs in :status, by name (a bulk retry's types).
-- One probe of job_type_created_idx (type, status, ...) per type.
SELECT t FROM unnest(CAST(:types AS text[])) AS t
WHERE EXISTS (SELECT 1 FROM jobs_job WHERE type = t AND status = :status)
ORDER BY t
