-- Where one sweep's ($sweep_id) plan estimates of trial time come from (trials.est_basis: 'estimate',
-- 'calibrated on N runs', 'measured'), with how many trials each, for the report's source lines.
SELECT coalesce(est_basis, 'estimate') AS est_basis, count(*) AS trials
FROM trials
WHERE sweep_id = $sweep_id AND est_cost_usd IS NOT NULL
GROUP BY ALL
ORDER BY trials DESC, est_basis
