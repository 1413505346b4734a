-- Settling: how a worker records the end of an attempt.
--
-- Each settle is fenced by the owner's guard (attempt.sql) and writes the job and its events
-- in one statement. A settle with pending progress reports (runtime/progress.py coalesces a
-- handler's reports instead of committing each) writes them first, from :progress, a jsonb
-- array of {message, data, created_at}, inserted only for rows the fenced UPDATE matched, so a
-- lost attempt writes no progress either. Each settle has that twin (`..._with_progress`):
-- one statement for both, its :progress an empty array when there are none, cost more per
-- statement on the drain's path (docs/benchmarks.md), so the two stay apart.
--
-- Events of one statement come out of ONE INSERT ... SELECT ... ORDER BY, so their ids follow
-- the causal order (two sibling INSERT CTEs run in no defined order): per job, its progress
-- reports, then its outcome; in complete_and_claim, then the next job's `claimed`, stamped
-- 1 microsecond after the statement's time so that created_at orders them the same way. A
-- report's created_at is its own time, never later than the statement's, so created_at is
-- non-decreasing in the same order.
--
-- Every outcome's data carries the job's type and the attempt's run time (`run_ms`), for the
-- overview's charts: from :started_at (the attempt's start, when the caller knows it: the
-- claim's time, or when a thread took a job claimed ahead of it), else from the attempt's
-- `claimed` event, job_event_job_id_idx read backwards from the newest event. COALESCE
-- evaluates that subquery only for a NULL start, so with a start known no plan reads the
-- events at all (a plan once read them through jobs_jobevent_type_idx: docs/benchmarks.md).

-- name: complete
-- running -> succeeded for the owner of this attempt, with its `succeeded` event.
WITH done AS (
    UPDATE jobs_job
    SET status = 'succeeded', result = CAST(:result AS jsonb), locked_by = NULL, locked_until = NULL,
        finished_at = {{clock}},
        updated_at = {{clock}}
    WHERE id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
    RETURNING *
), freed AS (
    UPDATE jobs_queue_slot AS slot SET job_id = NULL, attempt = NULL
    FROM done WHERE slot.job_id = done.id AND slot.attempt = done.attempts
    RETURNING pg_notify(:notify_channel, slot.queue)
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT s.id, 'succeeded', s.attempts, CAST(:worker_id AS text), 'Job succeeded',
           CAST(:event_data AS jsonb) || jsonb_build_object('type', s.type, 'run_ms', COALESCE(
               round(extract(epoch FROM {{clock}}
                                        - CAST(:started_at AS timestamptz)) * 1000)::bigint,
               (SELECT round(extract(epoch FROM {{clock}}
                                                - c.created_at) * 1000)::bigint
                FROM jobs_jobevent AS c
                WHERE c.job_id = s.id AND c.attempt = s.attempts AND c.type = 'claimed'
                ORDER BY c.id DESC LIMIT 1))),
           {{clock}}
    FROM done AS s
)
SELECT * FROM done

-- name: complete_with_progress
-- `complete`, writing the attempt's pending progress reports before its `succeeded` event.
WITH done AS (
    UPDATE jobs_job
    SET status = 'succeeded', result = CAST(:result AS jsonb), locked_by = NULL, locked_until = NULL,
        finished_at = {{clock}},
        updated_at = {{clock}}
    WHERE id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
    RETURNING *
), freed AS (
    UPDATE jobs_queue_slot AS slot SET job_id = NULL, attempt = NULL
    FROM done WHERE slot.job_id = done.id AND slot.attempt = done.attempts
    RETURNING pg_notify(:notify_channel, slot.queue)
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT job_id, type, attempt, worker_id, message, data, created_at FROM (
        SELECT 0 AS part, p.n, s.id AS job_id, 'progress' AS type, s.attempts AS attempt,
               CAST(:worker_id AS text) AS worker_id, p.e ->> 'message' AS message, p.e -> 'data' AS data,
               LEAST(CAST(p.e ->> 'created_at' AS timestamptz),
                     {{clock}}) AS created_at
        FROM done AS s
        CROSS JOIN LATERAL jsonb_array_elements(CAST(:progress AS jsonb)) WITH ORDINALITY AS p(e, n)
        UNION ALL
        SELECT 1, 0, s.id, 'succeeded', s.attempts, CAST(:worker_id AS text), 'Job succeeded',
               CAST(:event_data AS jsonb) || jsonb_build_object('type', s.type, 'run_ms', COALESCE(
                   round(extract(epoch FROM {{clock}}
                                            - CAST(:started_at AS timestamptz)) * 1000)::bigint,
                   (SELECT round(extract(epoch FROM {{clock}}
                                                    - c.created_at) * 1000)::bigint
                    FROM jobs_jobevent AS c
                    WHERE c.job_id = s.id AND c.attempt = s.attempts AND c.type = 'claimed'
                    ORDER BY c.id DESC LIMIT 1))),
               {{clock}}
        FROM done AS s
    ) AS e
    ORDER BY part, n
)
SELECT * FROM done

-- name: complete_and_claim
-- One-job mode: record the owner's success and claim its next job, in one statement.
-- A job then costs one round trip and one commit instead of two. The halves are independent:
-- the completion is fenced exactly as `complete` (a lost attempt records nothing, and the
-- claim still happens), and the claim is claim_one's (claim.sql; the job just completed is no
-- longer queued, so it cannot be picked again). Always one row: `completed` (0 or 1),
-- `freed` (the slots it freed, 0 or 1: store/lifecycle/claim_form.py then claims with the limits next)
-- and the claimed job's columns, NULL when nothing was eligible.
-- The job rows' own times (updated_at, locked_until) are the statement's. Index:
-- job_queue_claim_idx, as claim_one's.
-- Both rows are written by one UPDATE (`settled_and_claimed`), as every form of it below does:
-- the settled job by its id under the owner's fence, the picked one under the lock `picked`
-- took, each row's new values chosen by which of the two it is. PostgreSQL prepares an
-- UPDATE's target table per UPDATE of a statement (its indexes, checks, triggers), so one
-- UPDATE for both rows costs the server less than two (docs/benchmarks.md). `done` and
-- `claimed` are its rows by their new status; a job that lease recovery queued again before
-- this statement can only be claimed, never settled, since its fence asks for `running`.
-- The job to settle is locked first (`mine`, under the owner's fence), before the claim reads
-- a queue: the claim's test of `mine` is evaluated once, before its first row is locked. So
-- while the statement waits for that lock it holds no claim, and a transaction that holds the
-- job being settled and then asks for the job this statement would claim (a create's
-- lock_parents naming both as parents, a workflow's cancel) gets it, whatever join the plan
-- chose; had the claim come first, the two would deadlock (test_complete_and_claim.py).
-- What a settle most often waits for is another worker's claim that read the job as still
-- queued in its snapshot: PostgreSQL locks the job's newest version before it re-checks it,
-- and keeps that lock to its commit (docs/benchmarks.md).
WITH mine AS MATERIALIZED (
    SELECT id FROM jobs_job
    WHERE id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
    FOR UPDATE
), served AS (
    SELECT q.name, q.concurrency_limit, q.rate_count, q.rate_period_seconds
    FROM jobs_queue AS q
    WHERE NOT q.paused AND (CAST(:queues AS text[]) IS NULL OR q.name = ANY(CAST(:queues AS text[])))
    UNION ALL
    SELECT 'default', NULL, NULL, NULL
    WHERE (CAST(:queues AS text[]) IS NULL OR 'default' = ANY(CAST(:queues AS text[])))
      AND NOT EXISTS (SELECT 1 FROM jobs_queue WHERE name = 'default')
), picked AS (
    SELECT job.id, served.name AS queue, room.slot, room.ring
    FROM (SELECT * FROM served ORDER BY random()) AS served
    CROSS JOIN LATERAL (
        SELECT CASE WHEN served.concurrency_limit IS NOT NULL THEN (
                   SELECT n FROM jobs_queue_slot
                   WHERE queue = served.name AND job_id IS NULL
                   ORDER BY n LIMIT 1
                   FOR UPDATE SKIP LOCKED) END AS slot,
               CASE WHEN served.rate_count IS NOT NULL THEN (
                   SELECT n FROM jobs_queue_rate
                   WHERE queue = served.name
                     AND taken_at <= {{clock}}
                                     - make_interval(secs => served.rate_period_seconds)
                   ORDER BY taken_at, n LIMIT 1
                   FOR UPDATE SKIP LOCKED) END AS ring
        OFFSET 0
    ) AS room
    CROSS JOIN LATERAL (
        SELECT id FROM jobs_job
        WHERE (served.concurrency_limit IS NULL OR room.slot IS NOT NULL)
          AND (served.rate_count IS NULL OR room.ring IS NOT NULL)
          AND queue = served.name AND status = 'queued'
          AND available_at <= {{clock}}
          AND attempts < max_attempts
          AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
        ORDER BY priority DESC, available_at, created_at, id
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS job
    WHERE (SELECT count(*) FROM mine) >= 0
    LIMIT 1
), settled_and_claimed AS (
    UPDATE jobs_job AS j
    SET status = CASE WHEN t.settle THEN 'succeeded' ELSE 'running' END,
        result = CASE WHEN t.settle THEN CAST(:result AS jsonb) END,
        attempts = CASE WHEN t.settle THEN j.attempts ELSE j.attempts + 1 END,
        locked_by = CASE WHEN t.settle THEN NULL ELSE CAST(:worker_id AS text) END,
        locked_until = CASE WHEN t.settle THEN NULL ELSE {{clock}}
                       + make_interval(secs => CAST(:lease_seconds AS float8)) END,
        finished_at = CASE WHEN t.settle THEN {{clock}} ELSE j.finished_at END,
        last_error = CASE WHEN t.settle THEN j.last_error ELSE '' END,
        updated_at = {{clock}}
    FROM (SELECT id, true AS settle FROM mine
          UNION ALL
          SELECT id, false FROM picked) AS t
    WHERE j.id = t.id
      AND (NOT t.settle OR (j.status = 'running' AND j.locked_by = :worker_id AND j.attempts = :attempt))
    RETURNING j.*
), done AS (
    SELECT id, attempts, type FROM settled_and_claimed WHERE status = 'succeeded'
), claimed AS (
    SELECT * FROM settled_and_claimed WHERE status = 'running'
), took_slot AS (
    UPDATE jobs_queue_slot AS s SET job_id = claimed.id, attempt = claimed.attempts
    FROM claimed
    WHERE (s.queue, s.n) = (SELECT queue, slot FROM picked WHERE slot IS NOT NULL)
), took_rate AS (
    UPDATE jobs_queue_rate AS r SET taken_at = {{clock}}
    FROM claimed
    WHERE (r.queue, r.n) = (SELECT queue, ring FROM picked WHERE ring IS NOT NULL)
), freed AS (
    UPDATE jobs_queue_slot AS slot SET job_id = NULL, attempt = NULL
    FROM done WHERE slot.job_id = done.id AND slot.attempt = done.attempts
    RETURNING pg_notify(:notify_channel, slot.queue)
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT job_id, type, attempt, worker_id, message, data, created_at FROM (
        SELECT 1 AS part, s.id AS job_id, 'succeeded' AS type, s.attempts AS attempt,
               CAST(:worker_id AS text) AS worker_id, 'Job succeeded' AS message,
               jsonb_build_object('type', s.type, 'run_ms', COALESCE(
                   round(extract(epoch FROM {{clock}}
                                            - CAST(:started_at AS timestamptz)) * 1000)::bigint,
                   (SELECT round(extract(epoch FROM {{clock}}
                                                    - c.created_at) * 1000)::bigint
                    FROM jobs_jobevent AS c
                    WHERE c.job_id = s.id AND c.attempt = s.attempts AND c.type = 'claimed'
                    ORDER BY c.id DESC LIMIT 1))) AS data,
               {{clock}} AS created_at
        FROM done AS s
        UNION ALL
        SELECT 2, id, 'claimed', attempts, locked_by, 'Claimed by worker',
               jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
                   extract(epoch FROM {{clock}} - available_at)
                   * 1000))::bigint),
               {{clock}} + interval '1 microsecond'
        FROM claimed
    ) AS e
    ORDER BY part
)
SELECT (SELECT count(*) FROM done) AS completed,
       (SELECT count(*) FROM freed) AS freed,
       claimed.*
