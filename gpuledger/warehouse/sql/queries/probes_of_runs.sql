-- What the given probe runs ($run_ids) measured (v_probes), in run order: `gpuledger probe`'s answer.
SELECT * FROM v_probes WHERE list_contains($run_ids, run_id) ORDER BY started_at, run_id
