-- Maintenance: one point per $every consecutive raw points of every metric series of runs that ended
-- before $cutoff and have more than $every points, none downsampled yet. The point keeps the mean in value,
-- the extremes in value_min/value_max, how many points it stands for, the last step and time;
-- seq stays the point's position in its series.
CREATE OR REPLACE TEMP TABLE _gpuledger_downsample AS
WITH eligible AS (
    SELECT m.run_id, m.name
    FROM metrics m JOIN runs r ON r.run_id = m.run_id
    WHERE r.ended_at < $cutoff
    GROUP BY m.run_id, m.name
    HAVING count(*) > $every AND count(m.points) = 0
)
SELECT m.run_id, m.name, (m.seq // $every)::INTEGER AS seq, max(m.step) AS step, max(m.t_s) AS t_s,
       avg(m.value) AS value, min(m.value) AS value_min, max(m.value) AS value_max, count(*)::INTEGER AS points
FROM metrics m JOIN eligible e ON e.run_id = m.run_id AND e.name = m.name
GROUP BY m.run_id, m.name, m.seq // $every
