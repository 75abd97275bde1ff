-- Where a sweep's dollar figures come from: billing source and rate, with the number of lines.
SELECT b.source, b.usd_per_hour, b.spot, b.on_demand_usd_per_hour, count(*) AS lines
FROM billing b JOIN runs r ON r.run_id = b.run_id
WHERE r.sweep_id = $sweep_id
GROUP BY ALL
ORDER BY b.source, b.usd_per_hour
