-- Removes an earlier delivery's line items of one billing account and period (it was restated).
DELETE FROM billing_line_items
WHERE file_sha256 = $sha256
  AND billing_account_id IS NOT DISTINCT FROM $account
  AND billing_period_start IS NOT DISTINCT FROM $period
