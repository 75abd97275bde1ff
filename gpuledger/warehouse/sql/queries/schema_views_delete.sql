-- Forgets a view whose .sql file was removed.
DELETE FROM schema_views WHERE name = $name
