-- Views of one attached database with their SQL text.
SELECT view_name, sql FROM duckdb_views() WHERE database_name = $database AND NOT internal
