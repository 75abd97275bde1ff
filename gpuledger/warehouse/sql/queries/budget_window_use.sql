-- One envelope's window: spent, held, accrued, used (v_budgets); no row when nothing counted there yet.
SELECT limit_usd, spent_usd, reserved_usd, accrued_usd, used_usd, remaining_usd
FROM v_budgets
WHERE budget = $budget AND window_start = $window_start
