"""Probes in the plan (pure): which trials share a shape, and a probed shape's measured time and memory.

A probe (`gpuledger probe`, docs/probes.md) runs one trial of a shape briefly on the planned
placement and measures its start-up apart from its steady rate (the warehouse's `v_probes`). Shape
= the workload's identity (model, method, precision, the trial program, the train settings but the
token budget) + placement (accelerator, GPU count, sharding) + micro-batch and sequence length: the
trials of a grid that differ only in learning rate, LoRA rank and the like share one probe.

A trial whose chosen placement has a probe of its shape is extrapolated from it:

    compute_s  = tokens_per_trial / tokens_per_s          (the probe's steady rate)
    est_wall_s = provisioning_s + startup_s + compute_s   (spot: + the expected rework, as measured runs)

where startup_s is the warm start-up: the least any probe of the shape took to its first step (on the
same host for local runs, whose caches persist: a first run may pay one-time work such as a model
download or the demo's pretraining that later runs find cached)
    est_memory_gib = the probe's peak (NVML device level on GPUs, RSS on the CPU)

with `est_basis` "probe RUN_ID DATE". A trial's own measured full run (`est_basis` "measured") wins
over a probe of its shape.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from gpuledger.plan.model import PlannedTrial

#: An RL probe's measured seconds per step by role and its rollout rate (v_probes; gpuledger/integrations/trl.py)
RL_ROLE_COLUMNS = ("rollout_s", "logprob_s", "reward_s", "train_s", "sync_s", "rl_step_s", "rollout_tokens_per_s")
#: The columns of the planner's probe input (named query `plan_probes`).
PROBE_SCHEMA = {"run_id": pl.String, "accelerator": pl.String, "gpus": pl.Int64, "hostname": pl.String,
                "probe_shape": pl.String, "startup_s": pl.Float64, "warm_startup_s": pl.Float64, "tokens_per_s": pl.Float64,
                "memory_gib": pl.Float64, "ended_at": pl.Datetime, "cpu_cores": pl.Float64, "step_s_p10": pl.Float64,
                "step_s_p50": pl.Float64, "step_s_p90": pl.Float64, "step_times": pl.Int64,
                **dict.fromkeys(RL_ROLE_COLUMNS, pl.Float64)}
#: Per trial and placement: what `apply_probes` takes (see `probes_for_trials`).
PROBED_SCHEMA = {"trial_id": pl.String, "accelerator": pl.String, "gpus": pl.Int64, "sharding": pl.String,
                 "startup_s": pl.Float64, "tokens_per_s": pl.Float64, "memory_gib": pl.Float64,
                 "tokens": pl.Float64, "basis": pl.String, "cpu_cores": pl.Float64,
                 "step_s_p10": pl.Float64, "step_s_p50": pl.Float64, "step_s_p90": pl.Float64, "steps": pl.Int64,
                 **dict.fromkeys(RL_ROLE_COLUMNS, pl.Float64)}
#: Placement keys of a shape (the rest is the workload's).
PLACEMENT_KEYS = ("accelerator", "gpus", "sharding")
PROBE_BASIS = "probe"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]


def workload_shape(spec, params: dict[str, Any]) -> dict[str, Any]:
    """Returns the placement-free part of a trial's shape: model, method, precision, micro_batch, seq_len
    (search params override the spec's train fields), and hashes of the trial program (task.run and
    task.setup templates) and of the train settings but tokens_per_trial, micro_batch and seq_len."""
    t = spec.train
    train = {k: v for k, v in t.model_dump(mode="json").items() if k not in ("tokens_per_trial", "micro_batch", "seq_len")}
    return {
        "model": spec.model,
        "method": spec.method,
        "precision": str(params.get("precision", spec.precision)),
        "micro_batch": int(params.get("micro_batch", t.micro_batch)),
        "seq_len": int(params.get("seq_len", t.seq_len)),
        "program": _digest([spec.task.run, spec.task.setup]),
        "train": _digest(train),
    }


def trial_shape(spec, params: dict[str, Any], placed: PlannedTrial) -> dict[str, Any]:
    """Returns the whole shape of a trial as the plan placed it (accelerator, gpus, sharding)."""
    return {**workload_shape(spec, params), "accelerator": placed.accelerator, "gpus": int(placed.gpus or 0),
            "sharding": placed.sharding or "none"}


def shape_key(shape: dict[str, Any]) -> str:
    """Returns a short stable key of a shape (12 hex)."""
    return _digest(shape)


def shapes_to_probe(spec, trials, planned: Mapping[str, PlannedTrial]) -> list[tuple[dict[str, Any], Any]]:
    """Returns [(shape, representative trial)] for the distinct shapes of the plan's feasible trials
    (`planned`: trial id -> how the plan placed it), in trial order (the first trial of each shape
    represents it)."""
    seen: dict[str, tuple[dict[str, Any], Any]] = {}
    for trial in trials:
        placed = planned.get(trial.trial_id)
        if placed is None or not placed.feasible or not placed.accelerator:
            continue
        shape = trial_shape(spec, trial.params, placed)
        seen.setdefault(shape_key(shape), (shape, trial))
    return list(seen.values())


def probes_for_trials(spec, trials, probes: pl.DataFrame | None, *, hostname: str | None = None) -> pl.DataFrame | None:
    """Returns, per trial and probed placement, the newest usable probe of the trial's shape there:
    trial_id, accelerator, gpus, sharding, startup_s, tokens_per_s, memory_gib, tokens (the trial's
    token budget), basis ("probe RUN_ID YYYY-MM-DD"); None when nothing matches.

    `probes`: the `plan_probes` rows (newest first). `hostname`: for the local CPU, only probes of
    this machine count (another machine's CPU is not this one's)."""
    tokens = getattr(spec.train, "tokens_per_trial", None)
    if probes is None or probes.is_empty() or not tokens or spec.method == "inference":
        return None
    newest: dict[tuple, dict[str, Any]] = {}
    for p in probes.iter_rows(named=True):
        if hostname is not None and p["accelerator"] == "CPU" and p["hostname"] != hostname:
            continue
        try:
            shape = json.loads(p["probe_shape"]) if isinstance(p["probe_shape"], str) else p["probe_shape"]
        except ValueError:
            continue
        if not isinstance(shape, dict) or p["tokens_per_s"] is None or p["startup_s"] is None:
            continue
        workload = {k: v for k, v in shape.items() if k not in PLACEMENT_KEYS}
        key = (shape_key(workload), p["accelerator"], int(p["gpus"]), shape.get("sharding") or "none")
        newest.setdefault(key, p)  # rows come newest first
    rows = []
    for trial in trials:
        wkey = shape_key(workload_shape(spec, trial.params))
        for (k, acc, gpus, sharding), p in newest.items():
            if k == wkey:
                date = p["ended_at"].date().isoformat() if p["ended_at"] is not None else "undated"
                warm = p.get("warm_startup_s")
                startup = min(float(p["startup_s"]), float(warm)) if warm is not None else float(p["startup_s"])
                rows.append({"trial_id": trial.trial_id, "accelerator": acc, "gpus": gpus, "sharding": sharding,
                             "startup_s": startup, "tokens_per_s": float(p["tokens_per_s"]),
                             "memory_gib": p["memory_gib"], "tokens": float(tokens),
                             "basis": f"{PROBE_BASIS} {p['run_id']} {date}", "cpu_cores": p.get("cpu_cores"),
                             "step_s_p10": p.get("step_s_p10"), "step_s_p50": p.get("step_s_p50"),
                             "step_s_p90": p.get("step_s_p90"), "steps": p.get("step_times"),
                             **{c: p.get(c) for c in RL_ROLE_COLUMNS}})
    return pl.DataFrame(rows, schema=PROBED_SCHEMA) if rows else None


def _cpu_note(r: dict[str, Any], s) -> str:
    """Returns what a local probe's CPU use says about the rate the plan takes (empty elsewhere)."""
    cores = r.get("cpu_cores")
    if r["accelerator"] != "CPU" or cores is None:
        return ""
    shared = " (below 1: it shared the cores with the other probes and other work)" if cores < 0.9 else ""
    return (f", its trainer using {cores:.2f} of a core then (CPU seconds / wall){shared}: each trial is assumed to "
            f"get as much, {s.max_parallel} at once as the probes ran, the machine's other load as during the probe")


