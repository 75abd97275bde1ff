-- Spot hours and preemptions measured per (cloud, accelerator): the planner's input.
SELECT cloud, accelerator, coalesce(sum(wall_s), 0) / 3600.0 AS spot_hours,
       coalesce(sum(preemptions), 0) AS preemptions
FROM runs WHERE spot AND cloud IS NOT NULL AND accelerator IS NOT NULL
GROUP BY cloud, accelerator
