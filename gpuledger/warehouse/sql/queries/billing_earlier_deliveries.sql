-- Earlier deliveries of the same export covering a billing account and period, with their row counts
-- there (a restatement replaces them). `IS NOT DISTINCT FROM`: files without an account id match too.
SELECT f.file_sha256, count(*) AS line_items
FROM billing_files f JOIN billing_line_items li USING (file_sha256)
WHERE f.export_name = $export_name
  AND li.billing_account_id IS NOT DISTINCT FROM $account
  AND li.billing_period_start IS NOT DISTINCT FROM $period
GROUP BY f.file_sha256
