-- The numbering's functions (029-031) plan once per connection
-- (force_generic_plan). agentfs_run_totals looks up a commit's files and
-- their run marks by key, "f.id = ANY(ids)": a connection that made that
-- plan while files was small (a new database) kept a sequential scan of
-- the whole table, every commit scanning more as the table grew, until its
-- next ANALYZE made it plan again (auto_explain in `make bench`: "Seq Scan
-- on files ... Rows Removed by Filter: 2937", 3.1 ms of a commit of one
-- file). Every statement the numbering runs at commit reads and writes
-- rows by their keys (the unnumbered events, the counter, an event, a
-- file's open interval, a version, a file, its marks and its run's totals),
-- so none of them plans a sequential scan now, in agentfs_number_events
-- and in the functions it calls: the plans are the same at any size.
ALTER FUNCTION agentfs_number_events() SET enable_seqscan = off;
ALTER FUNCTION agentfs_run_totals(text, events[]) SET enable_seqscan = off;
ALTER FUNCTION agentfs_count_runs(text, events[]) SET enable_seqscan = off;
