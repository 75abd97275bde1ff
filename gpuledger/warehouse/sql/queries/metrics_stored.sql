-- The stored metric points of the run ids being ingested (registered as _in_ids), in order.
SELECT run_id, name, seq, step, t_s, value FROM metrics WHERE run_id IN (SELECT run_id FROM _in_ids)
ORDER BY run_id, name, seq
