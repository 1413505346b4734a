-- Claiming: queued -> running, attempts + 1, a lease, and a `claimed` event.
--
-- The time of every worker-side statement (the claims here, renewals, settles, lease
-- recovery) is COALESCE(CAST(:now AS timestamptz), statement_timestamp()): the database's
-- clock when the statement starts, unless the caller passes :now (tests move the clock so).
-- A lease is then measured from when its claim or renewal took effect: a claim held up in the
-- network for longer than its lease no longer arrives already expired, and the lease
-- recovery that judges it expired reads the same clock. statement_timestamp(), not now():
-- the same for every row of the statement (now() is too, but it is the start of the
-- transaction, earlier inside one), and not clock_timestamp(), which moves while the
-- statement runs and would give its rows (the job, its events) different times.
--
-- Eligible: queued, due, attempts left, in a served queue that is not paused and has room.
-- Index: job_queue_claim_idx (queue, priority DESC, available_at, created_at, id) WHERE
-- status = 'queued': one range per served queue, read in claim order and stopped at that
-- queue's share. FOR UPDATE SKIP LOCKED: concurrent claimers skip rows another one has locked
-- instead of waiting on them, so each attempt goes to exactly one worker.
--
-- Queues (`served`): :queues, the worker's --queues (NULL: every queue, that is every
-- `jobs_queue` row, and `default` even without one), less the paused ones, read at statement
-- time, so a pause is in force for every worker from its commit. Between queues the order is
-- the reference's, over all served queues together: each queue offers its first jobs in claim
-- order and the batch takes the first n of them by (priority DESC, available_at, created_at,
-- id). No weights, no strict queue order: a queue is claimed from as if it were the only one,
-- and a quiet queue's job is taken as soon as it is the oldest of its priority.
--
-- Limits. A queue with a concurrency limit has that many `jobs_queue_slot` rows; a claim
-- takes free ones (job_id IS NULL, FOR UPDATE SKIP LOCKED) and writes each claimed attempt
-- into one. A count of running jobs would race (the statement's snapshot is older than the
-- locks it waits for, so two claimers both see room); a slot row does not: the row lock
-- re-reads the newest version and re-checks `job_id IS NULL` (EvalPlanQual), so one slot goes
-- to one claim. The fenced statements that end the attempt free it (settle.sql,
-- lease_recovery.sql). A rate limit is a ring of `rate_count` `jobs_queue_rate` rows: a claim
-- takes entries older than the period (the same lock and re-check on taken_at) and stamps
-- them with the claim's time, so any window of the period holds at most rate_count claims.
-- A queue's share of the batch is the least of n, its free slots and its free ring entries:
-- a full queue gets a LIMIT 0 (no index read, no lock) and costs the other queues nothing.
-- Locks only what it claims: with several queues that have room, an unlocked look at the head
-- of each (`heads`, up to its share) decides how many of the next n each queue gives
-- (`takes`), then only that many rows of each queue's range are locked (SKIP LOCKED skips,
-- within the queue, rows another claimer holds). Row locks are writes: locking the head of
-- twenty queues to claim one job cost twenty times the locks (docs/benchmarks.md). With one
-- queue with room (the default's case) there is no look: its share is locked at once.
--
-- :avoid_expired (true while a thread of the claiming process runs an attempt past its
-- lease): skip jobs whose last attempt's lease expired, the ones whose last_error lease
-- recovery wrote (it starts with :lease_expired_prefix), so a job whose attempts keep expiring
-- holds at most one thread per process instead of capturing them all
-- (runtime.attempts.RunningAttempts).
--
-- The `claimed` event records how long the job waited since it became due (`wait_ms`) and its
-- type, for the overview's charts (read_overview.py).

-- name: claim
-- Claim one eligible job per id in :worker_ids, the n-th job locked by the n-th id.
-- A batch claim: one statement for every idle thread of a process, each job still carrying
-- the id of the thread that runs it, its own attempt and its own lease.
WITH served AS (
    SELECT names.name, q.concurrency_limit, q.rate_count, q.rate_period_seconds
    FROM (SELECT unnest(CAST(:queues AS text[])) AS name
          UNION SELECT name FROM jobs_queue WHERE CAST(:queues AS text[]) IS NULL
          UNION SELECT 'default' WHERE CAST(:queues AS text[]) IS NULL) AS names
    LEFT JOIN jobs_queue AS q ON q.name = names.name
    WHERE q.paused IS NOT TRUE
), slots AS (
    SELECT s.queue, s.n, row_number() OVER (PARTITION BY s.queue ORDER BY s.n) AS k
    FROM served CROSS JOIN LATERAL (
        SELECT queue, n FROM jobs_queue_slot
        WHERE served.concurrency_limit IS NOT NULL AND queue = served.name AND job_id IS NULL
        ORDER BY n LIMIT cardinality(CAST(:worker_ids AS text[]))
        FOR UPDATE SKIP LOCKED
    ) AS s
), rates AS (
    SELECT r.queue, r.n, row_number() OVER (PARTITION BY r.queue ORDER BY r.taken_at, r.n) AS k
    FROM served CROSS JOIN LATERAL (
        SELECT queue, n, taken_at FROM jobs_queue_rate
        WHERE served.rate_count IS NOT NULL AND queue = served.name
          AND taken_at <= COALESCE(CAST(:now AS timestamptz), statement_timestamp())
                          - make_interval(secs => served.rate_period_seconds)
        ORDER BY taken_at, n LIMIT cardinality(CAST(:worker_ids AS text[]))
        FOR UPDATE SKIP LOCKED
    ) AS r
), shares AS (
    SELECT served.name, LEAST(
        cardinality(CAST(:worker_ids AS text[])),
        CASE WHEN served.concurrency_limit IS NULL THEN cardinality(CAST(:worker_ids AS text[]))
             ELSE (SELECT count(*) FROM slots WHERE slots.queue = served.name) END,
        CASE WHEN served.rate_count IS NULL THEN cardinality(CAST(:worker_ids AS text[]))
             ELSE (SELECT count(*) FROM rates WHERE rates.queue = served.name) END) AS share
    FROM served
), heads AS (
    SELECT h.queue, h.priority, h.available_at, h.created_at, h.id
    FROM shares CROSS JOIN LATERAL (
        SELECT queue, priority, available_at, created_at, id FROM jobs_job
        WHERE (SELECT count(*) FROM shares WHERE share > 0) > 1
          AND queue = shares.name AND status = 'queued'
          AND available_at <= COALESCE(CAST(:now AS timestamptz), statement_timestamp())
          AND attempts < max_attempts
          AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
        ORDER BY priority DESC, available_at, created_at, id
        LIMIT shares.share
    ) AS h
    ORDER BY h.priority DESC, h.available_at, h.created_at, h.id
    LIMIT cardinality(CAST(:worker_ids AS text[]))
), takes AS (
    SELECT name AS queue, share AS take FROM shares
    WHERE share > 0 AND (SELECT count(*) FROM shares WHERE share > 0) = 1
    UNION ALL
    SELECT queue, count(*) FROM heads GROUP BY queue
), picked AS (
    SELECT p.id, p.queue, p.priority, p.available_at, p.created_at
    FROM takes CROSS JOIN LATERAL (
        SELECT id, queue, priority, available_at, created_at FROM jobs_job
        WHERE queue = takes.queue AND status = 'queued'
          AND available_at <= COALESCE(CAST(:now AS timestamptz), statement_timestamp())
          AND attempts < max_attempts
          AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
        ORDER BY priority DESC, available_at, created_at, id
        LIMIT takes.take
        FOR UPDATE SKIP LOCKED
    ) AS p
    LIMIT cardinality(CAST(:worker_ids AS text[]))
), next AS (
    SELECT id, queue,
           row_number() OVER (ORDER BY priority DESC, available_at, created_at, id) AS n,
           row_number() OVER (PARTITION BY queue ORDER BY priority DESC, available_at, created_at, id) AS k
    FROM picked
), claimed AS (
    UPDATE jobs_job AS j
    SET status = 'running', attempts = j.attempts + 1,
        locked_by = (CAST(:worker_ids AS text[]))[next.n],
        locked_until = COALESCE(CAST(:now AS timestamptz), statement_timestamp())
                       + make_interval(secs => CAST(:lease_seconds AS float8)),
        last_error = '', result = NULL,
        updated_at = COALESCE(CAST(:now AS timestamptz), statement_timestamp())
    FROM next WHERE j.id = next.id
    RETURNING j.*
), took_slot AS (
    UPDATE jobs_queue_slot AS s SET job_id = claimed.id, attempt = claimed.attempts
    FROM claimed JOIN next ON next.id = claimed.id
         JOIN slots ON slots.queue = next.queue AND slots.k = next.k
    WHERE s.queue = slots.queue AND s.n = slots.n
), took_rate AS (
    UPDATE jobs_queue_rate AS r SET taken_at = COALESCE(CAST(:now AS timestamptz), statement_timestamp())
    FROM next JOIN rates ON rates.queue = next.queue AND rates.k = next.k
    WHERE r.queue = rates.queue AND r.n = rates.n
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'claimed', attempts, locked_by, 'Claimed by worker',
           jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
               extract(epoch FROM COALESCE(CAST(:now AS timestamptz), statement_timestamp()) - available_at)
               * 1000))::bigint),
           COALESCE(CAST(:now AS timestamptz), statement_timestamp())
    FROM claimed
)
SELECT * FROM claimed ORDER BY priority DESC, available_at, created_at, id