def probe_notes(probed: pl.DataFrame | None, plan_trials: list[dict[str, Any]], s) -> list[str]:
    """Returns the plan's assumptions about probes: per probe, how its steady state was extrapolated."""
    if probed is None:
        return []
    used = {r["est_basis"] for r in plan_trials if str(r.get("est_basis", "")).startswith(PROBE_BASIS + " ")}
    notes = []
    for r in probed.unique("basis", keep="first").sort("basis").iter_rows(named=True):
        n = sum(1 for t in plan_trials if t.get("est_basis") == r["basis"])
        if r["basis"] not in used:
            continue
        notes.append(
            f"{r['basis']}: {n} trial(s) of its shape ({r['accelerator']} x{r['gpus']}, {r['sharding']}) "
            f"extrapolated from its steady state: wall = provisioning {s.provisioning_s:g} s + start-up "
            f"{r['startup_s']:.1f} s (to the first training step, first step included; the least of the shape's probes, "
            f"a first run's one-time work aside) + {r['tokens']:,.0f} tokens / "
            f"{r['tokens_per_s']:,.1f} tokens/s measured from the first to the last step{_cpu_note(r, s)}; memory = "
            "the probe's peak"
            + (f" {r['memory_gib']:.3f} GiB" if r["memory_gib"] is not None else " (not measured: the estimate stays)"))
    return notes


