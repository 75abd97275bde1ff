-- Views that exist in the database (user schema).
SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'
