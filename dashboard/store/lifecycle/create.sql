-- Creating jobs. Read by sql.py: each statement under its `-- name:` header, its one-line
-- description below it; the other full-line comments are for the reader and are not sent.
-- A job that is due now wakes idle workers (pg_notify on :notify_channel, sent at commit and
-- folded within a transaction); one queued for later sends nothing: the poll finds it. The
-- notification's payload is the job's queue, so a worker serving other queues stays asleep.
-- Each create adds its queue's `jobs_queue` row if it has none (ON CONFLICT DO NOTHING: for a
-- queue that has one, an index probe and no write), so "every queue" is that small table
-- (claim.sql drives its per-queue claims from it).

-- name: create
-- Queue one job with its `created` event, unless another job holds its idempotency key.
-- Returns the new job's id only (no row when the key was taken): the caller holds everything
-- the row was written from (spec.new_record), as for create_many.
-- Index: job_idempotency_key_unique (partial unique, WHERE idempotency_key IS NOT NULL).
-- ON CONFLICT waits for a concurrent insert of the same key to commit or roll back, so two
-- clients racing on one key leave one row; the loser gets no row and reads the winner's
-- (find_by_idempotency_key).
WITH named AS (
    INSERT INTO jobs_queue (name, created_at) VALUES (:queue, :now) ON CONFLICT DO NOTHING
), ins AS (
    INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                          max_attempts, idempotency_key, last_error, created_at, updated_at, queue,
                          workflow, traceparent)
    VALUES (:id, :type, CAST(:payload AS jsonb), 'queued', :priority, :available_at, 0,
            :max_attempts, :idempotency_key, '', :now, :now, :queue, :workflow, :traceparent)
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, available_at, queue
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'created', 0, NULL, 'Job created', CAST(:event_data AS jsonb), :now FROM ins
), wake AS (
    SELECT pg_notify(:notify_channel, queue) FROM ins WHERE available_at <= :now
)
SELECT ins.id FROM ins LEFT JOIN wake ON true

-- name: create_many
-- Queue one chunk of a bulk create, read from one jsonb array; returns the rows not inserted.
-- One parameter holds any chunk size; a request's chunks run in one transaction
-- (enqueue.create_jobs). A key already taken (by an older job, or earlier in the same
-- request) inserts nothing: only the positions (`n`) of those rows come back, usually none,
-- since the caller holds everything the new rows were written from. The wake-up is a branch
-- of its own, so it runs whatever comes back (its row has no position).
WITH input AS (
    SELECT * FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
        n integer, id uuid, type text, payload jsonb, priority smallint,
        available_at timestamptz, max_attempts integer, idempotency_key text, queue text,
        workflow text, traceparent text)
), named AS (
    INSERT INTO jobs_queue (name, created_at)
    SELECT DISTINCT queue, CAST(:now AS timestamptz) FROM input ORDER BY queue
    ON CONFLICT DO NOTHING
), ins AS (
    INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                          max_attempts, idempotency_key, last_error, created_at, updated_at, queue,
                          workflow, traceparent)
    SELECT id, type, COALESCE(payload, '{}'::jsonb), 'queued', priority, available_at, 0,
           max_attempts, idempotency_key, '', :now, :now, queue, workflow, traceparent
    FROM input ORDER BY n
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, type, available_at, queue
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'created', 0, NULL, 'Job created',
           CAST(:event_data AS jsonb) || jsonb_build_object('type', type), :now
    FROM ins
), wake AS (
    SELECT pg_notify(:notify_channel, queue) FROM (SELECT DISTINCT queue FROM ins WHERE available_at <= :now) AS q
)
SELECT input.n FROM input WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.id = input.id)
UNION ALL
SELECT NULL FROM wake

-- name: find_by_idempotency_key
-- The job that holds one idempotency key (a create that inserted nothing returns it).
SELECT * FROM jobs_job WHERE idempotency_key = :idempotency_key

-- name: find_by_idempotency_keys
-- The jobs that hold any of these idempotency keys (the rows a bulk create did not insert).
SELECT * FROM jobs_job WHERE idempotency_key = ANY(CAST(:keys AS text[]))