FROM (VALUES (1)) AS one LEFT JOIN claimed ON true

-- name: complete_and_claim_with_progress
-- `complete_and_claim`, writing the attempt's pending progress reports before its success.
WITH mine AS MATERIALIZED (
    SELECT id FROM jobs_job
    WHERE id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
    FOR UPDATE
), served AS (
    SELECT q.name, q.concurrency_limit, q.rate_count, q.rate_period_seconds
    FROM jobs_queue AS q
    WHERE NOT q.paused AND (CAST(:queues AS text[]) IS NULL OR q.name = ANY(CAST(:queues AS text[])))
    UNION ALL
    SELECT 'default', NULL, NULL, NULL
    WHERE (CAST(:queues AS text[]) IS NULL OR 'default' = ANY(CAST(:queues AS text[])))
      AND NOT EXISTS (SELECT 1 FROM jobs_queue WHERE name = 'default')
), picked AS (
    SELECT job.id, served.name AS queue, room.slot, room.ring
    FROM (SELECT * FROM served ORDER BY random()) AS served
    CROSS JOIN LATERAL (
        SELECT CASE WHEN served.concurrency_limit IS NOT NULL THEN (
                   SELECT n FROM jobs_queue_slot
                   WHERE queue = served.name AND job_id IS NULL
                   ORDER BY n LIMIT 1
                   FOR UPDATE SKIP LOCKED) END AS slot,
               CASE WHEN served.rate_count IS NOT NULL THEN (
                   SELECT n FROM jobs_queue_rate
                   WHERE queue = served.name
                     AND taken_at <= {{clock}}
                                     - make_interval(secs => served.rate_period_seconds)
                   ORDER BY taken_at, n LIMIT 1
                   FOR UPDATE SKIP LOCKED) END AS ring
        OFFSET 0
    ) AS room
    CROSS JOIN LATERAL (
        SELECT id FROM jobs_job
        WHERE (served.concurrency_limit IS NULL OR room.slot IS NOT NULL)
          AND (served.rate_count IS NULL OR room.ring IS NOT NULL)
          AND queue = served.name AND status = 'queued'
          AND available_at <= {{clock}}
          AND attempts < max_attempts
          AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
        ORDER BY priority DESC, available_at, created_at, id
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS job
    WHERE (SELECT count(*) FROM mine) >= 0
    LIMIT 1
), settled_and_claimed AS (
    UPDATE jobs_job AS j
    SET status = CASE WHEN t.settle THEN 'succeeded' ELSE 'running' END,
        result = CASE WHEN t.settle THEN CAST(:result AS jsonb) END,
        attempts = CASE WHEN t.settle THEN j.attempts ELSE j.attempts + 1 END,
        locked_by = CASE WHEN t.settle THEN NULL ELSE CAST(:worker_id AS text) END,
        locked_until = CASE WHEN t.settle THEN NULL ELSE {{clock}}
                       + make_interval(secs => CAST(:lease_seconds AS float8)) END,
        finished_at = CASE WHEN t.settle THEN {{clock}} ELSE j.finished_at END,
        last_error = CASE WHEN t.settle THEN j.last_error ELSE '' END,
        updated_at = {{clock}}
    FROM (SELECT id, true AS settle FROM mine
          UNION ALL
          SELECT id, false FROM picked) AS t
    WHERE j.id = t.id
      AND (NOT t.settle OR (j.status = 'running' AND j.locked_by = :worker_id AND j.attempts = :attempt))
    RETURNING j.*
), done AS (
    SELECT id, attempts, type FROM settled_and_claimed WHERE status = 'succeeded'
), claimed AS (
    SELECT * FROM settled_and_claimed WHERE status = 'running'
), took_slot AS (
    UPDATE jobs_queue_slot AS s SET job_id = claimed.id, attempt = claimed.attempts
    FROM claimed
    WHERE (s.queue, s.n) = (SELECT queue, slot FROM picked WHERE slot IS NOT NULL)
), took_rate AS (
    UPDATE jobs_queue_rate AS r SET taken_at = {{clock}}
    FROM claimed
    WHERE (r.queue, r.n) = (SELECT queue, ring FROM picked WHERE ring IS NOT NULL)
), freed AS (
    UPDATE jobs_queue_slot AS slot SET job_id = NULL, attempt = NULL
    FROM done WHERE slot.job_id = done.id AND slot.attempt = done.attempts
    RETURNING pg_notify(:notify_channel, slot.queue)
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT job_id, type, attempt, worker_id, message, data, created_at FROM (
        SELECT 0 AS part, p.n, s.id AS job_id, 'progress' AS type, s.attempts AS attempt,
               CAST(:worker_id AS text) AS worker_id, p.e ->> 'message' AS message, p.e -> 'data' AS data,
               LEAST(CAST(p.e ->> 'created_at' AS timestamptz),
                     {{clock}}) AS created_at
        FROM done AS s
        CROSS JOIN LATERAL jsonb_array_elements(CAST(:progress AS jsonb)) WITH ORDINALITY AS p(e, n)
        UNION ALL
        SELECT 1, 0, s.id, 'succeeded', s.attempts, CAST(:worker_id AS text), 'Job succeeded',
               jsonb_build_object('type', s.type, 'run_ms', COALESCE(
                   round(extract(epoch FROM {{clock}}
                                            - CAST(:started_at AS timestamptz)) * 1000)::bigint,
                   (SELECT round(extract(epoch FROM {{clock}}
                                                    - c.created_at) * 1000)::bigint
                    FROM jobs_jobevent AS c
                    WHERE c.job_id = s.id AND c.attempt = s.attempts AND c.type = 'claimed'
                    ORDER BY c.id DESC LIMIT 1))),
               {{clock}}
        FROM done AS s
        UNION ALL
        SELECT 2, 0, id, 'claimed', attempts, locked_by, 'Claimed by worker',
               jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
                   extract(epoch FROM {{clock}} - available_at)
                   * 1000))::bigint),
               {{clock}} + interval '1 microsecond'
        FROM claimed
    ) AS e
    ORDER BY part, n
)
SELECT (SELECT count(*) FROM done) AS completed,
       (SELECT count(*) FROM freed) AS freed,
       claimed.*
