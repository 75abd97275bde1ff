-- Column test `unique`: values that occur on more than one row (nulls are not values).
SELECT count(*) AS failing, min(CAST(value AS VARCHAR)) AS example
FROM (SELECT {column} AS value FROM {view} WHERE {column} IS NOT NULL GROUP BY {column} HAVING count(*) > 1)
