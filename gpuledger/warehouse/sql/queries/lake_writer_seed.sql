-- DuckLake: the writers' row, once.
INSERT INTO lake_writer SELECT 'created', $at WHERE NOT EXISTS (SELECT 1 FROM lake_writer)
