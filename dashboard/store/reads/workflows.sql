-- Workflows (workflows.py): a workflow's jobs and counts, the recent workflows, and the
-- parents and dependents of one job. Each read is bounded by a cap the caller passes.

-- name: workflow_jobs
-- Up to :cap jobs of one workflow, oldest first (job_workflow_idx, then a sort of at most :cap).
SELECT id, type, status, available_at, attempts, max_attempts, depends_on, on_parent_failure,
       jobs_waiting_on(id, waiting_on) AS waiting_on, cancelled_at, created_at, finished_at, queue
FROM (
    SELECT * FROM jobs_job WHERE workflow = :workflow LIMIT :cap
) AS picked
ORDER BY created_at, id

-- name: workflow_counts
-- One workflow's jobs by state, each count read up to :cap index entries (job_workflow_idx).
-- `waiting` (queued for parents) is apart from `queued` (ready, scheduled or backing off).
SELECT s.status,
       (SELECT count(*) FROM (SELECT 1 FROM jobs_job
                              WHERE workflow = :workflow AND status = s.status LIMIT :cap) AS c) AS n,
       CASE WHEN s.status = 'queued' THEN
           (SELECT count(*) FROM (SELECT 1 FROM jobs_job
                                  WHERE workflow = :workflow AND status = 'queued'
                                    AND available_at = {{waiting}} LIMIT :cap) AS w)
       END AS waiting,
       CASE WHEN s.status = 'failed' THEN
           (SELECT count(*) FROM (SELECT 1 FROM jobs_job
                                  WHERE workflow = :workflow AND status = 'failed'
                                    AND cancelled_at IS NOT NULL LIMIT :cap) AS x)
       END AS cancelled
FROM unnest(ARRAY['queued', 'running', 'succeeded', 'failed']) AS s(status)

-- name: recent_workflows
-- The workflows of the newest jobs in any workflow, newest first: at most :scan index entries
-- of job_workflow_created_idx read, at most :limit names.
SELECT workflow, max(created_at) AS latest
FROM (
    SELECT workflow, created_at FROM jobs_job
    WHERE workflow IS NOT NULL
    ORDER BY created_at DESC, id DESC
    LIMIT :scan
) AS newest
GROUP BY workflow
ORDER BY latest DESC
LIMIT :limit

-- name: job_parents
-- A job's parents, at most 100 (the primary key); a parent gone (retention) is absent.
SELECT id, type, status, available_at, jobs_waiting_on(id, waiting_on) AS waiting_on, cancelled_at, finished_at, workflow
FROM jobs_job WHERE id = ANY(CAST(:ids AS uuid[]))

-- name: job_dependents
-- Up to :cap jobs that name one job as a parent (jobs_job_dependency's primary key, then
-- each job by its own), oldest first.
SELECT id, type, status, available_at, jobs_waiting_on(id, waiting_on) AS waiting_on, cancelled_at, finished_at, workflow
FROM (
    SELECT j.* FROM jobs_job_dependency AS d JOIN jobs_job AS j ON j.id = d.child_id
    WHERE d.parent_id = CAST(:id AS uuid)
    LIMIT :cap
) AS picked
ORDER BY created_at, id

-- name: workflow_members
-- Up to :cap jobs of one workflow, in no order (job_workflow_idx): each one's id, type, state
-- (`waiting` and `cancelled` apart from queued and failed) and parents, for the summary a
-- workflow too large to draw gets (counts per layer, type and state). The ids come as text:
-- the summary only matches them, and thousands of text ids cost less to read and hash; the
-- parents as one comma-separated text (empty: none), which the reader splits, since decoding
-- thousands of arrays on the client cost three times the statement.
SELECT CAST(id AS text) AS id, type,
       CASE WHEN status = 'queued' AND available_at = {{waiting}} THEN 'waiting'
            WHEN status = 'failed' AND cancelled_at IS NOT NULL THEN 'cancelled'
            ELSE status END AS state,
       COALESCE(array_to_string(depends_on, ','), '') AS depends_on
FROM jobs_job WHERE workflow = :workflow LIMIT :cap
