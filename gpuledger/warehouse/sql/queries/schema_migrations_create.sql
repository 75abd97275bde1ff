-- The ledger of applied migrations (created before any migration runs).
CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, checksum VARCHAR NOT NULL,
    applied_at TIMESTAMP NOT NULL)
