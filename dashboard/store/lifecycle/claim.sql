-- Claiming: queued -> running, attempts + 1, a lease, and a `claimed` event.
--
-- The time of every worker-side statement (the claims here, renewals, settles, the rescue)
-- is written {{clock}}, which the loader (store/sql.py) reads as the one clock expression: the
-- database's clock when the statement starts, unless the caller passes :now (tests move the clock so).
-- A lease is then measured from when its claim or renewal took effect: a claim held up in the
-- network for longer than its lease no longer arrives already expired, and the lease
-- recovery that judges it expired reads the same clock. statement_timestamp(), not now():
-- the same for every row of the statement (now() is too, but it is the start of the
-- transaction, earlier inside one), and not clock_timestamp(), which moves while the
-- statement runs and would give its rows (the job, its events) different times.
--
-- Eligible: queued, due, attempts left, in a served queue that is not paused and has room.
-- Index: job_queue_claim_idx (queue, priority DESC, available_at, created_at, id) WHERE
-- status = 'queued': one range per queue, read in claim order. FOR UPDATE
-- SKIP LOCKED: concurrent claimers skip rows another one has locked instead of waiting on
-- them, so each attempt goes to exactly one worker.
--
-- Queues (`served`): :queues, the worker's --queues (NULL: every queue, that is every
-- `jobs_queue` row, and `default` even without one), less the paused ones, read at statement
-- time, so a pause is in force for every worker from its commit. A create adds its queue's
-- row (create.sql), so a queue that has jobs has a row.
--
-- The order. Within a queue: priority DESC, available_at, created_at, id.
-- Between queues, each claim visits the served queues in a random order and takes from the
-- first that gives a job (a batch goes on to the next queue until it has n): every queue with
-- a due job has the same chance to be first, whatever the others hold, so a quiet queue's job
-- is taken within a few claims beside a million jobs of another, of any priority. The visit
-- is a nested loop that stops at the n-th job: only the queues before the one that fills the
-- claim are read (an empty one is one index descent), and of the jobs only the claimed rows
-- are locked (a limited queue's free slots and ring entries are locked when the visit
-- reaches it: `room`, below).
-- No look at the head of each queue to rank them first: that read every queue's range twice.
--
-- Limits. A queue with a concurrency limit has that many `jobs_queue_slot` rows; a claim
-- takes free ones (job_id IS NULL, FOR UPDATE SKIP LOCKED) and writes each claimed attempt
-- into one. A count of running jobs would race (the statement's snapshot is older than the
-- locks it waits for, so two claimers both see room); a slot row does not: the row lock
-- re-reads the newest version and re-checks `job_id IS NULL` (EvalPlanQual), so one slot goes
-- to one claim. The fenced statements that end the attempt free it (settle.sql,
-- rescue.sql). A rate limit is a ring of `rate_count` `jobs_queue_rate` rows: a claim
-- takes entries older than the period (the same lock and re-check on taken_at) and stamps
-- them with the claim's time, so any window of the period holds at most rate_count claims.
-- A queue's `room` is read when the visit reaches it, only for a queue with a limit (a CASE:
-- no read at all for one without), and its share of the claim is the least of what is asked,
-- its free slots and its free ring entries: a full queue gets a LIMIT 0 (no index read, no
-- lock) and costs the other queues nothing. `room` is fenced off with OFFSET 0: pulled up
-- into the query, its subqueries would be evaluated, and lock, once per reference.
--
-- Two forms. `claim` and `claim_one` serve every queue, limits included. `claim_no_limits`
-- and `claim_one_no_limits` serve only the queues without a limit: no slot, no ring entry,
-- no limit table written, so a worker with nothing to limit claims at the cost of a claim
-- without limits (docs/benchmarks.md). The no-limits forms answer `limits_open`: whether a
-- served queue with a limit could give a job now (room in each of its limits, then a job due:
-- the first entry of each of its two ranges of job_queued_queue_idx, a scalar min each, so a
-- queue whose jobs are all due later costs two index descents, not a walk of its range; the
-- statement's snapshot); the `limits_open` statement answers it alone, for the claims that
-- do not (the forms with limits, the one-job settle-and-claim). store/lifecycle/claim_form.py keeps
-- the answer and picks the form. A queue at its limit therefore costs the others one index
-- probe of the limit's table now and then, and no write. With it they answer `only_queue`: the
-- one served queue without a limit, when there is exactly one (NULL otherwise); a one-job
-- thread's settle-and-claim then reads that queue's range directly
-- (`complete_and_claim_only_queue`, settle.sql) instead of visiting the served queues. The
-- answers are hints for the next claims, never a permission: each form takes only what it may
-- take, and reads pauses and limits at statement time.
--
-- :avoid_expired (true while a thread of the claiming process runs an attempt past its
-- lease): skip jobs whose last attempt's lease expired, the ones whose last_error lease
-- recovery wrote (it starts with :lease_expired_prefix), so a job whose attempts keep expiring
-- holds at most one thread per process instead of capturing them all
-- (runtime.attempts.RunningAttempts).
--
-- The `claimed` event records how long the job waited since it became due (`wait_ms`) and its
-- type, for the overview's charts (reads/overview.py).

-- name: claim
-- Claim one eligible job per id in :worker_ids, the n-th job locked by the n-th id.
-- A batch claim: one statement for every idle thread of a process, each job still carrying
-- the id of the thread that runs it, its own attempt and its own lease. A limited queue's
-- k-th job takes the k-th of the slots and ring entries its `room` locked.
WITH served AS (
    SELECT q.name, q.concurrency_limit, q.rate_count, q.rate_period_seconds
    FROM jobs_queue AS q
    WHERE NOT q.paused AND (CAST(:queues AS text[]) IS NULL OR q.name = ANY(CAST(:queues AS text[])))
    UNION ALL
    SELECT 'default', NULL, NULL, NULL
    WHERE (CAST(:queues AS text[]) IS NULL OR 'default' = ANY(CAST(:queues AS text[])))
      AND NOT EXISTS (SELECT 1 FROM jobs_queue WHERE name = 'default')
), picked AS (
    SELECT job.id, job.priority, job.available_at, job.created_at, served.name AS queue,
           room.slots, room.rings
    FROM (SELECT * FROM served ORDER BY random()) AS served
    CROSS JOIN LATERAL (
        SELECT CASE WHEN served.concurrency_limit IS NOT NULL THEN ARRAY(
                   SELECT n FROM jobs_queue_slot
                   WHERE queue = served.name AND job_id IS NULL
                   ORDER BY n LIMIT cardinality(CAST(:worker_ids AS text[]))
                   FOR UPDATE SKIP LOCKED) END AS slots,
               CASE WHEN served.rate_count IS NOT NULL THEN ARRAY(
                   SELECT n FROM jobs_queue_rate
                   WHERE queue = served.name
                     AND taken_at <= {{clock}}
                                     - make_interval(secs => served.rate_period_seconds)
                   ORDER BY taken_at, n LIMIT cardinality(CAST(:worker_ids AS text[]))
                   FOR UPDATE SKIP LOCKED) END AS rings
        OFFSET 0
    ) AS room
    CROSS JOIN LATERAL (
        SELECT id, priority, available_at, created_at FROM jobs_job
        WHERE queue = served.name AND status = 'queued'
          AND available_at <= {{clock}}
          AND attempts < max_attempts
          AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
        ORDER BY priority DESC, available_at, created_at, id
        LIMIT LEAST(cardinality(CAST(:worker_ids AS text[])),
                    COALESCE(cardinality(room.slots), cardinality(CAST(:worker_ids AS text[]))),
                    COALESCE(cardinality(room.rings), cardinality(CAST(:worker_ids AS text[]))))
        FOR UPDATE SKIP LOCKED
    ) AS job
    LIMIT cardinality(CAST(:worker_ids AS text[]))
), next AS (
    SELECT id, queue, slots, rings,
           row_number() OVER (ORDER BY priority DESC, available_at, created_at, id) AS n,
           row_number() OVER (PARTITION BY queue ORDER BY priority DESC, available_at, created_at, id) AS k
    FROM picked
), claimed AS (
    UPDATE jobs_job AS j
    SET status = 'running', attempts = j.attempts + 1,
        locked_by = (CAST(:worker_ids AS text[]))[next.n],
        locked_until = {{clock}}
                       + make_interval(secs => CAST(:lease_seconds AS float8)),
        last_error = '', result = NULL,
        updated_at = {{clock}}
    FROM next WHERE j.id = next.id
    RETURNING j.*
), took_slot AS (
    UPDATE jobs_queue_slot AS s SET job_id = claimed.id, attempt = claimed.attempts
    FROM claimed JOIN next ON next.id = claimed.id
    WHERE next.slots IS NOT NULL AND s.queue = next.queue AND s.n = next.slots[next.k]
), took_rate AS (
    UPDATE jobs_queue_rate AS r SET taken_at = {{clock}}
    FROM next
    WHERE next.rings IS NOT NULL AND r.queue = next.queue AND r.n = next.rings[next.k]
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'claimed', attempts, locked_by, 'Claimed by worker',
           jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
               extract(epoch FROM {{clock}} - available_at)
               * 1000))::bigint),
           {{clock}}
    FROM claimed
)
SELECT * FROM claimed ORDER BY priority DESC, available_at, created_at, id

