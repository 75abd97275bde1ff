-- The views created from gpuledger/warehouse/sql/views/*.sql and the checksum of their text.
CREATE TABLE IF NOT EXISTS schema_views (
    name VARCHAR PRIMARY KEY, checksum VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL)
