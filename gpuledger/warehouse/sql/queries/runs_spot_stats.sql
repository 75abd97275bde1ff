-- Spot hours and preemptions measured, optionally of one cloud and/or accelerator.
SELECT coalesce(sum(wall_s), 0) / 3600.0 AS spot_hours, coalesce(sum(preemptions), 0) AS preemptions
FROM runs
WHERE spot AND ($cloud IS NULL OR cloud = $cloud) AND ($accelerator IS NULL OR accelerator = $accelerator)
