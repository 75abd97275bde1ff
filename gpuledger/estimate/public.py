"""Published measurements the estimator is checked against, shipped as package data
(`gpuledger/estimate/data/`): training throughput (`training_throughput.csv`, one row per published
configuration with its URL), peak memory (`memory_public.csv`) and whole runs (`whole_runs.csv`: a
data set x epochs on one rented GPU, its published runtime), RL step times (`rl_step_times.csv`: published
GRPO/PPO steps with their settings, `benchmarks/rl_accuracy.py`). Pure readers and the
comparisons; `benchmarks/time_accuracy.py`, `benchmarks/estimator_accuracy.py` and
`gpuledger accuracy` use them."""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass
from importlib import resources

from gpuledger.estimate.throughput import ModelShape, TrainSetup, step_time

THROUGHPUT_CSV = "training_throughput.csv"
MEMORY_CSV = "memory_public.csv"
WHOLE_RUNS_CSV = "whole_runs.csv"
#: the GPU each family of memory_public.csv measured on (its `version`/`url` columns: lit-gpt's config
#: hub on an A10G, lit-gpt's resource tables and Qwen's speed benchmark on A100s, fsdp_qlora on RTX
#: 3090s, PEFT's MetaMathQA runs on an H100, torchtune's README on an A100 and an RTX 4090, TRL GRPO
#: on an A100-80GB, llama-recipes' FSDP runs on A100-40GBs, philschmid's
#: FSDP QLoRA on A10Gs, LLaMA-Factory's wiki on an A100, a torchtitan PR's test log on H100s)
MEMORY_FAMILY_GPU = {"litgpt_hub": "A10G", "litgpt_tables": "A100", "fsdp_qlora": "RTX3090", "qwen_speed": "A100",
                     "peft_metamathqa": "H100", "torchtune_flags": "A100", "trl_grpo": "A100",
                     "torchtune_readme": "RTX4090", "llama_recipes": "A100",
                     "philschmid": "A10G", "llamafactory_wiki": "A100", "torchtitan_pr": "H100"}
_INT = {"micro_batch", "seq_len", "lora_r", "gpus", "prompt_len", "completion_len", "group_size", "eval_batch",
        "sequence_parallel"}
_BOOL = {"grad_ckpt", "flash_attn", "compile", "activation_offload", "chunked_ce", "optimizer_in_bwd", "fused_ce", "double_quant"}
_FLOAT = {"lora_dropout"}
_FIELDS = ("model", "method", "precision", "optimizer", "micro_batch", "seq_len", "grad_ckpt", "flash_attn", "lora_r",
           "lora_targets", "gpus", "sharding", "framework", "prompt_len", "completion_len", "group_size", "compile",
           "activation_offload", "chunked_ce", "optimizer_in_bwd", "lora_dropout", "fused_ce", "double_quant", "offload", "eval_batch",
           "sequence_parallel")


def read_csv(name: str) -> list[dict]:
    """Returns the rows of a package data file of gpuledger/estimate/data/."""
    with resources.files("gpuledger.estimate").joinpath("data", name).open(newline="") as fh:
        return list(csv.DictReader(fh))


def memory_workload(row: dict):
    """Returns the Workload a memory_public.csv row states (empty cells take the defaults)."""
    from gpuledger.estimate import Workload

    fields = {}
    for k in _FIELDS:
        v = (row.get(k) or "").strip()
        if v:
            fields[k] = (int(v) if k in _INT else (v.lower() == "true") if k in _BOOL
                         else float(v) if k in _FLOAT else v)
    return Workload(**fields)


@dataclass(frozen=True)
class TimeCase:
    """One published throughput measurement, mapped to the model's inputs."""

    id: str
    source: str
    row: dict
    shape: ModelShape
    setup: TrainSetup
    measured: float  # tokens/s per GPU
    #: why the row is listed but not scored ('' = scored)
    excluded: str = ""

    @property
    def gpu_count_label(self) -> str:
        g = self.setup.gpus
        return "1" if g == 1 else "2-8" if g <= 8 else "9-64" if g <= 64 else ">64"


