-- How far behind the replica the pages may read is (replica.py).

-- name: replica_lag
-- Seconds of commits the server has not replayed yet: 0 on a primary (or a promoted
-- standby), and 0 on a streaming standby that has replayed all it received; otherwise the
-- time since the last transaction it replayed committed (replay paused or slow, or no WAL
-- receiver: cut off from its primary, it cannot know what it misses). NULL when it has
-- replayed nothing yet. Reads no table; any role may run it (pg_stat_wal_receiver shows its
-- row, if not its details, to every role).
SELECT CASE
    WHEN NOT pg_is_in_recovery() THEN 0.0
    WHEN EXISTS (SELECT 1 FROM pg_stat_wal_receiver)
        AND pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0.0
    ELSE EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8
END AS lag_seconds
