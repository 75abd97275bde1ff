-- Takes (or takes over) the lease on a sweep id.
INSERT OR REPLACE INTO sweep_leases
VALUES ($sweep_id, $holder, $pid, $host, $acquired_at, $renewed_at, $expires_at)
