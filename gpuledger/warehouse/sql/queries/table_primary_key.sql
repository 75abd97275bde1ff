-- The primary-key columns of a table (the upsert's conflict target).
SELECT constraint_column_names FROM duckdb_constraints()
WHERE table_name = $table AND constraint_type = 'PRIMARY KEY'
