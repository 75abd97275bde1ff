-- The sweep ended: none of its attempts accrues any more (their runs rows count).
UPDATE trial_accruals SET running = false WHERE sweep_id = $sweep_id AND running
