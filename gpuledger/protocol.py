"""The one home of gpuledger's shared vocabulary: statuses and the result-record protocol.

Stdlib only and import-free on purpose: the in-job agent (`gpuledger.agent`), trainer code
(`gpuledger.track`), the launchers, the warehouse, the flows and the reports all read these names
from here, so a status or an environment variable is spelled once.

Statuses, from the smallest unit up:
- an attempt (one result record, the warehouse's `runs.status`): `RUN_STATUSES`;
- what a launcher's `poll` answers while an attempt runs: `LAUNCH_STATUSES` (terminal ones in
  `LAUNCH_TERMINAL`); `launch_status_of(run_status)` maps a record's status onto it;
- a trial (the warehouse's `trials.status`): `TRIAL_STATUSES` = pending/running, an attempt's
  status, or one the sweep gives a trial it did not run (`skipped-budget`; for the adaptive
  search `pruned`: stopped early because it could not beat the best, and `not-asked`: a candidate
  point the search ended without asking for, n_trials being reached);
- a sweep run (the warehouse's `sweeps.status`, the flow's summary): `SWEEP_STATUSES`.

The record protocol (docs/result-record.md): `SCHEMA` names the record version; a job prints its
record as one `RESULT_LINE_PREFIX` line, trainers without the agent print metrics as
`METRIC_LINE_PREFIX` lines; `ENV_*` are the environment variables a launcher sets for the agent
and the trial.
"""

from __future__ import annotations

# -- statuses ----------------------------------------------------------------------------------

SUCCEEDED = "succeeded"
FAILED = "failed"
OOM = "oom"
PREEMPTED = "preempted"
CANCELLED = "cancelled"
PENDING = "pending"
RUNNING = "running"
RECOVERING = "recovering"
SKIPPED_BUDGET = "skipped-budget"
PRUNED = "pruned"
NOT_ASKED = "not-asked"

#: Terminal states of one attempt (a result record's `status`).
RUN_STATUSES: tuple[str, ...] = (SUCCEEDED, FAILED, OOM, PREEMPTED, CANCELLED)
#: What a launcher's `poll` answers.
LAUNCH_STATUSES: tuple[str, ...] = (PENDING, RUNNING, RECOVERING, SUCCEEDED, FAILED, CANCELLED)
LAUNCH_TERMINAL: frozenset[str] = frozenset({SUCCEEDED, FAILED, CANCELLED})
#: Statuses a sweep gives a trial it did not run to the end itself.
NOT_RUN_STATUSES: tuple[str, ...] = (SKIPPED_BUDGET, PRUNED, NOT_ASKED)
#: Every status a trial can have.
TRIAL_STATUSES: tuple[str, ...] = (PENDING, RUNNING, *RUN_STATUSES, *NOT_RUN_STATUSES)
#: A trial in one of these will not change any more (a re-run of the sweep still retries failures).
TRIAL_TERMINAL: tuple[str, ...] = (*RUN_STATUSES, *NOT_RUN_STATUSES)

# Sweep run statuses (one run of the sweep flow).
SWEEP_PLANNED = "planned"  # registered, nothing finished yet
SWEEP_RUNNING = RUNNING
SWEEP_DRY_RUN = "dry-run"  # planned and guarded only; nothing launched, nothing written
SWEEP_SUCCEEDED = SUCCEEDED  # every trial to run ran and succeeded, every record stored
SWEEP_PARTIAL = "partial"  # some trials failed or were not feasible; every record stored
SWEEP_BUDGET_STOPPED = "budget-stopped"  # launching stopped at the budget; every record stored
SWEEP_UNRECORDED = "unrecorded"  # results exist but some records could not be stored (still in landing)
SWEEP_INTERRUPTED = "interrupted"  # stopped by the user (Ctrl-C) or a signal
SWEEP_FAILED = FAILED  # the flow itself broke
SWEEP_STATUSES: tuple[str, ...] = (SWEEP_PLANNED, SWEEP_RUNNING, SWEEP_DRY_RUN, SWEEP_SUCCEEDED, SWEEP_PARTIAL,
                                   SWEEP_BUDGET_STOPPED, SWEEP_UNRECORDED, SWEEP_INTERRUPTED, SWEEP_FAILED)

_LAUNCH_STATUS_OF_RUN = {SUCCEEDED: SUCCEEDED, FAILED: FAILED, OOM: FAILED, PREEMPTED: FAILED,
                         CANCELLED: CANCELLED}


def launch_status_of(run_status: str) -> str:
    """Returns what `poll` answers for an attempt whose record says `run_status` (oom/preempted: failed)."""
    return _LAUNCH_STATUS_OF_RUN.get(run_status, FAILED)


