-- Queue settings: pause, resume and limits, the rows the claim reads (claim.sql).
--
-- Each takes any valid name, one with no jobs yet included: its `jobs_queue` row is created.
-- A change and its `jobs_audit` row (who, when, what) are one statement; a pause or resume
-- that changes nothing (pausing a paused queue) writes no audit row (a limits change is
-- recorded as asked, its from and to in the row). :actor is who acted,
-- :event_data the door's audit data; :now the operator's time.

-- name: pause_queue
-- Pause a queue: its jobs are no longer claimed, running attempts go on; returns the row.
-- `inserted` (xmax = 0) tells a new row from an updated one; an already paused queue is left
-- as it is and returns nothing from `changed`.
WITH changed AS (
    INSERT INTO jobs_queue AS q (name, paused, paused_at, paused_by, created_at)
    VALUES (:name, true, :now, :actor, :now)
    ON CONFLICT (name) DO UPDATE SET paused = true, paused_at = :now, paused_by = :actor
    WHERE NOT q.paused
    RETURNING q.name
), audit AS (
    INSERT INTO jobs_audit (created_at, action, actor, data)
    SELECT :now, 'queue_paused', :actor, CAST(:event_data AS jsonb) || jsonb_build_object('queue', name)
    FROM changed
)
SELECT name FROM changed

-- name: resume_queue
-- Resume a queue and wake idle workers serving it (NOTIFY with its name); returns the row if it was paused.
-- A name with no row gets one, not paused, and no audit row (nothing was paused).
WITH ensured AS (
    INSERT INTO jobs_queue (name, created_at) VALUES (:name, :now) ON CONFLICT (name) DO NOTHING
), changed AS (
    UPDATE jobs_queue SET paused = false, paused_at = :now, paused_by = :actor
    WHERE name = :name AND paused
    RETURNING name
), audit AS (
    INSERT INTO jobs_audit (created_at, action, actor, data)
    SELECT :now, 'queue_resumed', :actor, CAST(:event_data AS jsonb) || jsonb_build_object('queue', name)
    FROM changed
), wake AS (
    SELECT pg_notify(:notify_channel, name) FROM changed
)
SELECT changed.name FROM changed LEFT JOIN wake ON true

-- name: ensure_queue
-- The queue's row, created if missing (its settings at their defaults: not paused, no limits).
WITH ensured AS (
    INSERT INTO jobs_queue (name, created_at) VALUES (:name, :now) ON CONFLICT (name) DO NOTHING
    RETURNING name
)
SELECT name FROM ensured

-- name: lock_queue
-- The queue's row, locked for a change of its limits: one change of a queue at a time.
SELECT name, concurrency_limit, rate_count, rate_period_seconds FROM jobs_queue WHERE name = :name FOR UPDATE

-- name: lock_slots
-- Every slot row of the queue, locked: a claim that holds one is waited for, so what follows
-- reads which are free as they are.
SELECT n, job_id FROM jobs_queue_slot WHERE queue = :name ORDER BY n FOR UPDATE

-- name: drop_slots
-- Delete the slots :ns of the queue (lowering or removing its concurrency limit).
WITH dropped AS (
    DELETE FROM jobs_queue_slot WHERE queue = :name AND n = ANY(CAST(:ns AS integer[])) RETURNING n
)
SELECT n FROM dropped

-- name: add_slots
-- Add :count free slots numbered after the queue's highest one (raising or setting a limit).
WITH added AS (
    INSERT INTO jobs_queue_slot (queue, n)
    SELECT :name, g FROM generate_series(
        COALESCE((SELECT max(n) FROM jobs_queue_slot WHERE queue = :name), 0) + 1,
        COALESCE((SELECT max(n) FROM jobs_queue_slot WHERE queue = :name), 0) + CAST(:count AS integer)) AS g
    RETURNING n
)
SELECT n FROM added

-- name: seat_running
-- A limit set where there was none: give the queue's running attempts a free slot each.
-- So they count against the new limit from now on and free their slot when they end. Read
-- through job_timeout_idx (running rows only). At most as many as there are free slots;
-- attempts beyond that free nothing when they end, and the queue settles at the limit.
WITH running AS (
    SELECT id, attempts, row_number() OVER (ORDER BY locked_until, id) AS k
    FROM jobs_job WHERE status = 'running' AND queue = :name
      AND NOT EXISTS (SELECT 1 FROM jobs_queue_slot AS s WHERE s.job_id = jobs_job.id)
), free AS (
    SELECT n, row_number() OVER (ORDER BY n) AS k
    FROM jobs_queue_slot WHERE queue = :name AND job_id IS NULL
)
UPDATE jobs_queue_slot AS s SET job_id = running.id, attempt = running.attempts
FROM running JOIN free ON free.k = running.k
WHERE s.queue = :name AND s.n = free.n

