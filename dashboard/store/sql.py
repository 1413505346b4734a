"""The SQL that matters, in one place, each statement beside the index it relies on.

Every transition is one statement: a data-modifying CTE updates the job and inserts its event
together, so a transition and its event commit or vanish as one and cost one round trip.

Ownership (the fence against stale workers) is the same four-column guard everywhere::

    id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt

A lease that has expired but that no cleanup pass has recovered yet still belongs to its
worker: nobody else can hold the job, so its result is kept. Once cleanup requeues the job,
``status`` (and on the next claim ``attempts`` and ``locked_by``) no longer match.
"""

from __future__ import annotations

from sqlalchemy import Float, Integer, Text, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

OWNED = "id = :id AND status = 'running' AND locked_by = :worker_id AND attempts = :attempt"

# The time a worker-side statement (claim, renewal, settle, lease recovery) runs at: the
# database's clock when the statement starts, unless the caller passes ``:now`` (tests move the
# clock that way). A lease is then measured from when its claim or renewal took effect: a claim
# held up in the network for longer than its lease no longer arrives already expired, and the
# lease recovery that judges it expired reads the same clock. statement_timestamp(), not now():
# the same for every row of the statement (now() is too, but is the start of the transaction,
# which is earlier inside one), and not clock_timestamp(), which moves while the statement runs
# and would give its rows (the job, its events) different times.
NOW = "COALESCE(CAST(:now AS timestamptz), statement_timestamp())"

# A one-job mode worker thread's connection (connection.connect_worker) plans its statements once,
# generically, instead of once per execution. Reset when the connection goes back to the pool.
GENERIC_PLANS = "SET plan_cache_mode = force_generic_plan"
DEFAULT_PLANS = "RESET plan_cache_mode"

# Jobs that become claimable now wake idle workers at once (they LISTEN on this channel);
# polling stays the fallback, so a lost notification costs at most one poll interval. Jobs
# queued for later (delays, backoff) send nothing: the poll finds them when they are due.
# NOTIFY is transactional (sent at commit) and folds duplicates within one transaction.
NOTIFY_CHANNEL = "jobqueue_jobs"

# Create, or find the job that holds this idempotency key.
# Index: job_idempotency_key_unique (partial unique, WHERE idempotency_key IS NOT NULL).
# ON CONFLICT waits for a concurrent insert of the same key to commit or roll back, so two
# clients racing on one key leave one row; the loser then reads the winner's row.
CREATE = text(
    """
    WITH ins AS (
        INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                              max_attempts, idempotency_key, last_error, created_at, updated_at)
        VALUES (:id, :type, :payload, 'queued', :priority, :available_at, 0,
                :max_attempts, :idempotency_key, '', :now, :now)
        ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING *
    ), ev AS (
        INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
        SELECT id, 'created', 0, NULL, 'Job created', :event_data, :now FROM ins
    ), wake AS (
        SELECT pg_notify('jobqueue_jobs', '') FROM ins WHERE available_at <= :now
    )
    SELECT ins.* FROM ins LEFT JOIN wake ON true
    """
).bindparams(bindparam("payload", type_=JSONB), bindparam("event_data", type_=JSONB))

# Bulk create: the rows of one chunk in one statement, read from one jsonb array (one parameter,
# any chunk size); a request's chunks run in one transaction (enqueue.create_jobs). Keys
# already taken (by an older job, or earlier in the same request: this chunk or one before it)
# insert nothing; the caller then reads the jobs holding them. Only the positions (``n``) of
# the rows not inserted come back, usually none: the caller already holds everything the new
# rows were written from. The wake-up is a branch of its own, so it runs whatever comes back
# (its row has no position).
CREATE_MANY = text(
    """
    WITH input AS (
        SELECT * FROM jsonb_to_recordset(:rows) AS r(
            n integer, id uuid, type text, payload jsonb, priority smallint,
            available_at timestamptz, max_attempts integer, idempotency_key text)
    ), ins AS (
        INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                              max_attempts, idempotency_key, last_error, created_at, updated_at)
        SELECT id, type, COALESCE(payload, '{}'::jsonb), 'queued', priority, available_at, 0,
               max_attempts, idempotency_key, '', :now, :now
        FROM input ORDER BY n
        ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING id, type, available_at
    ), ev AS (
        INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
        SELECT id, 'created', 0, NULL, 'Job created', :event_data || jsonb_build_object('type', type), :now
        FROM ins
    ), wake AS (
        SELECT pg_notify('jobqueue_jobs', '') WHERE EXISTS (SELECT 1 FROM ins WHERE available_at <= :now)
    )
    SELECT input.n FROM input WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.id = input.id)
    UNION ALL
    SELECT NULL FROM wake
    """
).bindparams(bindparam("rows", type_=JSONB), bindparam("event_data", type_=JSONB))


