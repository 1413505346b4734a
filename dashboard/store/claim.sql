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
-- Eligible: queued, due, attempts left. Index: job_claim_idx (priority DESC, available_at,
-- created_at, id) WHERE status = 'queued', read in claim order and stopped at the first
-- unlocked eligible row. FOR UPDATE SKIP LOCKED: concurrent claimers skip rows another one
-- has locked instead of waiting on them, so each attempt goes to exactly one worker.
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
WITH picked AS (
    SELECT id FROM jobs_job
    WHERE status = 'queued'
      AND available_at <= COALESCE(CAST(:now AS timestamptz), statement_timestamp())
      AND attempts < max_attempts
      AND NOT (CAST(:avoid_expired AS boolean) AND starts_with(last_error, :lease_expired_prefix))
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
           jsonb_build_object('locked_until', locked_until, 'type', type, 'wait_ms', GREATEST(0, round(
               extract(epoch FROM COALESCE(CAST(:now AS timestamptz), statement_timestamp()) - available_at)
               * 1000))::bigint),
           COALESCE(CAST(:now AS timestamptz), statement_timestamp())
    FROM claimed
)
SELECT * FROM claimed ORDER BY priority DESC, available_at, created_at, id

-- name: claim_one
-- Claim one eligible job for the single id in :worker_ids (`claim` with the limit spelled out).
-- LIMIT 1 written out, so that a generic plan (one-job mode, connection.connect_worker)
-- knows it fetches one row, as a custom plan would.
WITH picked AS (
    SELECT id FROM jobs_job
    WHERE status = 'queued'
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
), ev AS (
    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
    SELECT id, 'claimed', attempts, locked_by, 'Claimed by worker',
           jsonb_build_object('locked_until', locked_until, 'type', type, 'wait_ms', GREATEST(0, round(
               extract(epoch FROM COALESCE(CAST(:now AS timestamptz), statement_timestamp()) - available_at)
               * 1000))::bigint),
           COALESCE(CAST(:now AS timestamptz), statement_timestamp())
    FROM claimed
)
SELECT * FROM claimed