-- name: claim_one
-- Claim one eligible job for the single id in :worker_ids: `claim` for one job, in fewer steps.
-- One-job mode's claim (and complete_and_claim's, settle.sql), so every step is for one job:
-- a queue's `room` is at most one slot and one ring entry, no window functions; the slot
-- and the ring entry are written through their primary key. LIMIT 1 written out, so that a
-- generic plan (connection.connect_worker) knows it fetches one row, as a custom plan would.
WITH served AS (
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
    LIMIT 1
), claimed AS (
    UPDATE jobs_job AS j
    SET status = 'running', attempts = j.attempts + 1,
        locked_by = (CAST(:worker_ids AS text[]))[1],
        locked_until = {{clock}}
                       + make_interval(secs => CAST(:lease_seconds AS float8)),
        last_error = '', result = NULL,
        updated_at = {{clock}}
    FROM picked WHERE j.id = picked.id
    RETURNING j.*
), took_slot AS (
    UPDATE jobs_queue_slot AS s SET job_id = claimed.id, attempt = claimed.attempts
    FROM claimed
    WHERE (s.queue, s.n) = (SELECT queue, slot FROM picked WHERE slot IS NOT NULL)
), took_rate AS (
    UPDATE jobs_queue_rate AS r SET taken_at = {{clock}}
    FROM claimed
    WHERE (r.queue, r.n) = (SELECT queue, ring FROM picked WHERE ring IS NOT NULL)
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'claimed', attempts, locked_by, 'Claimed by worker',
           jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
               extract(epoch FROM {{clock}} - available_at)
               * 1000))::bigint),
           {{clock}}
    FROM claimed
)
SELECT * FROM claimed

