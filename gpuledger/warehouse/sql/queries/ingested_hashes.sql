-- Which of the landed records' hashes (registered as _in_hashes) the ingest service already stored.
SELECT record_hash FROM ingested_records WHERE record_hash IN (SELECT record_hash FROM _in_hashes)
