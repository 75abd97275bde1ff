"""The PEFT trainer's training loop for real, on the CPU: a tiny randomly initialised Llama with LoRA
adapters (transformers + peft, the optional `peft` extra; skipped with a message without them). It
learns, reports cumulative tokens every step through gpuledger.track, and a probe's step limit ends it
cleanly."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gpuledger import protocol, track

REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "gpuledger" / "scaffold" / "trainers" / "peft_lora.py"

missing = [m for m in ("torch", "transformers", "peft") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(missing), reason=(
    f"{', '.join(missing)} not installed: the PEFT loop test needs the optional extra "
    "(`uv pip install --find-links /opt/wheels torch==2.13.0+cpu transformers peft`, or `pip install -e .[peft]`; "
    "uv sync would fetch a CUDA build of torch, several GB, so the default sync leaves it out)"))


def _trainer():
    spec = importlib.util.spec_from_file_location("peft_lora_trainer", TRAINER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny_lora_model():
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaForCausalLM(cfg)  # random weights: nothing downloaded
    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"],
                                            task_type="CAUSAL_LM"))


def _batches(micro_batch: int = 4, seq_len: int = 16):
    """A learnable stream: each sequence counts up from a random start (mod 64), one padding token at the end."""
    import torch

    g = torch.Generator().manual_seed(1)
    while True:
        start = torch.randint(0, 64, (micro_batch, 1), generator=g)
        ids = (start + torch.arange(seq_len)) % 64
        mask = torch.ones_like(ids)
        mask[:, -1] = 0
        labels = ids.clone()
        labels[mask == 0] = -100
        yield {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _run(module, steps: int, log):
    import torch
    from transformers import get_constant_schedule

    model = _tiny_lora_model()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    final = module.train_loop(model, _batches(), opt=opt, sched=get_constant_schedule(opt), device=torch.device("cpu"),
                              max_steps=steps, log_every=5, eval_every=10**9, log=log)
    changed = any(not torch.equal(before[n], p) for n, p in model.named_parameters() if p.requires_grad)
    frozen = all(not p.requires_grad for n, p in model.named_parameters() if "lora_" not in n)
    return final, changed, frozen


def test_the_loop_learns_and_reports_tokens_every_step():
    module = _trainer()
    points: list[tuple[int, dict]] = []
    final, changed, frozen = _run(module, 30, lambda step=None, **m: points.append((step, m)))
    assert changed and frozen  # only the adapters train
    per_step = {s: m["tokens"] for s, m in points if "tokens" in m and s is not None and s >= 1}
    assert sorted(per_step) == list(range(1, 31))
    assert all(per_step[s] == s * 4 * 15 for s in per_step)  # 4 sequences of 15 non-padding tokens a step
    losses = [m["train_loss"] for _, m in points if "train_loss" in m]
    assert losses[-1] < losses[0] - 0.05  # it learns (the adapters alone, on a random base: slowly)
    assert final["tokens"] == 30 * 60 and "torch_max_memory_allocated_gib" not in final  # no CUDA: no torch peak


def test_a_probe_limit_ends_the_loop_cleanly(monkeypatch, tmp_path):
    module = _trainer()
    metrics = tmp_path / "metrics.jsonl"
    monkeypatch.setenv(protocol.ENV_METRICS, str(metrics))
    monkeypatch.setenv(protocol.ENV_PROBE_STEPS, "7")
    monkeypatch.setitem(track._probe_seen, "steps", set())
    monkeypatch.setitem(track._probe_seen, "first_time", None)
    with pytest.raises(SystemExit) as stop:
        _run(module, 1000, None)
    assert stop.value.code == 0
    steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines()
             if json.loads(line)["name"] == "tokens"]
    assert steps == list(range(1, 8))
