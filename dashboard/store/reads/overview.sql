-- The overview's detailed figures (overview.py): the queued split, the per-type rows, running
-- per type, and the hour's charts. Every live count reads at most :cap index entries.

-- name: queued_split
-- The queued jobs split into ready (first runs, retries), scheduled, retrying and waiting, each up to :cap, and the oldest ready.
-- `least(attempts, 1)`: 0 for a job never run, 1 for one that failed before (a retry). Each
-- capped count walks its range of job_queued_idx (least(attempts, 1), available_at) WHERE
-- status = 'queued' in order (ORDER BY available_at), so it stops at the cap: a bitmap scan
-- would read the whole range first (500,000 entries for a burst). Ready jobs are two ranges
-- (first runs, due retries) counted as one: the second is read only while the first held fewer
-- than the cap (an Append under the outer LIMIT). A job waiting for its parents is queued at
-- {{waiting}} (states.WAITING_AT), after every later time: it is `waiting`, the two ranges'
-- point at that instant, and scheduled and retrying stop before it. The same split per queue:
-- queue_rows (queues.sql); per type: type_rows.
SELECT
  (SELECT count(*) FROM (
      (SELECT 1 FROM jobs_job WHERE status = 'queued'
          AND least(attempts, 1) = 0 AND available_at <= :now ORDER BY available_at LIMIT :cap)
      UNION ALL
      (SELECT 1 FROM jobs_job WHERE status = 'queued'
          AND least(attempts, 1) = 1 AND available_at <= :now ORDER BY available_at LIMIT :cap)
      LIMIT :cap) AS r) AS ready,
  (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued'
      AND least(attempts, 1) = 0 AND available_at > :now AND available_at < {{waiting}}
      ORDER BY available_at LIMIT :cap) AS r) AS scheduled,
  (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued'
      AND least(attempts, 1) = 1 AND available_at > :now AND available_at < {{waiting}}
      ORDER BY available_at LIMIT :cap) AS r) AS retrying,
  (SELECT count(*) FROM (
      (SELECT 1 FROM jobs_job WHERE status = 'queued'
          AND least(attempts, 1) = 0 AND available_at = {{waiting}} LIMIT :cap)
      UNION ALL
      (SELECT 1 FROM jobs_job WHERE status = 'queued'
          AND least(attempts, 1) = 1 AND available_at = {{waiting}} LIMIT :cap)
      LIMIT :cap) AS r) AS waiting,
  LEAST(
    (SELECT min(available_at) FROM jobs_job WHERE status = 'queued'
        AND least(attempts, 1) = 0 AND available_at <= :now),
    (SELECT min(available_at) FROM jobs_job WHERE status = 'queued'
        AND least(attempts, 1) = 1 AND available_at <= :now)) AS oldest_ready_at

-- name: type_rows
-- One row per job type of :types, in their order: ready, retrying, the oldest ready, failures since :since.
-- In one statement (planned once, one round trip): ready (first runs and retries), retrying,
-- the oldest ready job, failures of the last 24 hours (cancels left out). job_queued_type_idx
-- and job_failure_type_idx, one bounded range each (run in index order: reading.in_index_order).
SELECT t.type,
  (SELECT count(*) FROM (
      (SELECT 1 FROM jobs_job WHERE status = 'queued' AND type = t.type
          AND least(attempts, 1) = 0 AND available_at <= :now ORDER BY available_at LIMIT :cap)
      UNION ALL
      (SELECT 1 FROM jobs_job WHERE status = 'queued' AND type = t.type
          AND least(attempts, 1) = 1 AND available_at <= :now ORDER BY available_at LIMIT :cap)
      LIMIT :cap) AS r) AS ready,
  (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' AND type = t.type
      AND least(attempts, 1) = 1 AND available_at > :now AND available_at < {{waiting}}
      ORDER BY available_at LIMIT :cap) AS r) AS retrying,
  LEAST(
    (SELECT min(available_at) FROM jobs_job WHERE status = 'queued' AND type = t.type
        AND least(attempts, 1) = 0 AND available_at <= :now),
    (SELECT min(available_at) FROM jobs_job WHERE status = 'queued' AND type = t.type
        AND least(attempts, 1) = 1 AND available_at <= :now)) AS oldest_ready_at,
  (SELECT count(*) FROM (SELECT 1 FROM jobs_job
      WHERE status = 'failed' AND cancelled_at IS NULL AND type = t.type
        AND finished_at >= :since LIMIT :cap) AS f) AS failed
