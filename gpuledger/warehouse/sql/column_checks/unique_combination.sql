-- View test `unique_combination`: combinations of {columns} that occur on more than one row.
SELECT count(*) AS failing, min(CAST(combo AS VARCHAR)) AS example
FROM (SELECT row({columns}) AS combo FROM {view} GROUP BY {columns} HAVING count(*) > 1)