-- name: claim_no_limits
-- `claim` over the served queues without a limit, saying whether a limited one could give a job.
-- A queue with a limit is skipped (this form takes no slot and no ring entry); `limits_open`
-- says whether one of them could have given a job, so the caller claims with `claim` next.
-- Always at least one row: `limits_open`, and the claimed job's columns (NULL when none).
WITH served AS (
    SELECT q.name, q.concurrency_limit, q.rate_count, q.rate_period_seconds
    FROM jobs_queue AS q
    WHERE NOT q.paused AND (CAST(:queues AS text[]) IS NULL OR q.name = ANY(CAST(:queues AS text[])))
    UNION ALL
    SELECT 'default', NULL, NULL, NULL
    WHERE (CAST(:queues AS text[]) IS NULL OR 'default' = ANY(CAST(:queues AS text[])))
      AND NOT EXISTS (SELECT 1 FROM jobs_queue WHERE name = 'default')
), picked AS (
    SELECT job.id, job.priority, job.available_at, job.created_at
    FROM (SELECT name FROM served
          WHERE concurrency_limit IS NULL AND rate_count IS NULL ORDER BY random()) AS served
    CROSS JOIN LATERAL (
        SELECT id, priority, available_at, created_at FROM jobs_job
        WHERE queue = served.name AND status = 'queued'
          AND available_at <= {{clock}}
          AND attempts < max_attempts
          AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
        ORDER BY priority DESC, available_at, created_at, id
        LIMIT cardinality(CAST(:worker_ids AS text[]))
        FOR UPDATE SKIP LOCKED
    ) AS job
    LIMIT cardinality(CAST(:worker_ids AS text[]))
), next AS (
    SELECT id, row_number() OVER (ORDER BY priority DESC, available_at, created_at, id) AS n FROM picked
), claimed AS (
    UPDATE jobs_job AS j
    SET status = 'running', attempts = j.attempts + 1,
        locked_by = (CAST(:worker_ids AS text[]))[next.n],
        locked_until = {{clock}}
                       + make_interval(secs => CAST(:lease_seconds AS float8)),
        last_error = '', result = NULL,
        updated_at = {{clock}}
    FROM next WHERE j.id = next.id
    RETURNING j.*
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'claimed', attempts, locked_by, 'Claimed by worker',
           jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
               extract(epoch FROM {{clock}} - available_at)
               * 1000))::bigint),
           {{clock}}
    FROM claimed
)
SELECT EXISTS (
           SELECT 1 FROM served AS q
           WHERE CASE
               WHEN q.concurrency_limit IS NULL AND q.rate_count IS NULL THEN false
               WHEN q.concurrency_limit IS NOT NULL
                    AND (SELECT n FROM jobs_queue_slot WHERE queue = q.name AND job_id IS NULL LIMIT 1) IS NULL
                   THEN false
               WHEN q.rate_count IS NOT NULL
                    AND (SELECT n FROM jobs_queue_rate
                         WHERE queue = q.name
                           AND taken_at <= {{clock}}
                                           - make_interval(secs => q.rate_period_seconds)
                         LIMIT 1) IS NULL
                   THEN false
               ELSE LEAST((SELECT min(available_at) FROM jobs_job
                           WHERE status = 'queued' AND queue = q.name AND least(attempts, 1) = 0),
                          (SELECT min(available_at) FROM jobs_job
                           WHERE status = 'queued' AND queue = q.name AND least(attempts, 1) = 1))
                    <= {{clock}}
           END) AS limits_open,
       (SELECT min(name) FROM served WHERE concurrency_limit IS NULL AND rate_count IS NULL
        HAVING count(*) = 1) AS only_queue,
       claimed.*
