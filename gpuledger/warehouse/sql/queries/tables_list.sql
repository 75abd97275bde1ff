-- The base tables of the warehouse.
SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY table_name
