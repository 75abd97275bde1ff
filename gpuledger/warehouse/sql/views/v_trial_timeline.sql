-- One row per run for a Gantt chart: offsets from the sweep's start, cumulative spend and the
-- best metric so far at the moment each run ended (runs that ended at the same moment count together).
-- Trial attempts only: probes (purpose 'probe') ran before the sweep, see v_probes.
WITH start AS (
    SELECT sweep_id, started_at AS sweep_started_at, goal FROM (
        SELECT i.sweep_id, coalesce(s.objective_goal, 'minimize') AS goal,
               least(s.started_at, (SELECT min(r.started_at) FROM runs r WHERE r.sweep_id = i.sweep_id
                                                        AND coalesce(r.purpose, 'trial') = 'trial')) AS started_at
        FROM (SELECT sweep_id FROM sweeps UNION SELECT sweep_id FROM runs WHERE sweep_id IS NOT NULL) i
        LEFT JOIN sweeps s ON s.sweep_id = i.sweep_id)
)
SELECT r.sweep_id,
       r.trial_id,
       r.run_id,
       r.attempt,
       r.status,
       r.accelerator,
       r.spot,
       st.sweep_started_at,
       r.started_at,
       r.ended_at,
       date_diff('microsecond', st.sweep_started_at, r.started_at) / 1e6 AS start_offset_s,
       date_diff('microsecond', st.sweep_started_at, r.ended_at) / 1e6 AS end_offset_s,
       r.wall_s,
       r.cost_usd,
       sum(r.cost_usd) OVER w AS cumulative_cost_usd,
       r.metric_value,
       CASE WHEN st.goal = 'maximize'
            THEN max(CASE WHEN r.status = 'succeeded' THEN r.metric_value END) OVER w
            ELSE min(CASE WHEN r.status = 'succeeded' THEN r.metric_value END) OVER w END AS best_so_far
FROM v_runs r
JOIN start st ON st.sweep_id = r.sweep_id
WHERE r.purpose = 'trial'
WINDOW w AS (PARTITION BY r.sweep_id ORDER BY r.ended_at RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
