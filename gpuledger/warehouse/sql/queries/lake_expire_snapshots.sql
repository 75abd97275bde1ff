-- DuckLake maintenance: snapshots older than $before expired (time travel stops there).
CALL ducklake_expire_snapshots($alias, older_than => $before)