FROM (VALUES (1)) AS one LEFT JOIN claimed ON true

-- name: complete_many
-- Batch mode: record many successes, each fenced by its own owner; returns the ids recorded.
-- :rows is a jsonb array of {id, worker_id, attempt, result, started_at}; the jobs that were
-- no longer the worker's are left out of what comes back. Events get their ids in the order
-- the successes were submitted (`n`).
WITH input AS (
    SELECT r.*, row_number() OVER () AS n
    FROM jsonb_to_recordset(CAST(:rows AS jsonb))
         AS r(id uuid, worker_id text, attempt integer, result jsonb, started_at timestamptz)
), done AS (
    UPDATE jobs_job AS j
    SET status = 'succeeded', result = input.result, locked_by = NULL, locked_until = NULL,
        finished_at = {{clock}},
        updated_at = {{clock}}
    FROM input
    WHERE j.id = input.id AND j.status = 'running' AND j.locked_by = input.worker_id
      AND j.attempts = input.attempt
    RETURNING j.id, j.attempts, j.type, input.worker_id, input.n, input.started_at
), freed AS (
    UPDATE jobs_queue_slot AS slot SET job_id = NULL, attempt = NULL
    FROM done WHERE slot.job_id = done.id AND slot.attempt = done.attempts
    RETURNING pg_notify(:notify_channel, slot.queue)
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT s.id, 'succeeded', s.attempts, s.worker_id, 'Job succeeded',
           jsonb_build_object('type', s.type, 'run_ms', COALESCE(
               round(extract(epoch FROM {{clock}}
                                        - s.started_at) * 1000)::bigint,
               (SELECT round(extract(epoch FROM {{clock}}
                                                - c.created_at) * 1000)::bigint
                FROM jobs_jobevent AS c
                WHERE c.job_id = s.id AND c.attempt = s.attempts AND c.type = 'claimed'
                ORDER BY c.id DESC LIMIT 1))),
           {{clock}}
    FROM done AS s
    ORDER BY s.n
)
SELECT id FROM done

