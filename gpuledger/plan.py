"""The planner: trials × offers → GPU choice, spot decision, schedule, budget guard, what-if.

Hamilton style, each step a function named after what it returns:

    trial_estimates(spec, trials, gpu_counts)        -> estimates frame (memory, FLOPs per trial × GPU count)
    accelerator_table(accelerators, precision, ...)  -> per accelerator: memory, peak, MFU
    candidate_offers(offers, gpu_counts, settings)   -> the offers that can win (exact dominance pruning)
    scored_candidates(estimates, candidates, ...)    -> every (estimate row × candidate) that fits, with
                                                        hours, expected cost and the deadline test
    plan_from_estimates(estimates, offers, settings) -> Plan (the choice, schedule, totals, what-if)
    plan_sweep(spec, ...)                            -> all of the above for one spec

Everything is vectorised with polars over trials × offers; nothing here writes anywhere, launches
anything or imports Prefect/SkyPilot. Every constant below carries the reason for its value; the
ones a plan depends on are repeated in `Plan.assumptions`.
"""

from __future__ import annotations

import functools
import heapq
import json
import math
import os
import time as _time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from gpuledger.errors import BudgetExceeded, UserError

# --------------------------------------------------------------------------------------------
# Constants (each one is an assumption the plan states)

#: Usable device memory = nvidia-smi total × this fraction − MEMORY_RESERVE_GIB. The 5% covers
#: allocator fragmentation beyond what the estimator's `reserved` level models and run-to-run
#: variation (PyTorch's caching allocator, NCCL buffers growing with message sizes).
MEMORY_SAFETY_FRACTION = 0.95
#: GiB kept free per GPU for things no estimator sees: NCCL/communication buffers, cuBLAS
#: workspaces of a second stream, a monitoring process's context.
MEMORY_RESERVE_GIB = 0.5

#: Hours from `sky jobs launch` to the job's first line on a fresh cloud VM (provisioning, image
#: pull, SkyPilot runtime set-up): 3-8 min observed for GPU VMs; we plan with 5 min.
CLOUD_PROVISIONING_H = 5 / 60
#: Hours of `task.setup` (pip install of the trainer's requirements, model download): 5 min.
CLOUD_SETUP_H = 5 / 60
#: Local launcher: no provisioning; a Python + numpy start-up of a few seconds.
LOCAL_PROVISIONING_H = 0.0
LOCAL_SETUP_H = 3 / 3600

#: Multi-GPU throughput relative to GPUs × single-GPU throughput (gradient all-reduce for DDP;
#: parameter all-gather + reduce-scatter for FSDP/ZeRO-3), within one node (NVLink or PCIe).
SCALING_EFFICIENCY = {"none": 1.0, "ddp": 0.90, "zero1": 0.90, "zero2": 0.88, "zero3": 0.85, "fsdp": 0.85}

#: MFU used only while the estimator (`gpuledger.estimate.default_mfu`) is not importable.
FALLBACK_MFU = {"full": 0.40, "lora": 0.35, "qlora": 0.25, "grpo": 0.20, "ppo": 0.20}

#: GPU counts `gpus_per_trial: auto` tries.
AUTO_GPU_COUNTS = (1, 2, 4, 8)

#: Local launcher: the fraction of RAM available at planning time that trials may use, and the
#: efficiency of small-matrix numpy training relative to a large float32 matmul on one core.
LOCAL_MEMORY_FRACTION = 0.80
#: Calibrated against `trainers/demo_lora.py` (model `gpuledger/demo-char-gpt`, 98,304 tokens,
#: one BLAS thread) on this 2-core machine: r=16/B=8 took 7.7 s of CPU for 124.9 GFLOP (estimator),
#: r=4/B=32 8.6 s for 95.9 GFLOP, against a 92.6 GFLOP/s one-core matmul probe: 0.175 and 0.12
#: (Python per-op overhead on tiny matrices, evaluation passes, start-up). Those are CPU times of one
#: trial alone; what the plan needs is wall-clock with `max_parallel` trials sharing the cores. The
#: 12-trial demo sweep (196,608 tokens each, 2 at a time on this 2-core machine) measured 17.7-23.2 s
#: per trial (mean 20.9 s, agent wall-clock incl. interpreter start, base load and evaluations)
#: against 15.8 s planned at 0.15, i.e. 0.15 x 12.8 / 17.9 = 0.107 on the compute part: we plan with 0.11.
LOCAL_CPU_EFFICIENCY = 0.11

#: The what-if curve's parallelism levels.
WHAT_IF_KS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class PlanSettings:
    """What the choice step needs from a spec (plain values; tests build it by hand)."""

    sweep: str = "sweep"
    method: str = "lora"
    precision: str = "bf16"
    launcher: str = "skypilot"
    spot: str = "auto"  # auto | always | never
    deadline_h: float | None = None
    deadline_confidence: float = 0.9
    max_parallel: int = 4
    budget_usd: float = math.inf
    provisioning_h: float = CLOUD_PROVISIONING_H
    setup_h: float = CLOUD_SETUP_H
    #: hours lost to a restart after a preemption (re-provision + set-up); None: provisioning + setup
    restart_overhead_h: float | None = None
    #: hours between checkpoints; None: the trial is assumed NOT to checkpoint (a preemption loses
    #: on average half of the compute done so far, i.e. half the trial)
    checkpoint_interval_h: float | None = None
    preemption_per_hour: float | None = None
    measured_preemption: dict[tuple[str, str], tuple[float, float]] | None = None
    target: float | None = None
    memory_safety_fraction: float = MEMORY_SAFETY_FRACTION
    memory_reserve_gib: float = MEMORY_RESERVE_GIB

    @property
    def overhead_h(self) -> float:
        return self.provisioning_h + self.setup_h

    @property
    def restart_h(self) -> float:
        return self.overhead_h if self.restart_overhead_h is None else self.restart_overhead_h


# --------------------------------------------------------------------------------------------
# The plan


