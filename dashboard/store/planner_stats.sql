-- The planner statistics of the queue tables (planner_stats.py).

-- name: grown_tables
-- The tables of :tables this role may analyze whose size outgrew their statistics :growth times (past :min_pages).
-- relpages is the size the last VACUUM, ANALYZE or autovacuum saw; a table the role does not
-- own is left to autovacuum.
SELECT c.relname AS name, c.relpages AS analyzed_pages,
       pg_relation_size(c.oid) / current_setting('block_size')::bigint AS pages
FROM pg_class AS c
WHERE c.oid = ANY(CAST(:tables AS regclass[]))
  AND pg_has_role(c.relowner, 'USAGE')
  AND pg_relation_size(c.oid) / current_setting('block_size')::bigint
      > greatest(:growth * c.relpages, :min_pages)
ORDER BY c.relname

-- name: custom_plans_while_small
-- Plan every statement of this transaction afresh while jobs_job is under 64 pages (512 KB).
-- Run first in a bulk create's transaction (connection.fetch_rows_while(first=...)), so it takes
-- no parameters: the 64 is planner_stats.CUSTOM_PLANS_BELOW_PAGES. set_config(..., true) is
-- transaction-local, so it also holds through a transaction pooler.
SELECT set_config('plan_cache_mode', 'force_custom_plan', true)
WHERE pg_relation_size('jobs_job') < 64 * current_setting('block_size')::bigint
