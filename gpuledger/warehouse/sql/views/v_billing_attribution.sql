-- Every stored FOCUS line item with the run it is attributed to and how:
--   'tags'     : Tags carry the launch labels gpuledger-sweep and gpuledger-trial (gpuledger/billing/labels.py);
--                the run of that trial overlapping the charge period most (else its latest run);
--   'resource' : ResourceId or ResourceName contains the managed job's name gl-<sweep name>-<trial id>;
--   'time'     : GPU-cloud compute of the same provider and region overlapping a cloud run in time
--                (a guess, flagged as such);
--   NULL       : matches no run (idle clusters, forgotten instances, storage, ...): unattributed, never dropped.
-- effective_cost: FOCUS EffectiveCost, else (a line item without one: an export with no EffectiveCost column,
--       which FOCUS 1.0+ makes mandatory, or an empty cell) its BilledCost, flagged effective_cost_assumed; every
--       view and report that sums effective cost reads it here, so none shows $0 for money that was billed.
-- role: the launch label gpuledger-role in Tags (an RL job group's instance: trainer | rollout | reward | ref),
--       else NULL (the run's one instance, or a line item without the label).
WITH li AS (
    SELECT li.*,
           json_extract_string(li.tags, '$."gpuledger-sweep"') AS tag_sweep_id,
           json_extract_string(li.tags, '$."gpuledger-trial"') AS tag_trial_id,
           json_extract_string(li.tags, '$."gpuledger-role"') AS tag_role,
           lower(coalesce(li.resource_id, '') || ' ' || coalesce(li.resource_name, '')) AS resource_text,
           CASE
               WHEN li.provider_name ILIKE '%amazon%' OR li.provider_name ILIKE 'aws%' THEN 'aws'
               WHEN li.provider_name ILIKE '%google%' OR li.provider_name ILIKE 'gcp%' THEN 'gcp'
               WHEN li.provider_name ILIKE '%microsoft%' OR li.provider_name ILIKE '%azure%' THEN 'azure'
               WHEN li.provider_name ILIKE '%oracle%' OR li.provider_name ILIKE 'oci%' THEN 'oci'
               ELSE lower(li.provider_name)
           END AS cloud
    FROM billing_line_items li
),
-- cloud_runs: the job name's sweep part is built once per sweep (a regexp per run cost more than the
-- rest of a week's report at 1M runs), and the CTE is inlined where used (NOT MATERIALIZED), so with no
-- line item to match the runs are not read at all (benchmarks/warehouse_scale.py).
cloud_runs AS NOT MATERIALIZED (
    SELECT r.run_id, r.sweep_id, r.trial_id, r.cloud, r.region, r.started_at, r.ended_at,
           s.job_prefix || r.trial_id AS job_name
    FROM runs r
    LEFT JOIN (SELECT sweep_id, 'gl-' || lower(regexp_replace(name, '[^A-Za-z0-9-]', '-', 'g')) || '-' AS job_prefix
               FROM sweeps) s USING (sweep_id)
    WHERE r.launcher <> 'local'
),
candidates AS (
    SELECT li.file_sha256, li.source_row, r.run_id, 'tags' AS method, 1 AS rank_method,
           greatest(0, epoch(least(r.ended_at, li.charge_period_end)) - epoch(greatest(r.started_at, li.charge_period_start))) AS overlap_s,
           r.started_at
    FROM li JOIN runs r ON r.sweep_id = li.tag_sweep_id AND r.trial_id = li.tag_trial_id
    UNION ALL
    SELECT li.file_sha256, li.source_row, r.run_id, 'resource', 2,
           greatest(0, epoch(least(r.ended_at, li.charge_period_end)) - epoch(greatest(r.started_at, li.charge_period_start))),
           r.started_at
    FROM li JOIN cloud_runs r ON li.tag_trial_id IS NULL AND contains(li.resource_text, r.job_name)
    UNION ALL
    SELECT li.file_sha256, li.source_row, r.run_id, 'time', 3,
           epoch(least(r.ended_at, li.charge_period_end)) - epoch(greatest(r.started_at, li.charge_period_start)),
           r.started_at
    FROM li JOIN cloud_runs r
      ON li.tag_trial_id IS NULL AND li.cloud = r.cloud
     AND (li.region_id IS NULL OR r.region IS NULL OR li.region_id = r.region)
     AND coalesce(li.service_category, 'Compute') = 'Compute'
     AND li.charge_category = 'Usage'
     AND r.started_at < li.charge_period_end AND li.charge_period_start < r.ended_at
),
best AS (
    SELECT * FROM candidates
    QUALIFY row_number() OVER (PARTITION BY file_sha256, source_row
                               ORDER BY rank_method, overlap_s DESC, started_at DESC, run_id) = 1
)
SELECT li.file_sha256, li.source_row, f.export_name, li.billing_period_start, li.billing_period_end,
       li.charge_period_start, li.charge_period_end, li.charge_category, li.charge_class,
       li.provider_name, li.billing_account_id, li.billing_currency, li.currency_assumed,
       li.resource_id, li.service_name, li.billed_cost,
       coalesce(li.effective_cost, li.billed_cost) AS effective_cost,
       li.effective_cost IS NULL AS effective_cost_assumed, li.list_cost,
       b.run_id, r.sweep_id, r.trial_id, b.method AS attribution_method,
       CASE WHEN li.tag_role IN ('trainer', 'rollout', 'reward', 'ref') THEN li.tag_role END AS role
FROM li
JOIN billing_files f USING (file_sha256)
LEFT JOIN best b USING (file_sha256, source_row)
LEFT JOIN runs r ON r.run_id = b.run_id
