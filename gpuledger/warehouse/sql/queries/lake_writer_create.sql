-- DuckLake: the single row every writing transaction updates first, so that overlapping writers
-- conflict (DuckLake lets concurrent INSERTs through) and the later one retries.
CREATE TABLE IF NOT EXISTS lake_writer (holder VARCHAR, claimed_at TIMESTAMP)
