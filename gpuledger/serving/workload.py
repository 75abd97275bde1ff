"""An inference sweep's trial as the planner sees it (pure functions, no I/O)."""

from __future__ import annotations

from typing import Any

from gpuledger.spec import SweepSpec
from gpuledger.spec.models import Serve

#: The metrics gpuledger/trainers/serve_bench.py reports (through gpuledger.track), by these exact names.
SERVING_METRICS = ("output_tokens_per_s", "requests_per_s", "ttft_ms_p50", "ttft_ms_p95", "ttft_ms_p99",
                   "tpot_ms_p50", "tpot_ms_p95", "tpot_ms_p99")
#: Serving settings a search parameter of the same name overrides per trial.
SERVE_FIELDS = tuple(name for name in Serve.model_fields if name != "slo")
#: The settings that are load rather than configuration (a config's curve runs over them).
LOAD_FIELDS = ("concurrency", "request_rate")


def serve_settings(spec: SweepSpec, params: dict[str, Any]) -> dict[str, Any]:
    """Returns the trial's serving settings: the spec's `serve` section overridden by the trial's
    search parameters of the same names, plus `precision`."""
    settings = spec.serve.model_dump(exclude={"slo"})
    settings["precision"] = spec.precision
    settings.update({k: v for k, v in params.items() if k in settings})
    return settings


def inference_workload(settings: dict[str, Any]) -> dict[str, Any]:
    """Returns the `gpuledger.estimate.Workload` fields of a serving trial: `method: inference`, a
    batch of `max_num_seqs` sequences of prompt + output tokens (the KV cache the engine must hold
    for its largest batch), over `tensor_parallel` GPUs."""
    prompt, output = int(settings["prompt_tokens"]), int(settings["output_tokens"])
    return {"method": "inference", "precision": settings["precision"], "micro_batch": int(settings["max_num_seqs"]),
            "seq_len": prompt + output, "prompt_len": prompt, "completion_len": output,
            "gpus": int(settings["tensor_parallel"])}


def serving_tokens(settings: dict[str, Any]) -> int:
    """Returns the tokens a trial processes at most: `num_prompts` × (prompt + output). The planner
    turns them into time at the inference MFU; `max_duration` usually ends a trial earlier."""
    return int(settings["num_prompts"]) * (int(settings["prompt_tokens"]) + int(settings["output_tokens"]))


#: tokens one step of gpuledger/trainers/tiny_serve.py processes by default (its --max-num-batched-tokens)
TINY_STEP_TOKENS = 256


def step_tokens(settings: dict[str, Any]) -> int:
    """Returns the tokens one engine step processes at most: `max_num_batched_tokens`, else the
    engine's documented default for large GPUs (`gpuledger.estimate.inference.ENGINES`, e.g. vLLM
    0.10: 8192), tiny_serve's 256."""
    if settings.get("max_num_batched_tokens"):
        return int(settings["max_num_batched_tokens"])
    if settings["engine"] == "tiny":
        return TINY_STEP_TOKENS
    from gpuledger.estimate.inference import ENGINES

    return int(ENGINES[settings["engine"]].max_batched_tokens)


def serving_memory_gib(memory_gib: dict[str, float], settings: dict[str, Any]) -> float:
    """Returns the GPU memory (GiB, nvidia-smi level) a serving trial needs, from the estimator's
    breakdown of `inference_workload(settings)`: weights + KV cache of the whole batch stay; the
    activations are those of one engine step, not of the whole batch's prefill at once (engines
    prefill in chunks of `step_tokens`), scaled by tokens; divided by `memory_fraction`."""
    batch_tokens = int(settings["max_num_seqs"]) * int(settings["prompt_tokens"])
    act = float(memory_gib.get("activations") or 0.0)
    step_act = act * min(1.0, step_tokens(settings) / max(1, batch_tokens))
    return (float(memory_gib["device"]) - act + step_act) / memory_fraction(settings)


def memory_fraction(settings: dict[str, Any]) -> float:
    """Returns the fraction of GPU memory the engine takes for itself: vLLM (and SGLang,
    TensorRT-LLM) preallocate `gpu_memory_utilization` of it (vLLM's default 0.9); the tiny CPU
    server allocates only what it uses (1.0). A GPU fits a trial when weights + KV cache +
    activations <= fraction × its memory, so the planner compares need / fraction with the GPU."""
    return 1.0 if settings["engine"] == "tiny" else float(settings["gpu_memory_utilization"])
