-- The lease on a sweep id, if any.
SELECT holder, pid, host, acquired_at, renewed_at, expires_at FROM sweep_leases WHERE sweep_id = $sweep_id
