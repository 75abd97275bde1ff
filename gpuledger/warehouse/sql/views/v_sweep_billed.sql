-- Per sweep: estimated (catalog) vs billed vs effective cost, and how much of it the bill already covers.
SELECT sweep_id,
       sum(estimated_usd) AS estimated_usd,
       sum(billed_usd) AS billed_usd,
       sum(effective_usd) AS effective_usd,
       count(*) AS runs,
       count(*) FILTER (WHERE line_items > 0) AS runs_billed,
       sum(estimated_usd) FILTER (WHERE line_items > 0) AS estimated_usd_of_billed_runs
FROM v_run_billed
GROUP BY sweep_id
