-- What a running attempt writes before it ends: lease renewals and progress reports.
--
-- Ownership, the fence against stale workers, is the same four-column guard in every
-- statement a worker runs on its job (here and in settle.sql):
--     id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
-- A lease that has expired but that no rescue has taken back yet still belongs to
-- its worker: nobody else can hold the job, so what it writes is kept. Once recovery requeues
-- the job, `status` (and on the next claim `attempts` and `locked_by`) no longer match.
-- The time is the database's clock unless :now is given (claim.sql says why).

-- name: renew
-- Extend the owner's lease to :lease_seconds from now, with a `lease_renewed` event.
WITH renewed AS (
    UPDATE jobs_job
    SET locked_until = {{clock}}
                       + make_interval(secs => CAST(:lease_seconds AS float8)),
        updated_at = {{clock}}
    WHERE id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
    RETURNING id, attempts, locked_until
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'lease_renewed', attempts, :worker_id, 'Lease renewed',
           jsonb_build_object('locked_until', locked_until),
           {{clock}}
    FROM renewed
)
SELECT locked_until FROM renewed

-- name: progress
-- Append the owner's `progress` event; returns its id.
-- It touches updated_at so that it takes the row lock: an event can then never be written for
-- an attempt that a concurrent rescue has just requeued.
WITH owned AS (
    UPDATE jobs_job SET updated_at = :now
    WHERE id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
    RETURNING id, attempts
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'progress', attempts, :worker_id, :message, CAST(:data AS jsonb), :now FROM owned
    RETURNING id
)
SELECT id FROM ev

-- name: parent_results
-- The results of a starting attempt's parents (at most 100, by primary key), each up to
-- :max_bytes as stored (pg_column_size, no decoding); a larger one comes back NULL and `too_big`.
SELECT id, CASE WHEN pg_column_size(result) <= :max_bytes THEN result END AS result,
       COALESCE(pg_column_size(result) > :max_bytes, false) AS too_big
FROM jobs_job WHERE id = ANY(CAST(:ids AS uuid[]))
