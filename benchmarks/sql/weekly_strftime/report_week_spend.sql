-- Spend of ISO week $week by project, owner, accelerator and spot, largest first.
SELECT * FROM v_weekly_spend WHERE week = $week ORDER BY cost_usd DESC
