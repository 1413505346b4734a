-- Workflows: creating a job that waits for others, and acting on a whole workflow.
-- A waiting job is `queued` with available_at = {{waiting}} (states.WAITING_AT), after any
-- instant a client may give, so no claim picks it. It is released, or cancelled when a parent
-- fails under `cancel`, by the trigger `jobs_job_release` (migrations 0018, 0023, 0025) in the
-- statement that settles its last parent: the settles, the rescue and the actions do not name it.

-- name: lock_parents
-- Lock a new job's parents (FOR SHARE), mark them as having dependents; their newest states.
-- A parent settling at this moment either waits for this transaction to commit, and its
-- release trigger then sees the new job, or has committed, and its newest state is read here
-- (a row lock returns the row's newest version). :adopt names the workflow the first parent
-- (:first) starts when it is in none and the new job names none (NULL: leave it alone). Only
-- a parent not yet marked is written; the others are locked, not rewritten.
WITH parents AS (
    SELECT id, status, workflow, has_dependents FROM jobs_job
    WHERE id = ANY(CAST(:ids AS uuid[]))
    FOR SHARE
), marked AS (
    UPDATE jobs_job AS j
    SET has_dependents = true,
        workflow = CASE WHEN j.id = CAST(:first AS uuid) AND j.workflow IS NULL
                        THEN CAST(:adopt AS text) ELSE j.workflow END
    FROM parents
    WHERE j.id = parents.id
      AND (NOT parents.has_dependents
           OR (j.id = CAST(:first AS uuid) AND parents.workflow IS NULL AND CAST(:adopt AS text) IS NOT NULL))
)
SELECT id, status, workflow FROM parents

-- name: create_dependent
-- Create one job with parents, waiting, ready or (a parent failed under `cancel`) cancelled.
-- The caller read the parents with lock_parents in the same transaction and decided
-- :status, :available_at, :waiting_on and, for a job cancelled at birth, :last_error; its
-- events follow in causal order from one INSERT: `created`, then `cancelled` if so. Its edges
-- (jobs_job_dependency, one per parent) are written with it: the release trigger's lookup;
-- and, when it waits for more than one parent, its count apart (jobs_job_waiting), which the
-- settles of its parents but the last take one off.
WITH named AS (
    INSERT INTO jobs_queue (name, created_at) VALUES (:queue, :now) ON CONFLICT DO NOTHING
), ins AS (
    INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                          max_attempts, idempotency_key, last_error, created_at, updated_at,
                          finished_at, cancelled_at, queue, depends_on, on_parent_failure,
                          workflow, waiting_on, not_before, traceparent)
    VALUES (:id, :type, CAST(:payload AS jsonb), CAST(:status AS text), :priority, :available_at, 0,
            :max_attempts, :idempotency_key, :last_error, :now, :now,
            CASE WHEN CAST(:status AS text) = 'failed' THEN CAST(:now AS timestamptz) END,
            CASE WHEN CAST(:status AS text) = 'failed' THEN CAST(:now AS timestamptz) END,
            :queue, CAST(:depends_on AS uuid[]), :on_parent_failure, :workflow, :waiting_on,
            :not_before, :traceparent)
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING *
), parent_edges AS (
    INSERT INTO jobs_job_dependency (parent_id, child_id)
    SELECT p, ins.id FROM ins CROSS JOIN unnest(ins.depends_on) AS p
), count_kept AS (
    INSERT INTO jobs_job_waiting (job_id, waiting_on)
    SELECT id, waiting_on FROM ins WHERE status = 'queued' AND waiting_on > 1
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT ins.id, e.type, 0, NULL, e.message, e.data, :now
    FROM ins CROSS JOIN (VALUES
        (1, 'created', 'Job created', CAST(:event_data AS jsonb)),
        (2, 'cancelled', :last_error, jsonb_build_object('parent', CAST(:failed_parent AS text), 'source', 'workflow'))
    ) AS e(n, type, message, data)
    WHERE e.n = 1 OR ins.status = 'failed'
    ORDER BY e.n
), wake AS (
    SELECT pg_notify(:notify_channel, queue) FROM ins WHERE status = 'queued' AND available_at <= :now
)
SELECT ins.* FROM ins LEFT JOIN wake ON true

-- name: cancel_workflow
-- Cancel every queued job of :workflow (waiting ones included): failed, cancelled_at, event
-- `cancelled` with :message. Running jobs finish their attempt; the dependents of each
-- cancelled job follow their policies (the release trigger). Returns the ids cancelled.
-- Their counts kept apart go first (jobs_job_waiting: that row's lock, then the job's, the
-- order every path that decides about a waiting job takes): the UPDATE's test of
-- counts_apart is evaluated once, before it locks its first row.
WITH counts_apart AS (
    DELETE FROM jobs_job_waiting AS c USING jobs_job AS j
    WHERE j.workflow = :workflow AND j.status = 'queued' AND c.job_id = j.id
    RETURNING c.job_id
), changed AS (
    UPDATE jobs_job
    SET status = 'failed', finished_at = :now, cancelled_at = :now, last_error = :message,
        waiting_on = 0, not_before = NULL, updated_at = :now
    WHERE workflow = :workflow AND status = 'queued'
      AND (SELECT count(*) FROM counts_apart) >= 0
    RETURNING id, attempts
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'cancelled', attempts, NULL, :message, CAST(:event_data AS jsonb), :now FROM changed
)
SELECT id FROM changed

-- name: workflow_failed_ids
-- The failed jobs of :workflow (a workflow retry's jobs; at most :limit).
SELECT id FROM jobs_job WHERE workflow = :workflow AND status = 'failed' ORDER BY created_at, id LIMIT :limit
