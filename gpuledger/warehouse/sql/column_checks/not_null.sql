-- Column test `not_null`: rows where the column is null.
SELECT count(*) AS failing, CAST(NULL AS VARCHAR) AS example FROM {view} WHERE {column} IS NULL
