-- What GET /metrics reads (metrics.py), each figure through a partial index and bounded by :cap.

-- name: queued_by_type_and_queue
-- Queued jobs per (type, queue): ready at :now, scheduled later, the oldest ready; at most :cap jobs.
-- Index: job_claim_idx (partial, status = 'queued'), walked in its own order.
SELECT type, queue,
       count(*) FILTER (WHERE available_at <= :now) AS ready,
       count(*) FILTER (WHERE available_at > :now) AS scheduled,
       min(available_at) FILTER (WHERE available_at <= :now) AS oldest_ready
FROM (SELECT type, queue, available_at FROM jobs_job WHERE status = 'queued'
      ORDER BY priority DESC, available_at, created_at, id LIMIT :cap) AS q
GROUP BY type, queue

-- name: running_by_queue
-- Running jobs per queue, at most :cap of them, the oldest leases first.
-- Index: job_timeout_idx (running rows only), in its own order.
SELECT queue, count(*) AS running
FROM (SELECT queue FROM jobs_job WHERE status = 'running' ORDER BY locked_until LIMIT :cap) AS r
GROUP BY queue

-- name: paused_queues
-- The paused queues (the small jobs_queue table), at most 1,000.
SELECT name FROM jobs_queue WHERE paused LIMIT 1000

-- name: waiting_by_type
-- Queued jobs waiting for their parents, per type; at most :cap jobs.
-- A waiting job is queued at {{waiting}} (states.WAITING_AT): the point at that instant of each
-- of job_queued_idx's two ranges (least(attempts, 1) = 0 and = 1), read under one LIMIT as the
-- overview's queued_split counts them, so the walk stops at the cap whatever the ready backlog
-- (the queued walk in claim order reaches them last). These jobs are also within the queued
-- walk's `scheduled` (due later).
SELECT type, count(*) AS waiting
FROM ((SELECT type FROM jobs_job WHERE status = 'queued'
           AND least(attempts, 1) = 0 AND available_at = {{waiting}} LIMIT :cap)
      UNION ALL
      (SELECT type FROM jobs_job WHERE status = 'queued'
           AND least(attempts, 1) = 1 AND available_at = {{waiting}} LIMIT :cap)
      LIMIT :cap) AS w
GROUP BY type
