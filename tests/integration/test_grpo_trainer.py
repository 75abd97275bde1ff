"""The scaffold GRPO trainer (trainers/grpo.py, TRL's GRPOTrainer) for real, on the CPU: a tiny
random-weight Llama and a character-level tokenizer written to a folder (nothing downloaded), rollouts
through the trainer's own `generate`, a toy reward, run under the measuring agent as a sweep's trial is; its per-role
timings (gpuledger/integrations/trl.py) land in the ledger as the run's metrics. Skipped with a message without torch/transformers/trl."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuledger.protocol import (
    RL_GENERATED_TOKENS_METRIC,
    RL_ROLE_METRICS,
    RL_ROLLOUT_RATE_METRIC,
    RL_STEP_METRIC,
)

REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "gpuledger" / "scaffold" / "trainers" / "grpo.py"
STEPS, GROUP, MICRO_BATCH, COMPLETION = 3, 2, 4, 8

missing = [m for m in ("torch", "transformers", "trl", "datasets") if importlib.util.find_spec(m) is None]
needs_trl = pytest.mark.skipif(bool(missing), reason=(
    f"{', '.join(missing)} not installed: the GRPO trainer test needs the optional `peft` extra with TRL "
    "(`make torch-cpu`, or `uv pip install --find-links /opt/wheels torch==2.13.0+cpu transformers peft trl`)"))


def tiny_model_dir(folder: Path) -> Path:
    """Writes a random-weight 1-layer Llama and a character-level fast tokenizer to `folder`."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    chars = "abcdefghijklmnopqrstuvwxyz ?"
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{c: i + 3 for i, c in enumerate(chars)}}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>",
                                  padding_side="left")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                      pad_token_id=0, eos_token_id=1, bos_token_id=1)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def prompts_file(path: Path, n: int = 32) -> Path:
    words = ["count to three", "say hello", "what is two", "spell cat", "name a colour", "why is the sky"]
    path.write_text("".join(json.dumps({"question": words[i % len(words)]}) + "\n" for i in range(n)),
                    encoding="utf-8")
    return path


def trainer_command(tmp_path: Path, steps: int = STEPS) -> list[str]:
    return [sys.executable, str(TRAINER), "--model", str(tiny_model_dir(tmp_path / "tiny")),
            "--dataset", str(prompts_file(tmp_path / "prompts.jsonl")), "--prompt-field", "question",
            "--group-size", str(GROUP), "--micro-batch", str(MICRO_BATCH), "--completion-len", str(COMPLETION),
            "--max-steps", str(steps), "--target-len", "6", "--cpu", "--no-save",
            "--output-dir", str(tmp_path / "out")]


def test_help_works_without_the_heavy_libraries():
    proc = subprocess.run([sys.executable, str(TRAINER), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for option in ("--model", "--group-size", "--completion-len", "--generation", "--vllm-sleep", "--reward"):
        assert option in proc.stdout


def test_rewards_score_what_they_say():
    spec = importlib.util.spec_from_file_location("grpo_trainer", TRAINER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.reward_length(4)(["abcd", "ab", "", "abcdefgh", [{"role": "assistant", "content": "abcd"}]]) \
        == [1.0, 0.5, 0.0, 0.0, 1.0]
    assert module.reward_distinct(["aaaa", "abcd", ""]) == [0.25, 1.0, 0.0]


@needs_trl
def test_grpo_on_the_cpu_under_the_agent_lands_its_role_timings_in_the_ledger(tmp_path):
    from gpuledger.api import Ledger
    from gpuledger.warehouse import Warehouse

    sid, tid = "grpo-cpu-0000beef", "t0grpo000000"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(REPO)}
    env.pop("GPULEDGER_METRICS", None)
    result = tmp_path / "result.json"
    agent = [sys.executable, "-m", "gpuledger.agent", "--result", str(result), "--trial-id", tid,
             "--run-id", f"{tid}-a1-x", "--sweep-id", sid, "--"]
    proc = subprocess.run(agent + trainer_command(tmp_path), capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(result.read_text())
    assert record["status"] == "succeeded"
    with Warehouse.open() as wh:  # the sweep and its trial registered, as a sweep's launch does
        wh.register_sweep(sweep_id=sid, name="grpo-cpu", method="grpo", model="tiny-llama", launcher="local",
                          objective_metric="reward", objective_goal="maximize")
        wh.upsert_trials(sid, [{"trial_id": tid, "index": 0, "params": {}, "feasible": True, "status": "pending"}])
        wh.ingest_records([record])
    runs = Ledger().runs()
    run = runs.filter(runs["run_id"] == record["run_id"]).row(0, named=True)
    assert run["status"] == "succeeded" and run["wall_s"] > 0
    points = Ledger().sql(f"select name, step, value from metrics where run_id = '{run['run_id']}'")
    by_name: dict[str, dict[int, float]] = {}
    for name, step, value in points.rows():
        by_name.setdefault(name, {})[step] = value
    roles = [*RL_ROLE_METRICS.values(), RL_STEP_METRIC, RL_GENERATED_TOKENS_METRIC]
    for name in roles:
        assert sorted(by_name.get(name, {})) == list(range(1, STEPS + 1)), name
    for step in range(1, STEPS + 1):
        wall = by_name[RL_STEP_METRIC][step]
        parts = sum(by_name[m][step] for m in RL_ROLE_METRICS.values())
        assert parts == pytest.approx(wall, rel=1e-3, abs=1e-5)  # the roles add up to the step
        assert by_name["rl_rollout_s"][step] > 0 and by_name["rl_train_s"][step] > 0
        assert by_name["rl_logprob_s"][step] > 0  # beta > 0: the reference model's forward
        assert by_name["rl_reward_s"][step] > 0
        assert by_name["rl_sync_s"][step] == 0  # the trainer's own generate: nothing to sync
        # MICRO_BATCH completions a step, each 1..COMPLETION tokens
        assert MICRO_BATCH <= by_name[RL_GENERATED_TOKENS_METRIC][step] <= MICRO_BATCH * COMPLETION
        rate = by_name[RL_ROLLOUT_RATE_METRIC][step]
        assert rate == pytest.approx(by_name[RL_GENERATED_TOKENS_METRIC][step] / by_name["rl_rollout_s"][step],
                                     rel=1e-3)
    tokens = by_name["tokens"]  # prompt + completion tokens so far, TRL's own count: grows every step
    assert [tokens[s] for s in sorted(tokens)] == sorted(tokens.values()) and tokens[STEPS] > tokens[1] > 0
    assert "reward" in by_name  # TRL's own logs come through GpuledgerCallback too