@dataclass
class Plan:
    """A sweep's plan. `to_json()` gives the documented JSON object (issue 4's keys + extras).

    `trials` (list of dicts, one per trial in trial order) is built on first use from
    `trials_frame` (a polars frame with the same columns; `params` as JSON text there)."""

    sweep: str
    trials_frame: pl.DataFrame = field(repr=False)
    total_est_cost_usd: float
    makespan_hours: float
    max_parallel: int
    budget_usd: float | None
    within_budget: bool
    price_snapshot: str
    what_if: list[dict[str, float]]
    assumptions: list[str]
    launcher: str = "skypilot"
    launch_order: list[str] = field(default_factory=list)
    alternatives: dict[str, Any] = field(default_factory=dict)
    deadline_hours: float | None = None

    @functools.cached_property
    def trials(self) -> list[dict[str, Any]]:
        out = []
        for r in self.trials_frame.iter_rows(named=True):
            p = r.get("params")
            r["params"] = json.loads(p) if isinstance(p, str) else (p or {})
            out.append(r)
        return out

    @property
    def feasible_trials(self) -> list[dict[str, Any]]:
        return [t for t in self.trials if t["feasible"]]

    def to_json(self) -> dict[str, Any]:
        """Returns the plan as a JSON-ready dict (keys: sweep, trials, total_est_cost_usd,
        makespan_hours, max_parallel, budget_usd, within_budget, price_snapshot, what_if,
        assumptions; extras: launcher, launch_order, alternatives, deadline_hours)."""
        budget = self.budget_usd if self.budget_usd is not None and math.isfinite(self.budget_usd) else None
        return {
            "sweep": self.sweep,
            "trials": self.trials,
            "total_est_cost_usd": round(self.total_est_cost_usd, 4),
            "makespan_hours": round(self.makespan_hours, 4),
            "max_parallel": self.max_parallel,
            "budget_usd": budget,
            "within_budget": self.within_budget,
            "price_snapshot": self.price_snapshot,
            "what_if": self.what_if,
            "assumptions": self.assumptions,
            "launcher": self.launcher,
            "launch_order": self.launch_order,
            "alternatives": self.alternatives,
            "deadline_hours": self.deadline_hours,
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


# --------------------------------------------------------------------------------------------
# Step 1: estimates (the only step that calls the estimator)

#: Search parameters that change a trial's workload (CONTRACTS.md); value: the Workload field.
PARAM_TO_WORKLOAD = {
    "lora_r": "lora_r",
    "lora_targets": "lora_targets",
    "micro_batch": "micro_batch",
    "seq_len": "seq_len",
    "group_size": "group_size",
    "precision": "precision",
    "optimizer": "optimizer",
    "prompt_len": "prompt_len",
    "completion_len": "completion_len",
}

SHARDING_RULE = (
    "sharding auto: none on 1 GPU; on >1 GPU, fsdp for full/grpo/ppo (states sharded), and for "
    "lora/qlora both ddp (replicated frozen base, faster) and fsdp (sharded base, when it does not "
    "fit replicated) are estimated and the cheaper fitting one wins"
)


def sharding_options(method: str, gpus: int, spec_sharding: str = "auto") -> list[str]:
    """Returns the sharding strategies to estimate for `gpus` GPUs (see SHARDING_RULE)."""
    if gpus == 1:
        return ["none"]
    if spec_sharding not in ("auto", "none"):
        return [spec_sharding]
    if method in ("lora", "qlora"):
        return ["ddp", "fsdp"]
    return ["fsdp"]


def _estimator():
    try:
        from gpuledger import estimate as est_mod

        if not (hasattr(est_mod, "estimate") and hasattr(est_mod, "Workload")):
            raise AttributeError("estimate")
        return est_mod
    except (ImportError, AttributeError):
        raise UserError(
            "the estimator (gpuledger.estimate) is not available in this installation; "
            "reinstall gpuledger or plan from a hand-built estimates frame"
        ) from None


def trial_estimates(spec, trials, gpu_counts: Sequence[int] | None = None, *, device: str = "gpu") -> pl.DataFrame:
    """Returns one row per trial × GPU count × sharding: trial_id, trial_index, gpus, sharding,
    precision, est_memory_gib (per GPU, nvidia-smi level), flops_total, est_error (None or why the
    estimator refused).

    Search params named in PARAM_TO_WORKLOAD (and `gpus_per_trial`) override the spec's train
    fields. Identical workloads are estimated once.
    """
    est_mod = _estimator()
    t = spec.train
    tokens = t.tokens_per_trial
    inference = spec.method == "inference"
    if inference:  # a serving benchmark: its workload and tokens come from its serve settings
        from gpuledger.serving import inference_workload, memory_fraction, serve_settings, serving_tokens
    if tokens is None and not inference:
        file, line, col = spec.position("train")
        raise UserError(
            f"{file}:{line}:{col}: train.tokens_per_trial is needed to estimate time and cost "
            "(training tokens per trial, e.g. 20_000_000)"
        )
    base = {
        "model": spec.model,
        "method": spec.method,
        "precision": spec.precision,
        "optimizer": t.optimizer,
        "micro_batch": t.micro_batch,
        "seq_len": t.seq_len,
        "grad_ckpt": t.grad_checkpointing,
        "flash_attn": t.flash_attention,
        "lora_r": t.lora_r,
        "lora_targets": t.lora_targets,
        "prompt_len": t.prompt_len,
        "completion_len": t.completion_len,
        "group_size": t.group_size,
        "device": device,
        **{name: getattr(t, name) for name in est_mod.STACK_FIELDS},
    }
    if gpu_counts is None:
        gpt = spec.resources.gpus_per_trial
        gpu_counts = AUTO_GPU_COUNTS if gpt == "auto" else (int(gpt),)
    cache: dict[tuple, tuple[float | None, float | None, str | None]] = {}
    rows: dict[str, list] = {k: [] for k in ("trial_id", "trial_index", "gpus", "sharding", "precision", "est_memory_gib", "flops_total", "est_error")}
    for trial in trials:
        wl = dict(base)
        for name, value in trial.params.items():
            if name in PARAM_TO_WORKLOAD:
                wl[PARAM_TO_WORKLOAD[name]] = value
        counts = gpu_counts
        if "gpus_per_trial" in trial.params:
            counts = (int(trial.params["gpus_per_trial"]),)
        fraction = 1.0
        if inference:  # weights + KV cache of max_num_seqs sequences on tensor_parallel GPUs, at the
            settings = serve_settings(spec, trial.params)  # engine's memory fraction (serving/workload.py)
            wl.update(inference_workload(settings))
            counts = (wl.pop("gpus"),) if device == "gpu" else (1,)
            tokens, fraction = serving_tokens(settings), memory_fraction(settings)
        for g in counts:
            for sh in sharding_options(spec.method, g, t.sharding) if device == "gpu" else ["none"]:
                key = tuple(sorted({**wl, "gpus": g, "sharding": sh, "_t": tokens, "_f": fraction}.items(), key=lambda kv: kv[0]))
                if key not in cache:
                    try:
                        e = est_mod.estimate(est_mod.Workload(**{**wl, "gpus": g, "sharding": sh}))
                        cache[key] = (float(e.memory_gib["device"]) / fraction, float(e.flops_per_token) * tokens, None)
                    except UserError:
                        raise
                    except Exception as err:  # the estimator refused this one workload
                        cache[key] = (None, None, f"estimator: {str(err).splitlines()[0] if str(err) else type(err).__name__}")
                mem, flops, err = cache[key]
                rows["trial_id"].append(trial.trial_id)
                rows["trial_index"].append(trial.index)
                rows["gpus"].append(g)
                rows["sharding"].append(sh)
                rows["precision"].append(str(wl["precision"]))
                rows["est_memory_gib"].append(mem)
                rows["flops_total"].append(flops)
                rows["est_error"].append(err)
    return pl.DataFrame(
        rows,
        schema={"trial_id": pl.String, "trial_index": pl.Int64, "gpus": pl.Int64, "sharding": pl.String, "precision": pl.String,
                "est_memory_gib": pl.Float64, "flops_total": pl.Float64, "est_error": pl.String},
    )


# --------------------------------------------------------------------------------------------
# Step 2: accelerators (memory, peak rate, MFU)


def _mfu(accelerator: str, method: str) -> tuple[float, str]:
    try:
        from gpuledger.estimate import default_mfu

        return float(default_mfu(accelerator, method)), "gpuledger.estimate.default_mfu"
    except Exception:
        return FALLBACK_MFU.get(method, 0.35), "planner fallback MFU table"


def accelerator_table(accelerators: Sequence[str], precisions: Sequence[str], method: str) -> pl.DataFrame:
    """Returns accelerator, precision, memory_gib (nvidia-smi), peak_tflops (dense), mfu, mfu_source
    for every known accelerator × precision."""
    from gpuledger.catalog import gpu_kinds

    kinds = gpu_kinds()
    rows = []
    for acc in dict.fromkeys(accelerators):
        kind = kinds.get(acc)
        if kind is None:
            continue
        mfu, src = _mfu(acc, method)
        for p in dict.fromkeys(precisions):
            try:
                peak = kind.peak_tflops(p)
            except ValueError:
                continue
            rows.append({"accelerator": acc, "precision": p, "memory_gib": kind.memory_gib, "peak_tflops": peak, "mfu": mfu, "mfu_source": src})
    return pl.DataFrame(
        rows,
        schema={"accelerator": pl.String, "precision": pl.String, "memory_gib": pl.Float64, "peak_tflops": pl.Float64, "mfu": pl.Float64, "mfu_source": pl.String},
    )


# --------------------------------------------------------------------------------------------
# Step 3: candidate offers (exact dominance pruning)


def candidate_offers(offers: pl.DataFrame, gpu_counts: Sequence[int], settings: PlanSettings) -> pl.DataFrame:
    """Returns, per (accelerator, gpus needed): the cheapest on-demand instance with at least that
    many GPUs, and per cloud the cheapest trustworthy spot instance, with its preemption rate.

    This pruning is exact: for a given accelerator and GPU count every on-demand offer takes the
    same hours, so only the cheapest can win; spot offers of one cloud share a preemption rate,
    so again only the cheapest can win. Suspicious spot prices are never candidates.
    Columns: accelerator, gpus, spot, cloud, region, instance_type, accelerator_count,
    usd_per_hour, on_demand_usd_per_hour, price_source, price_as_of, preemptions_per_hour,
    preemption_source.
    """
    from gpuledger.catalog.offers import preemption_rates, spot_suspicious_expr

    if "spot_suspicious" not in offers.columns:
        offers = offers.with_columns(spot_suspicious=spot_suspicious_expr())
    counts = pl.DataFrame({"gpus": sorted({int(g) for g in gpu_counts})}, schema={"gpus": pl.Int64})
    base = offers.select(
        "cloud", "region", "instance_type", "accelerator", "accelerator_count",
        pl.col("usd_per_hour_on_demand").alias("on_demand_usd_per_hour"),
        pl.col("usd_per_hour_spot"), "spot_suspicious",
        pl.col("source").alias("price_source"), pl.col("as_of").alias("price_as_of"),
    )
    od = base.with_columns(spot=pl.lit(False), usd_per_hour=pl.col("on_demand_usd_per_hour"))
    sp = base.filter(pl.col("usd_per_hour_spot").is_not_null() & ~pl.col("spot_suspicious")).with_columns(
        spot=pl.lit(True), usd_per_hour=pl.col("usd_per_hour_spot")
    )
    both = pl.concat([od, sp]).drop("usd_per_hour_spot", "spot_suspicious")
    joined = counts.join(both, how="cross").filter(pl.col("accelerator_count") >= pl.col("gpus"))
    order = ["usd_per_hour", "accelerator_count", "cloud", "region", "instance_type"]
    joined = joined.sort(order)
    best_od = joined.filter(~pl.col("spot")).group_by("accelerator", "gpus", maintain_order=True).first()
    best_sp = joined.filter(pl.col("spot")).group_by("accelerator", "gpus", "cloud", maintain_order=True).first()
    cand = pl.concat([best_od, best_sp.select(best_od.columns)])
    pairs = cand.select("cloud", "accelerator").unique()
    rates = preemption_rates(pairs, override_per_hour=settings.preemption_per_hour, measured=settings.measured_preemption)
    cand = cand.join(rates, on=["cloud", "accelerator"], how="left").with_columns(
        preemptions_per_hour=pl.when(pl.col("spot")).then(pl.col("preemptions_per_hour")).otherwise(0.0),
        preemption_source=pl.when(pl.col("spot")).then(pl.col("preemption_source")),
    )
    return cand.sort("accelerator", "gpus", "spot", "usd_per_hour", "cloud")


# --------------------------------------------------------------------------------------------
# Step 4: score every fitting (estimate × candidate)


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26, |error| < 1.5e-7
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-x * x)
    return sign * y


