-- A DuckDB file: the write-ahead log folded into the file.
CHECKPOINT