-- name: complete_many_with_progress
-- `complete_many` for rows carrying `progress`, each job's reports written before its success.
WITH input AS (
    SELECT r.*, row_number() OVER () AS n
    FROM jsonb_to_recordset(CAST(:rows AS jsonb))
         AS r(id uuid, worker_id text, attempt integer, result jsonb, started_at timestamptz, progress jsonb)
), done AS (
    UPDATE jobs_job AS j
    SET status = 'succeeded', result = input.result, locked_by = NULL, locked_until = NULL,
        finished_at = {{clock}},
        updated_at = {{clock}}
    FROM input
    WHERE j.id = input.id AND j.status = 'running' AND j.locked_by = input.worker_id
      AND j.attempts = input.attempt
    RETURNING j.id, j.attempts, j.type, input.worker_id, input.n, input.started_at, input.progress
), freed AS (
    UPDATE jobs_queue_slot AS slot SET job_id = NULL, attempt = NULL
    FROM done WHERE slot.job_id = done.id AND slot.attempt = done.attempts
    RETURNING pg_notify(:notify_channel, slot.queue)
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT job_id, type, attempt, worker_id, message, data, created_at FROM (
        SELECT s.n AS job_order, 0 AS part, p.n, s.id AS job_id, 'progress' AS type, s.attempts AS attempt,
               s.worker_id, p.e ->> 'message' AS message, p.e -> 'data' AS data,
               LEAST(CAST(p.e ->> 'created_at' AS timestamptz),
                     {{clock}}) AS created_at
        FROM done AS s CROSS JOIN LATERAL jsonb_array_elements(s.progress) WITH ORDINALITY AS p(e, n)
        UNION ALL
        SELECT s.n, 1, 0, s.id, 'succeeded', s.attempts, s.worker_id, 'Job succeeded',
               jsonb_build_object('type', s.type, 'run_ms', COALESCE(
                   round(extract(epoch FROM {{clock}}
                                            - s.started_at) * 1000)::bigint,
                   (SELECT round(extract(epoch FROM {{clock}}
                                                    - c.created_at) * 1000)::bigint
                    FROM jobs_jobevent AS c
                    WHERE c.job_id = s.id AND c.attempt = s.attempts AND c.type = 'claimed'
                    ORDER BY c.id DESC LIMIT 1))),
               {{clock}}
        FROM done AS s
    ) AS e
    ORDER BY job_order, part, n
)
SELECT id FROM done