-- name: resize_ring
-- Give the queue's rate ring exactly :count entries: new ones free, the oldest-taken dropped first.
-- Keeping the newest-taken entries keeps the claims already in the window counted.
-- Linear in the ring whatever the plan: `cut` is the last entry kept (the :count-th newest
-- taken, ties by n; none when the ring has :count entries or fewer), read once by one top-N
-- sort, and one pass over the queue's entries drops those after it. (A join of the entries
-- with their ranks could be planned as a nested loop: 10,000 by 10,000 row visits, seconds of
-- a core with the queue's row locked, for a shrink from 10,000 to 1.)
WITH cut AS MATERIALIZED (
    SELECT taken_at, n FROM jobs_queue_rate WHERE queue = :name
    ORDER BY taken_at DESC, n OFFSET GREATEST(CAST(:count AS integer) - 1, 0) LIMIT 1
), dropped AS (
    DELETE FROM jobs_queue_rate AS r
    WHERE r.queue = :name
      AND (CAST(:count AS integer) = 0
           OR r.taken_at < (SELECT taken_at FROM cut)
           OR (r.taken_at = (SELECT taken_at FROM cut) AND r.n > (SELECT n FROM cut)))
)
INSERT INTO jobs_queue_rate (queue, n)
SELECT :name, COALESCE((SELECT max(n) FROM jobs_queue_rate WHERE queue = :name), 0) + g
FROM generate_series(1, CAST(:count AS integer) - (SELECT count(*) FROM jobs_queue_rate WHERE queue = :name)) AS g

-- name: write_limits
-- Record the queue's new limits, who changed them and when, with its `jobs_audit` row.
-- Idle workers serving the queue are woken (NOTIFY with its name): a raised limit, or one
-- removed, may have made its jobs claimable, and a worker waiting for its rate window re-reads it.
WITH changed AS (
    UPDATE jobs_queue
    SET concurrency_limit = :concurrency_limit, rate_count = :rate_count,
        rate_period_seconds = :rate_period_seconds, changed_at = :now, changed_by = :actor
    WHERE name = :name
    RETURNING name
), audit AS (
    INSERT INTO jobs_audit (created_at, action, actor, data)
    SELECT :now, 'queue_limits_changed', :actor, CAST(:event_data AS jsonb) || CAST(:change AS jsonb)
    FROM changed
), wake AS (
    SELECT pg_notify(:notify_channel, name) FROM changed
)
SELECT changed.name FROM changed LEFT JOIN wake ON true

-- name: free_stale_slots
-- Free every slot whose attempt is no longer running: at most a limit's worth of rows.
-- A settle whose statement began before a limit's first slots were committed cannot see them,
-- so the slot a new limit gave its attempt stays held; this frees it (the rescuer runs it
-- each pass, and a limit change after its own). Safe against claims: a slot seen held by an
-- attempt that is over cannot be taken meanwhile (only free slots are claimed), and a slot
-- and its claim are committed together, so one held in this snapshot has its job's row here too.
WITH freed AS (
    UPDATE jobs_queue_slot AS s SET job_id = NULL, attempt = NULL
    WHERE s.job_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM jobs_job AS j
                      WHERE j.id = s.job_id AND j.status = 'running' AND j.attempts = s.attempt)
    RETURNING s.queue
)
SELECT pg_notify(:notify_channel, queue) FROM freed

-- name: rate_window
-- When the next rate window opens among the queues a worker serves, for its idle wait.
-- :queues as the claim's (claim.sql: NULL is every queue, `default` included), less the paused
-- ones. `rated`: how many of them have a rate limit. `opens_at`: the earliest time a full
-- rate ring frees an entry (its oldest claim plus the period), NULL when no served queue's
-- window is full. `all_closed`: every served queue
-- is rate-limited with a full window, so nothing can be claimed before `opens_at`, whatever
-- is queued. `now`: :now, or the statement's time, to measure the wait with the claim's
-- clock, the database's. Reads jobs_queue and at most a ring's rows per rate-limited queue.
WITH served AS (
    SELECT names.name, q.rate_count, q.rate_period_seconds
    FROM (SELECT unnest(CAST(:queues AS text[])) AS name
          UNION SELECT name FROM jobs_queue WHERE CAST(:queues AS text[]) IS NULL
          UNION SELECT 'default' WHERE CAST(:queues AS text[]) IS NULL) AS names
    LEFT JOIN jobs_queue AS q ON q.name = names.name
    WHERE q.paused IS NOT TRUE
), windows AS (
    SELECT served.name,
           (SELECT min(r.taken_at) FROM jobs_queue_rate AS r WHERE r.queue = served.name)
           + make_interval(secs => served.rate_period_seconds) AS opens_at
    FROM served WHERE served.rate_count IS NOT NULL
), closed AS (
    SELECT name, opens_at FROM windows WHERE opens_at > {{clock}}
)
SELECT (SELECT count(*) FROM windows) AS rated,
       (SELECT min(opens_at) FROM closed) AS opens_at,
       (SELECT count(*) FROM served) > 0
           AND (SELECT count(*) FROM closed) = (SELECT count(*) FROM served) AS all_closed,
       {{clock}} AS now
