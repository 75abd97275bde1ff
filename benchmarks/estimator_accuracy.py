"""Estimator accuracy against third-party measurements (`../shared/reference/memory_calibration.csv`).

For every row that names a peak: the estimate at the level the source measured (allocated for
torch.cuda.max_memory_allocated, reserved for max_memory_reserved / torchtune's peak, device for
nvidia-smi), the error, and the median |error|. Rows that state fit / OOM / capacity are checked
for the fit decision. Run: `python benchmarks/estimator_accuracy.py [CSV]`.

How each row maps to a Workload is written out in ROWS below (what the source states: model,
method, precision, batch, sequence, checkpointing, LoRA, GPUs, the training code); nothing is
tuned per row.
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuledger.estimate import Workload, estimate  # noqa: E402
from gpuledger.estimate.public import memory_workload as public_workload  # noqa: E402


def shared_dir() -> Path:
    """Returns the shared folder next to the repository (../shared), also from a git worktree of it
    (whose .git file names the main checkout: <main>/.git/worktrees/<name>)."""
    here = ROOT.parent / "shared"
    git = ROOT / ".git"
    if here.is_dir() or not git.is_file():
        return here
    gitdir = Path(git.read_text(encoding="utf-8").split(":", 1)[1].strip())
    return gitdir.parents[2].parent / "shared"


DEFAULT_CSV = shared_dir() / "reference" / "memory_calibration.csv"
#: held-out public measurements, one Workload per row in its own columns (tests/data/memory_public.csv)
PUBLIC_CSV = ROOT / "tests" / "data" / "memory_public.csv"
GB = 1e9
GIB = 2**30

# Alpaca's longest sample: 1044 tokens with the phi-1.5 tokenizer, 1304 with Llama-2's (lit-gpt's
# table states both); the peak step is the one with the longest sample (padded to it).
_L2 = "meta-llama/Llama-2-7b-hf"
ROWS: dict[str, dict] = {
    "litgpt_ft_1": dict(model="microsoft/phi-1_5", method="lora", precision="bf16", micro_batch=1, seq_len=1044,
                        grad_ckpt=False, lora_r=8, lora_targets="q,v", framework="litgpt"),
    "litgpt_ft_2": dict(model="microsoft/phi-1_5", method="lora", precision="bf16", micro_batch=4, seq_len=1044,
                        grad_ckpt=False, lora_r=8, lora_targets="q,v", framework="litgpt"),
    "litgpt_ft_5": dict(model=_L2, method="lora", precision="bf16", micro_batch=1, seq_len=1304,
                        grad_ckpt=False, lora_r=8, lora_targets="q,v", framework="litgpt"),
    "litgpt_ft_6": dict(model=_L2, method="lora", precision="bf16", micro_batch=2, seq_len=1304,
                        grad_ckpt=False, lora_r=8, lora_targets="q,v", framework="litgpt"),
    "litgpt_ft_7": dict(model=_L2, method="lora", precision="bf16", micro_batch=4, seq_len=1304,
                        grad_ckpt=False, lora_r=8, lora_targets="q,v", framework="litgpt"),
    "litgpt_ft_8": dict(model=_L2, method="qlora", precision="nf4", micro_batch=1, seq_len=1304,
                        grad_ckpt=False, lora_r=8, lora_targets="q,v", framework="litgpt"),
    "litgpt_multi_1": dict(model=_L2, method="lora", precision="bf16", micro_batch=1, seq_len=1304,
                           grad_ckpt=False, lora_r=8, lora_targets="q,v", gpus=2, sharding="fsdp",
                           framework="litgpt"),
    # generate.py: a one-line prompt and max_new_tokens=50
    "litgpt_inf_1": dict(model=_L2, method="inference", precision="bf16", micro_batch=1, prompt_len=16,
                         completion_len=50, framework="litgpt"),
    "litgpt_inf_2": dict(model=_L2, method="inference", precision="nf4", micro_batch=1, prompt_len=16,
                         completion_len=50, framework="litgpt"),
    # torchtune (April 2024): alpaca_dataset / alpaca_cleaned_dataset truncate at max_seq_len=512
    # by default ("as set by Stanford Alpaca"), so the longest sample counts 512 tokens
    "torchtune_lora7b_1": dict(model=_L2, method="lora", precision="bf16", micro_batch=2, seq_len=512,
                               grad_ckpt=True, lora_r=8, lora_targets="q,v", framework="torchtune"),
    "torchtune_lora7b_3": dict(model=_L2, method="lora", precision="bf16", micro_batch=2, seq_len=512,
                               grad_ckpt=True, lora_r=64, lora_targets="q,v", framework="torchtune"),
    "torchtune_readme2404_1": dict(model=_L2, method="lora", precision="bf16", micro_batch=2, seq_len=512,
                                   grad_ckpt=False, lora_r=8, lora_targets="q,v", gpus=2, sharding="fsdp",
                                   framework="torchtune"),
    # The table's 16.2 GiB cannot hold 2 x 2048 tokens: bf16 weights (14.96 GiB) + the bf16 logits
    # of 4096 tokens x 128,256 vocab (0.98 GiB) + 32 block checkpoints (1.0 GiB) are 16.9 GiB before
    # any recompute. It fits one packed 2048-token sequence per step, which is what we estimate.
    "torchtune_readme2409_3": dict(model="meta-llama/Llama-3.1-8B", method="lora", precision="bf16", micro_batch=1,
                                   seq_len=2048, grad_ckpt=True, lora_r=8, lora_targets="q,v",
                                   framework="torchtune", compile=True),
    # TRL: per_device_train_batch_size=4 completions (1 prompt x 4), bf16=True = autocast over an
    # fp32-loaded model (GRPOTrainer loads torch_dtype=None -> fp32), reference model kept (beta>0)
    "trl_grpo_1": dict(model="Qwen/Qwen3-0.6B", method="grpo", precision="bf16-mixed", micro_batch=1, group_size=4,
                       prompt_len=2048, completion_len=1024, grad_ckpt=False, framework="hf"),
    "unsloth_ctx_1": dict(model="meta-llama/Llama-3.1-8B-Instruct", method="qlora", precision="nf4", micro_batch=1,
                          seq_len=5789, grad_ckpt=True, lora_r=32, lora_targets="all-linear", framework="hf"),
    "unsloth_ctx_4": dict(model="meta-llama/Llama-3.1-8B-Instruct", method="qlora", precision="nf4", micro_batch=1,
                          seq_len=1024, grad_ckpt=True, lora_r=32, lora_targets="all-linear", framework="hf"),
    "qlora_paper_65b": dict(model="huggyllama/llama-65b", method="qlora", precision="nf4", micro_batch=1,
                            seq_len=512, grad_ckpt=True, lora_r=64, lora_targets="all-linear",
                            optimizer="paged-adamw-8bit", framework="hf", double_quant=True),
}
#: GPU capacity (GiB as the driver reports it) for fit rows: "40GB" A100 = 40 GiB (catalog); the
#: "24GB" card = RTX 4090 / A10 (23.99 GiB, catalog); "8GB" taken at 8e9 bytes; the 48 GB card =
#: RTX A6000 (47.99 GiB, catalog).
CAPACITY_GIB = {"litgpt_ft_7": 40.0, "unsloth_ctx_1": 23.99, "unsloth_ctx_4": 8e9 / GIB,
                "qlora_paper_65b": 47.99}
LEVEL_OF_METRIC = (("max_memory_allocated", "allocated"), ("max_memory_reserved", "reserved"),
                   ("nvidia-smi", "device"), ("torchtune", "reserved"))


@dataclass
class PeakResult:
    id: str
    level: str
    measured_gib: float
    estimated_gib: float
    single_gpu_bf16_train: bool

    @property
    def error(self) -> float:
        return (self.estimated_gib - self.measured_gib) / self.measured_gib


@dataclass
class FitResult:
    id: str
    expect_fit: bool
    estimated_gib: float
    capacity_gib: float
    detail: str

    @property
    def ok(self) -> bool:
        return (self.estimated_gib <= self.capacity_gib) == self.expect_fit


def level_for(metric: str) -> str:
    for key, level in LEVEL_OF_METRIC:
        if key in metric:
            return level
    return "reserved"


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def evaluate(rows: list[dict]) -> tuple[list[PeakResult], list[FitResult]]:
    """Returns the peak comparisons and fit checks of the calibration rows we can map."""
    peaks, fits = [], []
    for row in rows:
        rid = row["id"]
        if rid not in ROWS:
            continue
        w = Workload(**ROWS[rid])
        kind = row["kind"].strip()
        if kind == "peak" and row.get("measured_gib"):
            level = level_for(row["metric"])
            est = estimate(w).memory_gib[level]
            single = (w.gpus == 1 and w.method in ("lora", "full") and w.precision.startswith("bf16"))
            peaks.append(PeakResult(rid, level, float(row["measured_gib"]), est, single))
        elif kind in ("oom", "fits", "max_seq_at_capacity"):
            cap = CAPACITY_GIB[rid]
            if kind == "oom":
                fits.append(FitResult(rid, False, estimate(w).memory_gib["device"], cap, "source: OOM"))
            elif kind == "fits":
                fits.append(FitResult(rid, True, estimate(w).memory_gib["device"], cap, "source: fits"))
            elif row["seq_len"].strip().upper() == "OOM":
                fits.append(FitResult(rid, False, estimate(w).memory_gib["device"], cap,
                                      f"source: OOM at any length (checked at seq {w.seq_len})"))
            else:
                fits.append(FitResult(rid, True, estimate(w).memory_gib["device"], cap,
                                      f"source: largest seq that fits = {w.seq_len}"))
                over = w.model_copy(update={"seq_len": int(w.seq_len * 1.5)})
                fits.append(FitResult(rid + "@1.5x", False, estimate(over).memory_gib["device"], cap,
                                      f"1.5x that length ({over.seq_len}) must not fit"))
    return peaks, fits


def evaluate_public(rows: list[dict]) -> tuple[list[PeakResult], list[FitResult]]:
    """Returns the peak comparisons and fit checks of memory_public.csv rows."""
    peaks, fits = [], []
    for row in rows:
        w = public_workload(row)
        e = estimate(w)
        if row["kind"] == "peak":
            single = w.gpus == 1 and w.method in ("lora", "full") and w.precision.startswith("bf16")
            peaks.append(PeakResult(row["id"], row["level"], float(row["measured_gib"]),
                                    e.memory_gib[row["level"]], single))
        else:
            fits.append(FitResult(row["id"], row["kind"] == "fits", e.memory_gib["device"],
                                  float(row["capacity_gib"]), f"source: {row['kind']}"))
    return peaks, fits


def summary(peaks: list[PeakResult]) -> str:
    errs = [abs(p.error) for p in peaks]
    return (f"median |error| over {len(errs)} peak rows: {statistics.median(errs):.1%}; "
            f"within 20%: {sum(e <= 0.2 for e in errs)}/{len(errs)}; "
            f"worst: {max(peaks, key=lambda p: abs(p.error)).id} {max(errs):.1%}")


def _print(peaks: list[PeakResult], fits: list[FitResult]) -> None:
    print(f"{'row':28} {'level':9} {'measured GiB':>12} {'estimate GiB':>12} {'error':>8}")
    for p in peaks:
        print(f"{p.id:28} {p.level:9} {p.measured_gib:12.3f} {p.estimated_gib:12.3f} {p.error:+8.1%}")
    print("\n" + summary(peaks))
    print(f"\n{'fit check':28} {'estimate GiB':>12} {'capacity':>9}  result")
    for f in fits:
        print(f"{f.id:28} {f.estimated_gib:12.2f} {f.capacity_gib:9.2f}  {'ok' if f.ok else 'WRONG'} ({f.detail})")


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT_CSV
    if not path.is_file():
        print(f"skipped: calibration file {path} not found (expected ../shared/reference/ next to the repo)")
        return 0
    print(f"== calibration rows ({path})")
    _print(*evaluate(read_rows(path)))
    print(f"\n== held-out public measurements ({PUBLIC_CSV.relative_to(ROOT)})")
    _print(*evaluate_public(read_rows(PUBLIC_CSV)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
