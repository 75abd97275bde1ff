"""GRPO fine-tuning of a Hugging Face causal LM with TRL's GRPOTrainer, timed by role.

    python trainers/grpo.py --model Qwen/Qwen2.5-7B --dataset trl-lib/DeepMath-103K --prompt-field prompt \
        --group-size 8 --completion-len 1024 --micro-batch 8 --max-steps 200 --generation vllm_colocate --bf16

Install with `pip install -r trainers/requirements.txt trl` (vLLM too for `--generation vllm_*`). The
heavy libraries are imported only after the arguments are parsed, so `--help` works anywhere.

Rollouts: `--generation hf` (the trainer's own `generate`, any machine, the CPU included),
`vllm_colocate` (vLLM in the trainer's process, `--vllm-gpu-memory-utilization` of each GPU; `--vllm-sleep`
releases its memory between phases) or `vllm_server` (a `trl vllm-serve` process on GPUs of its own,
`--vllm-server-host/--vllm-server-port`, by default `$GPULEDGER_ROLLOUT_HOST`/`$GPULEDGER_ROLLOUT_PORT`: in a
SkyPilot job group the rollout task's host and port, gpuledger/launch/skypilot_group.py). Reward: a toy function, `length` (completions near
`--target-len` characters score 1, farther less) or `distinct` (the share of distinct characters):
replace `reward_funcs` with your verifier.

Reports through `gpuledger.track` (gpuledger/integrations/trl.py `track_roles`): every optimizer step
the seconds by role, `rl_rollout_s`, `rl_logprob_s`, `rl_reward_s`, `rl_train_s`, `rl_sync_s`,
`rl_step_s`, the step's `rl_generated_tokens` and `rl_rollout_tokens_per_s`, cumulative prompt +
completion `tokens` (a probe, `gpuledger probe`, measures its rate from them and stops the trainer);
and TRL's own logs (loss, reward, kl, completion lengths) every `--log-every` steps. Outside a sweep
the run is an ad-hoc run stored in the ledger when training ends.
"""

from __future__ import annotations

import argparse
import os
import sys

GENERATIONS = ("hf", "vllm_colocate", "vllm_server")
REWARDS = ("length", "distinct")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="GRPO fine-tuning with TRL's GRPOTrainer, timed by role.")
    p.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct", help="HF model id or local path")
    p.add_argument("--dataset", default="trl-lib/DeepMath-103K",
                   help="HF dataset id, or a local .json/.jsonl/.csv/.parquet file of prompts")
    p.add_argument("--dataset-config", default=None)
    p.add_argument("--prompt-field", default="prompt", help="column with the prompt text")
    p.add_argument("--group-size", type=int, default=8, help="completions per prompt (num_generations)")
    p.add_argument("--completion-len", type=int, default=256, help="max_completion_length (tokens)")
    p.add_argument("--micro-batch", type=int, default=8,
                   help="completions per GPU per micro-step (per_device_train_batch_size; a multiple of the "
                        "group size across GPUs)")
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=200)
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--beta", type=float, default=0.04, help="KL weight; 0 drops the reference model")
    p.add_argument("--num-iterations", type=int, default=1, help="policy updates per generation (mu)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--reward", choices=REWARDS, default="length")
    p.add_argument("--target-len", type=int, default=64, help="the length reward's target, in characters")
    p.add_argument("--generation", choices=GENERATIONS, default="hf")
    p.add_argument("--vllm-gpu-memory-utilization", type=float, default=0.3)
    p.add_argument("--vllm-sleep", action=argparse.BooleanOptionalAction, default=False,
                   help="vllm_colocate: sleep mode (the engine's memory released while the trainer steps)")
    # a SkyPilot job group's trainer task reaches the rollout task's server by these (gpuledger/launch/skypilot_group.py)
    p.add_argument("--vllm-server-host", default=os.environ.get("GPULEDGER_ROLLOUT_HOST") or "127.0.0.1",
                   help="the vLLM server's host (default: $GPULEDGER_ROLLOUT_HOST, else 127.0.0.1)")
    p.add_argument("--vllm-server-port", type=int, default=int(os.environ.get("GPULEDGER_ROLLOUT_PORT") or 8000),
                   help="its port (default: $GPULEDGER_ROLLOUT_PORT, else 8000)")
    p.add_argument("--lora-r", type=int, default=0, help="> 0: a LoRA policy of this rank (PEFT), else full")
    p.add_argument("--log-every", type=int, default=1)
    p.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--grad-ckpt", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--cpu", action="store_true", help="train on the CPU even where CUDA is present")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output-dir", default="grpo-out", help="TRL's output_dir (the model is saved there at the end)")
    p.add_argument("--no-save", action="store_true", help="do not save the model at the end")
    return p