# -- the result-record protocol ------------------------------------------------------------------

SCHEMA = "gpuledger.result/1"
RESULT_LINE_PREFIX = "GPULEDGER_RESULT "
METRIC_LINE_PREFIX = "GPULEDGER_METRIC "

#: The JSONL file `gpuledger.track.log` appends metrics to (set by the agent for its child).
ENV_METRICS = "GPULEDGER_METRICS"
#: Where the agent writes the record (its `--result` default).
ENV_RESULT_FILE = "GPULEDGER_RESULT_FILE"
# ids of the attempt, set for the agent and the trial
ENV_RUN_ID = "GPULEDGER_RUN_ID"
ENV_TRIAL_ID = "GPULEDGER_TRIAL_ID"
ENV_SWEEP_ID = "GPULEDGER_SWEEP_ID"
ENV_SWEEP_NAME = "GPULEDGER_SWEEP_NAME"
ENV_ATTEMPT = "GPULEDGER_ATTEMPT"
ENV_PARAMS = "GPULEDGER_PARAMS"  # the trial's parameters as one JSON object
ENV_PARAM_PREFIX = "GPULEDGER_PARAM_"  # one variable per parameter (SkyPilot jobs)
# placement, set by the launcher (the agent falls back to NVML / 'local' when absent)
ENV_LAUNCHER = "GPULEDGER_LAUNCHER"
ENV_CLOUD = "GPULEDGER_CLOUD"
ENV_REGION = "GPULEDGER_REGION"
ENV_INSTANCE_TYPE = "GPULEDGER_INSTANCE_TYPE"
ENV_ACCELERATOR = "GPULEDGER_ACCELERATOR"
ENV_GPUS = "GPULEDGER_GPUS"
ENV_SPOT = "GPULEDGER_SPOT"
ENV_TIMEOUT_S = "GPULEDGER_TIMEOUT_S"
#: The agent's `--echo-interval-s` (least seconds between two echoed lines of one metric).
ENV_ECHO_INTERVAL_S = "GPULEDGER_ECHO_INTERVAL_S"

#: The agent's `--key-fd`: the file descriptor the launcher passes the attempt's signing key on.
ENV_KEY_FD = "GPULEDGER_KEY_FD"

#: The prefix of gpuledger's own variables: a spec's `task.env` may not set any of them.
LEDGER_ENV_PREFIX = "GPULEDGER_"
#: The variables a trial sees (set by the agent for its child): who it is and where its metrics go.
#: Everything else of gpuledger's (`is_ledger_env`) is removed from a trial's environment, so a trial
#: cannot name the warehouse, the landing folder, the sweep or its agent's result file.
TRIAL_ENV: tuple[str, ...] = (ENV_RUN_ID, ENV_TRIAL_ID, ENV_SWEEP_NAME, ENV_ATTEMPT, ENV_PARAMS, ENV_METRICS)
#: `GPULEDGER_*` variables of the trainers shipped in `gpuledger/trainers/` (their own settings, not
#: the ledger's): a trial inherits them.
TRAINER_ENV: tuple[str, ...] = ("GPULEDGER_CACHE_DIR", "GPULEDGER_DEMO_PRETRAIN_STEPS")


def is_ledger_env(name: str) -> bool:
    """Returns True for gpuledger's own variables, which a trial never inherits: every `GPULEDGER_*`
    (the settings' paths, the launcher's placement, the result file, the sweep id, any added later)
    but `TRIAL_ENV`, `ENV_PARAM_PREFIX` ones and `TRAINER_ENV`."""
    return (name.startswith(LEDGER_ENV_PREFIX) and name not in TRIAL_ENV and name not in TRAINER_ENV
            and not name.startswith(ENV_PARAM_PREFIX))


def trial_environment(env: dict[str, str]) -> dict[str, str]:
    """Returns `env` without gpuledger's own variables (`is_ledger_env`): what a trial may inherit."""
    return {k: v for k, v in env.items() if not is_ledger_env(k)}


def ledger_env_names(names: list[str] | tuple[str, ...] | set[str] | dict[str, str]) -> list[str]:
    """Returns the names among `names` in gpuledger's own namespace (`GPULEDGER_*`), sorted: what a
    spec's `task.env` may not set."""
    return sorted(n for n in names if str(n).upper().startswith(LEDGER_ENV_PREFIX))


#: Launchers a record can name (`fake`: the deterministic in-process launcher of fast flow tests).
LAUNCHERS: tuple[str, ...] = ("local", "skypilot", "fake")
#: Where a billing line's price came from.
PRICE_SOURCES: tuple[str, ...] = ("local", "catalog", "invoice")