-- name: fail
-- Record the owner's failed attempt: requeued after :delay seconds while attempts remain, else failed.
-- The event is `retry_scheduled` (with when) or `failed`; last_error and the event's message
-- are :error.
WITH failed AS (
    UPDATE jobs_job
    SET status = CASE WHEN attempts < max_attempts THEN 'queued' ELSE 'failed' END,
        available_at = CASE WHEN attempts < max_attempts
                            THEN {{clock}}
                                 + make_interval(secs => CAST(:delay AS float8))
                            ELSE available_at END,
        finished_at = CASE WHEN attempts < max_attempts
                           THEN NULL ELSE {{clock}} END,
        locked_by = NULL, locked_until = NULL, last_error = :error,
        updated_at = {{clock}}
    WHERE id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
    RETURNING *
), freed AS (
    UPDATE jobs_queue_slot AS slot SET job_id = NULL, attempt = NULL
    FROM failed WHERE slot.job_id = failed.id AND slot.attempt = failed.attempts
    RETURNING pg_notify(:notify_channel, slot.queue)
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT s.id, CASE WHEN s.status = 'queued' THEN 'retry_scheduled' ELSE 'failed' END, s.attempts,
           CAST(:worker_id AS text), :error,
           CASE WHEN s.status = 'queued'
                THEN CAST(:event_data AS jsonb) || jsonb_build_object(
                    'retry_at', s.available_at, 'retry_in_seconds', CAST(:delay AS float8))
                ELSE CAST(:event_data AS jsonb) END
           || jsonb_build_object('type', s.type, 'run_ms', COALESCE(
               round(extract(epoch FROM {{clock}}
                                        - CAST(:started_at AS timestamptz)) * 1000)::bigint,
               (SELECT round(extract(epoch FROM {{clock}}
                                                - c.created_at) * 1000)::bigint
                FROM jobs_jobevent AS c
                WHERE c.job_id = s.id AND c.attempt = s.attempts AND c.type = 'claimed'
                ORDER BY c.id DESC LIMIT 1))),
           {{clock}}
    FROM failed AS s
)
SELECT * FROM failed

-- name: fail_with_progress
-- `fail`, writing the attempt's pending progress reports before its outcome.
WITH failed AS (
    UPDATE jobs_job
    SET status = CASE WHEN attempts < max_attempts THEN 'queued' ELSE 'failed' END,
        available_at = CASE WHEN attempts < max_attempts
                            THEN {{clock}}
                                 + make_interval(secs => CAST(:delay AS float8))
                            ELSE available_at END,
        finished_at = CASE WHEN attempts < max_attempts
                           THEN NULL ELSE {{clock}} END,
        locked_by = NULL, locked_until = NULL, last_error = :error,
        updated_at = {{clock}}
    WHERE id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
    RETURNING *
), freed AS (
    UPDATE jobs_queue_slot AS slot SET job_id = NULL, attempt = NULL
    FROM failed WHERE slot.job_id = failed.id AND slot.attempt = failed.attempts
    RETURNING pg_notify(:notify_channel, slot.queue)
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT job_id, type, attempt, worker_id, message, data, created_at FROM (
        SELECT 0 AS part, p.n, s.id AS job_id, 'progress' AS type, s.attempts AS attempt,
               CAST(:worker_id AS text) AS worker_id, p.e ->> 'message' AS message, p.e -> 'data' AS data,
               LEAST(CAST(p.e ->> 'created_at' AS timestamptz),
                     {{clock}}) AS created_at
        FROM failed AS s
        CROSS JOIN LATERAL jsonb_array_elements(CAST(:progress AS jsonb)) WITH ORDINALITY AS p(e, n)
        UNION ALL
        SELECT 1, 0, s.id, CASE WHEN s.status = 'queued' THEN 'retry_scheduled' ELSE 'failed' END,
               s.attempts, CAST(:worker_id AS text), :error,
               CASE WHEN s.status = 'queued'
                    THEN CAST(:event_data AS jsonb) || jsonb_build_object(
                        'retry_at', s.available_at, 'retry_in_seconds', CAST(:delay AS float8))
                    ELSE CAST(:event_data AS jsonb) END
               || jsonb_build_object('type', s.type, 'run_ms', COALESCE(
                   round(extract(epoch FROM {{clock}}
                                            - CAST(:started_at AS timestamptz)) * 1000)::bigint,
                   (SELECT round(extract(epoch FROM {{clock}}
                                                    - c.created_at) * 1000)::bigint
                    FROM jobs_jobevent AS c
                    WHERE c.job_id = s.id AND c.attempt = s.attempts AND c.type = 'claimed'
                    ORDER BY c.id DESC LIMIT 1))),
               {{clock}}
        FROM failed AS s
    ) AS e
    ORDER BY part, n
)
SELECT * FROM failed

