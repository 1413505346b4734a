-- Recurring jobs (schedules.py): the jobs_schedule rows the workers fire, and the reads of a
-- schedule's runs. The clock is {{clock}}:
-- the database's, so every worker host judges "due" by one clock whatever its own drift; a
-- test passes :now to move it. A run is an ordinary job created by `create` (create.sql) in
-- the same transaction that advances the row, keyed `schedule:{name}:{slot}`.

-- name: schedule_clock
-- The database's time (or the test's :now): what a sync and an operator's resume count from.
SELECT {{clock}} AS now

-- name: schedule_declare
-- Insert or update one declared schedule, un-retiring it; returns the row.
-- A new row starts at :next_run_at (the first slot after now). An existing one keeps its
-- next_run_at, so the slots missed while no worker ran are still fired, unless its timing
-- changed (cron or timezone) or it comes back from retirement: then it starts from
-- :next_run_at, and what passed under the old definition is not fired.
WITH declared AS (
INSERT INTO jobs_schedule AS s (name, cron, timezone, job_type, payload, queue, priority, max_attempts,
                                missed, paused, retired_at, next_run_at, declared_at, updated_at,
                                unique_key, unique_for, unique_while)
VALUES (:name, :cron, :timezone, :job_type, CAST(:payload AS jsonb), :queue, :priority, :max_attempts,
        :missed, false, NULL, :next_run_at, :now, :now, CAST(:unique_key AS text),
        CAST(:unique_for AS double precision), CAST(:unique_while AS text))
ON CONFLICT (name) DO UPDATE
SET cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, job_type = EXCLUDED.job_type,
    payload = EXCLUDED.payload, queue = EXCLUDED.queue, priority = EXCLUDED.priority,
    max_attempts = EXCLUDED.max_attempts, missed = EXCLUDED.missed, retired_at = NULL,
    unique_key = EXCLUDED.unique_key, unique_for = EXCLUDED.unique_for,
    unique_while = EXCLUDED.unique_while,
    next_run_at = CASE
        WHEN s.cron <> EXCLUDED.cron OR s.timezone <> EXCLUDED.timezone OR s.retired_at IS NOT NULL
          OR s.next_run_at IS NULL
        THEN EXCLUDED.next_run_at ELSE s.next_run_at END,
    declared_at = EXCLUDED.declared_at,
    updated_at = CASE
        WHEN (s.cron, s.timezone, s.job_type, s.payload, s.queue, s.priority, s.max_attempts, s.missed,
              s.unique_key, s.unique_for, s.unique_while)
             IS DISTINCT FROM (EXCLUDED.cron, EXCLUDED.timezone, EXCLUDED.job_type, EXCLUDED.payload,
                               EXCLUDED.queue, EXCLUDED.priority, EXCLUDED.max_attempts, EXCLUDED.missed,
                               EXCLUDED.unique_key, EXCLUDED.unique_for, EXCLUDED.unique_while)
          OR s.retired_at IS NOT NULL
        THEN EXCLUDED.updated_at ELSE s.updated_at END
RETURNING *
)
SELECT * FROM declared

-- name: schedule_retire_others
-- Mark every schedule not among :names retired (it stops firing; its row and runs stay).
WITH retired AS (
    UPDATE jobs_schedule SET retired_at = :now, updated_at = :now
    WHERE retired_at IS NULL AND NOT (name = ANY(CAST(:names AS text[])))
    RETURNING name
)
SELECT name FROM retired

