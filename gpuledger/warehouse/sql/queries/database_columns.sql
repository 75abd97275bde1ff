-- Tables (and views) of one attached database with their columns, in column order.
SELECT table_name, column_name, data_type FROM duckdb_columns()
WHERE database_name = $database ORDER BY table_name, column_index
