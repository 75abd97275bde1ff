-- One sweep's ($sweep_id) trial runs' cost by role (issue 40; gpuledger/report/rl_cost.py): per run and
-- billing role (billing.role: trainer | rollout | reward | ref for an instance of the run's own roles, an RL
-- job group; NULL: the run's one instance, every role on it), what the launcher recorded (its billing
-- lines: catalog or local price x hours, with the instance, GPU kind and count each priced; lines stored
-- before migration 047 fall back to the run's own) and what the cloud billed (the USD FOCUS line items
-- v_billing_attribution gives the run, by their gpuledger-role label). A role only the bill has (an
-- unlabelled line item of a job group's run) is a row of its own.
WITH trial_runs AS (
    SELECT run_id, trial_id, status, instance_type, accelerator, gpus
    FROM runs
    WHERE sweep_id = $sweep_id AND purpose = 'trial'
),
recorded AS (
    SELECT b.run_id, b.role,
           any_value(coalesce(b.instance_type, r.instance_type)) AS instance_type,
           any_value(coalesce(b.accelerator, r.accelerator)) AS accelerator,
           any_value(coalesce(b.gpus, r.gpus)) AS gpus,
           sum(b.hours) AS hours,
           sum(b.cost_usd) AS recorded_usd
    FROM billing b
    JOIN trial_runs r USING (run_id)
    GROUP BY b.run_id, b.role
),
billed AS (
    SELECT a.run_id, a.role, sum(a.billed_cost) AS billed_usd, count(*) AS line_items
    FROM v_billing_attribution a
    WHERE a.sweep_id = $sweep_id AND a.run_id IS NOT NULL AND a.billing_currency = 'USD'
    GROUP BY a.run_id, a.role
),
keys AS (
    SELECT run_id, role FROM recorded
    UNION
    SELECT run_id, role FROM billed
)
SELECT r.run_id,
       r.trial_id,
       r.status,
       k.role,
       coalesce(rec.instance_type, r.instance_type) AS instance_type,
       coalesce(rec.accelerator, r.accelerator) AS accelerator,
       coalesce(rec.gpus, r.gpus) AS gpus,
       rec.hours,
       rec.recorded_usd,
       bl.billed_usd,
       coalesce(bl.line_items, 0) AS line_items
FROM keys k
JOIN trial_runs r USING (run_id)
LEFT JOIN recorded rec ON rec.run_id = k.run_id AND rec.role IS NOT DISTINCT FROM k.role
LEFT JOIN billed bl ON bl.run_id = k.run_id AND bl.role IS NOT DISTINCT FROM k.role
ORDER BY r.trial_id, r.run_id, k.role NULLS FIRST
