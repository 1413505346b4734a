-- Retention: finished jobs older than their status's cutoff leave with their events
-- (retention.py says how a pass stays out of the workers' way).

-- name: prune_try_lock
-- Take the one-pruner-at-a-time lock for this transaction, or answer false at once.
-- A transaction-level try-lock: released by the commit, so it also works through a
-- transaction pooler (PgBouncer), where a session lock would stay on a server connection.
SELECT pg_try_advisory_xact_lock(:key)

-- name: prune_batch
-- Delete up to :batch jobs of :status that finished before :cutoff, oldest first, with their events.
-- Index: job_finished_idx (status, finished_at) WHERE status IN ('succeeded', 'failed').
-- The events go in the same statement (the jobs' delete trigger, which takes a deleted job's
-- events along, then finds none left), so a batch is one short transaction. SKIP LOCKED: a
-- job an operator is retrying right now is skipped, and the DELETE's own status fence drops
-- one that was requeued meanwhile.
-- A failed job that a waiting job still names as a parent stays (jobs_job_dependency): gone,
-- it would read as done, and a retry of it could no longer release that job. A deleted job's
-- edges to its dependents go with it (jobs_job_dependency's primary key, parent first).
WITH doomed AS (
    SELECT id FROM jobs_job
    WHERE status = :status AND finished_at < :cutoff
      AND NOT (has_dependents AND status = 'failed' AND EXISTS (
          SELECT 1 FROM jobs_job_dependency AS d JOIN jobs_job AS c ON c.id = d.child_id
          WHERE d.parent_id = jobs_job.id AND c.status = 'queued'
            AND c.available_at = {{waiting}}))
    ORDER BY status, finished_at
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
), events AS (
    DELETE FROM jobs_jobevent WHERE job_id IN (SELECT id FROM doomed) RETURNING 1
), jobs AS (
    DELETE FROM jobs_job j USING doomed WHERE j.id = doomed.id AND j.status = :status
    RETURNING j.id, j.has_dependents
), pruned_edges AS (
    DELETE FROM jobs_job_dependency WHERE parent_id IN (SELECT id FROM jobs WHERE has_dependents)
)
SELECT (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM events) AS events

-- name: prune_count
-- The dry run: how many jobs of :status finished before :cutoff, and how many events they have.
SELECT count(*) AS jobs,
       (SELECT count(*) FROM jobs_jobevent e
         WHERE e.job_id IN (SELECT id FROM jobs_job WHERE status = :status AND finished_at < :cutoff))
         AS events
FROM jobs_job WHERE status = :status AND finished_at < :cutoff
