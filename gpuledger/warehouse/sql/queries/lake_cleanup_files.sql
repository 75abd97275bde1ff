-- DuckLake maintenance: files that only expired snapshots referred to, scheduled before $before, deleted.
CALL ducklake_cleanup_old_files($alias, older_than => $before)
