-- Maintenance: how many runs the staged downsampling covers.
SELECT count(DISTINCT run_id) FROM _gpuledger_downsample