def _num(v: str, cast=float, default=None):
    v = (v or "").strip()
    return cast(v) if v else default


def _bool(v: str) -> bool | None:
    v = (v or "").strip().lower()
    return None if not v else v == "true"


@functools.cache
def _registry_shape(model: str) -> ModelShape:
    from gpuledger.models import load_config

    return ModelShape.from_config(load_config(model))


@functools.cache
def _lora_trainable(model: str, method: str, r: int, targets: str) -> int:
    from gpuledger.estimate import Workload, estimate

    return estimate(Workload(model=model, method=method, lora_r=r, lora_targets=targets,
                             precision="nf4" if method == "qlora" else "bf16", seq_len=256)).params_trainable


def time_case(row: dict) -> TimeCase:
    """Returns the TimeCase a training_throughput.csv row states (empty cells: the model's defaults)."""
    if row["model_source"] == "registry":
        shape = _registry_shape(row["model"])
    else:
        shape = ModelShape.from_sizes(float(row["params_total"]), int(row["layers"]), int(row["hidden"]),
                                      int(row["vocab"]))
    method = row["method"]
    r = _num(row["lora_r"], int, 16)
    trainable = 0.0
    if method in ("lora", "qlora"):  # stated in the row (a model outside the registry), else counted
        trainable = _num(row.get("params_trainable", ""), float, None) or float(
            _lora_trainable(row["model"], method, r, row["lora_targets"] or "q,v"))
    mb = _num(row["micro_batch"], int, None)
    setup = TrainSetup(
        accelerator=row["accelerator"], method=method, framework=row["framework"], gpus=int(row["gpus"]),
        nodes=_num(row["nodes"], int, None), precision=row["precision"] or "bf16", micro_batch=mb or 1,
        seq_len=int(row["seq_len"]), grad_accum=_num(row["grad_accum"], int, None),
        checkpointing=row["checkpointing"] or "none", packing=_bool(row["packing"]), compile=_bool(row["compile"]),
        sample_tokens=_num(row.get("sample_tokens") or "", int, None),
        flash_attn=_bool(row["flash_attn"]) is not False, sharding=row["sharding"] or "none",
        tensor_parallel=_num(row["tensor_parallel"], int, 1), pipeline_parallel=_num(row["pipeline_parallel"], int, 1),
        params_trainable=trainable, lora_r=r, offload=(row.get("offload") or "").strip() or "none")
    return TimeCase(row["id"], row["source"], row, shape, setup, float(row["tokens_per_s_per_gpu"]),
                    (row.get("exclude_reason") or "").strip())


def time_cases(*, scored: bool = True) -> list[TimeCase]:
    """Returns the rows of the shipped training_throughput.csv as TimeCases (`scored`: only those
    without an exclusion reason)."""
    cases = [time_case(r) for r in read_csv(THROUGHPUT_CSV)]
    return [c for c in cases if not (scored and c.excluded)]


def plain_rule_tokens_per_s(case: TimeCase, mfu: float = 0.4) -> float:
    """Returns tokens/s per GPU by the rule of thumb other calculators use: 6·P FLOPs per token (4·P
    for LoRA/QLoRA) at `mfu` of the GPU's dense bf16 peak."""
    from gpuledger.catalog import gpu_kinds, normalize_accelerator

    kind = gpu_kinds()[normalize_accelerator(case.setup.accelerator)]
    per_token = (4 if case.setup.method in ("lora", "qlora") else 6) * case.shape.params_total
    return kind.peak_tflops("bf16") * 1e12 * mfu / per_token


def model_tokens_per_s(case: TimeCase, efficiency: dict[str, float] | None = None) -> float:
    """Returns the throughput model's tokens/s per GPU for a case."""
    return step_time(case.shape, case.setup, efficiency=efficiency).tokens_per_s_per_gpu


