-- The catalog prices a sweep's plan used: each source (where the price came from, in words: the
-- bundled snapshot, SkyPilot's cache, the project's copy, a discount, the team's own price, the bill)
-- with its date.
SELECT as_of, coalesce(source, 'catalog') AS source, count(*) AS price_rows
FROM prices
WHERE sweep_id = $sweep_id AND as_of IS NOT NULL
GROUP BY ALL
ORDER BY as_of, source
