-- The comments (COMMENT ON COLUMN) the database holds for the columns of its views.
SELECT c.table_name, c.column_name, coalesce(c.comment, '') FROM duckdb_columns() c
JOIN duckdb_views() v ON v.view_name = c.table_name AND NOT v.internal AND v.schema_name = 'main'
WHERE c.schema_name = 'main'