def poisson_cdf(n: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Returns P(N <= n) for N ~ Poisson(mu), elementwise; n < 0 gives 0.

    Exact sum for mu <= 30 (terms up to k = 100; beyond that the tail is < 1e-30); a normal
    approximation with continuity correction for mu > 30.
    """
    n = np.asarray(n, dtype=np.float64)
    mu = np.asarray(mu, dtype=np.float64)
    out = np.zeros(np.broadcast(n, mu).shape)
    n, mu = np.broadcast_to(n, out.shape), np.broadcast_to(mu, out.shape)
    small = mu <= 30
    if small.any():
        ns, ms = n[small], mu[small]
        kmax = int(min(100, max(0.0, float(np.nanmax(ns)) if ns.size else 0.0)))
        term = np.exp(-ms)
        cdf = np.where(ns >= 0, term, 0.0)
        for k in range(1, kmax + 1):
            term = term * ms / k
            cdf = cdf + np.where(ns >= k, term, 0.0)
        cdf = np.where(ns > 100, 1.0, cdf)
        out[small] = np.minimum(cdf, 1.0)
    big = ~small
    if big.any():
        z = (n[big] + 0.5 - mu[big]) / np.sqrt(mu[big])
        out[big] = np.where(n[big] < 0, 0.0, 0.5 * (1 + _erf(z / math.sqrt(2))))
    return out


def _normal_quantile(p: float) -> float:
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def poisson_quantile(mu: np.ndarray, confidence: float, *, cap: np.ndarray | None = None) -> np.ndarray:
    """Returns the smallest n with P(N <= n) >= confidence, N ~ Poisson(mu), elementwise (float;
    inf where it exceeds `cap`, when given — the caller only needs to know it is above the cap).

    Exact for mu <= 30 (iterating k over a shrinking set of unfinished rows, so the work is
    proportional to the quantiles, not to a fixed k range); normal approximation above.
    """
    mu = np.asarray(mu, dtype=np.float64)
    q = np.full(mu.shape, np.inf)
    small = np.flatnonzero(mu <= 30)
    big = np.flatnonzero(mu > 30)
    if big.size:
        z = _normal_quantile(confidence)
        q[big] = np.maximum(0.0, np.ceil(mu[big] + z * np.sqrt(mu[big]) - 0.5))
    if small.size:
        idx = small
        m = mu[idx]
        term = np.exp(-m)
        cdf = term.copy()
        limit = cap[idx] if cap is not None else np.full(idx.shape, 200.0)
        k = 0
        while idx.size:
            done = cdf >= confidence
            q[idx[done]] = k
            keep = ~done & (limit > k) & (k < 200)
            idx, m, term, cdf, limit = idx[keep], m[keep], term[keep], cdf[keep], limit[keep]
            k += 1
            term = term * m / k
            cdf = cdf + term
    if cap is not None:
        q = np.where(q > cap, np.inf, q)
    return q


def _pareto(cand: pl.DataFrame, within: list[str]) -> pl.DataFrame:
    """Returns the candidates no other candidate of the same (gpus, precision, *within) dominates.

    A dominates B when it is no dearer per hour, no slower, has no less usable memory and no
    higher preemption rate (on-demand counts as rate 0): then for every workload A fits where B
    fits, costs no more and finishes no later with no more risk to the deadline — so pruning B is
    exact. Ties keep the lower candidate id. Done per class (`within`, e.g. spot vs on-demand) so
    that "all spot" / "all on-demand" alternatives stay exact.
    """
    on = ["gpus", "precision", *within]
    a = cand.select(*on, "cand", "usd_per_hour", "flops_per_hour", "usable_memory_gib", "preemptions_per_hour")
    pairs = a.join(a, on=on, how="inner", suffix="_b").filter(
        (pl.col("cand") != pl.col("cand_b"))
        & (pl.col("usd_per_hour") <= pl.col("usd_per_hour_b"))
        & (pl.col("flops_per_hour") >= pl.col("flops_per_hour_b"))
        & (pl.col("usable_memory_gib") >= pl.col("usable_memory_gib_b"))
        & (pl.col("preemptions_per_hour") <= pl.col("preemptions_per_hour_b"))
        & (
            (pl.col("usd_per_hour") < pl.col("usd_per_hour_b"))
            | (pl.col("flops_per_hour") > pl.col("flops_per_hour_b"))
            | (pl.col("usable_memory_gib") > pl.col("usable_memory_gib_b"))
            | (pl.col("preemptions_per_hour") < pl.col("preemptions_per_hour_b"))
            | (pl.col("cand") < pl.col("cand_b"))
        )
    )
    dominated = pairs.select(pl.col("cand_b").alias("cand"), *[pl.col(c) for c in on if c != "spot"], *(["spot"] if "spot" in on else [])).unique()
    return cand.join(dominated, on=["cand", *[c for c in on if c != "spot"], *(["spot"] if "spot" in on else [])], how="anti")


#: Candidate columns carried through the big (estimate key × candidate) frame: numbers only.
_NUMERIC_CAND = ["cand", "gpus", "acc_id", "spot", "usd_per_hour", "preemptions_per_hour", "usable_memory_gib", "flops_per_hour"]


def scored_candidates(estimates: pl.DataFrame, candidates: pl.DataFrame, accel: pl.DataFrame, settings: PlanSettings,
                      *, prune_within: Sequence[str] = ("spot",)) -> pl.DataFrame:
    """Returns every (estimate key × candidate) whose memory fits, with:

    usable_memory_gib = memory_gib × safety − reserve;
    compute_hours = flops_total / (gpus × peak × 1e12 × mfu × scaling_efficiency[sharding]) / 3600;
    on-demand: est_hours = T0 = overhead + compute; spot: lost = checkpoint_interval/2 (or
      compute/2 without checkpoints), per_preemption = restart + lost,
      est_hours = T0 + rate × T0 × per_preemption (first order: rework is not itself preempted);
    est_cost_usd = usd_per_hour × est_hours;
    deadline_ok: on-demand T0 <= deadline; spot P(N <= n_allowed) >= confidence with
      N ~ Poisson(rate × T0) and n_allowed = floor((deadline − T0) / per_preemption).

    `estimates` has one row per distinct `key` (gpus, sharding, precision, est_memory_gib,
    flops_total); `candidates` comes from `candidate_offers` with a `cand` id. Only numeric columns
    travel through this frame (the big one); strings are joined back after the choice.
    Candidates dominated within their `prune_within` class are dropped first (see `_pareto`).
    """
    s = settings
    acc_ids = accel.select("accelerator").unique(maintain_order=True).with_row_index("acc_id")
    cand = (
        candidates.join(acc_ids, on="accelerator", how="inner")
        .join(accel, on="accelerator", how="inner")
        .with_columns(
            usable_memory_gib=pl.col("memory_gib") * s.memory_safety_fraction - s.memory_reserve_gib,
            flops_per_hour=pl.col("gpus") * pl.col("peak_tflops") * 1e12 * pl.col("mfu") * 3600.0,
        )
        .select(*_NUMERIC_CAND, "precision")
    )
    cand = _pareto(cand, list(prune_within))
    keys = estimates.select(
        "key", "gpus", "precision", "est_memory_gib", "flops_total",
        eff=pl.col("sharding").replace_strict(SCALING_EFFICIENCY, default=0.85, return_dtype=pl.Float64),
    )
    compute = pl.col("flops_total") / (pl.col("flops_per_hour") * pl.col("eff"))
    t0 = pl.lit(s.overhead_h) + pl.col("compute_hours")
    lost = pl.lit(s.checkpoint_interval_h / 2) if s.checkpoint_interval_h is not None else pl.col("compute_hours") / 2
    per_pre = pl.lit(s.restart_h) + lost
    rate = pl.col("preemptions_per_hour")
    df = (
        keys.lazy()
        .join(cand.lazy(), on=["gpus", "precision"], how="inner")
        .filter(pl.col("est_memory_gib") <= pl.col("usable_memory_gib"))
        .with_columns(compute_hours=compute)
        .with_columns(t0_hours=t0, per_preemption_hours=per_pre)
        .with_columns(
            est_hours=pl.when(pl.col("spot")).then(pl.col("t0_hours") * (1 + rate * pl.col("per_preemption_hours"))).otherwise(pl.col("t0_hours")),
            expected_preemptions=rate * pl.col("t0_hours"),
        )
        .with_columns(est_cost_usd=pl.col("usd_per_hour") * pl.col("est_hours"))
        .drop("precision", "flops_per_hour", "eff", "flops_total")
        .collect()
    )
    if s.deadline_h is None:
        return df.with_columns(deadline_ok=pl.lit(True))
    dl = s.deadline_h
    ok = df["t0_hours"].to_numpy() <= dl
    spot = df["spot"].to_numpy()
    check = np.flatnonzero(ok & spot & (df["expected_preemptions"].to_numpy() > 0))
    if check.size:
        t0v = df["t0_hours"].to_numpy()[check]
        n_allowed = np.floor((dl - t0v) / df["per_preemption_hours"].to_numpy()[check])
        q = poisson_quantile(df["expected_preemptions"].to_numpy()[check], s.deadline_confidence, cap=n_allowed)
        ok = ok.copy()
        ok[check] = q <= n_allowed
    return df.with_columns(deadline_ok=pl.Series(ok))


# --------------------------------------------------------------------------------------------
# Step 5: the choice, the schedule, the what-if


def list_schedule(durations: Sequence[float] | np.ndarray, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns (start, slot) per job: greedy list scheduling of jobs in the given order on `slots`
    identical slots (each job starts on the slot that frees first; ties → lowest slot)."""
    d = np.asarray(durations, dtype=np.float64)
    n = len(d)
    k = max(1, int(slots))
    if n <= k:
        return np.zeros(n), np.arange(n, dtype=np.int64)
    if k == 1:
        return np.concatenate([[0.0], np.cumsum(d)[:-1]]), np.zeros(n, dtype=np.int64)
    dl = d.tolist()
    start = [0.0] * n
    slot = list(range(k)) + [0] * (n - k)
    heap = [(dl[i], i) for i in range(k)]
    heapq.heapify(heap)
    replace_ = heapq.heapreplace
    for j in range(k, n):
        free_at, s_ = heap[0]
        start[j] = free_at
        slot[j] = s_
        replace_(heap, (free_at + dl[j], s_))
    return np.asarray(start), np.asarray(slot, dtype=np.int64)


def what_if_curve(
    durations_h: Sequence[float],
    costs_usd: Sequence[float],
    *,
    target_index: int | None = None,
    ks: Sequence[int] = WHAT_IF_KS,
    stop_at_target: bool = True,
    _schedules: dict[int, tuple[np.ndarray, np.ndarray]] | None = None,
) -> list[dict[str, float]]:
    """Returns [{parallel: K, time_to_recipe_hours, cost_usd}] for each K in `ks`.

    Trials are given in launch order and run by greedy list scheduling on K slots (a trial starts
    as soon as a slot is free). The "recipe" trial is `target_index` (the first trial to reach
    `objective.target`, or the best trial).
    - time_to_recipe_hours(K) = the moment the recipe trial finishes (start + duration); it never
      rises with K (list scheduling of independent trials in a fixed order: a trial's start time
      cannot increase when slots are added).
    - cost_usd(K), with `stop_at_target` (the sweep stops launching once the target is reached):
      the cost of every trial started before the recipe trial finished; trials in flight at that
      moment run to completion and are paid in full (the waste of parallelism: more slots start
      more trials that turn out to be unnecessary). Without `stop_at_target`, every trial runs:
      cost = the sum of all costs for every K.
    With `target_index=None` (unknown before running) both are expectations under a uniform prior
    over which trial is the recipe: the mean over every possible recipe position.
    """
    d = np.asarray(durations_h, dtype=np.float64)
    c = np.asarray(costs_usd, dtype=np.float64)
    n = len(d)
    if n == 0:
        return [{"parallel": int(k), "time_to_recipe_hours": 0.0, "cost_usd": 0.0} for k in ks]
    if len(c) != n:
        raise ValueError("durations_h and costs_usd must have the same length")
    if target_index is not None and not 0 <= target_index < n:
        raise ValueError(f"target_index {target_index} is outside 0..{n - 1}")
    cum = np.concatenate([[0.0], np.cumsum(c)])
    out = []
    for k in ks:
        cached = (_schedules or {}).get(int(k))
        start = cached[0] if cached is not None else list_schedule(d, k)[0]
        finish = start + d
        # starts are non-decreasing in launch order under list scheduling: count by binary search
        started_before = np.searchsorted(start, finish, side="left")
        # the recipe trial itself always counts, whatever its own start
        started_before = np.maximum(started_before, np.arange(1, n + 1))
        cost_if = cum[started_before] if stop_at_target else np.full(n, cum[-1])
        if target_index is None:
            t, cost = float(finish.mean()), float(cost_if.mean())
        else:
            t, cost = float(finish[target_index]), float(cost_if[target_index])
        out.append({"parallel": int(k), "time_to_recipe_hours": round(t, 6), "cost_usd": round(cost, 6)})
    return out


def _infeasible_reasons(estimates: pl.DataFrame, candidates: pl.DataFrame, accel: pl.DataFrame, settings: PlanSettings) -> pl.DataFrame:
    """Returns trial_id, reason for trials with no fitting candidate."""
    usable = (
        candidates.select("accelerator", "gpus").unique()
        .join(accel.select("accelerator", "memory_gib").unique("accelerator"), on="accelerator")
        .with_columns(usable=pl.col("memory_gib") * settings.memory_safety_fraction - settings.memory_reserve_gib)
    )
    best = usable.sort("usable", descending=True).group_by("gpus", maintain_order=True).first()
    largest = usable.sort("usable", descending=True).head(1)
    per_trial = (
        estimates.sort("est_memory_gib", nulls_last=True)
        .group_by("trial_id", maintain_order=True)
        .agg(pl.col("est_memory_gib").first(), pl.col("gpus").first(), pl.col("sharding").first(), pl.col("est_error").drop_nulls().first())
        .join(best.select("gpus", pl.col("accelerator").alias("best_acc"), pl.col("usable").alias("best_usable")), on="gpus", how="left")
    )
    la, lu = (largest["accelerator"][0], largest["usable"][0]) if largest.height else (None, None)
    reasons = []
    for r in per_trial.iter_rows(named=True):
        if r["est_memory_gib"] is None:
            reasons.append(r["est_error"] or "no estimate")
        elif la is None:
            reasons.append("no offer for the candidate accelerators in the chosen clouds/regions")
        else:
            acc, us = (r["best_acc"], r["best_usable"]) if r["best_acc"] else (la, lu)
            where = f" ({r['gpus']} GPU{'s' if r['gpus'] > 1 else ''}, {r['sharding']})"
            reasons.append(f"needs {r['est_memory_gib']:.1f} GiB per GPU{where}; largest candidate {acc} has {us:.1f} GiB usable")
    return pl.DataFrame({"trial_id": per_trial["trial_id"], "reason": reasons}, schema={"trial_id": pl.String, "reason": pl.String})


def _fmt_usd(x: float) -> str:
    return f"${x:,.2f}"


def _pick(frame: pl.DataFrame, by: str) -> pl.DataFrame:
    """Returns one row per `by`: deadline met first, then the lowest cost, then fewer hours (a
    single score and an arg-min per group: no sort of the big frame). For the dense integer `key`
    the arg-min is done with numpy (`np.minimum.at`), else with a polars group-by."""
    if frame.is_empty():
        return frame
    cost = frame["est_cost_usd"].to_numpy()
    big = float(np.nanmax(cost)) * 2 + 1.0
    score = cost + np.where(frame["deadline_ok"].to_numpy(), 0.0, big) + frame["est_hours"].to_numpy() * 1e-9
    if by == "key":
        key = frame["key"].to_numpy().astype(np.int64)
        best = np.full(int(key.max()) + 1, np.inf)
        np.minimum.at(best, key, score)
        hit = np.flatnonzero(score <= best[key])
        _, first = np.unique(key[hit], return_index=True)
        return frame[np.sort(hit[first])]
    rows = (
        frame.select(by).with_columns(_score=pl.Series(score)).with_row_index("_row")
        .group_by(by).agg(pl.col("_row").get(pl.col("_score").arg_min()))
    )["_row"].sort()
    return frame[rows.to_numpy()]


_OUT_COLS = [
    "trial_id", "trial_index", "accelerator", "gpus", "sharding", "cloud", "region", "instance_type", "spot",
    "est_memory_gib", "usable_memory_gib", "compute_hours", "est_hours", "est_cost_usd", "usd_per_hour",
    "on_demand_usd_per_hour", "preemptions_per_hour", "expected_preemptions", "deadline_ok", "price_source", "price_as_of",
    "feasible", "reason",
]


def plan_from_estimates(
    estimates: pl.DataFrame,
    offers: pl.DataFrame,
    settings: PlanSettings,
    *,
    trials_meta: pl.DataFrame | None = None,
    accel: pl.DataFrame | None = None,
    extra_assumptions: Sequence[str] = (),
) -> Plan:
    """Returns the Plan: per trial the cheapest (gpus, offer, spot) that meets the deadline (else
    the cheapest that fits, with reason "misses deadline"), or infeasible with the reason; then the
    LPT schedule on `max_parallel` slots, totals, the what-if curve and the alternatives the budget
    guard quotes.

    `estimates`: trial_id, gpus, sharding, est_memory_gib, flops_total (+ optional trial_index,
    precision, est_error). `offers`: the columns of `load_offers`. `trials_meta`: trial_id,
    params (JSON text) — for the output. `accel`: the `accelerator_table` (default: from the
    catalog for the offers' accelerators).
    """
    s = settings
    est = estimates
    if "spot_suspicious" not in offers.columns:
        from gpuledger.catalog.offers import spot_suspicious_expr

        offers = offers.with_columns(spot_suspicious=spot_suspicious_expr())
    if "precision" not in est.columns:
        est = est.with_columns(precision=pl.lit(s.precision))
    if "est_error" not in est.columns:
        est = est.with_columns(est_error=pl.lit(None, dtype=pl.String))
    if "trial_index" not in est.columns:
        idx = est.select("trial_id").unique(maintain_order=True).with_row_index("trial_index").with_columns(pl.col("trial_index").cast(pl.Int64))
        est = est.join(idx, on="trial_id", how="left")
    est = est.with_columns(pl.col("gpus").cast(pl.Int64), pl.col("est_memory_gib").cast(pl.Float64), pl.col("flops_total").cast(pl.Float64))
    if accel is None:
        accel = accelerator_table(offers["accelerator"].unique().to_list(), est["precision"].unique().to_list(), s.method)
    snapshot = offers["price_snapshot"][0] if "price_snapshot" in offers.columns and offers.height else None
    if snapshot is None:
        from gpuledger.catalog.offers import price_snapshot_id

        snapshot = price_snapshot_id(offers)
    candidates = candidate_offers(offers, est["gpus"].unique().to_list(), s).with_row_index("cand")

    # distinct estimate keys: identical workloads are scored once
    key_cols = ["gpus", "sharding", "precision", "est_memory_gib", "flops_total"]
    keys = est.filter(pl.col("est_memory_gib").is_not_null()).select(key_cols).unique().with_row_index("key")
    scored = scored_candidates(keys, candidates, accel, s)

    spot_allowed = {"auto": None, "always": True, "never": False}[s.spot]
    pool = scored if spot_allowed is None else scored.filter(pl.col("spot") == spot_allowed)
    best_per_key = _pick(pool, "key") if pool.height else pool
    trial_key = est.join(keys, on=key_cols, how="inner").select("trial_id", "trial_index", "key", "sharding", "est_memory_gib")
    per_trial = _pick(trial_key.join(best_per_key.drop("gpus", "est_memory_gib"), on="key", how="inner"), "trial_id")
    cand_strings = candidates.select(
        "cand", "accelerator", "cloud", "region", "instance_type", "on_demand_usd_per_hour", "price_source", "price_as_of"
    )
    per_trial = per_trial.join(cand_strings, on="cand", how="left").join(candidates.select("cand", "gpus"), on="cand", how="left")

    trial_ids = est.select("trial_id", "trial_index").unique("trial_id", keep="first")
    missing = trial_ids.join(per_trial.select("trial_id"), on="trial_id", how="anti")
    dl = s.deadline_h
    feasible = per_trial.with_columns(
        feasible=pl.lit(True),
        reason=pl.when(pl.col("deadline_ok")).then(pl.lit(None, dtype=pl.String)).otherwise(
            pl.lit("misses deadline: ") + pl.col("est_hours").round(2).cast(pl.String) + pl.lit(f" h > {dl if dl is None else round(dl, 2)} h")
            + pl.when(pl.col("spot")).then(pl.lit(f" at {s.deadline_confidence:.0%} confidence")).otherwise(pl.lit(""))
        ),
    ).select(_OUT_COLS)
    if missing.height:
        reasons = _infeasible_reasons(est.join(missing, on="trial_id", how="semi"), candidates, accel, s)
        if spot_allowed is True:
            reasons = reasons.with_columns(reason=pl.col("reason") + pl.lit("; spot: always and no trustworthy spot offer fits"))
        min_mem = est.join(missing, on="trial_id", how="semi").sort("est_memory_gib", nulls_last=True).group_by("trial_id", maintain_order=True).first()
        infeas = missing.join(reasons, on="trial_id").join(min_mem.select("trial_id", "gpus", "sharding", "est_memory_gib"), on="trial_id", how="left").with_columns(
            feasible=pl.lit(False), spot=pl.lit(False), deadline_ok=pl.lit(False),
        )
        infeas = pl.concat([feasible.clear(), infeas], how="diagonal_relaxed").select(_OUT_COLS)
        table = pl.concat([feasible, infeas], how="vertical_relaxed")
    else:
        table = feasible

    # schedule: LPT (longest first) list scheduling on max_parallel slots
    k = max(1, int(s.max_parallel))
    feas = table.filter(pl.col("feasible")).sort(["est_hours", "trial_index"], descending=[True, False])
    durations = feas["est_hours"].to_numpy()
    costs = feas["est_cost_usd"].to_numpy()
    start, slot = list_schedule(durations, k)
    makespan = float((start + durations).max()) if len(durations) else 0.0
    table = table.join(pl.DataFrame({"trial_id": feas["trial_id"], "start_hours": start, "slot": slot}), on="trial_id", how="left")
    total = float(costs.sum()) if len(costs) else 0.0
    what_if = what_if_curve(durations, costs, stop_at_target=s.target is not None, _schedules={k: (start, slot)})
    alternatives = _alternatives(scored, trial_key, candidates, accel, table, s, total,
                                 rescore=lambda: _min_cost_by_key_accelerator(keys, candidates, accel, s))

    if trials_meta is not None:
        table = table.join(trials_meta.select("trial_id", "params"), on="trial_id", how="left")
    else:
        table = table.with_columns(params=pl.lit("{}"))
    round_cols = {"est_memory_gib": 3, "usable_memory_gib": 3, "compute_hours": 5, "est_hours": 5, "est_cost_usd": 4,
                  "start_hours": 5, "expected_preemptions": 4}
    table = table.with_columns([pl.col(c).round(n) for c, n in round_cols.items()]).sort("trial_index")

    assumptions = list(extra_assumptions) + _assumptions(s, candidates, offers, accel)
    if dl is not None and len(durations):
        if makespan <= dl:
            assumptions.append(f"deadline: each trial's choice must finish within {dl:g} h; the whole sweep's makespan "
                               f"{makespan:.2f} h on {k} slot(s) meets it too")
        else:
            need = next((kk for kk in (2**i for i in range(0, 11)) if kk > k
                         and float((list_schedule(durations, kk)[0] + durations).max()) <= dl), None)
            hint = f"; {need} slots would meet it" if need else "; no parallelism up to 1024 slots meets it"
            assumptions.append(f"WARNING deadline: the sweep's makespan {makespan:.2f} h on {k} slot(s) exceeds the "
                               f"{dl:g} h deadline{hint} (resources.max_parallel)")
    return Plan(
        sweep=s.sweep,
        trials_frame=table,
        total_est_cost_usd=total,
        makespan_hours=makespan,
        max_parallel=k,
        budget_usd=s.budget_usd,
        within_budget=total <= s.budget_usd,
        price_snapshot=snapshot,
        what_if=what_if,
        assumptions=assumptions,
        launcher=s.launcher,
        launch_order=feas["trial_id"].to_list(),
        alternatives=alternatives,
        deadline_hours=dl,
    )


def _alternatives(scored, trial_key, candidates, accel, table, s: PlanSettings, total: float, rescore=None) -> dict[str, Any]:
    """Totals the budget guard quotes: fewer trials, all spot, all on-demand, one accelerator."""
    out: dict[str, Any] = {}
    feas = table.filter(pl.col("feasible"))
    costs = np.sort(feas["est_cost_usd"].to_numpy())
    out["trials_within_budget"] = int(np.searchsorted(np.cumsum(costs), s.budget_usd, side="right")) if len(costs) else 0
    out["trials_feasible"] = int(feas.height)
    out["top_cost_drivers"] = _top_drivers(feas, total)
    if not scored.height or total <= s.budget_usd:
        # the cheaper alternatives are only quoted by the budget guard, i.e. when over budget
        return out
    if rescore is not None:  # per-accelerator totals need candidates pruned within each accelerator
        reduced = rescore()
    else:
        reduced = scored
    tk_key = trial_key["key"].to_numpy().astype(np.int64)
    tk_trial = trial_key["trial_id"].rank("dense").to_numpy().astype(np.int64) - 1
    n_keys, n_trials = int(tk_key.max()) + 1, int(tk_trial.max()) + 1
    r_key = reduced["key"].to_numpy().astype(np.int64)
    r_cost = reduced["est_cost_usd"].to_numpy()
    r_spot = reduced["spot"].to_numpy()
    r_acc = reduced["acc_id"].to_numpy()

    def total_for(mask: np.ndarray) -> tuple[float, int]:
        per_key = np.full(n_keys, np.inf)
        np.minimum.at(per_key, r_key[mask], r_cost[mask])
        per_trial = np.full(n_trials, np.inf)
        np.minimum.at(per_trial, tk_trial, per_key[tk_key])
        ok = np.isfinite(per_trial)
        return float(per_trial[ok].sum()), int(ok.sum())

    everything = np.ones(len(r_key), dtype=bool)
    cheapest, n = total_for(everything)
    out["cheapest_ignoring_deadline_usd"] = {"total_usd": round(cheapest, 2), "trials": n}
    for name, mask in (("all_spot_usd", r_spot), ("all_on_demand_usd", ~r_spot)):
        if mask.any():
            t, n = total_for(mask)
            out[name] = {"total_usd": round(t, 2), "trials": n}
    names = accel.select("accelerator").unique(maintain_order=True).with_row_index("acc_id")
    by_acc = {}
    for acc_id, acc in names.iter_rows():
        mask = r_acc == acc_id
        if mask.any():
            t, n = total_for(mask)
            by_acc[acc] = {"total_usd": round(t, 2), "trials": n, "of": int(feas.height)}
    out["by_accelerator"] = dict(sorted(by_acc.items()))
    return out


def _min_cost_by_key_accelerator(keys: pl.DataFrame, candidates: pl.DataFrame, accel: pl.DataFrame, s: PlanSettings) -> pl.DataFrame:
    """Returns key, acc_id, spot, est_cost_usd rows from which the cheapest expected cost of each
    estimate key on each accelerator, spot and on-demand apart, can be taken (deadline ignored) —
    for the guard's alternatives. Same formulas as `scored_candidates`, candidates pruned within
    (spot, accelerator) so that no accelerator loses its rows to another."""
    scored = scored_candidates(keys, candidates, accel, s.__class__(**{**s.__dict__, "deadline_h": None}),
                               prune_within=("spot", "acc_id"))
    return scored.select("key", "acc_id", "spot", "est_cost_usd")


def _top_drivers(feas: pl.DataFrame, total: float) -> list[dict[str, Any]]:
    drivers = (
        feas.group_by("accelerator", "gpus", "spot", "instance_type")
        .agg(pl.len().alias("trials"), pl.col("est_cost_usd").sum().alias("cost_usd"), pl.col("est_hours").sum().alias("hours"))
        .sort("cost_usd", descending=True)
        .head(3)
    )
    return [
        {**r, "cost_usd": round(r["cost_usd"], 2), "hours": round(r["hours"], 3), "share": round(r["cost_usd"] / total, 4) if total else 0.0}
        for r in drivers.iter_rows(named=True)
    ]


def _assumptions(s: PlanSettings, candidates: pl.DataFrame, offers: pl.DataFrame, accel: pl.DataFrame) -> list[str]:
    local = s.launcher == "local"
    a = []
    if not local:
        a.append(f"usable GPU memory = nvidia-smi total × {s.memory_safety_fraction} − {s.memory_reserve_gib} GiB "
                 "(fragmentation, NCCL/cuBLAS buffers); a trial fits when the estimator's device-level memory is within it")
    a.append(f"overhead per trial: provisioning {s.provisioning_h * 60:.1f} min + set-up {s.setup_h * 60:.1f} min, billed")
    if not local:
        a += [
            "compute time = FLOPs / (GPUs × dense peak × MFU × multi-GPU efficiency "
            + ", ".join(f"{k} {v}" for k, v in SCALING_EFFICIENCY.items() if k != "none") + ")",
            "an instance is paid whole: a trial on an instance with more GPUs than it uses pays for all of them (no packing)",
            SHARDING_RULE,
        ]
        if not accel.is_empty():
            a.append("MFU from " + ", ".join(sorted(set(accel["mfu_source"].to_list()))))
    if s.spot != "never":
        ck = (f"half the checkpoint interval ({s.checkpoint_interval_h} h)" if s.checkpoint_interval_h is not None
              else "half the trial's compute (trials are not assumed to checkpoint)")
        a.append(
            f"spot: expected hours = T0 + rate × T0 × (restart {s.restart_h * 60:.0f} min + lost work = {ck}); "
            f"chosen only when cheaper AND the deadline holds at {s.deadline_confidence:.0%} confidence "
            "(preemptions ~ Poisson(rate × T0))"
        )
        rates = candidates.filter(pl.col("spot")).select("cloud", "accelerator", "preemptions_per_hour", "preemption_source").unique().sort("cloud", "accelerator")
        for r in rates.head(12).iter_rows(named=True):
            a.append(f"preemption rate {r['cloud']}/{r['accelerator']}: {r['preemptions_per_hour']:g}/h ({r['preemption_source']})")
        if rates.height > 12:
            a.append(f"... and {rates.height - 12} more (cloud, accelerator) preemption rates from gpuledger/catalog/preemption.csv")
        sus = offers.filter(pl.col("spot_suspicious"))
        if sus.height:
            a.append(f"{sus.height} spot prices flagged suspicious (exactly 10% of on-demand, spot >= on-demand, "
                     "or below 8%) and not used: those offers are planned on-demand only")
    if s.spot == "always":
        a.append("spot: always (spec) — only spot offers considered")
    elif s.spot == "never" and not local:
        a.append("spot: never (spec) — only on-demand offers considered")
    if s.target is not None:
        a.append("what-if: the sweep stops launching once objective.target is reached; trials in flight then run "
                 "to completion and are paid; which trial reaches it is unknown, so time and cost are averaged "
                 "over every position (uniform prior), trials launched longest first")
    else:
        a.append("what-if: no objective.target, every trial runs (cost is the same for every K); time-to-recipe is "
                 "averaged over which trial turns out best (uniform prior), trials launched longest first")
    if not offers.is_empty() and not local:
        srcs = offers.select("source", "as_of").unique().sort("source")
        for r in srcs.head(8).iter_rows(named=True):
            a.append(f"prices: {r['source']} (as of {r['as_of']})")
    return a


# --------------------------------------------------------------------------------------------
# Local launcher: this machine is the one offer


_MATMUL_PROBE = """
import math, sys, time
import numpy as np
n, budget = int(sys.argv[1]), float(sys.argv[2])
a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
a @ b
best, reps = math.inf, 0
end = time.perf_counter() + budget
while reps < 5 or (time.perf_counter() < end and reps < 5000):
    t0 = time.perf_counter()
    a @ b
    best = min(best, time.perf_counter() - t0)
    reps += 1
print(2 * n**3 / max(best, 1e-9) / 1e9)
"""


@functools.cache
def measured_matmul_gflops(n: int = 256, budget_s: float = 0.3) -> float:
    """Returns one core's float32 matmul rate on this machine in GFLOP/s, measured once per process:
    the best of repeated n×n matmuls (at least 5, for up to `budget_s` s) in a child Python with
    BLAS pinned to one thread (as the demo trainer pins itself; a multi-threaded BLAS collapses
    under other load). The best sample is taken because other load only ever slows it down."""
    import subprocess
    import sys

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    try:
        out = subprocess.run([sys.executable, "-c", _MATMUL_PROBE, str(n), str(budget_s)], env=env,
                             capture_output=True, text=True, timeout=60, check=True)
        return float(out.stdout.strip())
    except (OSError, subprocess.SubprocessError, ValueError):
        a = np.ones((n, n), dtype=np.float32)
        t0 = _time.perf_counter()
        a @ a
        return 2 * n**3 / max(_time.perf_counter() - t0, 1e-9) / 1e9


def local_offer(usd_per_hour: float = 0.0) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """Returns (offers, accelerator table, facts) for this machine: one offer `local/CPU` at the
    local hourly rate, memory = LOCAL_MEMORY_FRACTION × available RAM, peak = measured matmul rate."""
    import datetime as _dt
    import socket

    import psutil

    vm = psutil.virtual_memory()
    cores = psutil.cpu_count(logical=False) or psutil.cpu_count() or 1
    gflops = measured_matmul_gflops()
    avail_gib = vm.available / 2**30
    total_gib = vm.total / 2**30
    today = _dt.date.today().isoformat()
    offers = pl.DataFrame(
        [{
            "cloud": "local", "region": "local", "instance_type": socket.gethostname() or "this-machine",
            "accelerator": "CPU", "accelerator_count": 1, "usd_per_hour_on_demand": float(usd_per_hour),
            "usd_per_hour_spot": None, "vcpus": float(cores), "memory_gib": round(total_gib, 2),
            "source": "this machine (psutil); local.usd_per_hour" + (" (default 0: not billed)" if usd_per_hour == 0 else ""),
            "as_of": today,
        }],
        schema={"cloud": pl.String, "region": pl.String, "instance_type": pl.String, "accelerator": pl.String,
                "accelerator_count": pl.Int64, "usd_per_hour_on_demand": pl.Float64, "usd_per_hour_spot": pl.Float64,
                "vcpus": pl.Float64, "memory_gib": pl.Float64, "source": pl.String, "as_of": pl.String},
    )
    from gpuledger.catalog.offers import price_snapshot_id

    offers = offers.with_columns(spot_suspicious=pl.lit(False), price_snapshot=pl.lit(price_snapshot_id(offers)))
    # usable = memory_gib × safety − reserve in scoring; express LOCAL_MEMORY_FRACTION of available RAM
    mem_for_table = (avail_gib * LOCAL_MEMORY_FRACTION + MEMORY_RESERVE_GIB) / MEMORY_SAFETY_FRACTION
    facts = {"cores": int(cores), "available_gib": avail_gib, "total_gib": total_gib, "gflops": gflops,
             "usable_gib": avail_gib * LOCAL_MEMORY_FRACTION}
    return offers, mem_for_table, facts


def _local_accel(precisions: Sequence[str], mem_for_table: float, gflops: float) -> pl.DataFrame:
    return pl.DataFrame(
        [{"accelerator": "CPU", "precision": p, "memory_gib": mem_for_table, "peak_tflops": gflops / 1000.0,
          "mfu": LOCAL_CPU_EFFICIENCY, "mfu_source": f"measured numpy float32 matmul {gflops:.1f} GFLOP/s × efficiency {LOCAL_CPU_EFFICIENCY}"}
         for p in dict.fromkeys(precisions)],
        schema={"accelerator": pl.String, "precision": pl.String, "memory_gib": pl.Float64, "peak_tflops": pl.Float64, "mfu": pl.Float64, "mfu_source": pl.String},
    )


# --------------------------------------------------------------------------------------------
# The whole thing for one spec


def settings_for(spec, *, max_parallel: int | None = None, launcher: str | None = None,
                 measured_preemption: dict | None = None) -> PlanSettings:
    """Returns the PlanSettings a sweep spec implies (launcher and max_parallel overridable)."""
    r = spec.resources
    launcher = launcher or spec.launcher
    local = launcher == "local"
    return PlanSettings(
        sweep=_sweep_id(spec),
        method=spec.method,
        precision=spec.precision,
        launcher=launcher,
        spot="never" if local else r.spot,
        deadline_h=spec.budget.deadline_s / 3600 if spec.budget.deadline_s else None,
        deadline_confidence=r.deadline_confidence,
        max_parallel=max_parallel or r.max_parallel,
        budget_usd=spec.budget.max_usd,
        provisioning_h=LOCAL_PROVISIONING_H if local else CLOUD_PROVISIONING_H,
        setup_h=LOCAL_SETUP_H if local else CLOUD_SETUP_H,
        preemption_per_hour=r.preemption_per_hour,
        measured_preemption=measured_preemption,
        target=spec.search.objective.target,
    )


def _sweep_id(spec) -> str:
    from gpuledger.spec import sweep_id_for

    return sweep_id_for(spec)


def _trials_meta(trials) -> pl.DataFrame:
    return pl.DataFrame(
        {"trial_id": [t.trial_id for t in trials], "params": [json.dumps(t.params, default=str) for t in trials]},
        schema={"trial_id": pl.String, "params": pl.String},
    )


def plan_sweep(
    spec,
    trials=None,
    *,
    offers: pl.DataFrame | None = None,
    max_parallel: int | None = None,
    launcher: str | None = None,
    measured_preemption: dict[tuple[str, str], tuple[float, float]] | None = None,
) -> Plan:
    """Returns the Plan of a sweep spec (pure: reads the catalog and, for `launcher: local`, this
    machine's RAM/cores and a one-off matmul timing; writes nothing, launches nothing).

    `offers`: a `load_offers` frame (default: `load_offers` filtered by the spec's clouds,
    accelerators and regions). `measured_preemption`: {(cloud, accelerator): (spot_hours,
    preemptions)} from the warehouse; used where spot_hours >= MEASURED_MIN_SPOT_HOURS.
    """
    from gpuledger.spec import SweepSpec, expand_trials

    if not isinstance(spec, SweepSpec):
        raise UserError(f"{spec.name} is a capacity spec; plan it with `gpuledger capacity SPEC`")
    if trials is None:
        trials = expand_trials(spec)
    s = settings_for(spec, max_parallel=max_parallel, launcher=launcher, measured_preemption=measured_preemption)
    meta = _trials_meta(trials)
    if s.launcher == "local":
        return _plan_local(spec, trials, s, meta, offers)
    from gpuledger.catalog.offers import load_offers

    r = spec.resources
    if offers is None:
        offers = load_offers(clouds=r.clouds, accelerators=r.accelerators or None, regions=r.regions)
    else:
        if r.clouds:
            offers = offers.filter(pl.col("cloud").is_in(r.clouds))
        if r.accelerators:
            offers = offers.filter(pl.col("accelerator").is_in(r.accelerators))
        if r.regions:
            offers = offers.filter(pl.col("region").is_in(r.regions))
    est = trial_estimates(spec, trials)
    notes = []
    if offers.is_empty():
        notes.append(f"no offers for accelerators {r.accelerators or 'any'} in clouds {r.clouds}"
                     + (f" regions {r.regions}" if r.regions else ""))
    return plan_from_estimates(est, offers, s, trials_meta=meta, extra_assumptions=notes)


def _plan_local(spec, trials, s: PlanSettings, meta: pl.DataFrame, offers: pl.DataFrame | None) -> Plan:
    local_offers, mem_for_table, facts = local_offer(spec.local.usd_per_hour)
    est = trial_estimates(spec, trials, gpu_counts=(1,), device="cpu")
    accel = _local_accel(est["precision"].unique().to_list(), mem_for_table, facts["gflops"])
    max_mem = est["est_memory_gib"].drop_nulls().max() if est.height else None
    cap_mem = int(facts["usable_gib"] // max_mem) if max_mem else s.max_parallel
    cap = max(1, min(s.max_parallel, facts["cores"], max(cap_mem, 1)))
    notes = [
        f"launcher local: the one offer is this machine ({facts['cores']} cores, {facts['total_gib']:.1f} GiB RAM, "
        f"{facts['available_gib']:.1f} GiB available; trials may use {LOCAL_MEMORY_FRACTION:.0%} of it), "
        f"billed at local.usd_per_hour = {spec.local.usd_per_hour:g}" + (" (default 0: not billed)" if spec.local.usd_per_hour == 0 else ""),
        f"CPU time = FLOPs / (measured numpy float32 matmul rate {facts['gflops']:.1f} GFLOP/s, one core, "
        f"measured once per process × efficiency {LOCAL_CPU_EFFICIENCY} for small-matrix training)",
        f"max_parallel {s.max_parallel} capped at {cap} (cores {facts['cores']}, memory fits "
        f"{cap_mem if max_mem else 'any'} trial(s) of {max_mem or 0:.2f} GiB)",
    ]
    s = replace(s, max_parallel=cap, spot="never")
    return plan_from_estimates(est, local_offers, s, trials_meta=meta, accel=accel, extra_assumptions=notes)


# --------------------------------------------------------------------------------------------
# Budget guard and rendering


def budget_guard(plan: Plan) -> None:
    """Raises BudgetExceeded (exit 3) when the plan's total is over its budget; the message gives
    the estimated total, the budget, the top cost drivers, and what would fit."""
    if plan.within_budget:
        return
    budget = plan.budget_usd or 0.0
    total = plan.total_est_cost_usd
    alt = plan.alternatives
    lines = [
        f"estimated cost {_fmt_usd(total)} exceeds the budget {_fmt_usd(budget)} "
        f"(by {_fmt_usd(total - budget)}) for {len(plan.feasible_trials)} trial(s) of sweep {plan.sweep}; nothing was launched.",
        "top cost drivers:",
    ]
    for d in alt.get("top_cost_drivers", []):
        lines.append(
            f"  {d['trials']} trial(s) on {d['gpus']}x {d['accelerator']} {'spot' if d['spot'] else 'on-demand'} "
            f"({d['instance_type']}): {_fmt_usd(d['cost_usd'])} ({d['share']:.0%}), {d['hours']:.2f} GPU-instance hours"
        )
    lines.append("what would fit:")
    n_fit = alt.get("trials_within_budget", 0)
    lines.append(f"  {n_fit} of {alt.get('trials_feasible', 0)} trial(s) fit the budget (cheapest first): shrink the grid "
                 "(fewer values, search.exclude, or strategy: random with n_trials)")
    for key, label in (("all_spot_usd", "spot for every trial (resources.spot: always)"),
                       ("cheapest_ignoring_deadline_usd", "the cheapest choice per trial, ignoring the deadline")):
        v = alt.get(key)
        if v and v["total_usd"] < total - 1e-9:
            fits = "fits" if v["total_usd"] <= budget else "still over"
            lines.append(f"  {label}: {_fmt_usd(v['total_usd'])} ({fits})")
    cheaper = sorted(
        ((a, v) for a, v in alt.get("by_accelerator", {}).items() if v["trials"] == v["of"] and v["total_usd"] < total - 1e-9),
        key=lambda kv: kv[1]["total_usd"],
    )
    for acc, v in cheaper[:2]:
        fits = "fits" if v["total_usd"] <= budget else "still over"
        lines.append(f"  every trial on {acc} (resources.accelerators: [{acc}]): {_fmt_usd(v['total_usd'])} ({fits})")
    lines.append(f"raise budget.max_usd to at least {_fmt_usd(math.ceil(total * 100) / 100)}, change the spec as above, "
                 "or pass --force to `gpuledger sweep` (recorded in the warehouse).")
    raise BudgetExceeded("\n".join(lines))


def render_plan(plan: Plan, *, max_rows: int = 60, width: int = 160) -> str:
    """Returns the plan as text: a table of trials, then totals, then the what-if curve."""
    import io

    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    con = Console(file=buf, width=width, force_terminal=False, color_system=None, no_color=True)
    t = Table(title=f"plan for {plan.sweep} ({len(plan.trials)} trials, launcher {plan.launcher})", show_lines=False)
    for col, just in (("#", "right"), ("trial", "left"), ("params", "left"), ("GPU", "left"), ("where", "left"),
                      ("spot", "left"), ("mem GiB", "right"), ("usable", "right"), ("hours", "right"), ("cost $", "right"), ("note", "left")):
        t.add_column(col, justify=just, overflow="fold")
    for r in plan.trials[:max_rows]:
        params = " ".join(f"{k}={v}" for k, v in r["params"].items())
        if r["feasible"]:
            t.add_row(str(r["trial_index"]), r["trial_id"], params, f"{r['gpus']}x {r['accelerator']} ({r['sharding']})",
                      f"{r['cloud']}/{r['region']} {r['instance_type']}", "yes" if r["spot"] else "no",
                      f"{r['est_memory_gib']:.2f}", f"{r['usable_memory_gib']:.2f}", f"{r['est_hours']:.3f}",
                      f"{r['est_cost_usd']:.2f}", r["reason"] or "")
        else:
            mem = r.get("est_memory_gib")
            t.add_row(str(r["trial_index"]), r["trial_id"], params, "-", "-", "-",
                      f"{mem:.2f}" if mem is not None else "-", "-", "-", "-", f"INFEASIBLE: {r['reason']}")
    con.print(t)
    if len(plan.trials) > max_rows:
        con.print(f"... {len(plan.trials) - max_rows} more trials (use --json for all)")
    infeasible = len(plan.trials) - len(plan.feasible_trials)
    budget = plan.budget_usd if plan.budget_usd is not None and math.isfinite(plan.budget_usd) else None
    con.print(
        f"total {_fmt_usd(plan.total_est_cost_usd)}"
        + (f" of budget {_fmt_usd(budget)} ({'within' if plan.within_budget else 'OVER'} budget)" if budget is not None else "")
        + f"; makespan {plan.makespan_hours:.2f} h on {plan.max_parallel} slot(s)"
        + (f"; deadline {plan.deadline_hours:.2f} h" if plan.deadline_hours else "")
        + f"; {len(plan.feasible_trials)} feasible, {infeasible} infeasible; prices {plan.price_snapshot}"
    )
    w = Table(title="what-if: parallel slots vs expected time-to-recipe and cost")
    for col in ("parallel", "time-to-recipe h", "cost $"):
        w.add_column(col, justify="right")
    for p in plan.what_if:
        w.add_row(str(p["parallel"]), f"{p['time_to_recipe_hours']:.3f}", f"{p['cost_usd']:.2f}")
    con.print(w)
    con.print("assumptions:")
    for a in plan.assumptions:
        con.print(f"  - {a}", soft_wrap=True)
    return buf.getvalue()


__all__ = [
    "Plan", "PlanSettings", "accelerator_table", "budget_guard", "candidate_offers", "list_schedule", "plan_from_estimates",
    "plan_sweep", "poisson_cdf", "render_plan", "scored_candidates", "settings_for", "trial_estimates", "what_if_curve",
]



def prices_used(plan_json: dict[str, Any]) -> list[dict[str, Any]]:
    """Returns the price rows a plan actually chose: one per distinct (cloud, region, instance type,
    accelerator, spot) among its feasible trials, with the hourly price, the on-demand price, the
    catalog source and date, and the plan's price snapshot id (the warehouse's `prices` table)."""
    seen: dict[tuple, dict[str, Any]] = {}
    for t in plan_json.get("trials", []):
        if not t.get("feasible"):
            continue
        key = (t.get("cloud"), t.get("region"), t.get("instance_type"), t.get("accelerator"), bool(t.get("spot")))
        row = seen.setdefault(key, {
            "cloud": key[0], "region": key[1], "instance_type": key[2], "accelerator": key[3], "spot": key[4],
            "usd_per_hour": t.get("usd_per_hour"), "on_demand_usd_per_hour": t.get("on_demand_usd_per_hour"),
            "source": t.get("price_source"), "as_of": t.get("price_as_of"),
            "price_snapshot": plan_json.get("price_snapshot"), "trial_gpus": t.get("gpus"), "trials": 0,
        })
        row["trials"] += 1
    return list(seen.values())
