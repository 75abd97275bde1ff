-- Records the end of a sweep.
UPDATE sweeps SET ended_at = $ended_at, status = $status, updated_at = $now WHERE sweep_id = $sweep_id