def held_out_tokens_per_s(cases: list[TimeCase]) -> dict[str, float]:
    """Returns {case id: held-out model tokens/s per GPU}: each source predicted with the per-stack
    matmul efficiencies fitted on the other sources (a stack seen only there keeps its prior,
    PRIOR_MATMUL_EFFICIENCY)."""
    from gpuledger.estimate.coefficients import PRIOR_MATMUL_EFFICIENCY
    from gpuledger.estimate.throughput import fit_efficiency

    out = {}
    for source in sorted({c.source for c in cases}):
        train = [(c.shape, c.setup, c.measured, c.source) for c in cases if c.source != source]
        eff = {**PRIOR_MATMUL_EFFICIENCY, **{cls: v for cls, (v, _) in fit_efficiency(train).items()}}
        for c in cases:
            if c.source == source:
                out[c.id] = model_tokens_per_s(c, efficiency=eff)
    return out


def time_error(predicted_tps: float, measured_tps: float) -> float:
    """Returns the signed error of the predicted training TIME: (predicted − measured) / measured,
    time being tokens / throughput."""
    return measured_tps / predicted_tps - 1.0


@dataclass(frozen=True)
class Summary:
    n: int
    median_abs: float
    within_25: float

    def to_json(self) -> dict:
        return {"cases": self.n, "median_abs_error": round(self.median_abs, 4), "within_25pct": round(self.within_25, 4)}


def summarize(errors: list[float], band: float = 0.25) -> Summary:
    """Returns median |error| and the share within ±band of signed errors."""
    import statistics

    if not errors:
        return Summary(0, math.nan, math.nan)
    return Summary(len(errors), statistics.median(abs(e) for e in errors),
                   sum(abs(e) <= band for e in errors) / len(errors))


@dataclass(frozen=True)
class WholeRun:
    """One published whole run (tokens of a data set x epochs on `accelerator`, its runtime), as a user
    writes its spec: the Workload states what the source states (not the samples' mean length)."""

    id: str
    source: str
    workload: object  # gpuledger.estimate.Workload
    accelerator: str
    tokens: float
    mean_tokens: float
    measured_s: float
    #: the dollars the source says the run cost (a "trained for $X" claim), None when it says none
    claimed_usd: float | None = None

    def model_s(self, stated_mean: bool = False) -> float:
        """Returns gpuledger's whole-run time (`train_time_s`: steps, load, checkpoints), with the default
        sample lengths or (`stated_mean`) the row's mean stated as `sample_tokens`."""
        from gpuledger.estimate import estimate, train_time_s

        w = self.workload
        if stated_mean:
            w = w.model_copy(update={"sample_tokens": max(1, round(self.mean_tokens))})
        return train_time_s(estimate(w), self.tokens, self.accelerator)


@functools.lru_cache(maxsize=1)
def whole_runs() -> tuple[WholeRun, ...]:
    """Returns the rows of whole_runs.csv (nothing is fitted on them: out of source by construction)."""
    from gpuledger.estimate import Workload

    out = []
    for r in read_csv(WHOLE_RUNS_CSV):
        w = Workload(model=r["model"], method=r["method"], precision=r["precision"], framework=r["framework"],
                     micro_batch=int(r["micro_batch"]), seq_len=int(r["seq_len"]), gpus=int(r["gpus"]),
                     grad_ckpt=r["grad_ckpt"] == "true", lora_r=int(r["lora_r"]), lora_targets=r["lora_targets"],
                     packing=r["packing"] == "true", flash_attn=r.get("flash_attn") != "false", grad_accum=int(r["grad_accum"]) if r["grad_accum"] else None,
                     eval_steps=float(r["eval_steps"]) if r.get("eval_steps") else None,
                     eval_samples=int(r["eval_samples"]) if r.get("eval_samples") else None,
                     # packed: the lengths do not shape the step; the row's samples (its eval's too) are its mean long
                     sample_tokens=max(1, round(float(r["mean_tokens"]))) if r["packing"] == "true" else None)
        tokens = float(r["epochs"]) * float(r["samples"]) * float(r["mean_tokens"])
        out.append(WholeRun(r["id"], r["source"], w, r["accelerator"], tokens, float(r["mean_tokens"]),
                            float(r["runtime_s"]), float(r["usd"]) if r.get("usd") else None))
    return tuple(out)


