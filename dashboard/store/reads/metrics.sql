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