FROM unnest(CAST(:types AS text[])) WITH ORDINALITY AS t(type, n)
ORDER BY t.n

-- name: running_by_type
-- Running and overdue (lease ended before :now) per type, at most :cap running rows, the oldest leases first.
-- So the overdue ones are always among them: job_timeout_idx in order. Also /metrics'
-- (metrics.py).
SELECT type, count(*) AS running, count(*) FILTER (WHERE locked_until < :now) AS overdue
FROM (SELECT type, locked_until FROM jobs_job WHERE status = 'running'
      ORDER BY locked_until LIMIT :cap) AS r
GROUP BY type

-- name: hour_figures
-- From the newest :cap claims and outcomes of [:since, :until): per minute from :minutes_since, and run times per type.
-- One read of the window's newest claims and outcomes (states.CHART_EVENTS, written out here, not
-- bound, so every plan can prove the index's predicate), newest first:
-- jobs_jobevent_created_at_idx, which holds those kinds only (migration 0017), read backwards
-- and stopped by the LIMIT, so a busy hour costs at most :cap index entries and rows, and no
-- other kind of event (a bulk enqueue's `created` events, progress reports) is read or can
-- crowd them out (the type filters after the limit only split them). Two figures come out of
-- it: per minute from :minutes_since, the outcomes and the waits the claims recorded
-- (claim.sql: `wait_ms`); per job type, the run times the outcomes recorded (settle.sql:
-- `run_ms` and `type`). Each row is one or the other (`minute` or `run_type` set);
-- `events_read` and `oldest_read` come back on every row, and alone when nothing matched.
WITH recent AS MATERIALIZED (
    SELECT created_at, type, data FROM jobs_jobevent
    WHERE type IN ('claimed', 'succeeded', 'failed', 'retry_scheduled')
      AND created_at >= :since AND created_at < :until
    ORDER BY created_at DESC
    LIMIT :cap
), minutes AS (
    SELECT date_trunc('minute', created_at) AS minute,
           count(*) FILTER (WHERE type = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE type = 'failed') AS failed,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY (data->>'wait_ms')::float8)
               FILTER (WHERE type = 'claimed') AS wait_p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY (data->>'wait_ms')::float8)
               FILTER (WHERE type = 'claimed') AS wait_p95
    FROM recent
    WHERE created_at >= :minutes_since AND type IN ('succeeded', 'failed', 'claimed')
    GROUP BY 1
), runs AS (
    SELECT data->>'type' AS run_type, count(*) AS runs,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY (data->>'run_ms')::float8) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY (data->>'run_ms')::float8) AS p95
    FROM recent
    WHERE type IN ('succeeded', 'failed', 'retry_scheduled')
      AND jsonb_typeof(data->'run_ms') = 'number' AND jsonb_typeof(data->'type') = 'string'
    GROUP BY 1 ORDER BY 1
    LIMIT :types
), figures AS (
    SELECT minute, NULL AS run_type, succeeded, failed, wait_p50 AS p50, wait_p95 AS p95,
           NULL::bigint AS runs
    FROM minutes
    UNION ALL
    SELECT NULL, run_type, NULL, NULL, p50, p95, runs FROM runs
)
SELECT (SELECT count(*) FROM recent) AS events_read,
       (SELECT min(created_at) FROM recent) AS oldest_read,
       figures.*
FROM (VALUES (1)) AS one LEFT JOIN figures ON true
ORDER BY figures.minute, figures.run_type

-- name: estimate_ready
-- Probe: the queued jobs due now (stats.sql says how the probes are used).
SELECT 1 FROM jobs_job WHERE status = 'queued' AND available_at <= now()

-- name: estimate_scheduled
-- Probe: the queued first runs due later.
SELECT 1 FROM jobs_job WHERE status = 'queued' AND least(attempts, 1) = 0 AND available_at > now()
  AND available_at < {{waiting}}

-- name: estimate_retrying
-- Probe: the queued retries due later.
SELECT 1 FROM jobs_job WHERE status = 'queued' AND least(attempts, 1) = 1 AND available_at > now()
  AND available_at < {{waiting}}

-- name: estimate_waiting
-- Probe: the queued jobs waiting for their parents.
SELECT 1 FROM jobs_job WHERE status = 'queued' AND available_at = {{waiting}}
