"""The demo workload: LoRA adaptation of a tiny character-level GPT-2, numpy only, on one CPU core.

    python -m gpuledger.trainers.demo_lora --lora-r 16 --lr 3e-2 --micro-batch 8 [--steps N] [--seq-len T]
    python -m gpuledger.trainers.demo_lora --prepare-base      # pretrain + cache the base only (before a sweep)

1. The base model (architecture: `gpuledger/models/configs/gpuledger__demo-char-gpt.json`, a GPT-2
   config the estimator counts exactly) is pretrained once on the story corpus of
   `gpuledger/trainers/make_corpus.py` and cached under `$GPULEDGER_CACHE_DIR`, else
   `$XDG_CACHE_HOME/gpuledger`, else `~/.cache/gpuledger`, as one `.npy` vector (float32, canonical
   parameter order). The file name carries a hash of everything that defines it; pretraining is
   single-threaded and seeded, so a re-creation gives the same bytes on the same machine. Two
   trials racing to create it serialise on a file lock, and the file appears by atomic rename.
2. LoRA adapters of rank r on every layer's `attn.c_attn` and `attn.c_proj` (A random, B zero,
   scale alpha/r) are trained by AdamW (cosine schedule, 10 % warm-up, global grad-norm clip 1.0)
   on the shifted corpus (kitchen instructions) with micro-batch B for a fixed budget of training
   tokens (`--tokens`, default 196,608; steps = tokens / (B·T) unless `--steps` is given).
3. It reports through `gpuledger.track`: `tokens` (cumulative training tokens) every step (a probe,
   `gpuledger probe`, measures its rate from them and stops it through `track.log`), `train_loss` (mean of the last 10 steps) and held-out
   `eval_loss` by step, and at the end `eval_loss` (final), `eval_loss_base` (step 0),
   `trainable_params`, `tokens`, `steps_per_s`.

Measured on the 2-core dev VM (deterministic on one machine; T=64, 196,608 tokens, alpha 16):

    final eval_loss      lr=1e-2 B=8   lr=1e-2 B=32   lr=3e-2 B=8   lr=3e-2 B=32   lr=6e-2 (B=8, 32)
    lora_r=4             1.2202        1.6369         1.2276        1.6986         2.903, 2.903
    lora_r=16            0.7983        1.2901         0.7559        1.2103         2.882, 3.014

(base model on the shifted eval set: 4.4846; peak RSS about 61 MiB at B=8, 120 MiB at B=32; one
trial 13-25 s on one core.) Rank and learning rate move the loss; micro-batch moves RSS, time
and loss (fewer, larger steps for the same tokens); 6e-2 is past the stable learning rate.

BLAS/OpenMP threads are set to `--threads` (default 1) before numpy is imported, so trials that
run side by side do not fight over the cores.
glibc's malloc is told to keep freed memory (`keep_freed_memory`): each step's temporaries were
otherwise mapped and unmapped every step (page faults, up to a third of a trial's CPU time).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG_PATH = HERE.parent / "models" / "configs" / "gpuledger__demo-char-gpt.json"

#: Pretraining recipe of the base model (part of the cache key).
PRETRAIN = {
    "corpus_chars": 400_000,  # make_corpus.base_corpus(corpus_chars, seed=corpus_seed)
    "corpus_seed": 0,
    "init_seed": 0,
    "data_seed": 0,
    "steps": 500,
    "batch": 16,
    "seq_len": 64,
    "lr": 3e-3,
    "warmup": 25,
    "weight_decay": 0.01,
    "clip": 1.0,
    "version": 1,
}
ADAPT_TRAIN_CHARS = 200_000
ADAPT_EVAL_CHARS = 40_000
EVAL_SEQS = 64


def cache_dir() -> Path:
    """Returns where the pretrained base lives (created if missing)."""
    root = os.environ.get("GPULEDGER_CACHE_DIR")
    if root:
        path = Path(root)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        path = (Path(xdg) if xdg else Path.home() / ".cache") / "gpuledger"
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_hf_config(path: Path = CONFIG_PATH) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def model_config(hf: dict):
    from gpuledger.trainers.tinygpt import Config

    return Config(vocab_size=hf["vocab_size"], n_positions=hf["n_positions"], n_embd=hf["n_embd"],
                  n_layer=hf["n_layer"], n_head=hf["n_head"])


def _cosine_lr(step: int, steps: int, lr: float, warmup: int, floor: float = 0.1) -> float:
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def _batches(tokens, batch: int, seq_len: int, rng):
    """Yields (inputs, targets) of random windows of the token array, forever."""
    import numpy as np

    n = len(tokens) - seq_len - 1
    while True:
        starts = rng.integers(0, n, batch)
        window = np.stack([tokens[s:s + seq_len + 1] for s in starts])
        yield window[:, :-1], window[:, 1:]


def pretrain(cfg, recipe: dict = PRETRAIN, log=None):
    """Returns the base parameters trained from scratch on the base corpus (deterministic)."""
    import numpy as np

    from gpuledger.trainers.make_corpus import base_corpus, encode
    from gpuledger.trainers.tinygpt import AdamW, Model, clip_grads, init_params

    params = init_params(cfg, recipe["init_seed"])
    model = Model(cfg, params)
    tokens = np.frombuffer(encode(base_corpus(recipe["corpus_chars"], seed=recipe["corpus_seed"])), np.uint8).astype(np.int64)
    rng = np.random.default_rng(recipe["data_seed"])
    opt = AdamW(params, recipe["lr"], weight_decay=recipe["weight_decay"])
    batches = _batches(tokens, recipe["batch"], recipe["seq_len"], rng)
    for step in range(recipe["steps"]):
        x, y = next(batches)
        loss, cache = model.forward(x, y)
        grads = model.backward(cache, grad_base=True)
        clip_grads(grads, recipe["clip"])
        opt.step(grads, _cosine_lr(step, recipe["steps"], recipe["lr"], recipe["warmup"]))
        if log and (step % 100 == 0 or step == recipe["steps"] - 1):
            log(f"pretrain step {step}: loss {loss:.4f}")
    return params


def base_cache_path(hf: dict, recipe: dict | None = None) -> Path:
    """Returns the cache file of the base model defined by (config, recipe, corpus text, tinygpt.py)."""
    import numpy as np

    from gpuledger.trainers.make_corpus import base_corpus

    recipe = pretrain_recipe() if recipe is None else recipe
    h = hashlib.sha256()
    h.update(json.dumps(hf, sort_keys=True).encode())
    h.update(json.dumps(recipe, sort_keys=True).encode())
    h.update(base_corpus(recipe["corpus_chars"], seed=recipe["corpus_seed"]).encode())
    h.update((HERE / "tinygpt.py").read_bytes())
    h.update(np.__version__.split(".")[0].encode())
    return cache_dir() / f"demo-char-gpt-base-{h.hexdigest()[:16]}.npy"


def pretrain_recipe() -> dict:
    """Returns PRETRAIN, with `steps` from GPULEDGER_DEMO_PRETRAIN_STEPS when set (tests use a tiny base)."""
    steps = os.environ.get("GPULEDGER_DEMO_PRETRAIN_STEPS")
    return {**PRETRAIN, "steps": int(steps)} if steps else dict(PRETRAIN)


def load_or_pretrain_base(cfg, hf: dict, recipe: dict | None = None, log=None):
    """Returns the base parameters: from the cache, else pretrained now (once, under a lock)."""
    recipe = pretrain_recipe() if recipe is None else recipe
    import fcntl

    import numpy as np

    from gpuledger.trainers.tinygpt import flatten, unflatten

    path = base_cache_path(hf, recipe)
    if not path.exists():
        with open(path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a racing trial waits here, then finds the file
            if not path.exists():
                t0 = time.time()
                params = pretrain(cfg, recipe, log=log)
                tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
                with open(tmp, "wb") as fh:
                    np.save(fh, flatten(params, cfg).astype(np.float32))
                os.replace(tmp, path)
                if log:
                    log(f"pretrained the base in {time.time() - t0:.1f} s -> {path}")
    vec = np.load(path)
    return {k: v.copy() for k, v in unflatten(vec, cfg).items()}


def adapt(cfg, base, *, lora_r: int, lr: float, micro_batch: int, steps: int, seq_len: int, seed: int,
          lora_alpha: float, eval_every: int, report, log=None) -> dict:
    """Trains LoRA adapters on the shifted corpus; returns the final metrics."""
    import numpy as np

    from gpuledger.trainers.make_corpus import encode, shifted_corpus
    from gpuledger.trainers.tinygpt import AdamW, Model, clip_grads, init_lora

    train_tokens = np.frombuffer(encode(shifted_corpus(ADAPT_TRAIN_CHARS, seed=1)), np.uint8).astype(np.int64)
    eval_tokens = np.frombuffer(encode(shifted_corpus(ADAPT_EVAL_CHARS, seed=2)), np.uint8).astype(np.int64)
    stride = (len(eval_tokens) - seq_len - 1) // EVAL_SEQS
    ev = np.stack([eval_tokens[i * stride:i * stride + seq_len + 1] for i in range(EVAL_SEQS)])
    ev_x, ev_y = ev[:, :-1], ev[:, 1:]

    lora = init_lora(cfg, lora_r, seed)
    model = Model(cfg, base, lora, lora_alpha=lora_alpha)
    opt = AdamW(lora, lr, weight_decay=0.0)
    rng = np.random.default_rng(seed + 1000)
    batches = _batches(train_tokens, micro_batch, seq_len, rng)
    warmup = max(1, steps // 10)

    def evaluate() -> float:
        total = 0.0
        for i in range(0, EVAL_SEQS, 16):  # in chunks: eval memory does not depend on the trial
            loss, _ = model.forward(ev_x[i:i + 16], ev_y[i:i + 16], keep=False)
            total += loss * len(ev_x[i:i + 16])
        return total / EVAL_SEQS

    base_eval = evaluate()
    report(step=0, eval_loss=base_eval)
    recent: list[float] = []
    t0 = time.time()
    eval_loss = base_eval
    for step in range(1, steps + 1):
        x, y = next(batches)
        loss, cache = model.forward(x, y)
        grads = model.backward(cache, grad_base=False)
        del cache
        clip_grads(grads, 1.0)
        opt.step(grads, _cosine_lr(step - 1, steps, lr, warmup))
        recent.append(loss)
        if not math.isfinite(loss):
            break
        progress = {"tokens": step * micro_batch * seq_len}  # cumulative: what a probe's rate is measured from
        if step % 10 == 0 or step == steps:
            progress["train_loss"] = sum(recent[-10:]) / len(recent[-10:])
        report(step=step, **progress)
        if step % eval_every == 0 or step == steps:
            eval_loss = evaluate()
            report(step=step, eval_loss=eval_loss)
            if log:
                log(f"step {step}/{steps}: train {recent[-1]:.4f} eval {eval_loss:.4f}")
    elapsed = time.time() - t0
    return {
        "eval_loss": eval_loss,
        "eval_loss_base": base_eval,
        "trainable_params": int(sum(a.size for a in lora.values())),
        "tokens": steps * micro_batch * seq_len,
        "steps_per_s": steps / elapsed if elapsed > 0 else 0.0,
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="LoRA adaptation of a tiny char-level GPT-2 (numpy, one core).")
    p.add_argument("--lora-r", type=int, default=8, help="adapter rank (default 8)")
    p.add_argument("--lora-alpha", type=float, default=16.0, help="adapter scale numerator (default 16)")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate of AdamW (default 3e-3)")
    p.add_argument("--micro-batch", type=int, default=8, help="sequences per step (default 8)")
    p.add_argument("--seq-len", type=int, default=64, help="tokens per sequence (default 64, at most 64)")
    p.add_argument("--tokens", type=int, default=196_608, help="training tokens (default 196,608)")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (default: tokens / (B*T))")
    p.add_argument("--eval-every", type=int, default=None, help="steps between evals (default steps/16: often enough for ASHA to prune early)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--prepare-base", action="store_true",
                   help="only make sure the pretrained base is cached (pretrain it if not), then exit")
    return p


#: glibc's mallopt parameters (malloc.h): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_memory() -> bool:
    """Tells glibc's malloc to keep the memory numpy frees for the next step instead of returning it
    to the kernel: each step allocates and frees the same few MiB of activations and gradients, and
    by default those above the mmap threshold are mapped and unmapped, and the heap's top trimmed,
    every time (page faults: 5.4 of 17.9 CPU-s of a B=32 trial were the kernel's, 0.2 s with this;
    docs/measurements.md). Peak RSS is unchanged (the same arrays live at once). Returns whether it
    applied (not on a C library without mallopt, e.g. musl or macOS: nothing else changes)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    # 32 MiB: glibc's largest mmap threshold on 64-bit; larger arrays are still mapped
    return bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    keep_freed_memory()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                "NUMEXPR_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    from gpuledger import track

    hf = load_hf_config()
    cfg = model_config(hf)
    if not 1 <= args.seq_len <= cfg.n_positions:
        print(f"demo_lora: --seq-len must be in 1..{cfg.n_positions}", file=sys.stderr)
        return 2
    if args.lora_r < 1 or args.micro_batch < 1 or args.lr <= 0:
        print("demo_lora: --lora-r and --micro-batch must be >= 1 and --lr > 0", file=sys.stderr)
        return 2
    steps = args.steps or max(1, args.tokens // (args.micro_batch * args.seq_len))
    eval_every = args.eval_every or max(1, steps // 16)

    def log(msg: str) -> None:
        if not args.quiet:
            print(f"demo_lora: {msg}", file=sys.stderr, flush=True)

    t0 = time.time()
    base = load_or_pretrain_base(cfg, hf, log=log)
    if args.prepare_base:
        print(base_cache_path(hf), flush=True)
        return 0
    log(f"base ready in {time.time() - t0:.1f} s; adapting r={args.lora_r} lr={args.lr:g} "
        f"B={args.micro_batch} T={args.seq_len} for {steps} steps")
    final = adapt(cfg, base, lora_r=args.lora_r, lr=args.lr, micro_batch=args.micro_batch, steps=steps,
                  seq_len=args.seq_len, seed=args.seed, lora_alpha=args.lora_alpha, eval_every=eval_every,
                  report=track.log, log=log)
    track.log(step=steps, **final)
    print(json.dumps({"final": final}), flush=True)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    return 0 if math.isfinite(final["eval_loss"]) else 1


if __name__ == "__main__":
    sys.exit(main())
