-- Snoozing: a handler asked for its job to run again later (`raise Snooze(seconds)`), which is
-- no failure. The claim already counted the attempt (attempts + 1) and the fence rides on that
-- number, so it is never taken back: a worker that lost the attempt keeps matching nothing.
-- Instead the snooze gives the attempt back to the budget: `snoozes` and `max_attempts` both
-- go up by one, so every rule that reads `attempts < max_attempts` (the claims of claim.sql,
-- `fail` in settle.sql, the rescue) and job_attempts_valid stay as they are, and the budget
-- the job was created with is `max_attempts - snoozes` (the job's JSON shows that). A
-- max_attempts at the integer's top is left there (no room for one more).

-- name: snooze
-- running -> queued at :delay seconds from now for the owner of this attempt (event `snoozed`);
-- a job already snoozed :max_snoozes times fails instead (`failed`, last_error :cap_error).
-- Fenced by the owner's guard, as every settle (settle.sql): a stale worker's snooze matches
-- no row. The attempt's pending progress reports (:progress, an empty array when none: a
-- snooze is off the drain's path) go before the outcome, and its concurrency slot is freed.
WITH snoozed AS (
    UPDATE jobs_job AS j
    SET status = CASE WHEN j.snoozes < :max_snoozes THEN 'queued' ELSE 'failed' END,
        available_at = CASE WHEN j.snoozes < :max_snoozes
                            THEN {{clock}} + make_interval(secs => CAST(:delay AS float8))
                            ELSE j.available_at END,
        finished_at = CASE WHEN j.snoozes < :max_snoozes THEN NULL ELSE {{clock}} END,
        snoozes = j.snoozes + CASE WHEN j.snoozes < :max_snoozes AND j.max_attempts < 2147483647
                                   THEN 1 ELSE 0 END,
        max_attempts = j.max_attempts + CASE WHEN j.snoozes < :max_snoozes AND j.max_attempts < 2147483647
                                             THEN 1 ELSE 0 END,
        locked_by = NULL, locked_until = NULL,
        last_error = CASE WHEN j.snoozes < :max_snoozes THEN '' ELSE :cap_error END,
        updated_at = {{clock}}
    WHERE id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt
    RETURNING j.*
), freed AS (
    UPDATE jobs_queue_slot AS slot SET job_id = NULL, attempt = NULL
    FROM snoozed WHERE slot.job_id = snoozed.id AND slot.attempt = snoozed.attempts
    RETURNING pg_notify(:notify_channel, slot.queue)
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT job_id, type, attempt, worker_id, message, data, created_at FROM (
        SELECT 0 AS part, p.n, s.id AS job_id, 'progress' AS type, s.attempts AS attempt,
               CAST(:worker_id AS text) AS worker_id, p.e ->> 'message' AS message, p.e -> 'data' AS data,
               LEAST(CAST(p.e ->> 'created_at' AS timestamptz),
                     {{clock}}) AS created_at
        FROM snoozed AS s
        CROSS JOIN LATERAL jsonb_array_elements(CAST(:progress AS jsonb)) WITH ORDINALITY AS p(e, n)
        UNION ALL
        SELECT 1, 0, s.id, CASE WHEN s.status = 'queued' THEN 'snoozed' ELSE 'failed' END,
               s.attempts, CAST(:worker_id AS text),
               CASE WHEN s.status = 'queued' THEN :message ELSE :cap_error END,
               CASE WHEN s.status = 'queued'
                    THEN jsonb_build_object('snooze_seconds', CAST(:delay AS float8),
                                            'available_at', s.available_at)
                    ELSE jsonb_build_object('error', CAST(:cap_error AS text),
                                            'exception_type', 'Snooze') END
               || jsonb_build_object('type', s.type, 'snoozes', s.snoozes, 'run_ms', COALESCE(
                   round(extract(epoch FROM {{clock}}
                                            - CAST(:started_at AS timestamptz)) * 1000)::bigint,
                   (SELECT round(extract(epoch FROM {{clock}}
                                                    - c.created_at) * 1000)::bigint
                    FROM jobs_jobevent AS c
                    WHERE c.job_id = s.id AND c.attempt = s.attempts AND c.type = 'claimed'
                    ORDER BY c.id DESC LIMIT 1))),
               {{clock}}
        FROM snoozed AS s
    ) AS e
    ORDER BY part, n
)
SELECT * FROM snoozed
