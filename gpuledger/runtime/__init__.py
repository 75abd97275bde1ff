"""The sweep's runtime, without Prefect: what happens between an accepted plan and a report.

- `accepted`: `prepare(spec_path, ...) -> AcceptedSweep` (spec, trials, plan, sweep id, cap, launcher):
  the one set-up of a sweep, used by the flow, `gpuledger plan` and the tests;
- `requests`: `PlannedTrial` -> `LaunchRequest` (the one place; `render-task` uses it too);
- `launching`: the launcher for a sweep, and one trial submitted, polled and collected (with
  retries when the launcher itself fails);
- `budget`: the budget meter and the mid-sweep budget-stop rule;
- `landing`: the sweep's landing folder, where each record waits until it is stored;
- `writer`: the sweep's one warehouse writer (a thread that stores records in batches);
- `events`: progress events for the CLI (`progress_listener`);
- `summary`: what one run did (`SweepSummary`) and its final status;
- `engine`: `execute(SweepRun(accepted, summary), hooks)`: registering a sweep (under its lease) and
  running its trials on a plain thread pool;
- `admit`: trials a tpe search asks over a range, planned and registered one by one;
- `ids`: the id of a fresh sweep of an unchanged spec (`gpuledger sweep --new`).

`gpuledger/flows/sweep.py` is a thin Prefect shell around `engine`: it adds logs, artifacts and the
budget event, nothing the runtime decides.
"""
