-- Column test `relationships`: non-null values with no row of {to} whose {field} equals them.
SELECT count(*) AS failing, min(CAST(c.{column} AS VARCHAR)) AS example
FROM {view} AS c
WHERE c.{column} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {to} AS p WHERE p.{field} = c.{column})
