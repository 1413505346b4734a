-- Creating a job that carries a unique key (unique.py). Read by sql.py: each statement under
-- its `-- name:` header, its one-line description below it.
-- A key is held by at most one job: job_unique_key_idx is unique over unique_key WHERE
-- unique_key IS NOT NULL AND unique_retired_at IS NULL. A create judges the holder by its own
-- options: the holder blocks while its status is in the create's states (:unique_while:
-- `queued`, or `active` = queued or running) and its created_at is inside the create's
-- window (:unique_for seconds, NULL: no limit). A holder that does not block is retired
-- (unique_retired_at set) by the create that takes the key, in the same statement, so the
-- index decides every race: two creates never both insert, whatever they read.

-- name: create_unique
-- Queue one job holding :unique_key with its `created` event, retiring a holder that no longer blocks.
-- `unseated` runs to its end before the insert (the insert reads its count): the holder's index
-- entry is gone for this transaction when the insert probes the index. Two creates that retire
-- one holder queue on its row lock; the second finds it retired (re-read under the lock), and
-- its insert then meets the first's new job: ON CONFLICT DO NOTHING (any unique index: the key,
-- or an idempotency key given too) inserts nothing and the caller reads the holder.
WITH named AS (
    INSERT INTO jobs_queue (name, created_at) VALUES (:queue, :now) ON CONFLICT DO NOTHING
), unseated AS (
    UPDATE jobs_job SET unique_retired_at = :now
    WHERE unique_key = CAST(:unique_key AS text) AND unique_retired_at IS NULL
      AND NOT ((status = 'queued' OR (status = 'running' AND CAST(:unique_while AS text) = 'active'))
               AND (CAST(:unique_for AS double precision) IS NULL
                    OR created_at > CAST(:now AS timestamptz)
                                    - make_interval(secs => CAST(:unique_for AS double precision))))
    RETURNING id
), holder AS (
    INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                          max_attempts, idempotency_key, last_error, created_at, updated_at, queue,
                          workflow, unique_key, unique_for, unique_while, traceparent)
    SELECT :id, :type, CAST(:payload AS jsonb), 'queued', :priority, :available_at, 0,
           :max_attempts, :idempotency_key, '', :now, :now, :queue, :workflow,
           CAST(:unique_key AS text), CAST(:unique_for AS double precision), CAST(:unique_while AS text),
           CAST(:traceparent AS text)
    FROM (SELECT count(*) FROM unseated) AS after_unseated
    ON CONFLICT DO NOTHING
    RETURNING *
), created AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'created', 0, NULL, 'Job created', CAST(:event_data AS jsonb), :now FROM holder
), wake_holder AS (
    SELECT pg_notify(:notify_channel, queue) FROM holder WHERE available_at <= :now
)
SELECT holder.* FROM holder LEFT JOIN wake_holder ON true

-- name: debounce_unique
-- Give the queued job holding :unique_key (inside the window) the new payload and start, with its `debounced` event.
-- A job a worker claimed meanwhile is not changed: the claim holds its row lock, and once it
-- commits the row is re-read as running and left out; the caller then creates a new job.
WITH moved AS (
    UPDATE jobs_job
    SET payload = CAST(:payload AS jsonb), available_at = :available_at, updated_at = :now
    WHERE unique_key = CAST(:unique_key AS text) AND unique_retired_at IS NULL AND status = 'queued'
      AND (CAST(:unique_for AS double precision) IS NULL
           OR created_at > CAST(:now AS timestamptz) - make_interval(secs => CAST(:unique_for AS double precision)))
    RETURNING *
), noted AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'debounced', attempts, NULL, 'Debounced: payload replaced, start moved',
           CAST(:event_data AS jsonb), :now
    FROM moved
), wake_moved AS (
    SELECT pg_notify(:notify_channel, queue) FROM moved WHERE available_at <= :now
)
SELECT moved.* FROM moved LEFT JOIN wake_moved ON true

-- name: find_unique_holder
-- The job holding :unique_key (a create that inserted nothing returns it). Index: job_unique_key_idx.
SELECT * FROM jobs_job WHERE unique_key = :unique_key AND unique_retired_at IS NULL
