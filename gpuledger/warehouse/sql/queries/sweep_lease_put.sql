-- Takes (or takes over) the lease on a sweep id, after sweep_lease_drop in the same transaction
-- (a plain INSERT: the team warehouse on DuckLake has no primary keys for INSERT OR REPLACE).
INSERT INTO sweep_leases
VALUES ($sweep_id, $holder, $pid, $host, $acquired_at, $renewed_at, $expires_at)