-- name: complete_and_claim_no_limits
-- `complete_and_claim` whose claim is `claim_one_no_limits`'s (claim.sql): no limited queue open.
WITH mine AS MATERIALIZED (
    SELECT id FROM jobs_job
    WHERE id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
    FOR UPDATE
), served AS (
    SELECT q.name, q.concurrency_limit, q.rate_count, q.rate_period_seconds
    FROM jobs_queue AS q
    WHERE NOT q.paused AND (CAST(:queues AS text[]) IS NULL OR q.name = ANY(CAST(:queues AS text[])))
    UNION ALL
    SELECT 'default', NULL, NULL, NULL
    WHERE (CAST(:queues AS text[]) IS NULL OR 'default' = ANY(CAST(:queues AS text[])))
      AND NOT EXISTS (SELECT 1 FROM jobs_queue WHERE name = 'default')
), picked AS (
    SELECT job.id
    FROM (SELECT name FROM served
          WHERE concurrency_limit IS NULL AND rate_count IS NULL ORDER BY random()) AS served
    CROSS JOIN LATERAL (
        SELECT id FROM jobs_job
        WHERE queue = served.name AND status = 'queued'
          AND available_at <= {{clock}}
          AND attempts < max_attempts
          AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
        ORDER BY priority DESC, available_at, created_at, id
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS job
    WHERE (SELECT count(*) FROM mine) >= 0
    LIMIT 1
), settled_and_claimed AS (
    UPDATE jobs_job AS j
    SET status = CASE WHEN t.settle THEN 'succeeded' ELSE 'running' END,
        result = CASE WHEN t.settle THEN CAST(:result AS jsonb) END,
        attempts = CASE WHEN t.settle THEN j.attempts ELSE j.attempts + 1 END,
        locked_by = CASE WHEN t.settle THEN NULL ELSE CAST(:worker_id AS text) END,
        locked_until = CASE WHEN t.settle THEN NULL ELSE {{clock}}
                       + make_interval(secs => CAST(:lease_seconds AS float8)) END,
        finished_at = CASE WHEN t.settle THEN {{clock}} ELSE j.finished_at END,
        last_error = CASE WHEN t.settle THEN j.last_error ELSE '' END,
        updated_at = {{clock}}
    FROM (SELECT id, true AS settle FROM mine
          UNION ALL
          SELECT id, false FROM picked) AS t
    WHERE j.id = t.id
      AND (NOT t.settle OR (j.status = 'running' AND j.locked_by = :worker_id AND j.attempts = :attempt))
    RETURNING j.*
), done AS (
    SELECT id, attempts, type FROM settled_and_claimed WHERE status = 'succeeded'
), claimed AS (
    SELECT * FROM settled_and_claimed WHERE status = 'running'
), freed AS (
    UPDATE jobs_queue_slot AS slot SET job_id = NULL, attempt = NULL
    FROM done WHERE slot.job_id = done.id AND slot.attempt = done.attempts
    RETURNING pg_notify(:notify_channel, slot.queue)
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT job_id, type, attempt, worker_id, message, data, created_at FROM (
        SELECT 1 AS part, s.id AS job_id, 'succeeded' AS type, s.attempts AS attempt,
               CAST(:worker_id AS text) AS worker_id, 'Job succeeded' AS message,
               jsonb_build_object('type', s.type, 'run_ms', COALESCE(
                   round(extract(epoch FROM {{clock}}
                                            - CAST(:started_at AS timestamptz)) * 1000)::bigint,
                   (SELECT round(extract(epoch FROM {{clock}}
                                                    - c.created_at) * 1000)::bigint
                    FROM jobs_jobevent AS c
                    WHERE c.job_id = s.id AND c.attempt = s.attempts AND c.type = 'claimed'
                    ORDER BY c.id DESC LIMIT 1))) AS data,
               {{clock}} AS created_at
        FROM done AS s
        UNION ALL
        SELECT 2, id, 'claimed', attempts, locked_by, 'Claimed by worker',
               jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
                   extract(epoch FROM {{clock}} - available_at)
                   * 1000))::bigint),
               {{clock}} + interval '1 microsecond'
        FROM claimed
    ) AS e
    ORDER BY part
)
SELECT (SELECT count(*) FROM done) AS completed,
       (SELECT count(*) FROM freed) AS freed,
       claimed.*
FROM (VALUES (1)) AS one LEFT JOIN claimed ON true

