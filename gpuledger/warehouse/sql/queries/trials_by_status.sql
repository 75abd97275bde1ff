-- Trials by status over every sweep (the metrics' trials by state).
SELECT status, count(*) AS trials FROM trials GROUP BY status ORDER BY status
