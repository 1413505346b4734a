-- Why is this queued job not running (why.py).

-- name: jobs_ahead
-- Due queued jobs ahead of a job in its queue's claim order: each of two ranges counted up to :cap.
-- Two bounded range scans of job_queue_claim_idx: higher priorities that are due at :now, then
-- the same priority earlier in order ((available_at, created_at, id) before the job's).
SELECT
  (SELECT count(*) FROM (
      SELECT 1 FROM jobs_job
      WHERE queue = :queue AND status = 'queued' AND priority > :priority AND available_at <= :now
        AND attempts < max_attempts
      LIMIT :cap) AS higher)
+ (SELECT count(*) FROM (
      SELECT 1 FROM jobs_job
      WHERE queue = :queue AND status = 'queued' AND priority = :priority
        AND (available_at, created_at, id) < (:available_at, :created_at, :id)
        AND attempts < max_attempts
      LIMIT :cap) AS same)