-- name: claim_one
-- Claim one eligible job for the single id in :worker_ids: `claim` for one job, in fewer steps.
-- One-job mode's claim (and complete_and_claim's, settle.sql), so every step is for one job:
-- `open` is each served queue with room, with the free slot and ring entry it would take
-- (locked, as `claim`'s); `head` is an unlocked look at the first job of each, the best of
-- which names the queue; `picked` locks that queue's first job (SKIP LOCKED: the next one if
-- another claimer holds it), and the claim takes its queue's slot and ring entry. No shares,
-- no window functions: a claim beside a full queue costs little more than the reference's.
-- LIMIT 1 written out, so that a generic plan (connection.connect_worker) knows it fetches
-- one row, as a custom plan would.
WITH served AS (
    SELECT q.name, q.concurrency_limit, q.rate_count, q.rate_period_seconds
    FROM jobs_queue AS q
    WHERE NOT q.paused AND (CAST(:queues AS text[]) IS NULL OR q.name = ANY(CAST(:queues AS text[])))
    UNION ALL
    SELECT names.name, NULL, NULL, NULL
    FROM unnest(COALESCE(CAST(:queues AS text[]), ARRAY['default'])) AS names(name)
    WHERE NOT EXISTS (SELECT 1 FROM jobs_queue WHERE name = names.name)
), open AS (
    SELECT served.name, s.n AS slot, r.n AS ring
    FROM served
    LEFT JOIN LATERAL (
        SELECT n FROM jobs_queue_slot
        WHERE served.concurrency_limit IS NOT NULL AND queue = served.name AND job_id IS NULL
        ORDER BY n LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS s ON true
    LEFT JOIN LATERAL (
        SELECT n FROM jobs_queue_rate
        WHERE served.rate_count IS NOT NULL AND queue = served.name
          AND taken_at <= COALESCE(CAST(:now AS timestamptz), statement_timestamp())
                          - make_interval(secs => served.rate_period_seconds)
        ORDER BY taken_at, n LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS r ON true
    WHERE (served.concurrency_limit IS NULL OR s.n IS NOT NULL)
      AND (served.rate_count IS NULL OR r.n IS NOT NULL)
), head AS (
    SELECT h.queue
    FROM open CROSS JOIN LATERAL (
        SELECT queue, priority, available_at, created_at, id FROM jobs_job
        WHERE queue = open.name AND status = 'queued'
          AND available_at <= COALESCE(CAST(:now AS timestamptz), statement_timestamp())
          AND attempts < max_attempts
          AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
        ORDER BY priority DESC, available_at, created_at, id
        LIMIT 1
    ) AS h
    ORDER BY h.priority DESC, h.available_at, h.created_at, h.id
    LIMIT 1
), picked AS (
    SELECT id FROM jobs_job
    WHERE queue = (SELECT queue FROM head) AND status = 'queued'
      AND available_at <= COALESCE(CAST(:now AS timestamptz), statement_timestamp())
      AND attempts < max_attempts
      AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
    ORDER BY priority DESC, available_at, created_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE jobs_job AS j
    SET status = 'running', attempts = j.attempts + 1,
        locked_by = (CAST(:worker_ids AS text[]))[1],
        locked_until = COALESCE(CAST(:now AS timestamptz), statement_timestamp())
                       + make_interval(secs => CAST(:lease_seconds AS float8)),
        last_error = '', result = NULL,
        updated_at = COALESCE(CAST(:now AS timestamptz), statement_timestamp())
    FROM picked WHERE j.id = picked.id
    RETURNING j.*
), took_slot AS (
    UPDATE jobs_queue_slot AS s SET job_id = claimed.id, attempt = claimed.attempts
    FROM claimed JOIN open ON open.name = claimed.queue
    WHERE s.queue = open.name AND s.n = open.slot
), took_rate AS (
    UPDATE jobs_queue_rate AS r SET taken_at = COALESCE(CAST(:now AS timestamptz), statement_timestamp())
    FROM claimed JOIN open ON open.name = claimed.queue
    WHERE r.queue = open.name AND r.n = open.ring
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'claimed', attempts, locked_by, 'Claimed by worker',
           jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
               extract(epoch FROM COALESCE(CAST(:now AS timestamptz), statement_timestamp()) - available_at)
               * 1000))::bigint),
           COALESCE(CAST(:now AS timestamptz), statement_timestamp())
    FROM claimed
)
SELECT * FROM claimed

