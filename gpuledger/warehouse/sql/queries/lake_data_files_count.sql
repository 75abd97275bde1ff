-- DuckLake: the live Parquet data files (those of the current snapshot) of the catalog attached as `lake`.
SELECT count(*) FROM __ducklake_metadata_lake.ducklake_data_file WHERE end_snapshot IS NULL