# What the overview's charts read from the events (read_overview.py): the claim records how long
# the job waited since it became due (``wait_ms``, claim time minus available_at), and the
# outcome of an attempt records the job's type and how long the attempt ran (``run_ms``, from
# that attempt's ``claimed`` event: job_event_job_id_idx read backwards from the newest event).
# ``started_at``: an SQL expression holding the attempt's start when the caller knows it (every
# worker passes it: the claim's time, or when a thread took a job claimed ahead of it);
# the event is then not read at all (COALESCE evaluates its subquery only for a NULL), so no
# plan can read it through jobs_jobevent_type_idx, as one did (docs/benchmarks.md, issue 20).
def run_facts(row: str, started_at: str | None = None) -> str:
    event = (
        "(SELECT round(extract(epoch FROM "
        f"{NOW} - c.created_at) * 1000)::bigint FROM jobs_jobevent AS c "
        f"WHERE c.job_id = {row}.id AND c.attempt = {row}.attempts AND c.type = 'claimed' "
        "ORDER BY c.id DESC LIMIT 1)"
    )
    if started_at is not None:
        known = f"round(extract(epoch FROM {NOW} - {started_at}) * 1000)::bigint"
        event = f"COALESCE({known}, {event})"
    return f"jsonb_build_object('type', {row}.type, 'run_ms', {event})"


# A ``claimed`` event's data (CLAIM, CLAIM_ONE, COMPLETE_AND_CLAIM), over the claimed row.
CLAIM_FACTS = (
    "jsonb_build_object('locked_until', locked_until, 'type', type, 'wait_ms', "
    f"GREATEST(0, round(extract(epoch FROM {NOW} - available_at) * 1000))::bigint)"
)


FIND_BY_IDEMPOTENCY_KEYS = text("SELECT * FROM jobs_job WHERE idempotency_key = ANY(:keys)").bindparams(
    bindparam("keys", type_=ARRAY(Text))
)

FIND_BY_IDEMPOTENCY_KEY = text("SELECT * FROM jobs_job WHERE idempotency_key = :idempotency_key")

# Claim one eligible job for each id in :worker_ids, in claim order (priority
# highest first, then available_at, created_at, id), and lock the
# n-th job for the n-th worker: a batch claim (one statement for every idle thread) where each
# job still carries the id of the thread that runs it, its own attempt and its own lease.
# Index: job_claim_idx (priority DESC, available_at, created_at, id) WHERE status = 'queued':
# an index scan in claim order that stops at the first unlocked row with available_at <= now.
# FOR UPDATE SKIP LOCKED: concurrent claimers skip rows another claimer has locked instead of
# waiting on them, so each attempt goes to exactly one worker.
# :avoid_expired (true while a thread of the claiming process runs an attempt past its lease):
# skip jobs whose last attempt's lease expired, so a job whose attempts keep expiring holds at
# most one thread per process instead of capturing them all (runtime.attempts.RunningAttempts).
CLAIM_ROWS = f"""
    picked AS (
        SELECT id FROM jobs_job
        WHERE status = 'queued' AND available_at <= {NOW} AND attempts < max_attempts
          AND NOT (CAST(:avoid_expired AS boolean) AND last_error LIKE 'Lease expired at %')
        ORDER BY priority DESC, available_at, created_at, id
        LIMIT {{limit}}
        FOR UPDATE SKIP LOCKED
    ), next AS (
        SELECT id, row_number() OVER () AS n FROM picked
    ), claimed AS (
        UPDATE jobs_job AS j
        SET status = 'running', attempts = j.attempts + 1,
            locked_by = (CAST(:worker_ids AS text[]))[next.n],
            locked_until = {NOW} + make_interval(secs => CAST(:lease_seconds AS float8)),
            last_error = '', result = NULL, updated_at = {NOW}
        FROM next WHERE j.id = next.id
        RETURNING j.*
    )"""
_CLAIM_STEPS = (
    CLAIM_ROWS
    + """, claim_ev AS (
        INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
        SELECT id, 'claimed', attempts, locked_by, 'Claimed by worker', """
    + CLAIM_FACTS
    + f""", {NOW}
        FROM claimed
    )
"""
)
_CLAIM = "WITH " + _CLAIM_STEPS + "SELECT * FROM claimed ORDER BY priority DESC, available_at, created_at, id"
CLAIM = text(_CLAIM.format(limit="cardinality(CAST(:worker_ids AS text[]))")).bindparams(
    bindparam("worker_ids", type_=ARRAY(Text))
)
# The same for one worker, the limit spelled out, so that a generic plan (one-job mode,
# connection.connect_worker) knows it fetches one row, as a custom plan would.
CLAIM_ONE = text(_CLAIM.format(limit="1")).bindparams(bindparam("worker_ids", type_=ARRAY(Text)))

