-- Drops a sweep's price snapshot before it is written again.
DELETE FROM prices WHERE sweep_id = $sweep_id
