-- One row per batch the ingest service (deployment ingest/team) committed: sizes, duplicates, commit
-- attempts and the lag of its records from landing to commit.
WITH lag AS (
    SELECT batch_id,
           quantile_cont(epoch(stored_at - landed_at), 0.5) AS lag_p50_s,
           quantile_cont(epoch(stored_at - landed_at), 0.99) AS lag_p99_s,
           max(epoch(stored_at - landed_at)) AS lag_max_s
    FROM ingested_records
    WHERE landed_at IS NOT NULL
    GROUP BY batch_id
)
SELECT b.batch_id, b.host, b.started_at, b.committed_at, b.landed, b.stored, b.new_runs, b.duplicates,
       b.rejected, b.metric_rows, b.bytes, b.attempts, b.read_s, b.commit_s,
       l.lag_p50_s, l.lag_p99_s, l.lag_max_s
FROM ingest_batches b
LEFT JOIN lag l USING (batch_id)
