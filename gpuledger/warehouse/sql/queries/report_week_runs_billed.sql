-- The catalog estimate of the runs that started in the ISO week [$week_start, $week_end) against what
-- the bill attributes to those same runs (v_run_billed: USD line items of any charge period). The
-- range reaches the runs scan below v_run_billed's GROUP BY, so only the week's runs are grouped.
SELECT count(*) AS runs,
       coalesce(sum(estimated_usd), 0) AS estimated_usd,
       count(*) FILTER (WHERE line_items > 0) AS runs_billed,
       coalesce(sum(estimated_usd) FILTER (WHERE line_items > 0), 0) AS estimated_usd_of_billed_runs,
       sum(billed_usd) AS billed_usd,
       sum(effective_usd) AS effective_usd
FROM v_run_billed
WHERE started_at >= $week_start AND started_at < $week_end