-- name: claim_all
-- `claim` over every queue while no paused or limited queue has a job due: job_claim_idx in claim order.
-- The reference's claim with one guard, an uncorrelated NOT EXISTS over the small jobs_queue
-- (evaluated once, `held`): while a queue with a setting has a queued job due (the first
-- entries of its two ranges of job_queued_queue_idx, a scalar min each: an EXISTS here would
-- be hashed, reading every queued row), it claims nothing and says so (`held_back`), and the
-- caller runs `claim` (service.claim_batch); an empty answer not held back is final, so an
-- idle worker's poll is one statement. Always at least one row: `held_back`, and the claimed
-- job's columns (NULL when none). A setting on a queue with nothing due cannot change what the
-- claim takes: in this statement's snapshot that queue offers no row (a row made due meanwhile
-- is a new index entry, which the snapshot does not see). Cheaper to plan and run than `claim`,
-- which a drain beside an idle limited queue, or of one queue with no settings, would
-- otherwise pay on every claim (docs/benchmarks.md).
WITH held AS (
    SELECT EXISTS (SELECT 1 FROM jobs_queue AS q
                   WHERE (q.paused OR q.concurrency_limit IS NOT NULL OR q.rate_count IS NOT NULL)
                     AND LEAST((SELECT min(r.available_at) FROM jobs_job AS r
                                WHERE r.status = 'queued' AND r.queue = q.name AND least(r.attempts, 1) = 0),
                               (SELECT min(r.available_at) FROM jobs_job AS r
                                WHERE r.status = 'queued' AND r.queue = q.name AND least(r.attempts, 1) = 1))
                         <= COALESCE(CAST(:now AS timestamptz), statement_timestamp())) AS back
), picked AS (
    SELECT id FROM jobs_job
    WHERE status = 'queued'
      AND available_at <= COALESCE(CAST(:now AS timestamptz), statement_timestamp())
      AND attempts < max_attempts
      AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
      AND NOT (SELECT back FROM held)
    ORDER BY priority DESC, available_at, created_at, id
    LIMIT cardinality(CAST(:worker_ids AS text[]))
    FOR UPDATE SKIP LOCKED
), next AS (
    SELECT id, row_number() OVER () AS n FROM picked
), claimed AS (
    UPDATE jobs_job AS j
    SET status = 'running', attempts = j.attempts + 1,
        locked_by = (CAST(:worker_ids AS text[]))[next.n],
        locked_until = COALESCE(CAST(:now AS timestamptz), statement_timestamp())
                       + make_interval(secs => CAST(:lease_seconds AS float8)),
        last_error = '', result = NULL,
        updated_at = COALESCE(CAST(:now AS timestamptz), statement_timestamp())
    FROM next WHERE j.id = next.id
    RETURNING j.*
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'claimed', attempts, locked_by, 'Claimed by worker',
           jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
               extract(epoch FROM COALESCE(CAST(:now AS timestamptz), statement_timestamp()) - available_at)
               * 1000))::bigint),
           COALESCE(CAST(:now AS timestamptz), statement_timestamp())
    FROM claimed
)
SELECT held.back AS held_back, claimed.*
FROM held LEFT JOIN claimed ON true
ORDER BY claimed.priority DESC, claimed.available_at, claimed.created_at, claimed.id

