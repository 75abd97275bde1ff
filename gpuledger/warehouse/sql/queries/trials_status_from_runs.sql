-- Sets each registered trial's status to that of its latest attempt; a trial the adaptive search
-- pruned keeps `pruned` (its attempt's record says `cancelled`).
UPDATE trials SET status = latest.status, updated_at = $now
FROM (SELECT sweep_id, trial_id, arg_max(status, (attempt, ended_at)) AS status
      FROM runs WHERE sweep_id IS NOT NULL AND coalesce(purpose, 'trial') = 'trial' GROUP BY ALL) AS latest
WHERE trials.sweep_id = latest.sweep_id AND trials.trial_id = latest.trial_id
  AND trials.status IS DISTINCT FROM latest.status
  AND NOT (trials.status = 'pruned' AND latest.status = 'cancelled')
