-- The recount of the cached finished totals (stats_refresh.py).

-- name: recount_try_lock
-- Take the one-recount-at-a-time lock :key for this transaction, or answer false at once.
-- A transaction-level try-lock: released by the commit, so it also works through a
-- transaction pooler, where a session lock would stay on a server connection. The recount
-- itself, REFRESH MATERIALIZED VIEW, is a utility command and stays in stats_refresh.py.
SELECT pg_try_advisory_xact_lock(:key)
