-- The method and spec (JSON) of one sweep ($sweep_id): an inference sweep's serve.slo lives there.
SELECT s.sweep_id, s.name, s.method, sp.spec_json
FROM sweeps s
LEFT JOIN specs sp ON sp.spec_id = s.spec_id
WHERE s.sweep_id = $sweep_id