-- name: complete_and_claim_with_progress_no_limits
-- `complete_and_claim_with_progress` whose claim is `claim_one_no_limits`'s (claim.sql).
WITH mine AS MATERIALIZED (
    SELECT id FROM jobs_job
    WHERE id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
    FOR UPDATE
), served AS (
    SELECT q.name, q.concurrency_limit, q.rate_count, q.rate_period_seconds
    FROM jobs_queue AS q
    WHERE NOT q.paused AND (CAST(:queues AS text[]) IS NULL OR q.name = ANY(CAST(:queues AS text[])))
    UNION ALL
    SELECT 'default', NULL, NULL, NULL
    WHERE (CAST(:queues AS text[]) IS NULL OR 'default' = ANY(CAST(:queues AS text[])))
      AND NOT EXISTS (SELECT 1 FROM jobs_queue WHERE name = 'default')
), picked AS (
    SELECT job.id
    FROM (SELECT name FROM served
          WHERE concurrency_limit IS NULL AND rate_count IS NULL ORDER BY random()) AS served
    CROSS JOIN LATERAL (
        SELECT id FROM jobs_job
        WHERE queue = served.name AND status = 'queued'
          AND available_at <= {{clock}}
          AND attempts < max_attempts
          AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
        ORDER BY priority DESC, available_at, created_at, id
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS job
    WHERE (SELECT count(*) FROM mine) >= 0
    LIMIT 1
), settled_and_claimed AS (
    UPDATE jobs_job AS j
    SET status = CASE WHEN t.settle THEN 'succeeded' ELSE 'running' END,
        result = CASE WHEN t.settle THEN CAST(:result AS jsonb) END,
        attempts = CASE WHEN t.settle THEN j.attempts ELSE j.attempts + 1 END,
        locked_by = CASE WHEN t.settle THEN NULL ELSE CAST(:worker_id AS text) END,
        locked_until = CASE WHEN t.settle THEN NULL ELSE {{clock}}
                       + make_interval(secs => CAST(:lease_seconds AS float8)) END,
        finished_at = CASE WHEN t.settle THEN {{clock}} ELSE j.finished_at END,
        last_error = CASE WHEN t.settle THEN j.last_error ELSE '' END,
        updated_at = {{clock}}
    FROM (SELECT id, true AS settle FROM mine
          UNION ALL
          SELECT id, false FROM picked) AS t
    WHERE j.id = t.id
      AND (NOT t.settle OR (j.status = 'running' AND j.locked_by = :worker_id AND j.attempts = :attempt))
    RETURNING j.*
), done AS (
    SELECT id, attempts, type FROM settled_and_claimed WHERE status = 'succeeded'
), claimed AS (
    SELECT * FROM settled_and_claimed WHERE status = 'running'
), freed AS (
    UPDATE jobs_queue_slot AS slot SET job_id = NULL, attempt = NULL
    FROM done WHERE slot.job_id = done.id AND slot.attempt = done.attempts
    RETURNING pg_notify(:notify_channel, slot.queue)
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT job_id, type, attempt, worker_id, message, data, created_at FROM (
        SELECT 0 AS part, p.n, s.id AS job_id, 'progress' AS type, s.attempts AS attempt,
               CAST(:worker_id AS text) AS worker_id, p.e ->> 'message' AS message, p.e -> 'data' AS data,
               LEAST(CAST(p.e ->> 'created_at' AS timestamptz),
                     {{clock}}) AS created_at
        FROM done AS s
        CROSS JOIN LATERAL jsonb_array_elements(CAST(:progress AS jsonb)) WITH ORDINALITY AS p(e, n)
        UNION ALL
        SELECT 1, 0, s.id, 'succeeded', s.attempts, CAST(:worker_id AS text), 'Job succeeded',
               jsonb_build_object('type', s.type, 'run_ms', COALESCE(
                   round(extract(epoch FROM {{clock}}
                                            - CAST(:started_at AS timestamptz)) * 1000)::bigint,
                   (SELECT round(extract(epoch FROM {{clock}}
                                                    - c.created_at) * 1000)::bigint
                    FROM jobs_jobevent AS c
                    WHERE c.job_id = s.id AND c.attempt = s.attempts AND c.type = 'claimed'
                    ORDER BY c.id DESC LIMIT 1))),
               {{clock}}
        FROM done AS s
        UNION ALL
        SELECT 2, 0, id, 'claimed', attempts, locked_by, 'Claimed by worker',
               jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
                   extract(epoch FROM {{clock}} - available_at)
                   * 1000))::bigint),
               {{clock}} + interval '1 microsecond'
        FROM claimed
    ) AS e
    ORDER BY part, n
)
SELECT (SELECT count(*) FROM done) AS completed,
       (SELECT count(*) FROM freed) AS freed,
       claimed.*
FROM (VALUES (1)) AS one LEFT JOIN claimed ON true

-- name: complete_and_claim_only_queue
-- `complete_and_claim_no_limits` for a process whose served queues without a limit are one, :queue
-- (store/lifecycle/claim_form.py), settling a job of that same queue: the queue's range of
-- job_queue_claim_idx read directly, no visit of the served queues, and no slot to free. Its
-- row of jobs_queue (`gate`) is read at statement time all the same, once for both halves:
-- - a queue paused, or given a limit, since the process last looked gives nothing;
-- - a queue with a concurrency limit settles nothing either, and says so (`limited`): its job
--   may hold a slot, so the caller settles it again with a statement that frees slots.
-- No slot is freed, and none needs to be: without a concurrency limit in this statement's
-- snapshot the queue has no slot rows in it either (a limit and its slots are written in one
-- transaction, store/flow/queues.py), so `freed` of the other forms would have found none. A
-- settle racing a limit's first slots is the other forms' case too (store/flow/queues.py).
WITH gate AS (
    SELECT paused, concurrency_limit IS NOT NULL AS limited, rate_count IS NOT NULL AS rated
    FROM jobs_queue WHERE name = :queue
), mine AS MATERIALIZED (
    SELECT id FROM jobs_job
    WHERE id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
      AND queue = :queue AND NOT EXISTS (SELECT 1 FROM gate WHERE limited)
    FOR UPDATE
), picked AS (
    SELECT id FROM jobs_job
    WHERE queue = :queue AND status = 'queued'
      AND available_at <= {{clock}}
      AND attempts < max_attempts
      AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
      AND NOT EXISTS (SELECT 1 FROM gate WHERE paused OR limited OR rated)
      AND (SELECT count(*) FROM mine) >= 0
    ORDER BY priority DESC, available_at, created_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
), settled_and_claimed AS (
    UPDATE jobs_job AS j
    SET status = CASE WHEN t.settle THEN 'succeeded' ELSE 'running' END,
        result = CASE WHEN t.settle THEN CAST(:result AS jsonb) END,
        attempts = CASE WHEN t.settle THEN j.attempts ELSE j.attempts + 1 END,
        locked_by = CASE WHEN t.settle THEN NULL ELSE CAST(:worker_id AS text) END,
        locked_until = CASE WHEN t.settle THEN NULL ELSE {{clock}}
                       + make_interval(secs => CAST(:lease_seconds AS float8)) END,
        finished_at = CASE WHEN t.settle THEN {{clock}} ELSE j.finished_at END,
        last_error = CASE WHEN t.settle THEN j.last_error ELSE '' END,
        updated_at = {{clock}}
    FROM (SELECT id, true AS settle FROM mine
          UNION ALL
          SELECT id, false FROM picked) AS t
    WHERE j.id = t.id
      AND (NOT t.settle OR (j.status = 'running' AND j.locked_by = :worker_id AND j.attempts = :attempt
                            AND j.queue = :queue))
    RETURNING j.*
), done AS (
    SELECT id, attempts, type FROM settled_and_claimed WHERE status = 'succeeded'
), claimed AS (
    SELECT * FROM settled_and_claimed WHERE status = 'running'
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT job_id, type, attempt, worker_id, message, data, created_at FROM (
        SELECT 1 AS part, s.id AS job_id, 'succeeded' AS type, s.attempts AS attempt,
               CAST(:worker_id AS text) AS worker_id, 'Job succeeded' AS message,
               jsonb_build_object('type', s.type, 'run_ms', COALESCE(
                   round(extract(epoch FROM {{clock}}
                                            - CAST(:started_at AS timestamptz)) * 1000)::bigint,
                   (SELECT round(extract(epoch FROM {{clock}}
                                                    - c.created_at) * 1000)::bigint
                    FROM jobs_jobevent AS c
                    WHERE c.job_id = s.id AND c.attempt = s.attempts AND c.type = 'claimed'
                    ORDER BY c.id DESC LIMIT 1))) AS data,
               {{clock}} AS created_at
        FROM done AS s
        UNION ALL
        SELECT 2, id, 'claimed', attempts, locked_by, 'Claimed by worker',
               jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
                   extract(epoch FROM {{clock}} - available_at)
                   * 1000))::bigint),
               {{clock}} + interval '1 microsecond'
        FROM claimed
    ) AS e
    ORDER BY part
)
SELECT (SELECT count(*) FROM done) AS completed,
       0 AS freed,
       EXISTS (SELECT 1 FROM gate WHERE limited) AS limited,
       claimed.*
