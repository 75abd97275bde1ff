-- Gives the lease back (only its holder can).
DELETE FROM sweep_leases WHERE sweep_id = $sweep_id AND holder = $holder
