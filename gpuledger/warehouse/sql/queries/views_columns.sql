-- The views of the warehouse and their columns, in order.
SELECT c.table_name, c.column_name FROM information_schema.columns c
JOIN duckdb_views() v ON v.view_name = c.table_name AND NOT v.internal AND v.schema_name = 'main'
WHERE c.table_schema = 'main' ORDER BY c.table_name, c.ordinal_position