FROM (VALUES (1)) AS one LEFT JOIN claimed ON true

-- name: complete_and_claim_with_progress_only_queue
-- `complete_and_claim_with_progress` whose claim and gate are `complete_and_claim_only_queue`'s.
WITH gate AS (
    SELECT paused, concurrency_limit IS NOT NULL AS limited, rate_count IS NOT NULL AS rated
    FROM jobs_queue WHERE name = :queue
), mine AS MATERIALIZED (
    SELECT id FROM jobs_job
    WHERE id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
      AND queue = :queue AND NOT EXISTS (SELECT 1 FROM gate WHERE limited)
    FOR UPDATE
), picked AS (
    SELECT id FROM jobs_job
    WHERE queue = :queue AND status = 'queued'
      AND available_at <= {{clock}}
      AND attempts < max_attempts
      AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
      AND NOT EXISTS (SELECT 1 FROM gate WHERE paused OR limited OR rated)
      AND (SELECT count(*) FROM mine) >= 0
    ORDER BY priority DESC, available_at, created_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
), settled_and_claimed AS (
    UPDATE jobs_job AS j
    SET status = CASE WHEN t.settle THEN 'succeeded' ELSE 'running' END,
        result = CASE WHEN t.settle THEN CAST(:result AS jsonb) END,
        attempts = CASE WHEN t.settle THEN j.attempts ELSE j.attempts + 1 END,
        locked_by = CASE WHEN t.settle THEN NULL ELSE CAST(:worker_id AS text) END,
        locked_until = CASE WHEN t.settle THEN NULL ELSE {{clock}}
                       + make_interval(secs => CAST(:lease_seconds AS float8)) END,
        finished_at = CASE WHEN t.settle THEN {{clock}} ELSE j.finished_at END,
        last_error = CASE WHEN t.settle THEN j.last_error ELSE '' END,
        updated_at = {{clock}}
    FROM (SELECT id, true AS settle FROM mine
          UNION ALL
          SELECT id, false FROM picked) AS t
    WHERE j.id = t.id
      AND (NOT t.settle OR (j.status = 'running' AND j.locked_by = :worker_id AND j.attempts = :attempt
                            AND j.queue = :queue))
    RETURNING j.*
), done AS (
    SELECT id, attempts, type FROM settled_and_claimed WHERE status = 'succeeded'
), claimed AS (
    SELECT * FROM settled_and_claimed WHERE status = 'running'
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT job_id, type, attempt, worker_id, message, data, created_at FROM (
        SELECT 0 AS part, p.n, s.id AS job_id, 'progress' AS type, s.attempts AS attempt,
               CAST(:worker_id AS text) AS worker_id, p.e ->> 'message' AS message, p.e -> 'data' AS data,
               LEAST(CAST(p.e ->> 'created_at' AS timestamptz),
                     {{clock}}) AS created_at
        FROM done AS s
        CROSS JOIN LATERAL jsonb_array_elements(CAST(:progress AS jsonb)) WITH ORDINALITY AS p(e, n)
        UNION ALL
        SELECT 1, 0, s.id, 'succeeded', s.attempts, CAST(:worker_id AS text), 'Job succeeded',
               jsonb_build_object('type', s.type, 'run_ms', COALESCE(
                   round(extract(epoch FROM {{clock}}
                                            - CAST(:started_at AS timestamptz)) * 1000)::bigint,
                   (SELECT round(extract(epoch FROM {{clock}}
                                                    - c.created_at) * 1000)::bigint
                    FROM jobs_jobevent AS c
                    WHERE c.job_id = s.id AND c.attempt = s.attempts AND c.type = 'claimed'
                    ORDER BY c.id DESC LIMIT 1))),
               {{clock}}
        FROM done AS s
        UNION ALL
        SELECT 2, 0, id, 'claimed', attempts, locked_by, 'Claimed by worker',
               jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
                   extract(epoch FROM {{clock}} - available_at)
                   * 1000))::bigint),
               {{clock}} + interval '1 microsecond'
        FROM claimed
    ) AS e
    ORDER BY part, n
)
SELECT (SELECT count(*) FROM done) AS completed,
       0 AS freed,
       EXISTS (SELECT 1 FROM gate WHERE limited) AS limited,
       claimed.*
FROM (VALUES (1)) AS one LEFT JOIN claimed ON true
