-- Is work ready that nobody will run (health.py): the queues and job types with due jobs.

-- name: ready_types
-- The job types with a job due now (first run or retry), at most :types types with queued jobs looked at.
-- The distinct types of queued jobs, one descent of job_queued_type_idx each, keeping those
-- with a job due at :now (two probes of the same index).
WITH RECURSIVE queued_types AS (
    (SELECT type FROM jobs_job WHERE status = 'queued' ORDER BY type LIMIT 1)
    UNION ALL
    SELECT (SELECT j.type FROM jobs_job AS j
            WHERE j.status = 'queued' AND j.type > queued_types.type ORDER BY j.type LIMIT 1)
    FROM queued_types WHERE queued_types.type IS NOT NULL
)
SELECT type FROM (SELECT type FROM queued_types WHERE type IS NOT NULL LIMIT :types) AS t
WHERE EXISTS (SELECT 1 FROM jobs_job WHERE status = 'queued' AND type = t.type
              AND least(attempts, 1) = 0 AND available_at <= :now)
   OR EXISTS (SELECT 1 FROM jobs_job WHERE status = 'queued' AND type = t.type
              AND least(attempts, 1) = 1 AND available_at <= :now)
ORDER BY type

-- name: ready_queues
-- The queues with a job due now (first run or retry), each with its pause, at most :queues queues looked at.
-- The distinct queues of queued jobs, one descent of job_queued_queue_idx each, keeping those
-- with a job due at :now (two probes of the same index).
WITH RECURSIVE queued_queues AS (
    (SELECT queue FROM jobs_job WHERE status = 'queued' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM jobs_job AS j
            WHERE j.status = 'queued' AND j.queue > queued_queues.queue ORDER BY j.queue LIMIT 1)
    FROM queued_queues WHERE queued_queues.queue IS NOT NULL
)
SELECT n.queue AS name, COALESCE(q.paused, false) AS paused
FROM (SELECT queue FROM queued_queues WHERE queue IS NOT NULL LIMIT :queues) AS n
LEFT JOIN jobs_queue AS q ON q.name = n.queue
WHERE EXISTS (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = n.queue
              AND least(attempts, 1) = 0 AND available_at <= :now)
   OR EXISTS (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = n.queue
              AND least(attempts, 1) = 1 AND available_at <= :now)
ORDER BY n.queue

-- name: open_types
-- Of :types, those with a due job outside the :paused queues, among each type's oldest :probe due jobs.
-- One bounded range of job_queued_type_idx per (type, first run or retry), however many jobs a
-- paused queue holds (a type whose oldest :probe due jobs all wait in paused queues counts as
-- held by the pause). Run in index order (reading.in_index_order).
SELECT t.type FROM unnest(CAST(:types AS text[])) AS t(type)
WHERE EXISTS (SELECT 1 FROM (SELECT queue FROM jobs_job WHERE status = 'queued' AND type = t.type
                             AND least(attempts, 1) = 0 AND available_at <= :now
                             ORDER BY available_at LIMIT :probe) AS j
              WHERE j.queue <> ALL (CAST(:paused AS text[])))
   OR EXISTS (SELECT 1 FROM (SELECT queue FROM jobs_job WHERE status = 'queued' AND type = t.type
                             AND least(attempts, 1) = 1 AND available_at <= :now
                             ORDER BY available_at LIMIT :probe) AS j
              WHERE j.queue <> ALL (CAST(:paused AS text[])))
ORDER BY t.type
