-- Maintenance: the staging table of the downsampling dropped.
DROP TABLE IF EXISTS _gpuledger_downsample
