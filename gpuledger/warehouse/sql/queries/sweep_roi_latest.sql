-- The ROI row (v_sweep_roi) of the latest sweep named $name: best recipe, time and cost to it, total spend.
SELECT *
FROM v_sweep_roi
WHERE sweep_name = $name
ORDER BY started_at DESC NULLS LAST
LIMIT 1
