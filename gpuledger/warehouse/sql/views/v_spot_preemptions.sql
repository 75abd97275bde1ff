-- Measured preemption rate of spot runs per cloud and accelerator (input to the planner).
SELECT coalesce(cloud, 'local') AS cloud,
       accelerator,
       count(*) AS spot_runs,
       sum(wall_s) / 3600.0 AS spot_hours,
       sum(preemptions)::BIGINT AS preemptions,
       CASE WHEN sum(wall_s) > 0 THEN sum(preemptions) / (sum(wall_s) / 3600.0) END AS preemptions_per_hour
FROM v_runs
WHERE spot
GROUP BY ALL