#: A probe's rate beyond this multiple of the physical rate (the hardware's peak FLOP/s over the model's
#: FLOPs per token) is refused: 1x is a run at 100% of peak, which no training run reaches (MFU of
#: tuned stacks is 30-60%); the margin covers an estimator's FLOP count that is high by up to 3x.
PLAUSIBLE_MARGIN = 3.0


def physical_tokens_per_s(flops_per_token: float, accelerator: str, gpus: int, precision: str, *,
                          machine=None) -> float | None:
    """Returns the tokens/s `gpus` of `accelerator` ('CPU': this machine, every core at its measured matmul
    rate) could do at their peak FLOP/s for a model of `flops_per_token`, or None when unknown."""
    if not flops_per_token or not flops_per_token > 0 or not math.isfinite(flops_per_token):
        return None
    if accelerator == "CPU":
        if machine is None:
            return None
        cores = max(int(getattr(machine, "logical_cores", 0) or 0), int(machine.cores or 1))
        peak = float(machine.matmul_gflops_one_core) * 1e9 * cores
    else:
        from gpuledger.catalog import UnknownAccelerator, gpu_kinds, normalize_accelerator

        try:
            kind = gpu_kinds().get(normalize_accelerator(accelerator))
        except UnknownAccelerator:
            return None
        if kind is None:
            return None
        peak = float(kind.peak_tflops(precision)) * 1e12 * max(1, int(gpus))
    return peak / flops_per_token if peak > 0 else None


def plausible_probes(probed: pl.DataFrame | None, estimates: pl.DataFrame, precision: str, *,
                     machine=None) -> tuple[pl.DataFrame | None, list[str]]:
    """Returns (the probes of `probes_for_trials` a plan may believe, one line per probe refused): a rate
    that is not a positive finite number, or beyond `PLAUSIBLE_MARGIN` x the physical rate of its
    placement for the trial's FLOPs per token (`estimates`: trial_id, flops_total), is implausible: the
    trial keeps the model's estimate, never a free one."""
    if probed is None or probed.is_empty():
        return probed, []
    flops = {r["trial_id"]: r["flops_total"] for r in estimates.select("trial_id", "flops_total").unique(
        "trial_id", keep="first").iter_rows(named=True)}
    keep, said = [], {}
    for r in probed.iter_rows(named=True):
        tps = r["tokens_per_s"]
        where = f"{r['accelerator']} x{r['gpus']}"
        if tps is None or not math.isfinite(tps) or tps <= 0:
            said[r["basis"]] = f"{r['basis']}: {tps!r} tokens/s on {where} is not a positive rate: implausible, not used"
            keep.append(False)
            continue
        total, tokens = flops.get(r["trial_id"]), r["tokens"]
        bound = physical_tokens_per_s(total / tokens if total and tokens else 0.0, r["accelerator"], int(r["gpus"]),
                                      precision, machine=machine)
        if bound is not None and tps > PLAUSIBLE_MARGIN * bound:
            said[r["basis"]] = (
                f"{r['basis']}: {tps:,.4g} tokens/s on {where} is beyond what the hardware can do for this model "
                f"(peak FLOP/s / {total / tokens:,.4g} FLOPs per token = {bound:,.4g} tokens/s; refused above "
                f"{PLAUSIBLE_MARGIN:g}x that): implausible, not used; its trials keep the model's estimate")
            keep.append(False)
            continue
        keep.append(True)
    kept = probed.filter(pl.Series(keep))
    return (kept if kept.height else None), [f"probe refused: {line}" for line in said.values()]