# ---- RL step times (rl_step_times.csv) ----------------------------------------------------------

RL_CSV = "rl_step_times.csv"


def rl_train_fields(row: dict) -> dict:
    """Returns the `train:` settings a user would write for a published RL run of rl_step_times.csv (spec field
    names; `benchmarks/rl_accuracy.py` plans them, `rl_workload` times them)."""

    def num(v):
        return int(v) if v not in ("", None) else None

    train = {"seq_len": int(row["prompt_len"]) + int(row["completion_len_max"]),
             "prompt_len": int(row["prompt_len"]), "completion_len": int(row["completion_len"]),
             "group_size": int(row["group_size"]), "micro_batch": int(row["micro_batch"]),
             "prompts_per_step": int(row["prompts_per_step"]), "generation": row["generation"],
             "sharding": row["sharding"] or "auto"}
    for name in ("generation_rounds", "ppo_epochs", "ppo_mini_batches", "tensor_parallel", "expert_parallel"):
        if num(row.get(name)):
            train[name] = num(row[name])
    if row.get("trl_version"):
        train["trl_version"] = row["trl_version"]
    if row["rollout_gpus"]:
        train["rollout_gpus"] = int(row["rollout_gpus"])
    for flag in ("old_logprob", "packing", "rollout_eager", "param_offload", "optimizer_offload"):
        if row.get(flag) in ("true", "false"):
            train[flag] = row[flag] == "true"
    if row.get("vllm_sleep") == "true":
        train["vllm_sleep"] = True
    for name in ("micro_batch_sequences", "rollout_tp"):
        if row.get(name):
            train[name] = int(row[name])
    if row.get("policy") in ("lora", "qlora"):
        train.update(policy=row["policy"], lora_r=int(row["lora_r"] or 16), lora_targets=row["lora_targets"] or "q,v")
    if row["vllm_gpu_memory_utilization"]:
        train["vllm_gpu_memory_utilization"] = float(row["vllm_gpu_memory_utilization"])
    return train


def rl_workload(row: dict):
    """Returns the Workload of a row of rl_step_times.csv (its `rl_train_fields`, bf16, gradient checkpointing)."""
    from gpuledger.estimate import Workload

    return Workload(model=row["model"], method=row["algorithm"], precision="bf16", gpus=int(row["gpus"]),
                    grad_ckpt=True, **rl_train_fields(row))


def rl_source(row: dict) -> str:
    """Returns the publisher a row counts under (one source per repository or site: the verl-data logs of one
    author are one source, not one per log)."""
    parts = row["source_url"].split("/")
    return "/".join(parts[2:5]) if "github.com" in row["source_url"] else parts[2]


def rl_model_step_s(row: dict) -> float:
    """Returns the RL model's seconds per step of a row (gpuledger/estimate/rl.py, the placement the planner
    chooses), before any band's P50."""
    from gpuledger.estimate import estimate
    from gpuledger.estimate.rl_plan import chosen_step

    est = estimate(rl_workload(row))
    return chosen_step(est.workload, row["accelerator"], int(row["gpus"])).step_s


def int8_ratio_rows() -> list[tuple[str, str, float, float]]:
    """Returns (id, source, measured ratio, the model's ratio) of every row of int8_speed.csv: the published
    time of a LoRA step on a bitsandbytes LLM.int8 base over the same run on a 16-bit (`compared` bf16) or
    NF4 (nf4) base, and the step model's ratio at the row's settings (Transformers/PEFT, one GPU, packed)."""
    from gpuledger.estimate import Workload, estimate, training_step

    out = []
    for r in read_csv("int8_speed.csv"):
        def step(method: str, precision: str, r=r) -> float:
            w = Workload(model=r["model"], method=method, precision=precision, micro_batch=int(r["micro_batch"]),
                         seq_len=int(r["seq_len"]), framework="hf", packing=True)
            return training_step(estimate(w), r["gpu"]).step_s

        base = step("qlora", "nf4") if r["compared"] == "nf4" else step("lora", "bf16")
        out.append((r["id"], r["source"], float(r["measured_ratio"]), step("lora", "int8") / base))
    return out