-- name: claim_one_all
-- `claim_all` for one id, LIMIT 1 written out (as `claim_one`); the same `held_back` row.
WITH held AS (
    SELECT EXISTS (SELECT 1 FROM jobs_queue AS q
                   WHERE (q.paused OR q.concurrency_limit IS NOT NULL OR q.rate_count IS NOT NULL)
                     AND LEAST((SELECT min(r.available_at) FROM jobs_job AS r
                                WHERE r.status = 'queued' AND r.queue = q.name AND least(r.attempts, 1) = 0),
                               (SELECT min(r.available_at) FROM jobs_job AS r
                                WHERE r.status = 'queued' AND r.queue = q.name AND least(r.attempts, 1) = 1))
                         <= COALESCE(CAST(:now AS timestamptz), statement_timestamp())) AS back
), picked AS (
    SELECT id FROM jobs_job
    WHERE status = 'queued'
      AND available_at <= COALESCE(CAST(:now AS timestamptz), statement_timestamp())
      AND attempts < max_attempts
      AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
      AND NOT (SELECT back FROM held)
    ORDER BY priority DESC, available_at, created_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE jobs_job AS j
    SET status = 'running', attempts = j.attempts + 1,
        locked_by = (CAST(:worker_ids AS text[]))[1],
        locked_until = COALESCE(CAST(:now AS timestamptz), statement_timestamp())
                       + make_interval(secs => CAST(:lease_seconds AS float8)),
        last_error = '', result = NULL,
        updated_at = COALESCE(CAST(:now AS timestamptz), statement_timestamp())
    FROM picked WHERE j.id = picked.id
    RETURNING j.*
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'claimed', attempts, locked_by, 'Claimed by worker',
           jsonb_build_object('locked_until', locked_until, 'type', type, 'queue', queue, 'wait_ms', GREATEST(0, round(
               extract(epoch FROM COALESCE(CAST(:now AS timestamptz), statement_timestamp()) - available_at)
               * 1000))::bigint),
           COALESCE(CAST(:now AS timestamptz), statement_timestamp())
    FROM claimed
)
SELECT held.back AS held_back, claimed.*
FROM held LEFT JOIN claimed ON true
