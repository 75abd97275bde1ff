-- The comments (COMMENT ON VIEW) the database holds for its views.
SELECT view_name, coalesce(comment, '') FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'
