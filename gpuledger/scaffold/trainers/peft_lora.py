"""LoRA fine-tuning of a Hugging Face causal LM with PEFT, for cloud GPUs (the real workload).

    python trainers/peft_lora.py --model meta-llama/Llama-3.1-8B --dataset yahma/alpaca-cleaned \
        --lora-r 16 --lr 2e-4 --micro-batch 4 --seq-len 2048 --max-steps 500 --bf16

Install with `pip install -r trainers/requirements.txt` (the spec's `task.setup`). The heavy
libraries (torch, transformers, peft, datasets) are imported only after the arguments are parsed,
so `--help` works anywhere.

Reports through `gpuledger.track` (the agent collects them into the result record): cumulative
training `tokens` every step (a probe, `gpuledger probe`, measures its steady rate from them and is
stopped through `track.log`), `train_loss`, `lr`, `tokens_per_s` and `torch_max_memory_allocated_gib` /
`torch_max_memory_reserved_gib` (torch.cuda.max_memory_allocated / reserved, the `allocated` and
`reserved` levels the estimator predicts) on the first and every `--log-every` steps, `eval_loss`
every `--eval-every` steps and at the end, `trainable_params`, `total_params`. The loop is
`train_loop` (tested on a tiny random model on the CPU: tests/unit/test_peft_loop.py).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

GIB = 1024**3


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="LoRA fine-tuning with Hugging Face PEFT (cloud GPUs).")
    p.add_argument("--model", default="meta-llama/Llama-3.1-8B", help="HF model id or local path")
    p.add_argument("--dataset", default="yahma/alpaca-cleaned", help="HF dataset id or local path")
    p.add_argument("--dataset-config", default=None)
    p.add_argument("--text-field", default=None,
                   help="column with the text; default: 'text', else instruction/input/output joined")
    p.add_argument("--eval-fraction", type=float, default=0.02, help="held-out share of the training split")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-alpha", type=float, default=None, help="default: 2 * r")
    p.add_argument("--lora-dropout", type=float, default=0.05)
    p.add_argument("--lora-targets", default="q,v",
                   help="comma list of q,k,v,o,gate,up,down (or module names), or all-linear")
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--warmup-ratio", type=float, default=0.03)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--max-steps", type=int, default=500)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-batches", type=int, default=20)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--grad-ckpt", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--attn", default="sdpa", help="attn_implementation: sdpa | flash_attention_2 | eager")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output-dir", default=None, help="save the adapter here at the end")
    return p


_SHORT_TARGETS = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj",
                  "gate": "gate_proj", "up": "up_proj", "down": "down_proj"}


def _targets(text: str):
    if text.strip() == "all-linear":
        return "all-linear"
    return [_SHORT_TARGETS.get(t.strip(), t.strip()) for t in text.split(",") if t.strip()]


def _text_of(example: dict, field: str | None) -> str:
    if field:
        return str(example[field])
    if "text" in example:
        return str(example["text"])
    parts = [str(example.get(k) or "") for k in ("instruction", "input", "output")]
    return "\n".join(p for p in parts if p)


def _forever(make_loader):
    """Yields the batches of `make_loader()` epoch after epoch."""
    while True:
        yield from make_loader()


def _memory_gib(torch, device) -> dict:
    """Returns torch's peak allocated / reserved GiB on a CUDA device (what the estimator's `allocated` and
    `reserved` levels predict), nothing on the CPU."""
    if device.type != "cuda":
        return {}
    return {"torch_max_memory_allocated_gib": torch.cuda.max_memory_allocated(device) / GIB,
            "torch_max_memory_reserved_gib": torch.cuda.max_memory_reserved(device) / GIB}


def train_loop(model, batches, *, opt, sched, device, max_steps: int, grad_accum: int = 1, log_every: int = 10,
               eval_every: int = 100, evaluate=None, log=None, clip: float = 1.0) -> dict:
    """Runs `max_steps` optimizer steps over `batches` (an iterator of dicts of tensors with input_ids,
    attention_mask, labels); returns the final metrics (eval_loss, tokens, wall_train_s, memory on CUDA).

    Reports through `log` (gpuledger.track.log): every step its cumulative training `tokens` (non-padding
    tokens seen; what a probe measures its rate from, and where `gpuledger probe` stops it), every
    `log_every` steps (and the first) train_loss, lr, tokens_per_s and torch's peak memory, every
    `eval_every` steps and at the end eval_loss (`evaluate()`, when given)."""
    import torch

    from gpuledger import track

    log = log or track.log
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    model.train()
    step, tokens, t0 = 0, 0, time.time()
    running: list[float] = []
    eval_loss = math.nan
    while step < max_steps:
        for _ in range(grad_accum):
            batch = {k: v.to(device) for k, v in next(batches).items()}
            tokens += int(batch["attention_mask"].sum())
            loss = model(**batch).loss / grad_accum
            loss.backward()
            running.append(loss.float().item() * grad_accum)
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], clip)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        point = {"tokens": tokens}
        if step == 1 or step % log_every == 0 or step == max_steps:
            point.update(train_loss=sum(running) / len(running), lr=sched.get_last_lr()[0],
                         tokens_per_s=tokens / max(1e-9, time.time() - t0), **_memory_gib(torch, device))
            running = []
        log(step=step, **point)
        if evaluate is not None and (step % eval_every == 0 or step == max_steps):
            eval_loss = evaluate()
            log(step=step, eval_loss=eval_loss)
    final = {"eval_loss": eval_loss, "tokens": tokens, "wall_train_s": time.time() - t0, **_memory_gib(torch, device)}
    log(step=step, **final)
    return final


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch
    from datasets import load_dataset
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, get_cosine_schedule_with_warmup

    from gpuledger import track  # installed in the job: its agent (python -m gpuledger.agent) measures this

    torch.manual_seed(args.seed)
    if not torch.cuda.is_available():
        print("peft_lora: no CUDA device; this trainer is for GPU jobs (use gpuledger/trainers/demo_lora.py on CPU)",
              file=sys.stderr)
        return 2
    device = torch.device("cuda")
    dtype = torch.bfloat16 if args.bf16 else torch.float32

    tok = AutoTokenizer.from_pretrained(args.model)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype, attn_implementation=args.attn)
    model.to(device)
    if args.grad_ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    lora = LoraConfig(r=args.lora_r, lora_alpha=args.lora_alpha or 2 * args.lora_r, lora_dropout=args.lora_dropout,
                      target_modules=_targets(args.lora_targets), task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    track.log(step=0, trainable_params=trainable, total_params=total)

    raw = load_dataset(args.dataset, args.dataset_config, split="train")
    raw = raw.train_test_split(test_size=args.eval_fraction, seed=args.seed)

    def tokenize(batch):
        keys = list(batch.keys())
        rows = [dict(zip(keys, vals, strict=True)) for vals in zip(*batch.values(), strict=True)]
        texts = [_text_of(r, args.text_field) + (tok.eos_token or "") for r in rows]
        return tok(texts, truncation=True, max_length=args.seq_len)

    cols = raw["train"].column_names
    train = raw["train"].map(tokenize, batched=True, remove_columns=cols)
    evals = raw["test"].map(tokenize, batched=True, remove_columns=cols)

    def loader(ds, shuffle: bool):
        def collate(rows):
            batch = tok.pad({"input_ids": [r["input_ids"] for r in rows]}, return_tensors="pt")
            labels = batch["input_ids"].clone()
            labels[batch["attention_mask"] == 0] = -100
            batch["labels"] = labels
            return batch

        return torch.utils.data.DataLoader(ds, batch_size=args.micro_batch, shuffle=shuffle, collate_fn=collate)

    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr,
                            weight_decay=args.weight_decay)
    sched = get_cosine_schedule_with_warmup(opt, int(args.warmup_ratio * args.max_steps), args.max_steps)

    def evaluate() -> float:
        model.eval()
        losses = []
        with torch.no_grad():
            for i, batch in enumerate(loader(evals, shuffle=False)):
                if i >= args.eval_batches:
                    break
                batch = {k: v.to(device) for k, v in batch.items()}
                losses.append(model(**batch).loss.float().item())
        model.train()
        return sum(losses) / max(1, len(losses))

    batches = _forever(lambda: loader(train, shuffle=True))
    final = train_loop(model, batches, opt=opt, sched=sched, device=device, max_steps=args.max_steps,
                       grad_accum=args.grad_accum, log_every=args.log_every, eval_every=args.eval_every,
                       evaluate=evaluate, log=track.log)
    eval_loss = final["eval_loss"]
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
        model.save_pretrained(args.output_dir)
    return 0 if math.isfinite(eval_loss) else 1


if __name__ == "__main__":
    sys.exit(main())