def reward_length(target: int):
    """The toy reward: 1 for a completion of `target` characters, falling linearly to 0 at 0 or 2x target."""

    def reward(completions, **_):
        return [max(0.0, 1.0 - abs(len(_text(c)) - target) / target) for c in completions]

    reward.__name__ = "reward_length"
    return reward


def reward_distinct(completions, **_):
    """The toy reward: the share of distinct characters in the completion (0 for an empty one)."""
    return [len(set(t)) / len(t) if (t := _text(c)) else 0.0 for c in completions]


def _text(completion) -> str:
    """A completion's text: a string (standard prompts) or the last message's content (chat prompts)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content") or "")
    return str(completion)


def _dataset(args):
    from datasets import load_dataset

    source = args.dataset
    for suffix, kind in ((".jsonl", "json"), (".json", "json"), (".csv", "csv"), (".parquet", "parquet")):
        if source.endswith(suffix):
            ds = load_dataset(kind, data_files=source, split="train")
            break
    else:
        ds = load_dataset(source, args.dataset_config, split="train")
    if args.prompt_field not in ds.column_names:
        raise SystemExit(f"grpo: the dataset {source} has no column {args.prompt_field!r} "
                         f"(it has {', '.join(ds.column_names)}): pass --prompt-field")
    if args.prompt_field != "prompt":
        ds = ds.rename_column(args.prompt_field, "prompt")
    return ds


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from gpuledger.integrations.trl import track_roles

    use_cpu = args.cpu or not torch.cuda.is_available()
    if use_cpu and args.generation != "hf":
        print(f"grpo: --generation {args.generation} needs CUDA GPUs; on the CPU use --generation hf", file=sys.stderr)
        return 2
    vllm = {}
    if args.generation != "hf":
        vllm = {"use_vllm": True, "vllm_mode": args.generation.removeprefix("vllm_")}
        if args.generation == "vllm_colocate":
            vllm.update(vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization,
                        vllm_enable_sleep_mode=args.vllm_sleep)
        else:
            vllm.update(vllm_server_host=args.vllm_server_host, vllm_server_port=args.vllm_server_port)
    config = GRPOConfig(
        output_dir=args.output_dir, max_steps=args.max_steps, learning_rate=args.lr,
        per_device_train_batch_size=args.micro_batch, gradient_accumulation_steps=args.grad_accum,
        num_generations=args.group_size, max_completion_length=args.completion_len, beta=args.beta,
        num_iterations=args.num_iterations, temperature=args.temperature, logging_steps=args.log_every,
        bf16=args.bf16 and not use_cpu, gradient_checkpointing=args.grad_ckpt, use_cpu=use_cpu, seed=args.seed,
        save_strategy="no", report_to="none", disable_tqdm=True, dataloader_num_workers=0, **vllm)
    peft_config = None
    if args.lora_r > 0:
        from peft import LoraConfig

        peft_config = LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, target_modules="all-linear",
                                 task_type="CAUSAL_LM")
    trainer = GRPOTrainer(model=args.model, reward_funcs=[reward_length(args.target_len) if args.reward == "length"
                                                          else reward_distinct],
                          args=config, train_dataset=_dataset(args), peft_config=peft_config)
    track_roles(trainer, name=f"grpo-{args.model.rstrip('/').rsplit('/', 1)[-1]}")
    trainer.train()
    if not args.no_save:
        trainer.save_model(args.output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
