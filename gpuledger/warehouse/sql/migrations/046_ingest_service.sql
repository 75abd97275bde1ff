-- The ingest service (`[warehouse] ingest = "service"`, deployment ingest/team): one row per batch it
-- committed, and one per record it stored, keyed by the record's hash (sha256 of its canonical JSON),
-- so that a record landed twice is stored once. Written in the batch's own transaction.
CREATE TABLE IF NOT EXISTS ingest_batches (
    batch_id VARCHAR PRIMARY KEY,
    host VARCHAR,
    started_at TIMESTAMP NOT NULL,
    committed_at TIMESTAMP NOT NULL,
    landed INTEGER NOT NULL,
    stored INTEGER NOT NULL,
    new_runs INTEGER NOT NULL,
    duplicates INTEGER NOT NULL,
    rejected INTEGER NOT NULL,
    metric_rows INTEGER NOT NULL,
    bytes BIGINT NOT NULL,
    attempts INTEGER NOT NULL,
    read_s DOUBLE,
    commit_s DOUBLE
);
CREATE TABLE IF NOT EXISTS ingested_records (
    record_hash VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    batch_id VARCHAR NOT NULL,
    landed_at TIMESTAMP,
    stored_at TIMESTAMP NOT NULL
);
