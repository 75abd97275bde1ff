"""The result-record protocol: what a job and gpuledger say to each other.

Stdlib only and import-free on purpose: the in-job agent (`gpuledger.agent`) and trainer code
(`gpuledger.track`) read it, as do the launchers that set the variables.

`SCHEMA` names the record version (docs/result-record.md); a job prints its record as one
`RESULT_LINE_PREFIX` line, trainers without the agent print metrics as `METRIC_LINE_PREFIX` lines;
`ENV_*` are the environment variables a launcher sets for the agent and the trial. The words a
record may use (statuses, launchers, price sources) are in `gpuledger.vocabulary`.
"""

from __future__ import annotations

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

# probe runs (`gpuledger probe`, docs/probes.md): the attempt's purpose, and the trainer's stop rule
#: that `gpuledger.track.log` honours (ends the process cleanly, exit 0, once reached)
ENV_PURPOSE = "GPULEDGER_PURPOSE"
ENV_PROBE_STEPS = "GPULEDGER_PROBE_STEPS"  # after this many logged training steps (step >= 1)
ENV_PROBE_SECONDS = "GPULEDGER_PROBE_SECONDS"  # after this many seconds past the first logged training step
ENV_PROBE_SHAPE = "GPULEDGER_PROBE_SHAPE"  # the probed shape as one JSON object (kept in the record)
#: The metric `gpuledger.track.log` adds to a probe's training steps: the trainer process's CPU seconds
#: (`time.process_time()`, all its threads) then, from which `v_probes` tells the cores it used
PROBE_CPU_METRIC = "process_cpu_s"
#: An RL trainer's seconds per optimizer step by role (gpuledger/integrations/trl.py logs them every
#: step; `v_probes` reads their steady-state medians, the RL plan its per-role rates): generation of the
#: rollouts, the reference and old-policy log-probs, the reward, the trainer's forward/backward and
#: optimizer step, the weight sync to the rollout engine; `rl_step_s` the step's wall-clock
RL_ROLE_METRICS = {"rollout": "rl_rollout_s", "logprob": "rl_logprob_s", "reward": "rl_reward_s",
                   "train": "rl_train_s", "sync": "rl_sync_s"}
RL_STEP_METRIC = "rl_step_s"
#: tokens the rollouts generated in the step (completions, every rank) and their rate over `rl_rollout_s`
RL_GENERATED_TOKENS_METRIC = "rl_generated_tokens"
RL_ROLLOUT_RATE_METRIC = "rl_rollout_tokens_per_s"
#: An RL trial whose roles run as tasks of one SkyPilot job group (gpuledger/launch/skypilot_group.py, docs/rl.md):
#: the task's role (trainer | rollout), where the trainer reaches the rollouts' vLLM server (host, port;
#: trainers/grpo.py defaults its `--vllm-server-host/--vllm-server-port` to them) and the trainer's host
ENV_ROLE = "GPULEDGER_ROLE"
ENV_ROLLOUT_HOST = "GPULEDGER_ROLLOUT_HOST"
ENV_ROLLOUT_PORT = "GPULEDGER_ROLLOUT_PORT"
ENV_TRAINER_HOST = "GPULEDGER_TRAINER_HOST"

#: The agent's `--key-fd`: the file descriptor the launcher passes the attempt's signing key on.
ENV_KEY_FD = "GPULEDGER_KEY_FD"
#: The key the agent signs its `RESULT_LINE_PREFIX` line with (the SkyPilot launcher makes one per job
#: and passes it as a task secret); the agent takes it out of its environment before the trial starts.
ENV_RESULT_KEY = "GPULEDGER_RESULT_KEY"
#: What follows the record's JSON on a signed result line, then the HMAC-SHA256 (hex) of the exact JSON
#: text: `GPULEDGER_RESULT {json} hmac-sha256=HEX` (a reader that ignores the rest of the line still
#: reads the record).
RESULT_SIGNATURE_PREFIX = "hmac-sha256="

#: The prefix of gpuledger's own variables: a spec's `task.env` may not set any of them.
LEDGER_ENV_PREFIX = "GPULEDGER_"
#: The variables a trial sees (set by the agent for its child): who it is and where its metrics go.
#: Everything else of gpuledger's (`is_ledger_env`) is removed from a trial's environment, so a trial
#: cannot name the warehouse, the landing folder, the sweep or its agent's result file.
#: A probe's stop rule is the trial's to honour (`gpuledger.track.log` reads it), so it is one of them.
TRIAL_ENV: tuple[str, ...] = (ENV_RUN_ID, ENV_TRIAL_ID, ENV_SWEEP_NAME, ENV_ATTEMPT, ENV_PARAMS, ENV_METRICS,
                              ENV_PROBE_STEPS, ENV_PROBE_SECONDS)
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
