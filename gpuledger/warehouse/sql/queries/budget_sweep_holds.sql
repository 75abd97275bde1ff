-- What a sweep holds in each envelope window it reserved in (the latest reservation's attribution).
SELECT budget, window_start, max(window_end) AS window_end,
       greatest(sum(reserved_usd), 0) AS held_usd, sum(spent_usd) AS spent_usd,
       arg_max(owner, recorded_at) AS owner, arg_max(owner_claimed, recorded_at) AS owner_claimed,
       arg_max(project, recorded_at) AS project, arg_max(launched_by, recorded_at) AS launched_by
FROM budget_ledger
WHERE sweep_id = $sweep_id
GROUP BY budget, window_start
ORDER BY budget, window_start
