-- The reads' own settings (reading.py).

-- name: read_time_limit
-- Cancel each statement of this read's transaction that runs past :milliseconds (a string).
-- set_config(..., true) is SET LOCAL: this transaction only, never a pooled connection's default.
SELECT set_config('statement_timeout', :milliseconds, true)
