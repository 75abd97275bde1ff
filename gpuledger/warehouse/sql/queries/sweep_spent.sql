-- Money a sweep has spent so far (USD): spent_usd over all its runs, probes included (the flow's budget
-- meter), and probes_usd, its probes' part (runs with purpose 'probe': the pre-launch budget guard adds
-- it to the plan's trials, which do not include it).
SELECT coalesce(sum(cost_usd), 0) AS spent_usd,
       coalesce(sum(cost_usd) FILTER (WHERE purpose = 'probe'), 0) AS probes_usd
FROM runs
WHERE sweep_id = $sweep_id
