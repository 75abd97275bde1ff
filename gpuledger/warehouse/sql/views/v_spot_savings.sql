-- Realised spot savings per sweep: what spot billing lines cost vs the same work on demand. Every
-- spot line is paid; the lines of a run that ended preempted (the lost work, waste) have no on-demand
-- equivalent: on demand that attempt would not have been lost, and its retry is counted in its own
-- lines, so its hours are not claimed as saved (definitions.spot_savings).
WITH ids AS (
    SELECT sweep_id FROM sweeps
    UNION SELECT sweep_id FROM runs WHERE sweep_id IS NOT NULL
),
spot AS (
    SELECT r.sweep_id,
           sum(b.hours) AS spot_hours,
           sum(b.cost_usd) AS paid_usd,
           sum(b.hours * coalesce(b.on_demand_usd_per_hour, b.usd_per_hour))
               FILTER (WHERE r.status IS DISTINCT FROM 'preempted') AS on_demand_equiv_usd,
           sum(b.hours) FILTER (WHERE r.status = 'preempted') AS preempted_hours,
           sum(b.cost_usd) FILTER (WHERE r.status = 'preempted') AS preempted_paid_usd
    FROM billing b JOIN runs r ON r.run_id = b.run_id
    WHERE b.spot AND r.sweep_id IS NOT NULL
    GROUP BY r.sweep_id
)
SELECT i.sweep_id,
       coalesce(s.spot_hours, 0.0) AS spot_hours,
       coalesce(s.paid_usd, 0.0) AS paid_usd,
       coalesce(s.on_demand_equiv_usd, 0.0) AS on_demand_equiv_usd,
       coalesce(s.on_demand_equiv_usd, 0.0) - coalesce(s.paid_usd, 0.0) AS saved_usd,
       CASE WHEN s.on_demand_equiv_usd > 0
            THEN 100.0 * (s.on_demand_equiv_usd - s.paid_usd) / s.on_demand_equiv_usd END AS saved_pct,
       coalesce(s.preempted_hours, 0.0) AS preempted_hours,
       coalesce(s.preempted_paid_usd, 0.0) AS preempted_paid_usd
FROM ids i LEFT JOIN spot s ON s.sweep_id = i.sweep_id
