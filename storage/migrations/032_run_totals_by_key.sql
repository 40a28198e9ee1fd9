-- agentfs_run_totals (031) looks up a commit's files and their run marks
-- by key, "f.id = ANY(ids)", in a plan made once per connection
-- (force_generic_plan). A connection that made it while files was small
-- (a new database) kept a sequential scan of the whole table, every commit
-- scanning more as the table grew until its next ANALYZE made it plan
-- again (auto_explain in `make bench`: "Seq Scan on files ... Rows Removed
-- by Filter: 2937", 3.1 ms of a commit of one file). Every statement of
-- agentfs_run_totals and agentfs_count_runs (which it calls) reads and
-- writes rows by their keys, so neither plans a sequential scan now: the
-- plan is the same at any size.
ALTER FUNCTION agentfs_run_totals(text, events[]) SET enable_seqscan = off;
ALTER FUNCTION agentfs_count_runs(text, events[]) SET enable_seqscan = off;
