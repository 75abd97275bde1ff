-- What bills the warehouse holds: exports (files), line items and the billing periods they cover.
SELECT (SELECT count(*) FROM billing_files) AS exports,
       count(*) AS line_items,
       min(billing_period_start) AS first_period_start,
       max(billing_period_start) AS last_period_start
FROM billing_line_items
