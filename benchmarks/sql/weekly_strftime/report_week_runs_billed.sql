-- The catalog estimate of the runs that started in ISO week $week against what the bill attributes
-- to those same runs (v_run_billed: USD line items of any charge period).
SELECT count(*) AS runs,
       coalesce(sum(estimated_usd), 0) AS estimated_usd,
       count(*) FILTER (WHERE line_items > 0) AS runs_billed,
       coalesce(sum(estimated_usd) FILTER (WHERE line_items > 0), 0) AS estimated_usd_of_billed_runs,
       sum(billed_usd) AS billed_usd,
       sum(effective_usd) AS effective_usd
FROM v_run_billed
WHERE strftime(started_at, '%G-W%V') = $week
