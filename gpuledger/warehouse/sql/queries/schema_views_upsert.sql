-- Records a view (re)created from its .sql file.
INSERT OR REPLACE INTO schema_views VALUES ($name, $checksum, $created_at)
