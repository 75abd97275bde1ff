-- Facts of a sweep that no view carries: its launcher and max_parallel (the actual K).
SELECT launcher, max_parallel, model, method, forced FROM sweeps WHERE sweep_id = $sweep_id
