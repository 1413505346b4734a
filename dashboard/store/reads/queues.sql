-- Named queues' figures (queues.py): the Queues page, /api/queues/, `flask queues`, the
-- overview's notice and "why isn't this job running".

-- name: queue_rows
-- One row per queue of :names, in their order: its settings, the queued split and running (each up to :cap), slots and rate window.
-- Per queue: the overview's split (queued_split in overview.sql, waiting for parents apart
-- at {{waiting}}) over one queue's ranges of
-- job_queued_queue_idx, each read to :cap (the caller's cap + 1: past the cap, "more than");
-- running through job_timeout_idx, the same; the slots held, the ring entries taken within
-- the period and the earliest that frees. Run in index order (reading.in_index_order).
SELECT names.name, q.paused, q.paused_at, q.paused_by, q.concurrency_limit, q.rate_count,
       q.rate_period_seconds, q.changed_at, q.changed_by,
  (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = names.name
      AND least(attempts, 1) = 0 AND available_at <= :now ORDER BY available_at LIMIT :cap) AS r)
  + (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = names.name
      AND least(attempts, 1) = 1 AND available_at <= :now ORDER BY available_at LIMIT :cap) AS r)
      AS ready,
  (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = names.name
      AND least(attempts, 1) = 0 AND available_at > :now AND available_at < {{waiting}}
      ORDER BY available_at LIMIT :cap) AS r) AS scheduled,
  (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = names.name
      AND least(attempts, 1) = 1 AND available_at > :now AND available_at < {{waiting}}
      ORDER BY available_at LIMIT :cap) AS r) AS retrying,
  (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = names.name
      AND least(attempts, 1) = 0 AND available_at = {{waiting}} LIMIT :cap) AS r)
  + (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = names.name
      AND least(attempts, 1) = 1 AND available_at = {{waiting}} LIMIT :cap) AS r)
      AS waiting,
  (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'running' AND queue = names.name
      LIMIT :cap) AS r) AS running,
  LEAST(
    (SELECT min(available_at) FROM jobs_job WHERE status = 'queued' AND queue = names.name
        AND least(attempts, 1) = 0 AND available_at <= :now),
    (SELECT min(available_at) FROM jobs_job WHERE status = 'queued' AND queue = names.name
        AND least(attempts, 1) = 1 AND available_at <= :now)) AS oldest_ready_at,
  (SELECT count(*) FROM jobs_queue_slot AS s WHERE s.queue = names.name AND s.job_id IS NOT NULL)
      AS slots_held,
  (SELECT count(*) FROM jobs_queue_rate AS r WHERE r.queue = names.name
      AND r.taken_at > :now - make_interval(secs => q.rate_period_seconds)) AS rate_used,
  (SELECT min(r.taken_at) + make_interval(secs => q.rate_period_seconds) FROM jobs_queue_rate AS r
      WHERE r.queue = names.name AND r.taken_at > :now - make_interval(secs => q.rate_period_seconds))
      AS rate_free_at
FROM unnest(CAST(:names AS text[])) WITH ORDINALITY AS names(name, n)
LEFT JOIN jobs_queue AS q ON q.name = names.name
ORDER BY names.n

-- name: queue_names
-- The :shown queues a list shows, by name (the paused ones first to be kept), and how many there are in all.
-- Every queue with a row, and :default if it has jobs but no row (a table emptied by hand).
-- The paused ones come first, so that no paused queue drops out of sight, then the rest by
-- name. The queues table is small, one row per queue ever named.
SELECT name, total FROM (
    SELECT name, count(*) OVER () AS total FROM (
        SELECT name, paused FROM jobs_queue
        UNION ALL
        SELECT CAST(:default AS varchar), false
        WHERE NOT EXISTS (SELECT 1 FROM jobs_queue WHERE name = CAST(:default AS varchar))
          AND EXISTS (SELECT 1 FROM jobs_job WHERE queue = CAST(:default AS varchar)
                      AND status IN ('queued', 'running'))
    ) AS q
    ORDER BY paused DESC, name
    LIMIT :shown
) AS shown
ORDER BY name

-- name: queue_has_jobs
-- Whether any job names the queue :name (one without a row is a queue only if it has jobs).
SELECT 1 FROM jobs_job WHERE queue = :name LIMIT 1

-- name: claims_last_hour
-- Claims per queue in (:since, :now], from at most the newest :cap claims of it, with how many were read.
-- jobs_jobevent_created_at_idx, which holds claims and outcomes only (migration 0017), as the
-- overview's charts read it; no other kind of event is read: each `claimed` event's data names
-- its queue (none: :default). Past the cap the figure is a lower bound (`sampled`).
SELECT COALESCE(data ->> 'queue', :default) AS queue, count(*) AS claims, max(total) AS read
FROM (SELECT data, count(*) OVER () AS total
      FROM (SELECT data FROM jobs_jobevent
            WHERE type = 'claimed' AND created_at > :since AND created_at <= :now
            ORDER BY created_at DESC LIMIT :cap) AS newest) AS e
GROUP BY 1

-- name: queues_holding_back
-- The queues whose settings can hold a job back (paused, or with a limit), by name, at most :shown.
SELECT name FROM jobs_queue WHERE paused OR concurrency_limit IS NOT NULL OR rate_count IS NOT NULL
ORDER BY name LIMIT :shown
