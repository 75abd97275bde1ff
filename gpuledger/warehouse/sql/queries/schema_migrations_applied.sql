-- Migrations applied so far, with the checksum of the text that was applied.
SELECT version, name, checksum FROM schema_migrations ORDER BY version