def moe_eager_rows() -> list[tuple[str, str, float, float]]:
    """Returns (id, source, measured, the model's figure) of every row of moe_eager_runs.csv: mixture-of-experts
    runs through Transformers' own loop over the experts, with more experts than any scored row's model. A
    `run_minutes` row is a whole run (`train_time_s` of its tokens, minutes); a `ratio` row is the published time
    of the model over `compared_model`'s at the same settings (the step model's ratio)."""
    from gpuledger.estimate import Workload, estimate, train_time_s, training_step

    out = []
    for r in read_csv("moe_eager_runs.csv"):
        def workload(model: str, r=r):
            return Workload(model=model, method="lora", precision="bf16", framework="hf",
                            micro_batch=int(r["micro_batch"]), seq_len=int(r["seq_len"]), gpus=int(r["gpus"]),
                            sharding=r["sharding"], packing=r["packing"] == "true", flash_attn=r["flash_attn"] == "true",
                            lora_r=int(r["lora_r"]), lora_targets=r["lora_targets"],
                            sample_tokens=int(r["sample_tokens"]) if r["sample_tokens"] else None)

        if r["kind"] == "run_minutes":
            model = train_time_s(estimate(workload(r["model"])), float(r["tokens"]), r["gpu"]) / 60
        else:
            model = (training_step(estimate(workload(r["model"])), r["gpu"]).step_s
                     / training_step(estimate(workload(r["compared_model"])), r["gpu"]).step_s)
        out.append((r["id"], r["source"], float(r["measured"]), model))
    return out


def stack_ratio_rows(speedup: dict[str, float] | None = None) -> list[tuple[str, str, str, float, float]]:
    """Returns (id, source, stack, measured ratio, the model's ratio) of every row of stack_speed.csv: the
    published speed of a stack over its engine at the same settings (`compared` hf: Transformers + PEFT with
    FlashAttention-2 / SDPA; hf-eager: with Transformers' eager attention), and the step model's ratio at the
    row's settings (one GPU, packed), with `speedup` in place of STACK_KERNEL_SPEEDUP when given."""
    from gpuledger.estimate import Workload, estimate, training_step

    out = []
    for r in read_csv("stack_speed.csv"):
        def step(framework: str, flash: bool, r=r) -> float:
            w = Workload(model=r["model"], method=r["method"], precision=r["precision"], framework=framework,
                         micro_batch=int(r["micro_batch"]), seq_len=int(r["seq_len"]), packing=True,
                         flash_attn=flash, lora_r=int(r["lora_r"]), lora_targets=r["lora_targets"])
            return training_step(estimate(w), r["gpu"], stack_speedup=speedup).step_s

        base = step("hf", r["compared"] != "hf-eager")
        out.append((r["id"], r["source"], r["stack"], float(r["measured_ratio"]), base / step(r["stack"], True)))
    return out


def stack_residuals(speedup: dict[str, float] | None = None) -> dict[str, list[float]]:
    """Returns, per source of stack_speed.csv, its rows' log(measured ratio / the model's ratio)."""
    by_source: dict[str, list[float]] = {}
    for _id, source, _stack, measured, model in stack_ratio_rows(speedup):
        by_source.setdefault(source, []).append(math.log(measured / model))
    return by_source


def fit_stack_speedup(stack: str = "unsloth") -> float:
    """Returns the STACK_KERNEL_SPEEDUP of `stack` that zeroes the mean over sources of each source's mean log
    residual (each source one vote), by bisection: the model's ratio grows with the factor."""
    def mean_residual(f: float) -> float:
        means = [sum(v) / len(v) for v in stack_residuals({stack: f}).values()]
        return sum(means) / len(means)

    lo, hi = 1.0, 4.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_residual(mid) > 0 else (lo, mid)
    return (lo + hi) / 2
