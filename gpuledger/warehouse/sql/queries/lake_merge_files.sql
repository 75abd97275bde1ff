-- DuckLake maintenance: adjacent small Parquet files of each table merged into larger ones (every row kept).
CALL ducklake_merge_adjacent_files($alias)
