-- DuckLake maintenance: rows that small commits kept inlined in the catalog are written to Parquet.
CALL ducklake_flush_inlined_data($alias)