RENEW = text(
    f"""
    WITH renewed AS (
        UPDATE jobs_job
        SET locked_until = {NOW} + make_interval(secs => CAST(:lease_seconds AS float8)), updated_at = {NOW}
        WHERE {OWNED}
        RETURNING id, attempts, locked_until
    ), ev AS (
        INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
        SELECT id, 'lease_renewed', attempts, :worker_id, 'Lease renewed',
               jsonb_build_object('locked_until', locked_until), {NOW}
        FROM renewed
    )
    SELECT locked_until FROM renewed
    """
)

# Progress touches updated_at so that it takes the row lock: an event can then never be
# written for an attempt that a concurrent cleanup has just requeued.
PROGRESS = text(
    f"""
    WITH owned AS (
        UPDATE jobs_job SET updated_at = :now WHERE {OWNED} RETURNING id, attempts
    ), ev AS (
        INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
        SELECT id, 'progress', attempts, :worker_id, :message, :data, :now FROM owned
        RETURNING id
    )
    SELECT id FROM ev
    """
).bindparams(bindparam("data", type_=JSONB))

# The settle statements (COMPLETE, COMPLETE_AND_CLAIM, COMPLETE_MANY, FAIL, with and without
# pending progress reports) are in sql_settle.py.

# Recover expired leases, oldest first, at most :batch per pass; their events take ids in that
# order (one INSERT ... ORDER BY, as every statement that writes events for several jobs).
# Index: job_timeout_idx (locked_until) WHERE status = 'running'.
# SKIP LOCKED: a row whose owner is completing or renewing it right now is left alone; if the
# owner's statement wins, the lease is no longer expired or the job is no longer running.
CLEANUP_EXPIRED = text(
    f"""
    WITH expired AS (
        SELECT id, locked_by AS expired_worker, locked_until AS expired_at
        FROM jobs_job
        WHERE status = 'running' AND locked_until < {NOW}
        ORDER BY locked_until
        LIMIT :batch
        FOR UPDATE SKIP LOCKED
    ), recovered AS (
        UPDATE jobs_job AS j
        SET status = CASE WHEN j.attempts < j.max_attempts THEN 'queued' ELSE 'failed' END,
            available_at = CASE WHEN j.attempts < j.max_attempts
                THEN {NOW} + make_interval(
                    secs => COALESCE((CAST(:delays AS float8[]))[j.attempts], :max_delay))
                ELSE j.available_at END,
            finished_at = CASE WHEN j.attempts < j.max_attempts THEN NULL ELSE {NOW} END,
            locked_by = NULL, locked_until = NULL,
            last_error = 'Lease expired at ' || to_char(expired.expired_at AT TIME ZONE 'UTC',
                'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || ' (worker ' || expired.expired_worker
                || ', attempt ' || j.attempts || ')',
            updated_at = {NOW}
        FROM expired WHERE j.id = expired.id
        RETURNING j.id, j.status, j.attempts, j.available_at, j.last_error,
                  expired.expired_worker, expired.expired_at
    ), ev AS (
        INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
        SELECT id, CASE WHEN status = 'queued' THEN 'timeout_requeued' ELSE 'failed' END,
               attempts, :worker_id, last_error,
               jsonb_build_object('error', last_error, 'expired_worker_id', expired_worker,
                                  'locked_until', expired_at)
               || CASE WHEN status = 'queued'
                       THEN jsonb_build_object('retry_at', available_at)
                       ELSE '{{}}'::jsonb END,
               {NOW}
        FROM recovered
        ORDER BY expired_at, id
    )
    SELECT id, status FROM recovered
    """
).bindparams(
    bindparam("delays", type_=ARRAY(Float)),
    bindparam("max_delay", type_=Float),
    bindparam("batch", type_=Integer),
)

RETRY = text(
    """
    WITH retried AS (
        UPDATE jobs_job
        SET status = 'queued', attempts = 0, available_at = :now, locked_by = NULL,
            locked_until = NULL, last_error = '', result = NULL, finished_at = NULL,
            cancelled_at = NULL, updated_at = :now
        WHERE id = :id AND status = 'failed'
        RETURNING *
    ), ev AS (
        INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
        SELECT id, 'manual_retry', 0, NULL, 'Manual retry', :event_data, :now FROM retried
    ), wake AS (
        SELECT pg_notify('jobqueue_jobs', '') FROM retried
    )
    SELECT retried.* FROM retried LEFT JOIN wake ON true
    """
).bindparams(bindparam("event_data", type_=JSONB))

JOB_STATUS = text("SELECT status FROM jobs_job WHERE id = :id")
