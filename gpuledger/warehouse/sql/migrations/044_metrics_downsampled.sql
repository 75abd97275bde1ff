-- Downsampled metric points (`gpuledger warehouse maintain`): a point that stands for `points` raw points
-- of the same run and metric keeps their mean in `value`, their extremes in `value_min`/`value_max`, and
-- the last of their steps and times. Raw points leave the three NULL.
ALTER TABLE metrics ADD COLUMN IF NOT EXISTS value_min DOUBLE;
ALTER TABLE metrics ADD COLUMN IF NOT EXISTS value_max DOUBLE;
ALTER TABLE metrics ADD COLUMN IF NOT EXISTS points INTEGER;
