-- Column test `accepted_values`: non-null values outside the list $values.
SELECT count(*) AS failing, min(CAST({column} AS VARCHAR)) AS example
FROM {view}
WHERE {column} IS NOT NULL AND NOT list_contains($values, CAST({column} AS VARCHAR))
