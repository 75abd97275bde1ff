-- DuckLake: inside a writing transaction, touch the writers' row (see lake_writer_create).
UPDATE lake_writer SET holder = $holder, claimed_at = $at
