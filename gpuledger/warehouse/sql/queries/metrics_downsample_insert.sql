-- Maintenance: the downsampled points of the staged series.
INSERT INTO metrics (run_id, name, seq, step, t_s, value, value_min, value_max, points)
SELECT run_id, name, seq, step, t_s, value, value_min, value_max, points FROM _gpuledger_downsample
