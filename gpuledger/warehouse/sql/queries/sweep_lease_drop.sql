-- Removes the lease row of a sweep id, whoever holds it (acquire_lease re-inserts it next).
DELETE FROM sweep_leases WHERE sweep_id = $sweep_id
