-- 002: one lease per sweep id, so that two runs of the same sweep never launch the same trials.
-- A run holds the lease while it launches and renews it; a lease whose holder is past expires_at,
-- or whose pid is dead on the same host, may be taken over (gpuledger/warehouse/lease.py).
CREATE TABLE IF NOT EXISTS sweep_leases (
    sweep_id    VARCHAR PRIMARY KEY,
    holder      VARCHAR NOT NULL,        -- who holds it (e.g. the flow run id), chosen by the caller
    pid         INTEGER NOT NULL,        -- process that took or last renewed it
    host        VARCHAR NOT NULL,        -- hostname of that process
    acquired_at TIMESTAMP NOT NULL,      -- UTC, when this holder took it
    renewed_at  TIMESTAMP NOT NULL,      -- UTC, last renewal
    expires_at  TIMESTAMP NOT NULL       -- UTC, renewed_at + ttl_s
);
