-- Views recorded in schema_views.
SELECT name, checksum FROM schema_views
