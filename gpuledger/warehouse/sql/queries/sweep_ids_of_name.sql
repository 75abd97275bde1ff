-- Every sweep id registered under a sweep name (`gpuledger sweep --new` picks one not among them).
SELECT sweep_id FROM sweeps WHERE name = $name