-- name: schedule_lock_due
-- Lock up to :limit due schedules (next run at or before now, not paused, not retired).
-- SKIP LOCKED: a schedule another worker is firing is left to it; once it commits, its
-- next_run_at is past now and the row is no longer due (READ COMMITTED re-checks the WHERE on
-- the row's newest version before locking it). Index: schedule_due_idx.
SELECT s.*, {{clock}} AS clock
FROM jobs_schedule AS s
WHERE s.next_run_at <= {{clock}}
  AND NOT s.paused AND s.retired_at IS NULL
ORDER BY s.next_run_at
LIMIT :limit
FOR UPDATE OF s SKIP LOCKED

-- name: schedule_advance
-- After a catch-up's runs are created: the next slot, the newest slot fired and its job, the
-- counters. Runs in the transaction that locked the row and created the runs.
WITH advanced AS (
UPDATE jobs_schedule
SET next_run_at = :next_run_at,
    last_run_at = COALESCE(CAST(:last_run_at AS timestamptz), last_run_at),
    last_job_id = COALESCE(CAST(:last_job_id AS uuid), last_job_id),
    last_fired_at = CASE WHEN CAST(:fired AS integer) > 0 THEN :now ELSE last_fired_at END,
    fired_count = fired_count + CAST(:fired AS integer),
    skipped_count = skipped_count + CAST(:skipped AS integer)
WHERE name = :name
RETURNING name
)
SELECT name FROM advanced

-- name: schedule_next_due
-- Seconds until the earliest active schedule is due (negative: overdue; NULL: none).
-- The scheduler sleeps that long, at most its cap. Index: schedule_due_idx.
SELECT EXTRACT(EPOCH FROM min(next_run_at) - {{clock}})
       AS seconds
FROM jobs_schedule WHERE NOT paused AND retired_at IS NULL

-- name: schedule_lock_one
-- Lock one schedule by name for an operator's change (waits for a firing worker to commit).
SELECT s.*, {{clock}} AS clock
FROM jobs_schedule AS s WHERE s.name = :name
FOR UPDATE

-- name: schedule_set_paused
-- Pause or resume one schedule, recording who and when; a resume starts from :next_run_at
-- (the first slot after now: the slots that passed while paused are not fired). A change
-- (:audit, the row locked by schedule_lock_one was the other way) writes its `jobs_audit` row
-- in the same statement, as a queue's pause does (queues.sql); pausing a paused schedule
-- writes none. :event_data is the door's audit data.
WITH changed AS (
UPDATE jobs_schedule
SET paused = CAST(:paused AS boolean), paused_by = :actor, paused_at = :now, updated_at = :now,
    next_run_at = CASE WHEN CAST(:paused AS boolean) THEN next_run_at
                       ELSE CAST(:next_run_at AS timestamptz) END
WHERE name = :name
RETURNING name
), audit AS (
    INSERT INTO jobs_audit (created_at, action, actor, data)
    SELECT :now, CASE WHEN CAST(:paused AS boolean) THEN 'schedule_paused' ELSE 'schedule_resumed' END,
           :actor, CAST(:event_data AS jsonb) || jsonb_build_object('schedule', name)
    FROM changed WHERE CAST(:audit AS boolean)
)
SELECT name FROM changed

-- name: schedule_list
-- Every schedule with its last run's job status: active ones first, by name. The table holds
-- what the code declares (and what it once did): a few rows, bounded by :limit.
SELECT s.*, j.status AS last_job_status
FROM jobs_schedule AS s LEFT JOIN jobs_job AS j ON j.id = s.last_job_id
ORDER BY s.retired_at IS NOT NULL, s.name
LIMIT :limit

-- name: schedule_one
-- One schedule with its last run's job status.
SELECT s.*, j.status AS last_job_status
FROM jobs_schedule AS s LEFT JOIN jobs_job AS j ON j.id = s.last_job_id
WHERE s.name = :name

-- name: schedule_runs
-- The newest :limit runs of each schedule in :names (slots and runs now), newest first.
-- A run's key is `schedule:{name}:{time}...`: the name's runs are the keys between
-- 'schedule:{name}:' and 'schedule:{name};' (';' follows ':') in byte order, and their times
-- (ISO 8601 UTC) sort chronologically in it. Index: job_schedule_key_idx (text_pattern_ops:
-- byte order, the ~>=~ / ~<~ operators), partial on schedule keys: one backward range per
-- schedule, whatever the database's collation and however many jobs exist.
SELECT r.* FROM unnest(CAST(:names AS text[])) AS n(name)
CROSS JOIN LATERAL (
    SELECT n.name AS schedule, j.id, j.type, j.status, j.attempts, j.max_attempts, j.idempotency_key,
           j.created_at, j.finished_at, j.cancelled_at, left(j.last_error, 200) AS last_error
    FROM jobs_job AS j
    WHERE j.idempotency_key LIKE 'schedule:%'
      AND j.idempotency_key ~>=~ ('schedule:' || n.name || ':')
      AND j.idempotency_key ~<~ ('schedule:' || n.name || ';')
    ORDER BY j.idempotency_key USING ~>~
    LIMIT :limit
) AS r

-- name: schedule_figures
-- The active schedules' figures for /metrics: one series per schedule the code declares.
-- A few rows (the table holds what the code declares), bounded by :limit.
SELECT name, paused, next_run_at, last_run_at, last_fired_at, fired_count, skipped_count
FROM jobs_schedule WHERE retired_at IS NULL ORDER BY name LIMIT :limit
