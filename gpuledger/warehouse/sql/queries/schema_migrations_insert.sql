-- Records one applied migration (in the same transaction as the migration).
INSERT INTO schema_migrations VALUES ($version, $name, $checksum, $applied_at)