FROM (VALUES (1)) AS one LEFT JOIN claimed ON true
ORDER BY claimed.priority DESC, claimed.available_at, claimed.created_at, claimed.id

-- name: claim_one_no_limits
-- `claim_no_limits` for one id, LIMIT 1 written out (as `claim_one`); the same `limits_open` row.
WITH served AS (
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
    LIMIT 1
), claimed AS (
    UPDATE jobs_job AS j
    SET status = 'running', attempts = j.attempts + 1,
        locked_by = (CAST(:worker_ids AS text[]))[1],
        locked_until = {{clock}}
                       + make_interval(secs => CAST(:lease_seconds AS float8)),
        last_error = '', result = NULL,
        updated_at = {{clock}}
    FROM picked WHERE j.id = picked.id
    RETURNING j.*
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'claimed', attempts, locked_by, 'Claimed by worker',
           jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
               extract(epoch FROM {{clock}} - available_at)
               * 1000))::bigint),
           {{clock}}
    FROM claimed
)
SELECT EXISTS (
           SELECT 1 FROM served AS q
           WHERE CASE
               WHEN q.concurrency_limit IS NULL AND q.rate_count IS NULL THEN false
               WHEN q.concurrency_limit IS NOT NULL
                    AND (SELECT n FROM jobs_queue_slot WHERE queue = q.name AND job_id IS NULL LIMIT 1) IS NULL
                   THEN false
               WHEN q.rate_count IS NOT NULL
                    AND (SELECT n FROM jobs_queue_rate
                         WHERE queue = q.name
                           AND taken_at <= {{clock}}
                                           - make_interval(secs => q.rate_period_seconds)
                         LIMIT 1) IS NULL
                   THEN false
               ELSE LEAST((SELECT min(available_at) FROM jobs_job
                           WHERE status = 'queued' AND queue = q.name AND least(attempts, 1) = 0),
                          (SELECT min(available_at) FROM jobs_job
                           WHERE status = 'queued' AND queue = q.name AND least(attempts, 1) = 1))
                    <= {{clock}}
           END) AS limits_open,
       (SELECT min(name) FROM served WHERE concurrency_limit IS NULL AND rate_count IS NULL
        HAVING count(*) = 1) AS only_queue,
       claimed.*
FROM (VALUES (1)) AS one LEFT JOIN claimed ON true

-- name: limits_open
-- Whether a served queue with a limit could give a job now: `limits_open`, alone (as the claims').
-- For the claims that do not answer it (store/lifecycle/claim_form.py reads it again now and then):
-- per limited queue served, its room, then its first due job.
WITH served AS (
    SELECT q.name, q.concurrency_limit, q.rate_count, q.rate_period_seconds
    FROM jobs_queue AS q
    WHERE NOT q.paused AND (CAST(:queues AS text[]) IS NULL OR q.name = ANY(CAST(:queues AS text[])))
    UNION ALL
    SELECT 'default', NULL, NULL, NULL
    WHERE (CAST(:queues AS text[]) IS NULL OR 'default' = ANY(CAST(:queues AS text[])))
      AND NOT EXISTS (SELECT 1 FROM jobs_queue WHERE name = 'default')
)
SELECT EXISTS (
    SELECT 1 FROM served AS q
    WHERE CASE
        WHEN q.concurrency_limit IS NULL AND q.rate_count IS NULL THEN false
        WHEN q.concurrency_limit IS NOT NULL
             AND (SELECT n FROM jobs_queue_slot WHERE queue = q.name AND job_id IS NULL LIMIT 1) IS NULL
            THEN false
        WHEN q.rate_count IS NOT NULL
             AND (SELECT n FROM jobs_queue_rate
                  WHERE queue = q.name
                    AND taken_at <= {{clock}}
                                    - make_interval(secs => q.rate_period_seconds)
                  LIMIT 1) IS NULL
            THEN false
        ELSE LEAST((SELECT min(available_at) FROM jobs_job
                    WHERE status = 'queued' AND queue = q.name AND least(attempts, 1) = 0),
                   (SELECT min(available_at) FROM jobs_job
                    WHERE status = 'queued' AND queue = q.name AND least(attempts, 1) = 1))
             <= {{clock}}
    END) AS limits_open,
    (SELECT min(name) FROM served WHERE concurrency_limit IS NULL AND rate_count IS NULL
     HAVING count(*) = 1) AS only_queue
