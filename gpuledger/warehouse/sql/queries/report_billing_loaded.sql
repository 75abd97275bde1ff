-- What bills the warehouse holds: exports (the files whose line items are stored: a delivery a later
-- one restated wholly is not counted again), line items and the billing periods they cover.
SELECT count(DISTINCT file_sha256) AS exports,
       count(*) AS line_items,
       min(billing_period_start) AS first_period_start,
       max(billing_period_start) AS last_period_start
FROM billing_line_items
