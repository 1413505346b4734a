-- The audit log, jobs_audit (audit.py): read newest first, never updated.

-- name: audit_page
-- The newest :limit entries, older than the id :before when it is given.
-- Index: the primary key, read backwards.
SELECT id, created_at, action, actor, job_id, job_type, job_status, worker_id, data
FROM jobs_audit
WHERE (CAST(:before AS bigint) IS NULL OR id < :before)
ORDER BY id DESC LIMIT :limit

-- name: audit_of_job
-- The newest five entries about the job :job_id (its deletion).
-- Index: jobs_audit_job_idx (job_id) WHERE job_id IS NOT NULL.
SELECT id, created_at, action, actor, job_id, job_type, job_status, worker_id, data
FROM jobs_audit
WHERE job_id = :job_id
ORDER BY id DESC LIMIT 5
